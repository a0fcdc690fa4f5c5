/* The fair lock against a real redis-server: first come first served
 * across processes, a dead waiter passed over once its place runs out, a
 * live one keeping its place however long it waits, places given back at
 * once by a cancel or a wait that runs out, no keys left behind, wake-ups
 * by the release message, and what every lock kind owes: reentrancy,
 * ownership, fencing tokens, mutual exclusion and the watchdog.
 *
 * What the server holds is read over the fixture's own connections
 * (redis_server.h), never through the library under test. */
/* ctest-timeout: 150 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/fair.h"
#include "hilock/lock.h"
#include "hilock/options.h"
#include "hilock/reply.h"
#include "support/children.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/mutex_checker.h"
#include "support/raw_reads.h"

/* ---- helpers ----------------------------------------------------------- */

/* Each test's server and forked children; see hl_lock_fixture. */
static hl_lock_fixture fx;

/* "<client id>:<owner id>": an owner's field in the lock's hash, its
 * entry in the queue and the tail of its wake-up channel. */
#define FIELD_CAP (HILOCK_CLIENT_ID_LEN + 24)
typedef char field_t[FIELD_CAP];

static void field_of(char *out, hilock_client *c, uint64_t owner)
{
    snprintf(out, FIELD_CAP, "%s:%" PRIu64, hilock_client_id(c), owner);
}

typedef struct fair_keys {
    char queue[96];
    char timeout[96];
    char token[96];
    char channel[96]; /* the base; a waiter's is "<channel>:<field>" */
} fair_keys;

static fair_keys keys_of(const char *name)
{
    fair_keys k;

    snprintf(k.queue, sizeof k.queue, "redisson_lock_queue:{%s}", name);
    snprintf(k.timeout, sizeof k.timeout, "redisson_lock_timeout:{%s}",
             name);
    snprintf(k.token, sizeof k.token, "redisson_lock_token:{%s}", name);
    snprintf(k.channel, sizeof k.channel, "redisson_lock__channel:{%s}",
             name);
    return k;
}

/* ---- the server as the fixture sees it --------------------------------- */

static long long srv_llen(const char *key)
{
    return hl_raw_int(fx.server, "LLEN", key, (char *)NULL);
}

/* The queue's entries, oldest first: up to max into out; the count. */
static int srv_lrange(const char *key, field_t *out, int max)
{
    char r[HL_RAW_REPLY_CAP];
    const char *p = r;
    long n;

    hl_raw_cmd(fx.server, r, sizeof r, "LRANGE", key, "0", "-1", (char *)NULL);
    n = hl_raw_parse_array(&p);
    for (long i = 0; i < n; i++)
        hl_raw_parse_bulk(&p, i < max ? out[i] : NULL, FIELD_CAP);
    return (int)n;
}

/* The server time (ms) at which member's place runs out; -1 if none. */
static long long srv_zscore(const char *key, const char *member)
{
    char num[64];

    if (!hl_raw_bulk(fx.server, num, sizeof num, "ZSCORE", key, member,
                     (char *)NULL))
        return -1;
    return (long long)strtod(num, NULL);
}

static void assert_queue(const char *key, field_t *want, int n)
{
    field_t got[32];
    int m = srv_lrange(key, got, 32);
    bool same = m == n;
    char msg[2048];
    size_t len = 0;

    for (int i = 0; same && i < n; i++)
        same = strcmp(got[i], want[i]) == 0;
    if (same)
        return;
    len += (size_t)snprintf(msg + len, sizeof msg - len,
                            "queue %s has %d entries:", key, m);
    for (int i = 0; i < m && i < 32 && len < sizeof msg; i++)
        len += (size_t)snprintf(msg + len, sizeof msg - len, " %s",
                                got[i]);
    if (len < sizeof msg)
        len += (size_t)snprintf(msg + len, sizeof msg - len,
                                "; expected %d:", n);
    for (int i = 0; i < n && len < sizeof msg; i++)
        len += (size_t)snprintf(msg + len, sizeof msg - len, " %s",
                                want[i]);
    fail_msg("%s", msg);
}

typedef struct llen_want {
    const char *key;
    long long want;
} llen_want;

static bool llen_reached(void *arg)
{
    llen_want *w = arg;

    return srv_llen(w->key) == w->want;
}

static void wait_llen(const char *key, long long want, int timeout_ms)
{
    llen_want w = { key, want };

    if (!hl_wait_until(llen_reached, &w, timeout_ms))
        fail_msg("LLEN %s stayed %lld, expected %lld within %d ms", key,
                 srv_llen(key), want, timeout_ms);
}

static bool db_empty(void *arg)
{
    (void)arg;
    return hl_raw_dbsize_locks(fx.server) == 0;
}

static void assert_lock_gone(const char *name)
{
    fair_keys k = keys_of(name);
    const char *keys[] = { name, k.queue, k.timeout };

    for (int i = 0; i < 3; i++)
        if (hl_raw_exists(fx.server, keys[i]) != 0)
            fail_msg("%s is still there (%lld in the queue, %lld places)",
                     keys[i], srv_llen(k.queue),
                     hl_raw_int(fx.server, "ZCARD", k.timeout, (char *)NULL));
}

/* ---- waiting threads --------------------------------------------------- */

/* A thread that takes the lock for itself (its own owner id), notes when
 * and in which rank, and releases, once allowed to. */
typedef struct fwaiter {
    pthread_t thread;
    hilock_client *client;
    hilock_lock *lock;
    int64_t wait_ms;
    int64_t lease_ms;
    bool fenced;
    atomic_int *seq;          /* ranks the holds; may be NULL */
    atomic_bool *hold_until;  /* release only once set; may be NULL */
    _Atomic uint64_t owner;   /* the thread's owner id, once running */
    atomic_bool acquired;
    atomic_bool done;
    int rc;
    int release_rc;
    int rank;
    uint64_t token;
    int64_t acquired_at;
    char detail[200];
} fwaiter;

static void *fwaiter_main(void *arg)
{
    fwaiter *w = arg;

    atomic_store(&w->owner, hilock_thread_owner());
    if (w->fenced)
        w->rc = hilock_lock_acquire_fenced(w->lock, w->wait_ms, w->lease_ms,
                                           &w->token);
    else
        w->rc = hilock_lock_try_acquire(w->lock, w->wait_ms, w->lease_ms);
    w->acquired_at = hl_now_ms();
    snprintf(w->detail, sizeof w->detail, "%s", hilock_last_error());
    if (w->rc == HILOCK_OK) {
        /* Inside the hold: the ranks follow the order of the holds. */
        if (w->seq != NULL)
            w->rank = atomic_fetch_add(w->seq, 1);
        atomic_store(&w->acquired, true);
        if (w->hold_until != NULL)
            hl_wait_flag(w->hold_until, hl_widen(20000));
        w->release_rc = hilock_lock_release(w->lock);
    }
    atomic_store(&w->done, true);
    return NULL;
}

static void fwaiter_start_with(fwaiter *w, hilock_client *c, hilock_lock *l,
                               int64_t wait_ms, atomic_int *seq,
                               atomic_bool *hold_until, bool fenced)
{
    memset(w, 0, sizeof *w);
    w->client = c;
    w->lock = l;
    w->wait_ms = wait_ms;
    w->lease_ms = HILOCK_LEASE_WATCHDOG;
    w->fenced = fenced;
    w->seq = seq;
    w->hold_until = hold_until;
    w->rc = w->release_rc = w->rank = -1;
    atomic_init(&w->owner, 0);
    atomic_init(&w->acquired, false);
    atomic_init(&w->done, false);
    assert_int_equal(pthread_create(&w->thread, NULL, fwaiter_main, w), 0);
}

static void fwaiter_start(fwaiter *w, hilock_client *c, hilock_lock *l,
                          int64_t wait_ms, atomic_int *seq)
{
    fwaiter_start_with(w, c, l, wait_ms, seq, NULL, false);
}

static bool owner_known(void *arg)
{
    return atomic_load(&((fwaiter *)arg)->owner) != 0;
}

static void fwaiter_field(fwaiter *w, char *out)
{
    if (!hl_wait_until(owner_known, w, hl_widen(5000)))
        fail_msg("a waiter thread never started");
    field_of(out, w->client, atomic_load(&w->owner));
}

static void fwaiter_end(fwaiter *w, int timeout_ms)
{
    hl_join_within(w->thread, &w->done, timeout_ms);
}

static void fwaiter_join_ok(fwaiter *w, int timeout_ms)
{
    fwaiter_end(w, timeout_ms);
    if (w->rc != HILOCK_OK || w->release_rc != HILOCK_OK)
        fail_msg("waiter: acquire %s (%s), release %s",
                 hilock_errname(w->rc), w->detail,
                 hilock_errname(w->release_rc));
}

/* ---- first come, first served across processes ------------------------- */

#define FIFO_MAX 20
#define FIFO_PROCS 3
#define FIFO_OWNER_BASE 1000

/* Shared by the processes (MAP_SHARED): who took the lock in which order. */
typedef struct fifo_shared {
    atomic_int holds;
    atomic_int done; /* waiters that acquired and released */
    atomic_int order[FIFO_MAX];
    char ids[FIFO_PROCS][HILOCK_CLIENT_ID_LEN + 1];
} fifo_shared;

/* One process's waiters: async acquires on one handle, one owner id each,
 * so that each waiter's queue entry is known in advance. */
typedef struct fifo_proc {
    hilock_lock *lock;
    fifo_shared *sh;
    hl_mutex_checker *mc;
    atomic_int started;
    atomic_int finished;
} fifo_proc;

typedef struct fifo_ticket {
    fifo_proc *proc;
    int index;
} fifo_ticket;

static void fifo_released(hilock_lock *lock, int status, int64_t value,
                          void *data)
{
    fifo_ticket *t = data;

    (void)lock;
    (void)value;
    if (status != HILOCK_OK)
        hl_mutex_checker_fail(t->proc->mc, "waiter %d: release: %s",
                              t->index, hilock_errname(status));
    else
        atomic_fetch_add(&t->proc->sh->done, 1);
    atomic_fetch_add(&t->proc->finished, 1);
}

static void fifo_acquired(hilock_lock *lock, int status,
                          const hilock_acquired *acquired, void *data)
{
    fifo_ticket *t = data;
    fifo_proc *p = t->proc;
    long slot;
    int nth, rc;

    (void)acquired;
    if (status != HILOCK_OK) {
        hl_mutex_checker_fail(p->mc, "waiter %d: acquire: %s", t->index,
                              hilock_errname(status));
        atomic_fetch_add(&p->finished, 1);
        return;
    }
    slot = hl_mutex_checker_enter(p->mc, (uint32_t)t->index, 0);
    nth = atomic_fetch_add(&p->sh->holds, 1);
    if (nth < FIFO_MAX)
        atomic_store(&p->sh->order[nth], t->index);
    hl_mutex_checker_exit(p->mc, slot);
    rc = hilock_lock_release_async(lock,
                                   FIFO_OWNER_BASE + (uint64_t)t->index,
                                   fifo_released, t);
    if (rc != HILOCK_OK) {
        hl_mutex_checker_fail(p->mc, "waiter %d: release_async: %s",
                              t->index, hilock_errname(rc));
        atomic_fetch_add(&p->finished, 1);
    }
}

/* No cmocka: also runs in the children. */
static int fifo_enqueue(fifo_proc *p, fifo_ticket *t, int index)
{
    int rc;

    t->proc = p;
    t->index = index;
    atomic_fetch_add(&p->started, 1);
    /* Bounded, so that a lost wake-up is reported instead of hanging. */
    rc = hilock_lock_acquire_async(p->lock,
                                   FIFO_OWNER_BASE + (uint64_t)index,
                                   hl_widen(30000), HILOCK_LEASE_WATCHDOG, 0,
                                   fifo_acquired, t, NULL);
    if (rc != HILOCK_OK) {
        hl_mutex_checker_fail(p->mc, "waiter %d: acquire_async: %s", index,
                              hilock_errname(rc));
        atomic_fetch_add(&p->finished, 1);
    }
    return rc;
}

static void fifo_proc_init(fifo_proc *p, hilock_lock *l, fifo_shared *sh,
                           hl_mutex_checker *mc)
{
    p->lock = l;
    p->sh = sh;
    p->mc = mc;
    atomic_init(&p->started, 0);
    atomic_init(&p->finished, 0);
}

static bool fifo_proc_idle(void *arg)
{
    fifo_proc *p = arg;

    return atomic_load(&p->finished) == atomic_load(&p->started);
}

/* A child: its own client, then one waiter per byte the parent sends,
 * until the parent closes the pipe. */
static void fifo_child(fifo_shared *sh, hl_mutex_checker *mc, int proc,
                       int ready_fd, int cmd_fd)
{
    fifo_ticket tickets[FIFO_MAX];
    char why[300], byte = 'r';
    hilock_lock *l = NULL;
    hilock_client *c = hl_open_client(fx.server, NULL, why, sizeof why);
    fifo_proc p;

    if (c == NULL || hilock_fair_lock_create(&l, c, "fifo") != 0) {
        hl_mutex_checker_fail(mc, "process %d: client or lock: %s", proc,
                              c == NULL ? why : hilock_last_error());
        _exit(1);
    }
    fifo_proc_init(&p, l, sh, mc);
    memcpy(sh->ids[proc], hilock_client_id(c), HILOCK_CLIENT_ID_LEN);
    sh->ids[proc][HILOCK_CLIENT_ID_LEN] = '\0';
    if (write(ready_fd, &byte, 1) != 1)
        _exit(1);
    for (;;) {
        unsigned char index;
        ssize_t n = read(cmd_fd, &index, 1);

        if (n < 0 && errno == EINTR)
            continue;
        if (n != 1)
            break;
        if (index >= FIFO_MAX) {
            hl_mutex_checker_fail(mc, "process %d: bad index %u", proc,
                                  index);
            _exit(1);
        }
        fifo_enqueue(&p, &tickets[index], index);
    }
    if (!hl_wait_until(fifo_proc_idle, &p, hl_widen(10000))) {
        hl_mutex_checker_fail(mc, "process %d: waiters still pending", proc);
        _exit(1);
    }
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
    _exit(0);
}

static void test_fifo_across_processes(void **state)
{
    int n = hl_scaled(FIFO_MAX, 8);
    fair_keys k = keys_of("fifo");
    hl_mutex_checker *mc = hl_mutex_checker_create(FIFO_MAX, 50);
    fifo_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int ready[2], cmd[FIFO_PROCS][2];
    fifo_ticket tickets[FIFO_MAX];
    field_t want[FIFO_MAX];
    hilock_client *hc, *pc;
    hilock_lock *hl, *pl;
    char why[512], byte[FIFO_PROCS];
    fifo_proc p;

    (void)state;
    assert_non_null(mc);
    assert_true(sh != MAP_FAILED);
    atomic_init(&sh->holds, 0);
    atomic_init(&sh->done, 0);
    for (int i = 0; i < FIFO_MAX; i++)
        atomic_init(&sh->order[i], -1);
    assert_int_equal(pipe(ready), 0);
    for (int i = 1; i < FIFO_PROCS; i++)
        assert_int_equal(pipe(cmd[i]), 0);
    /* Fork before this process has a client: a child inherits only the
     * forking thread, so a client's loop thread (and any lock it held at
     * that moment) would not come along. */
    for (int i = 1; i < FIFO_PROCS; i++) {
        if (hl_children_fork(&fx.kids, i - 1) == 0) {
            close(ready[0]);
            for (int j = 1; j < FIFO_PROCS; j++) {
                close(cmd[j][1]);
                if (j != i)
                    close(cmd[j][0]);
            }
            fifo_child(sh, mc, i, ready[1], cmd[i][0]);
        }
    }
    close(ready[1]);
    for (int i = 1; i < FIFO_PROCS; i++)
        close(cmd[i][0]);
    hc = hl_new_client(fx.server, NULL);
    pc = hl_new_client(fx.server, NULL);
    hl = hl_new_fair_lock(hc, "fifo");
    pl = hl_new_fair_lock(pc, "fifo");
    fifo_proc_init(&p, pl, sh, mc);
    memcpy(sh->ids[0], hilock_client_id(pc), HILOCK_CLIENT_ID_LEN);
    sh->ids[0][HILOCK_CLIENT_ID_LEN] = '\0';
    if (!hl_read_exact(ready[0], byte, FIFO_PROCS - 1, hl_widen(10000)))
        fail_msg("the child processes did not connect: %s",
                 hl_mutex_checker_verify(mc, false, why, sizeof why)
                     ? "no reason given" : why);
    close(ready[0]);

    assert_status(hilock_lock_try_acquire(hl, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    for (int i = 0; i < n; i++) {
        int proc = i % FIFO_PROCS;

        if (proc == 0) {
            assert_status(fifo_enqueue(&p, &tickets[i], i), HILOCK_OK);
        } else {
            unsigned char index = (unsigned char)i;

            assert_int_equal(write(cmd[proc][1], &index, 1), 1);
        }
        /* The next waiter starts only once this one has its place, so the
         * order of the queue is known rather than assumed. */
        wait_llen(k.queue, i + 1, hl_widen(5000));
        snprintf(want[i], FIELD_CAP, "%s:%d", sh->ids[proc],
                 FIFO_OWNER_BASE + i);
    }
    assert_queue(k.queue, want, n);
    assert_int_equal(atomic_load(&sh->holds), 0);

    assert_status(hilock_lock_release(hl), HILOCK_OK);
    /* Hand-overs by message take milliseconds each; renewal timers
     * (every 1.7 s with the default waiter timeout) would not make it. */
    if (!hl_wait_count(&sh->done, n, hl_widen(10000)))
        fail_msg("%d of %d waiters got and gave back the lock: %s",
                 atomic_load(&sh->done), n,
                 hl_mutex_checker_verify(mc, false, why, sizeof why)
                     ? "no failure reported" : why);
    for (int i = 0; i < n; i++) {
        if (atomic_load(&sh->order[i]) != i) {
            char got[256];
            size_t len = 0;

            for (int j = 0; j < n && len < sizeof got; j++)
                len += (size_t)snprintf(got + len, sizeof got - len, " %d",
                                        atomic_load(&sh->order[j]));
            fail_msg("waiters took the lock in the order%s; they queued "
                     "as 0..%d", got, n - 1);
        }
    }
    for (int i = 1; i < FIFO_PROCS; i++)
        close(cmd[i][1]);
    if (!hl_children_wait(&fx.kids, hl_widen(20000)))
        fail_msg("the child processes did not finish");
    for (int i = 0; i < FIFO_PROCS - 1; i++)
        if (!WIFEXITED(fx.kids.status[i]) ||
            WEXITSTATUS(fx.kids.status[i]) != 0)
            fail_msg("child %d ended with status 0x%x: %s", i + 1,
                     fx.kids.status[i],
                     hl_mutex_checker_verify(mc, false, why, sizeof why)
                         ? "no failure reported" : why);
    assert_true(hl_wait_until(fifo_proc_idle, &p, hl_widen(5000)));
    if (!hl_mutex_checker_verify(mc, false, why, sizeof why))
        fail_msg("%s", why);
    assert_int_equal(hl_mutex_checker_count(mc), n);
    assert_lock_gone("fifo");
    hl_free_lock(pl);
    hl_free_lock(hl);
    hl_free_client(pc);
    hl_free_client(hc);
    hl_mutex_checker_free(mc);
    munmap(sh, sizeof *sh);
}

/* ---- a waiter killed at the head of the line --------------------------- */

#define DEAD_OWNER UINT64_C(77)

static void dead_child(int64_t waiter_ms, int go_fd, int info_fd)
{
    const hl_client_opts opts = { .waiter_ms = waiter_ms };
    char why[300], go;
    field_t field;
    hilock_client *c;
    hilock_lock *l = NULL;
    static hl_acquire_rec never;

    hl_acquire_rec_init(&never, NULL);
    if (!hl_read_exact(go_fd, &go, 1, hl_widen(10000)))
        _exit(1);
    c = hl_open_client(fx.server, &opts, why, sizeof why);
    if (c == NULL || hilock_fair_lock_create(&l, c, "dead") != 0)
        _exit(1);
    if (hilock_lock_acquire_async(l, DEAD_OWNER, HILOCK_WAIT_FOREVER,
                                  HILOCK_LEASE_WATCHDOG, 0, hl_record_acquire,
                                  &never, NULL) != 0)
        _exit(1);
    memset(field, 0, sizeof field);
    field_of(field, c, DEAD_OWNER);
    if (write(info_fd, field, sizeof field) != (ssize_t)sizeof field)
        _exit(1);
    /* Wait, renewing the place, until the parent kills us. */
    for (;;)
        pause();
}

static void test_dead_head_passed_over(void **state)
{
    /* The live child must renew its place within wt of its last renewal
     * (it tries every wt / 3) until the kill: 2 s leaves it a second and
     * more of a machine too busy to run it, which 1 s did not. */
    const int wt = hl_scaled(2000, 3000);
    fair_keys k = keys_of("dead");
    int go[2], info[2];
    hilock_client *hc, *bc, *cc;
    hilock_lock *hl, *bl, *cl;
    field_t q[3], rest[1];
    atomic_bool let_go;
    atomic_int seq;
    long long left, took;
    int64_t t_obs;
    fwaiter b, c;

    (void)state;
    atomic_init(&let_go, false);
    atomic_init(&seq, 0);
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(info), 0);
    /* Fork first: the child makes its own client. */
    if (hl_children_fork(&fx.kids, 0) == 0) {
        close(go[1]);
        close(info[0]);
        dead_child(wt, go[0], info[1]);
    }
    close(go[0]);
    close(info[1]);
    hc = hl_new_client(fx.server, NULL);
    hl = hl_new_fair_lock(hc, "dead");
    assert_status(hilock_lock_try_acquire(hl, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_int_equal(write(go[1], "g", 1), 1);
    if (!hl_read_exact(info[0], q[0], sizeof q[0], hl_widen(10000)))
        fail_msg("the child never queued");
    close(go[1]);
    close(info[0]);
    wait_llen(k.queue, 1, hl_widen(5000));

    bc = hl_new_client(fx.server, &(hl_client_opts){ .waiter_ms = wt });
    cc = hl_new_client(fx.server, &(hl_client_opts){ .waiter_ms = wt });
    bl = hl_new_fair_lock(bc, "dead");
    cl = hl_new_fair_lock(cc, "dead");
    fwaiter_start_with(&b, bc, bl, hl_widen(30000), &seq, &let_go, false);
    fwaiter_field(&b, q[1]);
    wait_llen(k.queue, 2, hl_widen(5000));
    fwaiter_start(&c, cc, cl, hl_widen(30000), &seq);
    fwaiter_field(&c, q[2]);
    wait_llen(k.queue, 3, hl_widen(5000));
    assert_queue(k.queue, q, 3);

    assert_int_equal(hl_children_kill(&fx.kids, 0), 0);
    /* When the dead waiter's place runs out, on the server's clock: it
     * last renewed it within a third of the waiter timeout. */
    left = srv_zscore(k.timeout, q[0]) - hl_raw_server_ms(fx.server);
    t_obs = hl_now_ms();
    if (left <= 0 || left > wt)
        fail_msg("the killed waiter's place had %lld ms left, expected "
                 "0..%d", left, wt);
    assert_status(hilock_lock_release(hl), HILOCK_OK);
    if (!hl_wait_flag(&b.acquired, hl_widen(wt + 5000)))
        fail_msg("the waiter behind a dead head did not get the lock "
                 "within %d ms", hl_widen(wt + 5000));
    took = b.acquired_at - t_obs;
    /* Not before the dead place ran out (it was a place like any other
     * until then), and soon after: the waiter behind it times its next
     * attempt by the head's place. */
    if (took < left - 30)
        fail_msg("the dead head was passed over %lld ms after the kill "
                 "but its place had %lld ms left", took, left);
    if (took > left + wt / 3 + hl_widen(500))
        fail_msg("the dead head was passed over only %lld ms after the "
                 "kill; its place had %lld ms left", took, left);
    /* The dead entry went, the live one behind stays. */
    snprintf(rest[0], FIELD_CAP, "%s", q[2]);
    assert_queue(k.queue, rest, 1);
    assert_int_equal(srv_zscore(k.timeout, q[0]), -1);
    assert_true(srv_zscore(k.timeout, q[2]) > 0);
    atomic_store(&let_go, true);
    fwaiter_join_ok(&b, hl_widen(5000));
    fwaiter_join_ok(&c, hl_widen(5000));
    assert_int_equal(b.rank, 0);
    assert_int_equal(c.rank, 1);
    assert_lock_gone("dead");
    hl_free_lock(cl);
    hl_free_lock(bl);
    hl_free_lock(hl);
    hl_free_client(cc);
    hl_free_client(bc);
    hl_free_client(hc);
}

/* ---- a live waiter keeps its place ------------------------------------- */

/* Made from a URL, so that the query key is what sets the timeout. */
static hilock_client *url_client(int waiter_ms)
{
    hilock_options *o = NULL;
    hilock_client *c = NULL;
    char url[128];

    snprintf(url, sizeof url, "redis://127.0.0.1:%d?waiter_timeout=%d",
             hl_redis_server_port(fx.server), waiter_ms);
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, url), HILOCK_OK);
    assert_int_equal(hilock_options_waiter_timeout_ms(o), waiter_ms);
    assert_status(hl_set_valgrind_timeouts(o), HILOCK_OK);
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    return c;
}

static void test_live_waiter_keeps_place(void **state)
{
    const int wt = hl_scaled(1000, 2000);
    const int hold_ms = 3 * wt + wt / 2;
    fair_keys k = keys_of("live");
    hilock_client *hc = hl_new_client(fx.server, NULL), *c1 = url_client(wt),
                  *c2 = url_client(wt);
    hilock_lock *hl = hl_new_fair_lock(hc, "live");
    hilock_lock *l1 = hl_new_fair_lock(c1, "live");
    hilock_lock *l2 = hl_new_fair_lock(c2, "live");
    long long z0, z1, left;
    field_t q[2];
    atomic_int seq;
    int64_t t0;
    fwaiter w1, w2;

    (void)state;
    atomic_init(&seq, 0);
    assert_status(hilock_lock_try_acquire(hl, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    fwaiter_start(&w1, c1, l1, hl_widen(60000), &seq);
    fwaiter_field(&w1, q[0]);
    wait_llen(k.queue, 1, hl_widen(5000));
    fwaiter_start(&w2, c2, l2, hl_widen(60000), &seq);
    fwaiter_field(&w2, q[1]);
    wait_llen(k.queue, 2, hl_widen(5000));
    z0 = srv_zscore(k.timeout, q[0]);
    /* The place is reserved for the URL's timeout, not the default. */
    left = z0 - hl_raw_server_ms(fx.server);
    if (left <= 0 || left > wt)
        fail_msg("a new place has %lld ms left with waiter_timeout=%d",
                 left, wt);

    /* Held for three and a half waiter timeouts: without renewals the
     * first waiter's place would have run out three times over. */
    t0 = hl_now_ms();
    while (hl_now_ms() - t0 < hold_ms) {
        long long now;

        assert_queue(k.queue, q, 2);
        now = hl_raw_server_ms(fx.server);
        /* Renewed every third of the timeout, a place keeps about two
         * thirds of it; one let run out and taken again would drain to
         * nothing first (and might keep its rank by luck).  A sixth
         * leaves room for renewals half a timeout late. */
        for (int i = 0; i < 2; i++) {
            left = srv_zscore(k.timeout, q[i]) - now;
            if (left <= wt / 6)
                fail_msg("waiter %d's place had %lld ms left after %lld ms "
                         "of waiting", i + 1, left,
                         (long long)(hl_now_ms() - t0));
        }
        assert_false(atomic_load(&w1.done));
        assert_false(atomic_load(&w2.done));
        hl_sleep_ms(50);
    }
    z1 = srv_zscore(k.timeout, q[0]);
    if (z1 - z0 < 2 * wt)
        fail_msg("the place moved on by %lld ms in %d ms of waiting",
                 z1 - z0, hold_ms);

    assert_status(hilock_lock_release(hl), HILOCK_OK);
    fwaiter_join_ok(&w1, hl_widen(5000));
    fwaiter_join_ok(&w2, hl_widen(5000));
    assert_int_equal(w1.rank, 0);
    assert_int_equal(w2.rank, 1);
    assert_true(w1.acquired_at <= w2.acquired_at);
    assert_lock_gone("live");
    hl_free_lock(l2);
    hl_free_lock(l1);
    hl_free_lock(hl);
    hl_free_client(c2);
    hl_free_client(c1);
    hl_free_client(hc);
}

/* ---- a cancel or a wait that runs out gives the place back ------------- */

#define OWNER_A UINT64_C(0xA11CE)

static void test_cancel_and_timeout_leave_at_once(void **state)
{
    /* Places reserved for a minute: anything that leaves the queue within
     * seconds left it, it did not run out. */
    const int64_t wt = 60000;
    const int quick = hl_widen(2000);
    fair_keys k = keys_of("leave");
    const hl_client_opts opts = { .waiter_ms = wt };
    hilock_client *hc = hl_new_client(fx.server, NULL);
    hilock_client *c1 = hl_new_client(fx.server, &opts);
    hilock_client *c2 = hl_new_client(fx.server, &opts);
    hilock_client *c3 = hl_new_client(fx.server, &opts);
    hilock_lock *hl = hl_new_fair_lock(hc, "leave");
    hilock_lock *l1 = hl_new_fair_lock(c1, "leave");
    hilock_lock *l2 = hl_new_fair_lock(c2, "leave");
    hilock_lock *l3 = hl_new_fair_lock(c3, "leave");
    field_t q[2], mine;
    uint64_t id = 0;
    int64_t t0;
    fwaiter w2, w3;
    hl_acquire_rec a;

    (void)state;
    hl_acquire_rec_init(&a, NULL);
    assert_status(hilock_lock_try_acquire(hl, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_acquire_async(l1, OWNER_A, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &a, &id),
                  HILOCK_OK);
    field_of(q[0], c1, OWNER_A);
    wait_llen(k.queue, 1, hl_widen(5000));
    fwaiter_start(&w2, c2, l2, hl_widen(30000), NULL);
    fwaiter_field(&w2, q[1]);
    wait_llen(k.queue, 2, hl_widen(5000));
    assert_queue(k.queue, q, 2);

    /* A cancelled acquire at the head. */
    t0 = hl_now_ms();
    assert_status(hilock_lock_cancel(l1, id), HILOCK_OK);
    if (!hl_wait_count(&a.calls, 1, hl_widen(5000)))
        fail_msg("the cancelled acquire never called back");
    assert_status(a.status, HILOCK_ECANCELED);
    wait_llen(k.queue, 1, quick);
    assert_true(hl_now_ms() - t0 < quick);
    assert_queue(k.queue, &q[1], 1);
    assert_int_equal(srv_zscore(k.timeout, q[0]), -1);

    /* A bounded wait that runs out. */
    fwaiter_start(&w3, c3, l3, hl_scaled(400, 3000), NULL);
    fwaiter_field(&w3, q[0]);
    wait_llen(k.queue, 2, hl_widen(2000));
    fwaiter_end(&w3, hl_widen(5000));
    assert_status(w3.rc, HILOCK_EBUSY);
    wait_llen(k.queue, 1, quick);
    assert_true(hl_now_ms() - w3.acquired_at < quick);
    assert_queue(k.queue, &q[1], 1);
    assert_int_equal(srv_zscore(k.timeout, q[0]), -1);

    /* A single attempt. */
    field_of(mine, c3, hilock_thread_owner());
    assert_status(hilock_lock_try_acquire(l3, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_EBUSY);
    wait_llen(k.queue, 1, quick);
    assert_queue(k.queue, &q[1], 1);
    assert_int_equal(srv_zscore(k.timeout, mine), -1);

    /* The one still waiting was not disturbed by any of that. */
    assert_false(atomic_load(&w2.done));
    t0 = hl_now_ms();
    assert_status(hilock_lock_release(hl), HILOCK_OK);
    fwaiter_join_ok(&w2, hl_widen(5000));
    if (w2.acquired_at - t0 > hl_widen(2000))
        fail_msg("the remaining waiter got the lock %lld ms after the "
                 "release", (long long)(w2.acquired_at - t0));
    assert_int_equal(atomic_load(&a.calls), 1);
    assert_lock_gone("leave");

    /* The last one in line leaves: the line's keys go with it, and a
     * handle destroyed under a waiting acquire gives its place back. */
    assert_status(hilock_lock_try_acquire(hl, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    fwaiter_start(&w3, c3, l3, hl_scaled(400, 3000), NULL);
    wait_llen(k.queue, 1, hl_widen(2000));
    fwaiter_end(&w3, hl_widen(5000));
    assert_status(w3.rc, HILOCK_EBUSY);
    wait_llen(k.queue, 0, quick);
    assert_int_equal(hl_raw_exists(fx.server, k.timeout), 0);
    hl_acquire_rec_init(&a, NULL);
    assert_status(hilock_lock_acquire_async(l1, OWNER_A, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &a, NULL),
                  HILOCK_OK);
    wait_llen(k.queue, 1, hl_widen(5000));
    hl_free_lock(l1);
    if (!hl_wait_count(&a.calls, 1, hl_widen(5000)))
        fail_msg("destroying the handle did not end its acquire");
    assert_status(a.status, HILOCK_ECANCELED);
    wait_llen(k.queue, 0, quick);
    assert_int_equal(hl_raw_exists(fx.server, k.timeout), 0);
    assert_status(hilock_lock_release(hl), HILOCK_OK);
    assert_lock_gone("leave");
    hl_free_lock(l3);
    hl_free_lock(l2);
    hl_free_lock(hl);
    hl_free_client(c3);
    hl_free_client(c2);
    hl_free_client(c1);
    hl_free_client(hc);
}

/* ---- nothing left behind after contention ------------------------------ */

#define CHURN_CLIENTS 3
#define CHURN_THREADS 3

typedef struct churn {
    pthread_t thread;
    hilock_lock *lock;
    hl_mutex_checker *mc;
    int cycles;
    uint32_t id;
    int timeouts;
    int cancels;
} churn;

static void churn_hold(churn *t)
{
    hl_mutex_checker_exit(t->mc, hl_mutex_checker_enter(t->mc, t->id, 0));
}

/* An acquire cancelled as soon as it is made: it may still be waiting,
 * be granted meanwhile (and given back), or have completed first. */
static bool churn_cancel(churn *t, int cycle)
{
    uint64_t owner = UINT64_C(1) << 40 | (uint64_t)t->id << 20 |
                     (uint64_t)cycle;
    uint64_t op = 0;
    hl_acquire_rec r;
    hl_value_rec v;
    int rc;
    bool not_found = false;

    hl_acquire_rec_init(&r, NULL);
    hl_value_rec_init(&v);
    rc = hilock_lock_acquire_async(t->lock, owner, HILOCK_WAIT_FOREVER,
                                   HILOCK_LEASE_WATCHDOG, 0,
                                   hl_record_acquire, &r, &op);
    /* An acquire that won the lock before the cancel reached it is no
     * longer pending: ENOTFOUND, and its callback says it holds. */
    if (rc == HILOCK_OK) {
        rc = hilock_lock_cancel(t->lock, op);
        not_found = rc == HILOCK_ENOTFOUND;
        if (not_found)
            rc = HILOCK_OK;
    }
    if (rc != HILOCK_OK) {
        hl_mutex_checker_fail(t->mc, "holder %u: acquire/cancel: %s",
                              t->id, hilock_errname(rc));
        return false;
    }
    if (!hl_wait_count(&r.calls, 1, hl_widen(30000))) {
        hl_mutex_checker_fail(t->mc, "holder %u: a cancelled acquire never "
                              "called back", t->id);
        return false;
    }
    if (r.status == HILOCK_ECANCELED && not_found) {
        hl_mutex_checker_fail(t->mc, "holder %u: the cancel found no "
                              "acquire, yet it was cancelled", t->id);
        return false;
    }
    if (r.status == HILOCK_ECANCELED) {
        t->cancels++;
        return true;
    }
    if (r.status != HILOCK_OK) {
        hl_mutex_checker_fail(t->mc, "holder %u: cancelled acquire: %s",
                              t->id, hilock_errname(r.status));
        return false;
    }
    churn_hold(t);
    if (hilock_lock_release_async(t->lock, owner, hl_record_value, &v) !=
            HILOCK_OK ||
        !hl_wait_count(&v.calls, 1, hl_widen(30000)) ||
        v.status != HILOCK_OK) {
        hl_mutex_checker_fail(t->mc, "holder %u: async release failed",
                              t->id);
        return false;
    }
    return true;
}

static void *churn_main(void *arg)
{
    churn *t = arg;

    for (int i = 0; i < t->cycles; i++) {
        int64_t wait = i % 3 == 2 ? 1 : hl_widen(30000);
        int rc;

        if (i % 6 == 5) {
            if (!churn_cancel(t, i))
                return NULL;
            continue;
        }
        rc = hilock_lock_try_acquire(t->lock, wait, HILOCK_LEASE_WATCHDOG);
        if (rc == HILOCK_EBUSY && wait == 1) {
            t->timeouts++;
            continue;
        }
        if (rc != HILOCK_OK) {
            hl_mutex_checker_fail(t->mc, "holder %u cycle %d: acquire: %s "
                                  "(%s)", t->id, i, hilock_errname(rc),
                                  hilock_last_error());
            return NULL;
        }
        churn_hold(t);
        rc = hilock_lock_release(t->lock);
        if (rc != HILOCK_OK) {
            hl_mutex_checker_fail(t->mc, "holder %u cycle %d: release: %s",
                                  t->id, i, hilock_errname(rc));
            return NULL;
        }
    }
    return NULL;
}

static void test_no_leftover_keys(void **state)
{
    /* Places reserved for a minute: keys that vanish within seconds
     * were deleted, they did not expire. */
    const hl_client_opts opts = { .waiter_ms = 60000 };
    int cycles = hl_scaled(30, 6);
    size_t total = (size_t)CHURN_CLIENTS * CHURN_THREADS * (size_t)cycles;
    hl_mutex_checker *mc = hl_mutex_checker_create(total, 20);
    hilock_client *c[CHURN_CLIENTS];
    hilock_lock *l[CHURN_CLIENTS];
    churn t[CHURN_CLIENTS * CHURN_THREADS];
    int timeouts = 0, cancels = 0;
    char why[512], keys[HL_RAW_REPLY_CAP];

    (void)state;
    assert_non_null(mc);
    assert_int_equal(hl_raw_dbsize_locks(fx.server), 0);
    for (int i = 0; i < CHURN_CLIENTS; i++) {
        c[i] = hl_new_client(fx.server, &opts);
        l[i] = hl_new_fair_lock(c[i], "churn");
    }
    for (int i = 0; i < CHURN_CLIENTS * CHURN_THREADS; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].lock = l[i / CHURN_THREADS];
        t[i].mc = mc;
        t[i].cycles = cycles;
        t[i].id = (uint32_t)i;
        assert_int_equal(pthread_create(&t[i].thread, NULL, churn_main,
                                        &t[i]), 0);
    }
    for (int i = 0; i < CHURN_CLIENTS * CHURN_THREADS; i++) {
        pthread_join(t[i].thread, NULL);
        timeouts += t[i].timeouts;
        cancels += t[i].cancels;
    }
    if (!hl_mutex_checker_verify(mc, false, why, sizeof why))
        fail_msg("%s", why);
    print_message("fair churn: %zu holds, %d waits ran out, %d cancelled\n",
                  hl_mutex_checker_count(mc), timeouts, cancels);
    if (!hl_wait_until(db_empty, NULL, hl_widen(3000))) {
        hl_raw_cmd(fx.server, keys, sizeof keys, "KEYS", "*", (char *)NULL);
        fail_msg("%lld keys left after every hold was released: %.400s",
                 hl_raw_dbsize_locks(fx.server), keys);
    }
    for (int i = 0; i < CHURN_CLIENTS; i++) {
        hl_free_lock(l[i]);
        hl_free_client(c[i]);
    }
    hl_mutex_checker_free(mc);
}

/* ---- woken by the release message -------------------------------------- */

static void test_wakeup_by_message(void **state)
{
    /* A lease of a minute and places of a minute: the waiter's own timers
     * fire 20 s apart at the soonest, so only the message can explain a
     * waiter that gets the lock within a second. */
    fair_keys k = keys_of("wake");
    hilock_client *hc = hl_new_client(fx.server, NULL);
    hilock_client *wc =
        hl_new_client(fx.server, &(hl_client_opts){ .waiter_ms = 60000 });
    hilock_lock *hl = hl_new_fair_lock(hc, "wake");
    hilock_lock *wl = hl_new_fair_lock(wc, "wake");
    char channel[200];
    field_t field;
    int64_t t_rel, took;
    long long ttl;
    fwaiter w;

    (void)state;
    assert_status(hilock_lock_try_acquire(hl, 0, 60000), HILOCK_OK);
    ttl = hl_raw_pttl(fx.server, "wake");
    assert_true(ttl > 50000 && ttl <= 60000);
    fwaiter_start(&w, wc, wl, hl_widen(30000), NULL);
    fwaiter_field(&w, field);
    wait_llen(k.queue, 1, hl_widen(5000));
    snprintf(channel, sizeof channel, "%s:%s", k.channel, field);
    hl_expect_numsub(fx.server, channel, 1, 1);
    /* Each waiter listens on its own channel, not the lock's. */
    assert_int_equal(hl_fixture_numsub(fx.server, k.channel), 0);
    t_rel = hl_now_ms();
    assert_status(hilock_lock_release(hl), HILOCK_OK);
    fwaiter_join_ok(&w, hl_widen(5000));
    took = w.acquired_at - t_rel;
    if (took > hl_widen(1000))
        fail_msg("the waiter got the lock %lld ms after the release",
                 (long long)took);
    hl_expect_numsub(fx.server, channel, 0, 0);
    assert_lock_gone("wake");
    hl_free_lock(wl);
    hl_free_lock(hl);
    hl_free_client(wc);
    hl_free_client(hc);
}

/* ---- reentrancy and ownership ------------------------------------------ */

static void test_reentrancy_and_ownership(void **state)
{
    fair_keys k = keys_of("reent");
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *oc = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_fair_lock(c, "reent");
    hilock_lock *ol = hl_new_fair_lock(oc, "reent");
    hilock_lock *never = hl_new_fair_lock(c, "reent-never");
    char field[FIELD_CAP], r[128];
    field_t q[1];
    int64_t count = -1;
    bool held = false;
    hl_value_rec v;
    fwaiter w;

    (void)state;
    hl_value_rec_init(&v);
    field_of(field, c, hilock_thread_owner());
    for (int i = 1; i <= 3; i++) {
        assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                      HILOCK_OK);
        assert_status(hilock_lock_hold_count(l, &count), HILOCK_OK);
        assert_int_equal(count, i);
    }
    assert_int_equal(hl_raw_cmd(fx.server, r, sizeof r, "HGET", "reent", field,
                                (char *)NULL),
                     '$');
    assert_string_equal(r, "$1\r\n3\r\n");

    /* With somebody in line, the holder still takes it again at once:
     * the line is for those who do not hold it. */
    fwaiter_start(&w, oc, ol, hl_widen(30000), NULL);
    fwaiter_field(&w, q[0]);
    wait_llen(k.queue, 1, hl_widen(5000));
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_hold_count(l, &count), HILOCK_OK);
    assert_int_equal(count, 4);
    assert_queue(k.queue, q, 1);

    /* Nobody else can give it back: another thread on the same handle,
     * another client, an explicit owner that never took it, a lock never
     * taken. */
    assert_status(hl_release_from_other_thread(l, NULL), HILOCK_ENOTOWNER);
    assert_status(hilock_lock_release(ol), HILOCK_ENOTOWNER);
    assert_status(hilock_lock_release_async(l, hilock_thread_owner() + 999,
                                            hl_record_value, &v),
                  HILOCK_OK);
    if (!hl_wait_count(&v.calls, 1, hl_widen(5000)))
        fail_msg("the async release never called back");
    assert_status(v.status, HILOCK_ENOTOWNER);
    assert_status(hilock_lock_release(never), HILOCK_ENOTOWNER);
    /* None of that touched the hold or the line. */
    hl_raw_cmd(fx.server, r, sizeof r, "HGET", "reent", field, (char *)NULL);
    assert_string_equal(r, "$1\r\n4\r\n");
    assert_int_equal(hl_raw_exists(fx.server, "reent-never"), 0);
    assert_queue(k.queue, q, 1);
    assert_false(atomic_load(&w.done));

    for (int i = 3; i >= 1; i--) {
        assert_status(hilock_lock_release(l), HILOCK_OK);
        assert_status(hilock_lock_hold_count(l, &count), HILOCK_OK);
        assert_int_equal(count, i);
        /* An inner release frees nothing. */
        assert_int_equal(srv_llen(k.queue), 1);
    }
    assert_false(atomic_load(&w.done));
    assert_status(hilock_lock_release(l), HILOCK_OK);
    assert_status(hilock_lock_is_held_by_me(l, &held), HILOCK_OK);
    assert_false(held);
    fwaiter_join_ok(&w, hl_widen(5000));
    assert_status(hilock_lock_release(l), HILOCK_ENOTOWNER);
    assert_lock_gone("reent");
    hl_free_lock(never);
    hl_free_lock(ol);
    hl_free_lock(l);
    hl_free_client(oc);
    hl_free_client(c);
}

/* ---- fencing tokens ---------------------------------------------------- */

#define FENCE_WAITERS 3

static void test_fencing_tokens_follow_the_line(void **state)
{
    fair_keys k = keys_of("fence");
    hilock_client *hc = hl_new_client(fx.server, NULL), *c[FENCE_WAITERS];
    hilock_lock *hl = hl_new_fair_lock(hc, "fence"), *l[FENCE_WAITERS];
    uint64_t first = 0, again = 0, last;
    fwaiter w[FENCE_WAITERS];
    char r[128];
    atomic_int seq;

    (void)state;
    atomic_init(&seq, 0);
    assert_status(hilock_lock_acquire_fenced(hl, 0, HILOCK_LEASE_WATCHDOG,
                                             &first),
                  HILOCK_OK);
    assert_true(first >= 1);
    /* Joining one's own hold keeps its token. */
    assert_status(hilock_lock_acquire_fenced(hl, 0, HILOCK_LEASE_WATCHDOG,
                                             &again),
                  HILOCK_OK);
    assert_int_equal(again, first);
    assert_status(hilock_lock_release(hl), HILOCK_OK);
    for (int i = 0; i < FENCE_WAITERS; i++) {
        c[i] = hl_new_client(fx.server, NULL);
        l[i] = hl_new_fair_lock(c[i], "fence");
        fwaiter_start_with(&w[i], c[i], l[i], hl_widen(30000), &seq, NULL,
                           true);
        wait_llen(k.queue, i + 1, hl_widen(5000));
    }
    assert_status(hilock_lock_release(hl), HILOCK_OK);
    last = first;
    for (int i = 0; i < FENCE_WAITERS; i++) {
        fwaiter_join_ok(&w[i], hl_widen(5000));
        assert_int_equal(w[i].rank, i);
        if (w[i].token <= last)
            fail_msg("owner %d of the line got token %llu after %llu", i,
                     (unsigned long long)w[i].token,
                     (unsigned long long)last);
        last = w[i].token;
    }
    hl_raw_cmd(fx.server, r, sizeof r, "GET", k.token, (char *)NULL);
    {
        const char *p = r;
        char num[32];

        hl_raw_parse_bulk(&p, num, sizeof num);
        assert_int_equal(strtoull(num, NULL, 10), last);
    }
    assert_lock_gone("fence");
    for (int i = 0; i < FENCE_WAITERS; i++) {
        hl_free_lock(l[i]);
        hl_free_client(c[i]);
    }
    hl_free_lock(hl);
    hl_free_client(hc);
}

/* ---- mutual exclusion under contention --------------------------------- */

#define MX_CLIENTS 2
#define MX_THREADS 4
/* About the year 2096 in us: above the clock that a draw otherwise lifts
 * the counter to, and still exact in a Lua number. */
#define MX_SEED 4000000000000000ULL
#define MX_SEED_TEXT "4000000000000000"

static void test_mutual_exclusion(void **state)
{
    int cycles = hl_scaled(40, 5);
    size_t total = (size_t)MX_CLIENTS * MX_THREADS * (size_t)cycles;
    hl_mutex_checker *mc = hl_mutex_checker_create(total, 20);
    fair_keys k = keys_of("mx");
    hilock_client *c[MX_CLIENTS];
    hilock_lock *l[MX_CLIENTS];
    hl_checked_holder t[MX_CLIENTS * MX_THREADS];
    char why[512], r[128];

    (void)state;
    assert_non_null(mc);
    for (int i = 0; i < MX_CLIENTS; i++) {
        c[i] = hl_new_client(fx.server, NULL);
        l[i] = hl_new_fair_lock(c[i], "mx");
    }
    /* A counter ahead of the server's clock counts one by one, so the
     * draws can be counted. */
    if (hl_raw_cmd(fx.server, r, sizeof r, "SET", k.token, MX_SEED_TEXT,
                   (char *)NULL) != '+')
        fail_msg("SET %s: %s", k.token, r);
    for (int i = 0; i < MX_CLIENTS * MX_THREADS; i++) {
        t[i] = (hl_checked_holder){
            .lock = l[i % MX_CLIENTS],
            .mc = mc,
            .id = (uint32_t)i,
            .holds = cycles,
            .fenced = true,
            .rejoin_every = 5,
        };
        assert_int_equal(pthread_create(&t[i].thread, NULL,
                                        hl_checked_holder_main, &t[i]), 0);
    }
    for (int i = 0; i < MX_CLIENTS * MX_THREADS; i++)
        pthread_join(t[i].thread, NULL);
    if (!hl_mutex_checker_verify(mc, true, why, sizeof why))
        fail_msg("%s", why);
    assert_int_equal(hl_mutex_checker_count(mc), total);
    /* One token per hold, none for the reentrant ones. */
    hl_raw_cmd(fx.server, r, sizeof r, "GET", k.token, (char *)NULL);
    {
        const char *p = r;
        char num[32];

        hl_raw_parse_bulk(&p, num, sizeof num);
        assert_int_equal(strtoull(num, NULL, 10), MX_SEED + total);
    }
    /* Every waiter got the lock, so each one's place went with it. */
    assert_lock_gone("mx");
    assert_int_equal(hl_raw_dbsize_locks(fx.server), 1);
    for (int i = 0; i < MX_CLIENTS; i++) {
        hl_free_lock(l[i]);
        hl_free_client(c[i]);
    }
    hl_mutex_checker_free(mc);
}

/* ---- the watchdog keeps a fair hold ------------------------------------ */

static void test_watchdog_keeps_fair_hold(void **state)
{
    fair_keys k = keys_of("watched");
    hilock_client *c =
        hl_new_client(fx.server, &(hl_client_opts){ .watchdog_ms = 1000 });
    hilock_client *oc = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_fair_lock(c, "watched");
    hilock_lock *ol = hl_new_fair_lock(oc, "watched");
    const int64_t hold_ms = 3500;
    long long ttl, min_ttl = 1000000;
    bool lost = true;
    int64_t t0;
    fwaiter w;

    (void)state;
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    fwaiter_start(&w, oc, ol, hl_widen(30000), NULL);
    wait_llen(k.queue, 1, hl_widen(5000));
    /* Three and a half watchdog timeouts: the lease would have run out
     * three times without renewals, and the waiter would have got in. */
    t0 = hl_now_ms();
    while (hl_now_ms() - t0 < hold_ms) {
        ttl = hl_raw_pttl(fx.server, "watched");
        if (ttl <= 0 || ttl > 1000)
            fail_msg("PTTL %lld after %lld ms of holding", ttl,
                     (long long)(hl_now_ms() - t0));
        if (ttl < min_ttl)
            min_ttl = ttl;
        assert_false(atomic_load(&w.done));
        hl_sleep_ms(50);
    }
    assert_true(min_ttl > 0);
    assert_status(hilock_lock_lease_lost(l, &lost), HILOCK_OK);
    assert_false(lost);
    assert_int_equal(srv_llen(k.queue), 1);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    fwaiter_join_ok(&w, hl_widen(5000));
    assert_lock_gone("watched");
    hl_free_lock(ol);
    hl_free_lock(l);
    hl_free_client(oc);
    hl_free_client(c);
}

/* ---- the waiter timeout option ----------------------------------------- */

static void test_waiter_timeout_option(void **state)
{
    hilock_options *o = NULL;
    hilock_client *c;
    hilock_lock *l = NULL;

    (void)state;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_waiter_timeout_ms(o),
                     HILOCK_DEFAULT_WAITER_TIMEOUT_MS);
    assert_int_equal(HILOCK_DEFAULT_WAITER_TIMEOUT_MS, 5000);
    assert_status(hilock_options_set_waiter_timeout_ms(o, 99),
                  HILOCK_EINVAL);
    assert_status(hilock_options_set_waiter_timeout_ms(o, 0), HILOCK_EINVAL);
    assert_status(hilock_options_set_waiter_timeout_ms(o, -1),
                  HILOCK_EINVAL);
    assert_status(hilock_options_set_waiter_timeout_ms(o, 3600001),
                  HILOCK_EINVAL);
    assert_int_equal(hilock_options_waiter_timeout_ms(o), 5000);
    assert_status(hilock_options_set_waiter_timeout_ms(o, 100), HILOCK_OK);
    assert_int_equal(hilock_options_waiter_timeout_ms(o), 100);
    assert_status(hilock_options_set_waiter_timeout_ms(o, 3600000),
                  HILOCK_OK);
    assert_int_equal(hilock_options_waiter_timeout_ms(o), 3600000);
    assert_status(hilock_options_set_url(
                      o, "redis://127.0.0.1:6379?waiter_timeout=250"),
                  HILOCK_OK);
    assert_int_equal(hilock_options_waiter_timeout_ms(o), 250);
    assert_status(hilock_options_set_url(
                      o, "redis://127.0.0.1:6379?waiter_timeout=99"),
                  HILOCK_EINVAL);
    assert_status(hilock_options_set_url(
                      o, "redis://127.0.0.1:6379?waiter_timeout=x"),
                  HILOCK_EINVAL);
    assert_int_equal(hilock_options_waiter_timeout_ms(o), 250);
    assert_int_equal(hilock_options_waiter_timeout_ms(NULL), -1);
    hilock_options_free(o);

    c = hl_new_client(fx.server, NULL);
    assert_status(hilock_fair_lock_create(&l, c, ""), HILOCK_EINVAL);
    assert_status(hilock_fair_lock_create(NULL, c, "x"), HILOCK_EINVAL);
    assert_status(hilock_fair_lock_create(&l, NULL, "x"), HILOCK_EINVAL);
    assert_status(hilock_fair_lock_create_n(&l, c, NULL, 1), HILOCK_EINVAL);
    hl_free_client(c);
}

/* ---- a reentrant acquire finds the older hold gone ---------------------- */

static void test_reentry_after_loss(void **state)
{
    /* Renewals 10 s apart: only the acquire's own answer can tell. */
    hilock_client *c =
        hl_new_client(fx.server, &(hl_client_opts){ .watchdog_ms = 30000 });
    hilock_client *other = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_fair_lock(c, "reentered");

    (void)state;
    hl_expect_reentry_finds_loss(c, l, other, "reentered",
                                 HILOCK_LEASE_WATCHDOG);
    hl_expect_reentry_finds_loss(c, l, other, "reentered", 30000);
    hl_free_lock(l);
    hl_free_client(other);
    hl_free_client(c);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_fifo_across_processes),
        T(test_dead_head_passed_over),
        T(test_live_waiter_keeps_place),
        T(test_cancel_and_timeout_leave_at_once),
        T(test_no_leftover_keys),
        T(test_wakeup_by_message),
        T(test_reentrancy_and_ownership),
        T(test_fencing_tokens_follow_the_line),
        T(test_mutual_exclusion),
        T(test_watchdog_keeps_fair_hold),
        T(test_waiter_timeout_option),
        T(test_reentry_after_loss),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
