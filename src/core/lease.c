#include "lease.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "client_internal.h"
#include "hilock/error.h"
#include "lockobj.h"
#include "options_internal.h"
#include "resp.h"

struct hl_lease {
    hl_lease_engine *engine;
    hl_lease *prev; /* in the engine's list of running leases */
    hl_lease *next;
    const hl_kind *kind;
    const char *key;
    size_t key_len;
    uint64_t owner;
    hl_timer deadline_timer;
    hl_monotime deadline;
    hl_monotime started;
    int64_t max_hold_ms;
    hl_lease_lost_fn *on_lost;
    void *data;
    int batches;    /* renewal batches in flight that name this lease */
    bool watchdog;
    bool releasing;
    bool stopped;   /* the owner let go */
};

struct hl_lease_engine {
    hilock_client *client;
    int64_t watchdog_ms;
    hl_timer tick;
    hl_lease *running; /* leases not yet lost or stopped */
    size_t watched;    /* how many of them the watchdog renews */
    hl_lease_stats stats;
    int batches;       /* batches in flight */
    size_t allocated;  /* lease structures not yet freed */
    bool freed;
};

typedef struct renew_batch {
    hl_lease_engine *engine;
    hl_monotime sent_at;
    int n;
    hl_lease *leases[HL_LEASE_BATCH];
} renew_batch;

static hl_monotime drift_margin(int64_t lease_ms)
{
    return HL_MS(lease_ms) / 100 + HL_MS(2);
}

static void engine_free_if_unused(hl_lease_engine *e)
{
    if (e->freed && e->batches == 0 && e->allocated == 0)
        hl_free(e);
}

static void lease_free_if_unused(hl_lease *l)
{
    if (l->stopped && l->batches == 0) {
        hl_lease_engine *e = l->engine;
        hl_free(l);
        e->allocated--;
        engine_free_if_unused(e);
    }
}

/* Take a lease off the running list and its timer: it will neither be
 * renewed nor reported again. */
static void lease_detach(hl_lease *l)
{
    hl_lease_engine *e = l->engine;
    hl_timer_stop(&l->deadline_timer);
    if (l->prev)
        l->prev->next = l->next;
    else if (e->running == l)
        e->running = l->next;
    if (l->next)
        l->next->prev = l->prev;
    l->prev = l->next = NULL;
    if (l->watchdog)
        e->watched--;
    e->stats.active--;
    l->stopped = true;
}

static void lease_lost(hl_lease *l)
{
    if (l->stopped)
        return;
    /* Detach first: the owner's callback ends with hl_lease_stop, which
     * must then only release memory. */
    lease_detach(l);
    l->engine->stats.lost++;
    l->batches++;
    l->on_lost(l, l->data);
    l->batches--;
    lease_free_if_unused(l);
}

static void on_deadline(hl_timer *t)
{
    hl_lease *l = t->data;
    if (l->releasing) {
        /* The release in flight decides; if it fails the owner stops the
         * lease itself. */
        return;
    }
    lease_lost(l);
}

static void set_deadline(hl_lease *l, hl_monotime granted_at,
                         int64_t lease_ms)
{
    hl_monotime d = granted_at + HL_MS(lease_ms) - drift_margin(lease_ms);
    if (d <= l->deadline && l->deadline_timer.armed)
        return;
    l->deadline = d;
    hl_timer_arm(&l->deadline_timer, d - hl_monotime_now());
}

static void on_renew_reply(void *data, int status, hilock_reply *reply)
{
    renew_batch *b = data;
    hl_lease_engine *e = b->engine;
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
        if (!ok || l->releasing)
            continue; /* the deadline decides, or the release does */
        const hilock_reply *r = reply->element[i];
        if (r->type == HILOCK_REPLY_INTEGER && r->integer == 1) {
            e->stats.renewed++;
            set_deadline(l, b->sent_at, e->watchdog_ms);
        } else {
            lease_lost(l);
        }
    }
    hilock_reply_free(reply);
    hl_free(b);
    /* Counted until here, so no lease freed above could free the engine. */
    e->batches--;
    engine_free_if_unused(e);
}

/* "<client id>:<owner>" for each lease of a batch, written when sent. */
typedef char owner_field[HILOCK_CLIENT_ID_LEN + 22];

static void send_batch(hl_lease_engine *e, renew_batch *b)
{
    const char *argv[1 + 2 * HL_LEASE_BATCH];
    size_t lens[1 + 2 * HL_LEASE_BATCH];
    static _Thread_local owner_field fields[HL_LEASE_BATCH];
    char ttl[24];
    int n = b->n;
    for (int i = 0; i < n; i++) {
        argv[i] = b->leases[i]->key;
        lens[i] = b->leases[i]->key_len;
        memcpy(fields[i], e->client->id, HILOCK_CLIENT_ID_LEN);
        fields[i][HILOCK_CLIENT_ID_LEN] = ':';
        argv[n + 1 + i] = fields[i];
        lens[n + 1 + i] = HILOCK_CLIENT_ID_LEN + 1 +
                          hl_u64_dec(fields[i] + HILOCK_CLIENT_ID_LEN + 1,
                                     b->leases[i]->owner);
    }
    snprintf(ttl, sizeof ttl, "%lld", (long long)e->watchdog_ms);
    argv[n] = ttl;
    lens[n] = strlen(ttl);
    hl_conn *conn = e->client->conn;
    b->sent_at = hl_monotime_now();
    int rc = conn ? hl_script_run(conn, b->leases[0]->kind->renew, n,
                                  2 * n + 1, argv, lens, on_renew_reply, b)
                  : HILOCK_ECLOSED;
    if (rc != HILOCK_OK) {
        /* Not sent: the deadlines will tell if this keeps failing. */
        for (int i = 0; i < n; i++)
            b->leases[i]->batches--;
        hl_free(b);
        return;
    }
    e->batches++;
    e->stats.renew_calls++;
}

/* Renew every watched lease, grouping leases of the same kind. */
static void renew_all(hl_lease_engine *e)
{
    hl_monotime now = hl_monotime_now();
    renew_batch *open[4] = {0}; /* one open batch per kind seen (few) */
    const hl_kind *kinds[4] = {0};
    for (hl_lease *l = e->running; l != NULL; l = l->next) {
        if (!l->watchdog || l->releasing)
            continue;
        if (l->max_hold_ms > 0 && now - l->started >= HL_MS(l->max_hold_ms))
            continue; /* held long enough: let it run out */
        int k = 0;
        while (k < 4 && kinds[k] != NULL && kinds[k] != l->kind)
            k++;
        if (k == 4) {
            /* More kinds than slots in one round: flush the first. */
            send_batch(e, open[0]);
            open[0] = NULL;
            kinds[0] = l->kind;
            k = 0;
        }
        kinds[k] = l->kind;
        if (open[k] == NULL) {
            open[k] = hl_calloc(1, sizeof *open[k]);
            if (open[k] == NULL)
                return;
            open[k]->engine = e;
        }
        open[k]->leases[open[k]->n++] = l;
        l->batches++;
        if (open[k]->n == HL_LEASE_BATCH) {
            send_batch(e, open[k]);
            open[k] = NULL;
        }
    }
    for (int k = 0; k < 4; k++)
        if (open[k] != NULL)
            send_batch(e, open[k]);
}

static void on_tick(hl_timer *t)
{
    hl_lease_engine *e = t->data;
    renew_all(e);
    if (e->watched > 0)
        hl_timer_arm(&e->tick, HL_MS(e->watchdog_ms) / 3);
}

hl_lease_engine *hl_lease_engine_create(hilock_client *client,
                                        int64_t watchdog_ms)
{
    hl_lease_engine *e = hl_calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    e->client = client;
    e->watchdog_ms = watchdog_ms;
    hl_timer_init(&e->tick, client->loop, on_tick, e);
    return e;
}

void hl_lease_engine_free(hl_lease_engine *e)
{
    if (e == NULL)
        return;
    hl_timer_stop(&e->tick);
    /* The owners still hold their lease pointers and stop them later; the
     * loop may be gone by then, so every timer stops now. */
    while (e->running)
        lease_detach(e->running);
    e->freed = true;
    engine_free_if_unused(e);
}

hl_lease *hl_lease_start(hl_lease_engine *e, const hl_kind *kind,
                         const char *key, size_t key_len, uint64_t owner,
                         hl_monotime granted_at, int64_t lease_ms,
                         int64_t max_hold_ms, hl_lease_lost_fn *fn,
                         void *data)
{
    hl_lease *l = hl_calloc(1, sizeof *l);
    if (l == NULL)
        return NULL;
    l->engine = e;
    l->kind = kind;
    l->key = key;
    l->key_len = key_len;
    l->owner = owner;
    l->started = granted_at;
    l->max_hold_ms = max_hold_ms;
    l->on_lost = fn;
    l->data = data;
    hl_timer_init(&l->deadline_timer, e->client->loop, on_deadline, l);
    l->watchdog = lease_ms == 0;
    set_deadline(l, granted_at, l->watchdog ? e->watchdog_ms : lease_ms);
    e->stats.active++;
    e->allocated++;
    l->next = e->running;
    if (e->running)
        e->running->prev = l;
    e->running = l;
    if (l->watchdog) {
        e->watched++;
        if (!e->tick.armed)
            hl_timer_arm(&e->tick, HL_MS(e->watchdog_ms) / 3);
    }
    return l;
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
        lease_lost(l);
}

void hl_lease_stop(hl_lease *l)
{
    if (l == NULL)
        return;
    if (!l->stopped)
        lease_detach(l);
    lease_free_if_unused(l);
}

bool hl_lease_is_watchdog(const hl_lease *l) { return l->watchdog; }

int64_t hl_lease_engine_watchdog_ms(const hl_lease_engine *e)
{
    return e->watchdog_ms;
}

hl_lease_stats hl_lease_engine_stats(const hl_lease_engine *e)
{
    return e->stats;
}

void hl_lease_engine_renew_now(hl_lease_engine *e) { renew_all(e); }
