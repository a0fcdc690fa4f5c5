#include "core/runtime/sentinel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hilock/error.h"
#include "core/base/alloc.h"
#include "core/base/monotime.h"
#include "core/config/hostlist.h"
#include "core/config/option_values.h"
#include "core/loop/io.h"
#include "core/runtime/client_state.h"
#include "core/transport/conn.h"
#include "core/transport/pubsub.h"
#include "core/transport/reply.h"

#define SWITCH_CHANNEL "+switch-master"

typedef struct sentinel_addr {
    char host[256];
    int port;
} sentinel_addr;

/* One sentinel's part in a round: a connection of its own, made for the
 * round and closed when it ends, with options of its own (the
 * sentinels', with its address). */
typedef struct probe {
    hl_sentinel *s;
    int index;
    hilock_options *opts;
    hl_conn *conn;
    bool done; /* answered or failed in this round */
    bool named; /* it named at, and the round heard it out */
    sentinel_addr at;
    /* A vouching round: what the sentinel's flags for the master say
     * against vouching for it (NULL: nothing). */
    const char *doubt;
} probe;

struct hl_sentinel {
    hilock_client *client;
    hl_sentinel_fn *fn;
    SSL_CTX *ssl_ctx;
    /* The sentinels' options: the client's, with the sentinels' own
     * credentials, db 0, and the address of the sentinel that answered
     * last, which the pub/sub connection reads at each attempt. */
    hilock_options *opts;
    hl_pubsub *ps; /* made once a sentinel has answered */
    hl_sub sub;
    sentinel_addr list[HILOCK_MAX_SENTINELS];
    int count;
    probe probes[HILOCK_MAX_SENTINELS]; /* the round's, or the last's */
    bool asking;  /* a round is in flight */
    bool again;   /* and another was asked for meanwhile */
    /* A vouching round hears every sentinel out (hl_sentinel_vouch);
     * want_vouch makes the next round one. */
    bool vouching;
    bool want_vouch;
    int left;     /* probes of the round not done */
    int unknown;  /* probes whose sentinel knew no such master */
    int status;   /* the last failure that was not an unknown master */
    char why[320];
    hl_timer deadline; /* the round's: the connect timeout */
    /* The next round: at once when asked, after a backoff that grows
     * with each round that failed in a row. */
    hl_timer next;
    hl_timer watch; /* looks for a master that stopped answering */
    int failed_rounds;
    hl_monotime nobody_at; /* the last round vouched for nobody; or 0 */
    hl_monotime begun;     /* when the last round began */
    int calling; /* inside fn: a free waits for the return */
    bool free_on_return;
    bool closed;
    unsigned answers;
    unsigned switches;
    unsigned rounds;
};

static void release(hl_sentinel *s)
{
    for (int i = 0; i < s->count; i++) {
        hl_conn_free(s->probes[i].conn);
        hilock_options_free(s->probes[i].opts);
    }
    hilock_options_free(s->opts);
    hl_free(s);
}

/* Report to the client.  fn may close the client, and so free s: false
 * when s is gone or closed, and the caller must leave it be. */
static bool tell(hl_sentinel *s, int status, const char *detail,
                 const char *host, int port, bool vouched)
{
    s->calling++;
    s->fn(s->client, status, detail, host, port, vouched);
    if (--s->calling == 0 && s->free_on_return) {
        release(s);
        return false;
    }
    return !s->closed;
}

/* ---- answers ------------------------------------------------------------- */

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

/* ---- rounds ----------------------------------------------------------------
 * A round asks every sentinel at once, each over a connection of its own,
 * and ends at the first answer that leaves the client where it is (the
 * master it follows), when a majority of the sentinels named one master
 * before the client follows any, when every sentinel has answered or
 * failed, or at the connect timeout, whichever comes first: however many
 * sentinels there are, and however each fails (refused, silent, an
 * error, nonsense), a round takes at most the connect timeout.  An answer
 * that names another master does not end the round: a sentinel that
 * lags, or is cut off with the old master, still names the master being
 * replaced, so a move needs a majority of the sentinels naming the new
 * master and none naming another.  The first master is the one a
 * majority names, whatever a lagging sentinel says; short of a majority
 * (the others down or silent), the one every sentinel that answered
 * names, and none when they disagree.  Rounds that fail in a row come
 * further and further apart, so that a sentinel answering badly at once
 * is not asked at the pace of a reconnect. */

static void on_switch(hl_sub *sub, hl_sub_event ev, const char *msg,
                      size_t len);

static void stop_probes(hl_sentinel *s)
{
    for (int i = 0; i < s->count; i++) {
        probe *p = &s->probes[i];
        p->done = true;
        if (p->conn)
            hl_conn_close(p->conn, HILOCK_ECLOSED, "the round is over");
    }
}

static void round_over(hl_sentinel *s)
{
    s->asking = false;
    s->rounds++;
    hl_timer_stop(&s->deadline);
    stop_probes(s);
}

/* The pub/sub connection follows the sentinel that answered, from its
 * next attempt on; it is made at the first answer. */
static void follow(hl_sentinel *s, int i)
{
    /* Neither setter can fail on a host that fitted the list. */
    hilock_options_set_host(s->opts, s->list[i].host);
    hilock_options_set_port(s->opts, s->list[i].port);
    if (s->ps != NULL)
        return;
    hl_pubsub_config cfg = {.loop = s->client->loop,
                            .opts = s->opts,
                            .ssl_ctx = s->ssl_ctx};
    s->ps = hl_pubsub_create(&cfg);
    /* Out of memory: no announcements, and the next answer tries again;
     * the questions asked when a master connection falls still work. */
    if (s->ps != NULL &&
        hl_pubsub_subscribe(s->ps, &s->sub, SWITCH_CHANNEL,
                            strlen(SWITCH_CHANNEL), on_switch, s) < 0) {
        hl_pubsub_free(s->ps);
        s->ps = NULL;
    }
}

/* Start the next round from the loop: at once, or HL_SENTINEL_REASK_MS
 * after a round that vouched for nobody. */
static void arm_next(hl_sentinel *s)
{
    hl_monotime wait = 0;
    if (s->nobody_at != 0)
        wait = s->nobody_at + HL_MS(HL_SENTINEL_REASK_MS) - hl_monotime_now();
    hl_timer_arm(&s->next, wait > 0 ? wait : 0);
}

static void round_succeeded(hl_sentinel *s, int index, const char *host,
                            int port, bool vouched)
{
    round_over(s);
    s->failed_rounds = 0;
    s->nobody_at = 0;
    s->answers++;
    follow(s, index);
    if (!tell(s, HILOCK_OK, NULL, host, port, vouched))
        return;
    /* Asked during the round: the answer may predate what made someone
     * ask. */
    if (s->again) {
        s->again = false;
        arm_next(s);
    }
}

static void round_failed(hl_sentinel *s)
{
    round_over(s);
    s->again = false;
    int code = s->unknown == s->count ? HILOCK_EINVAL : s->status;
    char detail[480];
    if (code == HILOCK_EINVAL)
        snprintf(detail, sizeof detail,
                 "no sentinel (of %d) knows a master named '%.200s'", s->count,
                 s->client->opts->sentinel_master);
    else
        snprintf(detail, sizeof detail,
                 "no sentinel (of %d) named the master; the last, %s",
                 s->count, s->why);
    /* Jitter needs spread, not secrecy: the clock's low digits do. */
    double unit = (double)(hl_monotime_now() % 1000) / 1000.0;
    hl_monotime wait = hl_backoff_delay(
        HL_MS(s->opts->reconnect_min_ms), HL_MS(s->opts->reconnect_max_ms),
        s->failed_rounds, unit);
    if (s->failed_rounds < 30)
        s->failed_rounds++;
    hl_timer_arm(&s->next, wait);
    tell(s, code, detail, NULL, 0, false);
}

/* Whether the client follows a master, and it is at. */
static bool follows(const hl_sentinel *s, const sentinel_addr *at)
{
    const hilock_client *c = s->client;
    return c->master_known && c->opts->port == at->port &&
           strcmp(c->opts->host, at->host) == 0;
}

static bool same_addr(const sentinel_addr *a, const sentinel_addr *b)
{
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* The round heard enough and vouches for no master (detail says why):
 * the client stays where it is.  Not a failed round, so no backoff: the
 * sentinels may agree a moment later, and whoever asks next finds out,
 * HL_SENTINEL_REASK_MS from now at the soonest.  Its last act, like
 * round_failed's. */
static void vouch_for_nobody(hl_sentinel *s, const char *detail)
{
    round_over(s);
    s->nobody_at = hl_monotime_now();
    if (s->again) {
        s->again = false;
        arm_next(s);
    }
    tell(s, HILOCK_EIO, detail, NULL, 0, false);
}

static void disagreement(hl_sentinel *s, const probe *a, const probe *b)
{
    char detail[480];
    snprintf(detail, sizeof detail,
             "the sentinels name different masters (%.80s:%d says "
             "%.80s:%d, %.80s:%d says %.80s:%d): a failover is under way",
             s->list[a->index].host, s->list[a->index].port, a->at.host,
             a->at.port, s->list[b->index].host, s->list[b->index].port,
             b->at.host, b->at.port);
    vouch_for_nobody(s, detail);
}

static void doubted(hl_sentinel *s, const probe *p)
{
    char detail[480];
    snprintf(detail, sizeof detail, "sentinel %.80s:%d names %.80s:%d but %s",
             s->list[p->index].host, s->list[p->index].port, p->at.host,
             p->at.port, p->doubt);
    vouch_for_nobody(s, detail);
}

static void too_few(hl_sentinel *s, const probe *p, int named)
{
    char detail[480];
    snprintf(detail, sizeof detail,
             "%d of the %d sentinels name %.80s:%d, not a majority, and "
             "the client follows %.80s:%d: a sentinel that has not heard "
             "of a failover names the master being replaced",
             named, s->count, p->at.host, p->at.port, s->client->opts->host,
             s->client->opts->port);
    vouch_for_nobody(s, detail);
}

/* The round heard every sentinel it could, and none ended it early.
 * When they all name one master, the round vouches for it when a
 * majority of the sentinels did (and, in a vouching round, none of them
 * doubts it): the client moves there, or keeps it with the sentinels'
 * word.  A master other than the one the client follows is never taken
 * without that word.  When they name different masters, a failover is
 * under way, and the round vouches for none.  Its last act, like
 * round_failed's. */
static void heard(hl_sentinel *s)
{
    const probe *first = NULL, *other = NULL, *doubter = NULL;
    int named = 0;
    for (int i = 0; i < s->count; i++) {
        const probe *p = &s->probes[i];
        if (!p->named)
            continue;
        named++;
        if (first == NULL)
            first = p;
        else if (other == NULL && !same_addr(&p->at, &first->at))
            other = p;
        if (doubter == NULL && p->doubt != NULL)
            doubter = p;
    }
    if (first == NULL) {
        round_failed(s);
        return;
    }
    if (other != NULL) {
        disagreement(s, first, other);
        return;
    }
    if (doubter != NULL) {
        doubted(s, doubter);
        return;
    }
    bool vouched = named >= s->count / 2 + 1;
    if (!vouched && s->client->master_known && !follows(s, &first->at)) {
        too_few(s, first, named);
        return;
    }
    sentinel_addr at = first->at;
    round_succeeded(s, first->index, at.host, at.port, vouched);
}

/* Every probe of the round is done. */
static void round_ended(hl_sentinel *s)
{
    heard(s);
}

/* A sentinel could not help (status, why).  The round fails with the
 * last of them, unless every sentinel knew no such master.  True when
 * that was the last sentinel of the round, which the caller then ends
 * with round_ended, its last act: the client may be gone after it. */
static bool note_failure(probe *p, int status, bool unknown, const char *why)
{
    hl_sentinel *s = p->s;
    p->done = true;
    if (p->conn)
        hl_conn_close(p->conn, HILOCK_ECLOSED, "the sentinel failed");
    if (unknown) {
        s->unknown++;
    } else {
        const sentinel_addr *a = &s->list[p->index];
        snprintf(s->why, sizeof s->why, "sentinel %.80s:%d: %.200s",
                 a->host, a->port,
                 why && why[0] ? why : hilock_strerror(status));
        s->status = status;
    }
    return --s->left == 0;
}

static void probe_failed(probe *p, int status, bool unknown, const char *why)
{
    if (note_failure(p, status, unknown, why))
        round_ended(p->s);
}

/* The probe's sentinel is done with the round, which ends with the last. */
static void probe_done(probe *p)
{
    p->done = true;
    hl_conn_close(p->conn, HILOCK_ECLOSED, "the sentinel answered");
    if (--p->s->left == 0)
        round_ended(p->s);
}

/* How many sentinels of the round named at so far. */
static int naming(const hl_sentinel *s, const sentinel_addr *at)
{
    int n = 0;
    for (int i = 0; i < s->count; i++)
        n += s->probes[i].named && same_addr(&s->probes[i].at, at);
    return n;
}

/* p's sentinel named host:port.  An answer that keeps the client where
 * it is ends a plain round; one that would move it waits for the rest,
 * and so does every answer of a vouching round, whose probe is done once
 * the sentinel's flags for the master have come too (on_flags). */
static void take_name(probe *p, const char *host, int port)
{
    hl_sentinel *s = p->s;
    snprintf(p->at.host, sizeof p->at.host, "%s", host);
    p->at.port = port;
    if (s->vouching)
        return;
    if (follows(s, &p->at)) {
        round_succeeded(s, p->index, host, port, false);
        return;
    }
    p->named = true;
    if (!s->client->master_known &&
        naming(s, &p->at) >= s->count / 2 + 1) {
        round_succeeded(s, p->index, host, port, true);
        return;
    }
    probe_done(p);
}

/* Why a master's flags forbid vouching for it, or NULL.  A sentinel that
 * is failing the master over has it named until the promoted replica
 * takes over, and one that holds it down is about to. */
static const char *flags_doubt(const char *flags, size_t len)
{
    static const struct {
        const char *flag;
        const char *why;
    } doubts[] = {
        {"failover_in_progress", "is failing it over"},
        {"o_down", "holds it down (o_down)"},
        {"s_down", "holds it down (s_down)"},
    };
    for (const char *p = flags, *end = flags + len; p < end;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t n = (size_t)((comma ? comma : end) - p);
        for (size_t i = 0; i < sizeof doubts / sizeof doubts[0]; i++)
            if (n == strlen(doubts[i].flag) &&
                memcmp(p, doubts[i].flag, n) == 0)
                return doubts[i].why;
        p += n + 1;
    }
    return NULL;
}

/* The "flags" value of a SENTINEL MASTER reply (a flat list of field
 * names and values), or NULL. */
static const hilock_reply *flags_of(const hilock_reply *r)
{
    if (r->type != HILOCK_REPLY_ARRAY || r->elements % 2 != 0)
        return NULL;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const hilock_reply *k = r->element[i], *v = r->element[i + 1];
        if (k->type == HILOCK_REPLY_STRING && k->len == 5 &&
            memcmp(k->str, "flags", 5) == 0)
            return v->type == HILOCK_REPLY_STRING ? v : NULL;
    }
    return NULL;
}

/* A vouching round's second question, SENTINEL MASTER, asked right
 * behind get-master-addr-by-name: the sentinel vouches for nothing it
 * cannot show its flags for. */
static void on_flags(void *data, int status, hilock_reply *reply)
{
    probe *p = data;
    if (p->done || p->s->closed) {
        hilock_reply_free(reply);
        return;
    }
    const hilock_reply *flags =
        status == HILOCK_OK && reply != NULL ? flags_of(reply) : NULL;
    if (flags == NULL) {
        char why[320], text[200];
        int code = status == HILOCK_OK ? HILOCK_EPROTO : status;
        if (status == HILOCK_EREDIS)
            snprintf(why, sizeof why, "answered SENTINEL MASTER with %s",
                     hl_reply_quote(text, sizeof text, reply->str,
                                    reply->len));
        else if (status == HILOCK_OK && reply != NULL)
            snprintf(why, sizeof why,
                     "answered SENTINEL MASTER with %s, which holds no "
                     "flags",
                     hl_reply_kind(reply));
        else
            snprintf(why, sizeof why, "%s", hilock_last_error());
        hilock_reply_free(reply);
        probe_failed(p, code, false, why);
        return;
    }
    p->doubt = flags_doubt(flags->str, flags->len);
    hilock_reply_free(reply);
    p->named = true;
    probe_done(p);
}

static void on_answer(void *data, int status, hilock_reply *reply)
{
    probe *p = data;
    hl_sentinel *s = p->s;
    if (p->done || s->closed) {
        hilock_reply_free(reply);
        return;
    }
    char why[320], text[200], host[256];
    int port = 0;
    int code = HILOCK_EPROTO;
    bool unknown = false;
    if (status == HILOCK_EREDIS) {
        snprintf(why, sizeof why, "%s",
                 hl_reply_quote(text, sizeof text, reply->str, reply->len));
        code = hl_reply_is_error_prefix(reply, "NOPERM") ? HILOCK_EPERM
                                                         : HILOCK_EREDIS;
    } else if (status == HILOCK_ETOOBIG) {
        /* No reply object at all, which is not nil: the detail says which
         * bound the reply crossed. */
        snprintf(why, sizeof why,
                 "answered get-master-addr-by-name with %s",
                 hilock_last_error());
    } else if (status != HILOCK_OK) {
        snprintf(why, sizeof why, "%s", hilock_last_error());
        code = status;
    } else if (reply->type == HILOCK_REPLY_NIL) {
        snprintf(why, sizeof why, "knows no master of that name");
        code = HILOCK_EINVAL;
        unknown = true;
    } else if (read_address(reply, host, sizeof host, &port, text,
                            sizeof text)) {
        hilock_reply_free(reply);
        take_name(p, host, port);
        return;
    } else {
        snprintf(why, sizeof why,
                 "answered get-master-addr-by-name with %s instead of a "
                 "host and a port",
                 text);
    }
    hilock_reply_free(reply);
    probe_failed(p, code, unknown, why);
}

static void on_probe_event(hl_conn *conn, hl_conn_event ev, int status,
                           const char *detail, hilock_reply *reply,
                           void *data)
{
    hilock_reply_free(reply);
    probe *p = data;
    if (p->done || p->s->closed)
        return;
    if (ev == HL_CONN_DOWN) {
        probe_failed(p, status, false, detail);
        return;
    }
    if (ev != HL_CONN_UP)
        return;
    /* Asked once up, so that the command timeout does not run while the
     * connection is still being made: the round's deadline bounds both. */
    const char *name = p->s->client->opts->sentinel_master;
    const char *argv[] = {"SENTINEL", "get-master-addr-by-name", name};
    size_t lens[] = {8, 23, strlen(name)};
    const char *fargv[] = {"SENTINEL", "MASTER", name};
    size_t flens[] = {8, 6, strlen(name)};
    if (hl_conn_command(conn, 3, argv, lens, on_answer, p) != HILOCK_OK ||
        (p->s->vouching &&
         hl_conn_command(conn, 3, fargv, flens, on_flags, p) != HILOCK_OK))
        probe_failed(p, HILOCK_ENOMEM, false, "out of memory for the question");
}

static bool probe_start(hl_sentinel *s, int i)
{
    probe *p = &s->probes[i];
    hl_conn_free(p->conn);
    hilock_options_free(p->opts);
    *p = (probe){.s = s, .index = i};
    if (hilock_options_copy(&p->opts, s->opts) != HILOCK_OK ||
        hilock_options_set_host(p->opts, s->list[i].host) != HILOCK_OK ||
        hilock_options_set_port(p->opts, s->list[i].port) != HILOCK_OK)
        return false;
    hl_conn_config cfg = {.loop = s->client->loop,
                          .opts = p->opts,
                          .ssl_ctx = s->ssl_ctx,
                          .on_event = on_probe_event,
                          .data = p};
    p->conn = hl_conn_create(&cfg);
    return p->conn != NULL;
}

static void start_round(hl_sentinel *s)
{
    s->asking = true;
    s->again = false;
    s->begun = hl_monotime_now();
    s->vouching = s->want_vouch;
    s->want_vouch = false;
    s->left = s->count;
    s->unknown = 0;
    s->status = HILOCK_EIO;
    s->why[0] = '\0';
    hl_timer_arm(&s->deadline, HL_MS(s->opts->connect_timeout_ms));
    bool over = false;
    for (int i = 0; i < s->count; i++)
        if (!probe_start(s, i))
            over = note_failure(&s->probes[i], HILOCK_ENOMEM, false,
                                "out of memory for a connection");
    if (over)
        round_ended(s);
}

/* The connect timeout passed: every sentinel that has not answered yet
 * failed. */
static void on_deadline(hl_timer *t)
{
    hl_sentinel *s = t->data;
    char why[160];
    snprintf(why, sizeof why,
             "no answer within the connect timeout (%lld ms)",
             (long long)s->opts->connect_timeout_ms);
    bool over = false;
    for (int i = 0; i < s->count; i++)
        if (!s->probes[i].done)
            over = note_failure(&s->probes[i], HILOCK_ETIMEDOUT, false, why);
    if (over)
        round_ended(s);
}

static void on_next(hl_timer *t)
{
    hl_sentinel *s = t->data;
    if (!s->closed && !s->asking)
        start_round(s);
}

/* A round starts from the loop, never inside the callback that asked,
 * which may be one of the last round's connections.  While a failed
 * round's backoff runs, the question waits for it. */
static void ask(hl_sentinel *s)
{
    if (s->closed)
        return;
    if (s->asking)
        s->again = true;
    else if (!s->next.armed)
        arm_next(s);
}

/* ---- a silent master ---------------------------------------------------- */

/* Whether a request the client sent its master has gone unanswered for
 * HL_SENTINEL_SILENT_MS. */
static bool master_silent(const hl_sentinel *s)
{
    const hilock_client *c = s->client;
    for (int i = 0; i < c->nconns; i++)
        if (c->conns[i] != NULL &&
            hl_conn_unanswered_for(c->conns[i]) >
                HL_MS(HL_SENTINEL_SILENT_MS))
            return true;
    return false;
}

/* A master that stops answering keeps its link up, so nothing but an
 * announcement would move the client, and one the client missed (its
 * listener's sentinel down, or a switch made by hand) would leave the
 * requests sent there waiting for their command timeout after the
 * sentinels named another master.  So a silent master has the
 * sentinels asked: a round that names another master (on a majority's
 * word) moves the client, and its written requests fail with HILOCK_EIO
 * at once while the others go to the new master.  A round that names
 * the master the client follows ends at its first answer. */
static void on_watch(hl_timer *t)
{
    hl_sentinel *s = t->data;
    if (s->closed)
        return;
    hl_timer_arm(t, HL_MS(HL_SENTINEL_SILENT_MS));
    if (s->client->master_known && master_silent(s))
        ask(s);
}

/* ---- announcements --------------------------------------------------------- */

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
    tell(s, HILOCK_OK, NULL, host, port, false);
}

/* ---- life -------------------------------------------------------------------- */

static void read_list(hl_sentinel *s, const hilock_options *o)
{
    snprintf(s->list[0].host, sizeof s->list[0].host, "%s", o->host);
    s->list[0].port = o->port;
    s->count = 1;
    const char *cursor = o->seeds;
    char host[256];
    int port, got;
    while (s->count < HILOCK_MAX_SENTINELS &&
           (got = hl_hostlist_next(&cursor, host, sizeof host, &port)) >= 0)
        if (got == 1) {
            memcpy(s->list[s->count].host, host, sizeof host);
            s->list[s->count++].port = port;
        }
}

hl_sentinel *hl_sentinel_create(hilock_client *client, SSL_CTX *ssl_ctx,
                                hl_sentinel_fn *fn)
{
    const hilock_options *o = client->opts;
    if (hl_sentinel_count(o) > HILOCK_MAX_SENTINELS)
        return NULL;
    hl_sentinel *s = hl_calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->client = client;
    s->fn = fn;
    s->ssl_ctx = ssl_ctx;
    hl_timer_init(&s->deadline, client->loop, on_deadline, s);
    hl_timer_init(&s->next, client->loop, on_next, s);
    hl_timer_init(&s->watch, client->loop, on_watch, s);
    read_list(s, o);
    if (hilock_options_copy(&s->opts, o) != HILOCK_OK ||
        hilock_options_set_user(s->opts, NULL) != HILOCK_OK ||
        hilock_options_set_password(s->opts, NULL) != HILOCK_OK ||
        hilock_options_set_user(s->opts, o->sentinel_user) != HILOCK_OK ||
        hilock_options_set_password(s->opts, o->sentinel_password) !=
            HILOCK_OK ||
        hilock_options_set_db(s->opts, 0) != HILOCK_OK) {
        release(s);
        return NULL;
    }
    ask(s);
    hl_timer_arm(&s->watch, HL_MS(HL_SENTINEL_SILENT_MS));
    return s;
}

int hl_sentinel_count(const hilock_options *opts)
{
    return 1 + hl_hostlist_count(opts->seeds);
}

void hl_sentinel_ask(hl_sentinel *s)
{
    if (s != NULL)
        ask(s);
}

void hl_sentinel_vouch(hl_sentinel *s)
{
    if (s == NULL || s->closed)
        return;
    s->want_vouch = true;
    ask(s);
}

void hl_sentinel_free(hl_sentinel *s)
{
    if (s == NULL || s->closed)
        return;
    s->closed = true;
    hl_timer_stop(&s->deadline);
    hl_timer_stop(&s->next);
    hl_timer_stop(&s->watch);
    stop_probes(s);
    if (s->ps != NULL) {
        hl_pubsub_unsubscribe(&s->sub);
        hl_pubsub_free(s->ps);
        s->ps = NULL;
    }
    if (s->calling > 0)
        s->free_on_return = true;
    else
        release(s);
}

unsigned hl_sentinel_answers(const hl_sentinel *s) { return s->answers; }

unsigned hl_sentinel_switches(const hl_sentinel *s) { return s->switches; }

unsigned hl_sentinel_rounds(const hl_sentinel *s) { return s->rounds; }

hl_monotime hl_sentinel_round_begun(const hl_sentinel *s) { return s->begun; }

int hl_sentinel_heard_out(const hl_sentinel *s)
{
    int n = 0;
    for (int i = 0; s->asking && i < s->count; i++)
        n += s->probes[i].named;
    return n;
}
