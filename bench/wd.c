/* WD: the watchdog at scale.  One client takes `leases` locks with the
 * watchdog and holds them for the duration; we measure the client's CPU
 * time and memory per lease, and check that no lease was lost and every
 * key is still alive on the server at the end. */
#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"

typedef struct wd_run {
    atomic_long acquired;
    atomic_long failed;
} wd_run;

static void on_acquired(hilock_lock *lock, int status,
                        const hilock_acquired *acquired, void *user_data)
{
    (void)lock;
    (void)acquired;
    wd_run *r = user_data;
    atomic_fetch_add(status == HILOCK_OK ? &r->acquired : &r->failed, 1);
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* Keys still alive: PTTL > 0 for every lock, checked in pipelined
 * batches through the async API. */
typedef struct ttl_check {
    atomic_long alive;
    atomic_long answered;
} ttl_check;

static void on_pttl(hilock_client *c, int status, hilock_reply *reply,
                    void *user_data)
{
    (void)c;
    ttl_check *t = user_data;
    if (status == HILOCK_OK && reply->type == HILOCK_REPLY_INTEGER &&
        reply->integer > 0)
        atomic_fetch_add(&t->alive, 1);
    atomic_fetch_add(&t->answered, 1);
    hilock_reply_free(reply);
}

int bench_run_wd(const bench_args *a, hilock_client *c, int leases)
{
    bench_flush(a, c);
    hilock_lock **locks = calloc((size_t)leases, sizeof *locks);
    wd_run run = {0};
    if (locks == NULL)
        return -1;
    /* Memory per lease is measured between the half-way point and the
     * end, so buffers that grow to their working size in the first half
     * (the pipeline's output buffer, the reply reader) cancel out. */
    size_t heap0 = 0;
    size_t name_bytes = 0;
    char name[128];
    for (int i = 0; i < leases; i++) {
        if (i == leases / 2) {
            while (atomic_load(&run.acquired) + atomic_load(&run.failed) <
                   i)
                usleep(1000);
            heap0 = heap_in_use();
            name_bytes = 0;
        }
        int n = snprintf(name, sizeof name, "bench:%s:wd:%d", a->run_id, i);
        name_bytes += (size_t)n;
        if (hilock_lock_create_n(&locks[i], c, name, (size_t)n) != HILOCK_OK)
            return -1;
        if (hilock_lock_acquire_async(locks[i], 1, 0, HILOCK_LEASE_WATCHDOG,
                                      0, on_acquired, &run,
                                      NULL) != HILOCK_OK)
            atomic_fetch_add(&run.failed, 1);
        /* Keep the backlog bounded so the measurement sees held leases,
         * not queued requests. */
        while (i - atomic_load(&run.acquired) - atomic_load(&run.failed) >
               5000)
            usleep(1000);
    }
    while (atomic_load(&run.acquired) + atomic_load(&run.failed) < leases)
        usleep(1000);
    hilock_stats st0 = {.size = sizeof st0};
    hilock_client_stats_read(c, &st0);
    hilock_client_stats s0 = st0.counters;
    size_t heap1 = heap_in_use();
    double cpu0 = cpu_seconds();
    int64_t t0 = bench_now_us();
    usleep((useconds_t)(a->duration_s * 1e6));
    double cpu = cpu_seconds() - cpu0;
    double wall = (double)(bench_now_us() - t0) / 1e6;
    hilock_stats st1 = {.size = sizeof st1};
    hilock_client_stats_read(c, &st1);
    hilock_client_stats s1 = st1.counters;

    ttl_check t = {0};
    for (int i = 0; i < leases; i++) {
        size_t len;
        const char *nm = hilock_lock_name(locks[i], &len);
        const char *argv[] = {"PTTL", nm};
        size_t lens[] = {4, len};
        if (hilock_client_command_async(c, 2, argv, lens, on_pttl, &t) !=
            HILOCK_OK)
            atomic_fetch_add(&t.answered, 1);
        while (i - atomic_load(&t.answered) > 5000)
            usleep(1000);
    }
    while (atomic_load(&t.answered) < leases)
        usleep(1000);

    char topology[64] = "";
    if (a->cluster != NULL)
        snprintf(topology, sizeof topology,
                 ",\"servers\":%d,\"topology\":\"cluster\"",
                 BENCH_CLUSTER_MASTERS);
    int measured = leases - leases / 2;
    double per_lease =
        ((double)heap1 - (double)heap0 - (double)name_bytes) / measured;
    printf("{\"peer\":\"hilock\",\"workload\":\"WD\",\"params\":{\"leases\":%d,"
           "\"duration_s\":%g,\"watchdog_ms\":%lld,\"kind\":\"reentrant\"%s},"
           "\"cycles_per_s\":%.1f,"
           "\"violations\":%ld,\"notes\":\"cycles_per_s counts confirmed "
           "renewals per second; cpu_pct is the whole process (client and "
           "its loop thread) over the window; bytes_per_lease is the heap growth "
           "over the second half of the leases, less their names\",\"extra\":{\"acquired\":%ld,"
           "\"lost\":%llu,\"renewed\":%llu,\"renew_calls\":%llu,"
           "\"alive_at_end\":%ld,\"cpu_pct\":%.2f,\"bytes_per_lease\":%.0f}}"
           "\n",
           leases, a->duration_s, (long long)a->watchdog_ms,
           topology,
           (double)(s1.leases_renewed - s0.leases_renewed) / wall,
           (long)(leases - atomic_load(&t.alive)),
           (long)atomic_load(&run.acquired),
           (unsigned long long)(s1.leases_lost - s0.leases_lost),
           (unsigned long long)(s1.leases_renewed - s0.leases_renewed),
           (unsigned long long)(s1.renew_calls - s0.renew_calls),
           (long)atomic_load(&t.alive), 100.0 * cpu / wall, per_lease);
    fflush(stdout);
    for (int i = 0; i < leases; i++)
        hilock_lock_destroy(locks[i]);
    free(locks);
    bench_flush(a, c);
    return 0;
}
