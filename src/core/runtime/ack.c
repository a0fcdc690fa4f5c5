/* Replica acknowledgement: the WAIT after a lock write and the replica
 * counts it is judged by (see ack.h). */
#include "core/runtime/ack.h"

#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/config/option_values.h"
#include "core/loop/io.h"
#include "core/runtime/client_state.h"
#include "core/runtime/cluster.h"
#include "core/runtime/sentinel.h"

/* What the client knows of one connection's master.  Connections are the
 * keys and are never dereferenced here except the live one a write names;
 * a connection that reconnected (its connect count moved) may lead to
 * another master after a failover, so its count is read again. */
typedef struct ack_count {
    const hl_conn *conn;
    uint64_t connects; /* the connection's connect count when read */
    hl_monotime read_at;
    int k;             /* online replicas; -1: unknown */
    /* The most replicas the master was seen with since the topology last
     * vouched for it (-1: none seen yet).  A takeover or a failover takes
     * a master's replicas before the master hears of it, so one that
     * reports fewer is suspect: its writes need as many acknowledgements
     * as it had until a topology read confirms it is still the master. */
    int had;
    bool confirming;   /* a topology read was asked for the suspect */
    /* The lowest count and the last late answer since the topology last
     * vouched for the master (low -1: none lower than had), and when the
     * newest of them came: a read begun before it cannot vouch for what
     * it shows.  A master being failed over loses its replicas one by
     * one, and a round slowed by one sentinel may have heard another
     * before the failover began. */
    int low;
    hl_monotime doubted_at;
    struct hl_ack *parked; /* short writes waiting for that read */
    bool reading;      /* an INFO is in flight */
    /* The last WAIT judged here fell short: the WAITs sent meanwhile get
     * a fraction of the timeout.  They run one after the other on the
     * connection, and at the full timeout each would hold the ones behind
     * it long enough to reach the command timeout, which resets the
     * connection and fails every request on it instead of just these. */
    bool stalled;
    /* The group whose WAIT goes last on the connection, if it still
     * does (checked with hl_conn_last_is before use). */
    struct ack_group *open;
} ack_count;

/* A single master has at most HILOCK_MAX_CONNECTIONS connections; a
 * cluster one per master.  Past this many the stalest count goes. */
#define ACK_COUNTS 64

struct hl_acks {
    ack_count counts[ACK_COUNTS];
    hl_timer park_timer; /* the earliest parked write's deadline */
};

/* Writes that one WAIT covers: those queued on a connection before it
 * writes.  Redis answers a WAIT once the replicas have the client's
 * last write, so one WAIT answers for all of them, and a connection
 * blocked in it costs one wait per batch instead of one per write. */
typedef struct ack_group {
    hilock_client *client;
    hl_conn *conn;
    hl_ack *first; /* linked by next_in_group */
    int need;
} ack_group;

struct hl_ack {
    hilock_client *client;
    struct ack_group *group; /* whose WAIT it waits for, or NULL */
    hl_ack *next_in_group;
    hl_conn *conn;
    hl_request_fn *fn;
    void *data;
    int need;           /* n of the last WAIT sent */
    int pending;        /* requests of this ack unanswered */
    int status;         /* the write's answer, once come */
    hilock_reply *reply;
    long long acked;    /* the WAIT's answer; -1 when it failed */
    bool written;       /* the write's answer came */
    bool waited;        /* the WAIT's answer came */
    bool redirected;    /* the WAIT's answer came first */
    bool no_wait;       /* the master has no replica: nothing to wait for */
    bool unsent;        /* its WAIT could not be queued */
    bool delivered;
    bool late;          /* parked for an answer that came late */
    bool none;          /* nothing asked of the server (policy none, no
                         * fsync=yes): only lateness is checked */
    /* Where and when the write was queued: a late answer counts as one
     * only from the connection and session it was queued on; a write
     * that waited for a reconnect, or went elsewhere, was sent late, not
     * held. */
    const hl_conn *queued_on;
    uint64_t queued_session;
    hl_monotime queued_at;
    hl_monotime answered_at; /* the write's answer */
    hl_monotime parked_until; /* parked: judged short from then on */
};

int hl_ack_needed(int policy, int k)
{
    if (k <= 0)
        return 0;
    switch (policy) {
    case HILOCK_ACK_ONE:
        return 1;
    case HILOCK_ACK_MAJORITY:
        return k / 2 + 1;
    case HILOCK_ACK_ALL:
        return k;
    default:
        return 0;
    }
}

int hl_ack_parse_info(const char *text, size_t len)
{
    int k = 0;
    const char *end = text + len;
    for (const char *p = text; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        size_t n = (size_t)(eol - p);
        /* "slave0:ip=...,port=...,state=online,offset=...,lag=..." */
        if (n > 6 && memcmp(p, "slave", 5) == 0 && p[5] >= '0' &&
            p[5] <= '9') {
            for (const char *q = p; q + 12 <= eol; q++)
                if (memcmp(q, "state=online", 12) == 0) {
                    k++;
                    break;
                }
        }
        p = eol + 1;
    }
    return k;
}

static void on_park_timer(hl_timer *t);

static ack_count *count_for(hilock_client *c, const hl_conn *conn,
                            bool create)
{
    if (c->acks == NULL) {
        if (!create)
            return NULL;
        c->acks = hl_calloc(1, sizeof *c->acks);
        if (c->acks == NULL)
            return NULL;
        hl_timer_init(&c->acks->park_timer, c->loop, on_park_timer, c);
    }
    ack_count *free_one = NULL, *stalest = NULL;
    for (int i = 0; i < ACK_COUNTS; i++) {
        ack_count *e = &c->acks->counts[i];
        if (e->conn == conn)
            return e;
        if (e->conn == NULL) {
            if (free_one == NULL)
                free_one = e;
        } else if (!e->reading && e->parked == NULL &&
                   (stalest == NULL || e->read_at < stalest->read_at)) {
            stalest = e;
        }
    }
    if (free_one != NULL)
        stalest = free_one;
    if (!create || stalest == NULL)
        return NULL;
    memset(stalest, 0, sizeof *stalest);
    stalest->conn = conn;
    stalest->k = -1;
    stalest->had = -1;
    stalest->low = -1;
    return stalest;
}

/* The replicas a write to e's master is judged by, k read now: as many
 * as it had while it is suspect. */
static int expected(const ack_count *e, int k)
{
    return e != NULL && k >= 0 && k < e->had ? e->had : k;
}

/* The count for a write on conn now: -1 when it must be read first. */
static int current_k(ack_count *e, hl_conn *conn)
{
    if (e->k >= 0 && hl_conn_get_stats(conn).connects != e->connects)
        e->k = -1; /* reconnected: perhaps to another master */
    if (e->k >= 0 &&
        hl_sat_sub(hl_monotime_now(), e->read_at) > HL_MS(HL_ACK_RECOUNT_MS))
        return -1;
    return e->k;
}

typedef struct count_read {
    hilock_client *client;
    const hl_conn *conn;
    hl_ack *then; /* an ack whose verdict waits for the count, or NULL */
} count_read;

static void judge(hl_ack *a, int need);
static void park(hilock_client *c, ack_count *e, hl_ack *a);
static int64_t ack_timeout_ms(const hilock_client *c);

/* Whether Sentinel or a cluster map can vouch for a master. */
static bool vouched(const hilock_client *c)
{
    return c->sentinel != NULL || c->cluster != NULL;
}

/* Ask the topology whether e's master is still the master: at once, or,
 * with a read under way, once more after it. */
static void ask_topology(hilock_client *c, ack_count *e, const hl_conn *conn)
{
    e->confirming = true;
    if (c->sentinel != NULL)
        hl_sentinel_vouch(c->sentinel);
    else
        hl_cluster_confirm(c->cluster, conn);
}

/* e's master reports fewer replicas than it had.  A master alone has no
 * one to vouch for it but itself, so there its own count stands at
 * once. */
static void suspect(hilock_client *c, ack_count *e, const hl_conn *conn)
{
    if (!vouched(c)) {
        e->had = e->k;
        return;
    }
    if (e->low < 0 || e->k < e->low) {
        e->low = e->k;
        e->doubted_at = hl_monotime_now();
    } else if (e->confirming) {
        return; /* nothing the read under way has not been asked about */
    }
    ask_topology(c, e, conn);
}

/* An answer this late may come from a master that was paused or cut off
 * while the topology replaced it, and that ran the requests queued on
 * it before it heard: it counts once the topology still names that
 * master.  Late is past what a WAIT ahead of the write on its
 * connection can hold it, with room.  Returns whether a was parked for
 * that (its verdict then comes with the topology's). */
static bool verify_late(hl_ack *a)
{
    hilock_client *c = a->client;
    if (!vouched(c) || a->late || a->conn != a->queued_on ||
        hl_conn_get_stats(a->conn).connects != a->queued_session ||
        hl_sat_sub(a->answered_at, a->queued_at) <=
            HL_MS(ack_timeout_ms(c) + HL_ACK_LATE_MS))
        return false;
    ack_count *e = count_for(c, a->conn, true);
    if (e == NULL)
        return false;
    a->late = true;
    e->doubted_at = hl_monotime_now();
    ask_topology(c, e, a->conn);
    park(c, e, a);
    return true;
}

static void on_info(void *data, int status, hilock_reply *reply)
{
    count_read *r = data;
    ack_count *e = count_for(r->client, r->conn, false);
    int k = -1;
    if (status == HILOCK_OK && reply != NULL &&
        reply->type == HILOCK_REPLY_STRING)
        k = hl_ack_parse_info(reply->str, reply->len);
    if (e != NULL) {
        e->reading = false;
        if (k >= 0) {
            /* Answered on the connection's current session, which may
             * have begun after the INFO was queued. */
            e->k = k;
            e->connects = hl_conn_get_stats(r->conn).connects;
            e->read_at = hl_monotime_now();
            if (k >= e->had)
                e->had = k;
            else
                suspect(r->client, e, r->conn);
        }
    }
    hilock_reply_free(reply);
    hl_ack *a = r->then;
    hl_free(r);
    if (a == NULL)
        return;
    a->pending--;
    if (k < 0) {
        /* No count: judged by the n the WAIT asked for. */
        judge(a, a->need);
        return;
    }
    /* Judged by the count the master gave right after the WAIT, unless
     * the master is suspect: then by the topology's word on it. */
    judge(a, hl_ack_needed(a->client->opts->replica_ack, expected(e, k)));
}

/* Queue INFO replication on conn; then (may be NULL) waits for it. */
static int read_count(hilock_client *c, hl_conn *conn, ack_count *e,
                      hl_ack *then)
{
    count_read *r = hl_calloc(1, sizeof *r);
    if (r == NULL)
        return HILOCK_ENOMEM;
    r->client = c;
    r->conn = conn;
    r->then = then;
    static const char *const argv[] = {"INFO", "replication"};
    static const size_t lens[] = {4, 11};
    int rc = hl_conn_command(conn, 2, argv, lens, on_info, r);
    if (rc != HILOCK_OK) {
        hl_free(r);
        return rc;
    }
    if (e != NULL)
        e->reading = true;
    return HILOCK_OK;
}

static void ack_free_if_done(hl_ack *a)
{
    if (a->delivered && a->pending == 0)
        hl_free(a);
}

static void deliver(hl_ack *a, int status)
{
    if (a->delivered)
        return;
    a->delivered = true;
    hilock_reply *reply = a->reply;
    a->reply = NULL;
    a->pending++; /* the callback may not free the ack under us */
    a->fn(a->data, status, reply);
    a->pending--;
}

static void deliver_short(hl_ack *a, int need, const char *why)
{
    if (why != NULL)
        hl_fail(HILOCK_ENOACK, "%s", why);
    else
        hl_fail(HILOCK_ENOACK,
                "%lld of the %d replicas the policy asks for acknowledged "
                "the write within %lld ms",
                a->acked < 0 ? 0 : a->acked, need,
                (long long)a->client->opts->replica_ack_timeout_ms);
    hl_client_event(a->client, HILOCK_EVENT_ACK_SHORT, NULL,
                    hilock_last_error(), NULL, 0);
    deliver(a, HILOCK_ENOACK);
}

/* e's master reported fewer replicas than it had, and the topology has
 * not vouched for it since. */
static bool is_suspect(const ack_count *e)
{
    return e->k >= 0 && e->k < e->had;
}

/* Whether a's verdict waits for the topology's word on its master (e, a's
 * count): while the master is suspect or being asked about, it is
 * parked.  Every write's does, acknowledged or short: a master being
 * replaced may still have as many replicas as the policy asks for, ones
 * that have not left it yet (under replicas=one, one is enough), and a
 * count that fell may yet be confirmed.  A refusal answers only the
 * writes parked when it came: one judged after it asks again, or a
 * write acknowledged just after the sentinels refused, or sent on the
 * count that made them refuse, would count on the master they would not
 * vouch for. */
static bool held_for_word(hl_ack *a, ack_count *e)
{
    if (e == NULL || (!e->confirming && !is_suspect(e)))
        return false;
    if (!e->confirming)
        ask_topology(a->client, e, a->conn);
    park(a->client, e, a);
    return true;
}

static void judge(hl_ack *a, int need)
{
    ack_count *e = count_for(a->client, a->conn, false);
    if (e != NULL)
        e->stalled = a->acked < need;
    if (held_for_word(a, e))
        return;
    if (a->acked < need)
        deliver_short(a, need, NULL);
    else if (!verify_late(a))
        deliver(a, HILOCK_OK);
    ack_free_if_done(a);
}

/* The ack timeout as used: the connection resets a request unanswered
 * for the command timeout, and everything behind a WAIT waits for it. */
static int64_t ack_timeout_ms(const hilock_client *c)
{
    int64_t t = c->opts->replica_ack_timeout_ms;
    int64_t cap = c->opts->command_timeout_ms / 2;
    return t > cap ? cap : t;
}

static int timeout_ms(hilock_client *c, const hl_conn *conn)
{
    int64_t t = ack_timeout_ms(c);
    ack_count *e = count_for(c, conn, false);
    if (e != NULL && e->stalled)
        t /= 8;
    return t < 1 ? 1 : (int)t;
}

/* ---- writes waiting for the topology's word on a suspect master ------ */

static void arm_park_timer(hilock_client *c)
{
    hl_monotime due = 0;
    for (int i = 0; i < ACK_COUNTS; i++)
        for (hl_ack *a = c->acks->counts[i].parked; a; a = a->next_in_group)
            if (due == 0 || a->parked_until < due)
                due = a->parked_until;
    if (due == 0)
        hl_timer_stop(&c->acks->park_timer);
    else
        hl_timer_arm(&c->acks->park_timer, due - hl_monotime_now());
}

/* How long a parked write waits for the topology's word: a sentinel
 * round takes at most the connect timeout, and a cluster read is as
 * quick on a live node. */
static int64_t park_ms(const hilock_client *c)
{
    return ack_timeout_ms(c) + c->opts->connect_timeout_ms;
}

/* a's WAIT came back short from a suspect master, or its answer came
 * late: its verdict waits for the topology read asked for, at most
 * park_ms. */
static void park(hilock_client *c, ack_count *e, hl_ack *a)
{
    a->pending++;
    a->parked_until = hl_monotime_now() + HL_MS(park_ms(c));
    a->next_in_group = e->parked;
    e->parked = a;
    arm_park_timer(c);
}

/* Judge e's parked writes whose wait ends by until: by the master's
 * count now when the topology vouched for it (why NULL), else short. */
static void unpark(hilock_client *c, ack_count *e, hl_monotime until,
                   const char *why)
{
    hl_ack *due = NULL;
    for (hl_ack **p = &e->parked; *p != NULL;) {
        hl_ack *a = *p;
        if (a->parked_until <= until) {
            *p = a->next_in_group;
            a->next_in_group = due;
            due = a;
        } else {
            p = &a->next_in_group;
        }
    }
    int policy = c->opts->replica_ack;
    int need = hl_ack_needed(policy, e->k >= 0 ? e->k : e->had);
    int need_had = hl_ack_needed(policy, e->had);
    while (due != NULL) {
        hl_ack *a = due;
        due = a->next_in_group;
        a->next_in_group = NULL;
        a->pending--;
        if (why == NULL && a->late) {
            deliver(a, HILOCK_OK);
            ack_free_if_done(a);
        } else if (why == NULL) {
            judge(a, need);
        } else {
            a->acked = a->acked < 0 ? 0 : a->acked;
            deliver_short(a, need_had, why);
            ack_free_if_done(a);
        }
    }
}

/* Fail e's parked writes whose wait ends by until, because (why) the
 * topology did not vouch for their master. */
static void refuse_parked(hilock_client *c, ack_count *e, hl_monotime until,
                          const char *why)
{
    char text[HL_DETAIL_MAX];
    snprintf(text, sizeof text,
             "the master answered late or reported fewer online replicas "
             "(%d) than it had (%d), and %s, so the write's acknowledgement "
             "is unknown",
             e->k, e->had, why);
    unpark(c, e, until, text);
}

static void on_park_timer(hl_timer *t)
{
    hilock_client *c = t->data;
    hl_monotime now = hl_monotime_now();
    for (int i = 0; i < ACK_COUNTS; i++) {
        ack_count *e = &c->acks->counts[i];
        if (e->parked == NULL)
            continue;
        char why[128];
        snprintf(why, sizeof why,
                 "no topology read confirmed within %lld ms that it is "
                 "still the master",
                 (long long)park_ms(c));
        refuse_parked(c, e, now, why);
        /* Asked again by the next count that is short. */
        if (e->parked == NULL)
            e->confirming = false;
    }
    arm_park_timer(c);
}

void hl_ack_topology(hilock_client *c, const hl_conn *conn,
                     hl_ack_verdict verdict, const char *why,
                     hl_monotime begun)
{
    if (c->acks == NULL)
        return;
    for (int i = 0; i < ACK_COUNTS; i++) {
        ack_count *e = &c->acks->counts[i];
        if (e->conn == NULL || (conn != NULL && e->conn != conn))
            continue;
        if (verdict == HL_ACK_MASTER_CONFIRMED) {
            /* Doubted after the read began: the read asked then answers. */
            if (e->doubted_at > begun)
                continue;
            e->confirming = false;
            if (e->k >= 0)
                e->had = e->k;
            e->low = -1;
            e->doubted_at = 0;
            unpark(c, e, INT64_MAX, NULL);
            continue;
        }
        e->confirming = false;
        refuse_parked(c, e, INT64_MAX, why);
        if (verdict == HL_ACK_MASTER_REPLACED) {
            /* Whatever the connection reaches next is another master. */
            e->had = -1;
            e->k = -1;
            e->low = -1;
            e->doubted_at = 0;
        }
    }
    arm_park_timer(c);
}

static void on_group_wait(void *data, int status, hilock_reply *reply);

/* Ask for need acknowledgements of a's write: join the WAIT that goes
 * last on its connection, or queue one there. */
static int send_wait(hl_ack *a, int need)
{
    ack_count *e = count_for(a->client, a->conn, true);
    ack_group *g = e ? e->open : NULL;
    if (g == NULL || !hl_conn_last_is(a->conn, on_group_wait, g) ||
        g->need != need) {
        g = hl_calloc(1, sizeof *g);
        if (g == NULL)
            return HILOCK_ENOMEM;
        g->client = a->client;
        g->conn = a->conn;
        g->need = need;
        char n[16], t[24];
        int nl = snprintf(n, sizeof n, "%d", need);
        int tl = snprintf(t, sizeof t, "%d", timeout_ms(a->client, a->conn));
        /* Under fsync=yes: the master's own fsync, and need replicas'. */
        bool fsync = a->client->opts->wait_fsync;
        const char *argv[] = {"WAITAOF", "1", n, t};
        size_t lens[] = {7, 1, (size_t)nl, (size_t)tl};
        const char *wait_argv[] = {"WAIT", n, t};
        size_t wait_lens[] = {4, (size_t)nl, (size_t)tl};
        int rc = fsync ? hl_conn_command_last(a->conn, 4, argv, lens,
                                              on_group_wait, g)
                       : hl_conn_command_last(a->conn, 3, wait_argv,
                                              wait_lens, on_group_wait, g);
        if (rc != HILOCK_OK) {
            hl_free(g);
            return rc;
        }
        if (e != NULL)
            e->open = g;
    }
    a->next_in_group = g->first;
    g->first = a;
    a->group = g;
    a->need = need;
    a->pending++;
    return HILOCK_OK;
}

/* Both the write and its WAIT answered, in that order, on a->conn. */
static void settle(hl_ack *a)
{
    if (a->acked < 0) {
        deliver_short(a, a->need, "the WAIT after the write failed, so its "
                                  "acknowledgement is unknown");
        ack_free_if_done(a);
        return;
    }
    if (a->client->opts->replica_ack == HILOCK_ACK_NONE) {
        /* fsync=yes alone: the master's fsync was all there was to ask. */
        judge(a, 0);
        return;
    }
    ack_count *e = count_for(a->client, a->conn, false);
    int k = e ? e->k : -1;
    if (k < 0) {
        deliver_short(a, a->need,
                      "the master's replica count could not be read "
                      "(INFO replication), so the write's acknowledgement "
                      "is unknown; the server's ACL must allow INFO, or "
                      "choose replicas=none");
        ack_free_if_done(a);
        return;
    }
    int need = hl_ack_needed(a->client->opts->replica_ack, expected(e, k));
    if (a->acked >= need) {
        judge(a, need);
        return;
    }
    if (a->need < need) {
        /* Sent before the count was known (or grew): ask for the rest,
         * on the same connection, behind the write's answer. */
        if (send_wait(a, need) == HILOCK_OK)
            return;
        judge(a, need);
        return;
    }
    /* Short: judge by the count the master reports now, so a replica
     * that left since the count was read fails no write. */
    e->k = -1;
    if (!e->reading && read_count(a->client, a->conn, e, a) == HILOCK_OK) {
        a->pending++;
        return;
    }
    judge(a, need);
}

/* The write ran on another connection than the one its WAIT was asked
 * of (a cluster redirected it), or ran there after that WAIT answered (a
 * cluster asked it to try again): ask the connection that ran it, behind
 * the write's answer. */
static void follow(hl_ack *a, hl_conn *to)
{
    hilock_client *c = a->client;
    a->conn = to;
    a->redirected = false;
    a->waited = false;
    a->acked = 0;
    ack_count *e = count_for(c, to, true);
    int k = e ? current_k(e, to) : -1;
    if (k < 0 && e != NULL && !e->reading)
        (void)read_count(c, to, e, NULL);
    k = expected(e, k);
    if (send_wait(a, k > 0 ? hl_ack_needed(c->opts->replica_ack, k) : 0) ==
        HILOCK_OK)
        return;
    deliver_short(a, a->need,
                  "the write was redirected to another node, whose "
                  "acknowledgement could not be asked for");
    ack_free_if_done(a);
}

/* a's write ran elsewhere: the WAIT it waits for covers nothing of it. */
static void leave_group(hl_ack *a)
{
    ack_group *g = a->group;
    if (g == NULL)
        return;
    for (hl_ack **p = &g->first; *p != NULL; p = &(*p)->next_in_group)
        if (*p == a) {
            *p = a->next_in_group;
            break;
        }
    a->next_in_group = NULL;
    a->group = NULL;
    a->pending--;
}

/* refusal: why the policy cannot be kept, when the server refused the
 * WAIT itself (renamed away, or denied by an ACL since the client
 * connected) rather than failing to answer it. */
static void wait_answered(hl_ack *a, long long acked, const char *refusal)
{
    a->pending--;
    a->waited = true;
    a->acked = acked;
    if (!a->written) {
        /* The write has not answered on this connection, so it went
         * elsewhere (a cluster redirection): this WAIT covered nothing. */
        a->redirected = true;
        return;
    }
    if (a->delivered) {
        ack_free_if_done(a);
        return;
    }
    if (refusal != NULL) {
        deliver_short(a, a->need, refusal);
        ack_free_if_done(a);
        return;
    }
    settle(a);
}

/* WAITAOF's answer, {local fsyncs, replica fsyncs}: the replicas that
 * count, or -1 when the master's own fsync is missing (*unsynced) or the
 * answer has another shape. */
static long long waitaof_count(const hilock_reply *r, bool *unsynced)
{
    if (r->type != HILOCK_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != HILOCK_REPLY_INTEGER ||
        r->element[1]->type != HILOCK_REPLY_INTEGER)
        return -1;
    if (r->element[0]->integer < 1) {
        *unsynced = true;
        return -1;
    }
    return r->element[1]->integer;
}

static void on_group_wait(void *data, int status, hilock_reply *reply)
{
    ack_group *g = data;
    bool fsync = g->client->opts->wait_fsync, unsynced = false;
    long long acked = -1;
    if (status == HILOCK_OK && reply != NULL && fsync)
        acked = waitaof_count(reply, &unsynced);
    else if (status == HILOCK_OK && reply != NULL &&
             reply->type == HILOCK_REPLY_INTEGER)
        acked = reply->integer;
    char refusal[320];
    bool refused = reply != NULL && reply->type == HILOCK_REPLY_ERROR;
    if (refused)
        hl_conn_wait_refusal(g->conn, reply->str, refusal, sizeof refusal);
    else if (unsynced)
        snprintf(refusal, sizeof refusal,
                 "the master did not have the write in its append-only "
                 "file on disk within %d ms (fsync=yes)",
                 timeout_ms(g->client, g->conn));
    hilock_reply_free(reply);
    ack_count *e = count_for(g->client, g->conn, false);
    if (e != NULL && e->open == g)
        e->open = NULL;
    hl_ack *next;
    for (hl_ack *a = g->first; a != NULL; a = next) {
        next = a->next_in_group;
        a->next_in_group = NULL;
        a->group = NULL;
        wait_answered(a, acked, refused || unsynced ? refusal : NULL);
    }
    hl_free(g);
}

bool hl_ack_plain(hilock_client *c, hl_conn *conn)
{
    if (conn == NULL || vouched(c) || c->opts->wait_fsync)
        return false;
    if (c->opts->replica_ack == HILOCK_ACK_NONE)
        return true;
    ack_count *e = count_for(c, conn, false);
    return e != NULL && expected(e, current_k(e, conn)) == 0;
}

int hl_ack_begin(hilock_client *c, hl_conn *conn, hl_request_fn *fn,
                 void *data, hl_ack **out)
{
    *out = NULL;
    bool none = c->opts->replica_ack == HILOCK_ACK_NONE;
    bool fsync = c->opts->wait_fsync;
    /* Under none, a late answer is still checked where a topology can
     * vouch for its master; nothing else runs, but the master's fsync
     * under fsync=yes. */
    if (conn == NULL || (none && !vouched(c) && !fsync))
        return HILOCK_OK;
    ack_count *e = none ? NULL : count_for(c, conn, true);
    int k = e ? current_k(e, conn) : -1;
    /* A master alone known to have no replica, and never seen with one:
     * nothing to wait for, and the write goes as under none. */
    if (!none && expected(e, k) == 0 && !vouched(c) && !fsync)
        return HILOCK_OK;
    hl_ack *a = hl_calloc(1, sizeof *a);
    if (a == NULL)
        return HILOCK_ENOMEM;
    a->client = c;
    a->conn = conn;
    a->fn = fn;
    a->data = data;
    a->queued_on = conn;
    a->queued_session = hl_conn_get_stats(conn).connects;
    a->queued_at = hl_monotime_now();
    a->none = none && !fsync;
    a->no_wait = a->none;
    /* Read the count ahead of the write, so it is known when the write
     * answers; a failure here shows as an unknown count then. */
    if (e != NULL && !e->reading && k < 0)
        (void)read_count(c, conn, e, NULL);
    *out = a;
    return HILOCK_OK;
}

void hl_ack_sent(hl_ack *a)
{
    a->pending++; /* the write */
    if (a->none)
        return;
    ack_count *e = count_for(a->client, a->conn, false);
    int k = e ? expected(e, current_k(e, a->conn)) : -1;
    /* Under fsync=yes even a master without replicas (or under the
     * policy none, with no count: k < 0, need 0) is asked for its own
     * fsync. */
    if (k == 0 && !a->client->opts->wait_fsync) {
        a->no_wait = true;
        return;
    }
    /* Stale but being read: its n goes with the WAIT, and the fresh
     * count, in before the write's answer, judges it.  A stale 0 is no
     * reason to skip the WAIT: a replica may have come online since. */
    int stale = e != NULL && e->reading ? expected(e, e->k) : -1;
    if (k < 0 && stale > 0)
        k = stale;
    /* With the count unknown, WAIT 0 answers at once: it still shows that
     * the write answered on this connection, and the rest is asked for
     * once the INFO ahead of the write has given the count. */
    int need = k < 0 ? 0 : hl_ack_needed(a->client->opts->replica_ack, k);
    if (send_wait(a, need) != HILOCK_OK)
        a->unsent = true;
}

void hl_ack_unsent(hl_ack *a) { hl_free(a); }

int hl_ack_write(hilock_client *c, hl_conn *conn, hl_ack_send_fn *send,
                 void *ctx, hl_request_fn *fn, void *data)
{
    hl_ack *ack = NULL;
    int rc = hl_ack_begin(c, conn, fn, data, &ack);
    if (rc != HILOCK_OK)
        return rc;
    if (ack == NULL)
        return send(ctx, fn, data);
    rc = send(ctx, hl_ack_reply, ack);
    if (rc == HILOCK_OK)
        hl_ack_sent(ack);
    else
        hl_ack_unsent(ack);
    return rc;
}

void hl_ack_reply(void *data, int status, hilock_reply *reply)
{
    hl_ack *a = data;
    a->pending--;
    a->written = true;
    a->status = status;
    a->reply = reply;
    a->answered_at = hl_monotime_now();
    hl_conn *by = status == HILOCK_OK ? hl_conn_answering() : NULL;
    if (status != HILOCK_OK) {
        /* Not run, or not known to have run: nothing to acknowledge. */
        deliver(a, status);
        ack_free_if_done(a);
    } else if (a->none) {
        if (by != NULL)
            a->conn = by; /* the master whose answer it is */
        if (!verify_late(a))
            deliver(a, HILOCK_OK);
        ack_free_if_done(a);
    } else if (by != NULL && by != a->conn) {
        /* Ran elsewhere: what is known of the first node (no replica, a
         * WAIT that could not be sent) says nothing of this one. */
        leave_group(a);
        follow(a, by);
    } else if (a->no_wait) {
        if (!held_for_word(a, count_for(a->client, a->conn, false)) &&
            !verify_late(a))
            deliver(a, HILOCK_OK);
        ack_free_if_done(a);
    } else if (a->unsent) {
        a->acked = -1;
        deliver_short(a, 0, "the WAIT could not be sent");
        ack_free_if_done(a);
    } else if (a->redirected) {
        follow(a, a->conn);
    }
    /* Else its WAIT answers next. */
}

int hl_ack_replicas(hilock_client *c, hl_conn *conn)
{
    ack_count *e = count_for(c, conn, false);
    return e ? e->k : -1;
}

void hl_acks_close(hilock_client *c)
{
    if (c->acks == NULL)
        return;
    for (int i = 0; i < ACK_COUNTS; i++)
        unpark(c, &c->acks->counts[i], INT64_MAX,
               "the client closed before the topology confirmed the "
               "master, so the write's acknowledgement is unknown");
    hl_timer_stop(&c->acks->park_timer);
}

void hl_acks_free(hilock_client *c)
{
    if (c->acks != NULL)
        hl_timer_stop(&c->acks->park_timer);
    hl_free(c->acks);
    c->acks = NULL;
}
