#include "core/runtime/sentinel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hilock/error.h"
#include "core/base/alloc.h"
#include "core/config/hostlist.h"
#include "core/config/option_values.h"
#include "core/runtime/client_state.h"
#include "core/transport/conn.h"
#include "core/transport/pubsub.h"
#include "core/transport/reply.h"

#define HL_SENTINELS_MAX 16
#define SWITCH_CHANNEL "+switch-master"

typedef struct sentinel_addr {
    char host[256];
    int port;
} sentinel_addr;

struct hl_sentinel {
    hilock_client *client;
    hl_sentinel_fn *fn;
    /* The sentinels' options: the client's, with the address of the
     * sentinel in use and the sentinels' own credentials.  Both
     * connections read the address at each attempt. */
    hilock_options *opts;
    hl_conn *conn;
    hl_pubsub *ps;
    hl_sub sub;
    sentinel_addr list[HL_SENTINELS_MAX];
    int count;
    int at;        /* the sentinel in use */
    int failed;    /* sentinels that failed in this round */
    int unknown;   /* of them, those that knew no such master */
    int last_status;
    bool asking;   /* a question is in flight */
    bool again;    /* and another was asked for meanwhile */
    bool leaving;  /* dropping the connection ourselves */
    bool closed;
    char why[320]; /* the last failure */
    unsigned answers;
    unsigned switches;
};

static void ask(hl_sentinel *s);

static void use_sentinel(hl_sentinel *s, int i)
{
    s->at = i;
    /* Neither setter can fail on a host that fitted the list. */
    hilock_options_set_host(s->opts, s->list[i].host);
    hilock_options_set_port(s->opts, s->list[i].port);
}

/* The sentinel in use failed (status, why): go on to the next, and when
 * a whole round failed, tell the client. */
static void sentinel_failed(hl_sentinel *s, int status, bool unknown,
                            const char *why)
{
    const sentinel_addr *a = &s->list[s->at];
    snprintf(s->why, sizeof s->why, "sentinel %.80s:%d: %.200s", a->host,
             a->port, why && why[0] ? why : hilock_strerror(status));
    s->last_status = status;
    s->failed++;
    s->unknown += unknown;
    use_sentinel(s, (s->at + 1) % s->count);
    if (s->failed < s->count)
        return;
    char detail[480];
    int code = s->unknown == s->failed ? HILOCK_EINVAL : s->last_status;
    if (code == HILOCK_EINVAL)
        snprintf(detail, sizeof detail,
                 "no sentinel (of %d) knows a master named '%.200s'", s->count,
                 s->client->opts->sentinel_master);
    else
        snprintf(detail, sizeof detail,
                 "no sentinel (of %d) named the master; the last, %s",
                 s->count, s->why);
    s->failed = s->unknown = 0;
    s->fn(s->client, code, detail, NULL, 0);
}

/* Leave a sentinel that answered but could not help: reconnect to the
 * next one, whose question goes out once it is up. */
static void leave_sentinel(hl_sentinel *s, int status, bool unknown,
                           const char *why)
{
    sentinel_failed(s, status, unknown, why);
    s->leaving = true;
    hl_conn_reset(s->conn, HILOCK_EIO, "moving to the next sentinel");
    s->leaving = false;
}

/* Whether h[0..len) may be a host, and fits cap bytes with its NUL;
 * why (whycap bytes) says what is wrong when not.  A NUL would cut the
 * host short, a space or control byte cannot be in a name or an address. */
static bool host_ok(const char *h, size_t len, size_t cap, char *why,
                    size_t whycap)
{
    char shown[96];
    if (len == 0 || len >= cap) {
        snprintf(why, whycap, len ? "a host of %zu bytes" : "an empty host",
                 len);
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)h[i];
        if (c <= ' ' || c == 0x7f) {
            snprintf(why, whycap, "host '%s', which holds %s",
                     hl_reply_quote(shown, sizeof shown, h, len),
                     c == 0 ? "a NUL byte" : "a space or control byte");
            return false;
        }
    }
    return true;
}

/* The master's address from a sentinel's answer, which is exactly two
 * bulk strings: a host and a port of digits only, 1..65535.  Anything
 * looser would cut a host at a NUL, or let " +6379x" pass for 6379.
 * False with why. */
static bool read_address(const hilock_reply *r, char *host, size_t cap,
                         int *port, char *why, size_t whycap)
{
    char shown[96];
    if (r->type != HILOCK_REPLY_ARRAY || r->elements != 2) {
        if (r->type == HILOCK_REPLY_ARRAY)
            snprintf(why, whycap, "an array of %zu", r->elements);
        else
            snprintf(why, whycap, "%s", hl_reply_kind(r));
        return false;
    }
    const hilock_reply *h = r->element[0], *p = r->element[1];
    if (h->type != HILOCK_REPLY_STRING || p->type != HILOCK_REPLY_STRING) {
        snprintf(why, whycap, "%s and %s, not two bulk strings",
                 hl_reply_kind(h), hl_reply_kind(p));
        return false;
    }
    if (!host_ok(h->str, h->len, cap, why, whycap))
        return false;
    if (!hl_port_parse(p->str, p->len, port)) {
        snprintf(why, whycap, "port '%s', not a number in 1..65535",
                 hl_reply_quote(shown, sizeof shown, p->str, p->len));
        return false;
    }
    memcpy(host, h->str, h->len);
    host[h->len] = '\0';
    return true;
}

static void on_answer(void *data, int status, hilock_reply *reply)
{
    hl_sentinel *s = data;
    s->asking = false;
    if (s->closed || status == HILOCK_ECLOSED || status == HILOCK_ENOMEM) {
        hilock_reply_free(reply);
        return;
    }
    if (status == HILOCK_EIO || status == HILOCK_ETIMEDOUT) {
        /* Lost with its connection, whose fall counts for the sentinel:
         * ask the next one. */
        hilock_reply_free(reply);
        ask(s);
        return;
    }
    char why[320], text[200];
    char host[256];
    int port = 0;
    int code = HILOCK_EPROTO;
    bool ok = false, unknown = false;
    if (status == HILOCK_EREDIS) {
        hl_reply_quote(text, sizeof text, reply->str, reply->len);
        snprintf(why, sizeof why, "%s", text);
        code = hl_reply_is_error_prefix(reply, "NOPERM") ? HILOCK_EPERM
                                                         : HILOCK_EREDIS;
    } else if (status != HILOCK_OK) {
        /* A reply beyond the bounds (HILOCK_ETOOBIG) is no answer at all:
         * its detail says which bound. */
        snprintf(why, sizeof why,
                 "answered get-master-addr-by-name with %s",
                 hilock_last_error());
    } else if (reply->type == HILOCK_REPLY_NIL) {
        snprintf(why, sizeof why, "knows no master of that name");
        code = HILOCK_EINVAL;
        unknown = true;
    } else if (read_address(reply, host, sizeof host, &port, text,
                            sizeof text)) {
        ok = true;
    } else {
        snprintf(why, sizeof why,
                 "answered get-master-addr-by-name with %s instead of a "
                 "host and a port",
                 text);
    }
    hilock_reply_free(reply);
    if (!ok) {
        leave_sentinel(s, code, unknown, why);
        ask(s);
        return;
    }
    s->failed = s->unknown = 0;
    s->answers++;
    s->fn(s->client, HILOCK_OK, NULL, host, port);
    if (s->again && !s->closed) {
        s->again = false;
        ask(s);
    }
}

static void ask(hl_sentinel *s)
{
    if (s->closed)
        return;
    if (s->asking) {
        s->again = true;
        return;
    }
    const char *name = s->client->opts->sentinel_master;
    const char *argv[] = {"SENTINEL", "get-master-addr-by-name", name};
    size_t lens[] = {8, 23, strlen(name)};
    s->again = false;
    if (hl_conn_command(s->conn, 3, argv, lens, on_answer, s) == HILOCK_OK)
        s->asking = true;
}

static void on_conn_event(hl_conn *conn, hl_conn_event ev, int status,
                          const char *detail, hilock_reply *reply, void *data)
{
    (void)conn;
    hilock_reply_free(reply);
    hl_sentinel *s = data;
    if (ev == HL_CONN_DOWN && !s->leaving && !s->closed)
        sentinel_failed(s, status, false, detail);
}

/* "<name> <old ip> <old port> <new ip> <new port>", one space between
 * words.  The new address is read as strictly as an answer; an
 * announcement for our master that does not hold one still says the
 * master moved, so the sentinels are asked where to. */
static void on_switch(hl_sub *sub, hl_sub_event ev, const char *msg,
                      size_t len)
{
    hl_sentinel *s = sub->data;
    if (ev == HL_SUB_READY) {
        /* A switch may have passed while nobody listened. */
        ask(s);
        return;
    }
    if (ev != HL_SUB_MESSAGE)
        return;
    const char *word[6];
    size_t wlen[6];
    int n = 0;
    for (const char *p = msg, *end = msg + len; n < 6; n++) {
        const char *space = memchr(p, ' ', (size_t)(end - p));
        word[n] = p;
        wlen[n] = (size_t)((space ? space : end) - p);
        if (space == NULL) {
            n++;
            break;
        }
        p = space + 1;
    }
    const char *name = s->client->opts->sentinel_master;
    if (n < 1 || wlen[0] != strlen(name) || memcmp(word[0], name, wlen[0]))
        return;
    char host[256], why[160];
    int port;
    if (n != 5 || !host_ok(word[3], wlen[3], sizeof host, why, sizeof why) ||
        !hl_port_parse(word[4], wlen[4], &port)) {
        ask(s);
        return;
    }
    memcpy(host, word[3], wlen[3]);
    host[wlen[3]] = '\0';
    s->switches++;
    s->fn(s->client, HILOCK_OK, NULL, host, port);
}

static int read_list(hl_sentinel *s, const hilock_options *o)
{
    snprintf(s->list[0].host, sizeof s->list[0].host, "%s", o->host);
    s->list[0].port = o->port;
    s->count = 1;
    const char *cursor = o->seeds;
    char host[256];
    int port, got;
    while (s->count < HL_SENTINELS_MAX &&
           (got = hl_hostlist_next(&cursor, host, sizeof host, &port)) >= 0)
        if (got == 1) {
            memcpy(s->list[s->count].host, host, sizeof host);
            s->list[s->count++].port = port;
        }
    return 0;
}

hl_sentinel *hl_sentinel_create(hilock_client *client, SSL_CTX *ssl_ctx,
                                hl_sentinel_fn *fn)
{
    hl_sentinel *s = hl_calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->client = client;
    s->fn = fn;
    if (hilock_options_copy(&s->opts, client->opts) != HILOCK_OK ||
        read_list(s, client->opts) != 0 ||
        hilock_options_set_user(s->opts, NULL) != HILOCK_OK ||
        hilock_options_set_password(s->opts, NULL) != HILOCK_OK ||
        hilock_options_set_user(s->opts, client->opts->sentinel_user) !=
            HILOCK_OK ||
        hilock_options_set_password(s->opts,
                                    client->opts->sentinel_password) !=
            HILOCK_OK ||
        hilock_options_set_db(s->opts, 0) != HILOCK_OK)
        goto fail;
    use_sentinel(s, 0);
    hl_conn_config cfg = {.loop = client->loop,
                          .opts = s->opts,
                          .ssl_ctx = ssl_ctx,
                          .on_event = on_conn_event,
                          .data = s};
    s->conn = hl_conn_create(&cfg);
    hl_pubsub_config pcfg = {
        .loop = client->loop, .opts = s->opts, .ssl_ctx = ssl_ctx};
    s->ps = s->conn ? hl_pubsub_create(&pcfg) : NULL;
    if (s->ps == NULL ||
        hl_pubsub_subscribe(s->ps, &s->sub, SWITCH_CHANNEL,
                            strlen(SWITCH_CHANNEL), on_switch, s) < 0)
        goto fail;
    ask(s);
    return s;
fail:
    hl_sentinel_free(s);
    return NULL;
}

void hl_sentinel_ask(hl_sentinel *s)
{
    if (s != NULL)
        ask(s);
}

void hl_sentinel_free(hl_sentinel *s)
{
    if (s == NULL)
        return;
    s->closed = true;
    hl_pubsub_unsubscribe(&s->sub);
    hl_pubsub_free(s->ps);
    hl_conn_free(s->conn);
    hilock_options_free(s->opts);
    hl_free(s);
}

unsigned hl_sentinel_answers(const hl_sentinel *s) { return s->answers; }

unsigned hl_sentinel_switches(const hl_sentinel *s) { return s->switches; }
