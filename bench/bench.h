/* hilock-bench: shared definitions. */
#ifndef HILOCK_BENCH_H
#define HILOCK_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <hilock/hilock.h>

#include "redis_cluster.h"

/* The cluster rows' deployment, as WORKLOADS.md sets it (replicas per
 * master: --cluster-replicas changes it). */
#define BENCH_CLUSTER_MASTERS 3
/* The most windows a W7 point can be the median of (--w7-windows). */
#define BENCH_W7_WINDOWS_MAX 9
#define BENCH_CLUSTER_REPLICAS 1

typedef struct bench_args {
    const char *workload; /* NULL: the whole suite */
    int concurrency;      /* 0: the workload's standard points */
    double duration_s;
    double warmup_s;
    /* Whether --duration, --warmup and --kind were given: the suite's W7
     * points have a shorter window of their own, and W7 runs every kind,
     * unless the command line says otherwise. */
    bool duration_given;
    bool warmup_given;
    bool kind_given;
    /* W7: the windows a point is the median of (--w7-windows). */
    int w7_windows;
    int64_t lease_ms;
    int64_t retry_ms; /* accepted, ignored: waiting is by notification */
    const char *host;
    int port;             /* 0: start a private server */
    int server_port;      /* the one server's port, private or not */
    int ports[8];         /* W4 */
    int nports;
    int segments;         /* 0: W3 runs S = 1 and S = 16 */
    int products;
    char run_id[64];
    /* W1 and W2: "reentrant" | "fair"; W7 also "rwlock" | "semaphore" */
    const char *kind;
    const char *api;      /* "async" | "sync" | NULL: the standard mix */
    bool skip_ceiling;
    int64_t watchdog_ms; /* WD: the client's watchdog timeout */
    int connections;     /* command connections of the client */
    int64_t busy_poll_us; /* the client's busy polling, 0: off */
    int wd_leases;        /* WD in the full suite; 0 skips it */
    double wd_duration_s;
    bool with_cluster;        /* --cluster: the cluster rows too */
    int cluster_replicas;     /* per master */
    /* --cluster-ack POLICY: the cluster rows' replica acknowledgement;
     * NULL: the library's default. */
    const char *cluster_ack;
    /* The servers of the points being measured when they are the cluster
     * rows' (the client is then a cluster client); NULL: one server. */
    hl_redis_cluster *cluster;
    /* --replicas N --ack POLICY: the replicated rows only, on a private
     * master with N replicas (0: not asked for). */
    int replicas;
    const char *ack; /* "none" | "one" | "majority" | "all" */
} bench_args;

/* One measured point, printed as one JSON line. */
typedef struct bench_point {
    const char *workload;
    int concurrency;
    int segments; /* W3 */
    const char *api;
    const char *kind; /* of the locks the point took; NULL: the run's */
    double cycles_per_s;
    int64_t p50_us;
    int64_t p99_us;
    int64_t max_us;
    uint64_t violations;
    double owner_changes_per_s;
    uint64_t per_worker_min;
    uint64_t per_worker_max;
    double jain;
    const char *stock_check; /* W3: "ok" or "MISMATCH"; else NULL */
    int max_inside;          /* W5: most workers inside at once */
    const char *error;       /* a failed point */
    int servers;             /* redis-servers the point used; 0: one */
    const char *notes;       /* what the point did beyond the common
                              * rules; NULL: nothing */
    /* Cluster rows: the single-node point of this run with the same
     * workload, kind, C, S and api (0: none), and W3's segments on each
     * master (segments_known false when they could not be read). */
    double single_cycles_per_s;
    bool segments_known;
    int segments_per_master[BENCH_CLUSTER_MASTERS];
    /* W7: the processes of the point (0: one), and what the server did
     * over the window per hand-off: script calls and CPU time.  A
     * hand-off is an owner change, or an acquisition when there is one
     * process (handoff_basis says which); handoffs 0: no figure. */
    int procs;
    uint64_t handoffs;
    const char *handoff_basis;
    uint64_t scripts;
    double server_cpu_us;
    uint64_t samples_dropped; /* waits beyond the room kept for them */
    uint64_t wakeups;         /* W8: the wake-ups measured */
    int64_t pace_us;          /* W8: a producer's work between items */
} bench_point;

int64_t bench_now_us(void);
/* Nearest-rank percentile of sorted samples. */
int64_t bench_percentile(const int64_t *sorted, size_t n, double p);
void bench_sort(int64_t *samples, size_t n);

/* Print one JSON line for a point. */
void bench_print_point(const bench_args *a, const bench_point *p);
/* A W7 point of a floor (--kind floor or floor-loop), which has no
 * client. */
bool bench_point_on_floor(const bench_point *p);
void bench_print_ceiling(const bench_args *a, const char *what, int clients,
                         int pipeline, long requests, double rps,
                         const char *error);
/* Write s as a JSON string (with quotes). */
void bench_json_string(FILE *f, const char *s);

/* Workloads: fill p; return 0, or -1 with p->error set. */
int bench_run_w1(const bench_args *a, hilock_client *c, int concurrency,
                 const char *api, bench_point *p);
int bench_run_w2(const bench_args *a, hilock_client *c, int concurrency,
                 const char *api, bench_point *p);
int bench_run_w3(const bench_args *a, hilock_client *c, int concurrency,
                 int segments, const char *api, bench_point *p);

/* W4: W1 over RedLock on the masters of rl (5 of them). */
int bench_run_w4(const bench_args *a, hilock_redlock *rl, int concurrency,
                 const char *api, bench_point *p);

/* W5: C workers on one semaphore of 8 permits (async API). */
int bench_run_w5(const bench_args *a, hilock_client *c, int concurrency,
                 bench_point *p);

/* WD: one client holding `leases` watchdog leases for the duration.
 * Prints its own JSON line. */
int bench_run_wd(const bench_args *a, hilock_client *c, int leases);

/* W6: one waiter on a latch of `workers`, counted down by as many
 * workers at once, 200 rounds (bench/latch.c). */
int bench_run_w6(const bench_args *a, hilock_client *c, int workers,
                 bench_point *p);

/* W7, the multi-process hand-off (bench/w7.c).  The processes are forked
 * by a runner that has no client: bench_w7_start forks it, and must run
 * before the first client is made; bench_w7_stop ends it. */
int bench_w7_start(void);
void bench_w7_stop(void);
/* procs processes, each with its own client on a->host and
 * a->server_port, on one lock of a->kind ("reentrant", "fair", "rwlock"
 * or "semaphore"); c flushes the server and sets the semaphore first. */
int bench_run_w7(const bench_args *a, hilock_client *c, int procs,
                 bench_point *p);

/* W8, the condition variable (bench/w8.c): procs processes (even), half
 * producing into a bounded buffer of 16 and half consuming from it,
 * through one lock and its conditions not-full and not-empty; on W7's
 * runner. */
int bench_run_w8(const bench_args *a, hilock_client *c, int procs,
                 int64_t pace_us, bench_point *p);

/* redis-benchmark rows for the ceiling, against host:port. */
void bench_run_ceiling(const bench_args *a, const char *host, int port);

/* Empty the servers of a point: FLUSHALL through the client, or on every
 * master when a->cluster is set (a may be NULL: one server); 0 or -1. */
int bench_flush(const bench_args *a, hilock_client *c);

/* The private cluster of the cluster rows into a->cluster; 0 or -1. */
int bench_cluster_start(bench_args *a);
/* FLUSHALL on every master of a->cluster; 0 or -1. */
int bench_cluster_flush(const bench_args *a);
/* How many of set's segments live on each master of a->cluster, into
 * per_master[BENCH_CLUSTER_MASTERS]; 0 or -1. */
int bench_cluster_segments(const bench_args *a, hilock_segmented *set,
                           int *per_master);

/* The replicated rows (replicated.c).  Whether s names a policy, and
 * which (a hilock_replica_ack). */
bool bench_ack_parse(const char *s, int *ack);
/* Start the master and its a->replicas replicas and connect to the master
 * with a->ack: 0, or with the reason in error (then *out is NULL, and the
 * servers may still run: stop them in any case) -1 when the servers did
 * not start, -2 when the client refused to connect. */
int bench_replicated_start(const bench_args *a, hilock_client **out,
                           char *error, size_t cap);
void bench_replicated_stop(void);

#endif
