/* W8, the condition variable: a bounded buffer of W8_SLOTS items, kept in
 * memory the processes share and guarded by one reentrant lock, with the
 * conditions not-empty and not-full (hilock_cond).  Half the processes
 * produce, half consume, each with a client of its own; the processes
 * are W7's, forked by its runner (bench/w7.c).  Flat out, the lock's
 * hand-offs bound the rate and the buffer seldom runs empty or full, so
 * a second point paces the producers (work outside the lock between
 * items) and the consumers wait for nearly every item.
 *
 * An item is counted when a consumer takes it inside the window.  A
 * wake-up is the time from the latest signal of a condition to the
 * return, holding the lock again, of a wait on it that a signal ended:
 * with several signals close together it is measured from the last, so
 * it is a lower bound.  The buffer's count and the number of processes
 * inside the lock are checked at every step: a count out of 0..W8_SLOTS
 * or two processes inside are violations. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "procs.h"

#define W8_SLOTS 16
/* A wait gives up this often to look at the clock, so that every
 * process leaves soon after the window. */
#define W8_WAIT_MS 500

typedef struct w8_worker {
    hilock_client *client;
    hilock_lock *lock;
    hilock_cond *cond[2]; /* 0: not empty, 1: not full */
} w8_worker;

static void w8_close(w8_worker *w)
{
    for (int i = 0; i < 2; i++)
        hilock_cond_destroy(w->cond[i]);
    if (w->lock != NULL)
        hilock_lock_destroy(w->lock);
    if (w->client != NULL)
        hilock_client_destroy(w->client);
}

static int w8_open(w8_worker *w, const w7_request *rq, char *error,
                   size_t cap)
{
    if (bench_procs_client(rq, &w->client, error, cap) != 0)
        return -1;
    char name[160];
    snprintf(name, sizeof name, "bench:%s:hilock:w8", rq->run_id);
    int rc = hilock_lock_create(&w->lock, w->client, name);
    if (rc == HILOCK_OK)
        rc = hilock_cond_create(&w->cond[0], w->lock, "not-empty");
    if (rc == HILOCK_OK)
        rc = hilock_cond_create(&w->cond[1], w->lock, "not-full");
    if (rc != HILOCK_OK) {
        snprintf(error, cap, "set-up: %s: %s", hilock_errname(rc),
                 hilock_last_error());
        return -1;
    }
    return 0;
}

static void pace(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Inside the lock: count a second process inside, or a buffer out of
 * its bounds, as a violation. */
static void enter(w7_shared *sh)
{
    int n = atomic_load(&sh->count);
    if (atomic_fetch_add(&sh->inside, 1) + 1 > 1 || n < 0 || n > W8_SLOTS)
        atomic_fetch_add(&sh->violations, 1);
}

static void leave(w7_shared *sh) { atomic_fetch_sub(&sh->inside, 1); }

_Noreturn void bench_w8_worker(const w7_request *rq, w7_shared *sh, int me,
                               int gate)
{
    w7_slot *slot = &sh->slots[me];
    w8_worker w = {0};
    if (w8_open(&w, rq, slot->error, sizeof slot->error) != 0)
        _exit(1);
    if (!bench_procs_start(sh, gate)) {
        w8_close(&w);
        _exit(0);
    }
    /* The first half produces: it waits while the buffer is full, and
     * then signals not-empty; the second half the other way round. */
    bool producer = me < rq->procs / 2;
    int wait_on = producer ? 1 : 0, signal_on = producer ? 0 : 1;
    int64_t start = sh->window_start, end = sh->window_end;
    uint64_t counted = 0;
    const char *failed = NULL;
    int rc = HILOCK_OK;
    while (bench_now_us() < end && atomic_load(&sh->go) == 1) {
        if ((rc = hilock_lock_acquire(w.lock)) != HILOCK_OK) {
            failed = "acquire";
            break;
        }
        enter(sh);
        bool holding = true;
        /* Wait while the buffer cannot take this step. */
        while (producer ? atomic_load(&sh->count) >= W8_SLOTS
                        : atomic_load(&sh->count) <= 0) {
            if (bench_now_us() >= end)
                break;
            leave(sh);
            rc = hilock_cond_wait(w.cond[wait_on], W8_WAIT_MS);
            if (rc != HILOCK_OK) {
                /* Not held: on a timeout, take it again and look. */
                holding = false;
                if (rc != HILOCK_ETIMEDOUT)
                    failed = "wait";
                break;
            }
            int64_t now = bench_now_us();
            enter(sh);
            long long at = atomic_load(&sh->signalled_at[wait_on]);
            if (now >= start && now < end && at > 0) {
                long long k = atomic_fetch_add(&sh->nsamples, 1);
                if (k < sh->cap)
                    sh->samples[k] = now - at;
            }
        }
        if (failed != NULL)
            break;
        if (!holding)
            continue;
        if (producer ? atomic_load(&sh->count) >= W8_SLOTS
                     : atomic_load(&sh->count) <= 0) {
            /* The window is over. */
            leave(sh);
            (void)hilock_lock_release(w.lock);
            break;
        }
        int64_t now = bench_now_us();
        if (producer) {
            atomic_fetch_add(&sh->count, 1);
        } else {
            atomic_fetch_sub(&sh->count, 1);
            if (now >= start && now < end)
                counted++;
        }
        atomic_store(&sh->signalled_at[signal_on], now);
        leave(sh);
        if ((rc = hilock_cond_signal(w.cond[signal_on], NULL)) !=
            HILOCK_OK) {
            failed = "signal";
            break;
        }
        if ((rc = hilock_lock_release(w.lock)) != HILOCK_OK) {
            failed = "release";
            break;
        }
        if (producer && rq->pace_us > 0)
            pace(rq->pace_us);
    }
    if (failed != NULL) {
        snprintf(slot->error, sizeof slot->error, "%s: %s: %s", failed,
                 hilock_errname(rc), hilock_last_error());
        _exit(1);
    }
    slot->counted = counted;
    w8_close(&w);
    _exit(0);
}

int bench_run_w8(const bench_args *a, hilock_client *c, int procs,
                 int64_t pace_us, bench_point *p)
{
    static _Thread_local char error[256];
    p->workload = "W8";
    p->concurrency = procs;
    p->procs = procs;
    p->api = "sync";
    p->kind = "reentrant";
    p->pace_us = pace_us;
    p->notes = "a bounded buffer of 16 items in shared memory under one "
               "reentrant lock with the watchdog lease, half the processes "
               "producing and half consuming, waiting on the conditions "
               "not-full and not-empty (hilock_cond); cycles are the items "
               "consumed; p50/p99/max are wake-ups, from the latest signal "
               "of the condition to the wait's return holding the lock; "
               "scripts and server CPU per item from INFO; pace_us: a "
               "producer's work between its items, outside the lock (0: "
               "flat out, when the lock's hand-offs bound the rate and "
               "few waits happen)";
    if (procs < 2 || procs > W7_MAX_PROCS || procs % 2 != 0) {
        p->error = "W8 takes an even number of processes, 2 to 1024";
        return -1;
    }
    if (bench_flush(a, c) != 0) {
        p->error = "set-up failed";
        return -1;
    }
    w7_request rq = {.workload = "W8",
                     .port = a->server_port,
                     .procs = procs,
                     .busy_poll_us = a->busy_poll_us,
                     .duration_s = a->duration_s,
                     .warmup_s = a->warmup_s,
                     .pace_us = pace_us};
    snprintf(rq.host, sizeof rq.host, "%s", a->host);
    snprintf(rq.run_id, sizeof rq.run_id, "%s", a->run_id);
    snprintf(rq.kind, sizeof rq.kind, "reentrant");
    w7_result res;
    if (bench_procs_run(&rq, &res, error, sizeof error) != 0) {
        p->error = error;
        return -1;
    }
    bench_procs_fill(p, &res, a->duration_s);
    p->wakeups = res.samples;
    p->handoff_basis = "items";
    p->handoffs = res.cycles;
    return 0;
}
