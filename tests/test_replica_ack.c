/* Replica acknowledgement on a master with two replicas: lock writes are
 * followed by WAIT under a policy and not under none, a grant the
 * replicas do not acknowledge is given back and fails with HILOCK_ENOACK,
 * and renewals the replicas do not acknowledge end in a lease reported
 * lost by its local deadline. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "core/runtime/ack.h"

/* ctest-timeout: 180 */

static hl_redis_replicated *group;
static hl_redis_server *master;

static bool both_online(void *arg);

static int setup(void **state)
{
    (void)state;
    group = hl_fixture_replicated();
    if (group == NULL)
        return -1;
    master = hl_redis_replicated_master(group);
    if (master == NULL)
        return -1;
    /* Both replicas online before any count is read. */
    return hl_wait_until(both_online, NULL, hl_widen(30000)) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_replicated_stop(group);
    return 0;
}

/* How many WAIT commands the master has run. */
static long long waits_run(void) { return hl_fixture_calls(master, "wait"); }

/* The acknowledgement-short events the clients told, and the last one's
 * words. */
static atomic_int acks_short;
static char ack_short_why[256];

static void on_event(hilock_client *client, const hilock_event *e,
                     void *data)
{
    (void)client;
    (void)data;
    if (e->type != HILOCK_EVENT_ACK_SHORT)
        return;
    snprintf(ack_short_why, sizeof ack_short_why, "%s",
             e->detail ? e->detail : "");
    atomic_fetch_add(&acks_short, 1);
}

static hilock_client *connect_with(const char *query)
{
    char url[256];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/?%s",
             hl_redis_server_port(master), query);
    hilock_options *o;
    hilock_client *c;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    assert_int_equal(hilock_options_set_event_callback(o, on_event, NULL),
                     HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    return c;
}

static hilock_lock *make_lock(hilock_client *c, const char *name)
{
    hilock_lock *l;
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    return l;
}

static bool both_online(void *arg)
{
    (void)arg;
    static char info[4096];
    char reply[64];
    return hl_redis_server_cmd(master, info, sizeof info, "INFO",
                               "replication", (char *)NULL) == '$' &&
           hl_ack_parse_info(info, strlen(info)) == 2 &&
           hl_redis_server_cmd(master, reply, sizeof reply, "WAIT", "2",
                               "1000", (char *)NULL) == ':' &&
           strcmp(reply, ":2\r\n") == 0;
}

/* A replica that comes back may need a full sync, which a diskless
 * master starts only after its sync delay (5 s by default). */
static void wait_both_online(void)
{
    assert_true(hl_wait_until(both_online, NULL, hl_widen(30000)));
}

static void stall_replicas(void)
{
    for (size_t i = 1; i < hl_redis_replicated_nodes(group); i++)
        hl_fixture_pause(hl_redis_replicated_node(group, i));
}

static void resume_replicas(void)
{
    for (size_t i = 1; i < hl_redis_replicated_nodes(group); i++)
        hl_fixture_resume(hl_redis_replicated_node(group, i));
    /* Both replicas acknowledge again before the next case. */
    wait_both_online();
}

static bool key_gone(void *name)
{
    char reply[64];
    return hl_redis_server_cmd(master, reply, sizeof reply, "EXISTS", name,
                               (char *)NULL) == ':' &&
           strcmp(reply, ":0\r\n") == 0;
}

static bool renewed(void *client)
{
    hilock_client_stats s;
    return hl_client_counters(client, &s) == HILOCK_OK &&
           s.leases_renewed >= 1;
}

/* Healthy replicas under "all": the acquire, a watchdog renewal and the
 * release each go with a WAIT, and each succeeds.  Healthy on a busy
 * machine too: replicas starved of the CPU for over a second would fail
 * the default 1 s acknowledgement (rightly, as any policy would), so the
 * WAIT here may take 2.5 s and the watchdog outlasts it. */
static void test_all_acknowledged(void **state)
{
    (void)state;
    hilock_client *c =
        connect_with("replicas=all&watchdog_timeout=3000&ack_timeout=2500");
    hilock_lock *l = make_lock(c, "ack-all");
    long long before = waits_run();
    assert_int_equal(hilock_lock_try_acquire(l, 2000, HILOCK_LEASE_WATCHDOG),
                     HILOCK_OK);
    long long after_acquire = waits_run();
    assert_true(after_acquire >= before + 1);
    /* A renewal every second; it is confirmed only once acknowledged. */
    assert_true(hl_wait_until(renewed, c, hl_widen(15000)));
    long long after_renew = waits_run();
    assert_true(after_renew >= after_acquire + 1);
    bool lost = true;
    assert_int_equal(hilock_lock_lease_lost(l, &lost), HILOCK_OK);
    assert_false(lost);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    assert_true(waits_run() >= after_renew + 1);
    assert_true(key_gone("ack-all"));
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

#define ACL_PASSWORD "Wait-Denied-Pw-7"

static int client_as(hilock_client **out, const char *user,
                     const char *query)
{
    char url[256];
    snprintf(url, sizeof url, "redis://%s:" ACL_PASSWORD "@127.0.0.1:%d/?%s",
             user, hl_redis_server_port(master), query);
    hilock_options *o;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    int rc = hilock_client_create(out, o);
    hilock_options_free(o);
    return rc;
}

static void acl_user(const char *user, const char *wait_rule)
{
    char reply[256];
    if (hl_redis_server_cmd(master, reply, sizeof reply, "ACL", "SETUSER",
                            user, "reset", "on", ">" ACL_PASSWORD, "~*",
                            "&*", "+@all", wait_rule, (char *)NULL) != '+')
        fail_msg("ACL SETUSER %s: %s", user, reply);
}

static void assert_refusal_named(const char *detail)
{
    if (strstr(detail, "refuses WAIT") == NULL ||
        strstr(detail, "replicas=none") == NULL ||
        strstr(detail, ACL_PASSWORD) != NULL)
        fail_msg("unexpected detail: %s", detail);
}

/* A user whose ACL denies WAIT, on a master with replicas: every policy
 * that needs WAIT fails the client's creation at once, naming the
 * refusal and replicas=none (and never the password); replicas=none
 * works.  A denial that comes after the client connected fails the
 * next write with the same words, not with an unknown acknowledgement
 * after the wait. */
static void test_wait_denied_by_acl(void **state)
{
    (void)state;
    acl_user("nowait", "-wait");
    static const char *const policies[] = {"replicas=one",
                                           "replicas=majority",
                                           "replicas=all", ""};
    for (size_t i = 0; i < sizeof policies / sizeof *policies; i++) {
        hilock_client *c = NULL;
        assert_int_equal(client_as(&c, "nowait", policies[i]),
                         HILOCK_EUNSUPPORTED);
        assert_null(c);
        assert_refusal_named(hilock_last_error());
    }
    hilock_client *c = NULL;
    assert_int_equal(client_as(&c, "nowait", "replicas=none"), HILOCK_OK);
    hilock_lock *l = make_lock(c, "acl-nowait");
    assert_int_equal(hilock_lock_try_acquire(l, 0, 5000), HILOCK_OK);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);

    acl_user("latewait", "+wait");
    assert_int_equal(client_as(&c, "latewait",
                               "replicas=majority&ack_timeout=5000"),
                     HILOCK_OK);
    l = make_lock(c, "acl-latewait");
    assert_int_equal(hilock_lock_try_acquire(l, 0, 5000), HILOCK_OK);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    acl_user("latewait", "-wait");
    assert_int_equal(hilock_lock_try_acquire(l, 0, 5000), HILOCK_ENOACK);
    assert_refusal_named(hilock_last_error());
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
    char reply[64];
    assert_int_equal(hl_redis_server_cmd(master, reply, sizeof reply, "ACL",
                                         "DELUSER", "nowait", "latewait",
                                         (char *)NULL),
                     ':');
}

/* replicas=none sends no WAIT at all. */
static void test_none_sends_no_wait(void **state)
{
    (void)state;
    hilock_client *c = connect_with("replicas=none");
    hilock_lock *l = make_lock(c, "ack-none");
    long long before = waits_run();
    for (int i = 0; i < 5; i++) {
        assert_int_equal(hilock_lock_try_acquire(l, 1000, 10000), HILOCK_OK);
        assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    }
    assert_int_equal(waits_run(), before);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

/* With the replicas stopped, an acquire under the policy is never granted
 * unprotected: it fails with HILOCK_ENOACK once its wait runs out, and
 * the grants the master made meanwhile were given back. */
static void acquire_fails_unacknowledged(const char *policy)
{
    char query[128];
    snprintf(query, sizeof query, "replicas=%s&ack_timeout=150", policy);
    hilock_client *c = connect_with(query);
    char name[64];
    snprintf(name, sizeof name, "ack-stalled-%s", policy);
    hilock_lock *l = make_lock(c, name);
    /* The replica count is read while the replicas still answer. */
    assert_int_equal(hilock_lock_try_acquire(l, 2000, 10000), HILOCK_OK);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    stall_replicas();
    int shorts = atomic_load(&acks_short);
    int64_t t0 = hl_now_ms();
    int rc = hilock_lock_try_acquire(l, 600, 10000);
    int64_t took = hl_now_ms() - t0;
    assert_int_equal(rc, HILOCK_ENOACK);
    assert_non_null(strstr(hilock_last_error(), "acknowledged"));
    /* Each short acknowledgement was told as an event too. */
    assert_true(atomic_load(&acks_short) > shorts);
    assert_non_null(strstr(ack_short_why, "acknowledged"));
    /* Within its wait, plus one WAIT of 150 ms and a round trip. */
    assert_true(took >= 600);
    assert_true(took <= 600 + hl_widen(1000));
    /* Given back on the master, which still answers. */
    assert_true(hl_wait_until(key_gone, name, hl_widen(3000)));
    /* A single attempt fails the same way. */
    assert_int_equal(hilock_lock_try_acquire(l, 0, 10000), HILOCK_ENOACK);
    assert_true(hl_wait_until(key_gone, name, hl_widen(3000)));
    /* hilock exits as for a service that cannot give what is asked, not
     * with an internal error. */
    char url[256], out[4096];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/?%s",
             hl_redis_server_port(master), query);
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", url, "run", "-w",
                          "300ms", name, "--", "true", NULL};
    int code = hl_run(argv, out, sizeof out, hl_widen(20000));
    if (code != 69)
        hl_fail_run("hilock run, unacknowledged,", code, out);
    resume_replicas();
    /* And once they acknowledge again, the lock is granted. */
    assert_int_equal(hilock_lock_try_acquire(l, 2000, 10000), HILOCK_OK);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

static void test_all_stalled(void **state)
{
    (void)state;
    acquire_fails_unacknowledged("all");
}

static void test_majority_stalled(void **state)
{
    (void)state;
    acquire_fails_unacknowledged("majority");
}

static bool count_is(const char *name, const char *want)
{
    char reply[64], expect[64];
    snprintf(expect, sizeof expect, "$%zu\r\n%s\r\n", strlen(want), want);
    return hl_redis_server_cmd(master, reply, sizeof reply, "GET", name,
                               (char *)NULL) == '$' &&
           strcmp(reply, expect) == 0;
}

static bool two_free(void *name) { return count_is(name, "2"); }

/* A plain semaphore's grant that the replicas do not acknowledge goes
 * back, found by the record of the attempt that took it: the count on the
 * master is where it was, however many attempts the wait made. */
static void test_semaphore_grant_unacknowledged_goes_back(void **state)
{
    (void)state;
    const char *name = "ack-stalled-sem";
    hilock_client *c = connect_with("replicas=majority&ack_timeout=150");
    hilock_semaphore *s = NULL;
    assert_int_equal(hilock_semaphore_create(&s, c, name),
                     HILOCK_OK);
    assert_int_equal(hilock_semaphore_set(s, 2), HILOCK_OK);
    assert_int_equal(hilock_semaphore_try_acquire(s, 1, 2000), HILOCK_OK);
    assert_int_equal(hilock_semaphore_release(s, 1), HILOCK_OK);
    stall_replicas();
    assert_int_equal(hilock_semaphore_try_acquire(s, 1, 600),
                     HILOCK_ENOACK);
    assert_true(hl_wait_until(two_free, (void *)name, hl_widen(3000)));
    assert_int_equal(hilock_semaphore_try_acquire(s, 2, 0), HILOCK_ENOACK);
    assert_true(hl_wait_until(two_free, (void *)name, hl_widen(3000)));
    resume_replicas();
    assert_int_equal(hilock_semaphore_try_acquire(s, 2, 2000), HILOCK_OK);
    assert_true(count_is(name, "0"));
    assert_int_equal(hilock_semaphore_release(s, 2), HILOCK_OK);
    assert_int_equal(hilock_semaphore_destroy(s), HILOCK_OK);
    hilock_client_destroy(c);
}

static atomic_int lost_calls;
static _Atomic int64_t lost_at;

static void on_lost(hilock_lock *lock, uint64_t owner, void *data)
{
    (void)lock;
    (void)owner;
    (void)data;
    atomic_store(&lost_at, hl_now_ms());
    atomic_fetch_add(&lost_calls, 1);
}

/* A holder whose renewals reach the master but not the replicas is told
 * its lease is lost, and no later than the lease deadline its last
 * acknowledged renewal gave it. */
static void test_unacknowledged_renewals_lose_the_lease(void **state)
{
    (void)state;
    const int watchdog = 1500;
    hilock_client *c =
        connect_with("replicas=all&ack_timeout=100&watchdog_timeout=1500");
    hilock_lock *l = make_lock(c, "ack-renew");
    atomic_store(&lost_calls, 0);
    assert_int_equal(hilock_lock_set_lost_callback(l, on_lost, NULL),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, 2000, HILOCK_LEASE_WATCHDOG),
                     HILOCK_OK);
    assert_true(hl_wait_until(renewed, c, hl_widen(5000)));
    /* Every acknowledged renewal was sent before this. */
    int64_t stalled_at = hl_now_ms();
    stall_replicas();
    hl_expect_count(&lost_calls, 1, hl_widen(watchdog + 3000));
    /* The master kept the key alive all along: only the missing
     * acknowledgements made the client give up on it, at the deadline. */
    int64_t late = atomic_load(&lost_at) - stalled_at;
    assert_true(late <= watchdog + hl_widen(200));
    char reply[64];
    assert_int_equal(hl_redis_server_cmd(master, reply, sizeof reply,
                                         "EXISTS", "ack-renew", (char *)NULL),
                     ':');
    assert_string_equal(reply, ":1\r\n");
    bool lost = false;
    assert_int_equal(hilock_lock_lease_lost(l, &lost), HILOCK_OK);
    assert_true(lost);
    resume_replicas();
    assert_int_equal(hilock_lock_release(l), HILOCK_ELEASELOST);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

/* n for k replicas under each policy; none, and k = 0, ask for nothing. */
static void test_needed(void **state)
{
    (void)state;
    static const int want[4][5] = {
        /* k:      0  1  2  3  4 */
        /* none */ {0, 0, 0, 0, 0},
        /* one  */ {0, 1, 1, 1, 1},
        /* maj. */ {0, 1, 2, 2, 3},
        /* all  */ {0, 1, 2, 3, 4},
    };
    for (int p = 0; p < 4; p++)
        for (int k = 0; k < 5; k++)
            assert_int_equal(hl_ack_needed(p, k), want[p][k]);
}

/* Only online replicas count: one still in its first sync does not. */
static void test_parse_info(void **state)
{
    (void)state;
    const char *info =
        "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n"
        "slave0:ip=127.0.0.1,port=1,state=online,offset=9,lag=0\r\n"
        "slave1:ip=127.0.0.1,port=2,state=wait_bgsave,offset=0,lag=0\r\n"
        "slave2:ip=127.0.0.1,port=3,state=online,offset=9,lag=1\r\n"
        "master_repl_offset:9\r\n";
    assert_int_equal(hl_ack_parse_info(info, strlen(info)), 2);
    const char *none = "# Replication\r\nrole:master\r\nconnected_slaves:0";
    assert_int_equal(hl_ack_parse_info(none, strlen(none)), 0);
    /* The text is not NUL-terminated where its length ends. */
    assert_int_equal(hl_ack_parse_info(info, 60), 0);
}

/* Whether the master counts *(int *)n connected replicas. */
static bool replicas_connected(void *n)
{
    char info[4096], want[32];
    snprintf(want, sizeof want, "connected_slaves:%d\r", *(int *)n);
    return hl_redis_server_cmd(master, info, sizeof info, "INFO",
                               "replication", (char *)NULL) == '$' &&
           strstr(info, want) != NULL;
}

static void replica_of(hl_redis_server *node, bool of_master)
{
    char reply[64], port[16];
    snprintf(port, sizeof port, "%d", hl_redis_server_port(master));
    assert_int_equal(hl_redis_server_cmd(node, reply, sizeof reply,
                                         "REPLICAOF",
                                         of_master ? "127.0.0.1" : "NO",
                                         of_master ? port : "ONE",
                                         (char *)NULL),
                     '+');
}

/* A replica that leaves fails no grant, even while the count the client
 * read still names it: a short WAIT is judged by the master's count read
 * right after it.  A single attempt, so nothing could retry. */
static void test_replica_leaving_fails_nothing(void **state)
{
    (void)state;
    hilock_client *c = connect_with("replicas=all&ack_timeout=200");
    hilock_lock *l = make_lock(c, "ack-leaving");
    assert_int_equal(hilock_lock_try_acquire(l, 2000, 10000), HILOCK_OK);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    hl_redis_server *gone = hl_redis_replicated_node(group, 2);
    replica_of(gone, false);
    int one = 1;
    assert_true(hl_wait_until(replicas_connected, &one, hl_widen(5000)));
    assert_int_equal(hilock_lock_try_acquire(l, 0, 10000), HILOCK_OK);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    /* Back as a replica, for the cases after this one. */
    replica_of(gone, true);
    wait_both_online();
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}


static bool one_online(void *arg)
{
    (void)arg;
    char info[4096];
    return hl_redis_server_cmd(master, info, sizeof info, "INFO",
                               "replication", (char *)NULL) == '$' &&
           hl_ack_parse_info(info, strlen(info)) == 1;
}

/* A count of 0 read a while ago, with a fresh one being read, is no
 * reason to skip the WAIT: a replica may have come online since, and a
 * grant it never saw is lost in a failover.  The master is left alone,
 * a lock taken and released there (the count read is 0), a replica comes
 * online, the count grows old, and the replica stops: the next grant
 * must wait for it, and fail. */
static void test_old_zero_count_still_waits(void **state)
{
    (void)state;
    hl_redis_server *a = hl_redis_replicated_node(group, 1);
    hl_redis_server *b = hl_redis_replicated_node(group, 2);
    replica_of(a, false);
    replica_of(b, false);
    int none = 0;
    assert_true(hl_wait_until(replicas_connected, &none, hl_widen(5000)));
    hilock_client *c = connect_with("replicas=majority&ack_timeout=200");
    hilock_lock *l = make_lock(c, "ack-old-zero");
    assert_int_equal(hilock_lock_try_acquire(l, 0, 10000), HILOCK_OK);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    int64_t counted_at = hl_now_ms();
    long long waits = waits_run();

    replica_of(a, true);
    assert_true(hl_wait_until(one_online, NULL, hl_widen(30000)));
    /* The count the client read is older than HL_ACK_RECOUNT_MS: the
     * next write reads it again, and its WAIT must not go by the old 0. */
    int64_t old = hl_now_ms() - counted_at;
    if (old <= HL_ACK_RECOUNT_MS)
        hl_sleep_ms((int)(HL_ACK_RECOUNT_MS + 100 - old));
    hl_fixture_pause(a);
    int rc = hilock_lock_try_acquire(l, 1500, 10000);
    hl_fixture_resume(a);
    assert_int_equal(rc, HILOCK_ENOACK);
    assert_true(waits_run() > waits);
    /* The grant goes back: its give-back was sent before the acquire
     * returned, on the client's connection, and may still be on its way.
     * Half the grant's lease, so that only the give-back takes the key. */
    assert_true(hl_wait_until(key_gone, (void *)"ack-old-zero", 5000));

    replica_of(b, true);
    wait_both_online();
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

/* The master ran a WAIT since *w was counted; *w counts again. */
static void expect_waited(long long *w)
{
    long long now = waits_run();
    assert_true(now > *w);
    *w = now;
}

/* Every write of a semaphore or a latch waits for the replicas, as a
 * lock's does: each sends a WAIT; with the replicas stalled a release
 * stands and says so no louder than a lock's, and the other writes
 * return HILOCK_ENOACK, their change made on the master all the same. */
static void test_semaphore_and_latch_writes_wait(void **state)
{
    (void)state;
    hilock_client *c = connect_with("replicas=all&ack_timeout=1000");
    hilock_semaphore *sem;
    hilock_latch *latch;
    assert_int_equal(hilock_semaphore_create(&sem, c, "ack-sem"),
                     HILOCK_OK);
    assert_int_equal(hilock_latch_create(&latch, c, "ack-latch"),
                     HILOCK_OK);
    long long w = waits_run();
    assert_int_equal(hilock_semaphore_try_set(sem, 3, NULL), HILOCK_OK);
    expect_waited(&w);
    assert_int_equal(hilock_semaphore_set(sem, 3), HILOCK_OK);
    expect_waited(&w);
    assert_int_equal(hilock_semaphore_add(sem, 2, NULL), HILOCK_OK);
    expect_waited(&w);
    assert_int_equal(hilock_semaphore_release(sem, 1), HILOCK_OK);
    expect_waited(&w);
    int64_t drained = 0;
    assert_int_equal(hilock_semaphore_drain(sem, &drained), HILOCK_OK);
    assert_int_equal(drained, 6);
    expect_waited(&w);
    assert_int_equal(hilock_latch_try_set_count(latch, 3, NULL), HILOCK_OK);
    expect_waited(&w);
    assert_int_equal(hilock_latch_count_down(latch, NULL), HILOCK_OK);
    expect_waited(&w);

    stall_replicas();
    int64_t count = 0;
    int add_rc = hilock_semaphore_add(sem, 1, &count);
    int release_rc = hilock_semaphore_release(sem, 1);
    int down_rc = hilock_latch_count_down(latch, NULL);
    resume_replicas();
    assert_int_equal(add_rc, HILOCK_ENOACK);
    assert_int_equal(release_rc, HILOCK_OK);
    assert_int_equal(down_rc, HILOCK_ENOACK);
    /* Made on the master all the same. */
    assert_true(count_is("ack-sem", "2"));
    assert_true(count_is("ack-latch", "1"));

    hilock_latch_destroy(latch);
    hilock_semaphore_destroy(sem);
    hilock_client_destroy(c);
}

/* Writes queued on one connection before it writes share one WAIT: Redis
 * answers a WAIT once the replicas have the connection's last write, so
 * it covers every write before it.  64 acquires started in one loop
 * iteration on one connection go with one WAIT, not 64; so do their
 * releases. */
#define SHARED 64

static hilock_lock *shared_locks[SHARED];
static atomic_int shared_ok, shared_done;

static void shared_acquired(hilock_lock *l, int status,
                            const hilock_acquired *acquired, void *data)
{
    (void)l, (void)acquired, (void)data;
    if (status == HILOCK_OK)
        atomic_fetch_add(&shared_ok, 1);
    atomic_fetch_add(&shared_done, 1);
}

static void shared_released(hilock_lock *l, int status, int64_t value,
                            void *data)
{
    (void)l, (void)data;
    if (status == HILOCK_OK && value == 0)
        atomic_fetch_add(&shared_ok, 1);
    atomic_fetch_add(&shared_done, 1);
}

/* On the loop thread, so that all of them are queued in one iteration. */
static void start_all(hilock_client *c, int status, hilock_reply *reply,
                      void *release)
{
    (void)c, (void)status;
    hilock_reply_free(reply);
    for (int i = 0; i < SHARED; i++) {
        int rc = release ? hilock_lock_release_async(shared_locks[i], 7,
                                                     shared_released, NULL)
                         : hilock_lock_acquire_async(shared_locks[i], 7, 0,
                                                     10000, 0,
                                                     shared_acquired, NULL,
                                                     NULL);
        if (rc != HILOCK_OK)
            atomic_fetch_add(&shared_done, 1);
    }
}

static bool all_done(void *arg)
{
    (void)arg;
    return atomic_load(&shared_done) == SHARED;
}

static long long scripts_run(void)
{
    return hl_fixture_calls(master, "evalsha");
}

static void run_shared(hilock_client *c, bool release)
{
    atomic_store(&shared_ok, 0);
    atomic_store(&shared_done, 0);
    long long waits = waits_run(), scripts = scripts_run();
    assert_int_equal(hilock_client_command_async(c, 1,
                                                 (const char *[]){"PING"},
                                                 NULL, start_all,
                                                 release ? c : NULL),
                     HILOCK_OK);
    assert_true(hl_wait_until(all_done, NULL, hl_widen(10000)));
    assert_int_equal(atomic_load(&shared_ok), SHARED);
    assert_true(scripts_run() >= scripts + SHARED);
    long long shared = waits_run() - waits;
    print_message("%d %s, %lld WAIT\n", SHARED,
                  release ? "releases" : "acquires", shared);
    assert_true(shared >= 1);
    assert_true(shared <= 2);
}

static void test_writes_share_a_wait(void **state)
{
    (void)state;
    hilock_client *c = connect_with("replicas=all&connections=1");
    for (int i = 0; i < SHARED; i++) {
        char name[32];
        snprintf(name, sizeof name, "ack-shared-%d", i);
        shared_locks[i] = make_lock(c, name);
    }
    /* The replica count is read first. */
    assert_int_equal(hilock_lock_try_acquire(shared_locks[0], 2000, 10000),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_release(shared_locks[0]), HILOCK_OK);
    run_shared(c, false);
    run_shared(c, true);
    assert_true(key_gone("ack-shared-0"));
    assert_true(key_gone("ack-shared-63"));
    for (int i = 0; i < SHARED; i++)
        hilock_lock_destroy(shared_locks[i]);
    hilock_client_destroy(c);
}

/* ---- no direct hand-off under a policy ------------------------------------ */

static atomic_int handoff_calls;
static int handoff_status;

static void on_handoff_acquire(hilock_lock *lock, int status,
                               const hilock_acquired *acquired, void *data)
{
    (void)lock;
    (void)acquired;
    (void)data;
    handoff_status = status;
    atomic_fetch_add(&handoff_calls, 1);
}

static bool one_in_line(void *line)
{
    char reply[64];
    return hl_redis_server_cmd(master, reply, sizeof reply, "LLEN", line,
                               (char *)NULL) == ':' &&
           strcmp(reply, ":1\r\n") == 0;
}

/* A release can hand the lock straight to a waiting client only with
 * the policy none: otherwise no WAIT of the waiter's could cover the
 * grant the releasing client wrote, so the waiter records no wish and
 * takes the lock with an acquire of its own, which its WAIT covers.
 * Returns the waiter's acquires that a release handed the lock to. */
static uint64_t handoffs_under(const char *query, const char *name)
{
    char line[64], want[64], reply[64];
    snprintf(line, sizeof line, "hilock_lock_line:{%s}", name);
    snprintf(want, sizeof want, "hilock_lock_want:{%s}", name);
    hilock_client *h = connect_with(query);
    hilock_client *w = connect_with(query);
    hilock_lock *lh = make_lock(h, name);
    hilock_lock *lw = make_lock(w, name);
    /* The replica count is read first. */
    assert_int_equal(hilock_lock_try_acquire(lw, 2000, 10000), HILOCK_OK);
    assert_int_equal(hilock_lock_release(lw), HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(lh, 2000, 30000), HILOCK_OK);
    atomic_store(&handoff_calls, 0);
    assert_int_equal(hilock_lock_acquire_async(lw, 7, HILOCK_WAIT_FOREVER,
                                               HILOCK_LEASE_WATCHDOG, 0,
                                               on_handoff_acquire, NULL,
                                               NULL),
                     HILOCK_OK);
    assert_true(hl_wait_until(one_in_line, line, hl_widen(5000)));
    /* Refused, listening, and done asking: any wish is recorded by now
     * (a waiter's first attempt, on a client that never waited, records
     * none; the one its subscription's confirmation makes does). */
    hl_expect_idle(w, lw, 1);
    bool wished = hl_redis_server_cmd(master, reply, sizeof reply, "EXISTS",
                                      want, (char *)NULL) == ':' &&
                  strcmp(reply, ":1\r\n") == 0;
    assert_int_equal(hilock_lock_release(lh), HILOCK_OK);
    assert_true(hl_wait_count(&handoff_calls, 1, hl_widen(5000)));
    assert_int_equal(handoff_status, HILOCK_OK);
    hilock_stats s = {.size = sizeof s};
    assert_int_equal(hilock_client_stats_read(w, &s), HILOCK_OK);
    assert_int_equal(wished, s.acquires_handed == 1);
    hilock_lock_destroy(lw);
    hilock_lock_destroy(lh);
    hilock_client_destroy(w);
    hilock_client_destroy(h);
    return s.acquires_handed;
}

static void test_direct_handoff_only_without_a_policy(void **state)
{
    (void)state;
    assert_int_equal(handoffs_under("replicas=majority", "ack-handoff"), 0);
    assert_int_equal(handoffs_under("replicas=none", "ack-handoff-none"), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_needed),
        cmocka_unit_test(test_parse_info),
        cmocka_unit_test(test_all_acknowledged),
        cmocka_unit_test(test_none_sends_no_wait),
        cmocka_unit_test(test_wait_denied_by_acl),
        cmocka_unit_test(test_all_stalled),
        cmocka_unit_test(test_majority_stalled),
        cmocka_unit_test(test_semaphore_grant_unacknowledged_goes_back),
        cmocka_unit_test(test_unacknowledged_renewals_lose_the_lease),
        cmocka_unit_test(test_replica_leaving_fails_nothing),
        cmocka_unit_test(test_writes_share_a_wait),
        cmocka_unit_test(test_old_zero_count_still_waits),
        cmocka_unit_test(test_semaphore_and_latch_writes_wait),
        cmocka_unit_test(test_direct_handoff_only_without_a_policy),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
