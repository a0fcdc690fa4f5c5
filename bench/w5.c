/* W5 of WORKLOADS.md: C workers on one semaphore of 8 permits, on the
 * async API (a state machine per worker on the client's loop).  A cycle
 * takes 1 permit, counts itself inside (more than 8 is a violation),
 * yields, and gives the permit back; the wait is the time from the
 * acquire call to its callback.
 *
 * A worker is inside from its grant's callback to its release's callback.
 * Every call on one semaphore goes over the same connection, so the
 * callbacks come in the server's order, and the count the callbacks keep
 * never runs ahead of the server's: more than 8 inside would be more
 * than 8 permits granted at once.  (Counting out within the grant's own
 * callback, as W2's async workers do, would see one worker at a time,
 * since all callbacks run on the one loop thread.) */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define W5_PERMITS 8

typedef struct w5_ctx w5_ctx;

typedef struct w5_worker {
    w5_ctx *ctx;
    int64_t t0;
    int64_t *samples;
    size_t nsamples;
    size_t cap;
    uint64_t counted;
} w5_worker;

struct w5_ctx {
    hilock_semaphore *sem;
    int64_t window_start;
    int64_t window_end;
    atomic_int inside;
    atomic_int max_inside;
    atomic_uint_fast64_t violations;
    w5_worker *workers;
    pthread_mutex_t m;
    pthread_cond_t cv;
    int running;
    char error[256];
};

static void w5_stop(w5_worker *w, int status)
{
    w5_ctx *x = w->ctx;
    pthread_mutex_lock(&x->m);
    if (status != HILOCK_OK && x->error[0] == '\0')
        snprintf(x->error, sizeof x->error, "%s: %s",
                 hilock_errname(status), hilock_last_error());
    if (--x->running == 0)
        pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->m);
}

static void w5_cycle(w5_worker *w);

static void on_released(hilock_semaphore *s, int status, int64_t value,
                        void *data)
{
    (void)s;
    (void)value;
    w5_worker *w = data;
    atomic_fetch_sub(&w->ctx->inside, 1);
    if (status != HILOCK_OK) {
        w5_stop(w, status);
        return;
    }
    if (bench_now_us() >= w->ctx->window_end) {
        w5_stop(w, HILOCK_OK);
        return;
    }
    w5_cycle(w);
}

static void on_acquired(hilock_semaphore *s, int status, int64_t value,
                        void *data)
{
    (void)value;
    w5_worker *w = data;
    w5_ctx *x = w->ctx;
    if (status != HILOCK_OK) {
        w5_stop(w, status);
        return;
    }
    int64_t now = bench_now_us();
    int in = atomic_fetch_add(&x->inside, 1) + 1;
    if (in > W5_PERMITS)
        atomic_fetch_add(&x->violations, 1);
    int m = atomic_load(&x->max_inside);
    while (in > m && !atomic_compare_exchange_weak(&x->max_inside, &m, in))
        ;
    sched_yield();
    if (now >= x->window_start && now < x->window_end) {
        if (w->nsamples == w->cap) {
            w->cap = w->cap ? w->cap * 2 : 4096;
            w->samples = realloc(w->samples, w->cap * sizeof *w->samples);
            if (w->samples == NULL)
                abort();
        }
        w->samples[w->nsamples++] = now - w->t0;
        w->counted++;
    }
    int rc = hilock_semaphore_release_async(s, 1, on_released, w);
    if (rc != HILOCK_OK) {
        atomic_fetch_sub(&x->inside, 1);
        w5_stop(w, rc);
    }
}

static void w5_cycle(w5_worker *w)
{
    w->t0 = bench_now_us();
    int rc = hilock_semaphore_try_acquire_async(
        w->ctx->sem, 1, HILOCK_WAIT_FOREVER, on_acquired, w, NULL);
    if (rc != HILOCK_OK)
        w5_stop(w, rc);
}

int bench_run_w5(const bench_args *a, hilock_client *c, int concurrency,
                 bench_point *p)
{
    p->workload = "W5";
    p->concurrency = concurrency;
    p->api = "async";
    p->kind = "semaphore";
    p->notes = "one semaphore of 8 permits; a worker is inside from its "
               "grant's callback to its release's callback (one "
               "connection, server order); extra.max_inside is the most "
               "seen inside at once";
    w5_ctx *x = calloc(1, sizeof *x);
    if (x == NULL)
        return -1;
    pthread_mutex_init(&x->m, NULL);
    pthread_cond_init(&x->cv, NULL);
    char name[160];
    int n = snprintf(name, sizeof name, "bench:%s:hilock:w5", a->run_id);
    int rc = -1;
    if (bench_flush(a, c) != 0 ||
        hilock_semaphore_create_n(&x->sem, c, name, (size_t)n) != HILOCK_OK ||
        hilock_semaphore_set(x->sem, W5_PERMITS) != HILOCK_OK) {
        p->error = "set-up failed";
        goto out;
    }
    x->workers = calloc((size_t)concurrency, sizeof *x->workers);
    if (x->workers == NULL)
        goto out;
    x->window_start = bench_now_us() + (int64_t)(a->warmup_s * 1e6);
    x->window_end = x->window_start + (int64_t)(a->duration_s * 1e6);
    x->running = concurrency;
    for (int i = 0; i < concurrency; i++) {
        x->workers[i].ctx = x;
        w5_cycle(&x->workers[i]);
    }
    pthread_mutex_lock(&x->m);
    while (x->running > 0)
        pthread_cond_wait(&x->cv, &x->m);
    pthread_mutex_unlock(&x->m);

    size_t total = 0;
    uint64_t min = UINT64_MAX, max = 0;
    double sum = 0, sumsq = 0;
    for (int i = 0; i < concurrency; i++) {
        w5_worker *w = &x->workers[i];
        total += w->nsamples;
        min = w->counted < min ? w->counted : min;
        max = w->counted > max ? w->counted : max;
        sum += (double)w->counted;
        sumsq += (double)w->counted * (double)w->counted;
    }
    int64_t *all = malloc((total ? total : 1) * sizeof *all);
    if (all == NULL)
        abort();
    size_t k = 0;
    for (int i = 0; i < concurrency; i++) {
        memcpy(all + k, x->workers[i].samples,
               x->workers[i].nsamples * sizeof *all);
        k += x->workers[i].nsamples;
    }
    bench_sort(all, total);
    p->cycles_per_s = (double)total / a->duration_s;
    p->p50_us = bench_percentile(all, total, 50);
    p->p99_us = bench_percentile(all, total, 99);
    p->max_us = total ? all[total - 1] : 0;
    p->violations = atomic_load(&x->violations);
    p->max_inside = atomic_load(&x->max_inside);
    p->per_worker_min = min == UINT64_MAX ? 0 : min;
    p->per_worker_max = max;
    p->jain = sumsq > 0 ? sum * sum / ((double)concurrency * sumsq) : 0;
    free(all);
    if (x->error[0]) {
        static _Thread_local char error[256];
        snprintf(error, sizeof error, "%s", x->error);
        p->error = error;
    } else {
        rc = 0;
    }
out:
    if (x->sem)
        hilock_semaphore_destroy(x->sem);
    if (x->workers)
        for (int i = 0; i < concurrency; i++)
            free(x->workers[i].samples);
    free(x->workers);
    pthread_mutex_destroy(&x->m);
    pthread_cond_destroy(&x->cv);
    free(x);
    return rc;
}
