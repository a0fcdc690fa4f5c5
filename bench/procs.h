/* The processes of W7 and W8 (bench/w7.c): what the main process asks
 * of the runner that forks them, what it answers, and the memory the
 * processes of a point share. */
#ifndef HILOCK_BENCH_PROCS_H
#define HILOCK_BENCH_PROCS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hilock/hilock.h>

#define W7_MAX_PROCS 1024
/* How long the processes may take to have their clients and locks, and
 * how long past the window they may take to finish their last cycle,
 * before the runner kills them and the point fails. */
#define W7_READY_S 60
#define W7_FINISH_S 30
/* Room for the waits: more acquisitions per second than one server can
 * grant a single lock (one cycle is at least two scripts). */
#define W7_SAMPLES_PER_S 150000
#define W7_SAMPLES_SPARE 65536

/* What the main process asks of the runner: one point. */
typedef struct w7_request {
    char workload[4]; /* "W7" or "W8" */
    char host[256];
    char run_id[64];
    char kind[16];
    int port;
    int procs;
    int connections;
    int64_t busy_poll_us;
    int64_t watchdog_ms;
    double duration_s;
    double warmup_s;
    int64_t pace_us; /* W8: a producer's work between items, outside */
} w7_request;

/* What the runner answers: the figures, or why there are none. */
typedef struct w7_result {
    char error[256]; /* empty: the point was measured */
    uint64_t cycles;
    uint64_t owner_changes;
    uint64_t violations;
    uint64_t per_proc_min;
    uint64_t per_proc_max;
    double jain;
    int64_t p50_us;
    int64_t p99_us;
    int64_t max_us;
    uint64_t samples; /* waits measured */
    uint64_t samples_dropped;
    uint64_t scripts;     /* script calls over the window */
    double server_cpu_us; /* the server's CPU time over the window */
} w7_result;

/* One process's corner of the shared mapping; written by that process
 * only, and read by the runner once it has reaped it. */
typedef struct w7_slot {
    uint64_t counted;
    uint64_t owner_changes;
    char error[200];
} w7_slot;

/* The shared mapping: this header, procs slots, then the samples. */
typedef struct w7_shared {
    atomic_int ready; /* processes with their client and lock */
    atomic_int go;    /* 0 until the gate opens, 1 run, -1 give up */
    int64_t window_start; /* written before go is set */
    int64_t window_end;
    atomic_int inside;
    atomic_int last_owner; /* the index of the last acquirer, -1 none */
    atomic_llong violations;
    atomic_llong nsamples; /* claimed; those past cap are dropped */
    int64_t cap;
    w7_slot *slots;
    int64_t *samples;
    /* W8: the items in the buffer, and when each condition (0: not
     * empty, 1: not full) was last signalled (monotonic µs). */
    atomic_int count;
    atomic_llong signalled_at[2];
} w7_shared;

/* A process's client on the request's server, with its options: 0, or
 * -1 with error set. */
int bench_procs_client(const w7_request *rq, hilock_client **out,
                       char *error, size_t cap);

/* All of buf to fd, through EINTR and short writes: 0, or -1. */
int bench_write_all(int fd, const void *buf, size_t len);
/* All len bytes from fd: 1; 0 at end of file before any of them; -1 on
 * an error or an end of file part of the way. */
int bench_read_all(int fd, void *buf, size_t len);

/* A plain TCP connection to host:port whose reads and writes give up
 * after 5 s: its descriptor, or -1 with error set (naming what it is
 * for). */
int bench_procs_connect(const char *host, int port, const char *what,
                        char *error, size_t cap);

/* A process with its client and lock says it is ready and waits at the
 * gate: true when the point runs, false when the runner gave it up. */
bool bench_procs_start(w7_shared *sh, int gate);

/* The body of W8's process me (bench/w8.c); never returns. */
_Noreturn void bench_w8_worker(const w7_request *rq, w7_shared *sh, int me,
                               int gate);

/* Have the runner measure rq into res; 0, or -1 with error set: the
 * runner did not answer (and was killed), or the point failed (a
 * process's reason, from res->error). */
int bench_procs_run(const w7_request *rq, w7_result *res, char *error,
                    size_t cap);
/* What every point of the runner takes from its result: the rate over
 * the window, the waits, violations, and the server's scripts and CPU. */
struct bench_point;
void bench_procs_fill(struct bench_point *p, const w7_result *res,
                      double duration_s);

#endif
