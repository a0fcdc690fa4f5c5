/* Redisson's pub/sub on a real Redis Cluster (3 masters, 3 replicas),
 * under each redisson_pubsub mode.  Redisson shards the channels it
 * shares with hilock only when its shardedSubscriptionMode says so;
 * otherwise its clients SUBSCRIBE and PUBLISH.  The Java side here is
 * Redisson's layout written by the test: a holder's field in the lock's
 * hash, its release as a script that deletes it and publishes with the
 * command Redisson would pick, and its waiters as raw connections
 * subscribed one way or the other (support/plain_sub.h), or the fair
 * lock peer of support/redisson_peer.h, which publishes plain.  Every
 * kind is covered: the reentrant lock in each mode, and the fair lock,
 * the latch, the semaphore and both sides of the read-write lock under
 * plain and both.
 *
 * A woken waiter must be woken by the release: every wait here is
 * bounded by a deadline far shorter than the Java holder's lease and the
 * waiter's own heartbeats (the waiter timeout is made long), so only the
 * message can explain a grant in time. */
/* ctest-timeout: 240 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/transport/keyslot.h"
#include "hilock/hilock.h"
#include "support/cluster_util.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/plain_sub.h"
#include "support/redisson_peer.h"

static hl_redis_cluster *cluster;

/* How long a wake may take; the Java lease is six times that, and a
 * waiter's heartbeat (a third of the waiter timeout) comes no sooner. */
static int wake_ms;
static int lease_ms;

static int setup(void **state)
{
    (void)state;
    wake_ms = hl_widen(5000);
    lease_ms = 6 * wake_ms;
    cluster = hl_fixture_cluster();
    return cluster ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_cluster_stop(cluster);
    return 0;
}

/* ---- what the tests share ---------------------------------------------- */

/* A Redisson owner: its connection manager's id and a thread. */
#define JAVA_FIELD "6a0c2b1e-7f3d-4c59-9e21-0d4b8a7c1f35:1"

#define OK(call)                                                            \
    do {                                                                    \
        int ok_rc_ = (call);                                                \
        if (ok_rc_ != HILOCK_OK)                                            \
            fail_msg("%s: %s: %s", #call, hilock_errname(ok_rc_),           \
                     hilock_last_error());                                  \
    } while (0)

/* A client whose cluster's Redisson clients use mode (NULL: the
 * default), with a waiter timeout long enough that no heartbeat of a
 * waiting place comes within a wake's deadline. */
static hilock_client *client(const char *mode)
{
    char url[1024];
    snprintf(url, sizeof url, "%s?waiter_timeout=%d%s%s",
             hl_redis_cluster_url(cluster), 3 * lease_ms,
             mode ? "&redisson_pubsub=" : "", mode ? mode : "");
    return hl_fx_cluster_client(url, 0, 0);
}

static hl_redis_server *master(int i) { return hl_fx_master(cluster, i); }

static hl_redis_server *master_of_name(const char *name)
{
    return hl_fx_master_of(cluster, (int)hl_keyslot(name, strlen(name)));
}

/* A master other than m. */
static hl_redis_server *far_from(hl_redis_server *m)
{
    return master(0) != m ? master(0) : master(1);
}

/* A name "<prefix>-<n>" whose slot master i serves. */
static void name_on(int i, const char *prefix, char *out, size_t cap)
{
    hl_fx_key_on(cluster, master(i), prefix, out, cap);
}

static void lock_channel(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "redisson_lock__channel:{%s}", name);
}

/* Which ways a client of mode listens on a shared channel. */
static bool listens_plain(const char *mode)
{
    return mode != NULL && strcmp(mode, "sharded") != 0;
}

static bool listens_sharded(const char *mode)
{
    return mode == NULL || strcmp(mode, "plain") != 0;
}

typedef struct listening {
    hl_redis_server *node;
    const char *channel;
    bool plain, sharded;
} listening;

static bool is_listening(void *arg)
{
    listening *l = arg;
    return (!l->plain || hl_fixture_numsub(l->node, l->channel) > 0) &&
           (!l->sharded || hl_fixture_shardnumsub(l->node, l->channel) > 0);
}

/* Waits until a client of mode listens on channel at node (the master of
 * its slot, where its subscriptions go) in each way the mode asks for. */
static void expect_listening(hl_redis_server *node, const char *channel,
                             const char *mode)
{
    listening l = {node, channel, listens_plain(mode),
                   listens_sharded(mode)};
    if (!hl_wait_until(is_listening, &l, hl_widen(10000)))
        fail_msg("nobody came to listen on %s (plain %lld, sharded %lld)",
                 channel, hl_fixture_numsub(node, channel),
                 hl_fixture_shardnumsub(node, channel));
}

/* Redisson's hold: its field in the hash at name, with a lease. */
static void java_holds(hl_redis_server *m, const char *name)
{
    char reply[256], ms[24];
    snprintf(ms, sizeof ms, "%d", lease_ms);
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "HSET",
                                         name, JAVA_FIELD, "1",
                                         (char *)NULL),
                     ':');
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "PEXPIRE",
                                         name, ms, (char *)NULL),
                     ':');
}

/* Redisson's unlock of its last hold: the hash goes, and "0" goes out on
 * the channel with verb, the command its pub/sub mode picks. */
static const char java_unlock_lua[] =
    "if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return 0 end\n"
    "redis.call('del', KEYS[1])\n"
    "redis.call(ARGV[2], KEYS[2], '0')\n"
    "return 1\n";

static void java_releases(hl_redis_server *m, const char *name,
                          const char *channel, const char *verb)
{
    char reply[256];
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "EVAL",
                                         java_unlock_lua, "2", name, channel,
                                         JAVA_FIELD, verb, (char *)NULL),
                     ':');
    assert_string_equal(reply, ":1\r\n");
}

/* A blocking acquire (or a latch's await) on a thread of its own, which
 * holds what it got until told to release it.  Each is new_waiter()'s,
 * never used twice: a failed test leaves its threads behind, and they
 * must find their waiter as they left it. */
typedef struct waiter {
    hilock_lock *lock;
    hilock_latch *latch;
    hilock_semaphore *sem; /* takes a permit, and keeps it */
    int rc, release_rc;
    bool opened;
    atomic_bool done, release, released;
    pthread_t thread;
} waiter;

static waiter waiters[32];
static int waiters_used;

static waiter *new_waiter(void)
{
    assert_true(waiters_used < (int)(sizeof waiters / sizeof waiters[0]));
    return &waiters[waiters_used++];
}

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    int64_t wait = 2 * (int64_t)lease_ms;
    if (w->latch != NULL || w->sem != NULL) {
        w->rc = w->latch ? hilock_latch_await(w->latch, wait, &w->opened)
                         : hilock_semaphore_try_acquire(w->sem, 1, wait);
        atomic_store(&w->done, true);
        atomic_store(&w->released, true);
        return NULL;
    }
    w->rc = hilock_lock_try_acquire(w->lock, wait, lease_ms);
    atomic_store(&w->done, true);
    if (w->rc == HILOCK_OK && hl_wait_flag(&w->release, hl_widen(30000)))
        w->release_rc = hilock_lock_release(w->lock);
    atomic_store(&w->released, true);
    return NULL;
}

static void waiter_start(waiter *w, hilock_lock *lock, hilock_latch *latch)
{
    memset(w, 0, sizeof *w);
    w->lock = lock;
    w->latch = latch;
    w->sem = NULL;
    atomic_init(&w->done, false);
    atomic_init(&w->release, false);
    atomic_init(&w->released, false);
    assert_int_equal(pthread_create(&w->thread, NULL, waiter_main, w), 0);
}

/* Waits for the waiter to be done, within a wake's deadline; what woke
 * it is the release, since no lease or heartbeat ends in that time. */
static void expect_woken(waiter *w, const char *what)
{
    int64_t t0 = hl_now_ms();
    if (!hl_wait_flag(&w->done, wake_ms))
        fail_msg("%s did not wake the waiter within %d ms (no lease, "
                 "heartbeat or wait ends before %d ms)",
                 what, wake_ms, lease_ms);
    if (w->rc != HILOCK_OK)
        fail_msg("the waiter got %s after %lld ms", hilock_errname(w->rc),
                 (long long)(hl_now_ms() - t0));
}

static void waiter_finish(waiter *w)
{
    atomic_store(&w->release, true);
    assert_true(hl_wait_flag(&w->released, hl_widen(15000)));
    pthread_join(w->thread, NULL);
    assert_int_equal(w->release_rc, HILOCK_OK);
}

static void expect_message(hl_plain_sub *sub, const char *want,
                           const char *who)
{
    char msg[64];
    if (!hl_plain_sub_next(sub, msg, sizeof msg, wake_ms))
        fail_msg("the %s listener heard nothing within %d ms", who, wake_ms);
    assert_string_equal(msg, want);
}

/* A test that runs a case under redisson_pubsub=plain, then both. */
#define PLAIN_AND_BOTH(test, fn)                                            \
    static void test(void **state)                                          \
    {                                                                       \
        (void)state;                                                        \
        fn("plain");                                                        \
        fn("both");                                                         \
    }

/* ---- a Java release wakes a hilock waiter -------------------------------- */

/* A Redisson holder on a lock hilock waits for releases it, publishing
 * with verb; the hilock client of mode must wake at once. */
static void java_release_wakes_waiter(const char *mode, const char *verb,
                                      int on)
{
    char name[64], channel[128];
    name_on(on, verb, name, sizeof name);
    lock_channel(name, channel, sizeof channel);
    hl_redis_server *m = master_of_name(name);
    hilock_client *c = client(mode);
    hilock_lock *lock = NULL;
    OK(hilock_lock_create(&lock, c, name));

    java_holds(m, name);
    waiter *w = new_waiter();
    waiter_start(w, lock, NULL);
    expect_listening(m, channel, mode);
    java_releases(m, name, channel, verb);
    expect_woken(w, verb);
    waiter_finish(w);

    OK(hilock_lock_destroy(lock));
    OK(hilock_client_destroy(c));
}

/* Redisson with shardedSubscriptionMode OFF, or AUTO where the probe is
 * refused: it PUBLISHes. */
static void test_plain_java_release_wakes_waiter(void **state)
{
    (void)state;
    java_release_wakes_waiter("plain", "publish", 0);
}

/* A fleet of both kinds of Redisson clients: each release is heard. */
static void test_both_hears_either_java_release(void **state)
{
    (void)state;
    java_release_wakes_waiter("both", "publish", 1);
    java_release_wakes_waiter("both", "spublish", 2);
}

/* The default stays as it was: Redisson shards, and so do we. */
static void test_sharded_java_release_wakes_waiter(void **state)
{
    (void)state;
    java_release_wakes_waiter(NULL, "spublish", 1);
    java_release_wakes_waiter("sharded", "spublish", 2);
}

/* ---- a hilock release reaches Java listeners ----------------------------- */

/* A hilock release on a lock nobody of ours waits for: Java listeners of
 * each kind, on the master of the lock's slot and (plain) on another
 * master, hear "1" (our release, which Redisson's waiters take as any)
 * exactly as the mode says. */
static void release_reaches_listeners(const char *mode, bool plain,
                                      bool sharded)
{
    char name[64], channel[128];
    name_on(2, mode ? mode : "default", name, sizeof name);
    lock_channel(name, channel, sizeof channel);
    hl_redis_server *m = master_of_name(name);
    hilock_client *c = client(mode);
    hilock_lock *lock = NULL;
    OK(hilock_lock_create(&lock, c, name));
    OK(hilock_lock_try_acquire(lock, 0, lease_ms));

    hl_plain_sub *near_plain = hl_plain_sub_open(m, channel);
    hl_plain_sub *far_plain = hl_plain_sub_open(far_from(m), channel);
    hl_plain_sub *near_sharded = hl_plain_sub_open_sharded(m, channel);
    OK(hilock_lock_release(lock));
    if (plain) {
        expect_message(near_plain, "1", "plain");
        expect_message(far_plain, "1", "far plain");
    }
    if (sharded)
        expect_message(near_sharded, "1", "sharded");
    /* The release published on m before it answered: a PING there now
     * comes back behind anything else it sent. */
    if (!hl_plain_sub_quiet(near_plain))
        fail_msg("the plain listener heard %s", plain ? "it twice" : "it");
    if (!hl_plain_sub_quiet(near_sharded))
        fail_msg("the sharded listener heard %s",
                 sharded ? "it twice" : "it");
    hl_plain_sub_close(near_plain);
    hl_plain_sub_close(far_plain);
    hl_plain_sub_close(near_sharded);
    OK(hilock_lock_destroy(lock));
    OK(hilock_client_destroy(c));
}

static void test_release_reaches_listeners(void **state)
{
    (void)state;
    release_reaches_listeners("plain", true, false);
    release_reaches_listeners("both", true, true);
    release_reaches_listeners("sharded", false, true);
    release_reaches_listeners(NULL, false, true);
}

/* Every SPUBLISH goes on to the shard's replicas, heard or not: a
 * release that nobody listens for on Redisson's channel stays quiet, in
 * the lean form and in the full one that carries a local waiter's
 * attempt (a listener still hears either: above). */
static void test_unheard_release_stays_quiet(void **state)
{
    (void)state;
    char name[64];
    name_on(1, "quiet", name, sizeof name);
    hl_redis_server *m = master_of_name(name);
    hilock_client *c = client(NULL);
    hilock_lock *lock = NULL;
    OK(hilock_lock_create(&lock, c, name));
    static hl_acquire_rec rider;
    static hl_value_rec rel;

    long long before = hl_fixture_calls(m, "spublish");
    OK(hilock_lock_try_acquire(lock, 0, lease_ms));
    OK(hilock_lock_release(lock));
    assert_int_equal(hl_fixture_calls(m, "spublish") - before, 0);

    OK(hilock_lock_try_acquire(lock, 0, lease_ms));
    hl_acquire_rec_init(&rider, c);
    OK(hilock_lock_acquire_async(lock, 1007, HILOCK_WAIT_FOREVER, lease_ms,
                                 0, hl_record_acquire, &rider, NULL));
    hl_expect_idle(c, lock, 1);
    OK(hilock_lock_release(lock));
    assert_int_equal(hl_expect_acquire(&rider), HILOCK_OK);
    hl_value_rec_init(&rel);
    OK(hilock_lock_release_async(lock, 1007, hl_record_value, &rel));
    assert_int_equal(hl_expect_value(&rel, HILOCK_OK), 0);
    assert_int_equal(hl_fixture_calls(m, "spublish") - before, 0);

    OK(hilock_lock_destroy(lock));
    OK(hilock_client_destroy(c));
}

/* Our client first in our line listens on Redisson's channel itself, and
 * a release of its own may stay quiet there when nobody else listens.
 * Plain listeners elsewhere cannot be counted from the master, so such a
 * release must announce: a Java waiter on another node hears it. */
static bool either_done(void *arg)
{
    waiter *w = arg;
    return atomic_load(&w[0].done) || atomic_load(&w[1].done);
}

static void first_in_line_still_announces(const char *mode)
{
    char name[64], channel[128], line[128], reply[256];
    name_on(0, mode, name, sizeof name);
    lock_channel(name, channel, sizeof channel);
    snprintf(line, sizeof line, "hilock_lock_line:{%s}", name);
    hl_redis_server *m = master_of_name(name);
    hilock_client *c = client(mode);
    hilock_lock *lock = NULL;
    OK(hilock_lock_create(&lock, c, name));

    java_holds(m, name);
    waiter *w = new_waiter();
    assert_ptr_equal(new_waiter(), &w[1]);
    waiter_start(&w[0], lock, NULL);
    waiter_start(&w[1], lock, NULL);
    expect_listening(m, channel, mode);
    /* A Java waiter on another node; the node relays what m publishes in
     * order, the Java release first. */
    hl_plain_sub *java = hl_plain_sub_open(far_from(m), channel);
    java_releases(m, name, channel, "publish");
    expect_message(java, "0", "Java waiter's");
    if (!hl_wait_until(either_done, w, wake_ms))
        fail_msg("the Java release woke neither waiter within %d ms",
                 wake_ms);
    int g = atomic_load(&w[0].done) ? 0 : 1;
    expect_woken(&w[g], "the Java release");
    /* Its other waiter still waits: the client stays in line, alone. */
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "LLEN",
                                         line, (char *)NULL),
                     ':');
    assert_string_equal(reply, ":1\r\n");

    waiter_finish(&w[g]);
    expect_message(java, "1", "Java waiter's");
    expect_woken(&w[1 - g], "our own release");
    waiter_finish(&w[1 - g]);
    hl_plain_sub_close(java);
    OK(hilock_lock_destroy(lock));
    OK(hilock_client_destroy(c));
}

PLAIN_AND_BOTH(test_first_in_line_still_announces,
               first_in_line_still_announces)

/* ---- the fair lock and the latch ---------------------------------------- */

typedef struct queue_head {
    hl_redis_server *node;
    const char *queue;
    char *out;
    size_t cap;
} queue_head;

/* Whether the fair line has a first entry; it goes to out. */
static bool read_queue_head(void *arg)
{
    queue_head *h = arg;
    char reply[512];
    assert_int_equal(hl_redis_server_cmd(h->node, reply, sizeof reply,
                                         "LINDEX", h->queue, "0",
                                         (char *)NULL),
                     '$');
    const char *v = strstr(reply, "\r\n");
    if (strncmp(reply, "$-1", 3) == 0 || v == NULL)
        return false;
    snprintf(h->out, h->cap, "%.*s", (int)strcspn(v + 2, "\r"), v + 2);
    return true;
}

/* A Java fair holder (Redisson's RFairLock, which PUBLISHes here) releases
 * to a hilock waiter at the head of the line, on that waiter's channel;
 * then the hilock holder releases to a Java waiter at the head, on its. */
static void fair_both_ways(const char *mode)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s-%s", "fair", mode);
    char name[64], queue[128], head[160], channel[256];
    name_on(1, prefix, name, sizeof name);
    snprintf(queue, sizeof queue, "redisson_lock_queue:{%s}", name);
    hl_redis_server *m = master_of_name(name);
    hilock_client *c = client(mode);
    hilock_lock *lock = NULL;
    OK(hilock_fair_lock_create(&lock, c, name));
    hl_rpeer java;
    hl_rpeer_init(&java, c, name, "6a0c2b1e-7f3d-4c59-9e21-0d4b8a7c1f35");

    assert_int_equal(hl_rpeer_attempt(&java, 1, lease_ms), -1);
    waiter *w = new_waiter();
    waiter_start(w, lock, NULL);
    /* Our waiter's place names its channel. */
    queue_head h = {m, queue, head, sizeof head};
    if (!hl_wait_until(read_queue_head, &h, hl_widen(10000)))
        fail_msg("the waiter took no place in %s", queue);
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}:%s", name,
             head);
    expect_listening(m, channel, mode);
    assert_int_equal(hl_rpeer_unlock(&java, 1, lease_ms), 1);
    expect_woken(w, "the Java fair release");

    /* A Java waiter at the head, listening on another node. */
    assert_true(hl_rpeer_attempt(&java, 2, lease_ms) >= 0);
    hl_rpeer_channel(&java, 2, channel, sizeof channel);
    hl_plain_sub *sub = hl_plain_sub_open(far_from(m), channel);
    waiter_finish(w);
    expect_message(sub, "0", "Java fair waiter's");
    hl_plain_sub_close(sub);
    assert_int_equal(hl_rpeer_attempt(&java, 2, lease_ms), -1);
    assert_int_equal(hl_rpeer_unlock(&java, 2, lease_ms), 1);
    OK(hilock_lock_destroy(lock));
    OK(hilock_client_destroy(c));
}

PLAIN_AND_BOTH(test_fair_both_ways, fair_both_ways)

/* A Java count down to zero opens a latch a hilock client awaits; a latch
 * has no lease, so without the message the await would wait its whole
 * wait. */
static void latch_opens(const char *mode)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s-%s", "latch", mode);
    char name[64], channel[128], reply[256];
    name_on(2, prefix, name, sizeof name);
    snprintf(channel, sizeof channel,
             "redisson_countdownlatch__channel__{%s}", name);
    hl_redis_server *m = master_of_name(name);
    hilock_client *c = client(mode);
    hilock_latch *latch = NULL;
    OK(hilock_latch_create(&latch, c, name));
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "SET", name,
                                         "1", (char *)NULL),
                     '+');
    waiter *w = new_waiter();
    waiter_start(w, NULL, latch);
    expect_listening(m, channel, mode);
    /* Redisson's countDown: the count goes, then "0" on its channel. */
    assert_int_equal(
        hl_redis_server_cmd(
            m, reply, sizeof reply, "EVAL",
            "local v = redis.call('decr', KEYS[1])\n"
            "if v <= 0 then redis.call('del', KEYS[1]) end\n"
            "if v == 0 then redis.call('publish', KEYS[2], '0') end\n"
            "return v\n",
            "2", name, channel, (char *)NULL),
        ':');
    expect_woken(w, "the Java count down");
    assert_true(w->opened);
    pthread_join(w->thread, NULL);
    OK(hilock_latch_destroy(latch));
    OK(hilock_client_destroy(c));
}

PLAIN_AND_BOTH(test_latch_opens, latch_opens)

/* A Java release of a permit (RSemaphore's, which publishes the new
 * count) wakes a hilock waiter first in our line; then a hilock release
 * reaches a Java waiter on another node. */
static void semaphore_both_ways(const char *mode)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s-%s", "sem", mode);
    char name[64], channel[128], reply[256];
    name_on(0, prefix, name, sizeof name);
    snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
    hl_redis_server *m = master_of_name(name);
    hilock_client *c = client(mode);
    hilock_semaphore *sem = NULL;
    OK(hilock_semaphore_create(&sem, c, name));
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "SET", name,
                                         "0", (char *)NULL),
                     '+');
    waiter *w = new_waiter();
    memset(w, 0, sizeof *w);
    w->sem = sem;
    assert_int_equal(pthread_create(&w->thread, NULL, waiter_main, w), 0);
    expect_listening(m, channel, mode);
    /* A Java waiter on another node, which hears what m publishes in
     * order: the Java release first. */
    hl_plain_sub *java = hl_plain_sub_open(far_from(m), channel);
    assert_int_equal(
        hl_redis_server_cmd(m, reply, sizeof reply, "EVAL",
                            "local v = redis.call('incrby', KEYS[1], 1)\n"
                            "redis.call('publish', KEYS[2], v)\n"
                            "return v\n",
                            "2", name, channel, (char *)NULL),
        ':');
    expect_woken(w, "the Java permit release");
    pthread_join(w->thread, NULL);
    expect_message(java, "1", "Java semaphore waiter's");

    OK(hilock_semaphore_release(sem, 1));
    expect_message(java, "1", "Java semaphore waiter's");
    hl_plain_sub_close(java);
    OK(hilock_semaphore_destroy(sem));
    OK(hilock_client_destroy(c));
}

PLAIN_AND_BOTH(test_semaphore_both_ways, semaphore_both_ways)

/* A Java writer's release (RReadWriteLock's, which publishes "1" when the
 * lock is free) wakes a hilock reader. */
static void reader_wakes(const char *mode)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s-%s", "rw", mode);
    char name[64], channel[128], reply[256], ms[24];
    name_on(1, prefix, name, sizeof name);
    snprintf(channel, sizeof channel, "redisson_rwlock:{%s}", name);
    snprintf(ms, sizeof ms, "%d", lease_ms);
    hl_redis_server *m = master_of_name(name);
    hilock_client *c = client(mode);
    hilock_lock *reader = NULL;
    OK(hilock_read_lock_create(&reader, c, name));
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "HSET",
                                         name, "mode", "write",
                                         JAVA_FIELD ":write", "1",
                                         (char *)NULL),
                     ':');
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "PEXPIRE",
                                         name, ms, (char *)NULL),
                     ':');
    waiter *w = new_waiter();
    waiter_start(w, reader, NULL);
    expect_listening(m, channel, mode);
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "EVAL",
                                         "redis.call('del', KEYS[1])\n"
                                         "redis.call('publish', KEYS[2], "
                                         "'1')\n"
                                         "return 1\n",
                                         "2", name, channel, (char *)NULL),
                     ':');
    expect_woken(w, "the Java write release");
    waiter_finish(w);
    OK(hilock_lock_destroy(reader));
    OK(hilock_client_destroy(c));
}

PLAIN_AND_BOTH(test_reader_wakes, reader_wakes)

/* Our write release that promises the lock to our waiting writer, with
 * our reader waiting beside it, counts the reader as ours and may stay
 * quiet on Redisson's channel when nobody else listens there; plain
 * listeners elsewhere cannot be counted from the master, so it must
 * announce: a Java waiter on another node hears it. */
static void promised_write_release_reaches_java(const char *mode)
{
    char name[64], channel[128], line[128], first[128], prefix[32];
    snprintf(prefix, sizeof prefix, "rw-promise-%s", mode);
    name_on(1, prefix, name, sizeof name);
    snprintf(channel, sizeof channel, "redisson_rwlock:{%s}", name);
    snprintf(line, sizeof line, "hilock_rwlock_line:{%s}", name);
    hl_redis_server *m = master_of_name(name);
    hilock_client *h = client(mode), *c = client(mode);
    hilock_lock *holder = NULL, *writer = NULL, *reader = NULL;
    OK(hilock_write_lock_create(&holder, h, name));
    OK(hilock_write_lock_create(&writer, c, name));
    OK(hilock_read_lock_create(&reader, c, name));
    OK(hilock_lock_try_acquire(holder, 0, lease_ms));

    waiter *w = new_waiter(), *r = new_waiter();
    waiter_start(w, writer, NULL);
    queue_head head = {m, line, first, sizeof first};
    if (!hl_wait_until(read_queue_head, &head, hl_widen(10000)))
        fail_msg("the writer did not line up");
    assert_string_equal(first, hilock_client_id(c));
    waiter_start(r, reader, NULL);
    expect_listening(m, channel, mode);
    hl_plain_sub *java = hl_plain_sub_open(far_from(m), channel);

    OK(hilock_lock_release(holder));
    expect_message(java, "1", "Java waiter's");
    expect_woken(w, "our write release");
    assert_false(atomic_load(&r->done));
    waiter_finish(w);
    expect_woken(r, "our writer's release");
    waiter_finish(r);
    hl_plain_sub_close(java);
    OK(hilock_lock_destroy(reader));
    OK(hilock_lock_destroy(writer));
    OK(hilock_lock_destroy(holder));
    OK(hilock_client_destroy(c));
    OK(hilock_client_destroy(h));
}

PLAIN_AND_BOTH(test_promised_write_release_reaches_java,
               promised_write_release_reaches_java)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_java_release_wakes_waiter),
        cmocka_unit_test(test_both_hears_either_java_release),
        cmocka_unit_test(test_sharded_java_release_wakes_waiter),
        cmocka_unit_test(test_release_reaches_listeners),
        cmocka_unit_test(test_unheard_release_stays_quiet),
        cmocka_unit_test(test_first_in_line_still_announces),
        cmocka_unit_test(test_fair_both_ways),
        cmocka_unit_test(test_latch_opens),
        cmocka_unit_test(test_semaphore_both_ways),
        cmocka_unit_test(test_reader_wakes),
        cmocka_unit_test(test_promised_write_release_reaches_java),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
