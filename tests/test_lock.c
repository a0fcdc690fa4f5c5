/* The reentrant lock against a real redis-server: hold counts, ownership,
 * mutual exclusion across threads and processes, the watchdog and
 * explicit leases, lost leases, wake-ups by the release message, one
 * subscription per channel, fencing tokens, the async API and its
 * callback contract, bad input, and the Redisson-compatible layout. */
/* ctest-timeout: 180 */
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
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "core/engine/lease.h"
#include "core/engine/engine_internal.h"
#include "core/transport/pubsub.h"
#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/fair.h"
#include "hilock/latch.h"
#include "hilock/lock.h"
#include "hilock/multi.h"
#include "hilock/options.h"
#include "hilock/reply.h"
#include "hilock/rwlock.h"
#include "hilock/segmented.h"
#include "hilock/semaphore.h"
#include "support/children.h"
#include "support/fixture.h"
#include "support/handoff.h"
#include "support/lock_helpers.h"
#include "support/loop_call.h"
#include "support/mutex_checker.h"
#include "support/raw_reads.h"

/* ---- helpers ----------------------------------------------------------- */

/* Each test's server and forked children; see hl_lock_fixture. */
static hl_lock_fixture fx;

/* hl_new_lock for names that are not C strings. */
static hilock_lock *lock_bin(hilock_client *c, const char *name, size_t len)
{
    hilock_lock *l = NULL;
    int rc = hilock_lock_create_n(&l, c, name, len);

    if (rc != HILOCK_OK)
        fail_msg("lock create: %s: %s", hilock_errname(rc),
                 hilock_last_error());
    assert_non_null(l);
    return l;
}

/* A raw command through a client, binary-safe; the reply must come. */
static hilock_reply *command(hilock_client *c, int argc,
                             const char *const *argv, const size_t *lens)
{
    hilock_reply *r = NULL;
    int rc = hilock_client_command(c, argc, argv, lens, &r);

    if (rc != HILOCK_OK)
        fail_msg("%s: %s: %s", argv[0], hilock_errname(rc),
                 hilock_last_error());
    assert_non_null(r);
    return r;
}

static hilock_reply *cmd(hilock_client *c, const char *arg0, ...)
    __attribute__((sentinel));

static hilock_reply *cmd(hilock_client *c, const char *arg0, ...)
{
    const char *argv[8];
    int argc = 0;
    va_list ap;

    va_start(ap, arg0);
    for (const char *a = arg0; a != NULL; a = va_arg(ap, const char *)) {
        assert_true(argc < 8);
        argv[argc++] = a;
    }
    va_end(ap);
    return command(c, argc, argv, NULL);
}

static long long int_of(hilock_reply *r)
{
    long long v;

    if (r->type != HILOCK_REPLY_INTEGER)
        fail_msg("expected an integer reply, got type %d", (int)r->type);
    v = r->integer;
    hilock_reply_free(r);
    return v;
}

static void assert_bulk(hilock_reply *r, const char *text)
{
    if (r->type != HILOCK_REPLY_STRING)
        fail_msg("expected \"%s\", got reply type %d", text, (int)r->type);
    assert_int_equal(r->len, strlen(text));
    assert_memory_equal(r->str, text, r->len);
    hilock_reply_free(r);
}

static long long pttl(hilock_client *c, const char *key)
{
    return int_of(cmd(c, "PTTL", key, (char *)NULL));
}

static long long exists_bin(hilock_client *c, const char *key, size_t len)
{
    const char *argv[] = { "EXISTS", key };
    size_t lens[] = { 6, len };

    return int_of(command(c, 2, argv, lens));
}

/* "<client id>:<owner id>", the hash field of a hold. */
static void owner_field(char *out, size_t cap, hilock_client *c,
                        uint64_t owner)
{
    snprintf(out, cap, "%s:%" PRIu64, hilock_client_id(c), owner);
}

static void read_stats(hilock_client *c, void *arg)
{
    hl_lease_stats *s = arg;

    if (c->leases != NULL)
        *s = hl_lease_engine_stats(c->leases);
    else
        memset(s, 0, sizeof *s);
}

/* The engine's counters change on the loop thread; read them there. */
static hl_lease_stats lease_stats(hilock_client *c)
{
    hl_lease_stats s;

    hl_run_on_loop(c, read_stats, &s);
    return s;
}

/* ---- hold counts ------------------------------------------------------- */

static void assert_hold_count(hilock_lock *l, int64_t want)
{
    int64_t count = -1;
    bool held = want == 0;

    assert_status(hilock_lock_hold_count(l, &count), HILOCK_OK);
    assert_int_equal(count, want);
    assert_status(hilock_lock_is_held_by_me(l, &held), HILOCK_OK);
    assert_int_equal(held, want > 0);
}

static void test_nested_hold_counts(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *obs = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "nested");
    char field[80], count[8];
    bool locked = false;
    int64_t ttl = 0;

    (void)state;
    owner_field(field, sizeof field, c, hilock_thread_owner());
    assert_hold_count(l, 0);
    for (int i = 1; i <= 3; i++) {
        assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                      HILOCK_OK);
        assert_hold_count(l, i);
        snprintf(count, sizeof count, "%d", i);
        assert_bulk(cmd(obs, "HGET", "nested", field, (char *)NULL), count);
        assert_int_equal(int_of(cmd(obs, "HLEN", "nested", (char *)NULL)),
                         1);
    }
    for (int i = 2; i >= 0; i--) {
        assert_status(hilock_lock_release(l), HILOCK_OK);
        assert_hold_count(l, i);
        if (i > 0) {
            snprintf(count, sizeof count, "%d", i);
            assert_bulk(cmd(obs, "HGET", "nested", field, (char *)NULL),
                        count);
            /* An inner release leaves the lease in place. */
            assert_true(pttl(obs, "nested") > 0);
        }
    }
    assert_int_equal(exists_bin(obs, "nested", 6), 0);
    assert_status(hilock_lock_is_locked(l, &locked), HILOCK_OK);
    assert_false(locked);
    assert_status(hilock_lock_remaining_ttl(l, &ttl), HILOCK_OK);
    assert_int_equal(ttl, -1);
    /* One release too many is refused, not absorbed. */
    assert_status(hilock_lock_release(l), HILOCK_ENOTOWNER);
    hl_free_lock(l);
    hl_free_client(obs);
    hl_free_client(c);
}

/* ---- release by a non-owner -------------------------------------------- */

static void test_release_by_non_owner(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *c2 = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "owned"), *l2 = hl_new_lock(c2, "owned");
    hilock_lock *never = hl_new_lock(c, "never-taken");
    uint64_t other_owner = 0;
    char field[80];
    hl_value_rec vr;

    (void)state;
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    /* Another thread of the same process, on the same handle. */
    assert_status(hl_release_from_other_thread(l, &other_owner),
                  HILOCK_ENOTOWNER);
    assert_true(other_owner != hilock_thread_owner());
    /* Another client, whose owner ids carry another client id. */
    assert_status(hilock_lock_release(l2), HILOCK_ENOTOWNER);
    /* An explicit owner id that never took it. */
    hl_value_rec_init(&vr);
    assert_status(hilock_lock_release_async(l, hilock_thread_owner() + 1000,
                                            hl_record_value, &vr),
                  HILOCK_OK);
    hl_expect_value(&vr, HILOCK_ENOTOWNER);
    /* None of that touched the hold. */
    owner_field(field, sizeof field, c, hilock_thread_owner());
    assert_bulk(cmd(c2, "HGET", "owned", field, (char *)NULL), "1");
    assert_hold_count(l, 1);
    assert_status(hilock_lock_release(never), HILOCK_ENOTOWNER);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    assert_int_equal(exists_bin(c2, "owned", 5), 0);
    hl_free_lock(never);
    hl_free_lock(l2);
    hl_free_lock(l);
    hl_free_client(c2);
    hl_free_client(c);
}

/* ---- mutual exclusion across threads and processes --------------------- */

#define MX_PROCS 3
#define MX_THREADS 8

#define MX_CHILDREN (MX_PROCS - 1)

/* One process's share: its own client, one handle shared by its threads.
 * Runs in forked children, so failures go to the checker. */
static void mx_run_process(hilock_client *c, hl_mutex_checker *mc, int proc,
                           int cycles)
{
    hl_checked_holder threads[MX_THREADS];
    hilock_lock *lock = NULL;
    int rc = hilock_lock_create(&lock, c, "mutex");

    if (rc != HILOCK_OK) {
        hl_mutex_checker_fail(mc, "process %d: lock create: %s", proc,
                              hilock_errname(rc));
        return;
    }
    for (int i = 0; i < MX_THREADS; i++) {
        threads[i] = (hl_checked_holder){
            .lock = lock,
            .mc = mc,
            .id = (uint32_t)(proc * 100 + i),
            .holds = cycles,
        };
        if (pthread_create(&threads[i].thread, NULL, hl_checked_holder_main,
                           &threads[i]) != 0) {
            hl_mutex_checker_fail(mc, "process %d: pthread_create", proc);
            threads[i].holds = -1;
        }
    }
    for (int i = 0; i < MX_THREADS; i++)
        if (threads[i].holds >= 0)
            pthread_join(threads[i].thread, NULL);
    rc = hilock_lock_destroy(lock);
    if (rc != HILOCK_OK)
        hl_mutex_checker_fail(mc, "process %d: lock destroy: %s", proc,
                              hilock_errname(rc));
}

static void mx_child(hl_mutex_checker *mc, int proc, int cycles,
                     int ready_fd, int go_fd)
{
    char why[300], byte = 'r';
    hilock_client *c = hl_open_client(fx.server, NULL, why, sizeof why);

    if (c == NULL) {
        hl_mutex_checker_fail(mc, "process %d: client: %s", proc, why);
        _exit(1);
    }
    if (write(ready_fd, &byte, 1) != 1)
        _exit(1);
    /* The parent closes its end to start everyone at once. */
    while (read(go_fd, &byte, 1) < 0 && errno == EINTR)
        ;
    mx_run_process(c, mc, proc, cycles);
    hilock_client_destroy(c);
    _exit(0);
}

static void test_mutual_exclusion(void **state)
{
    int cycles = hl_scaled(20, 3);
    size_t total = (size_t)MX_PROCS * MX_THREADS * (size_t)cycles;
    hl_mutex_checker *mc = hl_mutex_checker_create(total, 20);
    int ready[2], go[2];
    hilock_client *c, *obs;
    char why[512], bytes[MX_CHILDREN];

    (void)state;
    assert_non_null(mc);
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(go), 0);
    /* Fork before this process has a client: a child inherits only the
     * forking thread, and a lock some other thread held at that moment
     * would stay locked in the child for ever. */
    for (int i = 0; i < MX_CHILDREN; i++) {
        if (hl_children_fork(&fx.kids, i) == 0) {
            close(ready[0]);
            close(go[1]);
            mx_child(mc, i + 1, cycles, ready[1], go[0]);
        }
    }
    close(ready[1]);
    close(go[0]);
    c = hl_new_client(fx.server, NULL);
    obs = hl_new_client(fx.server, NULL);
    if (!hl_read_exact(ready[0], bytes, MX_CHILDREN, hl_widen(10000))) {
        close(go[1]);
        fail_msg("the child processes did not connect: %s",
                 hl_mutex_checker_verify(mc, false, why, sizeof why)
                     ? "no reason given" : why);
    }
    close(go[1]);
    mx_run_process(c, mc, 0, cycles);
    /* A child still running then is killed by the fixture's teardown. */
    if (!hl_children_wait(&fx.kids, hl_widen(60000)))
        fail_msg("the child processes did not finish");
    close(ready[0]);
    for (int i = 0; i < MX_CHILDREN; i++)
        if (!WIFEXITED(fx.kids.status[i]) ||
            WEXITSTATUS(fx.kids.status[i]) != 0)
            fail_msg("child %d ended with status 0x%x", i + 1,
                     fx.kids.status[i]);
    if (!hl_mutex_checker_verify(mc, false, why, sizeof why))
        fail_msg("%s", why);
    assert_int_equal(hl_mutex_checker_count(mc), total);
    assert_int_equal(exists_bin(obs, "mutex", 5), 0);
    hl_mutex_checker_free(mc);
    hl_free_client(obs);
    hl_free_client(c);
}

/* ---- the watchdog keeps a lease past its timeout ----------------------- */

static void test_watchdog_keeps_lease(void **state)
{
    hilock_client *c =
        hl_new_client(fx.server, &(hl_client_opts){ .watchdog_ms = 1000 });
    hilock_client *other = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "watched");
    hilock_lock *l2 = hl_new_lock(other, "watched");
    int64_t start, hold_ms = 3500;
    long long ttl, min_ttl = 1000000;
    hl_lease_stats st;
    bool lost = true;
    hl_lost_rec lr;

    (void)state;
    hl_lost_rec_init(&lr, c);
    assert_status(hilock_lock_set_lost_callback(l, hl_record_lost, &lr),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    /* Holding for three and a half watchdog timeouts is the point: the
     * lease would have run out three times without renewals. */
    start = hl_now_ms();
    while (hl_now_ms() - start < hold_ms) {
        ttl = pttl(other, "watched");
        if (ttl <= 0)
            fail_msg("PTTL %lld after %lld ms of holding", ttl,
                     (long long)(hl_now_ms() - start));
        if (ttl < min_ttl)
            min_ttl = ttl;
        assert_int_equal(atomic_load(&lr.calls), 0);
        hl_sleep_ms(50);
    }
    assert_true(min_ttl > 0 && min_ttl <= 1000);
    assert_status(hilock_lock_lease_lost(l, &lost), HILOCK_OK);
    assert_false(lost);
    st = lease_stats(c);
    if (st.renewed < 3)
        fail_msg("%llu renewals in %lld ms with a 1000 ms watchdog",
                 (unsigned long long)st.renewed, (long long)hold_ms);
    assert_int_equal(st.lost, 0);
    assert_int_equal(st.active, 1);
    assert_status(hilock_lock_try_acquire(l2, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_EBUSY);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l2, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_release(l2), HILOCK_OK);
    assert_int_equal(lease_stats(c).active, 0);
    assert_int_equal(atomic_load(&lr.calls), 0);
    hl_free_lock(l2);
    hl_free_lock(l);
    hl_free_client(other);
    hl_free_client(c);
}

/* ---- an explicit lease runs out ---------------------------------------- */

typedef struct key_gone {
    hilock_client *client;
    const char *key;
} key_gone;

static bool key_is_gone(void *arg)
{
    key_gone *k = arg;

    return exists_bin(k->client, k->key, strlen(k->key)) == 0;
}

static void test_explicit_lease_expires(void **state)
{
    /* A short watchdog would renew this lease several times over if the
     * engine mistook it for a watchdog lease. */
    hilock_client *c =
        hl_new_client(fx.server, &(hl_client_opts){ .watchdog_ms = 300 });
    hilock_client *obs = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "leased");
    key_gone gone = { obs, "leased" };
    int64_t t0, after;
    long long ttl;
    bool lost = false;
    hl_lost_rec lr;

    (void)state;
    hl_lost_rec_init(&lr, c);
    assert_status(hilock_lock_set_lost_callback(l, hl_record_lost, &lr),
                  HILOCK_OK);
    t0 = hl_now_ms();
    assert_status(hilock_lock_try_acquire(l, 0, 500), HILOCK_OK);
    ttl = pttl(obs, "leased");
    assert_true(ttl > 0 && ttl <= 500);
    if (!hl_wait_count(&lr.calls, 1, hl_widen(3000)))
        fail_msg("no lost callback within 3 s of a 500 ms lease");
    after = atomic_load(&lr.at_ms) - t0;
    /* Reported when the lease ran out, not before: the local deadline
     * only takes off the drift margin. */
    if (after < 450)
        fail_msg("lease reported lost after %lld ms of 500",
                 (long long)after);
    assert_int_equal(atomic_load(&lr.owner), hilock_thread_owner());
    assert_int_equal(atomic_load(&lr.off_loop), 0);
    assert_true(hl_wait_until(key_is_gone, &gone, hl_widen(2000)));
    assert_int_equal(lease_stats(c).renew_calls, 0);
    assert_int_equal(lease_stats(c).lost, 1);
    assert_status(hilock_lock_lease_lost(l, &lost), HILOCK_OK);
    assert_true(lost);
    assert_status(hilock_lock_release(l), HILOCK_ELEASELOST);
    /* The loss is reported once; after that the owner holds nothing. */
    assert_status(hilock_lock_lease_lost(l, &lost), HILOCK_OK);
    assert_false(lost);
    assert_status(hilock_lock_release(l), HILOCK_ENOTOWNER);
    assert_int_equal(atomic_load(&lr.calls), 1);
    hl_free_lock(l);
    hl_free_client(obs);
    hl_free_client(c);
}

#define OWNER_A UINT64_C(0xC0FFEE)
#define OWNER_B UINT64_C(0xBEEF)

/* ---- the local queue keeps moving -------------------------------------- */

static void test_queue_moves_when_a_waiter_leaves(void **state)
{
    /* B holds with a lease that runs out (no release message will come).
     * A's first acquire waits on B's ttl; A's second, for another owner,
     * joins the queue behind it without trying.  Cancelling the first
     * must hand its turn on, or the second would wait forever for a
     * message that never comes. */
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *la = hl_new_lock(a, "queue"), *lb = hl_new_lock(b, "queue");
    hl_acquire_rec first, second;
    uint64_t first_id = 0;
    int64_t t0;

    (void)state;
    hl_acquire_rec_init(&first, a);
    hl_acquire_rec_init(&second, a);
    assert_status(hilock_lock_try_acquire(lb, 0, 1500), HILOCK_OK);
    assert_status(hilock_lock_acquire_async(la, OWNER_A, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &first,
                                            &first_id),
                  HILOCK_OK);
    /* The first is subscribed and waiting when the channel counts it. */
    char channel[128];
    hl_wake_channel(a, "{queue}", channel, sizeof channel);
    hl_expect_numsub(fx.server, channel, 1, 1);
    assert_status(hilock_lock_acquire_async(la, OWNER_B, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &second, NULL),
                  HILOCK_OK);
    t0 = hl_now_ms();
    assert_status(hilock_lock_cancel(la, first_id), HILOCK_OK);
    hl_expect_acquire(&first);
    assert_status(first.status, HILOCK_ECANCELED);
    /* B's lease runs out without a release message; the second acquires
     * on its own ttl timer, which it only has because it was woken to
     * try when the first left. */
    hl_expect_acquire(&second);
    assert_status(second.status, HILOCK_OK);
    assert_true(hl_now_ms() - t0 < hl_widen(5000));
    assert_int_equal(atomic_load(&first.calls), 1);
    assert_int_equal(second.got.hold_count, 1);
    hl_free_lock(lb);
    hl_free_lock(la);
    hl_free_client(b);
    hl_free_client(a);
}

/* ---- a hand-on whose release did not free the lock ---------------------- */

static void test_hand_on_taken_back(void **state)
{
    /* A release that should free the lock wakes the next local waiter at
     * once and expects its own "0" message to be owed to that waiter.  If
     * the release does not free the lock after all (here: someone raised
     * the count on the server behind the client's back), the hand-on must
     * be taken back, or the real release's message would be swallowed
     * and the waiter would sit out the whole 30 s lease of the holder it
     * last saw. */
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "handon");
    hl_acquire_rec holder;
    char field[HILOCK_CLIENT_ID_LEN + 24];
    int64_t t0;

    (void)state;
    hl_acquire_rec_init(&holder, c);
    assert_status(hilock_lock_acquire_async(l, OWNER_A, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &holder, NULL),
                  HILOCK_OK);
    hl_expect_acquire(&holder);
    assert_status(holder.status, HILOCK_OK);

    hl_acquire_rec second;
    hl_acquire_rec_init(&second, c);
    assert_status(hilock_lock_acquire_async(l, OWNER_B, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &second, NULL),
                  HILOCK_OK);
    char channel[128];
    hl_wake_channel(c, "{handon}", channel, sizeof channel);
    hl_expect_numsub(fx.server, channel, 1, 1);
    /* Two holds on the server, one known to the client. */
    snprintf(field, sizeof field, "%s:%llu", hilock_client_id(c),
             (unsigned long long)OWNER_A);
    {
        const char *argv[] = {"HINCRBY", "handon", field, "1"};
        assert_status(hilock_client_command(c, 4, argv, NULL, NULL),
                      HILOCK_OK);
    }
    hl_value_rec rel;
    hl_value_rec_init(&rel);
    assert_status(hilock_lock_release_async(l, OWNER_A, hl_record_value, &rel),
                  HILOCK_OK);
    assert_true(hl_wait_count(&rel.calls, 1, hl_widen(3000)));
    assert_status(rel.status, HILOCK_OK);
    /* The caller had one hold and released it: the count it is told is
     * its own, not the server's, which a hold the client never granted
     * keeps up (adopting that one would have the watchdog renew a hold
     * nobody will release). */
    assert_int_equal(rel.value, 0);
    assert_int_equal(atomic_load(&second.calls), 0);
    /* Another client frees it, as a Redisson release would: delete and
     * publish "0".  That message must wake the waiter; a hand-on still
     * counted as owed would swallow it. */
    t0 = hl_now_ms();
    {
        const char *del[] = {"DEL", "handon"};
        const char *pub[] = {"PUBLISH", "redisson_lock__channel:{handon}",
                             "0"};
        hilock_client *other = hl_new_client(fx.server, NULL);
        assert_status(hilock_client_command(other, 2, del, NULL, NULL),
                      HILOCK_OK);
        assert_status(hilock_client_command(other, 3, pub, NULL, NULL),
                      HILOCK_OK);
        hl_free_client(other);
    }
    hl_expect_acquire(&second);
    assert_status(second.status, HILOCK_OK);
    assert_true(hl_now_ms() - t0 < hl_widen(5000));
    hl_value_rec done;
    hl_value_rec_init(&done);
    assert_status(hilock_lock_release_async(l, OWNER_B, hl_record_value,
                                            &done),
                  HILOCK_OK);
    assert_true(hl_wait_count(&done.calls, 1, hl_widen(3000)));
    assert_status(done.status, HILOCK_OK);
    hl_free_lock(l);
    hl_free_client(c);
}

/* ---- leases of different lengths --------------------------------------- */

static void test_mixed_leases_lost_in_order(void **state)
{
    /* The engine keeps one timer over its leases in deadline order; leases
     * granted in an order other than their deadlines' must each still be
     * reported lost at their own deadline, not sooner and not later. */
    static const int64_t lease_ms[] = {900, 300, 600, 1200, 450};
    enum { N = sizeof lease_ms / sizeof lease_ms[0] };
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *l[N];
    hl_lost_rec lr[N];
    int64_t t0 = hl_now_ms();

    (void)state;
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "mixed:%d", i);
        l[i] = hl_new_lock(c, name);
        hl_lost_rec_init(&lr[i], c);
        assert_status(hilock_lock_set_lost_callback(l[i], hl_record_lost,
                                                    &lr[i]),
                      HILOCK_OK);
        assert_status(hilock_lock_try_acquire(l[i], 0, lease_ms[i]),
                      HILOCK_OK);
    }
    for (int i = 0; i < N; i++) {
        if (!hl_wait_count(&lr[i].calls, 1, hl_widen(5000)))
            fail_msg("lease %d (%lld ms) never reported lost", i,
                     (long long)lease_ms[i]);
    }
    for (int i = 0; i < N; i++) {
        int64_t after = atomic_load(&lr[i].at_ms) - t0;
        /* Not before the lease less its drift margin (1 % + 2 ms), and
         * not long after it. */
        if (after < lease_ms[i] - lease_ms[i] / 100 - 2)
            fail_msg("lease %d of %lld ms reported lost after %lld ms", i,
                     (long long)lease_ms[i], (long long)after);
        if (after > lease_ms[i] + hl_widen(700))
            fail_msg("lease %d of %lld ms reported lost only after %lld ms",
                     i, (long long)lease_ms[i], (long long)after);
        assert_int_equal(atomic_load(&lr[i].calls), 1);
    }
    for (int i = 0; i < N; i++) {
        assert_status(hilock_lock_release(l[i]), HILOCK_ELEASELOST);
        hl_free_lock(l[i]);
    }
    hl_free_client(c);
}

/* ---- one and many command connections ---------------------------------- */

static void lock_cycle_on(int connections)
{
    hilock_options *o = NULL;
    hilock_client *c = NULL;
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?connections=%d",
             hl_redis_server_port(fx.server), connections);
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, url), HILOCK_OK);
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    /* Names spread over the connections; each keeps its own order. */
    for (int i = 0; i < 20; i++) {
        char name[32];
        snprintf(name, sizeof name, "conns:%d:%d", connections, i);
        hilock_lock *l = hl_new_lock(c, name);
        int64_t count = 0;
        assert_status(hilock_lock_acquire(l), HILOCK_OK);
        assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                      HILOCK_OK);
        assert_status(hilock_lock_hold_count(l, &count), HILOCK_OK);
        assert_int_equal(count, 2);
        assert_status(hilock_lock_release(l), HILOCK_OK);
        assert_status(hilock_lock_release(l), HILOCK_OK);
        assert_status(hilock_lock_release(l), HILOCK_ENOTOWNER);
        hl_free_lock(l);
    }
    hilock_client_stats st;
    assert_status(hl_client_counters(c, &st), HILOCK_OK);
    assert_int_equal(st.connects, (uint64_t)connections);
    hl_free_client(c);
}

static void test_connections_one_and_many(void **state)
{
    (void)state;
    lock_cycle_on(1);
    lock_cycle_on(3);
}

/* ---- releases crossing renewals ---------------------------------------- */

static void test_release_crosses_renewals(void **state)
{
    /* A watchdog of 100 ms renews every 33 ms, so hundreds of quick
     * holds release while renewals are in flight.  None may be reported
     * lost, none may be renewed after its release, and once all are
     * released the watchdog must go quiet: a lock renewed forever after
     * its release is the failure this guards against. */
    hilock_client *c =
        hl_new_client(fx.server, &(hl_client_opts){ .watchdog_ms = 100 });
    hilock_client *obs = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "crossing");
    key_gone gone = { obs, "crossing" };
    int cycles = hl_under_valgrind() ? 50 : 400;
    hl_lost_rec lr;

    (void)state;
    hl_lost_rec_init(&lr, c);
    assert_status(hilock_lock_set_lost_callback(l, hl_record_lost, &lr),
                  HILOCK_OK);
    for (int i = 0; i < cycles; i++) {
        assert_status(hilock_lock_acquire(l), HILOCK_OK);
        /* Every few holds, stay long enough for a renewal round. */
        if (i % 20 == 0)
            hl_sleep_ms(40);
        assert_status(hilock_lock_release(l), HILOCK_OK);
    }
    assert_true(hl_wait_until(key_is_gone, &gone, hl_widen(1000)));
    hl_lease_stats before = lease_stats(c);
    assert_int_equal(before.active, 0);
    assert_int_equal(before.lost, 0);
    assert_true(before.renewed > 0);
    /* Three watchdog periods later nothing has been renewed since. */
    hl_sleep_ms(300);
    hl_lease_stats after = lease_stats(c);
    assert_int_equal(after.renew_calls, before.renew_calls);
    assert_int_equal(after.renewed, before.renewed);
    assert_int_equal(atomic_load(&lr.calls), 0);
    assert_true(key_is_gone(&gone));
    hl_free_lock(l);
    hl_free_client(obs);
    hl_free_client(c);
}

/* ---- a cap on total hold time ----------------------------------------- */

static void test_max_hold_caps_the_watchdog(void **state)
{
    /* Watchdog 300 ms, cap 1000 ms: renewed about three times, then left
     * to run out and reported lost, well before it could be renewed
     * forever. */
    hilock_options *o = NULL;
    hilock_client *c = NULL, *obs = hl_new_client(fx.server, NULL);
    char url[128];
    int64_t t0, after;
    bool lost = false;
    hl_lost_rec lr;

    (void)state;
    snprintf(url, sizeof url,
             "redis://127.0.0.1:%d?watchdog_timeout=300&max_hold=1000",
             hl_redis_server_port(fx.server));
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, url), HILOCK_OK);
    if (hl_under_valgrind())
        assert_status(hilock_options_set_command_timeout_ms(o, 20000),
                      HILOCK_OK);
    assert_int_equal(hilock_options_max_hold_ms(o), 1000);
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    hilock_lock *l = hl_new_lock(c, "capped");
    key_gone gone = { obs, "capped" };
    hl_lost_rec_init(&lr, c);
    assert_status(hilock_lock_set_lost_callback(l, hl_record_lost, &lr),
                  HILOCK_OK);
    t0 = hl_now_ms();
    assert_status(hilock_lock_acquire(l), HILOCK_OK);
    if (!hl_wait_count(&lr.calls, 1, hl_widen(4000)))
        fail_msg("no lost callback within 4 s of a 1000 ms cap");
    after = atomic_load(&lr.at_ms) - t0;
    /* Held past the 300 ms lease by the watchdog, up to the cap, and lost
     * within one lease after it. */
    if (after < 1000)
        fail_msg("lost after %lld ms, before the 1000 ms cap",
                 (long long)after);
    assert_true(lease_stats(c).renewed >= 2);
    assert_true(hl_wait_until(key_is_gone, &gone, hl_widen(2000)));
    assert_status(hilock_lock_lease_lost(l, &lost), HILOCK_OK);
    assert_true(lost);
    assert_status(hilock_lock_release(l), HILOCK_ELEASELOST);
    hl_free_lock(l);
    hl_free_client(obs);
    hl_free_client(c);
}

/* ---- the key deleted behind the holder's back -------------------------- */

static void test_lost_when_key_deleted(void **state)
{
    hilock_client *c =
        hl_new_client(fx.server, &(hl_client_opts){ .watchdog_ms = 1000 });
    hilock_client *other = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "deleted");
    bool lost = false;
    int64_t t_del;
    hl_lost_rec lr;

    (void)state;
    hl_lost_rec_init(&lr, c);
    assert_status(hilock_lock_set_lost_callback(l, hl_record_lost, &lr),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_int_equal(int_of(cmd(other, "DEL", "deleted", (char *)NULL)), 1);
    t_del = hl_now_ms();
    /* The next renewal, a third of the watchdog timeout away, finds the
     * field gone. */
    if (!hl_wait_count(&lr.calls, 1, hl_widen(3000)))
        fail_msg("no lost callback within 3 s of deleting the key");
    assert_true(atomic_load(&lr.at_ms) >= t_del);
    assert_int_equal(atomic_load(&lr.owner), hilock_thread_owner());
    assert_int_equal(atomic_load(&lr.off_loop), 0);
    /* The callback was told why. */
    if (strstr(lr.why, "a renewal found the lock no longer held") == NULL)
        fail_msg("the lost callback read \"%s\"", lr.why);
    assert_status(hilock_lock_lease_lost(l, &lost), HILOCK_OK);
    assert_true(lost);
    assert_int_equal(lease_stats(c).lost, 1);
    assert_status(hilock_lock_release(l), HILOCK_ELEASELOST);
    assert_status(hilock_lock_release(l), HILOCK_ENOTOWNER);
    assert_int_equal(atomic_load(&lr.calls), 1);
    hl_free_lock(l);
    hl_free_client(other);
    hl_free_client(c);
}

/* ---- a reentrant acquire finds the older hold gone ---------------------- */

static void test_reentry_after_loss(void **state)
{
    /* Renewals 10 s apart: only the acquire's own answer can tell. */
    hilock_client *c =
        hl_new_client(fx.server, &(hl_client_opts){ .watchdog_ms = 30000 });
    hilock_client *other = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "reentered");

    (void)state;
    hl_expect_reentry_finds_loss(c, l, other, "reentered",
                                 HILOCK_LEASE_WATCHDOG);
    hl_expect_reentry_finds_loss(c, l, other, "reentered", 30000);
    assert_int_equal(lease_stats(c).lost, 2);
    assert_int_equal(lease_stats(c).active, 0);
    hl_free_lock(l);
    hl_free_client(other);
    hl_free_client(c);
}

/* The lost callback releases the lost hold at once, while the acquire
 * that found the loss is still being answered. */
typedef struct release_on_loss {
    hl_value_rec rel;
    atomic_int calls;
} release_on_loss;

static void release_on_lost(hilock_lock *lock, uint64_t owner, void *data)
{
    release_on_loss *r = data;

    atomic_fetch_add(&r->calls, 1);
    if (hilock_lock_release_async(lock, owner, hl_record_value, &r->rel) !=
        HILOCK_OK)
        atomic_fetch_add(&r->calls, 100);
}

static void test_reentry_after_loss_released_in_callback(void **state)
{
    hilock_client *c =
        hl_new_client(fx.server, &(hl_client_opts){ .watchdog_ms = 30000 });
    hilock_client *other = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "reentered");
    static release_on_loss rl;
    static hl_acquire_rec first, second;
    static hl_value_rec inner, outer;

    (void)state;
    hl_value_rec_init(&rl.rel);
    atomic_init(&rl.calls, 0);
    hl_acquire_rec_init(&first, c);
    hl_acquire_rec_init(&second, c);
    hl_value_rec_init(&inner);
    hl_value_rec_init(&outer);
    assert_status(hilock_lock_set_lost_callback(l, release_on_lost, &rl),
                  HILOCK_OK);
    assert_status(hilock_lock_acquire_async(l, OWNER_A, 0,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &first, NULL),
                  HILOCK_OK);
    assert_status(hl_expect_acquire(&first), HILOCK_OK);
    assert_int_equal(int_of(cmd(other, "DEL", "reentered", (char *)NULL)),
                     1);
    assert_status(hilock_lock_acquire_async(l, OWNER_A, 0,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &second, NULL),
                  HILOCK_OK);
    assert_status(hl_expect_acquire(&second), HILOCK_OK);
    assert_int_equal(second.got.hold_count, 1);
    assert_int_equal(atomic_load(&rl.calls), 1);
    /* The lost hold's release, made in the callback, was the one owed. */
    hl_expect_value(&rl.rel, HILOCK_ELEASELOST);
    assert_status(hilock_lock_release_async(l, OWNER_A, hl_record_value,
                                            &inner),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&inner, HILOCK_OK), 0);
    assert_status(hilock_lock_release_async(l, OWNER_A, hl_record_value,
                                            &outer),
                  HILOCK_OK);
    hl_expect_value(&outer, HILOCK_ENOTOWNER);
    assert_int_equal(exists_bin(other, "reentered", 9), 0);
    assert_status(hilock_lock_set_lost_callback(l, NULL, NULL), HILOCK_OK);
    hl_free_lock(l);
    hl_free_client(other);
    hl_free_client(c);
}

/* ---- the release message wakes a waiter -------------------------------- */

static void test_release_wakes_waiter(void **state)
{
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *la = hl_new_lock(a, "wake"), *lb = hl_new_lock(b, "wake");
    int64_t t_rel, took;
    hl_acquirer w;

    (void)state;
    assert_status(hilock_lock_try_acquire(la, 0, 30000), HILOCK_OK);
    hl_acquirer_start(&w, lb, HILOCK_WAIT_FOREVER, HILOCK_LEASE_WATCHDOG,
                      true);
    hl_expect_pending(b, lb, 1);
    char channel[128];
    hl_wake_channel(b, "{wake}", channel, sizeof channel);
    hl_expect_numsub(fx.server, channel, 1, 1);
    t_rel = hl_now_ms();
    assert_status(hilock_lock_release(la), HILOCK_OK);
    hl_acquirer_join(&w, hl_widen(10000));
    assert_status(w.rc, HILOCK_OK);
    assert_status(w.release_rc, HILOCK_OK);
    took = w.acquired_at - t_rel;
    /* The holder's lease had 30 s left: only the message explains a
     * waiter that got the lock within seconds. */
    if (took >= 5000)
        fail_msg("the waiter acquired %lld ms after the release",
                 (long long)took);
    hl_free_lock(lb);
    hl_free_lock(la);
    hl_free_client(b);
    hl_free_client(a);
}

/* ---- a release wakes one waiting client --------------------------------- */

#define HERD 8

/* HERD clients (processes, as far as the server can tell) wait for one
 * lock, each with a waiter that releases at once.  Each release gives the
 * lock to the first of them outright (a direct hand-off) and wakes that
 * one alone: the line drains in one release per client, with no acquire
 * of the woken.  Were every waiting client woken by every release, each
 * would try and be refused, some HERD^2/2 scripts in all; were each woken
 * to take a lock only promised to it, one acquire and one release per
 * client. */
static void test_release_wakes_one_client(void **state)
{
    /* Places renewed every 200 s: no renewal runs during the test, which
     * counts scripts exactly.  With a minute's waiter timeout (renewals
     * every 20 s) a run under valgrind on a busy machine counted one. */
    const hl_client_opts opts = {.waiter_ms = 600000};
    hilock_client *holder = hl_new_client(fx.server, &opts);
    hilock_lock *lh = hl_new_lock(holder, "herd");
    hl_mutex_checker *mc = hl_mutex_checker_create(HERD, 0);
    hilock_client *c[HERD];
    hilock_lock *l[HERD];
    hl_acquirer w[HERD];
    char why[256];

    (void)state;
    assert_non_null(mc);
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    for (int i = 0; i < HERD; i++) {
        c[i] = hl_new_client(fx.server, &opts);
        l[i] = hl_new_lock(c[i], "herd");
        hl_acquirer_start_checked(&w[i], l[i], HILOCK_WAIT_FOREVER,
                                  HILOCK_LEASE_WATCHDOG, true, mc,
                                  (uint32_t)i);
        /* Refused and listening: only a release moves it now. */
        hl_expect_pending(c[i], l[i], 1);
    }
    long long before = hl_scripts_run(fx.server);
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    for (int i = 0; i < HERD; i++) {
        hl_acquirer_join(&w[i], hl_widen(20000));
        assert_status(w[i].rc, HILOCK_OK);
        assert_status(w[i].release_rc, HILOCK_OK);
    }
    long long scripts = hl_scripts_run(fx.server) - before;
    print_message("    herd: %d waiting clients drained with %lld scripts\n",
                  HERD, scripts);
    if (!hl_mutex_checker_verify(mc, false, why, sizeof why))
        fail_msg("%s", why);
    assert_int_equal(hl_mutex_checker_count(mc), HERD);
    /* The holder's release, in the lean form its client sends first as
     * it knows of no contention and then in full, then each client's
     * release, and the attempt of each client promised the lock rather
     * than handed it: one whose head's unsubscribe from Redisson's
     * channel was still on its way when the release looked there. */
    long long handed = 0;
    for (int i = 0; i < HERD; i++)
        handed += (long long)hl_handed_to(c[i]);
    print_message("    %lld of them handed straight to the client\n", handed);
    assert_true(handed > 0);
    assert_int_equal(scripts, 2 + HERD + (HERD - handed));
    for (int i = 0; i < HERD; i++) {
        hl_free_lock(l[i]);
        hl_free_client(c[i]);
    }
    hl_mutex_checker_free(mc);
    hl_free_lock(lh);
    hl_free_client(holder);
}

/* ---- waiters refused by their own client's hold --------------------------- */

/* A waiter refused by a hold of its own client takes no place in line:
 * that hold's release wakes it without the server.  When that release
 * promises the lock to another client, the woken waiter's attempt finds
 * the promise and takes a place behind, so that the other client's
 * release wakes it in turn, long before its own attempt would (20 s
 * here).  (A waiter not yet listening when the release went out is
 * lined up by the release itself.) */
static void test_own_waiters_line_up_behind_a_promise(void **state)
{
    const hl_client_opts opts = {.waiter_ms = 60000};
    hilock_client *p = hl_new_client(fx.server, &opts);
    hilock_client *b = hl_new_client(fx.server, &opts);
    hilock_lock *holder = hl_new_lock(p, "ownline");
    hilock_lock *mine = hl_new_lock(p, "ownline");
    hilock_lock *theirs = hl_new_lock(b, "ownline");
    hilock_client *obs = hl_new_client(fx.server, NULL);
    hl_acquirer wm, wt;

    (void)state;
    assert_status(hilock_lock_try_acquire(holder, 0, 30000), HILOCK_OK);
    hl_acquirer_start(&wm, mine, HILOCK_WAIT_FOREVER, HILOCK_LEASE_WATCHDOG,
                      true);
    hl_expect_pending(p, mine, 1);
    /* Refused by its own client's hold: not in line. */
    assert_int_equal(int_of(cmd(obs, "EXISTS", "hilock_lock_line:{ownline}",
                                (char *)NULL)),
                     0);
    hl_acquirer_start(&wt, theirs, HILOCK_WAIT_FOREVER, HILOCK_LEASE_WATCHDOG,
                      true);
    hl_expect_pending(b, theirs, 1);
    assert_status(hilock_lock_release(holder), HILOCK_OK);
    hl_acquirer_join(&wt, hl_widen(10000));
    assert_status(wt.rc, HILOCK_OK);
    hl_acquirer_join(&wm, hl_widen(10000));
    assert_status(wm.rc, HILOCK_OK);
    /* The other client went first: the lock was promised to it. */
    assert_true(wt.acquired_at <= wm.acquired_at);
    hl_free_lock(theirs);
    hl_free_lock(mine);
    hl_free_lock(holder);
    hl_free_client(obs);
    hl_free_client(b);
    hl_free_client(p);
}

/* ---- a client that died in line ----------------------------------------- */

#define DEAD_CLIENT "5d1e0b3a-0c4f-4e1b-8a2d-7f6e5d4c3b2a"

/* A client whose process died stands first in line, its place running
 * out PLACE_MS after it last tried.  The release promises it the lock,
 * which is kept for it only until that place runs out: a newcomer's try
 * is refused meanwhile, and says why, and the live waiter behind it gets
 * the lock at its next attempt, which comes at least every third of its
 * waiter timeout (1 s here). */
#define PLACE_MS 3000
static void test_dead_client_in_line_passed_over(void **state)
{
    const hl_client_opts opts = {.waiter_ms = 3000};
    hilock_client *obs = hl_new_client(fx.server, NULL);
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *c = hl_new_client(fx.server, &opts);
    hilock_client *d = hl_new_client(fx.server, NULL);
    hilock_lock *la = hl_new_lock(a, "deadline");
    hilock_lock *lc = hl_new_lock(c, "deadline");
    hilock_lock *ld = hl_new_lock(d, "deadline");
    char at[32];
    hl_acquirer w;

    (void)state;
    assert_status(hilock_lock_try_acquire(la, 0, 30000), HILOCK_OK);
    snprintf(at, sizeof at, "%lld", hl_raw_server_ms(fx.server) + PLACE_MS);
    hilock_reply_free(cmd(obs, "RPUSH", "hilock_lock_line:{deadline}",
                          DEAD_CLIENT, (char *)NULL));
    hilock_reply_free(cmd(obs, "ZADD", "hilock_lock_alive:{deadline}", at,
                          DEAD_CLIENT, (char *)NULL));
    hl_acquirer_start(&w, lc, HILOCK_WAIT_FOREVER, HILOCK_LEASE_WATCHDOG,
                      true);
    hl_expect_pending(c, lc, 1);
    int64_t released_at = hl_now_ms();
    assert_status(hilock_lock_release(la), HILOCK_OK);
    assert_int_equal(int_of(cmd(obs, "EXISTS", "deadline", (char *)NULL)),
                     0);
    assert_status(hilock_lock_try_acquire(ld, 0, 30000), HILOCK_EBUSY);
    if (strstr(hilock_last_error(), "promised") == NULL)
        fail_msg("refused with \"%s\"", hilock_last_error());
    hl_acquirer_join(&w, hl_widen(PLACE_MS + 10000));
    assert_status(w.rc, HILOCK_OK);
    assert_status(w.release_rc, HILOCK_OK);
    print_message("    dead client in line: the next waiter got the lock "
                  "%lld ms after the release\n",
                  (long long)(w.acquired_at - released_at));
    /* Gone from the line with its place. */
    hilock_reply *r = cmd(obs, "ZSCORE", "hilock_lock_alive:{deadline}",
                          DEAD_CLIENT, (char *)NULL);
    assert_int_equal(r->type, HILOCK_REPLY_NIL);
    hilock_reply_free(r);
    hl_free_lock(ld);
    hl_free_lock(lc);
    hl_free_lock(la);
    hl_free_client(d);
    hl_free_client(c);
    hl_free_client(a);
    hl_free_client(obs);
}

/* ---- Redisson's releases ------------------------------------------------- */

#define JAVA_FIELD "0b7d1f52-5c3e-4a47-9d3c-2f1e6a7b8c9d:77"

/* A hold as a Redisson client takes it, and its release: the hash goes
 * and "0" goes out on Redisson's channel. */
static void java_hold(hilock_client *obs, const char *name)
{
    hilock_reply_free(cmd(obs, "HSET", name, JAVA_FIELD, "1", (char *)NULL));
    hilock_reply_free(cmd(obs, "PEXPIRE", name, "30000", (char *)NULL));
}

static void java_release(hilock_client *obs, const char *name)
{
    char channel[128];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    assert_int_equal(int_of(cmd(obs, "DEL", name, (char *)NULL)), 1);
    hilock_reply_free(cmd(obs, "PUBLISH", channel, "0", (char *)NULL));
}

static bool numsub_is(void *arg)
{
    const char **want = arg; /* channel, count */
    return hl_fixture_numsub(fx.server, want[0]) == atoll(want[1]);
}

#define JAVA_WAITERS 3

/* Behind a Redisson holder, only the client first in our line listens on
 * Redisson's channel, where the holder's release wakes it, and the rest
 * follow through our own line; each in well under the third of the waiter
 * timeout (20 s here) at which they would try on their own. */
static void test_redisson_release_wakes_our_line(void **state)
{
    const hl_client_opts opts = {.waiter_ms = 60000};
    hilock_client *obs = hl_new_client(fx.server, NULL);
    hilock_client *c[JAVA_WAITERS];
    hilock_lock *l[JAVA_WAITERS];
    hl_acquirer w[JAVA_WAITERS];
    const char *shared[] = {"redisson_lock__channel:{javaheld}", "1"};

    (void)state;
    java_hold(obs, "javaheld");
    for (int i = 0; i < JAVA_WAITERS; i++) {
        c[i] = hl_new_client(fx.server, &opts);
        l[i] = hl_new_lock(c[i], "javaheld");
        hl_acquirer_start(&w[i], l[i], HILOCK_WAIT_FOREVER,
                          HILOCK_LEASE_WATCHDOG, true);
        hl_expect_pending(c[i], l[i], 1);
    }
    /* One subscriber however many wait: the first in line. */
    assert_true(hl_wait_until(numsub_is, shared, hl_widen(5000)));
    assert_int_equal(hl_read_pending(c[0], l[0]).channels, 2);
    for (int i = 1; i < JAVA_WAITERS; i++)
        assert_int_equal(hl_read_pending(c[i], l[i]).channels, 1);
    int64_t t0 = hl_now_ms();
    java_release(obs, "javaheld");
    for (int i = 0; i < JAVA_WAITERS; i++) {
        hl_acquirer_join(&w[i], hl_widen(10000));
        assert_status(w[i].rc, HILOCK_OK);
        assert_status(w[i].release_rc, HILOCK_OK);
    }
    print_message("    redisson release: %d waiters through in %lld ms\n",
                  JAVA_WAITERS, (long long)(hl_now_ms() - t0));
    for (int i = 0; i < JAVA_WAITERS; i++) {
        hl_free_lock(l[i]);
        hl_free_client(c[i]);
    }
    hl_free_client(obs);
}

/* Two clients wait for a held lock, in this order: a first, with an
 * async acquire of OWNER_A on la (first, *first_id), then b, with a
 * blocking acquirer on lb. */
static void line_up_two(hilock_client *a, hilock_lock *la, hilock_client *b,
                        hilock_lock *lb, hl_acquire_rec *first,
                        uint64_t *first_id, hl_acquirer *wb)
{
    hl_acquire_rec_init(first, a);
    assert_status(hilock_lock_acquire_async(la, OWNER_A, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, first,
                                            first_id),
                  HILOCK_OK);
    hl_expect_pending(a, la, 1);
    hl_acquirer_start(wb, lb, HILOCK_WAIT_FOREVER, HILOCK_LEASE_WATCHDOG,
                      true);
    hl_expect_pending(b, lb, 1);
}

/* The first in line gives up behind a Redisson holder: the next is told
 * it is first now, listens on Redisson's channel in its place, and wakes
 * at the holder's release. */
static void test_next_in_line_hears_redisson(void **state)
{
    const hl_client_opts opts = {.waiter_ms = 60000};
    hilock_client *obs = hl_new_client(fx.server, NULL);
    hilock_client *a = hl_new_client(fx.server, &opts);
    hilock_client *b = hl_new_client(fx.server, &opts);
    hilock_lock *la = hl_new_lock(a, "javanext");
    hilock_lock *lb = hl_new_lock(b, "javanext");
    hl_acquire_rec first;
    uint64_t first_id = 0;
    hl_acquirer wb;
    const char *shared[] = {"redisson_lock__channel:{javanext}", "1"};

    (void)state;
    java_hold(obs, "javanext");
    line_up_two(a, la, b, lb, &first, &first_id, &wb);
    assert_int_equal(hl_read_pending(b, lb).channels, 1);
    assert_status(hilock_lock_cancel(la, first_id), HILOCK_OK);
    assert_int_equal(hl_expect_acquire(&first), HILOCK_ECANCELED);
    /* b listens on Redisson's channel now, a no longer. */
    assert_true(hl_wait_pending(b, lb, 1, hl_widen(5000)));
    hl_expect_channels(b, lb, 2);
    assert_true(hl_wait_until(numsub_is, shared, hl_widen(5000)));
    java_release(obs, "javanext");
    hl_acquirer_join(&wb, hl_widen(10000));
    assert_status(wb.rc, HILOCK_OK);
    assert_status(wb.release_rc, HILOCK_OK);
    hl_free_lock(lb);
    hl_free_lock(la);
    hl_free_client(b);
    hl_free_client(a);
    hl_free_client(obs);
}

/* The first in line gives up just after a Redisson release it did not
 * take (DEL with no message here, so that it cannot take the lock before
 * it leaves): the next client, first now and the lock free, is woken by
 * the leave, not left to its own retry a third of the waiter timeout
 * (20 s) later. */
static void test_first_leaving_a_free_lock_wakes_the_next(void **state)
{
    const hl_client_opts opts = {.waiter_ms = 60000};
    hilock_client *obs = hl_new_client(fx.server, NULL);
    hilock_client *a = hl_new_client(fx.server, &opts);
    hilock_client *b = hl_new_client(fx.server, &opts);
    hilock_lock *la = hl_new_lock(a, "javafree");
    hilock_lock *lb = hl_new_lock(b, "javafree");
    hl_acquire_rec first;
    uint64_t first_id = 0;
    hl_acquirer wb;

    (void)state;
    java_hold(obs, "javafree");
    line_up_two(a, la, b, lb, &first, &first_id, &wb);
    assert_int_equal(int_of(cmd(obs, "DEL", "javafree", (char *)NULL)), 1);
    assert_status(hilock_lock_cancel(la, first_id), HILOCK_OK);
    assert_int_equal(hl_expect_acquire(&first), HILOCK_ECANCELED);
    if (!hl_wait_flag(&wb.done, hl_widen(10000))) {
        pthread_detach(wb.thread);
        fail_msg("the next client, first now and the lock free, was not "
                 "woken when the first left");
    }
    hl_acquirer_join(&wb, 0);
    assert_status(wb.rc, HILOCK_OK);
    assert_status(wb.release_rc, HILOCK_OK);
    hl_free_lock(lb);
    hl_free_lock(la);
    hl_free_client(b);
    hl_free_client(a);
    hl_free_client(obs);
}

/* ---- many waiters share one subscription ------------------------------- */

#define CROWD 10

static void test_one_subscription_for_many_waiters(void **state)
{
    hilock_client *holder = hl_new_client(fx.server, NULL);
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_lock(holder, "crowd");
    hilock_lock *l = hl_new_lock(c, "crowd");
    hl_mutex_checker *mc = hl_mutex_checker_create(CROWD, 0);
    char channel[128];
    hl_wake_channel(c, "{crowd}", channel, sizeof channel);
    hl_acquirer w[CROWD];
    char why[300];

    (void)state;
    assert_non_null(mc);
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    for (int i = 0; i < CROWD; i++) {
        hl_acquirer_start_checked(&w[i], l, HILOCK_WAIT_FOREVER,
                                  HILOCK_LEASE_WATCHDOG, true, mc,
                                  (uint32_t)i);
    }
    /* Every waiter registered, so the count can no longer grow. */
    hl_expect_pending(c, l, CROWD);
    assert_int_equal(hl_fixture_numsub(fx.server, channel), 1);
    /* Its own channel, and Redisson's, heard while first in line. */
    assert_int_equal(hl_read_pending(c, l).channels, 2);
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    for (int i = 0; i < CROWD; i++) {
        hl_acquirer_join(&w[i], hl_widen(20000));
        if (w[i].rc != HILOCK_OK || w[i].release_rc != HILOCK_OK)
            fail_msg("waiter %d: acquire %s, release %s", i,
                     hilock_errname(w[i].rc),
                     hilock_errname(w[i].release_rc));
    }
    if (!hl_mutex_checker_verify(mc, false, why, sizeof why))
        fail_msg("%s", why);
    assert_int_equal(hl_mutex_checker_count(mc), CROWD);
    /* The last waiter gone, the subscription goes too. */
    hl_expect_numsub(fx.server, channel, 0, 0);
    hl_mutex_checker_free(mc);
    hl_free_lock(l);
    hl_free_lock(lh);
    hl_free_client(c);
    hl_free_client(holder);
}

/* ---- fencing tokens ---------------------------------------------------- */

/* About the year 2096 in us: above the clock that a draw otherwise lifts
 * the counter to, and still exact in a Lua number. */
#define FENCE_SEED 4000000000000000LL
#define FENCE_SEED_TEXT "4000000000000000"

static void test_fencing_tokens(void **state)
{
    int per_thread = hl_scaled(250, 25);
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "fenced");
    hl_mutex_checker *mc = hl_mutex_checker_create(4 * (size_t)per_thread,
                                                   0);
    hl_checked_holder t[4];
    hilock_reply *r;
    char why[300];

    (void)state;
    assert_non_null(mc);
    /* A counter ahead of the server's clock counts one by one, so the
     * draws can be counted. */
    r = cmd(c, "SET", "redisson_lock_token:{fenced}", FENCE_SEED_TEXT,
            (char *)NULL);
    assert_int_equal(r->type, HILOCK_REPLY_STATUS);
    hilock_reply_free(r);
    for (int i = 0; i < 4; i++) {
        t[i] = (hl_checked_holder){
            .lock = l,
            .mc = mc,
            .id = (uint32_t)i,
            .holds = per_thread,
            .fenced = true,
            .rejoin_every = 10,
        };
        assert_int_equal(pthread_create(&t[i].thread, NULL,
                                        hl_checked_holder_main, &t[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i].thread, NULL);
    if (!hl_mutex_checker_verify(mc, true, why, sizeof why))
        fail_msg("%s", why);
    assert_int_equal(hl_mutex_checker_count(mc), 4 * per_thread);
    /* One increment per hold, none for the reentrant ones. */
    r = cmd(c, "GET", "redisson_lock_token:{fenced}", (char *)NULL);
    assert_int_equal(r->type, HILOCK_REPLY_STRING);
    assert_int_equal(strtoll(r->str, NULL, 10),
                     FENCE_SEED + 4 * per_thread);
    hilock_reply_free(r);
    hl_mutex_checker_free(mc);
    hl_free_lock(l);
    hl_free_client(c);
}

/* ---- the async API and its callback contract --------------------------- */


static void call_cancel_unknown(hilock_client *c, void *arg)
{
    hilock_lock *l = arg;

    (void)c;
    /* On the loop thread as well. */
    assert_int_equal(hilock_lock_cancel(l, UINT64_MAX - 1),
                     HILOCK_ENOTFOUND);
}

static void test_async_api(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *other = hl_new_client(fx.server, NULL);
    hilock_client *c2 = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "async");
    hilock_lock *lo = hl_new_lock(other, "async");
    hilock_lock *l2 = hl_new_lock(c, "async"), *l3 = hl_new_lock(c2, "async");
    hl_acquire_rec first, again, busy, canceled, destroyed, closed;
    hl_value_rec v1, v2, v3;
    uint64_t id = 0, token;
    char field[80];

    (void)state;
    hl_acquire_rec_init(&first, c);
    hl_acquire_rec_init(&again, c);
    hl_acquire_rec_init(&busy, c);
    hl_acquire_rec_init(&canceled, c);
    hl_acquire_rec_init(&destroyed, c);
    hl_acquire_rec_init(&closed, c2);
    hl_value_rec_init(&v1);
    hl_value_rec_init(&v2);
    hl_value_rec_init(&v3);

    /* An explicit owner from a thread that is not the loop's. */
    assert_status(hilock_lock_acquire_async(l, OWNER_A, 0,
                                            HILOCK_LEASE_WATCHDOG,
                                            HILOCK_ACQUIRE_FENCED,
                                            hl_record_acquire, &first, &id),
                  HILOCK_OK);
    assert_true(id != 0);
    hl_expect_acquire(&first);
    assert_status(first.status, HILOCK_OK);
    assert_true(first.had_result);
    assert_int_equal(first.got.owner, OWNER_A);
    assert_int_equal(first.got.hold_count, 1);
    assert_true(first.got.token >= 1);
    token = first.got.token;
    owner_field(field, sizeof field, c, OWNER_A);
    assert_bulk(cmd(other, "HGET", "async", field, (char *)NULL), "1");
    assert_status(hilock_lock_acquire_async(l, OWNER_A, 0,
                                            HILOCK_LEASE_WATCHDOG,
                                            HILOCK_ACQUIRE_FENCED,
                                            hl_record_acquire, &again, NULL),
                  HILOCK_OK);
    hl_expect_acquire(&again);
    assert_status(again.status, HILOCK_OK);
    assert_int_equal(again.got.hold_count, 2);
    assert_int_equal(again.got.token, token);
    assert_status(hilock_lock_hold_count_async(l, OWNER_A, hl_record_value,
                                              &v1),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&v1, HILOCK_OK), 2);
    assert_status(hilock_lock_release_async(l, OWNER_A, hl_record_value, &v2),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&v2, HILOCK_OK), 1);
    assert_status(hilock_lock_release_async(l, OWNER_A, hl_record_value, &v3),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&v3, HILOCK_OK), 0);
    assert_int_equal(exists_bin(other, "async", 5), 0);

    /* Held by another client: a single attempt gives up. */
    assert_status(hilock_lock_try_acquire(lo, 0, 30000), HILOCK_OK);
    assert_status(hilock_lock_acquire_async(l, OWNER_A, 0,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &busy, NULL),
                  HILOCK_OK);
    hl_expect_acquire(&busy);
    assert_status(busy.status, HILOCK_EBUSY);
    assert_false(busy.had_result);

    /* Cancel a waiting acquire. */
    assert_status(hilock_lock_acquire_async(l, OWNER_B, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &canceled, &id),
                  HILOCK_OK);
    hl_expect_pending(c, l, 1);
    assert_status(hilock_lock_cancel(l, id), HILOCK_OK);
    hl_expect_acquire(&canceled);
    assert_status(canceled.status, HILOCK_ECANCELED);
    assert_false(canceled.had_result);
    /* A stale id is reported the same from any thread. */
    assert_status(hilock_lock_cancel(l, id), HILOCK_ENOTFOUND);
    hl_run_on_loop(c, call_cancel_unknown, l);
    hl_expect_numsub(fx.server, "redisson_lock__channel:{async}", 0, 0);

    /* Destroying the handle cancels its pending acquire. */
    assert_status(hilock_lock_acquire_async(l2, OWNER_B, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &destroyed,
                                            NULL),
                  HILOCK_OK);
    hl_expect_pending(c, l2, 1);
    hl_free_lock(l2);
    hl_expect_acquire(&destroyed);
    assert_status(destroyed.status, HILOCK_ECANCELED);

    /* Closing the client ends it with ECLOSED. */
    assert_status(hilock_lock_acquire_async(l3, OWNER_B, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &closed, NULL),
                  HILOCK_OK);
    hl_expect_pending(c2, l3, 1);
    assert_status(hilock_client_close(c2), HILOCK_OK);
    hl_expect_acquire(&closed);
    assert_status(closed.status, HILOCK_ECLOSED);
    hl_free_lock(l3);
    hl_free_client(c2);

    assert_status(hilock_lock_release(lo), HILOCK_OK);
    hl_free_lock(lo);
    hl_free_lock(l);
    /* Anything still queued on the loop has run by now. */
    hl_run_on_loop(c, NULL, NULL);
    hl_acquire_rec *all[] = { &first, &again, &busy, &canceled, &destroyed,
                       &closed };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        assert_int_equal(atomic_load(&all[i]->calls), 1);
        assert_int_equal(atomic_load(&all[i]->off_loop), 0);
    }
    assert_int_equal(atomic_load(&v1.calls), 1);
    assert_int_equal(atomic_load(&v2.calls), 1);
    assert_int_equal(atomic_load(&v3.calls), 1);
    hl_free_client(other);
    hl_free_client(c);
}

/* ---- a bounded wait runs out ------------------------------------------- */

static void test_wait_runs_out(void **state)
{
    hilock_client *holder = hl_new_client(fx.server, NULL);
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_lock(holder, "busy"), *l = hl_new_lock(c, "busy");
    const int64_t wait_ms = 300;
    int64_t t0, took;

    (void)state;
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_EBUSY);
    t0 = hl_now_ms();
    assert_status(hilock_lock_try_acquire(l, wait_ms, HILOCK_LEASE_WATCHDOG),
                  HILOCK_EBUSY);
    took = hl_now_ms() - t0;
    if (took < wait_ms || took > wait_ms + hl_widen(5000))
        fail_msg("a %lld ms wait gave up after %lld ms", (long long)wait_ms,
                 (long long)took);
    /* Nothing is left waiting, and nobody listens any more. */
    hl_expect_pending(c, l, 0);
    hl_expect_numsub(fx.server, "redisson_lock__channel:{busy}", 0, 0);
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    hl_free_lock(l);
    hl_free_lock(lh);
    hl_free_client(c);
    hl_free_client(holder);
}

/* Waits at the ends of the range.  The most negative one is refused like
 * any other; one too long to add to a clock reading is still a wait (the
 * lock is busy when the acquire starts, so the wait is computed with). */
static void test_extreme_waits(void **state)
{
    static const int64_t waits[] = { INT64_MAX, INT64_MAX / 1000 };
    hilock_client *holder = hl_new_client(fx.server, NULL);
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_lock(holder, "huge"), *l = hl_new_lock(c, "huge");
    hl_acquirer w;

    (void)state;
    assert_status(hilock_lock_try_acquire(l, INT64_MIN,
                                          HILOCK_LEASE_WATCHDOG),
                  HILOCK_EINVAL);
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
        hl_acquirer_start(&w, l, waits[i], HILOCK_LEASE_WATCHDOG, true);
        /* Only a waiter that took the wait for a long one is still
         * there to be woken. */
        if (!hl_wait_pending(c, l, 1, hl_widen(10000))) {
            if (atomic_load(&w.done))
                fail_msg("wait_ms %" PRId64 ": the acquire ended at once "
                         "with %s", waits[i], hilock_errname(w.rc));
            fail_msg("wait_ms %" PRId64 ": the acquire never waited",
                     waits[i]);
        }
        assert_status(hilock_lock_release(lh), HILOCK_OK);
        hl_acquirer_join(&w, hl_widen(10000));
        if (w.rc != HILOCK_OK || w.release_rc != HILOCK_OK)
            fail_msg("wait_ms %" PRId64 ": acquire %s, release %s",
                     waits[i], hilock_errname(w.rc),
                     hilock_errname(w.release_rc));
    }
    hl_free_lock(l);
    hl_free_lock(lh);
    hl_free_client(c);
    hl_free_client(holder);
}

/* ---- bad input --------------------------------------------------------- */

/* Takes a lock named by arbitrary bytes, makes a second client wait for
 * it, and releases: the name, its channel and its message must all
 * survive the trip. */
static void odd_name_round_trip(hilock_client *c, hilock_client *other,
                                const char *name, size_t len)
{
    hilock_lock *l = lock_bin(c, name, len), *lo = lock_bin(other, name, len);
    const char *argv[] = { "HGET", name, NULL };
    size_t lens[] = { 4, len, 0 };
    char field[80];
    hl_acquirer w;

    owner_field(field, sizeof field, c, hilock_thread_owner());
    argv[2] = field;
    lens[2] = strlen(field);
    assert_status(hilock_lock_try_acquire(l, 0, 30000), HILOCK_OK);
    assert_int_equal(exists_bin(other, name, len), 1);
    assert_bulk(command(other, 3, argv, lens), "1");
    hl_acquirer_start(&w, lo, HILOCK_WAIT_FOREVER, HILOCK_LEASE_WATCHDOG,
                      true);
    hl_expect_pending(other, lo, 1);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    /* Well inside the 30 s lease: the release message reached it. */
    hl_acquirer_join(&w, hl_widen(5000));
    assert_status(w.rc, HILOCK_OK);
    assert_status(w.release_rc, HILOCK_OK);
    assert_int_equal(exists_bin(other, name, len), 0);
    hl_free_lock(lo);
    hl_free_lock(l);
}

static void test_odd_names(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *other = hl_new_client(fx.server, NULL);
    static const char nul_name[] = "nul\0inside";
    static const char high[] = "\xff\xfe";
    hilock_lock *l, *lo, *prefix;
    bool locked = true;
    uint64_t token = 0;
    hl_acquirer w;

    (void)state;
    /* A name with braces is its own hash tag: no braces are added. */
    l = hl_new_lock(c, "a{b}c");
    lo = hl_new_lock(other, "a{b}c");
    assert_status(hilock_lock_acquire_fenced(l, 0, 30000, &token),
                  HILOCK_OK);
    assert_int_equal(int_of(cmd(other, "EXISTS", "redisson_lock_token:a{b}c",
                                (char *)NULL)), 1);
    hl_acquirer_start(&w, lo, HILOCK_WAIT_FOREVER, HILOCK_LEASE_WATCHDOG,
                      true);
    hl_expect_pending(other, lo, 1);
    char channel[128];
    hl_wake_channel(other, "a{b}c", channel, sizeof channel);
    assert_int_equal(hl_fixture_numsub(fx.server, channel), 1);
    hl_wake_channel(other, "{a{b}c}", channel, sizeof channel);
    assert_int_equal(hl_fixture_numsub(fx.server, channel), 0);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    hl_acquirer_join(&w, hl_widen(5000));
    assert_status(w.rc, HILOCK_OK);
    assert_status(w.release_rc, HILOCK_OK);
    hl_free_lock(lo);
    hl_free_lock(l);

    odd_name_round_trip(c, other, "a lock with spaces", 18);
    odd_name_round_trip(c, other, high, 2);
    odd_name_round_trip(c, other, nul_name, sizeof nul_name - 1);

    /* The bytes after a NUL are part of the name. */
    l = lock_bin(c, nul_name, sizeof nul_name - 1);
    prefix = hl_new_lock(c, "nul");
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_is_locked(prefix, &locked), HILOCK_OK);
    assert_false(locked);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    hl_free_lock(prefix);
    hl_free_lock(l);
    hl_free_client(other);
    hl_free_client(c);
}

static void test_bad_names(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    size_t big = 1u << 20;
    char *name = malloc(big);
    hilock_lock *l = (hilock_lock *)&l;

    (void)state;
    assert_non_null(name);
    memset(name, 'n', big);
    assert_status(hilock_lock_create(&l, c, ""), HILOCK_EINVAL);
    assert_null(l);
    assert_true(strlen(hilock_last_error()) > 0);
    l = (hilock_lock *)&l;
    assert_status(hilock_lock_create_n(&l, c, name, big), HILOCK_EINVAL);
    assert_null(l);
    if (strstr(hilock_last_error(), "65536") == NULL)
        fail_msg("the message \"%s\" does not state the limit",
                 hilock_last_error());
    assert_status(hilock_lock_create_n(&l, c, name, HILOCK_MAX_NAME_LEN + 1),
                  HILOCK_EINVAL);
    assert_status(hilock_lock_create(NULL, c, "x"), HILOCK_EINVAL);
    assert_status(hilock_lock_create(&l, NULL, "x"), HILOCK_EINVAL);
    assert_status(hilock_lock_create_n(&l, c, NULL, 1), HILOCK_EINVAL);
    /* The longest name allowed works end to end. */
    l = lock_bin(c, name, HILOCK_MAX_NAME_LEN);
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_int_equal(exists_bin(c, name, HILOCK_MAX_NAME_LEN), 1);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    assert_int_equal(exists_bin(c, name, HILOCK_MAX_NAME_LEN), 0);
    hl_free_lock(l);
    free(name);
    hl_free_client(c);
}

/* Every create function takes a C string beside its _n twin: NULL and ""
 * are refused, a string past the longest name is refused without being
 * read to its end, and the longest one is taken whole. */
static void test_c_string_names(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    size_t big = (size_t)HILOCK_MAX_NAME_LEN + 2;
    char *name = malloc(big);
    hilock_lock *l = NULL;
    hilock_latch *la = NULL;
    hilock_semaphore *s = NULL;
    hilock_permit_semaphore *ps = NULL;
    hilock_segmented *seg = NULL;
    hilock_multilock *m = NULL;
    const char *kind = NULL;
    size_t len = 0;
    typedef int lock_make(hilock_lock **, hilock_client *, const char *);
    lock_make *makes[] = {hilock_lock_create, hilock_fair_lock_create,
                          hilock_read_lock_create, hilock_write_lock_create};

    (void)state;
    assert_non_null(name);
    memset(name, 'c', big);
    name[big - 1] = '\0'; /* one byte past the longest name */
    for (size_t i = 0; i < sizeof makes / sizeof makes[0]; i++) {
        assert_status(makes[i](&l, c, NULL), HILOCK_EINVAL);
        assert_status(makes[i](&l, c, ""), HILOCK_EINVAL);
        assert_status(makes[i](&l, c, name), HILOCK_EINVAL);
        assert_status(makes[i](&l, c, "cstr:lock"), HILOCK_OK);
        assert_string_equal(hilock_lock_name(l, &len), "cstr:lock");
        assert_int_equal(len, 9);
        hl_free_lock(l);
    }
    assert_status(hilock_latch_create(&la, c, NULL), HILOCK_EINVAL);
    assert_status(hilock_latch_create(&la, c, ""), HILOCK_EINVAL);
    assert_status(hilock_latch_create(&la, c, "cstr:latch"), HILOCK_OK);
    assert_string_equal(hilock_latch_name(la, &len), "cstr:latch");
    assert_int_equal(len, 10);
    assert_status(hilock_latch_destroy(la), HILOCK_OK);
    assert_status(hilock_semaphore_create(&s, c, ""), HILOCK_EINVAL);
    assert_status(hilock_semaphore_create(&s, c, "cstr:sem"), HILOCK_OK);
    assert_status(hilock_semaphore_destroy(s), HILOCK_OK);
    assert_status(hilock_permit_semaphore_create(&ps, c, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_permit_semaphore_create(&ps, c, "cstr:permits"),
                  HILOCK_OK);
    assert_status(hilock_permit_semaphore_destroy(ps), HILOCK_OK);
    assert_status(hilock_segmented_create(&seg, c, name, 4), HILOCK_EINVAL);
    assert_status(hilock_segmented_create(&seg, c, "cstr:stock", 4),
                  HILOCK_OK);
    assert_string_equal(
        hilock_lock_name(hilock_segmented_lock(seg, 3), &len),
        "cstr:stock:seg:3");
    assert_status(hilock_segmented_destroy(seg), HILOCK_OK);
    assert_status(hilock_redlock_multilock_create(&m, NULL, "x"),
                  HILOCK_EINVAL);
    assert_status(hilock_client_name_kind(c, "", &kind), HILOCK_EINVAL);
    assert_status(hilock_client_name_kind(c, name, &kind), HILOCK_EINVAL);
    assert_status(hilock_client_name_kind(c, "cstr:none", &kind), HILOCK_OK);
    assert_null(kind);

    /* The longest name, as a C string. */
    name[HILOCK_MAX_NAME_LEN] = '\0';
    assert_status(hilock_lock_create(&l, c, name), HILOCK_OK);
    (void)hilock_lock_name(l, &len);
    assert_int_equal(len, HILOCK_MAX_NAME_LEN);
    hl_free_lock(l);
    free(name);
    hl_free_client(c);
}

static void test_bad_arguments(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "args");
    uint64_t token = 0;
    hl_acquire_rec never;
    hl_value_rec vnever;

    (void)state;
    hl_acquire_rec_init(&never, c);
    hl_value_rec_init(&vnever);
    assert_status(hilock_lock_try_acquire(l, -2, HILOCK_LEASE_WATCHDOG),
                  HILOCK_EINVAL);
    assert_status(hilock_lock_try_acquire(l, 0, -1), HILOCK_EINVAL);
    assert_status(hilock_lock_acquire_fenced(l, -5, 0, &token),
                  HILOCK_EINVAL);
    assert_status(hilock_lock_acquire_async(l, 7, 0, 0, 2u, hl_record_acquire,
                                            &never, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_lock_acquire_async(l, 0, 0, 0, 0, hl_record_acquire,
                                            &never, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_lock_acquire_async(l, 7, -3, 0, 0, hl_record_acquire,
                                            &never, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_lock_acquire_async(l, 7, 0, 0, 0, NULL, NULL,
                                            NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_lock_release_async(l, 0, hl_record_value, &vnever),
                  HILOCK_EINVAL);
    assert_status(hilock_lock_acquire(NULL), HILOCK_EINVAL);
    assert_status(hilock_lock_release(NULL), HILOCK_EINVAL);
    assert_status(hilock_lock_cancel(NULL, 1), HILOCK_EINVAL);
    assert_status(hilock_lock_set_lost_callback(NULL, hl_record_lost, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_lock_destroy(NULL), HILOCK_EINVAL);
    /* None of the refused calls holds anything. */
    assert_int_equal(exists_bin(c, "args", 4), 0);
    hl_free_lock(l);
    /* The handle table notices the second destroy. */
    assert_status(hilock_lock_destroy(l), HILOCK_ECLOSED);
    hl_run_on_loop(c, NULL, NULL);
    assert_int_equal(atomic_load(&never.calls), 0);
    assert_int_equal(atomic_load(&vnever.calls), 0);
    hl_free_client(c);
}

static void test_calls_after_close(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "closed"), *late = NULL;
    hl_acquire_rec never;
    hl_value_rec vnever;
    int64_t n;
    bool b;

    (void)state;
    hl_acquire_rec_init(&never, c);
    hl_value_rec_init(&vnever);
    assert_status(hilock_client_close(c), HILOCK_OK);
    assert_status(hilock_lock_acquire(l), HILOCK_ECLOSED);
    assert_status(hilock_lock_try_acquire(l, 0, 0), HILOCK_ECLOSED);
    assert_status(hilock_lock_release(l), HILOCK_ECLOSED);
    assert_status(hilock_lock_force_release(l, &b), HILOCK_ECLOSED);
    assert_status(hilock_lock_is_locked(l, &b), HILOCK_ECLOSED);
    assert_status(hilock_lock_hold_count(l, &n), HILOCK_ECLOSED);
    assert_status(hilock_lock_remaining_ttl(l, &n), HILOCK_ECLOSED);
    assert_status(hilock_lock_lease_lost(l, &b), HILOCK_ECLOSED);
    assert_status(hilock_lock_acquire_async(l, 9, 0, 0, 0, hl_record_acquire,
                                            &never, NULL),
                  HILOCK_ECLOSED);
    assert_status(hilock_lock_release_async(l, 9, hl_record_value, &vnever),
                  HILOCK_ECLOSED);
    assert_status(hilock_lock_is_locked_async(l, hl_record_value, &vnever),
                  HILOCK_ECLOSED);
    assert_status(hilock_lock_cancel(l, 1), HILOCK_ECLOSED);
    assert_status(hilock_lock_set_lost_callback(l, hl_record_lost, NULL),
                  HILOCK_ECLOSED);
    assert_status(hilock_lock_create(&late, c, "late"), HILOCK_ECLOSED);
    assert_null(late);
    hl_free_lock(l);
    assert_status(hilock_lock_destroy(l), HILOCK_ECLOSED);
    hl_free_client(c);
    assert_int_equal(atomic_load(&never.calls), 0);
    assert_int_equal(atomic_load(&vnever.calls), 0);
}

/* Sync calls made inside a callback, on the loop thread. */
typedef struct deadlock_probe {
    hl_acquire_rec rec;
    int rc[8];
} deadlock_probe;

static void on_acquire_probe(hilock_lock *lock, int status,
                             const hilock_acquired *acquired, void *data)
{
    deadlock_probe *p = data;
    hilock_client *c = p->rec.client;
    hilock_reply *r = NULL;
    const char *ping[] = { "PING" };
    int64_t n;
    bool b;

    p->rc[0] = hilock_lock_acquire(lock);
    p->rc[1] = hilock_lock_try_acquire(lock, 0, 0);
    p->rc[2] = hilock_lock_release(lock);
    p->rc[3] = hilock_lock_is_locked(lock, &b);
    p->rc[4] = hilock_lock_hold_count(lock, &n);
    p->rc[5] = hilock_lock_lease_lost(lock, &b);
    p->rc[6] = hilock_lock_force_release(lock, &b);
    p->rc[7] = hilock_client_command(c, 1, ping, NULL, &r);
    hilock_reply_free(r);
    hl_record_acquire(lock, status, acquired, &p->rec);
}

static void test_sync_call_on_loop_thread(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "deadlock");
    deadlock_probe p;
    hl_value_rec vr;

    (void)state;
    memset(&p, 0, sizeof p);
    hl_acquire_rec_init(&p.rec, c);
    hl_value_rec_init(&vr);
    assert_status(hilock_lock_acquire_async(l, OWNER_A, 0,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            on_acquire_probe, &p, NULL),
                  HILOCK_OK);
    hl_expect_acquire(&p.rec);
    assert_status(p.rec.status, HILOCK_OK);
    for (int i = 0; i < 8; i++)
        if (p.rc[i] != HILOCK_EDEADLK)
            fail_msg("sync call %d on the loop thread returned %s", i,
                     hilock_errname(p.rc[i]));
    /* The refused calls changed nothing: the hold is still there. */
    assert_int_equal(exists_bin(c, "deadlock", 8), 1);
    assert_status(hilock_lock_release_async(l, OWNER_A, hl_record_value, &vr),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&vr, HILOCK_OK), 0);
    hl_free_lock(l);
    hl_free_client(c);
}

/* ---- the Redis layout is Redisson's ------------------------------------ */

typedef struct channel_tap {
    hl_sub sub;
    atomic_int ready;
    atomic_int messages;
    char last[16];
    size_t last_len;
} channel_tap;

static void on_tap(hl_sub *sub, hl_sub_event ev, const char *msg, size_t len)
{
    channel_tap *t = sub->data;

    if (ev == HL_SUB_READY) {
        atomic_fetch_add(&t->ready, 1);
    } else if (ev == HL_SUB_MESSAGE) {
        t->last_len = len < sizeof t->last ? len : sizeof t->last;
        memcpy(t->last, msg, t->last_len);
        atomic_fetch_add(&t->messages, 1);
    }
}

static void tap_on(hilock_client *c, void *arg)
{
    channel_tap *t = arg;
    const char *ch = "redisson_lock__channel:{layout}";

    if (hl_pubsub_subscribe(hl_client_pubsub(c), &t->sub, ch, strlen(ch),
                            on_tap, t) == 1)
        atomic_fetch_add(&t->ready, 1);
}

static void tap_off(hilock_client *c, void *arg)
{
    channel_tap *t = arg;

    hl_pubsub_unsubscribe(&t->sub);
}

static void test_redisson_layout(void **state)
{
    hilock_client *c =
        hl_new_client(fx.server, &(hl_client_opts){ .watchdog_ms = 10000 });
    hilock_client *obs = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "layout");
    const char *id = hilock_client_id(c);
    char field[80];
    channel_tap tap;
    hilock_reply *r;
    long long ttl;
    uint64_t token = 0;

    (void)state;
    assert_int_equal(strlen(id), HILOCK_CLIENT_ID_LEN);
    assert_int_equal(id[14], '4'); /* a version 4 UUID */
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    owner_field(field, sizeof field, c, hilock_thread_owner());
    r = cmd(obs, "HGETALL", "layout", (char *)NULL);
    assert_int_equal(r->type, HILOCK_REPLY_ARRAY);
    assert_int_equal(r->elements, 2);
    assert_int_equal(r->element[0]->len, strlen(field));
    assert_memory_equal(r->element[0]->str, field, strlen(field));
    assert_int_equal(r->element[1]->len, 1);
    assert_memory_equal(r->element[1]->str, "1", 1);
    hilock_reply_free(r);
    r = cmd(obs, "TYPE", "layout", (char *)NULL);
    assert_int_equal(r->type, HILOCK_REPLY_STATUS);
    assert_string_equal(r->str, "hash");
    hilock_reply_free(r);
    ttl = pttl(obs, "layout");
    if (ttl <= 9000 || ttl > 10000)
        fail_msg("PTTL %lld with a 10000 ms watchdog", ttl);

    /* Release publishes "1" on the lock's channel: Redisson's waiters
     * take it as a release, and our client first in line tells it from
     * Redisson's own "0", since ours wake it on its own channel. */
    memset(&tap, 0, sizeof tap);
    atomic_init(&tap.ready, 0);
    atomic_init(&tap.messages, 0);
    hl_run_on_loop(obs, tap_on, &tap);
    if (!hl_wait_count(&tap.ready, 1, hl_widen(5000)))
        fail_msg("the channel tap was never subscribed");
    assert_status(hilock_lock_release(l), HILOCK_OK);
    if (!hl_wait_count(&tap.messages, 1, hl_widen(5000)))
        fail_msg("no release message");
    assert_int_equal(tap.last_len, 1);
    assert_int_equal(tap.last[0], '1');
    hl_run_on_loop(obs, tap_off, &tap);
    assert_int_equal(exists_bin(obs, "layout", 6), 0);

    /* The fencing counter is a plain string under its own key. */
    assert_status(hilock_lock_acquire_fenced(l, 0, HILOCK_LEASE_WATCHDOG,
                                             &token),
                  HILOCK_OK);
    r = cmd(obs, "GET", "redisson_lock_token:{layout}", (char *)NULL);
    assert_int_equal(r->type, HILOCK_REPLY_STRING);
    assert_int_equal(strtoull(r->str, NULL, 10), token);
    hilock_reply_free(r);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    hl_free_lock(l);
    hl_free_client(obs);
    hl_free_client(c);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_nested_hold_counts),
        T(test_release_by_non_owner),
        T(test_mutual_exclusion),
        T(test_watchdog_keeps_lease),
        T(test_explicit_lease_expires),
        T(test_queue_moves_when_a_waiter_leaves),
        T(test_hand_on_taken_back),
        T(test_mixed_leases_lost_in_order),
        T(test_connections_one_and_many),
        T(test_release_crosses_renewals),
        T(test_max_hold_caps_the_watchdog),
        T(test_lost_when_key_deleted),
        T(test_reentry_after_loss),
        T(test_reentry_after_loss_released_in_callback),
        T(test_release_wakes_waiter),
        T(test_release_wakes_one_client),
        T(test_own_waiters_line_up_behind_a_promise),
        T(test_dead_client_in_line_passed_over),
        T(test_redisson_release_wakes_our_line),
        T(test_next_in_line_hears_redisson),
        T(test_first_leaving_a_free_lock_wakes_the_next),
        T(test_one_subscription_for_many_waiters),
        T(test_fencing_tokens),
        T(test_async_api),
        T(test_wait_runs_out),
        T(test_odd_names),
        T(test_bad_names),
        T(test_c_string_names),
        T(test_bad_arguments),
        T(test_calls_after_close),
        T(test_sync_call_on_loop_thread),
        T(test_redisson_layout),
        /* Last: an arithmetic overflow here aborts the whole process
         * under UBSan, which should not hide the other results. */
        T(test_extreme_waits),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
