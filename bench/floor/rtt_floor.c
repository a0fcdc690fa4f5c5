/* The round-trip floor of a Redis server on this machine: a client that
 * never sleeps (a plain socket, polled without blocking) sends one
 * request, waits for its answer, and repeats.  No lock library can answer
 * an acquire faster than this, so it is what an acquire latency target
 * must be held against.
 *
 *   hilock-rtt-floor PORT [COUNT]
 * prints the p10/p50/p99 round trip of PING and of EVALSHA of a one-call
 * script, in microseconds, as one JSON line. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* Send cmd and spin until the first bytes of the answer arrive (every
 * answer used here fits in one segment).  Returns the reply's first byte,
 * or -1. */
static int round_trip(int fd, const char *cmd, size_t len, char *buf,
                      size_t cap)
{
    if (write(fd, cmd, len) != (ssize_t)len)
        return -1;
    for (;;) {
        ssize_t r = recv(fd, buf, cap, MSG_DONTWAIT);
        if (r > 0)
            return buf[0];
        if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            return -1;
    }
}

static int measure(int fd, const char *what, const char *cmd, int count)
{
    long long *t = malloc((size_t)count * sizeof *t);
    char buf[512];
    if (t == NULL)
        return -1;
    for (int i = 0; i < count; i++) {
        long long t0 = now_ns();
        int first = round_trip(fd, cmd, strlen(cmd), buf, sizeof buf);
        if (first < 0 || first == '-') {
            fprintf(stderr, "hilock-rtt-floor: %s failed\n", what);
            free(t);
            return -1;
        }
        t[i] = now_ns() - t0;
    }
    qsort(t, (size_t)count, sizeof *t, by_value);
    printf("{\"probe\":\"%s\",\"n\":%d,\"p10_us\":%.1f,\"p50_us\":%.1f,"
           "\"p99_us\":%.1f}\n",
           what, count, t[count / 10] / 1000.0, t[count / 2] / 1000.0,
           t[(long long)count * 99 / 100] / 1000.0);
    free(t);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: hilock-rtt-floor PORT [COUNT]\n");
        return 64;
    }
    int port = atoi(argv[1]);
    int count = argc > 2 ? atoi(argv[2]) : 20000;
    if (port <= 0 || port > 65535 || count < 10) {
        fprintf(stderr, "hilock-rtt-floor: bad port or count\n");
        return 64;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("hilock-rtt-floor: connect");
        return 69;
    }
    /* EVAL once to cache the script, then EVALSHA of its SHA1. */
    static const char load[] =
        "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$36\r\n"
        "return redis.call('exists', KEYS[1])\r\n";
    char buf[512];
    if (round_trip(fd, load, sizeof load - 1, buf, sizeof buf) != '$')
        return 69;
    char *sha = strstr(buf, "\r\n");
    if (sha == NULL || strlen(sha) < 42)
        return 69;
    char evalsha[128];
    snprintf(evalsha, sizeof evalsha,
             "*4\r\n$7\r\nEVALSHA\r\n$40\r\n%.40s\r\n$1\r\n1\r\n$1\r\nk\r\n",
             sha + 2);
    if (measure(fd, "PING", "*1\r\n$4\r\nPING\r\n", count) != 0 ||
        measure(fd, "EVALSHA", evalsha, count) != 0)
        return 70;
    close(fd);
    return 0;
}
