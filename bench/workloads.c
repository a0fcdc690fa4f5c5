/* W1, W2, W3 and W4 of WORKLOADS.md, on the async API (state machines on
 * the client's loop) or the sync API (one thread per worker).  W4 is W1
 * with RedLock locks (hilock_multilock) in place of single ones. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

enum { W1 = 1, W2, W3, W4 };
#define MAX_SEGMENTS 1024
#define STOCK_START 1000000000LL

typedef struct run_ctx run_ctx;

typedef struct worker {
    run_ctx *ctx;
    int id;
    uint64_t owner;
    uint64_t counted;
    int64_t *samples;
    size_t nsamples;
    size_t cap;
    int64_t t0;       /* acquire called */
    int64_t latency;  /* of the cycle under way */
    bool changed;     /* W2: this acquisition changed the owner */
    hilock_lock *lock;
    hilock_multilock *multi; /* W4 */
    int segment;
    int product;
    unsigned rng;
    uint64_t owner_changes;
    pthread_t thread;
} worker;

struct run_ctx {
    const bench_args *a;
    hilock_client *client;
    int workload;
    int concurrency;
    int segments;
    bool async;
    int64_t window_start;
    int64_t window_end;
    hilock_lock **locks; /* W1: one per worker; W2: one */
    int nlocks;
    hilock_segmented *segmented; /* W3 */
    hilock_redlock *rl;          /* W4 */
    hilock_multilock **multis;   /* W4: one per worker */
    atomic_int inside[MAX_SEGMENTS];
    atomic_uint_fast64_t violations;
    atomic_int last_owner;
    atomic_uint_fast64_t decrs;
    worker *workers;
    pthread_mutex_t m;
    pthread_cond_t cv;
    int running;
    char error[256];
};

static void worker_stop(worker *w, const char *error)
{
    run_ctx *x = w->ctx;
    pthread_mutex_lock(&x->m);
    if (error && x->error[0] == '\0')
        snprintf(x->error, sizeof x->error, "%s", error);
    if (--x->running == 0)
        pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->m);
}

static void record(worker *w)
{
    if (w->nsamples == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 4096;
        w->samples = realloc(w->samples, w->cap * sizeof *w->samples);
        if (w->samples == NULL)
            abort();
    }
    w->samples[w->nsamples++] = w->latency;
    w->counted++;
    if (w->changed)
        w->owner_changes++;
}

/* A cycle completed now: count it if inside the window.  Returns false
 * when the worker is done. */
static bool cycle_done(worker *w)
{
    int64_t now = bench_now_us();
    run_ctx *x = w->ctx;
    if (now >= x->window_start && now < x->window_end)
        record(w);
    return now < x->window_end;
}

static void pick_lock(worker *w)
{
    run_ctx *x = w->ctx;
    switch (x->workload) {
    case W1:
        w->lock = x->locks[w->id];
        break;
    case W4:
        w->multi = x->multis[w->id];
        break;
    case W2:
        w->lock = x->locks[0];
        break;
    case W3:
        w->product = (int)(rand_r(&w->rng) % (unsigned)x->a->products);
        w->segment = w->product % x->segments;
        w->lock = hilock_segmented_lock(x->segmented, (unsigned)w->segment);
        break;
    }
}

/* Enter the critical section: the exclusion check of W2 and W3. */
static void enter(worker *w)
{
    run_ctx *x = w->ctx;
    w->latency = bench_now_us() - w->t0;
    if (x->workload == W1 || x->workload == W4)
        return;
    int s = x->workload == W3 ? w->segment : 0;
    if (atomic_fetch_add(&x->inside[s], 1) + 1 > 1)
        atomic_fetch_add(&x->violations, 1);
    if (x->workload == W2) {
        int prev = atomic_exchange(&x->last_owner, w->id);
        w->changed = prev != w->id;
        sched_yield(); /* W2's critical section */
    }
}

static void leave(worker *w)
{
    run_ctx *x = w->ctx;
    if (x->workload == W1 || x->workload == W4)
        return;
    int s = x->workload == W3 ? w->segment : 0;
    atomic_fetch_sub(&x->inside[s], 1);
}

static int stock_key(const run_ctx *x, int product, char *buf, size_t cap)
{
    return snprintf(buf, cap, "bench:%s:hilock:w3:stock:%d", x->a->run_id,
                    product);
}

/* ---- async workers ---------------------------------------------------- */

static void async_cycle(worker *w);

static void released(worker *w, int status)
{
    if (status != HILOCK_OK) {
        worker_stop(w, hilock_last_error());
        return;
    }
    if (cycle_done(w))
        async_cycle(w);
    else
        worker_stop(w, NULL);
}

static void on_released(hilock_lock *lock, int status, int64_t value,
                        void *user_data)
{
    (void)lock;
    (void)value;
    released(user_data, status);
}

static void on_multi_released(hilock_multilock *m, int status,
                              void *user_data)
{
    (void)m;
    released(user_data, status);
}

static void async_release(worker *w)
{
    leave(w);
    int rc = w->ctx->workload == W4
                 ? hilock_multilock_release_async(w->multi, w->owner,
                                                  on_multi_released, w)
                 : hilock_lock_release_async(w->lock, w->owner, on_released,
                                             w);
    if (rc != HILOCK_OK)
        worker_stop(w, hilock_last_error());
}

static void on_decr(hilock_client *c, int status, hilock_reply *reply,
                    void *user_data)
{
    (void)c;
    worker *w = user_data;
    hilock_reply_free(reply);
    if (status == HILOCK_OK)
        atomic_fetch_add(&w->ctx->decrs, 1);
    async_release(w);
}

static void on_acquired(hilock_lock *lock, int status,
                        const hilock_acquired *acquired, void *user_data)
{
    (void)lock;
    (void)acquired;
    worker *w = user_data;
    if (status != HILOCK_OK) {
        worker_stop(w, hilock_last_error());
        return;
    }
    enter(w);
    run_ctx *x = w->ctx;
    if (x->workload == W3) {
        char key[160];
        int n = stock_key(x, w->product, key, sizeof key);
        const char *argv[] = {"DECR", key};
        size_t lens[] = {4, (size_t)n};
        if (hilock_client_command_async(x->client, 2, argv, lens, on_decr,
                                        w) != HILOCK_OK)
            async_release(w);
        return;
    }
    async_release(w);
}

static void on_multi_acquired(hilock_multilock *m, int status,
                              const hilock_multi_outcome *outcome,
                              void *user_data)
{
    (void)m;
    (void)outcome;
    worker *w = user_data;
    if (status != HILOCK_OK) {
        worker_stop(w, hilock_last_error());
        return;
    }
    enter(w);
    async_release(w);
}

static void async_cycle(worker *w)
{
    pick_lock(w);
    w->t0 = bench_now_us();
    int64_t lease = w->ctx->a->lease_ms;
    int rc = w->ctx->workload == W4
                 ? hilock_multilock_acquire_async(w->multi, w->owner,
                                                  HILOCK_WAIT_FOREVER, lease,
                                                  on_multi_acquired, w, NULL)
                 : hilock_lock_acquire_async(w->lock, w->owner,
                                             HILOCK_WAIT_FOREVER, lease, 0,
                                             on_acquired, w, NULL);
    if (rc != HILOCK_OK)
        worker_stop(w, hilock_last_error());
}

/* ---- sync workers ----------------------------------------------------- */

static void *sync_worker(void *arg)
{
    worker *w = arg;
    run_ctx *x = w->ctx;
    for (;;) {
        pick_lock(w);
        w->t0 = bench_now_us();
        int rc = x->workload == W4
                     ? hilock_multilock_try_acquire(w->multi,
                                                    HILOCK_WAIT_FOREVER,
                                                    x->a->lease_ms, NULL, 0,
                                                    NULL)
                     : hilock_lock_try_acquire(w->lock, HILOCK_WAIT_FOREVER,
                                               x->a->lease_ms);
        if (rc != HILOCK_OK) {
            worker_stop(w, hilock_last_error());
            return NULL;
        }
        enter(w);
        if (x->workload == W3) {
            char key[160];
            int n = stock_key(x, w->product, key, sizeof key);
            const char *argv[] = {"DECR", key};
            size_t lens[] = {4, (size_t)n};
            if (hilock_client_command(x->client, 2, argv, lens, NULL) ==
                HILOCK_OK)
                atomic_fetch_add(&x->decrs, 1);
        }
        leave(w);
        rc = x->workload == W4 ? hilock_multilock_release(w->multi)
                               : hilock_lock_release(w->lock);
        if (rc != HILOCK_OK) {
            worker_stop(w, hilock_last_error());
            return NULL;
        }
        if (!cycle_done(w)) {
            worker_stop(w, NULL);
            return NULL;
        }
    }
}

/* ---- the run ---------------------------------------------------------- */

static int make_locks(run_ctx *x)
{
    char name[160];
    if (x->workload == W4) {
        x->multis = calloc((size_t)x->concurrency, sizeof *x->multis);
        if (x->multis == NULL)
            return -1;
        for (int i = 0; i < x->concurrency; i++) {
            int n = snprintf(name, sizeof name, "bench:%s:hilock:w4:%d",
                             x->a->run_id, i);
            if (hilock_redlock_multilock_create_n(&x->multis[i], x->rl, name,
                                           (size_t)n) != HILOCK_OK)
                return -1;
        }
        return 0;
    }
    if (x->workload == W3) {
        /* The segment locks are "<name>:seg:<s>", WORKLOADS.md's names. */
        int n = snprintf(name, sizeof name, "bench:%s:hilock:w3",
                         x->a->run_id);
        return hilock_segmented_create_n(&x->segmented, x->client, name,
                                       (size_t)n, (unsigned)x->segments) ==
                       HILOCK_OK
                   ? 0
                   : -1;
    }
    int (*create)(hilock_lock **, hilock_client *, const char *, size_t) =
        strcmp(x->a->kind, "fair") == 0 ? hilock_fair_lock_create_n
                                        : hilock_lock_create_n;
    x->nlocks = x->workload == W1 ? x->concurrency : 1;
    x->locks = calloc((size_t)x->nlocks, sizeof *x->locks);
    if (x->locks == NULL)
        return -1;
    for (int i = 0; i < x->nlocks; i++) {
        int n = x->workload == W1
                    ? snprintf(name, sizeof name, "bench:%s:hilock:w1:%d",
                               x->a->run_id, i)
                    : snprintf(name, sizeof name, "bench:%s:hilock:w2",
                               x->a->run_id);
        if (create(&x->locks[i], x->client, name, (size_t)n) != HILOCK_OK)
            return -1;
    }
    return 0;
}

/* One SET per key: on a cluster the stock keys lie in many slots, which
 * no single MSET may span.  Outside the window, so its pace is free. */
static int preset_stock(run_ctx *x)
{
    char value[24];
    int vlen = snprintf(value, sizeof value, "%lld", STOCK_START);
    for (int i = 0; i < x->a->products; i++) {
        char key[160];
        int n = stock_key(x, i, key, sizeof key);
        const char *argv[] = {"SET", key, value};
        size_t lens[] = {3, (size_t)n, (size_t)vlen};
        if (hilock_client_command(x->client, 3, argv, lens, NULL) !=
            HILOCK_OK)
            return -1;
    }
    return 0;
}

static const char *check_stock(run_ctx *x)
{
    long long taken = 0;
    for (int i = 0; i < x->a->products; i++) {
        char key[160];
        int n = stock_key(x, i, key, sizeof key);
        const char *argv[] = {"GET", key};
        size_t lens[] = {3, (size_t)n};
        hilock_reply *r;
        if (hilock_client_command(x->client, 2, argv, lens, &r) != HILOCK_OK)
            return "MISMATCH";
        if (r->type == HILOCK_REPLY_STRING)
            taken += STOCK_START - strtoll(r->str, NULL, 10);
        hilock_reply_free(r);
    }
    return taken == (long long)atomic_load(&x->decrs) ? "ok" : "MISMATCH";
}

static void summarise(run_ctx *x, bench_point *p)
{
    size_t total = 0;
    uint64_t min = UINT64_MAX, max = 0, changes = 0;
    double sum = 0, sumsq = 0;
    for (int i = 0; i < x->concurrency; i++) {
        worker *w = &x->workers[i];
        total += w->nsamples;
        min = w->counted < min ? w->counted : min;
        max = w->counted > max ? w->counted : max;
        sum += (double)w->counted;
        sumsq += (double)w->counted * (double)w->counted;
        changes += w->owner_changes;
    }
    int64_t *all = malloc((total ? total : 1) * sizeof *all);
    if (all == NULL)
        abort();
    size_t k = 0;
    for (int i = 0; i < x->concurrency; i++) {
        memcpy(all + k, x->workers[i].samples,
               x->workers[i].nsamples * sizeof *all);
        k += x->workers[i].nsamples;
    }
    bench_sort(all, total);
    double duration = x->a->duration_s;
    p->cycles_per_s = (double)total / duration;
    p->p50_us = bench_percentile(all, total, 50);
    p->p99_us = bench_percentile(all, total, 99);
    p->max_us = total ? all[total - 1] : 0;
    p->violations = atomic_load(&x->violations);
    p->owner_changes_per_s = (double)changes / duration;
    p->per_worker_min = min == UINT64_MAX ? 0 : min;
    p->per_worker_max = max;
    p->jain = sumsq > 0 ? sum * sum / ((double)x->concurrency * sumsq) : 0;
    free(all);
}

/* Flush every server the point uses. */
static int flush_all(run_ctx *x)
{
    if (x->rl == NULL)
        return bench_flush(x->a, x->client);
    for (size_t i = 0; i < hilock_redlock_masters(x->rl); i++)
        if (bench_flush(NULL, hilock_redlock_client(x->rl, i)) != 0)
            return -1;
    return 0;
}

/* c for W1-W3, rl for W4. */
static int run(const bench_args *a, hilock_client *c, hilock_redlock *rl,
               int workload, int concurrency, int segments, const char *api,
               bench_point *p)
{
    run_ctx *x = calloc(1, sizeof *x);
    if (x == NULL)
        return -1;
    x->a = a;
    x->client = c;
    x->rl = rl;
    x->workload = workload;
    x->concurrency = concurrency;
    x->segments = segments > 0 ? segments : 1;
    x->async = strcmp(api, "async") == 0;
    atomic_init(&x->last_owner, -1);
    pthread_mutex_init(&x->m, NULL);
    pthread_cond_init(&x->cv, NULL);
    p->concurrency = concurrency;
    p->segments = segments;
    p->api = api;
    int rc = -1;
    if (flush_all(x) != 0 || make_locks(x) != 0 ||
        (workload == W3 && preset_stock(x) != 0)) {
        p->error = "set-up failed";
        goto out;
    }
    x->workers = calloc((size_t)concurrency, sizeof *x->workers);
    if (x->workers == NULL)
        goto out;
    int64_t start = bench_now_us();
    x->window_start = start + (int64_t)(a->warmup_s * 1e6);
    x->window_end = x->window_start + (int64_t)(a->duration_s * 1e6);
    x->running = concurrency;
    for (int i = 0; i < concurrency; i++) {
        worker *w = &x->workers[i];
        w->ctx = x;
        w->id = i;
        w->owner = (uint64_t)i + 1;
        w->rng = (unsigned)i * 2654435761u + 1;
        if (x->async)
            async_cycle(w);
        else if (pthread_create(&w->thread, NULL, sync_worker, w) != 0)
            worker_stop(w, "cannot start a thread");
    }
    pthread_mutex_lock(&x->m);
    while (x->running > 0)
        pthread_cond_wait(&x->cv, &x->m);
    pthread_mutex_unlock(&x->m);
    if (!x->async)
        for (int i = 0; i < concurrency; i++)
            pthread_join(x->workers[i].thread, NULL);
    summarise(x, p);
    if (workload == W3)
        p->stock_check = check_stock(x);
    if (workload == W3 && a->cluster != NULL)
        p->segments_known = bench_cluster_segments(
                                a, x->segmented, p->segments_per_master) == 0;
    if (x->error[0]) {
        static _Thread_local char error[256];
        snprintf(error, sizeof error, "%s", x->error);
        p->error = error;
    } else {
        rc = 0;
    }
out:
    for (int i = 0; i < x->nlocks; i++)
        if (x->locks && x->locks[i])
            hilock_lock_destroy(x->locks[i]);
    free(x->locks);
    for (int i = 0; x->multis && i < concurrency; i++)
        if (x->multis[i])
            hilock_multilock_destroy(x->multis[i]);
    free(x->multis);
    if (x->segmented)
        hilock_segmented_destroy(x->segmented);
    if (x->workers)
        for (int i = 0; i < concurrency; i++)
            free(x->workers[i].samples);
    free(x->workers);
    pthread_mutex_destroy(&x->m);
    pthread_cond_destroy(&x->cv);
    free(x);
    return rc;
}

int bench_run_w1(const bench_args *a, hilock_client *c, int concurrency,
                 const char *api, bench_point *p)
{
    p->workload = "W1";
    return run(a, c, NULL, W1, concurrency, 0, api, p);
}

int bench_run_w2(const bench_args *a, hilock_client *c, int concurrency,
                 const char *api, bench_point *p)
{
    p->workload = "W2";
    return run(a, c, NULL, W2, concurrency, 0, api, p);
}

int bench_run_w3(const bench_args *a, hilock_client *c, int concurrency,
                 int segments, const char *api, bench_point *p)
{
    p->workload = "W3";
    /* Segmented locks are reentrant ones; --kind does not apply. */
    p->kind = "reentrant";
    if (segments > MAX_SEGMENTS) {
        p->error = "too many segments";
        return -1;
    }
    return run(a, c, NULL, W3, concurrency, segments, api, p);
}

/* Until every master votes.  A master that has been up for less than the
 * quarantine (here the lease) when its client connects does not count
 * toward a quorum for the rest of that time; a point measured meanwhile
 * would measure a RedLock of fewer masters.  A probe lock is taken with a
 * single attempt until no master's answer was set aside for quarantine. */
static int wait_votes(const bench_args *a, hilock_redlock *rl)
{
    char name[160];
    int n = snprintf(name, sizeof name, "bench:%s:hilock:w4:probe",
                     a->run_id);
    hilock_multilock *probe;
    if (hilock_redlock_multilock_create_n(&probe, rl, name, (size_t)n) !=
        HILOCK_OK)
        return -1;
    size_t masters = hilock_redlock_masters(rl);
    hilock_member_result results[HILOCK_MAX_MEMBERS];
    /* The quarantine is the lease from the server's start at most, and
     * uptime is read in whole seconds: one more second covers that. */
    int64_t deadline = bench_now_us() + (a->lease_ms + 1000) * 1000 +
                       10 * 1000000LL;
    bool announced = false;
    int rc = -1;
    while (bench_now_us() < deadline) {
        memset(results, 0, sizeof results);
        int st = hilock_multilock_try_acquire(probe, 0, a->lease_ms, results,
                                              sizeof *results, NULL);
        if (st == HILOCK_OK)
            hilock_multilock_release(probe);
        size_t quarantined = 0;
        for (size_t i = 0; i < masters; i++)
            quarantined += results[i].quarantined;
        if (st == HILOCK_OK && quarantined == 0) {
            rc = 0;
            break;
        }
        if (!announced) {
            fprintf(stderr, "hilock-bench: W4: waiting for the masters' "
                            "quarantine (%lld ms) to pass\n",
                    (long long)a->lease_ms);
            announced = true;
        }
        struct timespec step = {0, 20 * 1000 * 1000};
        nanosleep(&step, NULL);
    }
    hilock_multilock_destroy(probe);
    return rc;
}

int bench_run_w4(const bench_args *a, hilock_redlock *rl, int concurrency,
                 const char *api, bench_point *p)
{
    p->workload = "W4";
    /* RedLock takes a reentrant lock on each master. */
    p->kind = "reentrant";
    p->servers = (int)hilock_redlock_masters(rl);
    static _Thread_local char notes[320];
    snprintf(notes, sizeof notes,
             "RedLock over %d masters, quorum %d, their clients on one loop "
             "thread; quarantine = lease (%lld ms), measured once every "
             "master voted; node timeout %d ms",
             p->servers, p->servers / 2 + 1, (long long)a->lease_ms,
             HILOCK_DEFAULT_NODE_TIMEOUT_MS);
    p->notes = notes;
    if (wait_votes(a, rl) != 0) {
        p->error = "the masters never all voted";
        return -1;
    }
    return run(a, NULL, rl, W4, concurrency, 0, api, p);
}
