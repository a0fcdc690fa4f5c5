/* hilock-bench: the workloads of WORKLOADS.md.  One JSON line per point on
 * stdout; everything else on stderr. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "redis_server.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hilock-bench [--workload W1|W2|W3|W4|W5|W6|W7|W8|WD]\n"
            "  [--concurrency C]\n"
            "  [--duration S] [--warmup S] [--lease-ms N] [--retry-ms N]\n"
            "  [--host H] [--port P] [--ports P1,...,P5] [--segments S]\n"
            "  [--products N] [--run-id ID]\n"
            "  [--kind reentrant|fair|rwlock|semaphore|floor|floor-loop]\n"
            "  [--api async|sync] [--no-ceiling] [--watchdog-ms N]\n"
            "  [--connections N] [--busy-poll-us N] [--wd-leases N]\n"
            "  [--wd-duration S] [--cluster] [--cluster-replicas N]\n"
            "  [--replicas N --ack none|one|majority|all]\n"
            "  [--cluster-ack none|one|majority|all] [--w7-windows K]\n"
            "--kind is the lock kind of W1 and W2 (default reentrant); W3\n"
            "always takes reentrant segment locks, WD reentrant leases.\n"
            "WD holds C (default 100000) watchdog leases for --duration.\n"
            "W4 is W1 over RedLock on 5 masters: --ports names them, else\n"
            "5 private redis-servers; a master votes once it has been up\n"
            "for the quarantine, which is set to the lease.\n"
            "Without --workload: the ceiling rows; W1, W4, W2 and W3 at\n"
            "their standard points; again with busy polling; and WD\n"
            "(--wd-leases, 0 to skip, for --wd-duration).  Without --port:\n"
            "a private redis-server on a free loopback port.\n"
            "--cluster: after those points, W1, W2, W3 and WD (or\n"
            "--workload's points) again on a private Redis Cluster of 3\n"
            "masters with a replica each (--cluster-replicas: N each);\n"
            "each cluster line carries its ratio to the single-node\n"
            "point of the run (extra.vs_single) and W3's segments per\n"
            "master.\n"
            "W6 is the latch fan-in: C (default 64) async count downs\n"
            "and one waiter, 200 rounds; it is in the default run.\n"
            "--replicas N --ack P: only W1 C=1, W1 C=50 and W2 C=64 (or\n"
            "--workload's points) on a private master with N replicas,\n"
            "each lock write acknowledged under policy P; the lines\n"
            "carry \"topology\":\"replicated\" and \"ack\".\n"
            "W5 is C workers (standard point 64) on one semaphore of 8\n"
            "permits, async; it runs in the full suite after W3.\n"
            "W7 is the multi-process hand-off: C processes (1, 2, 8, 32,\n"
            "64 and 128 unless --concurrency), each with its own client,\n"
            "take turns on one lock of each kind (reentrant, fair, the\n"
            "write side of rwlock, a semaphore of 1 permit; --kind picks\n"
            "one, and only W7 takes rwlock and semaphore), and two\n"
            "floors: bare processes passing a token round a ring by\n"
            "PUBLISH, the least a hand-off can cost (--kind floor), and\n"
            "the same with a loop thread in each process (floor-loop).\n"
            "It runs last in the full suite, with a 3 s window and 1 s\n"
            "warm-up unless --duration or --warmup say otherwise; single\n"
            "server only.\n"
            "Each W7 point is the median of K windows (--w7-windows, 1 to\n"
            "9, default 3), taken in turns over the process counts.\n"
            "W8 is the condition variable: C processes (16 unless\n"
            "--concurrency), half producing into a bounded buffer of 16\n"
            "and half consuming, through one lock and its conditions;\n"
            "items/s and wake-up latency, flat out and with producers\n"
            "paced at 5 ms an item.  It runs after W7, with W7's window.\n");
}

static bool number(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < 0)
        return false;
    *out = v;
    return true;
}

/* W7's kinds, in the order the full suite runs them. */
static const char *const w7_kinds[] = {"reentrant", "fair",  "rwlock",
                                       "semaphore", "floor", "floor-loop"};

static bool w7_kind_known(const char *kind)
{
    for (size_t k = 0; k < sizeof w7_kinds / sizeof w7_kinds[0]; k++)
        if (strcmp(kind, w7_kinds[k]) == 0)
            return true;
    return false;
}

static int parse(int argc, char **argv, bench_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d = 0;
        if (strcmp(k, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(k, "--no-ceiling") == 0) {
            a->skip_ceiling = true;
            continue;
        }
        if (strcmp(k, "--cluster") == 0) {
            a->with_cluster = true;
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "hilock-bench: %s needs a value\n", k);
            return -1;
        }
        i++;
        if (strcmp(k, "--workload") == 0) {
            a->workload = v;
        } else if (strcmp(k, "--run-id") == 0) {
            snprintf(a->run_id, sizeof a->run_id, "%s", v);
        } else if (strcmp(k, "--host") == 0) {
            a->host = v;
        } else if (strcmp(k, "--kind") == 0) {
            a->kind = v;
            a->kind_given = true;
        } else if (strcmp(k, "--api") == 0) {
            a->api = v;
        } else if (strcmp(k, "--ack") == 0) {
            a->ack = v;
        } else if (strcmp(k, "--cluster-ack") == 0) {
            a->cluster_ack = v;
        } else if (strcmp(k, "--ports") == 0) {
            char *copy = strdup(v), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t && a->nports < 8;
                 t = strtok_r(NULL, ",", &save))
                a->ports[a->nports++] = atoi(t);
            free(copy);
        } else if (number(v, &d)) {
            if (strcmp(k, "--concurrency") == 0)
                a->concurrency = (int)d;
            else if (strcmp(k, "--duration") == 0)
                a->duration_s = d, a->duration_given = true;
            else if (strcmp(k, "--warmup") == 0)
                a->warmup_s = d, a->warmup_given = true;
            else if (strcmp(k, "--lease-ms") == 0)
                a->lease_ms = (int64_t)d;
            else if (strcmp(k, "--retry-ms") == 0)
                a->retry_ms = (int64_t)d;
            else if (strcmp(k, "--port") == 0)
                a->port = (int)d;
            else if (strcmp(k, "--segments") == 0)
                a->segments = (int)d;
            else if (strcmp(k, "--products") == 0)
                a->products = (int)d;
            else if (strcmp(k, "--watchdog-ms") == 0)
                a->watchdog_ms = (int64_t)d;
            else if (strcmp(k, "--connections") == 0)
                a->connections = (int)d;
            else if (strcmp(k, "--busy-poll-us") == 0)
                a->busy_poll_us = (int64_t)d;
            else if (strcmp(k, "--wd-leases") == 0)
                a->wd_leases = (int)d;
            else if (strcmp(k, "--wd-duration") == 0)
                a->wd_duration_s = d;
            else if (strcmp(k, "--cluster-replicas") == 0)
                a->cluster_replicas = (int)d;
            else if (strcmp(k, "--replicas") == 0)
                a->replicas = (int)d;
            else if (strcmp(k, "--w7-windows") == 0) {
                if (d < 1 || d > BENCH_W7_WINDOWS_MAX || d != (int)d) {
                    fprintf(stderr, "hilock-bench: --w7-windows is a whole "
                                    "number from 1 to %d\n",
                            BENCH_W7_WINDOWS_MAX);
                    return -1;
                }
                a->w7_windows = (int)d;
            }
            else {
                fprintf(stderr, "hilock-bench: unknown option %s\n", k);
                return -1;
            }
        } else {
            fprintf(stderr, "hilock-bench: bad value for %s: %s\n", k, v);
            return -1;
        }
    }
    if (a->api && strcmp(a->api, "async") && strcmp(a->api, "sync")) {
        fprintf(stderr, "hilock-bench: --api is async or sync\n");
        return -1;
    }
    bool w7 = a->workload != NULL && strcmp(a->workload, "W7") == 0;
    if (strcmp(a->kind, "reentrant") != 0 && strcmp(a->kind, "fair") != 0 &&
        (!w7 || !w7_kind_known(a->kind))) {
        fprintf(stderr, "hilock-bench: --kind is reentrant or fair (W7 "
                        "also takes rwlock, semaphore, floor and "
                        "floor-loop)\n");
        return -1;
    }
    int ack;
    if (a->cluster_ack != NULL && !bench_ack_parse(a->cluster_ack, &ack)) {
        fprintf(stderr, "hilock-bench: --cluster-ack is none, one, majority "
                        "or all\n");
        return -1;
    }
    if (a->ack != NULL && !bench_ack_parse(a->ack, &ack)) {
        fprintf(stderr, "hilock-bench: --ack is none, one, majority or "
                        "all\n");
        return -1;
    }
    if ((a->ack != NULL) != (a->replicas > 0) || a->replicas > 8 ||
        (a->replicas > 0 && a->with_cluster)) {
        fprintf(stderr, "hilock-bench: --replicas 1..8 and --ack go "
                        "together, without --cluster\n");
        return -1;
    }
    if (a->lease_ms <= 0 || a->products <= 0 || a->duration_s <= 0) {
        fprintf(stderr, "hilock-bench: lease, products and duration must "
                        "be positive\n");
        return -1;
    }
    return 0;
}

int bench_flush(const bench_args *a, hilock_client *c)
{
    if (a != NULL && a->cluster != NULL)
        return bench_cluster_flush(a);
    const char *argv[] = {"FLUSHALL"};
    return hilock_client_command(c, 1, argv, NULL, NULL) == HILOCK_OK ? 0
                                                                      : -1;
}

/* W4's masters: five private redis-servers unless --ports names them,
 * and the RedLock over them, made for the first W4 point. */
#define W4_MASTERS 5
static hl_redis_server *w4_servers[W4_MASTERS];
static hilock_redlock *w4_rl;
static const char *w4_error;

static bool wants_w4(const bench_args *a)
{
    return a->workload == NULL || strcmp(a->workload, "W4") == 0;
}

/* Started before anything else is measured: a master votes only once it
 * has been up for the quarantine, and the points before W4 fill that
 * time. */
static void w4_start_servers(const bench_args *a)
{
    if (a->nports > 0) {
        if (a->nports != W4_MASTERS)
            w4_error = "--ports takes the ports of 5 masters";
        return;
    }
    for (int i = 0; i < W4_MASTERS; i++) {
        w4_servers[i] = hl_redis_server_start(NULL);
        if (w4_servers[i] == NULL) {
            w4_error = "could not start the W4 masters";
            return;
        }
        fprintf(stderr, "hilock-bench: W4 master %d on port %d\n", i + 1,
                hl_redis_server_port(w4_servers[i]));
    }
}

static hilock_redlock *w4_redlock(const bench_args *a)
{
    if (w4_rl != NULL || w4_error != NULL)
        return w4_rl;
    char buf[W4_MASTERS][320];
    const char *urls[W4_MASTERS];
    for (int i = 0; i < W4_MASTERS; i++) {
        int port = a->nports > 0 ? a->ports[i]
                                 : hl_redis_server_port(w4_servers[i]);
        if (strchr(a->host, ':') != NULL)
            snprintf(buf[i], sizeof buf[i], "redis://[%s]:%d", a->host, port);
        else
            snprintf(buf[i], sizeof buf[i], "redis://%s:%d", a->host, port);
        urls[i] = buf[i];
    }
    hilock_options *o;
    if (hilock_options_create(&o) != HILOCK_OK) {
        w4_error = "out of memory";
        return NULL;
    }
    hilock_options_set_connections(o, a->connections);
    if (a->busy_poll_us > 0)
        hilock_options_set_busy_poll_us(o, a->busy_poll_us);
    hilock_options_set_watchdog_timeout_ms(o, a->watchdog_ms);
    /* At least the longest lease, as RedLock's safety asks, and no more:
     * fresh masters vote that much sooner. */
    int rc = hilock_options_set_quarantine_ms(o, a->lease_ms);
    if (rc == HILOCK_OK)
        rc = hilock_redlock_create(&w4_rl, urls, W4_MASTERS, o);
    hilock_options_free(o);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "hilock-bench: W4: %s\n", hilock_last_error());
        w4_rl = NULL;
        w4_error = "cannot set up the RedLock over the W4 masters";
    }
    return w4_rl;
}

static void w4_close(void)
{
    if (w4_rl != NULL) {
        for (size_t i = 0; i < hilock_redlock_masters(w4_rl); i++)
            bench_flush(NULL, hilock_redlock_client(w4_rl, i));
        hilock_redlock_destroy(w4_rl);
    }
    for (int i = 0; i < W4_MASTERS; i++)
        hl_redis_server_stop(w4_servers[i]);
}

/* The single-node points of this run, for the cluster points' ratios. */
typedef struct single_point {
    const char *workload, *kind, *api;
    int concurrency, segments;
    double cycles_per_s;
    bool paired; /* a cluster point took it as its twin */
} single_point;
static single_point singles[64];
static int nsingles;

static bool same_point(const single_point *s, const bench_point *p,
                       const char *kind)
{
    return strcmp(s->workload, p->workload) == 0 &&
           strcmp(s->kind, kind) == 0 && strcmp(s->api, p->api) == 0 &&
           s->concurrency == p->concurrency && s->segments == p->segments;
}

/* Remember a single-node point (the default client's: busy polling is
 * not run on the cluster), or give a cluster point its twin's figure: the
 * first not yet taken, so that points repeated back to back pair in
 * order. */
static void pair(const bench_args *a, bench_point *p)
{
    if (p->error != NULL || a->busy_poll_us > 0 || p->workload == NULL)
        return;
    const char *kind = p->kind ? p->kind : a->kind;
    if (a->cluster != NULL) {
        for (int i = 0; i < nsingles; i++)
            if (!singles[i].paired && same_point(&singles[i], p, kind)) {
                singles[i].paired = true;
                p->single_cycles_per_s = singles[i].cycles_per_s;
                return;
            }
        return;
    }
    if (nsingles == (int)(sizeof singles / sizeof singles[0]))
        return;
    singles[nsingles++] = (single_point){p->workload, kind, p->api,
                                         p->concurrency, p->segments,
                                         p->cycles_per_s, false};
}

static void point(const bench_args *a, hilock_client *c, const char *w,
                  int concurrency, int segments, const char *api)
{
    bench_point p = {0};
    bool kinded = strcmp(w, "W1") == 0 || strcmp(w, "W2") == 0 ||
                  strcmp(w, "W7") == 0;
    fprintf(stderr, "hilock-bench: %s C=%d%s%.0d api=%s%s%s ...\n", w,
            concurrency, segments ? " S=" : "", segments, api,
            kinded ? " kind=" : "", kinded ? a->kind : "");
    if (strcmp(w, "W7") == 0 || strcmp(w, "W8") == 0) {
        /* Measured on one server only: it has no twin to pair with. */
        if (strcmp(w, "W7") == 0)
            bench_run_w7(a, c, concurrency, &p);
        else
            bench_run_w8(a, c, concurrency, segments, &p);
        bench_print_point(a, &p);
        return;
    }
    if (strcmp(w, "W1") == 0)
        bench_run_w1(a, c, concurrency, api, &p);
    else if (strcmp(w, "W2") == 0)
        bench_run_w2(a, c, concurrency, api, &p);
    else if (strcmp(w, "W3") == 0)
        bench_run_w3(a, c, concurrency, segments, api, &p);
    else if (strcmp(w, "W4") == 0) {
        hilock_redlock *rl = w4_redlock(a);
        if (rl != NULL) {
            bench_run_w4(a, rl, concurrency, api, &p);
        } else {
            p.workload = w;
            p.api = api;
            p.concurrency = concurrency;
            p.kind = "reentrant";
            p.servers = W4_MASTERS;
            p.error = w4_error;
        }
    } else if (strcmp(w, "W6") == 0) {
        bench_run_w6(a, c, concurrency, &p);
    } else if (strcmp(w, "W5") == 0) {
        bench_run_w5(a, c, concurrency, &p);
    } else if (strcmp(w, "WD") == 0) {
        if (bench_run_wd(a, c, concurrency) != 0) {
            p.workload = w;
            p.api = api;
            p.concurrency = concurrency;
            p.kind = "reentrant";
            p.error = "set-up failed";
            bench_print_point(a, &p);
        }
        return;
    } else {
        p.workload = w;
        p.api = api;
        p.concurrency = concurrency;
        p.error = "workload not available yet";
    }
    pair(a, &p);
    bench_print_point(a, &p);
}

/* The figure a W7 window is ranked by: owner changes/s, and with one
 * process, which changes no owner, acquisitions/s. */
static double w7_rank(const bench_point *p)
{
    return p->procs == 1 ? p->cycles_per_s : p->owner_changes_per_s;
}

static int w7_by_rank(const void *x, const void *y)
{
    double a = w7_rank(x), b = w7_rank(y);
    return (a > b) - (a < b);
}

typedef struct w7_slot {
    bench_point win[BENCH_W7_WINDOWS_MAX];
    char error[256];
    char notes[1024];
} w7_slot;

/* The points of one kind at the n process counts procs.  Each is the
 * median window of a->w7_windows (of an even number, the higher middle
 * one), and the windows go round the counts in turns: a window of
 * forked processes on a small machine swings by a tenth or more, and a
 * slow spell then falls on every count alike, not on the one it hit,
 * which would move the ratios between counts that the targets read.  A
 * window that fails makes the point that failure. */
static void w7_kind(const bench_args *a, hilock_client *c, const int *procs,
                    size_t n)
{
    int k = a->w7_windows;
    w7_slot *slots = calloc(n, sizeof *slots);
    if (slots == NULL) {
        fprintf(stderr, "hilock-bench: W7: out of memory\n");
        return;
    }
    for (int w = 0; w < k; w++)
        for (size_t i = 0; i < n; i++) {
            if (slots[i].error[0] != '\0')
                continue;
            fprintf(stderr, "hilock-bench: W7 C=%d api=sync kind=%s "
                            "window %d of %d ...\n",
                    procs[i], a->kind, w + 1, k);
            bench_point *p = &slots[i].win[w];
            if (bench_run_w7(a, c, procs[i], p) != 0 || p->error != NULL) {
                snprintf(slots[i].error, sizeof slots[i].error, "%s",
                         p->error ? p->error : "the window failed");
                p->error = slots[i].error;
                slots[i].win[0] = *p;
            }
        }
    for (size_t i = 0; i < n; i++) {
        w7_slot *s = &slots[i];
        if (s->error[0] != '\0') {
            bench_print_point(a, &s->win[0]);
            continue;
        }
        qsort(s->win, (size_t)k, sizeof s->win[0], w7_by_rank);
        bench_point median = s->win[k / 2];
        int len = snprintf(s->notes, sizeof s->notes,
                           "%s; the median of %d windows taken in turns "
                           "over the process counts, by %s/s:",
                           median.notes ? median.notes : "", k,
                           procs[i] == 1 ? "acquisitions" : "owner changes");
        for (int w = 0; w < k && len > 0 && (size_t)len < sizeof s->notes;
             w++)
            len += snprintf(s->notes + len, sizeof s->notes - (size_t)len,
                            "%s %.0f", w ? "," : "", w7_rank(&s->win[w]));
        median.notes = s->notes;
        bench_print_point(a, &median);
    }
    free(slots);
}

/* W7: each kind (or --kind's), at each standard N (or --concurrency's). */
static void w7_points(const bench_args *a, hilock_client *c)
{
    static const int procs[] = {1, 2, 8, 32, 64, 128};
    for (size_t k = 0; k < sizeof w7_kinds / sizeof w7_kinds[0]; k++) {
        if (a->kind_given && strcmp(a->kind, w7_kinds[k]) != 0)
            continue;
        bench_args one = *a;
        one.kind = w7_kinds[k];
        if (a->concurrency > 0)
            w7_kind(&one, c, &a->concurrency, 1);
        else
            w7_kind(&one, c, procs, sizeof procs / sizeof procs[0]);
    }
}

static void run_workload(const bench_args *a, hilock_client *c,
                         const char *w)
{
    const char *api = a->api ? a->api : "async";
    if (strcmp(w, "W7") == 0) {
        w7_points(a, c);
        return;
    }
    if (strcmp(w, "W8") == 0) {
        /* Flat out, then with producers paced at 5 ms an item (the
         * pace travels in point()'s segments). */
        int procs = a->concurrency > 0 ? a->concurrency : 16;
        point(a, c, w, procs, 0, "sync");
        point(a, c, w, procs, 5000, "sync");
        return;
    }
    if (a->concurrency > 0) {
        if (strcmp(w, "W3") == 0 && a->segments == 0) {
            point(a, c, w, a->concurrency, 1, api);
            point(a, c, w, a->concurrency, 16, api);
        } else {
            point(a, c, w, a->concurrency, a->segments, api);
        }
        return;
    }
    if (strcmp(w, "W1") == 0) {
        point(a, c, w, 1, 0, api);
        /* Three back to back: how much the blocking path swings. */
        for (int i = 0; a->api == NULL && i < 3; i++)
            point(a, c, w, 1, 0, "sync");
        point(a, c, w, 50, 0, api);
        if (a->api == NULL)
            point(a, c, w, 50, 0, "sync");
    } else if (strcmp(w, "W4") == 0) {
        point(a, c, w, 1, 0, api);
        point(a, c, w, 50, 0, api);
    } else if (strcmp(w, "W2") == 0) {
        point(a, c, w, 8, 0, api);
        point(a, c, w, 64, 0, api);
    } else if (strcmp(w, "W3") == 0) {
        int s = a->segments;
        if (s > 0) {
            point(a, c, w, 64, s, api);
        } else {
            point(a, c, w, 64, 1, api);
            point(a, c, w, 64, 16, api);
            if (a->api == NULL)
                point(a, c, w, 64, 16, "sync");
        }
    } else if (strcmp(w, "W5") == 0 || strcmp(w, "W6") == 0) {
        point(a, c, w, 64, 0, "async");
    } else if (strcmp(w, "WD") == 0) {
        point(a, c, w, a->wd_leases > 0 ? a->wd_leases : 100000, 0, api);
    } else {
        point(a, c, w, 1, 0, api);
    }
}

/* The points again on a client that busy-polls. */
static void busy_poll_points(const bench_args *a, int port)
{
    bench_args bp = *a;
    bp.busy_poll_us = 200;
    hilock_options *o;
    hilock_client *c;
    hilock_options_create(&o);
    hilock_options_set_host(o, a->host);
    hilock_options_set_port(o, port);
    hilock_options_set_connections(o, a->connections);
    hilock_options_set_busy_poll_us(o, bp.busy_poll_us);
    int rc = hilock_client_create(&c, o);
    hilock_options_free(o);
    if (rc != HILOCK_OK)
        return;
    point(&bp, c, "W1", 1, 0, "async");
    point(&bp, c, "W1", 1, 0, "sync");
    point(&bp, c, "W1", 50, 0, "async");
    point(&bp, c, "W2", 64, 0, "async");
    bench_args bp_fair = bp;
    bp_fair.kind = "fair";
    point(&bp_fair, c, "W2", 64, 0, "async");
    point(&bp, c, "W3", 64, 1, "async");
    point(&bp, c, "W3", 64, 16, "async");
    hilock_client_destroy(c);
}

/* The full suite's points on c: on one server (port), or on the cluster
 * (a->cluster), which has no W4, ceiling or busy-polling rows. */
static void standard_points(const bench_args *a, hilock_client *c, int port)
{
    run_workload(a, c, "W1");
    if (a->cluster == NULL)
        run_workload(a, c, "W4");
    run_workload(a, c, "W2");
    if (a->api == NULL) {
        /* C = 8 on the blocking API as well: W7's processes wait on it,
         * and W7 N = 8 is read against W2 C = 8. */
        point(a, c, "W2", 8, 0, "sync");
        point(a, c, "W2", 64, 0, "sync");
    }
    if (strcmp(a->kind, "fair") != 0) {
        /* The fair lock's W2 beside the reentrant one. */
        bench_args fair = *a;
        fair.kind = "fair";
        point(&fair, c, "W2", 64, 0, a->api ? a->api : "async");
        if (a->api == NULL)
            point(&fair, c, "W2", 64, 0, "sync");
    }
    run_workload(a, c, "W3");
    if (a->cluster == NULL) {
        run_workload(a, c, "W5");
        run_workload(a, c, "W6");
    }
    if (a->cluster == NULL && a->busy_poll_us == 0 && a->api == NULL)
        busy_poll_points(a, port);
    if (a->wd_leases > 0) {
        bench_args wd = *a;
        wd.duration_s = a->wd_duration_s;
        run_workload(&wd, c, "WD");
    }
    if (a->cluster == NULL) {
        /* Last, with a shorter window of their own: 25 points of forked
         * processes would otherwise lengthen the suite the most. */
        bench_args w7 = *a;
        if (!a->duration_given)
            w7.duration_s = 3;
        if (!a->warmup_given)
            w7.warmup_s = 1;
        run_workload(&w7, c, "W7");
        run_workload(&w7, c, "W8");
    }
}

/* --cluster: the points again on a private cluster, started once the
 * single-node points are done so that its idle nodes do not share the
 * machine with them.  0, or 69 when the cluster cannot be had. */
static int cluster_rows(const bench_args *a)
{
    const char *w = a->workload;
    if (w != NULL && strcmp(w, "W1") && strcmp(w, "W2") && strcmp(w, "W3") &&
        strcmp(w, "WD")) {
        fprintf(stderr, "hilock-bench: --cluster runs W1, W2, W3 and WD; "
                        "no cluster rows for %s\n", w);
        return 0;
    }
    bench_args ca = *a;
    if (bench_cluster_start(&ca) != 0) {
        printf("{\"peer\":\"hilock\",\"workload\":\"cluster\","
               "\"params\":{\"topology\":\"cluster\"},\"error\":"
               "\"could not start the cluster\"}\n");
        return 69;
    }
    hilock_options *o;
    hilock_client *c = NULL;
    int rc = hilock_options_create(&o);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_url(o, hl_redis_cluster_url(ca.cluster));
    int ack;
    if (rc == HILOCK_OK && a->cluster_ack != NULL &&
        bench_ack_parse(a->cluster_ack, &ack))
        rc = hilock_options_set_replica_ack(o, (hilock_replica_ack)ack);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_connections(o, a->connections);
    if (rc == HILOCK_OK && a->busy_poll_us > 0)
        rc = hilock_options_set_busy_poll_us(o, a->busy_poll_us);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_watchdog_timeout_ms(o, a->watchdog_ms);
    if (rc == HILOCK_OK)
        rc = hilock_client_create(&c, o);
    hilock_options_free(o);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "hilock-bench: cannot connect to the cluster: %s\n",
                hilock_last_error());
        hl_redis_cluster_stop(ca.cluster);
        return 69;
    }
    if (w == NULL)
        standard_points(&ca, c, 0);
    else
        run_workload(&ca, c, w);
    bench_flush(&ca, c);
    hilock_client_destroy(c);
    hl_redis_cluster_stop(ca.cluster);
    return 0;
}

/* A point that could not be run, with why. */
static void error_point(const bench_args *a, const char *w, int concurrency,
                        const char *api, const char *error)
{
    bench_point p = {.workload = w, .api = api, .concurrency = concurrency,
                     .error = error};
    bench_print_point(a, &p);
}

/* --replicas: the cost of replica acknowledgement, on a master with
 * a->replicas replicas.  0, or 69 when the servers cannot be had. */
static int replicated_rows(const bench_args *a)
{
    static const struct {
        const char *w;
        int c;
    } std[] = {{"W1", 1}, {"W1", 50}, {"W2", 64}};
    const char *api = a->api ? a->api : "async";
    hilock_client *c = NULL;
    char error[512];
    int rc = bench_replicated_start(a, &c, error, sizeof error);
    if (rc != 0) {
        fprintf(stderr, "hilock-bench: %s\n", error);
        if (a->workload != NULL)
            error_point(a, a->workload, a->concurrency, api, error);
        else
            for (size_t i = 0; i < sizeof std / sizeof std[0]; i++)
                error_point(a, std[i].w, std[i].c, api, error);
        bench_replicated_stop();
        /* A refused policy is a measured answer, not a broken run. */
        return rc == -2 ? 0 : 69;
    }
    if (a->workload != NULL)
        run_workload(a, c, a->workload);
    else
        for (size_t i = 0; i < sizeof std / sizeof std[0]; i++)
            point(a, c, std[i].w, std[i].c, 0, api);
    bench_flush(a, c);
    hilock_client_destroy(c);
    bench_replicated_stop();
    return 0;
}

int main(int argc, char **argv)
{
    bench_args a = {.duration_s = 8, .warmup_s = 1, .lease_ms = 10000,
                    .retry_ms = 10, .host = "127.0.0.1", .products = 1000,
                    .kind = "reentrant", .wd_leases = 100000,
                    .cluster_replicas = BENCH_CLUSTER_REPLICAS,
                    .wd_duration_s = 60, .w7_windows = 3};
    snprintf(a.run_id, sizeof a.run_id, "%d", (int)getpid());
    if (parse(argc, argv, &a) != 0) {
        usage(stderr);
        return 64;
    }
    signal(SIGPIPE, SIG_IGN);
    /* W7's processes are forked by a runner that never has a client, so
     * it is forked now, before any client or server exists. */
    if (a.replicas == 0 &&
        (a.workload == NULL || strcmp(a.workload, "W7") == 0 ||
         strcmp(a.workload, "W8") == 0) &&
        bench_w7_start() != 0)
        fprintf(stderr, "hilock-bench: W7 and W8 points will fail\n");
    if (a.replicas > 0) {
        a.skip_ceiling = true;
        if (a.connections <= 0) {
            /* The count a default client has, for the notes. */
            hilock_options *d;
            hilock_options_create(&d);
            a.connections = hilock_options_connections(d);
            hilock_options_free(d);
        }
        return replicated_rows(&a);
    }
    hl_redis_server *server = NULL;
    int port = a.port;
    if (port == 0) {
        server = hl_redis_server_start(NULL);
        if (server == NULL)
            return 69;
        port = hl_redis_server_port(server);
        fprintf(stderr, "hilock-bench: private redis-server on port %d\n",
                port);
    }
    a.server_port = port;
    if (wants_w4(&a))
        w4_start_servers(&a);
    hilock_options *o;
    hilock_options_create(&o);
    hilock_options_set_host(o, a.host);
    hilock_options_set_port(o, port);
    if (a.connections > 0 &&
        hilock_options_set_connections(o, a.connections) != HILOCK_OK) {
        fprintf(stderr, "hilock-bench: %s\n", hilock_last_error());
        return 64;
    }
    a.connections = hilock_options_connections(o);
    if (a.busy_poll_us > 0)
        hilock_options_set_busy_poll_us(o, a.busy_poll_us);
    if (a.watchdog_ms > 0)
        hilock_options_set_watchdog_timeout_ms(o, a.watchdog_ms);
    else
        a.watchdog_ms = HILOCK_DEFAULT_WATCHDOG_TIMEOUT_MS;
    hilock_client *c;
    int rc = hilock_client_create(&c, o);
    hilock_options_free(o);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "hilock-bench: cannot connect: %s\n",
                hilock_last_error());
        hl_redis_server_stop(server);
        return 69;
    }
    if (!a.skip_ceiling)
        bench_run_ceiling(&a, a.host, port);
    if (a.workload == NULL)
        standard_points(&a, c, port);
    else
        run_workload(&a, c, a.workload);
    w4_close();
    bench_w7_stop();
    bench_flush(&a, c);
    int status = a.with_cluster ? cluster_rows(&a) : 0;
    hilock_client_destroy(c);
    hl_redis_server_stop(server);
    return status;
}
