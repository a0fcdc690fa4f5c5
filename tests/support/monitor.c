/* A MONITOR stream read up to a marker; see monitor.h. */
#include "support/monitor.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "support/fixture.h"

#define MON_MAX_ARGS 512

struct hl_monitor {
    const hl_redis_server *server;
    int fd;
    char *buf;
    size_t len, cap;
};

static void fill(hl_monitor *m, int64_t deadline)
{
    if (m->cap - m->len < 4096) {
        m->cap = m->cap ? m->cap * 2 : 65536;
        m->buf = realloc(m->buf, m->cap);
        if (m->buf == NULL)
            fail_msg("out of memory for a monitor");
    }
    struct pollfd pfd = {m->fd, POLLIN, 0};
    int64_t left = deadline - hl_now_ms();
    if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
        fail_msg("the monitor of port %d went quiet before the marker",
                 hl_redis_server_port(m->server));
    ssize_t got = recv(m->fd, m->buf + m->len, m->cap - m->len - 1, 0);
    if (got <= 0)
        fail_msg("the monitor of port %d lost its connection",
                 hl_redis_server_port(m->server));
    m->len += (size_t)got;
}

/* The next line, NUL-terminated in place, its end past "\r\n" in *next;
 * NULL when the buffer holds no whole line yet. */
static char *take_line(hl_monitor *m, size_t from, size_t *next)
{
    for (size_t i = from; i + 1 < m->len; i++)
        if (m->buf[i] == '\r' && m->buf[i + 1] == '\n') {
            m->buf[i] = '\0';
            *next = i + 2;
            return m->buf + from;
        }
    return NULL;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Takes apart the quoted arguments of a MONITOR line, written the way
 * the server's sdscatrepr writes them, in place. */
static int split_args(char *p, char **argv, size_t *lens)
{
    int argc = 0;
    while (*p == ' ')
        p++;
    while (*p == '"') {
        if (argc == MON_MAX_ARGS)
            fail_msg("a monitored command with too many arguments");
        char *out = ++p, *start = out;
        while (*p != '"') {
            if (*p == '\0')
                fail_msg("an unterminated argument in a monitor line");
            if (*p != '\\') {
                *out++ = *p++;
                continue;
            }
            p++;
            switch (*p) {
            case 'n': *out++ = '\n'; p++; break;
            case 'r': *out++ = '\r'; p++; break;
            case 't': *out++ = '\t'; p++; break;
            case 'a': *out++ = '\a'; p++; break;
            case 'b': *out++ = '\b'; p++; break;
            case 'x':
                if (hexval(p[1]) < 0 || hexval(p[2]) < 0)
                    fail_msg("a bad \\x escape in a monitor line");
                *out++ = (char)(hexval(p[1]) * 16 + hexval(p[2]));
                p += 3;
                break;
            default: *out++ = *p++; break; /* \\ and \" */
            }
        }
        p++;
        lens[argc] = (size_t)(out - start);
        *out = '\0';
        argv[argc++] = start;
        while (*p == ' ')
            p++;
    }
    return argc;
}

hl_monitor *hl_monitor_open(const hl_redis_server *s)
{
    hl_monitor *m = calloc(1, sizeof *m);
    if (m == NULL)
        fail_msg("out of memory for a monitor");
    m->server = s;
    m->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (m->fd < 0)
        fail_msg("socket: %m");
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                             .sin_port = htons((uint16_t)
                                                   hl_redis_server_port(s))};
    if (connect(m->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        fail_msg("connect to port %d: %m", hl_redis_server_port(s));
    static const char cmd[] = "*1\r\n$7\r\nMONITOR\r\n";
    if (send(m->fd, cmd, sizeof cmd - 1, MSG_NOSIGNAL) !=
        (ssize_t)(sizeof cmd - 1))
        fail_msg("MONITOR could not be sent");
    int64_t deadline = hl_now_ms() + hl_widen(5000);
    size_t next = 0;
    char *line;
    while ((line = take_line(m, 0, &next)) == NULL)
        fill(m, deadline);
    if (strcmp(line, "+OK") != 0)
        fail_msg("MONITOR answered %s", line);
    memmove(m->buf, m->buf + next, m->len - next);
    m->len -= next;
    return m;
}

void hl_monitor_drain(hl_monitor *m, hl_monitor_fn *fn, void *arg)
{
    static atomic_int marks;
    char mark[64], reply[128];
    snprintf(mark, sizeof mark, "hl-monitor-mark-%d-%d", (int)getpid(),
             atomic_fetch_add(&marks, 1));
    if (hl_redis_server_cmd(m->server, reply, sizeof reply, "ECHO", mark,
                            (char *)NULL) != '$')
        fail_msg("the monitor's marker was refused: %s", reply);

    char **argv = malloc(MON_MAX_ARGS * sizeof *argv);
    size_t *lens = malloc(MON_MAX_ARGS * sizeof *lens);
    if (argv == NULL || lens == NULL)
        fail_msg("out of memory for a monitor");
    int64_t deadline = hl_now_ms() + hl_widen(10000);
    size_t from = 0, next;
    for (;;) {
        char *line = take_line(m, from, &next);
        if (line == NULL) {
            memmove(m->buf, m->buf + from, m->len - from);
            m->len -= from;
            from = 0;
            fill(m, deadline);
            continue;
        }
        from = next;
        /* "+<time> [<db> <client address or lua>] "arg" ..." */
        char *who = strchr(line, '[');
        char *args = who ? strchr(who, ']') : NULL;
        if (line[0] != '+' || args == NULL)
            fail_msg("an unexpected monitor line: %s", line);
        bool from_lua = strstr(who, " lua]") == args - 4;
        int argc = split_args(args + 1, argv, lens);
        if (argc == 2 && strcasecmp(argv[0], "ECHO") == 0 &&
            strcmp(argv[1], mark) == 0)
            break;
        if (argc > 0)
            fn(arg, from_lua, argc, argv, lens);
    }
    memmove(m->buf, m->buf + from, m->len - from);
    m->len -= from;
    free(argv);
    free(lens);
}

void hl_monitor_close(hl_monitor *m)
{
    if (m == NULL)
        return;
    close(m->fd);
    free(m->buf);
    free(m);
}
