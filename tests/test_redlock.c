/* Multi-locks and RedLock against real, independent redis-server masters:
 * a quorum with masters killed, no quorum, a stopped master, restart
 * quarantine, the validity rule on an injected clock, mutual exclusion
 * across threads and processes while masters die and come back, and the
 * all-or-nothing multi-lock over plain lock handles. */
/* ctest-timeout: 300 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
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
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "core/base/monotime.h"
#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "hilock/multi.h"
#include "hilock/options.h"
#include "multi/multi_internal.h"
#include "support/children.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/loop_call.h"
#include "support/raw_reads.h"

#define NMASTERS 5
#define ALL_MASTERS ((1u << NMASTERS) - 1)

/* ---- helpers ----------------------------------------------------------- */

static hl_redis_server *masters[NMASTERS];
static int nmasters;
/* A forked holder process still alive when its test fails is killed. */
static hl_children kids;

/* The injected clock: the real monotonic clock plus an offset that a test
 * moves forward to make time jump for the library alone. */
static _Atomic int64_t clock_offset_us;

static hl_monotime offset_clock(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (hl_monotime)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 +
           atomic_load(&clock_offset_us);
}

static int start_masters(int n)
{
    nmasters = n;
    hl_fixture_masters(masters, n);
    return 0;
}

static int setup_five(void **state)
{
    (void)state;
    return start_masters(NMASTERS);
}

static int setup_two(void **state)
{
    (void)state;
    return start_masters(2);
}

static void stop_parent_holders(void);
static void destroy_owned(void);
static void tool_kill(void);

static int teardown_masters(void **state)
{
    (void)state;
    hl_children_kill_all(&kids);
    tool_kill();
    stop_parent_holders();
    destroy_owned();
    /* After the clients: deadlines they took on the injected clock would
     * lie far ahead of the real one. */
    hl_monotime_set_clock(NULL);
    atomic_store(&clock_offset_us, 0);
    /* Stopping resumes a paused master first. */
    hl_fixture_stop_masters(masters, nmasters);
    nmasters = 0;
    return 0;
}

/* ---- what a test made ---------------------------------------------------
 * A test that fails half-way leaves clients running whose callbacks would
 * write into its dead stack frame: teardown destroys whatever is still
 * listed here, groups before the handles and clients they use. */

enum { OWN_MULTI, OWN_LOCK, OWN_REDLOCK, OWN_CLIENT, OWN_KINDS };

static struct owned {
    int kind;
    void *p;
} owned[64];
static int nowned;

static void own(int kind, void *p)
{
    if (nowned == (int)(sizeof owned / sizeof owned[0]))
        fail_msg("too many objects for one test");
    owned[nowned].kind = kind;
    owned[nowned].p = p;
    nowned++;
}

static void disown(const void *p)
{
    for (int i = 0; i < nowned; i++) {
        if (owned[i].p == p) {
            owned[i] = owned[--nowned];
            i--;
        }
    }
}

static void destroy_owned(void)
{
    for (int kind = 0; kind < OWN_KINDS; kind++) {
        for (int i = 0; i < nowned; i++) {
            if (owned[i].kind != kind)
                continue;
            if (kind == OWN_MULTI)
                hilock_multilock_destroy(owned[i].p);
            else if (kind == OWN_LOCK)
                hilock_lock_destroy(owned[i].p);
            else if (kind == OWN_REDLOCK)
                hilock_redlock_destroy(owned[i].p);
            else
                hilock_client_destroy(owned[i].p);
        }
    }
    nowned = 0;
}

static void multi_free(hilock_multilock *m)
{
    disown(m);
    assert_status(hilock_multilock_destroy(m), HILOCK_OK);
}

static void redlock_free(hilock_redlock *rl)
{
    disown(rl);
    assert_status(hilock_redlock_destroy(rl), HILOCK_OK);
}

static void lock_free(hilock_lock *l)
{
    disown(l);
    hl_free_lock(l);
}

static void client_free(hilock_client *c)
{
    disown(c);
    hl_free_client(c);
}

/* ---- RedLocks ---------------------------------------------------------- */

typedef struct rl_params {
    int64_t node_ms;
    int64_t quarantine_ms;
    int64_t watchdog_ms; /* 0: the default */
    int64_t connect_ms;
    int64_t backoff_min_ms; /* 0: 10 */
    int64_t backoff_max_ms; /* 0: 100 */
    int64_t lock_delay_ms;  /* 0: none */
} rl_params;

/* Fixture masters are fresh, so each is quarantined for quarantine_ms
 * after a RedLock first sees it: keep it short. */
static rl_params basic_params(void)
{
    rl_params p = {
        .node_ms = hl_widen(200),
        .quarantine_ms = hl_widen(300),
        .watchdog_ms = 0,
        .connect_ms = hl_widen(500),
    };
    return p;
}

/* No cmocka: a forked child opens its RedLock with it. */
static int redlock_open(hilock_redlock **out, const rl_params *p, char *why,
                        size_t cap)
{
    char buf[NMASTERS][64];
    const char *urls[NMASTERS];
    hilock_options *o = NULL;
    int rc = hilock_options_create(&o);

    for (int i = 0; i < NMASTERS; i++) {
        snprintf(buf[i], sizeof buf[i], "redis://127.0.0.1:%d",
                 hl_redis_server_port(masters[i]));
        urls[i] = buf[i];
    }
    if (rc == HILOCK_OK)
        rc = hilock_options_set_node_timeout_ms(o, p->node_ms);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_quarantine_ms(o, p->quarantine_ms);
    if (rc == HILOCK_OK && p->watchdog_ms > 0)
        rc = hilock_options_set_watchdog_timeout_ms(o, p->watchdog_ms);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_connect_timeout_ms(o, p->connect_ms);
    /* Masters are killed and restarted here: a client that waits seconds
     * before reconnecting would only slow the tests down. */
    if (rc == HILOCK_OK)
        rc = hilock_options_set_reconnect_backoff_ms(
            o, p->backoff_min_ms > 0 ? p->backoff_min_ms : 10,
            p->backoff_max_ms > 0 ? p->backoff_max_ms : 100);
    if (rc == HILOCK_OK && p->lock_delay_ms > 0)
        rc = hilock_options_set_lock_delay_ms(o, p->lock_delay_ms);
    if (rc == HILOCK_OK)
        rc = hilock_redlock_create(out, urls, NMASTERS, o);
    if (rc != HILOCK_OK && why != NULL)
        snprintf(why, cap, "%s: %s", hilock_errname(rc),
                 hilock_last_error());
    hilock_options_free(o);
    return rc;
}

static hilock_redlock *redlock_new(const rl_params *p)
{
    hilock_redlock *rl = NULL;
    char why[300];

    if (redlock_open(&rl, p, why, sizeof why) != HILOCK_OK)
        fail_msg("hilock_redlock_create: %s", why);
    own(OWN_REDLOCK, rl);
    return rl;
}

static hilock_multilock *redlock_lock_new(hilock_redlock *rl,
                                          const char *name)
{
    hilock_multilock *m = NULL;

    assert_status(hilock_redlock_multilock_create(&m, rl, name),
                  HILOCK_OK);
    own(OWN_MULTI, m);
    return m;
}

typedef struct voting_want {
    hilock_redlock *rl;
    unsigned mask;
} voting_want;

static bool masters_voting(void *arg)
{
    voting_want *w = arg;

    for (size_t i = 0; i < NMASTERS; i++) {
        hilock_client *c = hilock_redlock_client(w->rl, i);

        if (!(w->mask & (1u << i)))
            continue;
        if (c == NULL || hilock_client_is_connected(c) != 1 ||
            hl_restart_quarantined(c))
            return false;
    }
    return true;
}

/* Waits until the masters in mask are connected and out of quarantine
 * for rl: the deterministic end of the quarantine of a fresh master. */
static void wait_voting(hilock_redlock *rl, unsigned mask, int timeout_ms)
{
    voting_want w = { rl, mask };

    if (!hl_wait_until(masters_voting, &w, timeout_ms))
        fail_msg("masters 0x%x did not all vote within %d ms", mask,
                 timeout_ms);
}

/* ---- raw commands on the masters ---------------------------------------- */

/* An integer reply of cmd key on master i; -1 when there is none (the
 * master is down). */
static long long master_int(int i, const char *cmd, const char *key)
{
    char r[256];
    int t = hl_redis_server_cmd(masters[i], r, sizeof r, cmd, key,
                                (char *)NULL);

    if (t != ':')
        return -1;
    return strtoll(r + 1, NULL, 10);
}

static long long master_exists(int i, const char *key)
{
    long long v = master_int(i, "EXISTS", key);

    if (v < 0)
        fail_msg("EXISTS %s on master %d: no answer", key, i);
    return v;
}

static void master_del(int i, const char *key)
{
    if (master_int(i, "DEL", key) != 1)
        fail_msg("DEL %s on master %d deleted nothing", key, i);
}

typedef struct keys_want {
    const char *key;
    unsigned mask;
} keys_want;

static bool keys_gone(void *arg)
{
    keys_want *w = arg;

    for (int i = 0; i < nmasters; i++)
        if ((w->mask & (1u << i)) && master_int(i, "EXISTS", w->key) != 0)
            return false;
    return true;
}

static bool keys_present(void *arg)
{
    keys_want *w = arg;

    for (int i = 0; i < nmasters; i++)
        if ((w->mask & (1u << i)) && master_int(i, "EXISTS", w->key) != 1)
            return false;
    return true;
}

/* Waits until key is gone from every master in mask.  Callers take
 * leases far longer than timeout_ms, so expiry cannot be what removed
 * it. */
static void wait_keys_gone(const char *key, unsigned mask, int timeout_ms)
{
    keys_want w = { key, mask };

    if (hl_wait_until(keys_gone, &w, timeout_ms))
        return;
    for (int i = 0; i < nmasters; i++)
        if ((mask & (1u << i)) && master_int(i, "EXISTS", key) != 0)
            fail_msg("%s is still on master %d %d ms later (pttl %lld ms)",
                     key, i, timeout_ms, master_int(i, "PTTL", key));
}

static void wait_keys_present(const char *key, unsigned mask, int timeout_ms)
{
    keys_want w = { key, mask };

    if (!hl_wait_until(keys_present, &w, timeout_ms))
        fail_msg("%s did not appear on masters 0x%x within %d ms", key, mask,
                 timeout_ms);
}

/* Script calls a server has run (EVAL and EVALSHA). */
static long long script_calls(int server)
{
    static const char *const cmds[] = { "cmdstat_eval:", "cmdstat_evalsha:" };
    char r[16384];
    long long sum = 0;
    int t = hl_redis_server_cmd(masters[server], r, sizeof r, "INFO",
                                "commandstats", (char *)NULL);

    if (t != '$')
        fail_msg("INFO commandstats on server %d failed", server);
    for (size_t k = 0; k < 2; k++) {
        const char *line = strstr(r, cmds[k]);
        const char *calls, *rejected, *eol;

        if (line == NULL)
            continue;
        eol = strchr(line, '\r');
        calls = strstr(line, "calls=");
        rejected = strstr(line, "rejected_calls=");
        if (calls != NULL && (eol == NULL || calls < eol))
            sum += strtoll(calls + 6, NULL, 10);
        if (rejected != NULL && (eol == NULL || rejected < eol))
            sum += strtoll(rejected + 15, NULL, 10);
    }
    return sum;
}

typedef struct calls_want {
    int server;
    long long min;
} calls_want;

static bool calls_reached(void *arg)
{
    calls_want *w = arg;

    return script_calls(w->server) >= w->min;
}

/* ---- the loop thread ---------------------------------------------------- */

static void read_up_mask(hilock_client *c, void *arg)
{
    *(unsigned *)arg = c->up_mask;
}

typedef struct down_want {
    hilock_client *c;
} down_want;

static bool all_conns_down(void *arg)
{
    down_want *w = arg;
    unsigned mask = 1;

    hl_run_on_loop(w->c, read_up_mask, &mask);
    return mask == 0;
}

/* ---- recording callbacks ------------------------------------------------ */

typedef struct acq_rec {
    atomic_bool done;
    int status;
    int64_t validity_ms;
    size_t granted;
    size_t attempts;
    int64_t at_ms;
    hilock_member_result res[HILOCK_MAX_MEMBERS];
    char detail[256];
} acq_rec;

static void acq_rec_init(acq_rec *r)
{
    memset(r, 0, sizeof *r);
    atomic_init(&r->done, false);
    r->status = -1;
}

static void on_acquired(hilock_multilock *m, int status,
                        const hilock_multi_outcome *out, void *data)
{
    acq_rec *r = data;

    (void)m;
    r->status = status;
    r->validity_ms = out->validity_ms;
    r->granted = out->granted;
    r->attempts = out->attempts;
    r->at_ms = hl_now_ms();
    for (size_t i = 0; i < out->n && i < HILOCK_MAX_MEMBERS; i++)
        r->res[i] = out->members[i];
    snprintf(r->detail, sizeof r->detail, "%s",
             status ? hilock_last_error() : "");
    atomic_store(&r->done, true);
}

static void acq_rec_wait(acq_rec *r, int timeout_ms)
{
    if (!hl_wait_flag(&r->done, timeout_ms))
        fail_msg("an acquire did not complete within %d ms", timeout_ms);
}

typedef struct rel_rec {
    atomic_bool done;
    int status;
} rel_rec;

static void on_released(hilock_multilock *m, int status, void *data)
{
    rel_rec *r = data;

    (void)m;
    r->status = status;
    atomic_store(&r->done, true);
}

static int release_as(hilock_multilock *m, uint64_t owner)
{
    rel_rec r;

    memset(&r, 0, sizeof r);
    atomic_init(&r.done, false);
    assert_status(hilock_multilock_release_async(m, owner, on_released, &r),
                  HILOCK_OK);
    if (!hl_wait_flag(&r.done, hl_widen(10000)))
        fail_msg("a release did not complete within 10 s");
    return r.status;
}

/* Whether the calling thread's lease on member i of m was reported
 * lost. */
typedef struct member_want {
    hilock_multilock *m;
    size_t i;
} member_want;

static bool member_lost(void *arg)
{
    member_want *w = arg;
    bool lost = false;

    return hilock_lock_lease_lost(w->m->members[w->i], &lost) ==
               HILOCK_OK &&
           lost;
}

static void wait_member_lost(hilock_multilock *m, size_t i, int timeout_ms)
{
    member_want w = { m, i };

    if (!hl_wait_until(member_lost, &w, timeout_ms))
        fail_msg("member %zu was not reported lost within %d ms", i,
                 timeout_ms);
}

static bool group_lease_lost(hilock_multilock *m)
{
    bool lost = true;

    assert_status(hilock_multilock_lease_lost(m, &lost), HILOCK_OK);
    return lost;
}

static const char *member_status(const hilock_member_result *r)
{
    return hilock_errname(r->status);
}

/* ---- 1. a quorum with two masters killed -------------------------------- */

static void test_two_masters_killed(void **state)
{
    rl_params p = basic_params();
    hilock_member_result res[NMASTERS];
    hilock_redlock *rl;
    hilock_multilock *m;
    int64_t validity = -1, t0, took;
    const int64_t drift_ms = 30000 / 100 + 2;

    (void)state;
    rl = redlock_new(&p);
    wait_voting(rl, ALL_MASTERS, hl_widen(5000));
    m = redlock_lock_new(rl, "rl.two");
    hl_fixture_kill9(masters[1]);
    hl_fixture_kill9(masters[3]);

    t0 = hl_now_ms();
    assert_status(hilock_multilock_try_acquire(m, 0, HILOCK_LEASE_WATCHDOG,
                                               res, sizeof *res, &validity),
                  HILOCK_OK);
    took = hl_now_ms() - t0;
    /* Three live masters are exactly a quorum: each of them granted. */
    for (int i = 0; i < NMASTERS; i++) {
        bool dead = i == 1 || i == 3;

        if (dead && res[i].status == HILOCK_OK)
            fail_msg("dead master %d reported as granted", i);
        if (!dead && res[i].status != HILOCK_OK)
            fail_msg("live master %d: %s", i, member_status(&res[i]));
        if (dead && res[i].status == HILOCK_ECANCELED)
            assert_int_equal(res[i].latency_us, -1);
        if (!dead)
            assert_true(res[i].latency_us >= 0);
        assert_false(res[i].quarantined);
    }
    /* The default watchdog lease is 30 s. */
    if (validity > 30000 - drift_ms || validity < 30000 - drift_ms - took - 1)
        fail_msg("validity %lld ms after a %lld ms acquire of a 30000 ms "
                 "lease", (long long)validity, (long long)took);
    for (int i = 0; i < NMASTERS; i++)
        if (i != 1 && i != 3)
            assert_int_equal(master_exists(i, "rl.two"), 1);
    assert_false(group_lease_lost(m));

    assert_status(hilock_multilock_release(m), HILOCK_OK);
    for (int i = 0; i < NMASTERS; i++)
        if (i != 1 && i != 3)
            assert_int_equal(master_exists(i, "rl.two"), 0);
    assert_status(hilock_multilock_release(m), HILOCK_ENOTOWNER);

    /* Destroying the RedLock destroys the locks still there, as a
     * client's destroy does its locks: a pending acquire ends with
     * HILOCK_ECANCELED, and the user's later destroy says ECLOSED. */
    static acq_rec r;
    hilock_multilock *m2 = redlock_lock_new(rl, "rl.two");
    assert_status(
        hilock_multilock_try_acquire(m, 0, 60000, res, sizeof *res, NULL),
        HILOCK_OK);
    acq_rec_init(&r);
    assert_status(hilock_multilock_acquire_async(m2, 0xD0, HILOCK_WAIT_FOREVER,
                                                 HILOCK_LEASE_WATCHDOG,
                                                 on_acquired, &r, NULL),
                  HILOCK_OK);
    assert_false(atomic_load(&r.done));
    disown(m);
    disown(m2);
    redlock_free(rl);
    acq_rec_wait(&r, hl_widen(5000));
    assert_status(r.status, HILOCK_ECANCELED);
    assert_status(hilock_multilock_destroy(m2), HILOCK_ECLOSED);
    assert_status(hilock_multilock_destroy(m), HILOCK_ECLOSED);
    assert_status(hilock_redlock_destroy(rl), HILOCK_ECLOSED);
}

/* ---- 2. no quorum with three masters down ------------------------------- */

static void test_three_masters_down(void **state)
{
    rl_params p = basic_params();
    hilock_member_result res[NMASTERS];
    hilock_redlock *rl, *late = (hilock_redlock *)&late;
    hilock_multilock *m;
    const unsigned live = (1u << 1) | (1u << 3);
    const int64_t wait_ms = 3 * p.node_ms;
    int64_t t0, took;

    (void)state;
    rl = redlock_new(&p);
    wait_voting(rl, ALL_MASTERS, hl_widen(5000));
    m = redlock_lock_new(rl, "rl.three");
    hl_fixture_kill9(masters[0]);
    hl_fixture_kill9(masters[2]);
    hl_fixture_kill9(masters[4]);

    /* One attempt: the dead masters cost at most their node timeout. */
    t0 = hl_now_ms();
    assert_status(
        hilock_multilock_try_acquire(m, 0, 60000, res, sizeof *res, NULL),
        HILOCK_ENOQUORUM);
    took = hl_now_ms() - t0;
    if (took > p.node_ms + hl_widen(1000))
        fail_msg("a single attempt took %lld ms with a %lld ms node timeout",
                 (long long)took, (long long)p.node_ms);
    for (int i = 0; i < NMASTERS; i++)
        if (!(live & (1u << i)) && res[i].status == HILOCK_OK)
            fail_msg("dead master %d reported as granted", i);
    /* The lease is a minute: only giving back can empty them this soon. */
    wait_keys_gone("rl.three", live, hl_widen(3000));

    /* A bounded wait keeps trying until it runs out, then says why. */
    t0 = hl_now_ms();
    assert_status(
        hilock_multilock_try_acquire(m, wait_ms, 60000, res, sizeof *res, NULL),
        HILOCK_ENOQUORUM);
    took = hl_now_ms() - t0;
    if (took < wait_ms - 1 || took > wait_ms + p.node_ms + hl_widen(1000))
        fail_msg("a %lld ms wait gave up after %lld ms", (long long)wait_ms,
                 (long long)took);
    wait_keys_gone("rl.three", live, hl_widen(3000));
    assert_status(hilock_multilock_release(m), HILOCK_ENOTOWNER);

    /* A RedLock cannot even be made without a quorum of masters. */
    assert_status(redlock_open(&late, &p, NULL, 0), HILOCK_ENOQUORUM);
    assert_null(late);

    /* Failing left nothing behind: with the masters back (and out of
     * quarantine), the lock is there to take. */
    hl_fixture_restart(masters[0]);
    hl_fixture_restart(masters[2]);
    hl_fixture_restart(masters[4]);
    wait_voting(rl, ALL_MASTERS, hl_widen(5000));
    assert_status(hilock_multilock_try_acquire(m, hl_widen(3000),
                                               HILOCK_LEASE_WATCHDOG, res,
                                               sizeof *res, NULL),
                  HILOCK_OK);
    assert_status(hilock_multilock_release(m), HILOCK_OK);
    wait_keys_gone("rl.three", ALL_MASTERS, hl_widen(3000));
    multi_free(m);
    redlock_free(rl);
}

/* ---- 3. a stopped master costs only its node timeout -------------------- */

static void test_paused_master(void **state)
{
    rl_params p = basic_params();
    hilock_member_result res[NMASTERS];
    hilock_redlock *rl;
    hilock_multilock *m;
    const unsigned others = ALL_MASTERS & ~(1u << 2);
    int64_t validity = -1, t0, took;

    (void)state;
    rl = redlock_new(&p);
    wait_voting(rl, ALL_MASTERS, hl_widen(5000));
    m = redlock_lock_new(rl, "rl.paused");
    hl_fixture_pause(masters[2]);

    t0 = hl_now_ms();
    assert_status(hilock_multilock_try_acquire(m, 0, HILOCK_LEASE_WATCHDOG,
                                               res, sizeof *res, &validity),
                  HILOCK_OK);
    took = hl_now_ms() - t0;
    /* The quorum answers at once; the stopped master may at worst hold
     * the outcome up for its node timeout, never for the lease. */
    if (took > p.node_ms + hl_widen(300))
        fail_msg("acquired after %lld ms with a %lld ms node timeout and "
                 "one master stopped", (long long)took,
                 (long long)p.node_ms);
    if (res[2].status == HILOCK_OK)
        fail_msg("the stopped master is reported as granted");
    if (validity < 30000 - 302 - took - 1)
        fail_msg("validity %lld ms after %lld ms", (long long)validity,
                 (long long)took);
    wait_keys_present("rl.paused", others, hl_widen(3000));

    assert_status(hilock_multilock_release(m), HILOCK_OK);
    for (int i = 0; i < NMASTERS; i++)
        if (others & (1u << i))
            assert_int_equal(master_exists(i, "rl.paused"), 0);
    hl_fixture_resume(masters[2]);
    /* The attempt still sitting in the stopped master's socket must not
     * leave a 30 s hold behind once the master runs again. */
    wait_keys_gone("rl.paused", ALL_MASTERS, hl_widen(5000));

    wait_voting(rl, ALL_MASTERS, hl_widen(5000));
    assert_status(hilock_multilock_try_acquire(m, hl_widen(3000),
                                               HILOCK_LEASE_WATCHDOG, res,
                                               sizeof *res, NULL),
                  HILOCK_OK);
    assert_status(hilock_multilock_release(m), HILOCK_OK);
    wait_keys_gone("rl.paused", ALL_MASTERS, hl_widen(3000));
    multi_free(m);
    redlock_free(rl);
}

/* ---- 3b. too few masters beats contention ------------------------------- */

/* Takes m for owner, not the calling thread, on every master, and waits
 * until each master shows the hold. */
static void hold_as(hilock_multilock *m, uint64_t owner, const char *key)
{
    static acq_rec r;

    acq_rec_init(&r);
    assert_status(hilock_multilock_acquire_async(m, owner, hl_widen(3000),
                                                 HILOCK_LEASE_WATCHDOG,
                                                 on_acquired, &r, NULL),
                  HILOCK_OK);
    acq_rec_wait(&r, hl_widen(10000));
    assert_status(r.status, HILOCK_OK);
    wait_keys_present(key, ALL_MASTERS, hl_widen(3000));
}

/* A try with a wait whose outcome must be want, in about wait_ms: each
 * round waits at most the node timeout for the masters that are down. */
static void expect_wait_outcome(hilock_multilock *m, int64_t wait_ms,
                                int64_t node_ms, int want,
                                hilock_member_result *res)
{
    int64_t t0 = hl_now_ms(), took;

    int rc =
        hilock_multilock_try_acquire(m, wait_ms, 60000, res, sizeof *res, NULL);
    if (rc != want) {
        char members[NMASTERS * 48] = "";
        for (int i = 0; i < NMASTERS; i++) {
            size_t used = strlen(members);
            snprintf(members + used, sizeof members - used, " %s%s %lld us",
                     member_status(&res[i]),
                     res[i].quarantined ? " (quarantined)" : "",
                     (long long)res[i].latency_us);
        }
        fail_msg("%s (%s), expected %s; members:%s", hilock_errname(rc),
                 hilock_last_error(), hilock_errname(want), members);
    }
    took = hl_now_ms() - t0;
    if (took < wait_ms - 1 || took > wait_ms + node_ms + hl_widen(1000))
        fail_msg("a %lld ms wait gave up after %lld ms", (long long)wait_ms,
                 (long long)took);
}

/* Another owner holds the lock, then three masters stop.  The two live
 * masters answer "held" long before the stopped ones time out, but no
 * owner could reach a quorum with three masters silent: that is what the
 * caller has to hear, not that the lock is busy. */
static void test_no_quorum_beats_contention(void **state)
{
    rl_params p = basic_params();
    hilock_member_result res[NMASTERS];
    hilock_redlock *rl;
    hilock_multilock *m;
    const uint64_t other = 0x5eed;
    const unsigned down = (1u << 0) | (1u << 2) | (1u << 4);
    const int64_t wait_ms = 3 * p.node_ms;

    (void)state;
    rl = redlock_new(&p);
    wait_voting(rl, ALL_MASTERS, hl_widen(5000));
    m = redlock_lock_new(rl, "rl.nq");
    hold_as(m, other, "rl.nq");

    for (int i = 0; i < NMASTERS; i++)
        if (down & (1u << i))
            hl_fixture_pause(masters[i]);
    expect_wait_outcome(m, wait_ms, p.node_ms, HILOCK_ENOQUORUM, res);
    for (int i = 0; i < NMASTERS; i++) {
        if (down & (1u << i)) {
            if (res[i].status == HILOCK_OK || res[i].status == HILOCK_EBUSY)
                fail_msg("stopped master %d answered %s", i,
                         member_status(&res[i]));
        } else if (res[i].status != HILOCK_EBUSY) {
            fail_msg("live master %d: %s, not EBUSY", i,
                     member_status(&res[i]));
        }
    }
    /* A single try decides the same way. */
    assert_status(
        hilock_multilock_try_acquire(m, 0, 60000, res, sizeof *res, NULL),
        HILOCK_ENOQUORUM);

    /* Dead masters rather than stopped ones: refused connections may
     * come before or after the "held" answers; either way, no quorum. */
    for (int i = 0; i < NMASTERS; i++)
        if (down & (1u << i))
            hl_fixture_kill9(masters[i]);
    expect_wait_outcome(m, wait_ms, p.node_ms, HILOCK_ENOQUORUM, res);
    assert_status(
        hilock_multilock_try_acquire(m, 0, 60000, res, sizeof *res, NULL),
        HILOCK_ENOQUORUM);

    for (int i = 0; i < NMASTERS; i++)
        if (down & (1u << i))
            hl_fixture_restart(masters[i]);
    multi_free(m);
    redlock_free(rl);
}

/* Two masters down leave a quorum possible: the lock is busy, and the
 * caller is told so. */
static void test_contention_with_two_down(void **state)
{
    rl_params p = basic_params();
    hilock_member_result res[NMASTERS];
    hilock_redlock *rl;
    hilock_multilock *m;
    const uint64_t other = 0x5eed;
    const int64_t wait_ms = 3 * p.node_ms;

    (void)state;
    rl = redlock_new(&p);
    wait_voting(rl, ALL_MASTERS, hl_widen(5000));
    m = redlock_lock_new(rl, "rl.busy");
    hold_as(m, other, "rl.busy");

    hl_fixture_pause(masters[1]);
    hl_fixture_kill9(masters[3]);
    expect_wait_outcome(m, wait_ms, p.node_ms, HILOCK_EBUSY, res);
    for (int i = 0; i < NMASTERS; i++)
        if (i != 1 && i != 3 && res[i].status != HILOCK_EBUSY)
            fail_msg("live master %d: %s, not EBUSY", i,
                     member_status(&res[i]));
    assert_status(
        hilock_multilock_try_acquire(m, 0, 60000, res, sizeof *res, NULL),
        HILOCK_EBUSY);

    hl_fixture_resume(masters[1]);
    hl_fixture_restart(masters[3]);
    multi_free(m);
    redlock_free(rl);
}

/* The hilock tool run in the background; teardown kills it if a test
 * fails with it still running. */
static pid_t tool_pid;

static void tool_kill(void)
{
    if (tool_pid > 0) {
        kill(tool_pid, SIGKILL);
        waitpid(tool_pid, NULL, 0);
    }
    tool_pid = 0;
}

/* hilock --redlock over the masters with argv after it, its stdout and
 * stderr into the file at out_path. */
static void tool_spawn(const char *out_path, const char *const *args)
{
    char urls[NMASTERS * 96];
    const char *argv[16];
    posix_spawn_file_actions_t fa;
    size_t used = 0;
    int n = 0, rc;

    for (int i = 0; i < NMASTERS; i++)
        used += (size_t)snprintf(urls + used, sizeof urls - used,
                                 "%sredis://127.0.0.1:%d?quarantine=%d"
                                 "&node_timeout=%d",
                                 i ? "," : "",
                                 hl_redis_server_port(masters[i]),
                                 hl_widen(300), hl_widen(200));
    assert_true(used < sizeof urls);
    argv[n++] = HILOCK_TOOL_PATH;
    argv[n++] = "--redlock";
    argv[n++] = urls;
    while (*args != NULL && n < 15)
        argv[n++] = *args++;
    argv[n] = NULL;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    rc = posix_spawn(&tool_pid, argv[0], &fa, NULL, (char *const *)argv,
                     environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        fail_msg("spawn %s: %s", argv[0], strerror(rc));
}

/* The tool's exit status (128 + signal when killed); fails the test if
 * it has not ended within timeout_ms. */
static int tool_wait(int timeout_ms)
{
    int64_t deadline = hl_now_ms() + timeout_ms;
    int ws;

    for (;;) {
        pid_t r = waitpid(tool_pid, &ws, WNOHANG);

        if (r == tool_pid)
            break;
        if (r < 0 && errno != EINTR)
            fail_msg("waitpid: %s", strerror(errno));
        if (hl_now_ms() >= deadline) {
            tool_kill();
            fail_msg("the tool did not end within %d ms", timeout_ms);
        }
        hl_sleep_ms(5);
    }
    tool_pid = 0;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

/* The tool waits for a lock another owner holds; three masters stop
 * meanwhile.  It must end saying the masters are the problem (69), not
 * that the lock was busy (75). */
static void test_tool_no_quorum_exit(void **state)
{
    rl_params p = basic_params();
    hilock_redlock *rl;
    hilock_multilock *m;
    const uint64_t other = 0x5eed;
    const unsigned down = (1u << 0) | (1u << 2) | (1u << 4);
    char wait_arg[32], out_path[] = "/tmp/hilock-redlock-tool-XXXXXX";
    static char out[4096];
    int fd, rc;
    ssize_t len;
    calls_want w;

    (void)state;
    fd = mkstemp(out_path);
    if (fd < 0)
        fail_msg("mkstemp: %s", strerror(errno));
    rl = redlock_new(&p);
    wait_voting(rl, ALL_MASTERS, hl_widen(5000));
    m = redlock_lock_new(rl, "rl.tool");
    hold_as(m, other, "rl.tool");

    snprintf(wait_arg, sizeof wait_arg, "%d", hl_widen(2000));
    {
        const char *args[] = { "run", "--wait", wait_arg, "rl.tool", "--",
                               "true", NULL };

        w.server = 1;
        w.min = script_calls(1) + 2;
        tool_spawn(out_path, args);
    }
    /* Two attempts on a live master: the tool has connected and is in
     * its wait, where only the masters it loses can change the answer. */
    if (!hl_wait_until(calls_reached, &w, hl_widen(10000)))
        fail_msg("the tool made no two attempts within 10 s");
    for (int i = 0; i < NMASTERS; i++)
        if (down & (1u << i))
            hl_fixture_pause(masters[i]);
    rc = tool_wait(hl_widen(2000) + hl_widen(10000));
    len = pread(fd, out, sizeof out - 1, 0);
    out[len > 0 ? len : 0] = '\0';
    close(fd);
    unlink(out_path);
    if (rc != 69 || strstr(out, "too few masters") == NULL)
        fail_msg("the tool exited %d, not 69:\n%s", rc, out);

    for (int i = 0; i < NMASTERS; i++)
        if (down & (1u << i))
            hl_fixture_resume(masters[i]);
    multi_free(m);
    redlock_free(rl);
}

/* ---- 4. restart quarantine ---------------------------------------------- */

/* The quarantine is at least the longest lease taken (the watchdog's),
 * as multi.h asks; the node timeout is wide enough for a restart and a
 * reconnect to fit inside it. */
static rl_params quarantine_params(void)
{
    rl_params p = {
        .node_ms = hl_widen(1000),
        .quarantine_ms = hl_widen(1500),
        .watchdog_ms = hl_widen(1200),
        .connect_ms = hl_widen(1000),
    };
    return p;
}

static int64_t pttl(int i, const char *key)
{
    return master_int(i, "PTTL", key);
}

/* A holds the lock on masters 0, 1 and 2 only; master 0 restarts, empty.
 * B can make a quorum only with master 0, so the quarantine alone keeps
 * B out until A has been told that its group is lost. */
static void test_quarantine_restarted_master(void **state)
{
    rl_params p = quarantine_params(), pa = p;
    const char *key = "rl.quarantine";
    hilock_member_result res[NMASTERS];
    hilock_redlock *rla, *rlb;
    hilock_multilock *ma, *mb;
    hilock_client *b0;
    static hl_lost_rec lost_a, lost_b;
    static acq_rec probe;
    int64_t t_kill, t_b;
    int tries = 0;

    (void)state;
    hl_lost_rec_init(&lost_a, NULL);
    hl_lost_rec_init(&lost_b, NULL);
    /* A comes back to a master slower than B does, as a client across a
     * slower network would: the quarantine, not A's luck, must keep B
     * out. */
    pa.backoff_min_ms = pa.backoff_max_ms = hl_widen(800);
    rla = redlock_new(&pa);
    rlb = redlock_new(&p);
    b0 = hilock_redlock_client(rlb, 0);
    wait_voting(rla, ALL_MASTERS, hl_widen(5000));
    wait_voting(rlb, ALL_MASTERS, hl_widen(5000));
    ma = redlock_lock_new(rla, key);
    mb = redlock_lock_new(rlb, key);
    assert_status(hilock_multilock_set_lost_callback(ma, hl_record_group_lost,
                                                     &lost_a),
                  HILOCK_OK);
    assert_status(hilock_multilock_set_lost_callback(mb, hl_record_group_lost,
                                                     &lost_b),
                  HILOCK_OK);

    assert_status(hilock_multilock_try_acquire(ma, 0, HILOCK_LEASE_WATCHDOG,
                                               res, sizeof *res, NULL),
                  HILOCK_OK);
    /* Late grants join the hold: A ends up holding all five. */
    wait_keys_present(key, ALL_MASTERS, hl_widen(3000));

    /* Take masters 3 and 4 away from A: its renewals there fail, and
     * three members, still a quorum, keep the group. */
    master_del(3, key);
    master_del(4, key);
    wait_member_lost(ma, 3, 3 * (int)p.watchdog_ms);
    wait_member_lost(ma, 4, 3 * (int)p.watchdog_ms);
    assert_int_equal(atomic_load(&lost_a.calls), 0);
    assert_false(group_lease_lost(ma));

    /* B gets 3 and 4, which is no quorum. */
    assert_status(hilock_multilock_try_acquire(mb, 0, HILOCK_LEASE_WATCHDOG,
                                               res, sizeof *res, NULL),
                  HILOCK_EBUSY);
    for (int i = 0; i < 3; i++)
        if (res[i].status == HILOCK_OK)
            fail_msg("B was granted master %d, which A holds", i);
    wait_keys_gone(key, (1u << 3) | (1u << 4), hl_widen(3000));

    /* Master 0 restarts with no data.  B's attempt is sent while B's
     * connections to it are down, so it waits in B's queue; it reaches
     * the new server right after B has seen the new run_id.  The grant it
     * gets there must not count. */
    t_kill = hl_now_ms();
    hl_fixture_kill9(masters[0]);
    {
        down_want w = { b0 };

        if (!hl_wait_until(all_conns_down, &w, hl_widen(5000)))
            fail_msg("B never noticed that master 0 died");
    }
    acq_rec_init(&probe);
    assert_status(hilock_multilock_acquire_async(mb, 0xB0B, 0,
                                                 HILOCK_LEASE_WATCHDOG,
                                                 on_acquired, &probe, NULL),
                  HILOCK_OK);
    /* Two hops through master 0's client (the group's coordinator): the
     * round has started, then the member's attempt is queued. */
    hl_run_on_loop(b0, NULL, NULL);
    hl_run_on_loop(b0, NULL, NULL);
    hl_fixture_restart(masters[0]);
    acq_rec_wait(&probe, (int)p.node_ms + hl_widen(5000));
    if (probe.status == HILOCK_OK) {
        bool told = hl_wait_until(hl_lost_seen, &lost_a, hl_widen(5000));

        fail_msg("B acquired %lld ms after master 0 was killed, inside its "
                 "%lld ms quarantine, counting master 0's grant (%s, "
                 "quarantined %d); A %s",
                 (long long)(probe.at_ms - t_kill),
                 (long long)p.quarantine_ms, member_status(&probe.res[0]),
                 probe.res[0].quarantined,
                 !told ? "was never told its group was lost"
                 : atomic_load(&lost_a.at_ms) > probe.at_ms
                     ? "still believed it held the lock: both held it"
                     : "had been told its group was lost");
    }
    if (probe.status != HILOCK_EBUSY && probe.status != HILOCK_ENOQUORUM)
        fail_msg("B's attempt: %s (%s)", hilock_errname(probe.status),
                 probe.detail);

    /* No attempt of B may win before the quarantine has run out.  The
     * new server came up after the kill, so that is after
     * t_kill + quarantine at the earliest. */
    while (hl_now_ms() < t_kill + p.quarantine_ms) {
        int rc = hilock_multilock_try_acquire(mb, 0, HILOCK_LEASE_WATCHDOG,
                                              res, sizeof *res, NULL);
        int64_t at = hl_now_ms();

        tries++;
        if (rc == HILOCK_OK && at < t_kill + p.quarantine_ms)
            fail_msg("B acquired %lld ms after master 0 was killed, inside "
                     "the %lld ms quarantine (master 0: %s)",
                     (long long)(at - t_kill), (long long)p.quarantine_ms,
                     member_status(&res[0]));
        if (rc == HILOCK_OK) {
            if (atomic_load(&lost_a.calls) == 0 ||
                atomic_load(&lost_a.at_ms) > at)
                fail_msg("B acquired before A was told it lost the lock");
            assert_status(hilock_multilock_release(mb), HILOCK_OK);
            break;
        }
        if (rc != HILOCK_EBUSY && rc != HILOCK_ENOQUORUM)
            fail_msg("B: %s (%s)", hilock_errname(rc), hilock_last_error());
        /* Pacing only: every attempt is judged on its own. */
        hl_sleep_ms(20);
    }
    assert_true(tries > 0);

    /* A kept two of five members: it must have been told. */
    if (!hl_wait_until(hl_lost_seen, &lost_a, hl_widen(5000)))
        fail_msg("A was never told that its group was lost");
    assert_int_equal(atomic_load(&lost_a.owner), hilock_thread_owner());
    assert_true(group_lease_lost(ma));

    /* Once master 0 votes for B, B's quorum is 0, 3 and 4; A still holds
     * 1 and 2 on the servers. */
    assert_status(hilock_multilock_try_acquire(
                      mb, (int)p.quarantine_ms + hl_widen(5000),
                      HILOCK_LEASE_WATCHDOG, res, sizeof *res, NULL),
                  HILOCK_OK);
    t_b = hl_now_ms();
    for (int i = 0; i < NMASTERS; i++) {
        bool a_holds = i == 1 || i == 2;

        if (a_holds && res[i].status == HILOCK_OK)
            fail_msg("B was granted master %d while A held it", i);
        if (!a_holds && res[i].status != HILOCK_OK)
            fail_msg("B's quorum lacks master %d: %s", i,
                     member_status(&res[i]));
    }
    if (atomic_load(&lost_a.at_ms) > t_b)
        fail_msg("A was told of its loss after B acquired");
    assert_int_equal(atomic_load(&lost_a.calls), 1);
    assert_int_equal(atomic_load(&lost_b.calls), 0);

    assert_status(hilock_multilock_release(ma), HILOCK_ELEASELOST);
    assert_status(hilock_multilock_release(mb), HILOCK_OK);
    wait_keys_gone(key, ALL_MASTERS, hl_widen(3000));
    multi_free(mb);
    multi_free(ma);
    redlock_free(rlb);
    redlock_free(rla);
}

/* A holds all five; one restarts.  Four members remain, the group is
 * kept, and the watchdog keeps the other four alive through and past the
 * quarantine, so B never gets in. */
static void test_quarantine_group_survives(void **state)
{
    rl_params p = quarantine_params();
    const char *key = "rl.survivor";
    hilock_member_result res[NMASTERS];
    hilock_redlock *rla, *rlb;
    hilock_multilock *ma, *mb;
    static hl_lost_rec lost_a;
    int64_t t_kill;
    int tries = 0;

    (void)state;
    hl_lost_rec_init(&lost_a, NULL);
    rla = redlock_new(&p);
    rlb = redlock_new(&p);
    wait_voting(rla, ALL_MASTERS, hl_widen(5000));
    wait_voting(rlb, ALL_MASTERS, hl_widen(5000));
    ma = redlock_lock_new(rla, key);
    mb = redlock_lock_new(rlb, key);
    assert_status(hilock_multilock_set_lost_callback(ma, hl_record_group_lost,
                                                     &lost_a),
                  HILOCK_OK);
    assert_status(hilock_multilock_try_acquire(ma, 0, HILOCK_LEASE_WATCHDOG,
                                               res, sizeof *res, NULL),
                  HILOCK_OK);
    wait_keys_present(key, ALL_MASTERS, hl_widen(3000));

    t_kill = hl_now_ms();
    hl_fixture_kill9(masters[0]);
    hl_fixture_restart(masters[0]);
    wait_member_lost(ma, 0, hl_widen(5000));
    assert_int_equal(atomic_load(&lost_a.calls), 0);
    assert_false(group_lease_lost(ma));

    /* Through the quarantine and until master 0 votes for B again, and
     * once more after: B can only ever get master 0. */
    for (;;) {
        bool voting = hl_now_ms() > t_kill + p.quarantine_ms &&
                      !hl_restart_quarantined(hilock_redlock_client(rlb, 0)) &&
                      hilock_client_is_connected(
                          hilock_redlock_client(rlb, 0)) == 1;
        int rc = hilock_multilock_try_acquire(mb, 0, HILOCK_LEASE_WATCHDOG,
                                              res, sizeof *res, NULL);

        tries++;
        if (rc != HILOCK_EBUSY)
            fail_msg("B, %lld ms after master 0 was killed: %s (%s)",
                     (long long)(hl_now_ms() - t_kill), hilock_errname(rc),
                     hilock_last_error());
        if (voting)
            break;
        if (hl_now_ms() > t_kill + p.quarantine_ms + hl_widen(10000))
            fail_msg("master 0 never came out of quarantine for B");
        hl_sleep_ms(20);
    }
    assert_true(tries > 1);
    /* Longer than a watchdog lease has passed since the restart: the
     * keys on 1..4 are alive only because A keeps renewing them. */
    assert_true(hl_now_ms() - t_kill > p.watchdog_ms);
    for (int i = 1; i < NMASTERS; i++) {
        assert_int_equal(master_exists(i, key), 1);
        assert_true(pttl(i, key) > 0);
    }
    assert_int_equal(atomic_load(&lost_a.calls), 0);
    assert_false(group_lease_lost(ma));

    /* A member lost while the group held is not the group's error. */
    assert_status(hilock_multilock_release(ma), HILOCK_OK);
    wait_keys_gone(key, ALL_MASTERS, hl_widen(3000));
    assert_status(hilock_multilock_try_acquire(mb, hl_widen(3000),
                                               HILOCK_LEASE_WATCHDOG, res,
                                               sizeof *res, NULL),
                  HILOCK_OK);
    assert_status(hilock_multilock_release(mb), HILOCK_OK);
    assert_int_equal(atomic_load(&lost_a.calls), 0);
    multi_free(mb);
    multi_free(ma);
    redlock_free(rlb);
    redlock_free(rla);
}

/* ---- 5. drift and validity ---------------------------------------------- */

static void test_validity_arithmetic(void **state)
{
    hl_monotime real;

    (void)state;
    /* 1 % of the lease plus 2 ms. */
    assert_int_equal(hl_drift_margin(10000), HL_MS(102));
    assert_int_equal(hl_drift_margin(30000), HL_MS(302));
    assert_int_equal(hl_drift_margin(1), 2010);
    assert_int_equal(hl_validity(10000, 0, 0), HL_MS(9898));
    assert_int_equal(hl_validity(10000, HL_MS(7), HL_MS(7)), HL_MS(9898));
    assert_int_equal(hl_validity(10000, 0, HL_MS(9898)), 0);
    assert_true(hl_validity(10000, 0, HL_MS(9898) + 1) < 0);
    assert_int_equal(hl_validity(10000, HL_MS(1000), HL_MS(6000)),
                     HL_MS(4898));
    assert_int_equal(hl_validity(200, 0, HL_MS(50)), HL_MS(146));

    /* The injected clock is the library's clock, and NULL gives the real
     * one back. */
    atomic_store(&clock_offset_us, HL_MS(7000));
    hl_monotime_set_clock(offset_clock);
    real = (hl_monotime)hl_now_ms() * 1000;
    assert_true(hl_monotime_now() - real >= HL_MS(6990));
    assert_true(hl_monotime_now() - real <=
                HL_MS(7010) + HL_MS(hl_widen(100)));
    hl_monotime_set_clock(NULL);
    atomic_store(&clock_offset_us, 0);
    real = (hl_monotime)hl_now_ms() * 1000;
    assert_true(hl_monotime_now() - real < HL_MS(10) + HL_MS(hl_widen(100)));
    assert_true(hl_monotime_now() - real > -HL_MS(10));
}

/* Every master stopped, the attempt sent, the library's clock moved
 * forward by jump_ms, every master running again: the answers come
 * after the jump. */
static void acquire_across_jump(hilock_multilock *m, uint64_t owner,
                                int64_t lease_ms, int64_t jump_ms,
                                acq_rec *r)
{
    hilock_client *coord = m->coord;

    acq_rec_init(r);
    for (int i = 0; i < NMASTERS; i++)
        hl_fixture_pause(masters[i]);
    assert_status(hilock_multilock_acquire_async(m, owner, 0, lease_ms,
                                                 on_acquired, r, NULL),
                  HILOCK_OK);
    /* The coordinator has started the round (its start is taken) once a
     * task queued behind the acquire has run. */
    hl_run_on_loop(coord, NULL, NULL);
    assert_false(atomic_load(&r->done));
    atomic_fetch_add(&clock_offset_us, HL_MS(jump_ms));
    for (int i = 0; i < NMASTERS; i++)
        hl_fixture_resume(masters[i]);
    acq_rec_wait(r, hl_widen(10000));
}

/* The masters that have key. */
static int masters_with(const char *key)
{
    int n = 0;

    for (int i = 0; i < NMASTERS; i++)
        n += (int)master_exists(i, key);
    return n;
}

/* A RedLock holder whose lease runs out without a release leaves its
 * lock delay on the masters that granted it (a quorum at least; a grant
 * that came after the quorum goes back), each member having written its
 * own: a
 * single try of another RedLock, which sets no delay itself, is refused
 * until the delay is over, and goes in once it is.  A release leaves no
 * delay behind. */
static void test_lock_delay(void **state)
{
    static const char name[] = "rl-delay";
    static const char delay_key[] = "hilock_lock_delay:{rl-delay}";
    const unsigned all = (1u << NMASTERS) - 1;
    rl_params pa = basic_params(), pb = basic_params();
    pa.lock_delay_ms = hl_widen(3000);
    hilock_redlock *a = redlock_new(&pa);
    hilock_redlock *b = redlock_new(&pb);
    hilock_multilock *ma = redlock_lock_new(a, name);
    hilock_multilock *mb = redlock_lock_new(b, name);

    (void)state;
    wait_voting(a, all, hl_widen(10000));
    wait_voting(b, all, hl_widen(10000));
    assert_status(hilock_multilock_try_acquire(ma, 0, hl_widen(500), NULL, 0,
                                               NULL),
                  HILOCK_OK);
    assert_true(masters_with(delay_key) >= NMASTERS / 2 + 1);
    /* The lease runs out on every master; the delay outlives it. */
    wait_keys_gone(name, all, hl_widen(5000));
    assert_status(hilock_multilock_try_acquire(mb, 0, 10000, NULL, 0, NULL),
                  HILOCK_EBUSY);
    wait_keys_gone(delay_key, all, pa.lock_delay_ms + hl_widen(5000));
    assert_status(hilock_multilock_try_acquire(mb, 0, 10000, NULL, 0, NULL),
                  HILOCK_OK);
    assert_status(hilock_multilock_release(mb), HILOCK_OK);

    /* Released, a holder with a delay leaves none. */
    assert_status(hilock_multilock_try_acquire(ma, 0, 10000, NULL, 0, NULL),
                  HILOCK_OK);
    assert_true(masters_with(delay_key) >= NMASTERS / 2 + 1);
    assert_status(hilock_multilock_release(ma), HILOCK_OK);
    /* A grant that came after the quorum goes back on its own, its delay
     * with it. */
    wait_keys_gone(delay_key, all, hl_widen(5000));
    assert_status(hilock_multilock_try_acquire(mb, 0, 10000, NULL, 0, NULL),
                  HILOCK_OK);
    assert_status(hilock_multilock_release(mb), HILOCK_OK);
}

static void test_clock_jump(void **state)
{
    rl_params p = basic_params();
    const int64_t lease = 10000;
    hilock_redlock *rl;
    hilock_multilock *m;
    static acq_rec r;
    int64_t t0, real_ms;
    int granted = 0;

    (void)state;
    /* The attempt waits in stopped masters' sockets, and when its request
     * timer fires, the jump makes its deadline look long past: the
     * answers have to come before the timer, in real time. */
    p.node_ms = hl_widen(5000);
    atomic_store(&clock_offset_us, 0);
    hl_monotime_set_clock(offset_clock);
    rl = redlock_new(&p);
    wait_voting(rl, ALL_MASTERS, hl_widen(5000));
    m = redlock_lock_new(rl, "rl.clock");

    /* Half the lease gone on the way: acquired, with validity reduced by
     * exactly the jump plus the real time taken. */
    t0 = hl_now_ms();
    acquire_across_jump(m, 0xC10C1, lease, 5000, &r);
    real_ms = hl_now_ms() - t0;
    if (r.status != HILOCK_OK)
        fail_msg("acquire across a 5000 ms jump of a 10000 ms lease: %s (%s)",
                 hilock_errname(r.status), r.detail);
    if (r.validity_ms > 4898 || r.validity_ms < 4898 - real_ms - 1)
        fail_msg("validity %lld ms after a 5000 ms jump and %lld ms of "
                 "real time; expected at most 4898",
                 (long long)r.validity_ms, (long long)real_ms);
    assert_status(release_as(m, 0xC10C1), HILOCK_OK);
    wait_keys_gone("rl.clock", ALL_MASTERS, hl_widen(3000));

    /* More than the lease gone on the way: a quorum granted, but the lock
     * is not held, and nothing is left on the servers (the keys would
     * otherwise stay for the 10 s lease). */
    acquire_across_jump(m, 0xC10C2, lease, lease + 1000, &r);
    if (r.status != HILOCK_EEXPIRED)
        fail_msg("acquire across an %lld ms jump of a %lld ms lease: %s "
                 "(%s)", (long long)(lease + 1000), (long long)lease,
                 hilock_errname(r.status), r.detail);
    assert_int_equal(r.validity_ms, 0);
    assert_int_equal(r.attempts, 1);
    for (int i = 0; i < NMASTERS; i++)
        if (r.res[i].status == HILOCK_OK)
            granted++;
    assert_true(granted >= NMASTERS / 2 + 1);
    wait_keys_gone("rl.clock", ALL_MASTERS, hl_widen(3000));
    assert_status(release_as(m, 0xC10C2), HILOCK_ENOTOWNER);

    multi_free(m);
    redlock_free(rl);
    hl_monotime_set_clock(NULL);
    atomic_store(&clock_offset_us, 0);
}

/* ---- 6. mutual exclusion while masters die and come back ---------------- */

#define MX_MAX_THREADS 4

/* One critical section.  lost: the holder was told its hold was lost
 * (callback, query or release), so the section may overlap another. */
typedef struct mx_section {
    int64_t enter_ns;
    int64_t exit_ns;
    uint32_t holder;
    uint32_t lost;
} mx_section;

/* Shared by the parent and the forked child (MAP_SHARED). */
typedef struct mx_log {
    size_t map_len;
    size_t cap;
    atomic_size_t used;
    /* Read and written without a read-modify-write on purpose: only the
     * lock keeps the increments apart. */
    atomic_uint_fast64_t counter;
    atomic_bool stop;
    atomic_uint failures;
    atomic_flag msg_taken;
    char message[256];
    atomic_int held[2];
    atomic_int lost[2];
    mx_section s[];
} mx_log;

static mx_log *mx_log_new(size_t cap)
{
    size_t len = sizeof(mx_log) + cap * sizeof(mx_section);
    mx_log *log = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (log == MAP_FAILED)
        return NULL;
    log->map_len = len;
    log->cap = cap;
    atomic_init(&log->used, 0);
    atomic_init(&log->counter, 0);
    atomic_init(&log->stop, false);
    atomic_init(&log->failures, 0);
    atomic_flag_clear(&log->msg_taken);
    for (int i = 0; i < 2; i++) {
        atomic_init(&log->held[i], 0);
        atomic_init(&log->lost[i], 0);
    }
    return log;
}

static void mx_fail(mx_log *log, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void mx_fail(mx_log *log, const char *fmt, ...)
{
    va_list ap;

    atomic_fetch_add(&log->failures, 1);
    if (atomic_flag_test_and_set(&log->msg_taken))
        return;
    va_start(ap, fmt);
    vsnprintf(log->message, sizeof log->message, fmt, ap);
    va_end(ap);
}

typedef struct mx_holder {
    pthread_t thread;
    mx_log *log;
    hilock_multilock *m;
    int proc;
    uint32_t id;
    int64_t wait_ms;
    int spin_us;
    _Atomic uint64_t owner;
    atomic_bool lost; /* set by the group's lost callback */
    atomic_bool done;
} mx_holder;

typedef struct mx_team {
    mx_holder h[MX_MAX_THREADS];
    int n;
} mx_team;

static void mx_on_lost(hilock_multilock *m, uint64_t owner, void *data)
{
    mx_team *team = data;

    (void)m;
    for (int i = 0; i < team->n; i++)
        if (atomic_load(&team->h[i].owner) == owner)
            atomic_store(&team->h[i].lost, true);
}

static void *mx_holder_main(void *arg)
{
    mx_holder *h = arg;
    mx_log *log = h->log;

    atomic_store(&h->owner, hilock_thread_owner());
    while (!atomic_load(&log->stop)) {
        int rc, rel;
        bool lost = false;
        size_t slot;
        mx_section *sec;
        uint_fast64_t seen;
        int64_t until;

        atomic_store(&h->lost, false);
        rc = hilock_multilock_try_acquire(h->m, h->wait_ms,
                                          HILOCK_LEASE_WATCHDOG, NULL, 0, NULL);
        if (rc == HILOCK_EBUSY || rc == HILOCK_ENOQUORUM ||
            rc == HILOCK_EEXPIRED)
            continue;
        if (rc != HILOCK_OK) {
            mx_fail(log, "holder %u: acquire: %s (%s)", h->id,
                    hilock_errname(rc), hilock_last_error());
            break;
        }
        slot = atomic_fetch_add(&log->used, 1);
        if (slot >= log->cap) {
            mx_fail(log, "more than %zu critical sections", log->cap);
            hilock_multilock_release(h->m);
            break;
        }
        sec = &log->s[slot];
        sec->holder = h->id;
        sec->enter_ns = hl_now_ns();
        seen = atomic_load_explicit(&log->counter, memory_order_relaxed);
        until = hl_now_ns() + (int64_t)h->spin_us * 1000;
        /* A holder told of a loss stops at once. */
        while (hl_now_ns() < until && !atomic_load(&h->lost))
            ;
        atomic_store_explicit(&log->counter, seen + 1, memory_order_relaxed);
        sec->exit_ns = hl_now_ns();
        rc = hilock_multilock_lease_lost(h->m, &lost);
        if (rc != HILOCK_OK)
            mx_fail(log, "holder %u: lease_lost: %s", h->id,
                    hilock_errname(rc));
        rel = hilock_multilock_release(h->m);
        lost = lost || atomic_load(&h->lost) || rel == HILOCK_ELEASELOST;
        /* A master that died under the hold cannot confirm its part of
         * the release; the group was given back all the same (a member's
         * release whose answer was lost counts as done: EINDOUBT). */
        if (rel != HILOCK_OK && rel != HILOCK_ELEASELOST &&
            rel != HILOCK_ETIMEDOUT && rel != HILOCK_EIO &&
            rel != HILOCK_EINDOUBT)
            mx_fail(log, "holder %u: release: %s (%s)", h->id,
                    hilock_errname(rel), hilock_last_error());
        sec->lost = lost;
        atomic_fetch_add(lost ? &log->lost[h->proc] : &log->held[h->proc],
                         1);
    }
    atomic_store(&h->done, true);
    return NULL;
}

static int mx_team_start(mx_team *team, mx_log *log, hilock_multilock *m,
                         int proc, int threads, int64_t wait_ms, int spin_us)
{
    memset(team, 0, sizeof *team);
    team->n = threads;
    for (int i = 0; i < threads; i++) {
        mx_holder *h = &team->h[i];

        h->log = log;
        h->m = m;
        h->proc = proc;
        h->id = (uint32_t)(proc * 100 + i);
        h->wait_ms = wait_ms;
        h->spin_us = spin_us;
        atomic_init(&h->owner, 0);
        atomic_init(&h->lost, false);
        atomic_init(&h->done, false);
    }
    if (hilock_multilock_set_lost_callback(m, mx_on_lost, team) !=
        HILOCK_OK)
        return -1;
    for (int i = 0; i < threads; i++)
        if (pthread_create(&team->h[i].thread, NULL, mx_holder_main,
                           &team->h[i]) != 0)
            return -1;
    return 0;
}

static bool mx_team_done(mx_team *team, int timeout_ms)
{
    for (int i = 0; i < team->n; i++)
        if (!hl_wait_flag(&team->h[i].done, timeout_ms))
            return false;
    for (int i = 0; i < team->n; i++)
        pthread_join(team->h[i].thread, NULL);
    return true;
}

typedef struct mx_setup {
    rl_params p;
    int threads;
    int64_t wait_ms;
    int spin_us;
} mx_setup;

/* The forked holder process: no cmocka, only an exit status. */
static void mx_child(mx_log *log, const mx_setup *s)
    __attribute__((noreturn));

static void mx_child(mx_log *log, const mx_setup *s)
{
    hilock_redlock *rl = NULL;
    hilock_multilock *m = NULL;
    mx_team team;
    char why[300];
    int64_t until = hl_now_ms() + hl_widen(120000);

    if (redlock_open(&rl, &s->p, why, sizeof why) != HILOCK_OK) {
        mx_fail(log, "child: %s", why);
        _exit(1);
    }
    if (hilock_redlock_multilock_create(&m, rl, "rl.mutex") != HILOCK_OK) {
        mx_fail(log, "child: lock: %s", hilock_last_error());
        _exit(1);
    }
    if (mx_team_start(&team, log, m, 1, s->threads, s->wait_ms,
                      s->spin_us) != 0) {
        mx_fail(log, "child: could not start its holders");
        _exit(1);
    }
    while (!atomic_load(&log->stop) && hl_now_ms() < until)
        hl_sleep_ms(10);
    atomic_store(&log->stop, true);
    if (!mx_team_done(&team, hl_widen(30000))) {
        mx_fail(log, "child: a holder did not stop");
        _exit(1);
    }
    if (hilock_multilock_destroy(m) != HILOCK_OK ||
        hilock_redlock_destroy(rl) != HILOCK_OK) {
        mx_fail(log, "child: teardown: %s", hilock_last_error());
        _exit(1);
    }
    _exit(0);
}

static int mx_by_entry(const void *a, const void *b)
{
    const mx_section *x = a, *y = b;

    return x->enter_ns < y->enter_ns ? -1 : x->enter_ns > y->enter_ns;
}

/* No overlap among the sections whose holds were not lost, every section
 * closed, and no increment lost while no hold was lost (a lost hold may
 * overwrite another's increment, at most once each). */
static bool mx_verify(mx_log *log, char *why, size_t cap)
{
    size_t n = atomic_load(&log->used), good = 0, lost = 0;
    uint64_t counter = atomic_load(&log->counter);
    mx_section *sorted, *latest = NULL;
    bool ok = true;

    if (n > log->cap)
        n = log->cap;
    if (atomic_load(&log->failures) != 0) {
        snprintf(why, cap, "%u holder failure(s), the first: %s",
                 atomic_load(&log->failures), log->message);
        return false;
    }
    sorted = malloc(n ? n * sizeof *sorted : 1);
    if (sorted == NULL) {
        snprintf(why, cap, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (log->s[i].exit_ns == 0 || log->s[i].exit_ns < log->s[i].enter_ns) {
            snprintf(why, cap, "the section of holder %u was never closed",
                     log->s[i].holder);
            free(sorted);
            return false;
        }
        if (log->s[i].lost)
            lost++;
        else
            sorted[good++] = log->s[i];
    }
    if (lost == 0 ? counter != n : counter > n || counter + lost < n) {
        snprintf(why, cap, "the counter is %llu after %zu sections (%zu of "
                 "them lost): updates were lost",
                 (unsigned long long)counter, n, lost);
        free(sorted);
        return false;
    }
    qsort(sorted, good, sizeof *sorted, mx_by_entry);
    for (size_t i = 0; i < good && ok; i++) {
        mx_section *r = &sorted[i];

        if (latest != NULL && r->enter_ns <= latest->exit_ns) {
            snprintf(why, cap, "holder %u entered at %lld ns, before holder "
                     "%u left at %lld ns", r->holder,
                     (long long)r->enter_ns, latest->holder,
                     (long long)latest->exit_ns);
            ok = false;
        }
        if (latest == NULL || r->exit_ns > latest->exit_ns)
            latest = r;
    }
    free(sorted);
    return ok;
}

/* The parent's holders, reachable from teardown when a test fails. */
static mx_team parent_team;
static mx_log *parent_log;

static void stop_parent_holders(void)
{
    if (parent_log == NULL)
        return;
    atomic_store(&parent_log->stop, true);
    if (mx_team_done(&parent_team, hl_widen(30000))) {
        munmap(parent_log, parent_log->map_len);
    }
    /* Else a holder is stuck: leak the log rather than pull it away. */
    parent_log = NULL;
}

static bool mx_both_held(void *arg)
{
    mx_log *log = arg;

    return atomic_load(&log->held[0]) > 0 && atomic_load(&log->held[1]) > 0;
}

static void test_mutual_exclusion_under_faults(void **state)
{
    mx_setup s = {
        .p = {
            .node_ms = hl_widen(200),
            .quarantine_ms = hl_widen(500),
            .watchdog_ms = hl_widen(500),
            .connect_ms = hl_widen(500),
        },
        .threads = hl_under_valgrind() ? 2 : 3,
        .wait_ms = hl_widen(1000),
        .spin_us = hl_under_valgrind() ? 100 : 300,
    };
    const int faults = hl_under_valgrind() ? NMASTERS : 2 * NMASTERS;
    mx_log *log = mx_log_new(100000);
    hilock_redlock *rl;
    hilock_multilock *m;
    mx_team *team = &parent_team;
    char why[400];
    int status;

    (void)state;
    assert_non_null(log);
    /* Fork first: the child must not inherit clients whose threads it
     * does not have. */
    if (hl_children_fork(&kids, 0) == 0)
        mx_child(log, &s);

    rl = redlock_new(&s.p);
    wait_voting(rl, ALL_MASTERS, hl_widen(5000));
    m = redlock_lock_new(rl, "rl.mutex");
    parent_log = log;
    if (mx_team_start(team, log, m, 0, s.threads, s.wait_ms, s.spin_us) != 0)
        fail_msg("could not start the holders");
    if (!hl_wait_until(mx_both_held, log, hl_widen(20000))) {
        atomic_store(&log->stop, true);
        fail_msg("both processes did not hold the lock within 20 s "
                 "(parent %d, child %d): %s", atomic_load(&log->held[0]),
                 atomic_load(&log->held[1]), log->message);
    }

    /* One master at a time, each back in the vote before the next goes:
     * never more than a minority is missing. */
    for (int k = 0; k < faults; k++) {
        int i = (k * 2) % NMASTERS;

        hl_fixture_kill9(masters[i]);
        /* The length of the outage, not a wait: attempts and renewals
         * meet a dead master meanwhile. */
        hl_sleep_ms(100);
        hl_fixture_restart(masters[i]);
        wait_voting(rl, ALL_MASTERS, hl_widen(10000));
    }

    atomic_store(&log->stop, true);
    if (!mx_team_done(team, (int)s.wait_ms + hl_widen(20000)))
        fail_msg("a holder did not stop");
    parent_log = NULL;
    if (!hl_children_wait(&kids, hl_widen(30000)))
        fail_msg("the child did not finish: %s", log->message);
    status = kids.status[0];
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("the child failed (status 0x%x): %s", status, log->message);

    print_message("mutual exclusion: %zu sections (parent %d, child %d), "
                  "%d + %d lost, %d restarts\n",
                  atomic_load(&log->used), atomic_load(&log->held[0]),
                  atomic_load(&log->held[1]), atomic_load(&log->lost[0]),
                  atomic_load(&log->lost[1]), faults);
    if (!mx_verify(log, why, sizeof why))
        fail_msg("%s", why);
    assert_true(atomic_load(&log->held[0]) > 0);
    assert_true(atomic_load(&log->held[1]) > 0);

    multi_free(m);
    redlock_free(rl);
    wait_keys_gone("rl.mutex", ALL_MASTERS, hl_widen(5000));
    munmap(log, log->map_len);
}

/* ---- 7. multi-locks over plain lock handles ----------------------------- */

static hilock_client *plain_client(int server, int64_t watchdog_ms)
{
    hilock_options *o = NULL;
    hilock_client *c = NULL;

    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_host(o, "127.0.0.1"), HILOCK_OK);
    assert_status(hilock_options_set_port(o,
                                          hl_redis_server_port(
                                              masters[server])),
                  HILOCK_OK);
    if (watchdog_ms > 0)
        assert_status(hilock_options_set_watchdog_timeout_ms(o, watchdog_ms),
                      HILOCK_OK);
    assert_status(hl_set_valgrind_timeouts(o), HILOCK_OK);
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    own(OWN_CLIENT, c);
    return c;
}

static hilock_lock *lock_new(hilock_client *c, const char *name)
{
    hilock_lock *l = hl_new_lock(c, name);

    own(OWN_LOCK, l);
    return l;
}

/* Members "m.a" and "m.b" on server 0, "m.c" on server 1, each on a
 * client of its own server; outsiders reach the same names through
 * clients of their own. */
typedef struct trio {
    hilock_client *c0, *c1;
    hilock_lock *l[3];
    hilock_client *o0, *o1;
    hilock_lock *out[3];
    hilock_multilock *m;
} trio;

static const char *const trio_names[3] = { "m.a", "m.b", "m.c" };
static const int trio_server[3] = { 0, 0, 1 };

static void trio_open(trio *t, int64_t watchdog_ms)
{
    memset(t, 0, sizeof *t);
    t->c0 = plain_client(0, watchdog_ms);
    t->c1 = plain_client(1, watchdog_ms);
    t->o0 = plain_client(0, 0);
    t->o1 = plain_client(1, 0);
    for (int i = 0; i < 3; i++) {
        t->l[i] = lock_new(trio_server[i] ? t->c1 : t->c0, trio_names[i]);
        t->out[i] = lock_new(trio_server[i] ? t->o1 : t->o0, trio_names[i]);
    }
    assert_status(hilock_multilock_create(&t->m, t->l, 3), HILOCK_OK);
    own(OWN_MULTI, t->m);
}

static void trio_close(trio *t)
{
    if (t->m != NULL)
        multi_free(t->m);
    for (int i = 0; i < 3; i++) {
        lock_free(t->l[i]);
        lock_free(t->out[i]);
    }
    client_free(t->o1);
    client_free(t->o0);
    client_free(t->c1);
    if (t->c0 != NULL) /* a test may have closed it */
        client_free(t->c0);
}

static bool member_locked(trio *t, int i)
{
    bool locked = false;

    assert_status(hilock_lock_is_locked(t->out[i], &locked), HILOCK_OK);
    return locked;
}

static void test_multilock_all_or_nothing(void **state)
{
    hilock_member_result res[3];
    hilock_client *bc;
    hilock_lock *blocker;
    static acq_rec r;
    trio t;
    calls_want cw;

    (void)state;
    trio_open(&t, 0);
    bc = plain_client(1, 0);
    blocker = lock_new(bc, "m.c");
    /* An explicit lease: no renewals muddle the script counts below. */
    assert_status(hilock_lock_try_acquire(blocker, 0, 60000), HILOCK_OK);

    assert_status(
        hilock_multilock_try_acquire(t.m, 0, 60000, res, sizeof *res, NULL),
        HILOCK_EBUSY);
    assert_int_equal(res[2].status, HILOCK_EBUSY);
    assert_true(res[0].status == HILOCK_OK ||
                res[0].status == HILOCK_ECANCELED);
    assert_true(res[1].status == HILOCK_OK ||
                res[1].status == HILOCK_ECANCELED);
    /* What was granted went back: the one-minute leases did not have to
     * run out for an outsider to take each member. */
    for (int i = 0; i < 2; i++) {
        assert_status(hilock_lock_try_acquire(t.out[i], hl_widen(3000), 60000),
                      HILOCK_OK);
        assert_status(hilock_lock_release(t.out[i]), HILOCK_OK);
    }
    assert_int_equal(master_int(0, "EXISTS", "m.a"), 0);
    assert_int_equal(master_int(0, "EXISTS", "m.b"), 0);
    /* On the blocked member's server only the blocker's hold is left. */
    assert_int_equal(master_int(1, "HLEN", "m.c"), 1);
    assert_status(hilock_multilock_release(t.m), HILOCK_ENOTOWNER);

    /* With a wait: refused while the blocker holds, taken once it lets
     * go. */
    cw.server = 1;
    cw.min = script_calls(1) + 1;
    acq_rec_init(&r);
    assert_status(hilock_multilock_acquire_async(t.m, 0xA11, hl_widen(10000),
                                                 HILOCK_LEASE_WATCHDOG,
                                                 on_acquired, &r, NULL),
                  HILOCK_OK);
    /* An attempt has reached the blocked member's server, where it was
     * refused. */
    if (!hl_wait_until(calls_reached, &cw, hl_widen(5000)))
        fail_msg("the waiting acquire never tried the blocked member");
    assert_false(atomic_load(&r.done));
    assert_status(hilock_lock_release(blocker), HILOCK_OK);
    acq_rec_wait(&r, hl_widen(15000));
    assert_status(r.status, HILOCK_OK);
    assert_true(r.attempts >= 2);
    assert_int_equal(r.granted, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(r.res[i].status, HILOCK_OK);
        assert_true(member_locked(&t, i));
    }
    assert_status(hilock_lock_try_acquire(blocker, 0, 60000), HILOCK_EBUSY);
    assert_status(release_as(t.m, 0xA11), HILOCK_OK);
    for (int i = 0; i < 3; i++)
        assert_false(member_locked(&t, i));

    lock_free(blocker);
    client_free(bc);
    trio_close(&t);
}

static bool trio_free(void *arg)
{
    for (int i = 0; i < 3; i++)
        if (member_locked(arg, i))
            return false;
    return true;
}

/* A cancel says whether it found the acquire: HILOCK_OK ends a waiting
 * one with HILOCK_ECANCELED before it returns, and an id that is done or
 * never was is HILOCK_ENOTFOUND, as for a single lock. */
static void test_multilock_cancel(void **state)
{
    hilock_client *bc;
    hilock_lock *blocker;
    static acq_rec r;
    uint64_t id = 0;
    trio t;

    (void)state;
    trio_open(&t, 0);
    bc = plain_client(1, 0);
    blocker = lock_new(bc, "m.c");
    assert_status(hilock_lock_try_acquire(blocker, 0, 60000), HILOCK_OK);

    acq_rec_init(&r);
    assert_status(hilock_multilock_acquire_async(t.m, 0xCA, HILOCK_WAIT_FOREVER,
                                                 HILOCK_LEASE_WATCHDOG,
                                                 on_acquired, &r, &id),
                  HILOCK_OK);
    assert_true(id != 0);
    assert_status(hilock_multilock_cancel(t.m, id + 1000), HILOCK_ENOTFOUND);
    assert_false(atomic_load(&r.done));
    assert_status(hilock_multilock_cancel(t.m, id), HILOCK_OK);
    /* The callback ran on the loop thread before the cancel returned. */
    assert_true(atomic_load(&r.done));
    assert_status(r.status, HILOCK_ECANCELED);
    assert_status(hilock_multilock_cancel(t.m, id), HILOCK_ENOTFOUND);
    /* What it was granted goes back: once the blocker lets go, nothing
     * of the group is held. */
    assert_status(hilock_lock_release(blocker), HILOCK_OK);
    if (!hl_wait_until(trio_free, &t, hl_widen(5000)))
        fail_msg("a cancelled acquire's grants were not given back");

    lock_free(blocker);
    client_free(bc);
    trio_close(&t);
}

static void test_multilock_lost_member(void **state)
{
    const int64_t watchdog = hl_widen(900);
    static hl_lost_rec gl;
    bool deleted = false;
    trio t;

    (void)state;
    hl_lost_rec_init(&gl, NULL);
    trio_open(&t, watchdog);
    assert_status(hilock_multilock_set_lost_callback(t.m, hl_record_group_lost,
                                                     &gl),
                  HILOCK_OK);
    assert_status(hilock_multilock_try_acquire(t.m, 0, HILOCK_LEASE_WATCHDOG,
                                               NULL, 0, NULL),
                  HILOCK_OK);
    for (int i = 0; i < 3; i++)
        assert_true(member_locked(&t, i));
    assert_false(group_lease_lost(t.m));

    /* One member taken away: the group needs all of them. */
    assert_status(hilock_lock_force_release(t.out[1], &deleted), HILOCK_OK);
    assert_true(deleted);
    if (!hl_wait_until(hl_lost_seen, &gl, 3 * (int)watchdog))
        fail_msg("no group lost callback within %lld ms of losing a member",
                 (long long)(3 * watchdog));
    assert_int_equal(atomic_load(&gl.owner), hilock_thread_owner());
    assert_true(group_lease_lost(t.m));
    assert_status(hilock_multilock_release(t.m), HILOCK_ELEASELOST);
    /* What was still held went back with that release. */
    for (int i = 0; i < 3; i++)
        assert_false(member_locked(&t, i));
    assert_int_equal(atomic_load(&gl.calls), 1);
    assert_status(hilock_multilock_release(t.m), HILOCK_ENOTOWNER);

    /* The group recovers. */
    assert_status(hilock_multilock_try_acquire(t.m, hl_widen(3000),
                                               HILOCK_LEASE_WATCHDOG, NULL, 0,
                                               NULL),
                  HILOCK_OK);
    assert_false(group_lease_lost(t.m));
    assert_status(hilock_multilock_release(t.m), HILOCK_OK);
    assert_int_equal(atomic_load(&gl.calls), 1);
    trio_close(&t);
}

typedef struct release_thread {
    pthread_t thread;
    hilock_multilock *m;
    int rc;
} release_thread;

static void *release_main(void *arg)
{
    release_thread *rt = arg;

    rt->rc = hilock_multilock_release(rt->m);
    return NULL;
}

static void test_multilock_reentry_and_ownership(void **state)
{
    release_thread rt;
    trio t;

    (void)state;
    trio_open(&t, 0);
    assert_status(hilock_multilock_try_acquire(t.m, 0, HILOCK_LEASE_WATCHDOG,
                                               NULL, 0, NULL),
                  HILOCK_OK);
    /* Again, as the one-lock acquire does: forever, with the watchdog. */
    assert_status(hilock_multilock_acquire(t.m), HILOCK_OK);
    assert_status(hilock_multilock_acquire(NULL), HILOCK_EINVAL);

    /* Another thread is another owner, holding nothing. */
    rt.m = t.m;
    rt.rc = -1;
    assert_int_equal(pthread_create(&rt.thread, NULL, release_main, &rt), 0);
    pthread_join(rt.thread, NULL);
    assert_status(rt.rc, HILOCK_ENOTOWNER);
    assert_status(release_as(t.m, 0x5EED), HILOCK_ENOTOWNER);

    /* Taken twice, so it stays held after one release. */
    assert_status(hilock_multilock_release(t.m), HILOCK_OK);
    for (int i = 0; i < 3; i++) {
        assert_true(member_locked(&t, i));
        assert_status(hilock_lock_try_acquire(t.out[i], 0, 60000),
                      HILOCK_EBUSY);
    }
    assert_status(hilock_multilock_release(t.m), HILOCK_OK);
    for (int i = 0; i < 3; i++)
        assert_false(member_locked(&t, i));
    assert_status(hilock_multilock_release(t.m), HILOCK_ENOTOWNER);

    /* Destroying the group leaves its members to their owner. */
    multi_free(t.m);
    assert_status(hilock_multilock_destroy(t.m), HILOCK_ECLOSED);
    t.m = NULL;
    assert_status(hilock_lock_try_acquire(t.l[0], 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_release(t.l[0]), HILOCK_OK);
    trio_close(&t);
}

static void test_bad_arguments(void **state)
{
    hilock_lock *many[HILOCK_MAX_MEMBERS + 1];
    hilock_multilock *m = (hilock_multilock *)&m;
    hilock_redlock *rl = (hilock_redlock *)&rl;
    hilock_client *c;
    hilock_lock *a, *b;
    char url[64];
    const char *urls[5];
    bool lost;
    static acq_rec r;

    (void)state;
    c = plain_client(0, 0);
    a = lock_new(c, "bad.a");
    b = lock_new(c, "bad.b");
    for (size_t i = 0; i <= HILOCK_MAX_MEMBERS; i++)
        many[i] = a;

    {
        hilock_lock *pair[2] = { a, b };
        hilock_lock *twice[3] = { a, b, a };
        hilock_lock *hole[2] = { a, NULL };

        assert_status(hilock_multilock_create(NULL, pair, 2), HILOCK_EINVAL);
        assert_status(hilock_multilock_create(&m, NULL, 2), HILOCK_EINVAL);
        assert_status(hilock_multilock_create(&m, pair, 0), HILOCK_EINVAL);
        assert_null(m);
        m = (hilock_multilock *)&m;
        assert_status(hilock_multilock_create(&m, many,
                                              HILOCK_MAX_MEMBERS + 1),
                      HILOCK_EINVAL);
        assert_null(m);
        assert_status(hilock_multilock_create(&m, twice, 3), HILOCK_EINVAL);
        assert_status(hilock_multilock_create(&m, hole, 2), HILOCK_EINVAL);
        assert_null(m);
        assert_status(hilock_multilock_create(&m, pair, 2), HILOCK_OK);
        own(OWN_MULTI, m);
    }

    assert_status(hilock_multilock_try_acquire(NULL, 0, 0, NULL, 0, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_multilock_try_acquire(m, -2, 0, NULL, 0, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_multilock_try_acquire(m, 0, -1, NULL, 0, NULL),
                  HILOCK_EINVAL);
    {
        /* Results of a later, larger struct: filled at the caller's
         * stride, what this version does not know zeroed; a stride below
         * this version's struct is refused before anything is sent. */
        struct {
            hilock_member_result r;
            unsigned char later[24];
        } wide[2];
        hilock_member_result narrow[2];
        memset(wide, 0xEE, sizeof wide);
        assert_status(hilock_multilock_try_acquire(m, 0, 60000, &wide[0].r,
                                                   sizeof wide[0], NULL),
                      HILOCK_OK);
        for (int i = 0; i < 2; i++) {
            assert_status(wide[i].r.status, HILOCK_OK);
            assert_true(wide[i].r.latency_us >= 0);
            for (size_t k = 0; k < sizeof wide[i].later; k++)
                assert_int_equal(wide[i].later[k], 0);
        }
        assert_status(hilock_multilock_release(m), HILOCK_OK);
        assert_status(hilock_multilock_try_acquire(m, 0, 60000, narrow,
                                                   sizeof narrow[0] - 1,
                                                   NULL),
                      HILOCK_EINVAL);
        assert_non_null(strstr(hilock_last_error(), "result_size"));
        assert_status(hilock_multilock_release(m), HILOCK_ENOTOWNER);
    }
    acq_rec_init(&r);
    assert_status(hilock_multilock_acquire_async(m, 0, 0, 0, on_acquired, &r,
                                                 NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_multilock_acquire_async(m, 1, 0, 0, NULL, NULL,
                                                 NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_multilock_acquire_async(NULL, 1, 0, 0, on_acquired,
                                                 &r, NULL),
                  HILOCK_EINVAL);
    assert_false(atomic_load(&r.done));
    assert_status(hilock_multilock_release(NULL), HILOCK_EINVAL);
    assert_status(hilock_multilock_release_async(m, 0, on_released, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_multilock_release_async(m, 1, NULL, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_multilock_lease_lost(m, NULL), HILOCK_EINVAL);
    assert_status(hilock_multilock_lease_lost(NULL, &lost), HILOCK_EINVAL);
    assert_status(hilock_multilock_set_lost_callback(NULL, NULL, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_multilock_cancel(NULL, 1), HILOCK_EINVAL);
    assert_status(hilock_multilock_destroy(NULL), HILOCK_EINVAL);
    multi_free(m);
    assert_status(hilock_multilock_destroy(m), HILOCK_ECLOSED);

    /* RedLock: an odd number of masters, 3 and up; nothing here is ever
     * connected to. */
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(masters[0]));
    for (int i = 0; i < 5; i++)
        urls[i] = url;
    assert_status(hilock_redlock_create(&rl, urls, 4, NULL), HILOCK_EINVAL);
    assert_null(rl);
    assert_status(hilock_redlock_create(&rl, urls, 2, NULL), HILOCK_EINVAL);
    assert_status(hilock_redlock_create(&rl, urls, 1, NULL), HILOCK_EINVAL);
    assert_status(hilock_redlock_create(&rl, urls, 0, NULL), HILOCK_EINVAL);
    assert_status(hilock_redlock_create(&rl, urls, HILOCK_MAX_MEMBERS + 1,
                                        NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_redlock_create(&rl, NULL, 3, NULL), HILOCK_EINVAL);
    assert_status(hilock_redlock_create(NULL, urls, 3, NULL), HILOCK_EINVAL);
    urls[1] = NULL;
    assert_status(hilock_redlock_create(&rl, urls, 3, NULL), HILOCK_EINVAL);
    urls[1] = "http://127.0.0.1:1";
    assert_status(hilock_redlock_create(&rl, urls, 3, NULL), HILOCK_EINVAL);
    assert_null(rl);
    assert_status(hilock_redlock_multilock_create(NULL, NULL, "x"),
                  HILOCK_EINVAL);
    assert_status(hilock_redlock_multilock_create(&m, NULL, "x"),
                  HILOCK_EINVAL);
    assert_status(hilock_redlock_destroy(NULL), HILOCK_EINVAL);
    assert_int_equal(hilock_redlock_masters(NULL), 0);
    assert_null(hilock_redlock_client(NULL, 0));

    lock_free(b);
    lock_free(a);
    client_free(c);
}

/* A RedLock lock refuses an empty name, and reports its masters. */
static void test_redlock_lock_arguments(void **state)
{
    rl_params p = basic_params();
    hilock_redlock *rl;
    hilock_multilock *m = NULL;

    (void)state;
    rl = redlock_new(&p);
    assert_int_equal(hilock_redlock_masters(rl), NMASTERS);
    for (size_t i = 0; i < NMASTERS; i++)
        assert_non_null(hilock_redlock_client(rl, i));
    assert_null(hilock_redlock_client(rl, NMASTERS));
    assert_status(hilock_redlock_multilock_create(&m, rl, ""), HILOCK_EINVAL);
    assert_status(hilock_redlock_multilock_create_n(&m, rl, NULL, 1),
                  HILOCK_EINVAL);
    redlock_free(rl);
}

/* Callbacks of a group's calls, and the thread each came on. */
typedef struct where_rec {
    pthread_t want; /* the coordinator's loop thread */
    atomic_int calls;
    atomic_int off_thread;
    int status;
} where_rec;

static void where_rec_init(where_rec *r, pthread_t want)
{
    memset(r, 0, sizeof *r);
    r->want = want;
    atomic_init(&r->calls, 0);
    atomic_init(&r->off_thread, 0);
    r->status = -1;
}

static void where_note(where_rec *r, int status)
{
    if (!pthread_equal(pthread_self(), r->want))
        atomic_fetch_add(&r->off_thread, 1);
    r->status = status;
    atomic_fetch_add(&r->calls, 1);
}

static void on_acquired_where(hilock_multilock *m, int status,
                              const hilock_multi_outcome *out, void *data)
{
    (void)m;
    (void)out;
    where_note(data, status);
}

static void on_released_where(hilock_multilock *m, int status, void *data)
{
    (void)m;
    where_note(data, status);
}

static void read_thread(hilock_client *c, void *arg)
{
    (void)c;
    *(pthread_t *)arg = pthread_self();
}

static bool member_c_asked(void *arg)
{
    trio *t = arg;

    return hl_read_pending(t->c1, t->l[2]).ops == 1;
}

static bool key_gone_on_1(void *arg)
{
    return master_int(1, "EXISTS", arg) == 0;
}

/* A trio whose group owner holds, and the coordinator's loop thread. */
static void trio_open_held(trio *t, uint64_t owner, pthread_t *coord_thread)
{
    static acq_rec held;

    trio_open(t, 0);
    hl_run_on_loop(t->c0, read_thread, coord_thread);
    acq_rec_init(&held);
    assert_status(hilock_multilock_acquire_async(t->m, owner, 0,
                                                 HILOCK_LEASE_WATCHDOG,
                                                 on_acquired, &held, NULL),
                  HILOCK_OK);
    acq_rec_wait(&held, hl_widen(10000));
    assert_status(held.status, HILOCK_OK);
}

/* The coordinator's client closes while a member on another client has
 * not answered an acquire and a release of the group: both end at once,
 * with HILOCK_ECLOSED, on the coordinator's loop thread, and the answers
 * that come after change nothing and call no one. */
static void test_multilock_coordinator_closes(void **state)
{
    static where_rec acq, rel;
    pthread_t coord_thread;
    trio t;

    (void)state;
    trio_open_held(&t, 0xC10, &coord_thread);

    /* "m.c" cannot answer while its server is stopped. */
    hl_fixture_pause(masters[1]);
    where_rec_init(&acq, coord_thread);
    where_rec_init(&rel, coord_thread);
    assert_status(hilock_multilock_release_async(t.m, 0xC10,
                                                 on_released_where, &rel),
                  HILOCK_OK);
    assert_status(hilock_multilock_acquire_async(t.m, 0xC11,
                                                 hl_widen(30000),
                                                 HILOCK_LEASE_WATCHDOG,
                                                 on_acquired_where, &acq,
                                                 NULL),
                  HILOCK_OK);
    /* Both reached "m.c": the release was asked first, on the same
     * connection. */
    if (!hl_wait_until(member_c_asked, &t, hl_widen(10000)))
        fail_msg("the acquire never asked m.c");
    client_free(t.c0);
    t.c0 = NULL;
    /* The closing itself ended both: nothing waits for "m.c". */
    assert_int_equal(atomic_load(&acq.calls), 1);
    assert_int_equal(atomic_load(&rel.calls), 1);

    /* The answers "m.c" owes come in: the release, then the acquire's
     * grant, which has to go back. */
    hl_fixture_resume(masters[1]);
    if (!hl_wait_until(key_gone_on_1, (void *)"m.c", hl_widen(10000)))
        fail_msg("the late grant of m.c was not given back");
    hl_run_on_loop(t.c1, NULL, NULL);
    assert_int_equal(atomic_load(&acq.calls), 1);
    assert_int_equal(atomic_load(&rel.calls), 1);
    assert_int_equal(atomic_load(&acq.off_thread), 0);
    assert_int_equal(atomic_load(&rel.off_thread), 0);
    assert_status(acq.status, HILOCK_ECLOSED);
    assert_status(rel.status, HILOCK_ECLOSED);
    trio_close(&t);
}

static bool member_a_free(void *arg)
{
    return !member_locked(arg, 0);
}

static bool release_answered(void *arg)
{
    return atomic_load(&((where_rec *)arg)->calls) > 0;
}

/* A group destroyed while its release still waits for a member, whose
 * coordinator then closes: the release ends then, with HILOCK_ECLOSED on
 * the coordinator's loop, rather than wait for an answer that can no
 * longer reach it. */
static void test_multilock_destroyed_mid_release(void **state)
{
    static where_rec rel;
    pthread_t coord_thread;
    trio t;

    (void)state;
    trio_open_held(&t, 0xC20, &coord_thread);

    hl_fixture_pause(masters[1]);
    where_rec_init(&rel, coord_thread);
    assert_status(hilock_multilock_release_async(t.m, 0xC20,
                                                 on_released_where, &rel),
                  HILOCK_OK);
    /* m.a is free again: the release asked every member, and "m.c"
     * cannot answer while its server is stopped. */
    if (!hl_wait_until(member_a_free, &t, hl_widen(10000)))
        fail_msg("the release never reached m.a");
    assert_int_equal(atomic_load(&rel.calls), 0);
    multi_free(t.m);
    t.m = NULL;
    client_free(t.c0);
    t.c0 = NULL;
    if (!hl_wait_until(release_answered, &rel, hl_widen(10000)))
        fail_msg("the release never answered after its coordinator "
                 "closed");
    assert_status(rel.status, HILOCK_ECLOSED);
    assert_int_equal(atomic_load(&rel.off_thread), 0);

    /* The answer "m.c" owes comes in, to no one. */
    hl_fixture_resume(masters[1]);
    if (!hl_wait_until(key_gone_on_1, (void *)"m.c", hl_widen(10000)))
        fail_msg("m.c was not released");
    hl_run_on_loop(t.c1, NULL, NULL);
    assert_int_equal(atomic_load(&rel.calls), 1);
    trio_close(&t);
}

static void master_config(int i, const char *name, const char *value)
{
    char r[256];

    if (hl_redis_server_cmd(masters[i], r, sizeof r, "CONFIG", "SET", name,
                            value, (char *)NULL) != '+')
        fail_msg("CONFIG SET %s %s on master %d: %s", name, value, i, r);
}

static hilock_client *timed_client(int server, int64_t watchdog_ms,
                                   int64_t command_ms)
{
    hilock_options *o = NULL;
    hilock_client *c = NULL;

    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_host(o, "127.0.0.1"), HILOCK_OK);
    assert_status(hilock_options_set_port(o,
                                          hl_redis_server_port(
                                              masters[server])),
                  HILOCK_OK);
    assert_status(hilock_options_set_watchdog_timeout_ms(o, watchdog_ms),
                  HILOCK_OK);
    assert_status(hl_set_valgrind_timeouts(o), HILOCK_OK);
    assert_status(hilock_options_set_command_timeout_ms(o, command_ms),
                  HILOCK_OK);
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    own(OWN_CLIENT, c);
    return c;
}

static bool key_gone_on_1(void *arg);

/* A round fails after one member granted, and giving that grant back
 * fails: the server refuses the release script (out of memory refuses
 * its first write) while still taking the renewals (PEXPIRE is allowed
 * then).  The member's client must stop renewing the hold, so the grant
 * expires on the server within one watchdog lease instead of being kept
 * alive for as long as the client runs. */
static void test_multilock_failed_give_back_expires(void **state)
{
    const int64_t watchdog = hl_widen(1200);
    static acq_rec r;
    hilock_client *c0, *c1;
    hilock_lock *l[3];
    hilock_multilock *m = NULL;

    (void)state;
    c0 = timed_client(0, watchdog, hl_widen(600));
    c1 = timed_client(1, watchdog, hl_widen(5000));
    l[0] = lock_new(c0, "g.a");
    l[1] = lock_new(c0, "g.b");
    l[2] = lock_new(c1, "g.c");
    assert_status(hilock_multilock_create(&m, l, 3), HILOCK_OK);
    own(OWN_MULTI, m);

    /* "g.a" and "g.b" cannot answer until their requests time out, which
     * leaves time to make master 1 refuse writes after "g.c" granted. */
    hl_fixture_pause(masters[0]);
    acq_rec_init(&r);
    assert_status(hilock_multilock_acquire_async(m, 0xD1, 0,
                                                 HILOCK_LEASE_WATCHDOG,
                                                 on_acquired, &r, NULL),
                  HILOCK_OK);
    wait_keys_present("g.c", 1u << 1, hl_widen(5000));
    master_config(1, "maxmemory", "1");
    acq_rec_wait(&r, hl_widen(10000));
    hl_fixture_resume(masters[0]);
    assert_int_not_equal(r.status, HILOCK_OK);
    assert_int_equal(r.res[2].status, HILOCK_OK);

    /* One lease after the failed give-back, the grant is gone; renewed,
     * it would stay. */
    if (!hl_wait_until(key_gone_on_1, (void *)"g.c", 2 * (int)watchdog))
        fail_msg("g.c still held %lld ms after its give-back failed",
                 (long long)(2 * watchdog));
    master_config(1, "maxmemory", "0");

    multi_free(m);
    for (int i = 0; i < 3; i++)
        lock_free(l[i]);
    client_free(c1);
    client_free(c0);
}

/* A client whose blocking calls give up soon: their limit is twice the
 * command timeout plus the connect timeout plus a second. */
static hilock_client *hasty_client(int server, int64_t *limit_ms)
{
    hilock_options *o = NULL;
    hilock_client *c = NULL;

    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_host(o, "127.0.0.1"), HILOCK_OK);
    assert_status(hilock_options_set_port(o,
                                          hl_redis_server_port(
                                              masters[server])),
                  HILOCK_OK);
    assert_status(hilock_options_set_connect_timeout_ms(o, 300), HILOCK_OK);
    assert_status(hilock_options_set_command_timeout_ms(o, 300), HILOCK_OK);
    assert_status(hl_set_valgrind_timeouts(o), HILOCK_OK);
    *limit_ms = 2 * hilock_options_command_timeout_ms(o) +
                hilock_options_connect_timeout_ms(o) + 1000;
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    own(OWN_CLIENT, c);
    return c;
}

typedef struct stall {
    pthread_t thread;
    hilock_client *c;
    int64_t ms;
    atomic_bool stalling;
} stall;

static void stall_loop(hilock_client *c, void *arg)
{
    stall *st = arg;
    struct timespec ts = { st->ms / 1000, (long)(st->ms % 1000) * 1000000 };

    (void)c;
    atomic_store(&st->stalling, true);
    nanosleep(&ts, NULL);
}

static void *stall_main(void *arg)
{
    stall *st = arg;

    hl_run_on_loop_within(st->c, stall_loop, st, (int)st->ms + 30000);
    return NULL;
}

static bool group_keys_gone(void *arg)
{
    (void)arg;
    return master_int(0, "EXISTS", "s.a") == 0 &&
           master_int(1, "EXISTS", "s.b") == 0;
}

/* The coordinator's loop thread answers a blocking acquire only after
 * the call's limit: the call fails with HILOCK_ETIMEDOUT, and the acquire
 * is cancelled before it returns, so the members it then asks go back
 * rather than make a hold for a thread that was told it has none. */
static void test_multilock_blocking_timeout_cancels(void **state)
{
    hilock_member_result res[2];
    hilock_client *c0, *c1;
    hilock_lock *l[2];
    hilock_multilock *m = NULL;
    int64_t limit_ms = 0, unused = 0;
    static stall st;

    (void)state;
    c0 = hasty_client(0, &limit_ms);
    c1 = hasty_client(1, &unused);
    l[0] = lock_new(c0, "s.a");
    l[1] = lock_new(c1, "s.b");
    assert_status(hilock_multilock_create(&m, l, 2), HILOCK_OK);
    own(OWN_MULTI, m);

    st.c = c0;
    st.ms = limit_ms + 1000;
    atomic_init(&st.stalling, false);
    assert_int_equal(pthread_create(&st.thread, NULL, stall_main, &st), 0);
    if (!hl_wait_flag(&st.stalling, hl_widen(5000)))
        fail_msg("the coordinator's loop never ran the stall");
    assert_status(hilock_multilock_try_acquire(m, 0, HILOCK_LEASE_WATCHDOG,
                                               res, sizeof *res, NULL),
                  HILOCK_ETIMEDOUT);
    pthread_join(st.thread, NULL);

    if (!hl_wait_until(group_keys_gone, NULL, hl_widen(5000)))
        fail_msg("a member granted to the timed-out call is still held");
    assert_status(hilock_multilock_release(m), HILOCK_ENOTOWNER);

    multi_free(m);
    for (int i = 0; i < 2; i++)
        lock_free(l[i]);
    client_free(c1);
    client_free(c0);
}

int main(void)
{
#define T5(fn) cmocka_unit_test_setup_teardown(fn, setup_five, teardown_masters)
#define T2(fn) cmocka_unit_test_setup_teardown(fn, setup_two, teardown_masters)
    const struct CMUnitTest tests[] = {
        T5(test_two_masters_killed),
        T5(test_three_masters_down),
        T5(test_paused_master),
        T5(test_no_quorum_beats_contention),
        T5(test_contention_with_two_down),
        T5(test_tool_no_quorum_exit),
        T5(test_quarantine_restarted_master),
        T5(test_quarantine_group_survives),
        cmocka_unit_test(test_validity_arithmetic),
        T5(test_lock_delay),
        T5(test_clock_jump),
        T5(test_mutual_exclusion_under_faults),
        T2(test_multilock_all_or_nothing),
        T2(test_multilock_cancel),
        T2(test_multilock_lost_member),
        T2(test_multilock_reentry_and_ownership),
        T2(test_multilock_coordinator_closes),
        T2(test_multilock_destroyed_mid_release),
        T2(test_multilock_failed_give_back_expires),
        T2(test_multilock_blocking_timeout_cancels),
        T2(test_bad_arguments),
        T5(test_redlock_lock_arguments),
    };
#undef T5
#undef T2

    return cmocka_run_group_tests(tests, NULL, NULL);
}
