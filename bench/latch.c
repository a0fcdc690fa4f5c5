/* W6 of WORKLOADS.md, the latch fan-in: one waiter awaits a latch set to
 * 64 (C), and C workers count it down once each, started together.  A
 * round's sample is the time from the last count down returning to the
 * waiter waking; 200 rounds after one unmeasured.  The workers are C
 * async count downs issued back to back from one thread (the async API,
 * whose callbacks all run on the client's loop); the waiter is an async
 * await.  Both sides use the same client, as C workers of one service
 * would. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

#define W6_ROUNDS 200

typedef struct w6_round {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int downs_left;  /* count downs not yet returned */
    bool woken;
    int status;      /* the first failure, else HILOCK_OK */
    int64_t last_down_us;
    int64_t woken_us;
    bool opened;
} w6_round;

static void note_status(w6_round *r, int status)
{
    if (status != HILOCK_OK && r->status == HILOCK_OK)
        r->status = status;
}

static void on_down(hilock_latch *l, int status, int64_t left, void *data)
{
    (void)l;
    (void)left;
    w6_round *r = data;
    int64_t now = bench_now_us();
    pthread_mutex_lock(&r->m);
    note_status(r, status);
    if (now > r->last_down_us)
        r->last_down_us = now;
    if (--r->downs_left == 0 && r->woken)
        pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->m);
}

static void on_open(hilock_latch *l, int status, int64_t opened, void *data)
{
    (void)l;
    w6_round *r = data;
    int64_t now = bench_now_us();
    pthread_mutex_lock(&r->m);
    note_status(r, status);
    r->woken_us = now;
    r->woken = true;
    r->opened = opened == 1;
    if (r->downs_left == 0)
        pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->m);
}

static void pause_ms(int ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* One round; 0 with *sample set, or -1 with p->error set. */
static int round_once(hilock_latch *l, int workers, int64_t *sample,
                      bench_point *p)
{
    w6_round r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.m, NULL);
    pthread_cond_init(&r.cv, NULL);
    r.downs_left = workers;
    int rc = hilock_latch_try_set_count(l, workers, NULL);
    if (rc == HILOCK_OK)
        rc = hilock_latch_await_async(l, 30000, on_open, &r, NULL);
    if (rc != HILOCK_OK) {
        p->error = "setting the latch or starting the await failed";
        pthread_cond_destroy(&r.cv);
        pthread_mutex_destroy(&r.m);
        return -1;
    }
    /* Let the await's first read of the count (64) come back, so that
     * what is measured is the wake-up, not a read that happens to land
     * after the last count down. */
    pause_ms(2);
    int issued = 0;
    for (; issued < workers; issued++)
        if (hilock_latch_count_down_async(l, on_down, &r) != HILOCK_OK)
            break;
    pthread_mutex_lock(&r.m);
    r.downs_left -= workers - issued;
    while (!(r.woken && r.downs_left == 0))
        pthread_cond_wait(&r.cv, &r.m);
    pthread_mutex_unlock(&r.m);
    int st = r.status;
    bool ok = st == HILOCK_OK && issued == workers && r.opened;
    /* A waiter may see zero on a read that left before the last count
     * down's reply came back: that round waited for nothing. */
    *sample = r.woken_us > r.last_down_us ? r.woken_us - r.last_down_us : 0;
    pthread_cond_destroy(&r.cv);
    pthread_mutex_destroy(&r.m);
    if (!ok) {
        p->error = "a count down or the await failed";
        return -1;
    }
    return 0;
}

int bench_run_w6(const bench_args *a, hilock_client *c, int workers,
                 bench_point *p)
{
    p->workload = "W6";
    p->api = "async";
    p->kind = "latch";
    p->concurrency = workers;
    p->notes = "200 rounds after one unmeasured; --duration and --warmup "
               "do not apply; a sample is the time from the last count "
               "down returning to the waiter waking; cycles_per_s is "
               "rounds per second, set and pauses of 2 ms included";
    if (bench_flush(a, c) != 0) {
        p->error = "flush failed";
        return -1;
    }
    char name[128];
    snprintf(name, sizeof name, "bench:%s:hilock:w6", a->run_id);
    hilock_latch *l;
    if (hilock_latch_create(&l, c, name) != HILOCK_OK) {
        p->error = "latch handle";
        return -1;
    }
    int64_t *samples = calloc(W6_ROUNDS, sizeof *samples);
    int rc = samples ? 0 : -1;
    int64_t warm;
    if (rc == 0)
        rc = round_once(l, workers, &warm, p);
    int64_t t0 = bench_now_us();
    for (int i = 0; rc == 0 && i < W6_ROUNDS; i++)
        rc = round_once(l, workers, &samples[i], p);
    int64_t took = bench_now_us() - t0;
    if (rc == 0) {
        bench_sort(samples, W6_ROUNDS);
        p->p50_us = bench_percentile(samples, W6_ROUNDS, 50);
        p->p99_us = bench_percentile(samples, W6_ROUNDS, 99);
        p->max_us = samples[W6_ROUNDS - 1];
        p->cycles_per_s = took > 0 ? W6_ROUNDS * 1e6 / (double)took : 0;
    } else if (p->error == NULL) {
        p->error = "out of memory";
    }
    free(samples);
    hilock_latch_destroy(l);
    return rc;
}
