/* The fake RESP server of the hostile-server tests; see hostile_server.h. */
#include "support/hostile_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

/* Requests of the client are a few KiB at most (SCRIPT LOAD); a bigger
 * one means the stream is lost. */
#define HOSTILE_MAX_REQUEST (1024 * 1024)
#define HOSTILE_MAX_ARGS 256
#define HOSTILE_MAX_CONNS 64
#define HOSTILE_COUNTED 32

struct hl_hostile_conn {
    hl_hostile *server;
    int fd;
    pthread_t thread;
    int channels; /* subscribed on this connection */
    atomic_bool gone;
};

struct hl_hostile {
    int listen_fd;
    int port;
    int wake[2]; /* a byte here stops the accepting thread */
    pthread_t acceptor;
    hl_hostile_fn *fn;
    void *data;
    pthread_mutex_t lock;
    hl_hostile_conn *conns[HOSTILE_MAX_CONNS];
    int nconns;
    /* Counts per command name, first come first listed. */
    char names[HOSTILE_COUNTED][24];
    long counts[HOSTILE_COUNTED];
    int nnames;
};

/* ---- writing ------------------------------------------------------- */

bool hl_hostile_send(hl_hostile_conn *c, const void *bytes, size_t len)
{
    const char *p = bytes;
    while (len > 0) {
        ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            atomic_store(&c->gone, true);
            return false;
        }
        p += n;
        len -= (size_t)n;
    }
    return true;
}

bool hl_hostile_sendf(hl_hostile_conn *c, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf)
        return false;
    return hl_hostile_send(c, buf, (size_t)n);
}

size_t hl_hostile_send_filler(hl_hostile_conn *c, size_t n)
{
    char filler[65536];
    memset(filler, 'x', sizeof filler);
    size_t sent = 0;
    while (sent < n) {
        size_t piece = n - sent < sizeof filler ? n - sent : sizeof filler;
        if (!hl_hostile_send(c, filler, piece))
            break;
        sent += piece;
    }
    return sent;
}

static bool send_bulk(hl_hostile_conn *c, const char *s, size_t len)
{
    return hl_hostile_sendf(c, "$%zu\r\n", len) && hl_hostile_send(c, s, len) &&
           hl_hostile_send(c, "\r\n", 2);
}

/* ---- what a real server would say ------------------------------------ */

bool hl_hostile_is(const hl_hostile_req *req, const char *cmd)
{
    return req->argc > 0 && strcasecmp(req->argv[0], cmd) == 0;
}

static void answer_subscription(hl_hostile_conn *c, const hl_hostile_req *req,
                                const char *kind, int delta)
{
    for (int i = 1; i < req->argc; i++) {
        c->channels += delta;
        if (c->channels < 0)
            c->channels = 0;
        hl_hostile_sendf(c, "*3\r\n$%zu\r\n%s\r\n", strlen(kind), kind);
        send_bulk(c, req->argv[i], req->lens[i]);
        hl_hostile_sendf(c, ":%d\r\n", c->channels);
    }
}

static void answer_default(hl_hostile_conn *c, const hl_hostile_req *req)
{
    if (hl_hostile_is(req, "PING")) {
        if (c->channels > 0)
            hl_hostile_sendf(c, "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
        else
            hl_hostile_sendf(c, "+PONG\r\n");
    } else if (hl_hostile_is(req, "AUTH") || hl_hostile_is(req, "SELECT")) {
        hl_hostile_sendf(c, "+OK\r\n");
    } else if (hl_hostile_is(req, "INFO")) {
        const char *info = "# Server\r\n"
                           "run_id:0123456789abcdef0123456789abcdef01234567"
                           "\r\nuptime_in_seconds:100000\r\n";
        send_bulk(c, info, strlen(info));
    } else if (hl_hostile_is(req, "SCRIPT")) {
        const char *sha = "0000000000000000000000000000000000000000";
        send_bulk(c, sha, strlen(sha));
    } else if (hl_hostile_is(req, "SUBSCRIBE")) {
        answer_subscription(c, req, "subscribe", 1);
    } else if (hl_hostile_is(req, "UNSUBSCRIBE")) {
        answer_subscription(c, req, "unsubscribe", -1);
    } else if (hl_hostile_is(req, "PUBLISH")) {
        hl_hostile_sendf(c, ":0\r\n");
    } else {
        hl_hostile_sendf(c, "-ERR the hostile server has no answer for "
                            "'%.32s'\r\n",
                         req->argc > 0 ? req->argv[0] : "");
    }
}

static void count(hl_hostile *h, const hl_hostile_req *req)
{
    if (req->argc == 0)
        return;
    pthread_mutex_lock(&h->lock);
    int i = 0;
    while (i < h->nnames && strcasecmp(h->names[i], req->argv[0]) != 0)
        i++;
    if (i == h->nnames && h->nnames < HOSTILE_COUNTED) {
        snprintf(h->names[i], sizeof h->names[i], "%s", req->argv[0]);
        h->nnames++;
    }
    if (i < h->nnames)
        h->counts[i]++;
    pthread_mutex_unlock(&h->lock);
}

/* ---- reading requests ------------------------------------------------ */

/* A decimal after the type byte at p, up to CRLF within end; the byte
 * after the CRLF goes to *next.  0 when incomplete, -1 when malformed. */
static int parse_header(const char *p, const char *end, char type, long *out,
                        const char **next)
{
    if (p >= end)
        return 0;
    if (*p != type)
        return -1;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (nl == NULL)
        return end - p > 32 ? -1 : 0;
    char *stop;
    long v = strtol(p + 1, &stop, 10);
    if (stop != nl - 1 || *stop != '\r' || v < 0)
        return -1;
    *out = v;
    *next = nl + 1;
    return 1;
}

/* One request from buf[0..len): 1 with *used and req filled, 0 when more
 * bytes are needed, -1 when the stream makes no sense. */
static int parse_request(const char *buf, size_t len, size_t *used,
                         hl_hostile_req *req)
{
    const char *p = buf, *end = buf + len;
    long argc;
    int r = parse_header(p, end, '*', &argc, &p);
    if (r <= 0)
        return r;
    if (argc > HOSTILE_MAX_ARGS)
        return -1;
    req->argc = 0;
    for (long i = 0; i < argc; i++) {
        long n;
        r = parse_header(p, end, '$', &n, &p);
        if (r <= 0)
            return r;
        if ((size_t)(end - p) < (size_t)n + 2)
            return 0;
        req->argv[i] = malloc((size_t)n + 1);
        if (req->argv[i] == NULL)
            return -1;
        memcpy(req->argv[i], p, (size_t)n);
        req->argv[i][n] = '\0';
        req->lens[i] = (size_t)n;
        req->argc++;
        p += n + 2;
    }
    *used = (size_t)(p - buf);
    return 1;
}

static void req_clear(hl_hostile_req *req)
{
    for (int i = 0; i < req->argc; i++)
        free(req->argv[i]);
    req->argc = 0;
}

static void *serve(void *arg)
{
    hl_hostile_conn *c = arg;
    hl_hostile *h = c->server;
    char *buf = malloc(HOSTILE_MAX_REQUEST);
    char *argv[HOSTILE_MAX_ARGS];
    size_t lens[HOSTILE_MAX_ARGS];
    hl_hostile_req req = {0, argv, lens};
    size_t have = 0;
    while (buf != NULL && !atomic_load(&c->gone)) {
        ssize_t n = recv(c->fd, buf + have, HOSTILE_MAX_REQUEST - have, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
        size_t used;
        int r;
        while ((r = parse_request(buf, have, &used, &req)) == 1) {
            count(h, &req);
            if (h->fn == NULL || !h->fn(c, &req, h->data))
                answer_default(c, &req);
            req_clear(&req);
            memmove(buf, buf + used, have - used);
            have -= used;
        }
        req_clear(&req);
        if (r < 0 || have == HOSTILE_MAX_REQUEST)
            break;
    }
    free(buf);
    atomic_store(&c->gone, true);
    shutdown(c->fd, SHUT_RDWR);
    return NULL;
}

/* ---- accepting ------------------------------------------------------- */

static void *accept_loop(void *arg)
{
    hl_hostile *h = arg;
    for (;;) {
        struct pollfd p[2] = {{h->listen_fd, POLLIN, 0}, {h->wake[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        if (p[1].revents != 0)
            return NULL;
        int fd = accept(h->listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        hl_hostile_conn *c = calloc(1, sizeof *c);
        pthread_mutex_lock(&h->lock);
        bool room = c != NULL && h->nconns < HOSTILE_MAX_CONNS;
        if (room) {
            c->server = h;
            c->fd = fd;
            atomic_init(&c->gone, false);
            if (pthread_create(&c->thread, NULL, serve, c) == 0)
                h->conns[h->nconns++] = c;
            else
                room = false;
        }
        pthread_mutex_unlock(&h->lock);
        if (!room) {
            free(c);
            close(fd);
        }
    }
}

hl_hostile *hl_hostile_start(hl_hostile_fn *fn, void *data)
{
    hl_hostile *h = calloc(1, sizeof *h);
    if (h == NULL)
        fail_msg("hostile server: out of memory");
    h->fn = fn;
    h->data = data;
    pthread_mutex_init(&h->lock, NULL);
    h->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0; /* the kernel picks a free port */
    socklen_t alen = sizeof a;
    if (h->listen_fd < 0 ||
        bind(h->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(h->listen_fd, 16) != 0 ||
        getsockname(h->listen_fd, (struct sockaddr *)&a, &alen) != 0 ||
        pipe(h->wake) != 0)
        fail_msg("hostile server: cannot listen: %s", strerror(errno));
    h->port = ntohs(a.sin_port);
    if (pthread_create(&h->acceptor, NULL, accept_loop, h) != 0)
        fail_msg("hostile server: no thread");
    return h;
}

void hl_hostile_stop(hl_hostile *h)
{
    if (h == NULL)
        return;
    char byte = 0;
    while (write(h->wake[1], &byte, 1) < 0 && errno == EINTR)
        ;
    pthread_join(h->acceptor, NULL);
    /* Unblocks every connection thread in its recv or send. */
    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < h->nconns; i++)
        shutdown(h->conns[i]->fd, SHUT_RDWR);
    pthread_mutex_unlock(&h->lock);
    for (int i = 0; i < h->nconns; i++) {
        pthread_join(h->conns[i]->thread, NULL);
        close(h->conns[i]->fd);
        free(h->conns[i]);
    }
    close(h->listen_fd);
    close(h->wake[0]);
    close(h->wake[1]);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

int hl_hostile_port(const hl_hostile *h) { return h->port; }

long hl_hostile_count(hl_hostile *h, const char *cmd)
{
    long n = 0;
    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < h->nnames; i++)
        if (strcasecmp(h->names[i], cmd) == 0)
            n = h->counts[i];
    pthread_mutex_unlock(&h->lock);
    return n;
}

long hl_hostile_connections(hl_hostile *h)
{
    pthread_mutex_lock(&h->lock);
    long n = h->nconns;
    pthread_mutex_unlock(&h->lock);
    return n;
}

bool hl_hostile_subscribed(const hl_hostile_conn *c)
{
    return c->channels > 0;
}

hl_hostile *hl_hostile_of(const hl_hostile_conn *c) { return c->server; }
