/* Statistics and the JSON lines of hilock-bench. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

int64_t bench_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void bench_sort(int64_t *samples, size_t n)
{
    qsort(samples, n, sizeof *samples, cmp_i64);
}

int64_t bench_percentile(const int64_t *sorted, size_t n, double p)
{
    if (n == 0)
        return 0;
    /* Nearest rank: sorted[ceil(p/100 * n) - 1]. */
    double rank = p / 100.0 * (double)n;
    size_t k = (size_t)rank;
    if ((double)k < rank)
        k++;
    if (k == 0)
        k = 1;
    return sorted[k - 1];
}

void bench_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void print_params(const bench_args *a, const bench_point *p)
{
    printf("\"params\":{\"C\":%d,\"duration_s\":%g,\"warmup_s\":%g,"
           "\"lease_ms\":%lld,\"retry_ms\":%lld,\"procs\":%d,\"servers\":%d,",
           p->concurrency, a->duration_s, a->warmup_s,
           (long long)a->lease_ms, (long long)a->retry_ms,
           p->procs > 0 ? p->procs : 1,
           a->cluster       ? BENCH_CLUSTER_MASTERS
           : p->servers > 0 ? p->servers
                            : 1);
    if (a->cluster != NULL)
        printf("\"topology\":\"cluster\",\"replicas\":%d,\"ack\":\"%s\",",
               a->cluster_replicas,
               a->cluster_ack ? a->cluster_ack : "default");
    else if (a->replicas > 0)
        printf("\"topology\":\"replicated\",\"replicas\":%d,\"ack\":\"%s\",",
               a->replicas, a->ack);
    printf("\"kind\":");
    bench_json_string(stdout, p->kind ? p->kind : a->kind);
    printf(",\"api\":");
    bench_json_string(stdout, p->api);
    printf(",\"busy_poll_us\":%lld", (long long)a->busy_poll_us);
    if (strcmp(p->workload, "W3") == 0)
        printf(",\"S\":%d,\"products\":%d", p->segments, a->products);
    if (strcmp(p->workload, "W8") == 0)
        printf(",\"pace_us\":%lld", (long long)p->pace_us);
    printf("}");
}

void bench_print_point(const bench_args *a, const bench_point *p)
{
    printf("{\"peer\":\"hilock\",\"workload\":");
    bench_json_string(stdout, p->workload);
    printf(",");
    print_params(a, p);
    if (p->error) {
        printf(",\"error\":");
        bench_json_string(stdout, p->error);
        printf("}\n");
        fflush(stdout);
        return;
    }
    printf(",\"cycles_per_s\":%.1f,\"p50_us\":%lld,\"p99_us\":%lld,"
           "\"violations\":%llu,\"notes\":",
           p->cycles_per_s, (long long)p->p50_us, (long long)p->p99_us,
           (unsigned long long)p->violations);
    int servers = p->servers > 0 ? p->servers : 1;
    char notes[1536];
    if (a->cluster != NULL)
        snprintf(notes, sizeof notes,
                 "waits by pub/sub notification; --retry-ms is accepted and "
                 "ignored; a private Redis Cluster of %d masters with %d "
                 "replicas each; one cluster client: %d command connections "
                 "(auto-pipelined) and one pub/sub connection to the seed "
                 "node, and one command connection per master; vs_single is "
                 "cycles_per_s over the single-node point of this run with "
                 "the same workload, kind, C, S and api%s%s",
                 BENCH_CLUSTER_MASTERS, a->cluster_replicas,
                 a->connections, p->notes ? "; " : "",
                 p->notes ? p->notes : "");
    else if (a->replicas > 0)
        snprintf(notes, sizeof notes,
                 "waits by pub/sub notification; --retry-ms is accepted and "
                 "ignored; a private master with %d replicas (no "
                 "sentinels), lock writes under replicas=%s; "
                 "one client on the master: %d command connections "
                 "(auto-pipelined) and one pub/sub connection%s%s",
                 a->replicas, a->ack, a->connections, p->notes ? "; " : "",
                 p->notes ? p->notes : "");
    else if (p->procs > 0 && bench_point_on_floor(p))
        snprintf(notes, sizeof notes,
                 "no library: %d process%s, each with two plain blocking "
                 "sockets, one subscribed to its channel and one that "
                 "passes the token on with PUBLISH, and %s%s%s",
                 p->procs, p->procs == 1 ? "" : "es",
                 strcmp(p->kind, "floor") == 0
                     ? "one thread"
                     : "a loop thread that owns them and wakes a second "
                       "thread, asleep on a futex, with the token; the "
                       "second hands the pass back through an eventfd and "
                       "sleeps until the loop thread has its answer",
                 p->notes ? "; " : "", p->notes ? p->notes : "");
    else if (p->procs > 0)
        snprintf(notes, sizeof notes,
                 "waits by pub/sub notification; --retry-ms is accepted and "
                 "ignored; %d process%s, each with a client of its own made "
                 "after the fork: %d command connections (auto-pipelined) "
                 "and one pub/sub connection%s%s",
                 p->procs, p->procs == 1 ? "" : "es", a->connections,
                 p->notes ? "; " : "", p->notes ? p->notes : "");
    else
        snprintf(notes, sizeof notes,
                 "waits by pub/sub notification; --retry-ms is accepted and "
                 "ignored; %s: %d command connections (auto-pipelined) "
                 "and one pub/sub connection%s%s",
                 servers > 1 ? "one client per server" : "one client",
                 a->connections, p->notes ? "; " : "",
                 p->notes ? p->notes : "");
    bench_json_string(stdout, notes);
    printf(",\"extra\":{\"owner_changes_per_s\":%.1f,\"per_worker_min\":%llu,"
           "\"per_worker_max\":%llu,\"jain\":%.4f,\"max_us\":%lld,"
           "\"connections\":%d",
           p->owner_changes_per_s, (unsigned long long)p->per_worker_min,
           (unsigned long long)p->per_worker_max, p->jain,
           (long long)p->max_us,
           a->cluster     ? a->connections + 1 + BENCH_CLUSTER_MASTERS
           : p->procs > 0 && bench_point_on_floor(p) ? p->procs * 2
           : p->procs > 0 ? p->procs * (a->connections + 1)
                          : servers * (a->connections + 1));
    if (a->cluster != NULL && p->single_cycles_per_s > 0)
        printf(",\"single_cycles_per_s\":%.1f,\"vs_single\":%.3f",
               p->single_cycles_per_s,
               p->cycles_per_s / p->single_cycles_per_s);
    if (p->segments_known) {
        printf(",\"segments_per_master\":[");
        for (int i = 0; i < BENCH_CLUSTER_MASTERS; i++)
            printf("%s%d", i ? "," : "", p->segments_per_master[i]);
        printf("]");
    }
    if (p->workload != NULL && strcmp(p->workload, "W5") == 0)
        printf(",\"max_inside\":%d", p->max_inside);
    if (p->procs > 0) {
        printf(",\"handoffs\":%llu,\"handoff_basis\":",
               (unsigned long long)p->handoffs);
        bench_json_string(stdout, p->handoff_basis ? p->handoff_basis : "");
        printf(",\"scripts\":%llu,\"server_cpu_us\":%.0f",
               (unsigned long long)p->scripts, p->server_cpu_us);
        /* No hand-off in the window: nothing to divide by. */
        if (p->handoffs > 0)
            printf(",\"scripts_per_handoff\":%.2f,"
                   "\"server_cpu_us_per_handoff\":%.1f",
                   (double)p->scripts / (double)p->handoffs,
                   p->server_cpu_us / (double)p->handoffs);
        else
            printf(",\"scripts_per_handoff\":null,"
                   "\"server_cpu_us_per_handoff\":null");
        printf(",\"samples_dropped\":%llu",
               (unsigned long long)p->samples_dropped);
        if (strcmp(p->workload, "W8") == 0)
            printf(",\"wakeups\":%llu", (unsigned long long)p->wakeups);
    }
    if (p->stock_check) {
        printf(",\"stock_check\":");
        bench_json_string(stdout, p->stock_check);
    }
    printf("}}\n");
    fflush(stdout);
}

void bench_print_ceiling(const bench_args *a, const char *what, int clients,
                         int pipeline, long requests, double rps,
                         const char *error)
{
    (void)a;
    printf("{\"peer\":\"redis-benchmark\",\"workload\":\"ceiling:%s\","
           "\"params\":{\"C\":%d,\"P\":%d,\"n\":%ld}",
           what, clients, pipeline, requests);
    if (error) {
        printf(",\"error\":");
        bench_json_string(stdout, error);
    } else {
        printf(",\"cycles_per_s\":%.1f,\"notes\":\"requests per second\"",
               rps);
    }
    printf("}\n");
    fflush(stdout);
}
