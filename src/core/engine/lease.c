#include "core/engine/lease.h"

#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/runtime/client_state.h"
#include "hilock/error.h"
#include "core/engine/compose.h"
#include "core/engine/lock_handle.h"
#include "core/config/option_values.h"
#include "core/runtime/ack.h"
#include "core/runtime/presence.h"
#include "core/transport/keyslot.h"
#include "core/transport/resp.h"

struct hl_lease_engine {
    hilock_client *client;
    int64_t watchdog_ms;
    int64_t max_hold_ms;
    /* The client's lock delay (0: off): the leases of kinds that keep
     * one are renewed with their renew_delayed script. */
    int64_t delay_ms;
    hl_lease_subject_fn *subject;
    hl_lease_lost_fn *on_lost;
    hl_lease_release_fn *on_release;
    hl_timer tick;
    hl_monotime tick_at; /* when the tick is due, while armed */
    /* Leases not yet lost or stopped, earliest deadline first, and one
     * timer for the earliest: a timer per lease cost more memory than
     * the rest of a lease together. */
    hl_lease *running;
    hl_lease *running_tail;
    hl_timer deadline_timer;
    hl_monotime timer_at; /* the deadline the timer is armed for */
    size_t watched;    /* how many of them the watchdog renews */
    hl_lease_stats stats;
    int batches;       /* batches in flight */
    size_t allocated;  /* leases started and not yet given back */
    bool freed;
};

typedef struct renew_batch {
    hl_lease_engine *engine;
    const hl_script *script; /* the renew script of all its leases */
    hl_monotime sent_at;
    int64_t ttl_ms;  /* the lease each renewal sets */
    bool verify;     /* a check of a fixed lease: its deadline stays */
    bool delayed;    /* the script is the kinds' renew_delayed */
    int n;
    hl_lease *leases[HL_LEASE_BATCH];
} renew_batch;

static void engine_free_if_unused(hl_lease_engine *e)
{
    if (e->freed && e->batches == 0 && e->allocated == 0)
        hl_free(e);
}

/* The script that renews l: with a lock delay, the kind's own renewal
 * that moves the delay key along, so that clients without one run the
 * plain renewal, which names only the locks. */
static const hl_script *renew_script(const hl_lease_engine *e,
                                     const hl_lease *l)
{
    const hl_kind *kind = e->subject(l).kind;
    return e->delay_ms > 0 && kind->renew_delayed != NULL
               ? kind->renew_delayed
               : kind->renew;
}

/* Start a batch of script for the leases whose renewal is sent at
 * sent_at, setting ttl_ms. */
static void batch_init(renew_batch *b, hl_lease_engine *e,
                       const hl_lease *first, hl_monotime sent_at,
                       int64_t ttl_ms)
{
    b->engine = e;
    b->script = renew_script(e, first);
    b->delayed = b->script == e->subject(first).kind->renew_delayed;
    b->sent_at = sent_at;
    b->ttl_ms = ttl_ms;
}

/* Both the owner and every batch are done with a stopped lease: give its
 * memory back to the owner. */
static void lease_free_if_unused(hl_lease *l)
{
    if (l->owner_released && l->batches == 0) {
        hl_lease_engine *e = l->engine;
        e->allocated--;
        e->on_release(l);
        engine_free_if_unused(e);
    }
}

static void list_remove(hl_lease_engine *e, hl_lease *l)
{
    if (l->prev)
        l->prev->next = l->next;
    else if (e->running == l)
        e->running = l->next;
    if (l->next)
        l->next->prev = l->prev;
    else if (e->running_tail == l)
        e->running_tail = l->prev;
    l->prev = l->next = NULL;
}

/* Insert by deadline, searching from the end: a renewed or new lease
 * usually has the latest deadline of all. */
static void list_insert(hl_lease_engine *e, hl_lease *l)
{
    hl_lease *after = e->running_tail;
    while (after != NULL && after->deadline > l->deadline)
        after = after->prev;
    l->prev = after;
    l->next = after ? after->next : e->running;
    if (l->next)
        l->next->prev = l;
    else
        e->running_tail = l;
    if (after)
        after->next = l;
    else
        e->running = l;
}

/* Keep the timer no later than the earliest deadline; a timer that
 * fires early just finds nothing due and is set again. */
static void arm_deadline_timer(hl_lease_engine *e)
{
    hl_lease *head = e->running;
    if (head == NULL)
        return;
    if (e->deadline_timer.armed && e->timer_at <= head->deadline)
        return;
    e->timer_at = head->deadline;
    hl_timer_arm(&e->deadline_timer,
                 hl_sat_sub(head->deadline, hl_monotime_now()));
}

/* Take a lease off the running list: it will neither be renewed nor
 * reported again. */
static void lease_detach(hl_lease *l)
{
    hl_lease_engine *e = l->engine;
    list_remove(e, l);
    if (l->watchdog)
        e->watched--;
    e->stats.active--;
    l->stopped = true;
}

/* Why a lease is lost, as its owner hears it. */
#define WHY_RAN_OUT                                                        \
    "the lease ran out before a renewal was confirmed (the server was "    \
    "unreachable or slow)"
#define WHY_GONE                                                           \
    "a renewal found the lock no longer held by this owner (it expired, "  \
    "was deleted, or the server lost it)"
#define WHY_NOT_ON_NEW_MASTER                                              \
    "the master now serving the lock does not have the hold (a failover "  \
    "or a restart lost it)"
#define WHY_RELEASE_LATE                                                   \
    "the lease ran out while a release was on its way"
#define WHY_MAX_HOLD                                                       \
    "held for the max_hold cap: the watchdog renewed it no longer, and "   \
    "the lease ran out"
#define WHY_ALL                                                            \
    "the server restarted, and may have forgotten the hold"

static void lease_lost(hl_lease *l, const char *why)
{
    if (l->stopped)
        return;
    /* Detach first: the owner's callback ends with hl_lease_stop, which
     * must then only release memory. */
    lease_detach(l);
    hl_lease_engine *e = l->engine;
    e->stats.lost++;
    hl_presence_lease_lost(e->client);
    hl_client_note_lost(e->client);
    l->batches++;
    e->on_lost(l, why);
    l->batches--;
    lease_free_if_unused(l);
}

/* Whether l has been held for the max_hold cap, so the watchdog lets
 * it run out. */
static bool capped(const hl_lease_engine *e, const hl_lease *l,
                   hl_monotime now)
{
    return e->max_hold_ms > 0 &&
           hl_sat_sub(now, l->started) >= HL_MS(e->max_hold_ms);
}

/* The first lease due and not being released, or NULL.  A lease being
 * released is left to its release, which decides. */
static hl_lease *first_due(hl_lease_engine *e, hl_monotime now)
{
    for (hl_lease *l = e->running; l != NULL && l->deadline <= now;
         l = l->next)
        if (!l->releasing)
            return l;
    return NULL;
}

static void on_deadline(hl_timer *t)
{
    hl_lease_engine *e = t->data;
    hl_monotime now = hl_monotime_now();
    /* Each loss runs the owner's callback, which may stop other leases
     * or free the engine; start over from the head every time. */
    e->batches++;
    hl_lease *l;
    while (!e->freed && (l = first_due(e, now)) != NULL)
        lease_lost(l, l->watchdog && capped(e, l, now) ? WHY_MAX_HOLD
                                                       : WHY_RAN_OUT);
    e->batches--;
    if (e->freed) {
        engine_free_if_unused(e);
        return;
    }
    hl_lease *next = e->running;
    while (next != NULL && next->deadline <= now)
        next = next->next; /* overdue leases whose release is in flight */
    if (next != NULL) {
        e->timer_at = next->deadline;
        hl_timer_arm(&e->deadline_timer, hl_sat_sub(next->deadline, now));
    }
}

/* The local deadline of a lease of lease_ms granted at granted_at. */
static hl_monotime lease_deadline(hl_monotime granted_at, int64_t lease_ms)
{
    return hl_sat_sub(hl_after_ms(granted_at, lease_ms),
                      hl_drift_margin(lease_ms));
}

static void set_deadline(hl_lease *l, hl_monotime granted_at,
                         int64_t lease_ms)
{
    hl_lease_engine *e = l->engine;
    hl_monotime d = lease_deadline(granted_at, lease_ms);
    if (d <= l->deadline)
        return;
    list_remove(e, l);
    l->deadline = d;
    list_insert(e, l);
    arm_deadline_timer(e);
}

static void on_renew_reply(void *data, int status, hilock_reply *reply)
{
    renew_batch *b = data;
    hl_lease_engine *e = b->engine;
    /* A renewal the replicas did not acknowledge (replica policy) is
     * renewed on the master only: a failover could lose it, so the local
     * deadline stays where it was, and the lease is reported lost when it
     * passes unless a later renewal is acknowledged.  A "not held" in it
     * stands all the same. */
    bool acked = status == HILOCK_OK;
    if (status == HILOCK_ENOACK)
        status = HILOCK_OK;
    bool ok = status == HILOCK_OK && reply != NULL &&
              reply->type == HILOCK_REPLY_ARRAY &&
              reply->elements == (size_t)b->n;
    for (int i = 0; i < b->n; i++) {
        hl_lease *l = b->leases[i];
        l->batches--;
        if (l->stopped) {
            lease_free_if_unused(l);
            continue;
        }
        if (!ok)
            continue; /* the deadline decides */
        const hilock_reply *r = reply->element[i];
        bool held = r->type == HILOCK_REPLY_INTEGER && r->integer == 1;
        /* A release in flight may have freed the key already: only its
         * own answer says whether the lease was lost. */
        if (!held && l->releasing)
            continue;
        if (held) {
            if (b->verify)
                continue; /* checked: it keeps its deadline */
            if (!acked)
                continue;
            e->stats.renewed++;
            set_deadline(l, b->sent_at, e->watchdog_ms);
        } else {
            lease_lost(l, b->verify ? WHY_NOT_ON_NEW_MASTER : WHY_GONE);
        }
    }
    hilock_reply_free(reply);
    hl_free(b);
    e->stats.renewing--;
    /* Counted until here, so no lease freed above could free the engine. */
    e->batches--;
    engine_free_if_unused(e);
}

/* "<client id>:<owner>" for each lease of a batch, written when sent. */
typedef char owner_field[HILOCK_CLIENT_ID_LEN + 22];

typedef struct renew_send {
    hl_conn *conn;
    const hl_script *script;
    int nkeys;
    int argc;
    const char *const *argv;
    const size_t *lens;
} renew_send;

static int send_renew_now(void *ctx, hl_request_fn *fn, void *data)
{
    renew_send *s = ctx;
    return hl_script_run(s->conn, s->script, s->nkeys, s->argc, s->argv,
                         s->lens, fn, data);
}

/* Drop a batch that was not sent: the deadlines will tell if this keeps
 * failing. */
static void batch_unsent(renew_batch *b)
{
    for (int i = 0; i < b->n; i++)
        b->leases[i]->batches--;
    hl_free(b);
}

static void send_to(hl_lease_engine *e, renew_batch *b, hl_conn *conn)
{
    /* KEYS (a name, and with a delay its delay key, per lease), the
     * lease, the delay, the fields. */
    const char *argv[2 + 3 * HL_LEASE_BATCH];
    size_t lens[2 + 3 * HL_LEASE_BATCH];
    static _Thread_local owner_field fields[HL_LEASE_BATCH];
    char ttl[24], delay[24];
    int n = b->n, per = b->delayed ? 2 : 1;
    int nkeys = per * n, nargs = b->delayed ? 2 : 1;
    hl_aux_name *dkeys = NULL;
    if (b->delayed && (dkeys = hl_calloc((size_t)n, sizeof *dkeys)) == NULL) {
        batch_unsent(b);
        return;
    }
    bool made = true;
    for (int i = 0; i < n; i++) {
        hl_lease_subject l = e->subject(b->leases[i]);
        argv[per * i] = l.key;
        lens[per * i] = l.key_len;
        if (b->delayed) {
            made = made &&
                   l.kind->delay_key(l.key, l.key_len, &dkeys[i]) == 0;
            argv[2 * i + 1] = dkeys[i].s;
            lens[2 * i + 1] = dkeys[i].len;
        }
        memcpy(fields[i], e->client->id, HILOCK_CLIENT_ID_LEN);
        fields[i][HILOCK_CLIENT_ID_LEN] = ':';
        argv[nkeys + nargs + i] = fields[i];
        lens[nkeys + nargs + i] =
            HILOCK_CLIENT_ID_LEN + 1 +
            hl_u64_dec(fields[i] + HILOCK_CLIENT_ID_LEN + 1, l.owner);
    }
    snprintf(ttl, sizeof ttl, "%lld", (long long)b->ttl_ms);
    argv[nkeys] = ttl;
    lens[nkeys] = strlen(ttl);
    if (b->delayed) {
        snprintf(delay, sizeof delay, "%lld", (long long)e->delay_ms);
        argv[nkeys + 1] = delay;
        lens[nkeys + 1] = strlen(delay);
    }
    renew_send s = {conn, b->script, nkeys, nkeys + nargs + n, argv, lens};
    int rc = !made  ? HILOCK_ENOMEM
             : conn ? hl_ack_write(e->client, conn, send_renew_now, &s,
                                   on_renew_reply, b)
                    : HILOCK_ECLOSED;
    if (dkeys != NULL) {
        hl_aux_names_done(n, dkeys);
        hl_free(dkeys);
    }
    if (rc != HILOCK_OK) {
        batch_unsent(b);
        return;
    }
    e->batches++;
    e->stats.renew_calls++;
    e->stats.renewing++;
}

static bool renews_now(const hl_lease_engine *e, const hl_lease *l,
                       hl_monotime now)
{
    /* A lease being released is renewed too: a release can wait for
     * seconds (a slot in migration refuses it until the move ends), and
     * the hold must last until it runs, or it frees nothing and the
     * holder hears of a loss it did not cause. */
    if (!l->watchdog)
        return false;
    /* Held long enough: let it run out. */
    return !capped(e, l, now);
}

/* Send leases[0..n) (one script, and on a cluster one slot) in batches. */
static void send_run(hl_lease_engine *e, hl_lease **leases, size_t n,
                     hl_monotime round)
{
    hl_lease_subject first = e->subject(leases[0]);
    hl_conn *conn = hl_client_conn_for(e->client, first.key, first.key_len);
    for (size_t at = 0; at < n; at += HL_LEASE_BATCH) {
        renew_batch *b = hl_calloc(1, sizeof *b);
        if (b == NULL)
            return; /* these go without renewal this round */
        batch_init(b, e, leases[at], round, e->watchdog_ms);
        b->n = (int)(n - at < HL_LEASE_BATCH ? n - at : HL_LEASE_BATCH);
        for (int i = 0; i < b->n; i++) {
            b->leases[i] = leases[at + (size_t)i];
            b->leases[i]->batches++;
        }
        send_to(e, b, conn);
    }
}

/* A cluster runs a script only on keys of one slot (CROSSSLOT), so there
 * a round sends one call per slot and script, each to the slot's master,
 * where the calls to one master leave in one write.  A counting sort puts
 * the leases in slot order, however they lie in the deadline list: a
 * round stays linear in its leases, plus the slots. */
static void renew_by_slot(hl_lease_engine *e, hl_monotime round)
{
    size_t n = 0;
    for (hl_lease *l = e->running; l != NULL; l = l->next)
        n += renews_now(e, l, round);
    if (n == 0)
        return;
    hl_lease **order = hl_malloc(n * sizeof *order);
    uint32_t *next = hl_calloc(HL_CLUSTER_SLOTS + 1, sizeof *next);
    if (order == NULL || next == NULL) {
        /* No round this time; the deadlines tell if it keeps failing. */
        hl_free(order);
        hl_free(next);
        return;
    }
    for (hl_lease *l = e->running; l != NULL; l = l->next)
        if (renews_now(e, l, round))
            next[l->slot + 1]++;
    for (unsigned s = 1; s <= HL_CLUSTER_SLOTS; s++)
        next[s] += next[s - 1];
    for (hl_lease *l = e->running; l != NULL; l = l->next)
        if (renews_now(e, l, round))
            order[next[l->slot]++] = l;
    hl_free(next);
    /* Within a slot, one run per script: kinds may differ there. */
    for (size_t lo = 0; lo < n;) {
        size_t hi = lo + 1;
        while (hi < n && order[hi]->slot == order[lo]->slot)
            hi++;
        for (size_t done = lo; done < hi;) {
            const hl_script *script = renew_script(e, order[done]);
            size_t k = done;
            for (size_t i = done; i < hi; i++)
                if (renew_script(e, order[i]) == script) {
                    hl_lease *t = order[k];
                    order[k++] = order[i];
                    order[i] = t;
                }
            send_run(e, order + done, k - done, round);
            done = k;
        }
        lo = hi;
    }
    hl_free(order);
}

/* Renew every watched lease, one batch per renew script at a time (kinds
 * may share one).  A script's index names its open batch, so a lease costs
 * one array read whatever the number of kinds, and a round is linear in
 * its leases plus HL_SHA_SCRIPTS to send what is left open.  Scripts past
 * those with an index share one last slot, taking turns in it. */
static void renew_all(hl_lease_engine *e)
{
    /* Every renewal of the round counts from its start: a little early,
     * which is the safe side, and one deadline for all of them keeps
     * their reinsertion in the deadline list at its tail, in whatever
     * order the replies come back. */
    hl_monotime now = hl_monotime_now();
    if (e->client->cluster != NULL) {
        renew_by_slot(e, now);
        return;
    }
    renew_batch *open[HL_SHA_SCRIPTS + 1] = {0};
    bool short_of_memory = false;
    for (hl_lease *l = e->running; l != NULL; l = l->next) {
        if (!renews_now(e, l, now))
            continue;
        const hl_script *script = renew_script(e, l);
        renew_batch **slot =
            &open[script->index >= 0 ? script->index : HL_SHA_SCRIPTS];
        if (*slot != NULL && (*slot)->script != script) {
            /* A batch runs one script for all its leases. */
            send_to(e, *slot, e->client->conn);
            *slot = NULL;
        }
        if (*slot == NULL) {
            /* With no memory for a batch, the lease goes without renewal
             * this round and keeps its deadline; the batches already open
             * still go out, or their leases would stay counted as named by
             * a batch and never be given back. */
            if (short_of_memory ||
                (*slot = hl_calloc(1, sizeof **slot)) == NULL) {
                short_of_memory = true;
                continue;
            }
            batch_init(*slot, e, l, now, e->watchdog_ms);
        }
        renew_batch *b = *slot;
        b->leases[b->n++] = l;
        l->batches++;
        if (b->n == HL_LEASE_BATCH) {
            send_to(e, b, e->client->conn);
            *slot = NULL;
        }
    }
    for (int k = 0; k <= HL_SHA_SCRIPTS; k++)
        if (open[k] != NULL)
            send_to(e, open[k], e->client->conn);
}

/* A lease of a fixed time is never renewed, so nothing would notice its
 * grant missing on a new master until it ran out: each is checked on its
 * own, with its kind's renew script and the time it has left, which
 * leaves the server's expiry no earlier than the local deadline, and the
 * deadline where it was. */
static void verify_fixed(hl_lease_engine *e, hl_monotime now)
{
    for (hl_lease *l = e->running; l != NULL; l = l->next) {
        if (l->watchdog || l->releasing || l->deadline <= now)
            continue; /* the deadline timer reports an overdue one */
        int64_t left_ms = hl_sat_sub(l->deadline, now) / HL_MS(1);
        renew_batch *b = hl_calloc(1, sizeof *b);
        if (b == NULL)
            return; /* the rest keep their deadlines, as before */
        batch_init(b, e, l, now, left_ms > 0 ? left_ms : 1);
        b->verify = true;
        b->n = 1;
        b->leases[0] = l;
        l->batches++;
        hl_lease_subject s = e->subject(l);
        send_to(e, b, hl_client_conn_for(e->client, s.key, s.key_len));
    }
}

void hl_lease_engine_renew_now(hl_lease_engine *e) { renew_all(e); }

void hl_lease_engine_check_all(hl_lease_engine *e)
{
    renew_all(e);
    verify_fixed(e, hl_monotime_now());
}

static void arm_tick(hl_lease_engine *e, hl_monotime delay)
{
    e->tick_at = hl_sat_add(hl_monotime_now(), delay);
    hl_timer_arm(&e->tick, delay);
}

static void on_tick(hl_timer *t)
{
    hl_lease_engine *e = t->data;
    renew_all(e);
    if (e->watched > 0)
        arm_tick(e, HL_MS(e->watchdog_ms) / 3);
}

hl_lease_engine *hl_lease_engine_create(hilock_client *client,
                                        int64_t watchdog_ms,
                                        int64_t max_hold_ms,
                                        hl_lease_subject_fn *subject,
                                        hl_lease_lost_fn *on_lost,
                                        hl_lease_release_fn *on_release)
{
    hl_lease_engine *e = hl_calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    e->client = client;
    e->watchdog_ms = watchdog_ms;
    e->max_hold_ms = max_hold_ms;
    e->subject = subject;
    e->on_lost = on_lost;
    e->on_release = on_release;
    hl_timer_init(&e->tick, client->loop, on_tick, e);
    hl_timer_init(&e->deadline_timer, client->loop, on_deadline, e);
    return e;
}

void hl_lease_engine_free(hl_lease_engine *e)
{
    if (e == NULL)
        return;
    hl_timer_stop(&e->tick);
    hl_timer_stop(&e->deadline_timer);
    /* The owners still hold their lease pointers and stop them later; the
     * loop may be gone by then, so every timer stops now. */
    while (e->running)
        lease_detach(e->running);
    e->freed = true;
    engine_free_if_unused(e);
}

void hl_lease_start(hl_lease_engine *e, hl_lease *l, hl_monotime granted_at,
                    int64_t lease_ms)
{
    memset(l, 0, sizeof *l);
    l->engine = e;
    hl_lease_subject s = e->subject(l);
    l->slot = (uint16_t)hl_keyslot(s.key, s.key_len);
    l->started = granted_at;
    l->watchdog = lease_ms == 0;
    int64_t ms = l->watchdog ? e->watchdog_ms : lease_ms;
    l->deadline = lease_deadline(granted_at, ms);
    list_insert(e, l);
    arm_deadline_timer(e);
    e->stats.active++;
    e->allocated++;
    if (l->watchdog) {
        e->watched++;
        if (!e->tick.armed)
            arm_tick(e, HL_MS(e->watchdog_ms) / 3);
    }
}

void hl_lease_cap(hl_lease *l, hl_monotime granted_at, int64_t lease_ms)
{
    hl_lease_engine *e = l->engine;
    hl_monotime d = lease_deadline(granted_at, lease_ms);
    if (l->stopped || d >= l->deadline)
        return;
    list_remove(e, l);
    l->deadline = d;
    list_insert(e, l);
    arm_deadline_timer(e);
    if (!l->watchdog)
        return;
    /* The round that renews it comes halfway to the new deadline at the
     * latest; the rounds after keep their rhythm from there. */
    hl_monotime now = hl_monotime_now();
    hl_monotime half = d > now ? (d - now) / 2 : 0;
    if (!e->tick.armed || e->tick_at > hl_sat_add(now, half))
        arm_tick(e, half);
}

void hl_lease_regranted(hl_lease *l, hl_monotime granted_at,
                        int64_t lease_ms)
{
    if (l->stopped)
        return;
    int64_t ms = lease_ms == 0 ? l->engine->watchdog_ms : lease_ms;
    set_deadline(l, granted_at, ms);
}

void hl_lease_set_releasing(hl_lease *l, bool releasing)
{
    l->releasing = releasing;
    /* A deadline that passed while the release was in flight counts now. */
    if (!releasing && !l->stopped && hl_monotime_now() >= l->deadline)
        lease_lost(l, WHY_RELEASE_LATE);
}

void hl_lease_lose(hl_lease *l, const char *why) { lease_lost(l, why); }

bool hl_lease_stop(hl_lease *l)
{
    if (!l->stopped)
        lease_detach(l);
    if (l->owner_released)
        return false;
    l->owner_released = true;
    if (l->batches > 0)
        return false;
    hl_lease_engine *e = l->engine;
    e->allocated--;
    engine_free_if_unused(e);
    return true;
}

void hl_lease_engine_lose_all(hl_lease_engine *e)
{
    e->batches++;
    hl_lease *l;
    while (!e->freed && (l = first_due(e, INT64_MAX)) != NULL)
        lease_lost(l, WHY_ALL);
    e->batches--;
    if (e->freed)
        engine_free_if_unused(e);
}

static void leases_close(hilock_client *c)
{
    hl_lease_engine_free(c->leases);
    c->leases = NULL;
}

static void leases_stats(hilock_client *c, hilock_client_stats *out)
{
    if (c->leases == NULL)
        return;
    hl_lease_stats l = hl_lease_engine_stats(c->leases);
    out->leases_active = l.active;
    out->leases_renewed = l.renewed;
    out->leases_lost = l.lost;
    out->renew_calls = l.renew_calls;
}

/* A lease granted by a master that failed over may be missing on the
 * new one: its renewal, sent now rather than at its turn, finds out and
 * reports the loss. */
static void leases_master_changed(hilock_client *c)
{
    if (c->leases != NULL)
        hl_lease_engine_check_all(c->leases);
}

/* After the waiter registry, as the client always closed them. */
static const hl_client_part leases_part = {
    .rank = 2,
    .close = leases_close,
    .stats = leases_stats,
    .master_changed = leases_master_changed};

hl_lease_engine *hl_client_leases(hilock_client *c)
{
    if (c->leases != NULL || c->closed)
        return c->leases;
    c->leases = hl_lease_engine_create(c, c->opts->watchdog_timeout_ms,
                                       c->opts->max_hold_ms,
                                       hl_hold_lease_subject,
                                       hl_hold_lease_lost,
                                       hl_hold_lease_released);
    if (c->leases != NULL)
        c->leases->delay_ms = c->opts->lock_delay_ms;
    if (c->leases != NULL && hl_client_attach_part(c, &leases_part) != 0) {
        hl_lease_engine_free(c->leases);
        c->leases = NULL;
    }
    return c->leases;
}

void hl_client_leases_lost(hilock_client *c)
{
    if (c->leases)
        hl_lease_engine_lose_all(c->leases);
}

int64_t hl_lease_engine_watchdog_ms(const hl_lease_engine *e)
{
    return e->watchdog_ms;
}

hl_lease_stats hl_lease_engine_stats(const hl_lease_engine *e)
{
    return e->stats;
}
