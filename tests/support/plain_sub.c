/* A subscriber on its own connection; see plain_sub.h. */
#include "support/plain_sub.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "support/fixture.h"

#define SUB_BUF 65536

struct hl_plain_sub {
    int fd;
    bool sharded;
    size_t len;
    char buf[SUB_BUF];
};

/* One RESP line from *p, or NULL when the buffer ends before it does. */
static const char *line_end(const char *p, const char *end)
{
    for (; p + 1 < end; p++)
        if (p[0] == '\r' && p[1] == '\n')
            return p;
    return NULL;
}

/* Takes apart a push "*3 $kind $channel $payload" at the buffer's start,
 * or the "*2 $pong $payload" a PING gets while subscribed: 1 with the
 * kind and payload copied out and the push consumed, 0 when more bytes
 * are needed, -1 when the bytes are not such a push. */
static int take_push(hl_plain_sub *sub, char *kind, size_t kind_cap,
                     char *payload, size_t cap)
{
    const char *p = sub->buf, *end = sub->buf + sub->len, *e;
    long n, elements;

    if ((e = line_end(p, end)) == NULL)
        return 0;
    elements = *p == '*' ? strtol(p + 1, NULL, 10) : 0;
    if (elements != 2 && elements != 3)
        return -1;
    p = e + 2;
    for (long i = 0; i < elements; i++) {
        if ((e = line_end(p, end)) == NULL)
            return 0;
        if (*p == ':') {
            /* The subscription count of a confirmation. */
            if (i == elements - 1 && payload != NULL && cap > 0)
                snprintf(payload, cap, "%.*s", (int)(e - p - 1), p + 1);
            p = e + 2;
            continue;
        }
        if (*p != '$')
            return -1;
        n = strtol(p + 1, NULL, 10);
        p = e + 2;
        if (n < 0 || end - p < n + 2)
            return n < 0 ? -1 : 0;
        if (i == 0)
            snprintf(kind, kind_cap, "%.*s", (int)n, p);
        else if (i == elements - 1 && cap > 0)
            snprintf(payload, cap, "%.*s", (int)(n < (long)cap ? n
                                                 : (long)cap - 1), p);
        p += n + 2;
    }
    memmove(sub->buf, p, (size_t)(end - p));
    sub->len = (size_t)(end - p);
    return 1;
}

/* The next push within timeout_ms: 1, 0 on timeout, -1 on a broken
 * connection or stream. */
static int next_push(hl_plain_sub *sub, char *kind, size_t kind_cap,
                     char *payload, size_t cap, int timeout_ms)
{
    int64_t deadline = hl_now_ms() + timeout_ms;

    for (;;) {
        int r = take_push(sub, kind, kind_cap, payload, cap);
        struct pollfd pfd = { sub->fd, POLLIN, 0 };
        int64_t left = deadline - hl_now_ms();
        ssize_t got;

        if (r != 0)
            return r;
        if (left <= 0 || sub->len == sizeof sub->buf)
            return sub->len == sizeof sub->buf ? -1 : 0;
        if (poll(&pfd, 1, (int)left) <= 0)
            continue;
        got = recv(sub->fd, sub->buf + sub->len, sizeof sub->buf - sub->len,
                   0);
        if (got <= 0)
            return -1;
        sub->len += (size_t)got;
    }
}

static hl_plain_sub *sub_open(const hl_redis_server *s, const char *channel,
                              bool sharded)
{
    hl_plain_sub *sub = calloc(1, sizeof *sub);
    const char *verb = sharded ? "SSUBSCRIBE" : "SUBSCRIBE";
    struct sockaddr_in sa;
    char cmd[1024], kind[32];
    int len;

    if (sub == NULL)
        fail_msg("out of memory for a subscriber");
    sub->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sub->fd < 0)
        fail_msg("socket: %m");
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)hl_redis_server_port(s));
    if (connect(sub->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        fail_msg("connect to port %d: %m", hl_redis_server_port(s));
    sub->sharded = sharded;
    len = snprintf(cmd, sizeof cmd, "*2\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n",
                   strlen(verb), verb, strlen(channel), channel);
    if (len <= 0 || (size_t)len >= sizeof cmd ||
        send(sub->fd, cmd, (size_t)len, MSG_NOSIGNAL) != len)
        fail_msg("%s %s could not be sent", verb, channel);
    if (next_push(sub, kind, sizeof kind, NULL, 0, hl_widen(5000)) != 1 ||
        strcmp(kind, sharded ? "ssubscribe" : "subscribe") != 0)
        fail_msg("%s %s was not confirmed (%s)", verb, channel, kind);
    return sub;
}

hl_plain_sub *hl_plain_sub_open(const hl_redis_server *s, const char *channel)
{
    return sub_open(s, channel, false);
}

hl_plain_sub *hl_plain_sub_open_sharded(const hl_redis_server *s,
                                        const char *channel)
{
    return sub_open(s, channel, true);
}

bool hl_plain_sub_quiet(hl_plain_sub *sub)
{
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    char kind[32], payload[256];

    if (send(sub->fd, ping, sizeof ping - 1, MSG_NOSIGNAL) !=
        (ssize_t)(sizeof ping - 1))
        fail_msg("PING could not be sent");
    if (next_push(sub, kind, sizeof kind, payload, sizeof payload,
                  hl_widen(5000)) != 1)
        fail_msg("PING got no answer");
    if (strcmp(kind, "pong") == 0)
        return true;
    /* Whatever came first; the pong is still to come. */
    if (next_push(sub, kind, sizeof kind, NULL, 0, hl_widen(5000)) != 1)
        fail_msg("PING got no answer");
    return false;
}

bool hl_plain_sub_next(hl_plain_sub *sub, char *out, size_t cap,
                       int timeout_ms)
{
    char kind[32];

    if (cap > 0)
        out[0] = '\0';
    return next_push(sub, kind, sizeof kind, out, cap, timeout_ms) == 1 &&
           strcmp(kind, sub->sharded ? "smessage" : "message") == 0;
}

void hl_plain_sub_close(hl_plain_sub *sub)
{
    if (sub == NULL)
        return;
    close(sub->fd);
    free(sub);
}
