/* W7, the multi-process hand-off: N processes, each with a client of its
 * own, take turns on one lock, and the server's INFO says how many
 * scripts and how much of its CPU each hand-off cost.
 *
 * A process that has a client (its loop thread, its connections, its
 * locks) is never forked: the child would inherit a copy of all that
 * with none of the threads behind it.  So hilock-bench forks a runner at
 * start-up, before anything else, and the runner forks the processes of
 * each point.  The main process flushes the server and sets the
 * semaphore with its own client, then hands the point to the runner over
 * a pipe and waits for its figures, which it prints as any other point.
 *
 * The processes share one anonymous mapping (MAP_SHARED): the start
 * flag, the window, the `inside` counter, the last owner, the
 * violations, and the waits of the counted cycles.  Each process makes
 * its client and its lock handle, says it is ready, and waits at a gate
 * (a pipe whose write end the runner closes) so that all start
 * together. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "procs.h"
#include "w7_floor.h"

/* The counters live in memory shared between processes: only atomics
 * that need no lock work there. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "lock-free int atomics");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "lock-free long long atomics");

/* The main process's end of the runner. */
static pid_t runner_pid = -1;
static int runner_in = -1;  /* requests go here */
static int runner_out = -1; /* results come from here */

/* The runner's ends, closed in each process it forks. */
static int req_fd = -1;
static int res_fd = -1;

static void sleep_us(int64_t us)
{
    if (us <= 0)
        return;
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int bench_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int bench_read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, p + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            return got == 0 ? 0 : -1;
        got += (size_t)n;
    }
    return 1;
}

/* ---- INFO over a plain connection --------------------------------------
 * The runner has no client, and a snapshot must not go through the
 * clients being measured: it opens a connection of its own for the
 * point, and reads the server's counters as text. */

int bench_procs_connect(const char *host, int port, const char *what,
                        char *error, size_t cap)
{
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
    struct addrinfo *list;
    int rc = getaddrinfo(host, service, &hints, &list);
    if (rc != 0) {
        snprintf(error, cap, "%s: cannot resolve %.100s: %s", what, host,
                 gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = list; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                    ai->ai_protocol);
        if (fd < 0)
            continue;
        /* A server that stops answering fails the point instead of
         * holding it. */
        struct timeval tv = {5, 0};
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(list);
    if (fd < 0)
        snprintf(error, cap, "%s: cannot connect to %.100s:%d: %s", what,
                 host, port, strerror(errno));
    return fd;
}

/* The text of INFO <section>, to free(); NULL with error set. */
static char *info_section(int fd, const char *section, char *error,
                          size_t cap)
{
    char cmd[96];
    int n = snprintf(cmd, sizeof cmd, "*2\r\n$4\r\nINFO\r\n$%zu\r\n%s\r\n",
                     strlen(section), section);
    if (bench_write_all(fd, cmd, (size_t)n) != 0) {
        snprintf(error, cap, "INFO %s: cannot send: %s", section,
                 strerror(errno));
        return NULL;
    }
    size_t len = 0, room = 8192, head = 0;
    long long want = -1;
    char *buf = malloc(room);
    while (buf != NULL) {
        if (want < 0) {
            char *eol = memchr(buf, '\n', len);
            if (eol != NULL) {
                if (buf[0] != '$') {
                    *eol = '\0';
                    snprintf(error, cap, "INFO %s: the server said %.120s",
                             section, buf);
                    free(buf);
                    return NULL;
                }
                want = strtoll(buf + 1, NULL, 10);
                head = (size_t)(eol - buf) + 1;
                if (want < 0)
                    break;
            }
        }
        if (want >= 0 && len >= head + (size_t)want + 2) {
            memmove(buf, buf + head, (size_t)want);
            buf[want] = '\0';
            return buf;
        }
        if (len + 1 >= room) {
            char *bigger = realloc(buf, room * 2);
            if (bigger == NULL)
                break;
            buf = bigger;
            room *= 2;
        }
        ssize_t r = read(fd, buf + len, room - len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(error, cap, "INFO %s: %s", section,
                     r == 0 ? "the server closed the connection"
                     : errno == EAGAIN || errno == EWOULDBLOCK
                         ? "no answer within 5 s"
                         : strerror(errno));
            free(buf);
            return NULL;
        }
        len += (size_t)r;
    }
    free(buf);
    snprintf(error, cap, "INFO %s: no answer that could be read", section);
    return NULL;
}

/* The value after "<name>:" at the start of a line of text, or NULL. */
static const char *info_value(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *line = text; line != NULL && *line;) {
        if (strncmp(line, name, n) == 0 && line[n] == ':')
            return line + n + 1;
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    return NULL;
}

typedef struct w7_snapshot {
    uint64_t scripts;
    double cpu_s;
} w7_snapshot;

/* Script calls (EVAL, EVALSHA, FCALL, whichever the server has, and
 * their read-only forms) and the server's CPU time (system and user, all
 * of its threads) as INFO has them now. */
static int info_snapshot(int fd, w7_snapshot *s, char *error, size_t cap)
{
    static const char *const scripted[] = {
        "cmdstat_eval",    "cmdstat_evalsha",    "cmdstat_fcall",
        "cmdstat_eval_ro", "cmdstat_evalsha_ro", "cmdstat_fcall_ro"};
    char *stats = info_section(fd, "commandstats", error, cap);
    if (stats == NULL)
        return -1;
    char *cpu = info_section(fd, "cpu", error, cap);
    if (cpu == NULL) {
        free(stats);
        return -1;
    }
    s->scripts = 0;
    for (size_t i = 0; i < sizeof scripted / sizeof scripted[0]; i++) {
        const char *v = info_value(stats, scripted[i]);
        const char *calls = v ? strstr(v, "calls=") : NULL;
        if (calls != NULL)
            s->scripts += strtoull(calls + 6, NULL, 10);
    }
    const char *sys = info_value(cpu, "used_cpu_sys");
    const char *user = info_value(cpu, "used_cpu_user");
    int rc = 0;
    if (sys == NULL || user == NULL) {
        snprintf(error, cap, "INFO cpu: no used_cpu_sys or used_cpu_user");
        rc = -1;
    } else {
        s->cpu_s = strtod(sys, NULL) + strtod(user, NULL);
    }
    free(stats);
    free(cpu);
    return rc;
}

/* ---- one process of a point --------------------------------------------- */

typedef struct w7_worker {
    hilock_client *client;
    hilock_lock *lock;     /* reentrant, fair, or a read-write lock's
                            * write side */
    hilock_semaphore *sem; /* the semaphore of one permit */
    bool on_floor;         /* a floor: a token passed round a ring */
    w7_floor floor;
} w7_worker;

static void worker_close(w7_worker *w)
{
    if (w->on_floor)
        w7_floor_close(&w->floor);
    if (w->lock != NULL)
        hilock_lock_destroy(w->lock);
    if (w->sem != NULL)
        hilock_semaphore_destroy(w->sem);
    if (w->client != NULL)
        hilock_client_destroy(w->client);
}

int bench_procs_client(const w7_request *rq, hilock_client **out,
                       char *error, size_t cap)
{
    hilock_options *o = NULL;
    int rc = hilock_options_create(&o);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_host(o, rq->host);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_port(o, rq->port);
    if (rc == HILOCK_OK && rq->connections > 0)
        rc = hilock_options_set_connections(o, rq->connections);
    if (rc == HILOCK_OK && rq->busy_poll_us > 0)
        rc = hilock_options_set_busy_poll_us(o, rq->busy_poll_us);
    if (rc == HILOCK_OK && rq->watchdog_ms > 0)
        rc = hilock_options_set_watchdog_timeout_ms(o, rq->watchdog_ms);
    if (rc == HILOCK_OK)
        rc = hilock_client_create(out, o);
    hilock_options_free(o);
    if (rc != HILOCK_OK) {
        snprintf(error, cap, "client: %s: %s", hilock_errname(rc),
                 hilock_last_error());
        return -1;
    }
    return 0;
}

static int worker_open(w7_worker *w, const w7_request *rq, int me,
                       char *error, size_t cap)
{
    if (strncmp(rq->kind, "floor", 5) == 0) {
        w->on_floor = true;
        return w7_floor_open(&w->floor, rq, me,
                             strcmp(rq->kind, "floor-loop") == 0, error, cap);
    }
    if (bench_procs_client(rq, &w->client, error, cap) != 0)
        return -1;
    int rc;
    char name[160];
    int n = snprintf(name, sizeof name, "bench:%s:hilock:w7:%s", rq->run_id,
                     rq->kind);
    if (strcmp(rq->kind, "semaphore") == 0)
        rc = hilock_semaphore_create_n(&w->sem, w->client, name, (size_t)n);
    else if (strcmp(rq->kind, "fair") == 0)
        rc = hilock_fair_lock_create_n(&w->lock, w->client, name, (size_t)n);
    else if (strcmp(rq->kind, "rwlock") == 0)
        rc = hilock_write_lock_create_n(&w->lock, w->client, name, (size_t)n);
    else
        rc = hilock_lock_create_n(&w->lock, w->client, name, (size_t)n);
    if (rc != HILOCK_OK) {
        snprintf(error, cap, "lock handle: %s: %s", hilock_errname(rc),
                 hilock_last_error());
        return -1;
    }
    return 0;
}

/* Blocking acquire until success: the watchdog keeps a lock's lease (a
 * plain semaphore's permit has no lease). */
static int worker_acquire(w7_worker *w)
{
    if (w->on_floor)
        return w7_floor_take(&w->floor) == 0 ? HILOCK_OK : HILOCK_EIO;
    if (w->sem != NULL)
        return hilock_semaphore_try_acquire(w->sem, 1, HILOCK_WAIT_FOREVER);
    return hilock_lock_try_acquire(w->lock, HILOCK_WAIT_FOREVER,
                                   HILOCK_LEASE_WATCHDOG);
}

static int worker_release(w7_worker *w)
{
    if (w->on_floor)
        return w7_floor_give(&w->floor) == 0 ? HILOCK_OK : HILOCK_EIO;
    if (w->sem != NULL)
        return hilock_semaphore_release(w->sem, 1);
    return hilock_lock_release(w->lock);
}

/* Why a process stops: the library's error, or the floor's. */
static void worker_failed(const w7_worker *w, w7_slot *slot,
                          const char *what, int rc)
{
    if (w->on_floor)
        snprintf(slot->error, sizeof slot->error, "floor: %s: %s",
                 strcmp(what, "acquire") == 0 ? "take" : "give",
                 errno == EAGAIN || errno == EWOULDBLOCK
                     ? "nothing for 5 s"
                 : errno != 0 ? strerror(errno)
                              : "the server closed or said something else");
    else
        snprintf(slot->error, sizeof slot->error, "%s: %s: %s", what,
                 hilock_errname(rc), hilock_last_error());
}

bool bench_procs_start(w7_shared *sh, int gate)
{
    atomic_fetch_add(&sh->ready, 1);
    /* The gate opens when the runner closes its end: every process of
     * the point reads end-of-file at once. */
    char byte;
    while (read(gate, &byte, 1) < 0 && errno == EINTR)
        ;
    close(gate);
    return atomic_load(&sh->go) == 1;
}

/* The body of process `me`; never returns.  Exit status 0 when it ran
 * its cycles (or was told to give up), 1 with the reason in its slot. */
static _Noreturn void worker_main(const w7_request *rq, w7_shared *sh,
                                  int me, int gate)
{
    w7_slot *slot = &sh->slots[me];
    w7_worker w = {0};
    if (worker_open(&w, rq, me, slot->error, sizeof slot->error) != 0)
        _exit(1);
    if (!bench_procs_start(sh, gate)) {
        worker_close(&w);
        _exit(0);
    }
    int64_t start = sh->window_start, end = sh->window_end;
    uint64_t counted = 0, changes = 0;
    for (;;) {
        int64_t t0 = bench_now_us();
        int rc = worker_acquire(&w);
        if (rc != HILOCK_OK) {
            worker_failed(&w, slot, "acquire", rc);
            _exit(1);
        }
        int64_t t1 = bench_now_us();
        if (atomic_fetch_add(&sh->inside, 1) + 1 > 1)
            atomic_fetch_add(&sh->violations, 1);
        bool changed = atomic_exchange(&sh->last_owner, me) != me;
        atomic_fetch_sub(&sh->inside, 1);
        rc = worker_release(&w);
        if (rc != HILOCK_OK) {
            worker_failed(&w, slot, "release", rc);
            _exit(1);
        }
        int64_t now = bench_now_us();
        if (now >= start && now < end) {
            counted++;
            changes += changed;
            long long k = atomic_fetch_add(&sh->nsamples, 1);
            if (k < sh->cap)
                sh->samples[k] = t1 - t0;
        }
        if (now >= end || atomic_load(&sh->go) != 1)
            break;
    }
    slot->counted = counted;
    slot->owner_changes = changes;
    worker_close(&w);
    _exit(0);
}

/* ---- the runner: one point ---------------------------------------------- */

typedef struct w7_point {
    const w7_request *rq;
    w7_shared *sh;
    pid_t *pids; /* 0 once reaped */
    int forked;
    int alive;
    char *error; /* the result's: the first failure */
    size_t error_cap;
} w7_point;

/* Keep the first reason the point failed. */
__attribute__((format(printf, 2, 3))) static void
point_fail(w7_point *pt, const char *fmt, ...)
{
    if (pt->error[0] != '\0')
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pt->error, pt->error_cap, fmt, ap);
    va_end(ap);
}

/* Reap the processes that have ended (waiting for one when block is
 * set); one that failed sets the point's error. */
static void reap(w7_point *pt, bool block)
{
    while (pt->alive > 0) {
        int status;
        pid_t pid = waitpid(-1, &status, block ? 0 : WNOHANG);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0)
            return;
        int i = 0;
        while (i < pt->forked && pt->pids[i] != pid)
            i++;
        if (i == pt->forked)
            continue;
        pt->pids[i] = 0;
        pt->alive--;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            continue;
        if (pt->sh->slots[i].error[0] != '\0')
            point_fail(pt, "process %d: %s", i, pt->sh->slots[i].error);
        else if (WIFSIGNALED(status))
            point_fail(pt, "process %d killed by %s", i,
                       strsignal(WTERMSIG(status)));
        else
            point_fail(pt, "process %d exited with status %d", i,
                       WEXITSTATUS(status));
    }
}

static void kill_all(w7_point *pt)
{
    for (int i = 0; i < pt->forked; i++)
        if (pt->pids[i] > 0)
            kill(pt->pids[i], SIGKILL);
    reap(pt, true);
}

/* Sleep until `until` (monotonic µs), or until every process has ended
 * when all is set, reaping as processes end; false when one failed
 * meanwhile. */
static bool watch_until(w7_point *pt, int64_t until, bool all)
{
    for (;;) {
        reap(pt, false);
        if (pt->error[0] != '\0')
            return false;
        int64_t left = until - bench_now_us();
        if (left <= 0 || (all && pt->alive == 0))
            return true;
        sleep_us(left < 10000 ? left : 10000);
    }
}

static void summarise(w7_point *pt, w7_result *res)
{
    w7_shared *sh = pt->sh;
    int n = pt->rq->procs;
    uint64_t min = UINT64_MAX, max = 0;
    double sum = 0, sumsq = 0;
    for (int i = 0; i < n; i++) {
        uint64_t c = sh->slots[i].counted;
        res->cycles += c;
        res->owner_changes += sh->slots[i].owner_changes;
        min = c < min ? c : min;
        max = c > max ? c : max;
        sum += (double)c;
        sumsq += (double)c * (double)c;
    }
    res->per_proc_min = min == UINT64_MAX ? 0 : min;
    res->per_proc_max = max;
    res->jain = sumsq > 0 ? sum * sum / ((double)n * sumsq) : 0;
    long long claimed = atomic_load(&sh->nsamples);
    size_t kept = (size_t)(claimed < sh->cap ? claimed : sh->cap);
    res->samples = kept;
    res->samples_dropped = (uint64_t)(claimed - (long long)kept);
    bench_sort(sh->samples, kept);
    res->p50_us = bench_percentile(sh->samples, kept, 50);
    res->p99_us = bench_percentile(sh->samples, kept, 99);
    res->max_us = kept ? sh->samples[kept - 1] : 0;
    res->violations = (uint64_t)atomic_load(&sh->violations);
}

static void run_point(const w7_request *rq, w7_result *res)
{
    memset(res, 0, sizeof *res);
    int n = rq->procs;
    int64_t cap = (int64_t)(rq->duration_s * W7_SAMPLES_PER_S) +
                  W7_SAMPLES_SPARE;
    size_t slots_at = (sizeof(w7_shared) + 63) & ~(size_t)63;
    size_t samples_at = slots_at + (size_t)n * sizeof(w7_slot);
    samples_at = (samples_at + 63) & ~(size_t)63;
    size_t size = samples_at + (size_t)cap * sizeof(int64_t);
    char *base = mmap(NULL, size, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        snprintf(res->error, sizeof res->error, "mmap of %zu bytes: %s",
                 size, strerror(errno));
        return;
    }
    w7_shared *sh = (w7_shared *)base;
    atomic_init(&sh->ready, 0);
    atomic_init(&sh->go, 0);
    atomic_init(&sh->inside, 0);
    atomic_init(&sh->last_owner, -1);
    atomic_init(&sh->violations, 0);
    atomic_init(&sh->nsamples, 0);
    atomic_init(&sh->count, 0);
    atomic_init(&sh->signalled_at[0], 0);
    atomic_init(&sh->signalled_at[1], 0);
    sh->cap = cap;
    sh->slots = (w7_slot *)(base + slots_at);
    sh->samples = (int64_t *)(base + samples_at);

    w7_point pt = {.rq = rq, .sh = sh, .error = res->error,
                   .error_cap = sizeof res->error};
    pt.pids = calloc((size_t)n, sizeof *pt.pids);
    int gate[2] = {-1, -1};
    int info = -1;
    if (pt.pids == NULL || pipe2(gate, O_CLOEXEC) != 0) {
        snprintf(res->error, sizeof res->error, "set-up: %s",
                 strerror(errno));
        goto out;
    }
    pid_t self = getpid();
    int64_t t = bench_now_us();
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            point_fail(&pt, "fork: %s", strerror(errno));
            break;
        }
        if (pid == 0) {
            /* Die with the runner, whatever becomes of it. */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != self)
                _exit(1);
            close(gate[1]);
            close(req_fd);
            close(res_fd);
            if (strcmp(rq->workload, "W8") == 0)
                bench_w8_worker(rq, sh, i, gate[0]);
            worker_main(rq, sh, i, gate[0]);
        }
        pt.pids[i] = pid;
        pt.forked++;
        pt.alive++;
    }
    close(gate[0]);
    gate[0] = -1;

    /* The start barrier: every process has its client and its lock. */
    int64_t ready_by = t + W7_READY_S * 1000000LL;
    while (pt.error[0] == '\0' && atomic_load(&sh->ready) < n) {
        if (bench_now_us() >= ready_by) {
            point_fail(&pt, "only %d of %d processes had their client "
                            "and lock after %d s",
                       atomic_load(&sh->ready), n, W7_READY_S);
            break;
        }
        watch_until(&pt, bench_now_us() + 2000, false);
    }
    if (pt.error[0] == '\0')
        fprintf(stderr, "hilock-bench: %s: %d processes ready in %.0f ms\n",
                rq->workload, n, (double)(bench_now_us() - t) / 1e3);
    w7_snapshot before = {0}, after = {0};
    if (pt.error[0] == '\0')
        info = bench_procs_connect(rq->host, rq->port, "INFO", res->error,
                            sizeof res->error);
    if (pt.error[0] != '\0') {
        atomic_store(&sh->go, -1);
        close(gate[1]);
        gate[1] = -1;
        kill_all(&pt);
        goto out;
    }
    int64_t go_at = bench_now_us();
    sh->window_start = go_at + (int64_t)(rq->warmup_s * 1e6);
    sh->window_end = sh->window_start + (int64_t)(rq->duration_s * 1e6);
    atomic_store(&sh->go, 1);
    close(gate[1]);
    gate[1] = -1;

    if (!watch_until(&pt, sh->window_start, false) ||
        info_snapshot(info, &before, res->error, sizeof res->error) != 0 ||
        !watch_until(&pt, sh->window_end, false) ||
        info_snapshot(info, &after, res->error, sizeof res->error) != 0 ||
        !watch_until(&pt, sh->window_end + W7_FINISH_S * 1000000LL, true) ||
        pt.alive > 0) {
        point_fail(&pt, "%d of %d processes were still running %d s after "
                        "the window; killed",
                   pt.alive, n, W7_FINISH_S);
        /* Whoever is blocked in an acquire sees no flag: kill them. */
        atomic_store(&sh->go, -1);
        kill_all(&pt);
        goto out;
    }
    summarise(&pt, res);
    res->scripts = after.scripts - before.scripts;
    res->server_cpu_us = (after.cpu_s - before.cpu_s) * 1e6;
out:
    if (info >= 0)
        close(info);
    if (gate[0] >= 0)
        close(gate[0]);
    if (gate[1] >= 0)
        close(gate[1]);
    free(pt.pids);
    munmap(base, size);
}

static _Noreturn void runner_main(void)
{
    w7_request rq;
    for (;;) {
        int rc = bench_read_all(req_fd, &rq, sizeof rq);
        if (rc <= 0)
            _exit(rc == 0 ? 0 : 1);
        w7_result res;
        run_point(&rq, &res);
        if (bench_write_all(res_fd, &res, sizeof res) != 0)
            _exit(1);
    }
}

int bench_w7_start(void)
{
    int req[2], res[2];
    if (pipe2(req, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(res, O_CLOEXEC) != 0) {
        close(req[0]);
        close(req[1]);
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        close(req[1]);
        close(res[0]);
        req_fd = req[0];
        res_fd = res[1];
        runner_main();
    }
    close(req[0]);
    close(res[1]);
    if (pid < 0) {
        fprintf(stderr, "hilock-bench: W7: cannot fork the runner: %s\n",
                strerror(errno));
        close(req[1]);
        close(res[0]);
        return -1;
    }
    runner_pid = pid;
    runner_in = req[1];
    runner_out = res[0];
    return 0;
}

void bench_w7_stop(void)
{
    if (runner_pid < 0)
        return;
    close(runner_in);
    close(runner_out);
    while (waitpid(runner_pid, NULL, 0) < 0 && errno == EINTR)
        ;
    runner_pid = -1;
}

/* The runner's answer, within deadline_us; -1 with error set. */
static int await_result(w7_result *res, int64_t deadline_us, char *error,
                        size_t cap)
{
    for (;;) {
        int64_t left = deadline_us - bench_now_us();
        if (left <= 0) {
            snprintf(error, cap, "the W7 runner did not answer in time; "
                                 "killed it");
            break;
        }
        struct pollfd pfd = {.fd = runner_out, .events = POLLIN};
        int ready = poll(&pfd, 1, (int)(left / 1000) + 1);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready == 0)
            continue;
        if (ready > 0 && bench_read_all(runner_out, res, sizeof *res) == 1)
            return 0;
        snprintf(error, cap, "the W7 runner ended");
        break;
    }
    kill(runner_pid, SIGKILL);
    close(runner_in);
    close(runner_out);
    waitpid(runner_pid, NULL, 0);
    runner_pid = -1;
    return -1;
}

int bench_procs_run(const w7_request *rq, w7_result *res, char *error,
                    size_t cap)
{
    if (runner_pid < 0) {
        snprintf(error, cap, "%s runs on one server, from a runner forked "
                             "at start (not with --replicas or --cluster)",
                 rq->workload);
        return -1;
    }
    int64_t deadline = bench_now_us() +
                       (int64_t)((rq->warmup_s + rq->duration_s + W7_READY_S +
                                  W7_FINISH_S + 30) *
                                 1e6);
    if (bench_write_all(runner_in, rq, sizeof *rq) != 0) {
        snprintf(error, cap, "cannot reach the runner: %s", strerror(errno));
        return -1;
    }
    if (await_result(res, deadline, error, cap) != 0)
        return -1;
    if (res->error[0] != '\0') {
        snprintf(error, cap, "%s", res->error);
        return -1;
    }
    return 0;
}

void bench_procs_fill(bench_point *p, const w7_result *res, double duration_s)
{
    p->cycles_per_s = (double)res->cycles / duration_s;
    p->p50_us = res->p50_us;
    p->p99_us = res->p99_us;
    p->max_us = res->max_us;
    p->violations = res->violations;
    p->samples_dropped = res->samples_dropped;
    p->scripts = res->scripts;
    p->server_cpu_us = res->server_cpu_us;
}

/* Set the semaphore to one permit, once, before the processes start. */
static int set_semaphore(const bench_args *a, hilock_client *c)
{
    char name[160];
    int n = snprintf(name, sizeof name, "bench:%s:hilock:w7:semaphore",
                     a->run_id);
    hilock_semaphore *s;
    if (hilock_semaphore_create_n(&s, c, name, (size_t)n) != HILOCK_OK)
        return -1;
    int rc = hilock_semaphore_set(s, 1);
    hilock_semaphore_destroy(s);
    return rc == HILOCK_OK ? 0 : -1;
}

bool bench_point_on_floor(const bench_point *p)
{
    return p->workload != NULL && strcmp(p->workload, "W7") == 0 &&
           p->kind != NULL && strncmp(p->kind, "floor", 5) == 0;
}

int bench_run_w7(const bench_args *a, hilock_client *c, int procs,
                 bench_point *p)
{
    static _Thread_local char error[256];
    p->workload = "W7";
    p->concurrency = procs;
    p->procs = procs;
    p->api = "sync";
    p->kind = a->kind;
    p->notes = "one worker per process on the sync API, on one lock with "
               "the watchdog lease (the semaphore: a plain one of 1 "
               "permit, which has no lease); inside and the last owner "
               "in shared memory; scripts are the calls of EVAL, EVALSHA "
               "and FCALL (and their _RO forms) and server CPU is "
               "used_cpu_sys + used_cpu_user, both from INFO at the "
               "window's start and end, per owner change (with one "
               "process, per acquisition)";
    if (bench_point_on_floor(p)) {
        p->api = "bare";
        p->notes = "the token goes round the processes in their order; "
                   "inside and the last owner in shared memory; server "
                   "CPU is used_cpu_sys + used_cpu_user, both from INFO at "
                   "the window's start and end, per owner change (with one "
                   "process, per take)";
    }
    if (runner_pid < 0) {
        p->error = "W7 runs on one server, from a runner forked at start "
                   "(not with --replicas or --cluster)";
        return -1;
    }
    if (procs < 1 || procs > W7_MAX_PROCS) {
        p->error = "W7 takes 1 to 1024 processes";
        return -1;
    }
    if (bench_flush(a, c) != 0 ||
        (strcmp(a->kind, "semaphore") == 0 && set_semaphore(a, c) != 0)) {
        p->error = "set-up failed";
        return -1;
    }
    w7_request rq = {.workload = "W7",
                     .port = a->server_port,
                     .procs = procs,
                     .connections = a->connections,
                     .busy_poll_us = a->busy_poll_us,
                     .watchdog_ms = a->watchdog_ms,
                     .duration_s = a->duration_s,
                     .warmup_s = a->warmup_s};
    snprintf(rq.host, sizeof rq.host, "%s", a->host);
    snprintf(rq.run_id, sizeof rq.run_id, "%s", a->run_id);
    snprintf(rq.kind, sizeof rq.kind, "%s", a->kind);
    w7_result res;
    if (bench_procs_run(&rq, &res, error, sizeof error) != 0) {
        p->error = error;
        return -1;
    }
    bench_procs_fill(p, &res, a->duration_s);
    p->owner_changes_per_s = (double)res.owner_changes / a->duration_s;
    p->per_worker_min = res.per_proc_min;
    p->per_worker_max = res.per_proc_max;
    p->jain = res.jain;
    /* One process never hands the lock to another: its figures are per
     * acquisition. */
    p->handoff_basis = procs == 1 ? "acquisitions" : "owner_changes";
    p->handoffs = procs == 1 ? res.cycles : res.owner_changes;
    return 0;
}
