/* Every lock kind on a real Redis Cluster (3 masters, 3 replicas).
 *
 * The slot test watches the masters with MONITOR while each kind is
 * taken, contended, renewed, queried and released, and checks that every
 * key and channel a command names, the ones its scripts name themselves
 * included, lies in the slot of the lock's name: a cluster refuses a
 * script whose keys span slots, and a channel elsewhere would be
 * published on a node its waiters do not listen on.  Names with hash
 * tags of their own are among them; names with braces but no hash tag,
 * whose keys cannot share a slot, are refused before anything is sent.
 * To see it catch a stray key, make a script publish on its channel
 * without the braces (HL_LUA_ANNOUNCE in kindkit.h): every kind fails.
 *
 * Then each kind's core cases with names on each master, multi-locks
 * across masters, segments spread over the masters, and the CLI. */
/* ctest-timeout: 240 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/transport/keyslot.h"
#include "hilock/hilock.h"
#include "support/cluster_util.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/monitor.h"

#ifndef HILOCK_TOOL_PATH
#error "HILOCK_TOOL_PATH must name the hilock executable"
#endif

static hl_redis_cluster *cluster;
static char reply[65536];

static int setup(void **state)
{
    (void)state;
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

/* A watchdog timeout short enough that a renewal comes within a test. */
#define WATCHDOG_MS 900

static hilock_client *client(void)
{
    return hl_fx_cluster_client(hl_redis_cluster_url(cluster), WATCHDOG_MS, 0);
}

/* The lock a test is at, for its failure messages. */
static const char *current = "";

/* A call that must succeed, with the library's detail when it did not. */
#define OK(call)                                                            \
    do {                                                                    \
        int ok_rc_ = (call);                                                \
        if (ok_rc_ != HILOCK_OK)                                            \
            fail_msg("%s (%s): %s: %s", #call, current, hilock_errname(ok_rc_), \
                     hilock_last_error());                                  \
    } while (0)

static int slot_of(const char *key)
{
    return (int)hl_keyslot(key, strlen(key));
}

static hl_redis_server *master(int i) { return hl_fx_master(cluster, i); }

static hl_redis_server *master_of_name(const char *name)
{
    return hl_fx_master_of(cluster, slot_of(name));
}

/* A name "<prefix>-<n>" whose slot m serves. */
static void name_on(hl_redis_server *m, const char *prefix, char *out,
                    size_t cap)
{
    hl_fx_key_on(cluster, m, prefix, out, cap);
}

/* The braces rule, written out here so that the test does not take the
 * library's word for it: "prefix:{NAME}", or "prefix:NAME" when NAME
 * holds a '{'. */
static void aux_key(const char *prefix, const char *name, char *out,
                    size_t cap)
{
    if (strchr(name, '{'))
        snprintf(out, cap, "%s:%s", prefix, name);
    else
        snprintf(out, cap, "%s:{%s}", prefix, name);
}

/* Whether a channel naming name has a subscriber on any master, sharded
 * or not: a waiter listens once its first attempt found the lock held. */
static bool listened_to(void *arg)
{
    const char *name = arg;
    static const char *const how[] = {"CHANNELS", "SHARDCHANNELS"};
    for (int i = 0; i < 3; i++)
        for (int h = 0; h < 2; h++)
            if (hl_redis_server_cmd(master(i), reply, sizeof reply, "PUBSUB",
                                    how[h], (char *)NULL) == '*' &&
                strstr(reply, name) != NULL)
                return true;
    return false;
}

static void expect_listened_to(const char *name)
{
    if (!hl_wait_until(listened_to, (void *)name, hl_widen(10000)))
        fail_msg("nobody came to wait on %s", name);
}

typedef struct renewed_probe {
    hilock_client *client;
    uint64_t after;
} renewed_probe;

static bool renewed(void *arg)
{
    renewed_probe *p = arg;
    hilock_client_stats st;
    assert_int_equal(hl_client_counters(p->client, &st), HILOCK_OK);
    return st.leases_renewed > p->after && st.leases_lost == 0;
}

/* Waits for the client's watchdog to confirm a renewal it had not yet. */
static void expect_renewal(hilock_client *c)
{
    hilock_client_stats st;
    assert_int_equal(hl_client_counters(c, &st), HILOCK_OK);
    renewed_probe p = {.client = c, .after = st.leases_renewed};
    if (!hl_wait_until(renewed, &p, hl_widen(5 * WATCHDOG_MS)))
        fail_msg("no renewal within five watchdog timeouts");
}

/* A blocking acquire on a thread of its own, as a waiter, which holds
 * what it got until told to release it (sync calls act for the calling
 * thread). */
typedef struct waiter {
    hilock_lock *lock;
    bool fenced;
    uint64_t token;
    int rc, release_rc;
    atomic_bool done, release, released;
    pthread_t thread;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    int64_t wait = hl_widen(15000);
    w->rc = w->fenced ? hilock_lock_acquire_fenced(w->lock, wait,
                                                   HILOCK_LEASE_WATCHDOG,
                                                   &w->token)
                      : hilock_lock_try_acquire(w->lock, wait,
                                                HILOCK_LEASE_WATCHDOG);
    atomic_store(&w->done, true);
    if (w->rc == HILOCK_OK && hl_wait_flag(&w->release, hl_widen(30000)))
        w->release_rc = hilock_lock_release(w->lock);
    atomic_store(&w->released, true);
    return NULL;
}

static void waiter_start(waiter *w, hilock_lock *lock, bool fenced)
{
    memset(w, 0, sizeof *w);
    w->lock = lock;
    w->fenced = fenced;
    atomic_init(&w->done, false);
    atomic_init(&w->release, false);
    atomic_init(&w->released, false);
    assert_int_equal(pthread_create(&w->thread, NULL, waiter_main, w), 0);
}

/* Waits for the waiter, which must have acquired. */
static void waiter_granted(waiter *w)
{
    assert_true(hl_wait_flag(&w->done, hl_widen(15000)));
    if (w->rc != HILOCK_OK) {
        pthread_join(w->thread, NULL);
        fail_msg("the waiter got %s", hilock_errname(w->rc));
    }
}

/* Has the waiter release its hold, and joins it. */
static void waiter_release(waiter *w)
{
    atomic_store(&w->release, true);
    assert_true(hl_wait_flag(&w->released, hl_widen(15000)));
    pthread_join(w->thread, NULL);
    assert_int_equal(w->release_rc, HILOCK_OK);
}

/* ---- the slot test --------------------------------------------------- */

#define MAX_SEEN_KEYS 256
#define MAX_ALLOWED 64

/* What the masters ran while a kind was exercised. */
typedef struct seen {
    int allowed[MAX_ALLOWED]; /* the slots its keys may lie in */
    int nallowed;
    int keyed;                /* commands that named keys */
    int from_lua;             /* of which scripts ran */
    int scripts;              /* scripts run */
    char keys[MAX_SEEN_KEYS][128];
    int nkeys;
    char bad[2048];
} seen;

static void seen_bad(seen *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void seen_bad(seen *s, const char *fmt, ...)
{
    size_t used = strlen(s->bad);
    if (used + 200 >= sizeof s->bad)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->bad + used, sizeof s->bad - used, fmt, ap);
    va_end(ap);
}

/* Which arguments of a command are keys or channels: their positions
 * into idx, their number returned; -1 for a command the table does not
 * know, which the test then reports rather than passing over. */
static int key_args(int argc, char *const *argv, int *idx, int cap)
{
    static const char *const keyless[] = {
        "time",   "ping",     "info",    "cluster", "echo",   "client",
        "hello",  "auth",     "select",  "script",  "asking", "readonly",
        "command", "config",  "quit",    "role",    "wait",   "waitaof",
        "multi",  "exec",     "dbsize",  "monitor", NULL};
    static const char *const first[] = {
        "hset",   "hget",    "hdel",     "hexists", "hgetall", "hincrby",
        "hkeys",
        "hlen",   "hmget",   "pexpire",  "expire",  "pttl",    "ttl",
        "incr",   "get",     "set",      "type",    "lindex",  "lpop",
        "lpos",   "lrange",  "lrem",     "rpush",   "lpush",   "llen",
        "sadd",   "srem",    "sismember", "smembers", "scard", "zadd",
        "zrange", "zrangebyscore", "zrem", "zremrangebyscore", "zscore",
        "zcard",  "zcount", "publish", "spublish", "pexpireat", NULL};
    static const char *const every[] = {
        "exists", "del", "unlink", "subscribe", "ssubscribe", "unsubscribe",
        "sunsubscribe", NULL};
    const char *c = argv[0];
    int n = 0;
    for (int i = 0; keyless[i]; i++)
        if (strcasecmp(c, keyless[i]) == 0)
            return 0;
    for (int i = 0; first[i]; i++)
        if (strcasecmp(c, first[i]) == 0) {
            if (argc < 2)
                return -1;
            idx[0] = 1;
            return 1;
        }
    int from = -1, to = argc;
    for (int i = 0; every[i]; i++)
        if (strcasecmp(c, every[i]) == 0)
            from = 1;
    if (strcasecmp(c, "pubsub") == 0 && argc >= 2) {
        if (strcasecmp(argv[1], "numsub") == 0 ||
            strcasecmp(argv[1], "shardnumsub") == 0)
            from = 2;
        else if (strcasecmp(argv[1], "channels") == 0 ||
                 strcasecmp(argv[1], "shardchannels") == 0 ||
                 strcasecmp(argv[1], "numpat") == 0)
            return 0;
    }
    if (strncasecmp(c, "eval", 4) == 0 || strncasecmp(c, "fcall", 5) == 0) {
        if (argc < 3)
            return -1;
        from = 3;
        to = 3 + atoi(argv[2]);
        if (to > argc)
            return -1;
    }
    if (from < 0)
        return -1;
    for (int i = from; i < to && n < cap; i++)
        idx[n++] = i;
    return n;
}

static void on_command(void *arg, bool from_lua, int argc, char *const *argv,
                       const size_t *lens)
{
    seen *s = arg;
    int idx[64];
    int n = key_args(argc, argv, idx, 64);
    if (n < 0) {
        seen_bad(s, "a command the test does not know: %s\n", argv[0]);
        return;
    }
    if (n == 0)
        return;
    /* A client's card and list of holds live in its own slot, apart
     * from every lock. */
    if (strncmp(argv[idx[0]], "hilock_client:{", 15) == 0 ||
        strncmp(argv[idx[0]], "hilock_holds:{", 14) == 0)
        return;
    s->keyed++;
    s->from_lua += from_lua;
    s->scripts += strncasecmp(argv[0], "eval", 4) == 0;
    int first = -1;
    for (int i = 0; i < n; i++) {
        const char *key = argv[idx[i]];
        int slot = (int)hl_keyslot(key, lens[idx[i]]);
        bool known = false;
        for (int k = 0; k < s->nkeys && !known; k++)
            known = strcmp(s->keys[k], key) == 0;
        if (!known && s->nkeys < MAX_SEEN_KEYS)
            snprintf(s->keys[s->nkeys++], sizeof s->keys[0], "%s", key);
        if (first < 0)
            first = slot;
        else if (slot != first)
            seen_bad(s, "%s (slot %d) beside keys of another slot\n", key,
                     slot);
        bool allowed = false;
        for (int a = 0; a < s->nallowed; a++)
            allowed |= s->allowed[a] == slot;
        if (!allowed)
            seen_bad(s, "%s in slot %d, not the lock's\n", key, slot);
    }
}

static hl_monitor *monitors[3];

static void watch_start(seen *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 3; i++)
        monitors[i] = hl_monitor_open(master(i));
}

static void allow(seen *s, const char *name)
{
    assert_true(s->nallowed < MAX_ALLOWED);
    s->allowed[s->nallowed++] = slot_of(name);
}

/* Reads what the masters ran, and fails with every key seen when one was
 * out of place. */
static void watch_end(seen *s, const char *what)
{
    for (int i = 0; i < 3; i++) {
        hl_monitor_drain(monitors[i], on_command, s);
        hl_monitor_close(monitors[i]);
        monitors[i] = NULL;
    }
    if (s->bad[0] != '\0') {
        fprintf(stderr, "keys of %s:\n", what);
        for (int k = 0; k < s->nkeys; k++)
            fprintf(stderr, "  %s (slot %d)\n", s->keys[k],
                    slot_of(s->keys[k]));
        fail_msg("%s:\n%s", what, s->bad);
    }
    /* The scripts ran where MONITOR saw them. */
    assert_true(s->keyed > 0);
    assert_true(s->from_lua > 0);
}

static void expect_key_seen(const seen *s, const char *key)
{
    for (int k = 0; k < s->nkeys; k++)
        if (strcmp(s->keys[k], key) == 0)
            return;
    fail_msg("%s was never touched", key);
}

static void expect_key_seen_with(const seen *s, const char *part)
{
    for (int k = 0; k < s->nkeys; k++)
        if (strstr(s->keys[k], part) != NULL)
            return;
    fail_msg("no key holding %s was touched", part);
}

typedef int make_fn(hilock_lock **out, hilock_client *client,
                    const char *name, size_t name_len);

/* One holder on one client, one waiter on another: take, renew, query,
 * wait, hand over, release, force release. */
static void exercise(make_fn *holder_kind, make_fn *waiter_kind,
                     const char *name, bool fenced)
{
    current = name;
    hilock_client *a = client(), *b = client();
    hilock_lock *h = NULL, *w = NULL;
    assert_int_equal(holder_kind(&h, a, name, strlen(name)), HILOCK_OK);
    assert_int_equal(waiter_kind(&w, b, name, strlen(name)), HILOCK_OK);
    uint64_t token = 0;
    if (fenced)
        OK(hilock_lock_acquire_fenced(h, 0, HILOCK_LEASE_WATCHDOG, &token));
    else
        OK(hilock_lock_try_acquire(h, 0, HILOCK_LEASE_WATCHDOG));
    expect_renewal(a);

    waiter wt;
    waiter_start(&wt, w, fenced);
    expect_listened_to(name);
    assert_false(atomic_load(&wt.done));
    hilock_lock_status *st = NULL;
    assert_int_equal(hilock_lock_status_get(h, &st), HILOCK_OK);
    assert_true(st->locked);
    hilock_lock_status_free(st);

    assert_int_equal(hilock_lock_release(h), HILOCK_OK);
    waiter_granted(&wt);
    if (fenced)
        assert_true(wt.token > token);
    expect_renewal(b);
    assert_int_equal(hilock_lock_status_get(w, &st), HILOCK_OK);
    hilock_lock_status_free(st);
    waiter_release(&wt);

    /* Force release, once of a hold and once of nothing. */
    bool deleted = false;
    assert_int_equal(hilock_lock_try_acquire(w, 0, 30000), HILOCK_OK);
    assert_int_equal(hilock_lock_force_release(h, &deleted), HILOCK_OK);
    assert_true(deleted);
    assert_int_equal(hilock_lock_force_release(h, &deleted), HILOCK_OK);
    assert_false(deleted);
    hilock_lock_destroy(h);
    hilock_lock_destroy(w);
    hilock_client_destroy(a);
    hilock_client_destroy(b);
}

/* Names as users write them, and names with hash tags of their own: in
 * the middle, and two (the first counts). */
static const char *const slot_names[] = {"plain", "a{b}c", "{p}q{r}s",
                                         "{t}{u}"};
#define SLOT_NAMES (sizeof slot_names / sizeof slot_names[0])

/* Names with braces but no hash tag: an empty tag, an open brace alone,
 * braces the wrong way round, a closing brace alone.  Such a name counts
 * whole, and the keys the braces rule derives from it ("prefix:NAME", or
 * "prefix:{NAME}" around a lone '}') lie in other slots, for Redisson as
 * for us. */
static const char *const untagged_names[] = {"{}x", "{x", "x}{y", "x}y"};
#define UNTAGGED_NAMES (sizeof untagged_names / sizeof untagged_names[0])

static void kind_name(char *out, size_t cap, const char *kind,
                      const char *base)
{
    snprintf(out, cap, "slot-%s-%s", kind, base);
}

static void test_slots_reentrant_and_fenced(void **state)
{
    (void)state;
    for (size_t i = 0; i < SLOT_NAMES; i++) {
        char name[64], key[128];
        kind_name(name, sizeof name, "lock", slot_names[i]);
        seen s;
        watch_start(&s);
        allow(&s, name);
        exercise(hilock_lock_create_n, hilock_lock_create_n, name, true);
        watch_end(&s, name);
        expect_key_seen(&s, name);
        aux_key("redisson_lock__channel", name, key, sizeof key);
        expect_key_seen(&s, key);
        aux_key("redisson_lock_token", name, key, sizeof key);
        expect_key_seen(&s, key);
    }
}

static void test_slots_fair(void **state)
{
    (void)state;
    for (size_t i = 0; i < SLOT_NAMES; i++) {
        char name[64], key[128];
        kind_name(name, sizeof name, "fair", slot_names[i]);
        seen s;
        watch_start(&s);
        allow(&s, name);
        exercise(hilock_fair_lock_create_n, hilock_fair_lock_create_n, name,
                 false);
        watch_end(&s, name);
        expect_key_seen(&s, name);
        aux_key("redisson_lock_queue", name, key, sizeof key);
        expect_key_seen(&s, key);
        aux_key("redisson_lock_timeout", name, key, sizeof key);
        expect_key_seen(&s, key);
        aux_key("hilock_fair_alive", name, key, sizeof key);
        expect_key_seen(&s, key);
        /* The waiter's own channel. */
        aux_key("redisson_lock__channel", name, key, sizeof key);
        strcat(key, ":");
        expect_key_seen_with(&s, key);
    }
}

static void test_slots_read_write(void **state)
{
    (void)state;
    for (size_t i = 0; i < SLOT_NAMES; i++) {
        char name[64], key[128];
        kind_name(name, sizeof name, "rw", slot_names[i]);
        seen s;
        watch_start(&s);
        allow(&s, name);
        /* A writer waits for a reader, then a reader for a writer. */
        exercise(hilock_read_lock_create_n, hilock_write_lock_create_n, name,
                 false);
        exercise(hilock_write_lock_create_n, hilock_read_lock_create_n, name,
                 false);
        watch_end(&s, name);
        expect_key_seen(&s, name);
        aux_key("redisson_rwlock", name, key, sizeof key);
        expect_key_seen(&s, key);
        aux_key("hilock_rwlock_writers", name, key, sizeof key);
        expect_key_seen(&s, key);
        expect_key_seen_with(&s, ":rwlock_timeout:");
    }
}

/* Members on the three masters, with braces or without: each command
 * stays within one member's slot. */
static void test_slots_multilock(void **state)
{
    (void)state;
    char names[4][128];
    name_on(master(0), "slot-multi", names[0], 64);
    name_on(master(1), "slot-multi", names[1], sizeof names[1]);
    name_on(master(2), "slot-multi", names[2], sizeof names[2]);
    snprintf(names[3], sizeof names[3], "slot-multi-{%.64s}-rw", names[0]);
    seen s;
    watch_start(&s);
    hilock_client *a = client(), *b = client();
    hilock_lock *locks[4], *other = NULL;
    assert_int_equal(hilock_lock_create(&locks[0], a, names[0]), HILOCK_OK);
    assert_int_equal(hilock_fair_lock_create(&locks[1], a, names[1]),
                     HILOCK_OK);
    assert_int_equal(hilock_write_lock_create(&locks[2], a, names[2]),
                     HILOCK_OK);
    assert_int_equal(hilock_read_lock_create(&locks[3], a, names[3]),
                     HILOCK_OK);
    for (int i = 0; i < 4; i++)
        allow(&s, names[i]);
    hilock_multilock *m = NULL;
    assert_int_equal(hilock_multilock_create(&m, locks, 4), HILOCK_OK);
    assert_int_equal(hilock_multilock_try_acquire(m, 0, HILOCK_LEASE_WATCHDOG,
                                                  NULL, 0, NULL),
                     HILOCK_OK);
    expect_renewal(a);
    assert_int_equal(hilock_multilock_release(m), HILOCK_OK);
    /* One member held elsewhere: the others are given back. */
    assert_int_equal(hilock_write_lock_create(&other, b, names[2]),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(other, 0, 30000), HILOCK_OK);
    assert_int_equal(hilock_multilock_try_acquire(m, 0, 30000, NULL, 0, NULL),
                     HILOCK_EBUSY);
    assert_int_equal(hilock_lock_release(other), HILOCK_OK);
    hilock_multilock_destroy(m);
    for (int i = 0; i < 4; i++)
        hilock_lock_destroy(locks[i]);
    hilock_lock_destroy(other);
    hilock_client_destroy(a);
    hilock_client_destroy(b);
    watch_end(&s, "multi-lock");
    for (int i = 0; i < 4; i++)
        expect_key_seen(&s, names[i]);
}

/* Segments, each a lock of its own name, one held by the watchdog while
 * another client waits for it. */
/* On a cluster, a lock whose name has braces but no hash tag is refused
 * before anything is sent: its keys could not share a slot.  Nothing is
 * taken and no script runs, whatever the kind. */
static void test_slots_untagged_names_refused(void **state)
{
    (void)state;
    make_fn *kinds[] = {hilock_lock_create_n, hilock_fair_lock_create_n,
                        hilock_read_lock_create_n, hilock_write_lock_create_n};
    for (size_t i = 0; i < UNTAGGED_NAMES; i++) {
        char name[64];
        kind_name(name, sizeof name, "untagged", untagged_names[i]);
        seen s;
        watch_start(&s);
        hilock_client *a = client();
        for (size_t k = 0; k < 4; k++) {
            hilock_lock *l = NULL;
            assert_int_equal(kinds[k](&l, a, name, strlen(name)), HILOCK_OK);
            int rc = hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG);
            if (rc != HILOCK_EINVAL ||
                strstr(hilock_last_error(), "hash tag") == NULL)
                fail_msg("%s, kind %zu: %s: %s", name, k,
                         hilock_errname(rc), hilock_last_error());
            bool held = true;
            assert_int_equal(hilock_lock_is_held_by_me(l, &held), HILOCK_OK);
            assert_false(held);
            /* Nor do the calls that read or clear the lock's other keys
             * reach the server, to earn a CROSSSLOT there. */
            hilock_lock_status *st = NULL;
            rc = hilock_lock_status_get(l, &st);
            if (rc != HILOCK_EINVAL ||
                strstr(hilock_last_error(), "hash tag") == NULL)
                fail_msg("%s, kind %zu, status: %s: %s", name, k,
                         hilock_errname(rc), hilock_last_error());
            bool deleted = true;
            rc = hilock_lock_force_release(l, &deleted);
            if (rc != HILOCK_EINVAL ||
                strstr(hilock_last_error(), "hash tag") == NULL)
                fail_msg("%s, kind %zu, force release: %s: %s", name, k,
                         hilock_errname(rc), hilock_last_error());
            hilock_lock_destroy(l);
        }
        hilock_client_destroy(a);
        for (int m = 0; m < 3; m++) {
            hl_monitor_drain(monitors[m], on_command, &s);
            hl_monitor_close(monitors[m]);
            monitors[m] = NULL;
        }
        /* Only the queries of whether it is held ran. */
        if (s.scripts != 0 || s.from_lua != 0)
            fail_msg("%s: %d scripts ran", name, s.scripts);
    }
    /* A single server keeps every key anyway: there such names work, as
     * they do for Redisson. */
    hl_redis_server *plain = hl_fixture_plain();
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(plain));
    hilock_options *o = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    hilock_client *c = NULL;
    OK(hilock_client_create(&c, o));
    hilock_options_free(o);
    for (size_t i = 0; i < UNTAGGED_NAMES; i++)
        for (size_t k = 0; k < 4; k++) {
            hilock_lock *l = NULL;
            const char *name = untagged_names[i];
            current = name;
            OK(kinds[k](&l, c, name, strlen(name)));
            OK(hilock_lock_try_acquire(l, 0, 30000));
            OK(hilock_lock_release(l));
            hilock_lock_destroy(l);
        }
    hilock_client_destroy(c);
    hl_redis_server_stop(plain);
}

static void test_slots_segmented(void **state)
{
    (void)state;
    static const char *const bases[] = {"slot-seg", "slot-seg-{t}"};
    for (size_t b = 0; b < 2; b++) {
        seen s;
        watch_start(&s);
        hilock_client *a = client();
        hilock_segmented *set = NULL;
        assert_int_equal(hilock_segmented_create(&set, a, bases[b], 4),
                         HILOCK_OK);
        for (unsigned i = 0; i < 4; i++) {
            char seg[64];
            snprintf(seg, sizeof seg, "%s:seg:%u", bases[b], i);
            allow(&s, seg);
            hilock_lock *l = hilock_segmented_lock(set, i);
            assert_string_equal(hilock_lock_name(l, NULL), seg);
            assert_int_equal(hilock_lock_try_acquire(l, 0,
                                                     HILOCK_LEASE_WATCHDOG),
                             HILOCK_OK);
        }
        expect_renewal(a);
        for (unsigned i = 0; i < 4; i++)
            assert_int_equal(hilock_lock_release(hilock_segmented_lock(set,
                                                                       i)),
                             HILOCK_OK);
        hilock_segmented_destroy(set);
        hilock_client_destroy(a);
        watch_end(&s, bases[b]);
    }
}

/* ---- each kind on every master ------------------------------------- */

static long long on_master_int(hl_redis_server *m, const char *a0,
                               const char *a1)
{
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, a0, a1,
                                         (char *)NULL), ':');
    return atoll(reply + 1);
}

typedef struct llen_probe {
    hl_redis_server *master;
    const char *key;
    long long want;
} llen_probe;

static bool llen_reached(void *arg)
{
    llen_probe *p = arg;
    return on_master_int(p->master, "LLEN", p->key) == p->want;
}

/* Waiters on a fair lock named on each master are served in the order
 * they came, each release waking the next in line. */
static void test_fair_order_on_every_master(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        hl_redis_server *m = master(i);
        char name[64], queue[128];
        name_on(m, "fair", name, sizeof name);
        current = name;
        aux_key("redisson_lock_queue", name, queue, sizeof queue);
        hilock_client *a = client(), *b = client();
        hilock_lock *h = NULL, *w[3];
        OK(hilock_fair_lock_create(&h, a, name));
        OK(hilock_lock_try_acquire(h, 0, HILOCK_LEASE_WATCHDOG));
        assert_int_equal(on_master_int(m, "EXISTS", name), 1);
        waiter wt[3];
        for (int k = 0; k < 3; k++) {
            OK(hilock_fair_lock_create(&w[k], b, name));
            waiter_start(&wt[k], w[k], false);
            llen_probe p = {m, queue, k + 1};
            assert_true(hl_wait_until(llen_reached, &p, hl_widen(10000)));
        }
        OK(hilock_lock_release(h));
        for (int k = 0; k < 3; k++) {
            waiter_granted(&wt[k]);
            /* The ones behind still wait, in line. */
            for (int later = k + 1; later < 3; later++)
                assert_false(atomic_load(&wt[later].done));
            assert_int_equal(on_master_int(m, "LLEN", queue), 2 - k);
            waiter_release(&wt[k]);
        }
        assert_int_equal(on_master_int(m, "EXISTS", name), 0);
        assert_int_equal(on_master_int(m, "EXISTS", queue), 0);
        hilock_lock_destroy(h);
        for (int k = 0; k < 3; k++)
            hilock_lock_destroy(w[k]);
        hilock_client_destroy(a);
        hilock_client_destroy(b);
    }
}

/* Requests to give a lock up, on each master: the holder listens on its
 * lock's master (sharded), hears the request another client sends, and
 * stops listening once it released. */
typedef struct shard_probe {
    hl_redis_server *m;
    const char *channel;
    long long want;
} shard_probe;

static bool shard_listeners_are(void *arg)
{
    shard_probe *p = arg;
    return hl_fixture_shardnumsub(p->m, p->channel) == p->want;
}

static void on_asked(hilock_lock *lock, uint64_t owner, const char *reason,
                     size_t len, void *data)
{
    (void)lock, (void)owner;
    if (len == 4 && memcmp(reason, "move", 4) == 0)
        atomic_fetch_add((atomic_int *)data, 1);
}

static void test_release_request_on_every_master(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        hl_redis_server *m = master(i);
        char name[64], channel[128];
        name_on(m, "asked", name, sizeof name);
        current = name;
        snprintf(channel, sizeof channel, "hilock_release_request:{%s}",
                 name);
        hilock_client *a = client(), *b = client();
        hilock_lock *held = NULL, *asker = NULL;
        atomic_int heard_move = 0;
        OK(hilock_lock_create(&held, a, name));
        OK(hilock_lock_create(&asker, b, name));
        OK(hilock_lock_set_release_request_callback(held, on_asked,
                                                    &heard_move));
        OK(hilock_lock_try_acquire(held, 0, HILOCK_LEASE_WATCHDOG));
        shard_probe p = {m, channel, 1};
        assert_true(hl_wait_until(shard_listeners_are, &p, hl_widen(10000)));
        int64_t heard = 0;
        OK(hilock_lock_request_release(asker, "move", &heard));
        assert_int_equal(heard, 1);
        hl_expect_count(&heard_move, 1, hl_widen(5000));
        OK(hilock_lock_release(held));
        p.want = 0;
        assert_true(hl_wait_until(shard_listeners_are, &p, hl_widen(10000)));
        OK(hilock_lock_request_release(asker, "move", &heard));
        assert_int_equal(heard, -1);
        hilock_lock_destroy(held);
        hilock_lock_destroy(asker);
        hilock_client_destroy(a);
        hilock_client_destroy(b);
    }
}

/* A condition on each master: the waiter's line and wake-up channel are
 * in its lock's slot (sharded), and a signal from another client wakes
 * it holding the lock again. */
static void on_cond_waited(hilock_cond *cond, int status, uint64_t token,
                           void *data)
{
    (void)cond, (void)token;
    atomic_store((atomic_int *)data, status == HILOCK_OK ? 1 : -1);
}

static void test_cond_on_every_master(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        hl_redis_server *m = master(i);
        char name[64], line[128];
        name_on(m, "cv", name, sizeof name);
        current = name;
        snprintf(line, sizeof line, "hilock_cond_line:{%s}:ready", name);
        hilock_client *a = client(), *b = client();
        hilock_lock *la = NULL, *lb = NULL;
        hilock_cond *ca = NULL, *cb = NULL;
        OK(hilock_lock_create(&la, a, name));
        OK(hilock_lock_create(&lb, b, name));
        OK(hilock_cond_create(&ca, la, "ready"));
        OK(hilock_cond_create(&cb, lb, "ready"));
        OK(hilock_lock_acquire_as(la, 21, 0, HILOCK_LEASE_WATCHDOG, 0, NULL));
        atomic_int woke = 0;
        OK(hilock_cond_wait_async(ca, 21, HILOCK_WAIT_FOREVER, on_cond_waited,
                                  &woke, NULL));
        llen_probe p = {m, line, 1};
        assert_true(hl_wait_until(llen_reached, &p, hl_widen(10000)));
        assert_int_equal(on_master_int(m, "EXISTS", name), 0);
        int64_t woken = 0;
        OK(hilock_cond_signal(cb, &woken));
        assert_int_equal(woken, 1);
        hl_expect_count(&woke, 1, hl_widen(10000));
        assert_int_equal(on_master_int(m, "EXISTS", name), 1);
        OK(hilock_lock_release_as(la, 21));
        hilock_cond_destroy(ca);
        hilock_cond_destroy(cb);
        hilock_lock_destroy(la);
        hilock_lock_destroy(lb);
        hilock_client_destroy(a);
        hilock_client_destroy(b);
    }
}

static void expect_mode(hl_redis_server *m, const char *name,
                        const char *mode)
{
    char want[32];
    snprintf(want, sizeof want, "$%zu\r\n%s\r\n", strlen(mode), mode);
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "HGET", name,
                                         "mode", (char *)NULL), '$');
    assert_string_equal(reply, want);
}

/* A read-write lock named on each master: readers share it, a writer
 * waits until the last reader left, and readers wait for the writer. */
static void test_read_write_on_every_master(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        hl_redis_server *m = master(i);
        char name[64];
        name_on(m, "rw", name, sizeof name);
        current = name;
        hilock_client *a = client(), *b = client(), *c = client();
        hilock_lock *r1 = NULL, *r2 = NULL, *wr = NULL;
        OK(hilock_read_lock_create(&r1, a, name));
        OK(hilock_read_lock_create(&r2, b, name));
        OK(hilock_write_lock_create(&wr, c, name));
        /* Two readers at once. */
        OK(hilock_lock_try_acquire(r1, 0, HILOCK_LEASE_WATCHDOG));
        waiter reader2;
        waiter_start(&reader2, r2, false);
        waiter_granted(&reader2);
        expect_mode(m, name, "read");
        assert_int_equal(on_master_int(m, "HLEN", name), 3);
        /* The writer waits for both. */
        waiter writer;
        waiter_start(&writer, wr, false);
        expect_listened_to(name);
        OK(hilock_lock_release(r1));
        expect_mode(m, name, "read");
        assert_false(atomic_load(&writer.done));
        waiter_release(&reader2);
        waiter_granted(&writer);
        expect_mode(m, name, "write");
        /* Now a reader waits for the writer. */
        waiter reader1;
        waiter_start(&reader1, r1, false);
        expect_listened_to(name);
        assert_false(atomic_load(&reader1.done));
        waiter_release(&writer);
        waiter_granted(&reader1);
        expect_mode(m, name, "read");
        waiter_release(&reader1);
        assert_int_equal(on_master_int(m, "EXISTS", name), 0);
        hilock_lock_destroy(r1);
        hilock_lock_destroy(r2);
        hilock_lock_destroy(wr);
        hilock_client_destroy(a);
        hilock_client_destroy(b);
        hilock_client_destroy(c);
    }
}

/* A client that attempts again only every 40 s while it waits (waiter
 * timeout 120 s), so that no renewal of a place lands in a count, even
 * on a busy machine. */
static hilock_client *patient_client(void)
{
    hilock_options *o = NULL;
    hilock_client *c = NULL;
    OK(hilock_options_create(&o));
    OK(hilock_options_set_url(o, hl_redis_cluster_url(cluster)));
    OK(hilock_options_set_waiter_timeout_ms(o, 120000));
    int rc = hilock_client_create(&c, o);
    hilock_options_free(o);
    OK(rc);
    return c;
}

static long long scripts_run(hl_redis_server *m);

#define HERD_READERS 3

/* On a cluster every release promises (no write there goes out alone),
 * and our readers listen on the sharded channel beside the writers: a
 * hand-off between two writers wakes none of them, as SHARDNUMSUB less
 * their places says.  The first writer was told it was first in line and
 * listens there too, so the hand-off to it may wake them once; the
 * second was never told so. */
static void test_read_write_promised_handoff_wakes_no_reader(void **state)
{
    (void)state;
    hl_redis_server *m = master(1);
    char name[64];
    name_on(m, "rw-herd", name, sizeof name);
    current = name;
    hilock_client *h = patient_client(), *w[2], *r[HERD_READERS];
    hilock_lock *lh = NULL, *lw[2], *lr[HERD_READERS];
    static hl_acquire_rec wrec[2], rrec[HERD_READERS];

    OK(hilock_write_lock_create(&lh, h, name));
    OK(hilock_lock_try_acquire(lh, 0, HILOCK_LEASE_WATCHDOG));
    for (int i = 0; i < 2; i++) {
        w[i] = patient_client();
        OK(hilock_write_lock_create(&lw[i], w[i], name));
        hl_acquire_rec_init(&wrec[i], w[i]);
        OK(hilock_lock_acquire_async(lw[i], 1, HILOCK_WAIT_FOREVER,
                                     HILOCK_LEASE_WATCHDOG, 0,
                                     hl_record_acquire, &wrec[i], NULL));
        hl_expect_idle(w[i], lw[i], 1);
    }
    for (int i = 0; i < HERD_READERS; i++) {
        r[i] = patient_client();
        OK(hilock_read_lock_create(&lr[i], r[i], name));
        hl_acquire_rec_init(&rrec[i], r[i]);
        OK(hilock_lock_acquire_async(lr[i], 2, HILOCK_WAIT_FOREVER,
                                     HILOCK_LEASE_WATCHDOG, 0,
                                     hl_record_acquire, &rrec[i], NULL));
        hl_expect_idle(r[i], lr[i], 1);
    }

    OK(hilock_lock_release(lh));
    assert_int_equal(hl_expect_acquire(&wrec[0]), HILOCK_OK);
    for (int i = 0; i < HERD_READERS; i++)
        hl_expect_idle(r[i], lr[i], 1);

    long long before = scripts_run(m);
    OK(hilock_lock_release_as(lw[0], 1));
    assert_int_equal(hl_expect_acquire(&wrec[1]), HILOCK_OK);
    for (int i = 0; i < HERD_READERS; i++) {
        hl_expect_idle(r[i], lr[i], 1);
        assert_int_equal(atomic_load(&rrec[i].calls), 0);
    }
    /* The release, and the promised writer's attempt. */
    assert_int_equal(scripts_run(m) - before, 2);
    expect_mode(m, name, "write");

    OK(hilock_lock_release_as(lw[1], 1));
    for (int i = 0; i < HERD_READERS; i++)
        assert_int_equal(hl_expect_acquire(&rrec[i]), HILOCK_OK);
    expect_mode(m, name, "read");
    for (int i = 0; i < HERD_READERS; i++) {
        OK(hilock_lock_release_as(lr[i], 2));
        hilock_lock_destroy(lr[i]);
        hilock_client_destroy(r[i]);
    }
    assert_int_equal(on_master_int(m, "EXISTS", name), 0);
    for (int i = 0; i < 2; i++) {
        hilock_lock_destroy(lw[i]);
        hilock_client_destroy(w[i]);
    }
    hilock_lock_destroy(lh);
    hilock_client_destroy(h);
}

/* Tokens of a name on each master only grow, from one client to the
 * next, and their counter lives on that master. */
static void test_fencing_on_every_master(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        hl_redis_server *m = master(i);
        char name[64], counter[128];
        name_on(m, "fence", name, sizeof name);
        current = name;
        aux_key("redisson_lock_token", name, counter, sizeof counter);
        hilock_client *a = client(), *b = client();
        hilock_lock *la = NULL, *lb = NULL;
        OK(hilock_lock_create(&la, a, name));
        OK(hilock_lock_create(&lb, b, name));
        uint64_t last = 0;
        for (int round = 0; round < 3; round++) {
            hilock_lock *l = round % 2 ? lb : la;
            uint64_t token = 0;
            OK(hilock_lock_acquire_fenced(l, 0, 30000, &token));
            assert_true(token > last);
            last = token;
            assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply,
                                                 "GET", counter,
                                                 (char *)NULL), '$');
            OK(hilock_lock_release(l));
        }
        hilock_lock_destroy(la);
        hilock_lock_destroy(lb);
        hilock_client_destroy(a);
        hilock_client_destroy(b);
    }
}

/* ---- lock delay --------------------------------------------------------- */

/* A key's PTTL went up since the lowest seen: something renewed it. */
typedef struct pttl_rise {
    hl_redis_server *m;
    const char *key;
    long long low;
} pttl_rise;

static bool pttl_rose(void *arg)
{
    pttl_rise *r = arg;
    long long now = on_master_int(r->m, "PTTL", r->key);
    if (now > 0 && now > r->low + 100)
        return true;
    if (now > 0 && now < r->low)
        r->low = now;
    return false;
}

/* A client with a lock delay holds a reentrant and a fair lock on each
 * master under the watchdog: its renewals, which name each lock's delay
 * key beside it, keep both alive on the lock's slot (a cluster refuses a
 * script whose keys span slots), and its releases delete them. */
static void test_lock_delay_on_every_master(void **state)
{
    (void)state;
    char url[512];
    const char *base = hl_redis_cluster_url(cluster);
    snprintf(url, sizeof url, "%s%clock_delay=1500", base,
             strchr(base, '?') ? '&' : '?');
    hilock_client *c = hl_fx_cluster_client(url, WATCHDOG_MS, 0);
    for (int i = 0; i < 3; i++) {
        hl_redis_server *m = master(i);
        char names[2][64], keys[2][128];
        hilock_lock *l[2] = {NULL, NULL};
        name_on(m, "delay", names[0], sizeof names[0]);
        name_on(m, "delay-fair", names[1], sizeof names[1]);
        current = names[0];
        OK(hilock_lock_create(&l[0], c, names[0]));
        OK(hilock_fair_lock_create(&l[1], c, names[1]));
        for (int k = 0; k < 2; k++) {
            aux_key("hilock_lock_delay", names[k], keys[k], sizeof keys[k]);
            OK(hilock_lock_try_acquire(l[k], 0, HILOCK_LEASE_WATCHDOG));
            long long left = on_master_int(m, "PTTL", keys[k]);
            assert_true(left > 1500 && left <= WATCHDOG_MS + 1500);
        }
        for (int k = 0; k < 2; k++) {
            current = names[k];
            pttl_rise r = {m, keys[k], WATCHDOG_MS + 1500};
            if (!hl_wait_until(pttl_rose, &r, hl_widen(5000)))
                fail_msg("no renewal moved %s", keys[k]);
            bool lost = true;
            OK(hilock_lock_lease_lost(l[k], &lost));
            assert_false(lost);
            OK(hilock_lock_release(l[k]));
            assert_int_equal(on_master_int(m, "EXISTS", keys[k]), 0);
            hilock_lock_destroy(l[k]);
        }
    }
    hilock_client_destroy(c);
}

/* Scripts the server ran so far (EVAL and EVALSHA). */
static long long scripts_run(hl_redis_server *m)
{
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "INFO",
                                         "commandstats", (char *)NULL), '$');
    long long n = 0;
    static const char *const cmds[] = {"cmdstat_eval:calls=",
                                       "cmdstat_evalsha:calls="};
    for (int i = 0; i < 2; i++) {
        const char *p = strstr(reply, cmds[i]);
        if (p)
            n += atoll(p + strlen(cmds[i]));
    }
    return n;
}

typedef struct scripts_probe {
    hl_redis_server *master;
    long long want;
} scripts_probe;

static bool scripts_reached(void *arg)
{
    scripts_probe *p = arg;
    return scripts_run(p->master) >= p->want;
}

/* A multi-lock acquire and release on a thread of its own. */
typedef struct multi_waiter {
    hilock_multilock *m;
    int rc, release_rc;
    atomic_bool done;
    pthread_t thread;
} multi_waiter;

static void *multi_main(void *arg)
{
    multi_waiter *w = arg;
    w->rc = hilock_multilock_try_acquire(w->m, hl_widen(15000),
                                         HILOCK_LEASE_WATCHDOG, NULL, 0, NULL);
    if (w->rc == HILOCK_OK)
        w->release_rc = hilock_multilock_release(w->m);
    atomic_store(&w->done, true);
    return NULL;
}

typedef struct exists_probe {
    hl_redis_server *master;
    const char *key;
} exists_probe;

static bool gone_on(void *arg)
{
    exists_probe *p = arg;
    return on_master_int(p->master, "EXISTS", p->key) == 0;
}

/* Members on the three masters: all are taken and given back; a member
 * held by another owner keeps the group out, and the members it did get
 * are given back at once; once that member is free the group gets all. */
static void test_multilock_across_masters(void **state)
{
    (void)state;
    char names[3][64];
    for (int i = 0; i < 3; i++)
        name_on(master(i), "multi", names[i], sizeof names[i]);
    current = "multi";
    hilock_client *a = client(), *b = client();
    hilock_lock *locks[3], *other = NULL;
    for (int i = 0; i < 3; i++)
        OK(hilock_lock_create(&locks[i], a, names[i]));
    hilock_multilock *m = NULL;
    OK(hilock_multilock_create(&m, locks, 3));
    OK(hilock_multilock_try_acquire(m, 0, HILOCK_LEASE_WATCHDOG, NULL, 0,
                                    NULL));
    for (int i = 0; i < 3; i++)
        assert_int_equal(on_master_int(master(i), "EXISTS", names[i]), 1);
    OK(hilock_multilock_release(m));
    for (int i = 0; i < 3; i++)
        assert_int_equal(on_master_int(master(i), "EXISTS", names[i]), 0);

    OK(hilock_lock_create(&other, b, names[1]));
    OK(hilock_lock_try_acquire(other, 0, 30000));
    hilock_member_result res[3];
    assert_int_equal(
        hilock_multilock_try_acquire(m, 0, 30000, res, sizeof *res, NULL),
        HILOCK_EBUSY);
    assert_int_equal(res[1].status, HILOCK_EBUSY);
    /* A member's grant may come after the verdict (it waits for its
     * replica's acknowledgement); it is given back as it comes. */
    for (int i = 0; i < 3; i += 2) {
        exists_probe gone = {master(i), names[i]};
        assert_true(hl_wait_until(gone_on, &gone, hl_widen(5000)));
    }

    multi_waiter w = {.m = m};
    atomic_init(&w.done, false);
    assert_int_equal(pthread_create(&w.thread, NULL, multi_main, &w), 0);
    /* A group listens on no channel: it tries again after back-offs.
     * Wait for two more tries of member 0 (each a try and a give-back);
     * while member 1 is held none can be the last. */
    scripts_probe p = {master(0), scripts_run(master(0)) + 4};
    assert_true(hl_wait_until(scripts_reached, &p, hl_widen(10000)));
    assert_false(atomic_load(&w.done));
    OK(hilock_lock_release(other));
    assert_true(hl_wait_flag(&w.done, hl_widen(15000)));
    pthread_join(w.thread, NULL);
    assert_int_equal(w.rc, HILOCK_OK);
    assert_int_equal(w.release_rc, HILOCK_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(on_master_int(master(i), "EXISTS", names[i]), 0);
    hilock_multilock_destroy(m);
    for (int i = 0; i < 3; i++)
        hilock_lock_destroy(locks[i]);
    hilock_lock_destroy(other);
    hilock_client_destroy(a);
    hilock_client_destroy(b);
}

/* The segments of one resource spread over the three masters, and each
 * segment's hold lives on the master of its own name. */
static void test_segments_spread_over_masters(void **state)
{
    (void)state;
    current = "stock";
    hilock_client *a = client();
    hilock_segmented *set = NULL;
    enum { SEGMENTS = 16 };
    OK(hilock_segmented_create(&set, a, "stock", SEGMENTS));
    int per_master[3] = {0, 0, 0};
    for (unsigned i = 0; i < SEGMENTS; i++) {
        hilock_lock *l = hilock_segmented_lock(set, i);
        const char *seg = hilock_lock_name(l, NULL);
        hl_redis_server *m = master_of_name(seg);
        OK(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG));
        assert_int_equal(on_master_int(m, "EXISTS", seg), 1);
        for (int k = 0; k < 3; k++)
            per_master[k] += m == master(k);
    }
    for (int k = 0; k < 3; k++)
        assert_true(per_master[k] > 0);
    assert_int_equal(per_master[0] + per_master[1] + per_master[2], SEGMENTS);
    /* A key's segment, contended from another client. */
    hilock_client *b = client();
    hilock_segmented *set_b = NULL;
    OK(hilock_segmented_create(&set_b, b, "stock", SEGMENTS));
    hilock_lock *mine = hilock_segmented_lock_for(set_b, "sku-42", 6);
    assert_int_equal(hilock_lock_try_acquire(mine, 0, 30000), HILOCK_EBUSY);
    for (unsigned i = 0; i < SEGMENTS; i++)
        OK(hilock_lock_release(hilock_segmented_lock(set, i)));
    OK(hilock_lock_try_acquire(mine, 0, 30000));
    OK(hilock_lock_release(mine));
    hilock_segmented_destroy(set_b);
    hilock_segmented_destroy(set);
    hilock_client_destroy(b);
    hilock_client_destroy(a);
}

/* ---- the CLI ---------------------------------------------------------- */

#define OUT_CAP 8192

/* The hilock tool against url, to its end; its output in out. */
static int tool(const char *url, char *out, const char *a0, ...)
    __attribute__((sentinel));
static int tool(const char *url, char *out, const char *a0, ...)
{
    const char *argv[16] = {HILOCK_TOOL_PATH, "--redis", url, a0};
    int n = 4;
    va_list ap;
    va_start(ap, a0);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
        assert_true(n < 15);
        argv[n++] = a;
    }
    va_end(ap);
    argv[n] = NULL;
    return hl_run(argv, out, OUT_CAP, hl_widen(20000));
}

static void expect_has(const char *out, const char *part)
{
    if (strstr(out, part) == NULL)
        fail_msg("expected %s in:\n%s", part, out);
}

/* run, status and unlock --force with names on each master, through the
 * seed list and through a single replica's URL. */
static void test_cli_on_every_master(void **state)
{
    (void)state;
    const char *seeds = hl_redis_cluster_url(cluster);
    for (int i = 0; i < 3; i++) {
        hl_redis_server *m = master(i);
        char name[64], out[OUT_CAP], script[256], replica_url[64];
        name_on(m, "cli", name, sizeof name);
        current = name;
        snprintf(replica_url, sizeof replica_url, "redis://127.0.0.1:%d",
                 hl_redis_server_port(hl_redis_cluster_node(cluster,
                                                            3 + (size_t)i)));
        /* While the command runs, its master holds the lock. */
        snprintf(script, sizeof script,
                 "${HILOCK_REDIS_CLI:-redis-cli} -p %d EXISTS '%s'; "
                 "echo \"fence=$HILOCK_FENCE\"",
                 hl_redis_server_port(m), name);
        int rc = tool(seeds, out, "run", "--fence-env", name, "--", "sh",
                      "-c", script, (char *)NULL);
        if (rc != 0)
            hl_fail_run("run", rc, out);
        assert_true(strncmp(out, "1\n", 2) == 0);
        expect_has(out, "fence=");
        assert_int_equal(on_master_int(m, "EXISTS", name), 0);

        /* Held by the library: status shows the owner, run waits. */
        hilock_client *a = client();
        hilock_lock *l = NULL;
        OK(hilock_lock_create(&l, a, name));
        OK(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG));
        char owner[128];
        snprintf(owner, sizeof owner, "\"owner\":\"%s:%llu\"",
                 hilock_client_id(a),
                 (unsigned long long)hilock_thread_owner());
        assert_int_equal(tool(replica_url, out, "status", name,
                              (char *)NULL), 0);
        expect_has(out, "\"locked\":true");
        expect_has(out, owner);
        assert_int_equal(tool(seeds, out, "run", "--wait", "0", name, "--",
                              "true", (char *)NULL), 75);

        /* Forced open from a replica's URL. */
        assert_int_equal(tool(replica_url, out, "unlock", "--force", name,
                              (char *)NULL), 0);
        assert_string_equal(out, "deleted\n");
        assert_int_equal(on_master_int(m, "EXISTS", name), 0);
        assert_int_equal(tool(seeds, out, "status", name, (char *)NULL), 0);
        expect_has(out, "\"locked\":false");
        assert_int_not_equal(hilock_lock_release(l), HILOCK_OK);
        hilock_lock_destroy(l);
        hilock_client_destroy(a);
    }
}

/* RedLock stays a quorum over independent deployments, and a cluster
 * may be one of them: its member's lock lives on the master of the
 * name's slot there.  Another owner holds the name on one plain master,
 * so the quorum of two needs the cluster's vote: a grant is its grant,
 * not one that may or may not come after the outcome. */
static void test_redlock_with_a_cluster_member(void **state)
{
    (void)state;
    hl_redis_server *plain[2];
    hl_fixture_masters(plain, 2);
    char url1[64], url2[64];
    snprintf(url1, sizeof url1, "redis://127.0.0.1:%d",
             hl_redis_server_port(plain[0]));
    snprintf(url2, sizeof url2, "redis://127.0.0.1:%d",
             hl_redis_server_port(plain[1]));
    const char *urls[3] = {hl_redis_cluster_url(cluster), url1, url2};
    hilock_redlock *rl = NULL;
    /* Servers started a moment ago: no quarantine for their age. */
    hilock_options *o = NULL;
    OK(hilock_options_create(&o));
    OK(hilock_options_set_quarantine_ms(o, 1));
    /* The cluster's member is to grant: the default node timeout
     * (100 ms), which a member misses on a loaded machine, would make
     * its vote a timeout, and this case is about where the votes live. */
    OK(hilock_options_set_node_timeout_ms(o, 3000));
    OK(hilock_redlock_create(&rl, urls, 3, o));
    hilock_options_free(o);
    for (int i = 0; i < 3; i++) {
        char name[64];
        name_on(master(i), "redlock", name, sizeof name);
        current = name;
        assert_int_equal(hl_redis_server_cmd(plain[1], reply, sizeof reply,
                                             "HSET", name, "someone:1", "1",
                                             (char *)NULL), ':');
        hilock_multilock *l = NULL;
        OK(hilock_redlock_multilock_create(&l, rl, name));
        hilock_member_result res[3];
        int rc = hilock_multilock_try_acquire(l, hl_widen(5000), 30000, res,
                                              sizeof *res, NULL);
        /* The held member may not have answered by the time the other
         * two decided it: then its result says so (ECANCELED).  Or it
         * may sit out the round, quarantined while an INFO of a
         * connection that came back is out (seen once on a loaded
         * machine): it votes for nobody either way, so the grant still
         * needs the cluster's vote. */
        bool held_member_out =
            res[2].status == HILOCK_EBUSY ||
            res[2].status == HILOCK_ECANCELED ||
            (res[2].status == HILOCK_ENOQUORUM && res[2].quarantined);
        if (rc != HILOCK_OK || res[0].status != HILOCK_OK ||
            res[1].status != HILOCK_OK || !held_member_out)
            fail_msg("%s: %s; members: %s%s %lld us, %s%s %lld us, "
                     "%s%s %lld us",
                     name, hilock_errname(rc), hilock_errname(res[0].status),
                     res[0].quarantined ? " (quarantined)" : "",
                     (long long)res[0].latency_us,
                     hilock_errname(res[1].status),
                     res[1].quarantined ? " (quarantined)" : "",
                     (long long)res[1].latency_us,
                     hilock_errname(res[2].status),
                     res[2].quarantined ? " (quarantined)" : "",
                     (long long)res[2].latency_us);
        assert_int_equal(on_master_int(master(i), "EXISTS", name), 1);
        assert_int_equal(on_master_int(plain[0], "EXISTS", name), 1);
        OK(hilock_multilock_release(l));
        assert_int_equal(on_master_int(master(i), "EXISTS", name), 0);
        assert_int_equal(on_master_int(plain[0], "EXISTS", name), 0);
        /* The other owner's hold is not the release's to end. */
        assert_int_equal(on_master_int(plain[1], "EXISTS", name), 1);
        assert_int_equal(hl_redis_server_cmd(plain[1], reply, sizeof reply,
                                             "DEL", name, (char *)NULL),
                         ':');
        hilock_multilock_destroy(l);
    }
    OK(hilock_redlock_destroy(rl));
    hl_fixture_stop_masters(plain, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots_reentrant_and_fenced),
        cmocka_unit_test(test_slots_fair),
        cmocka_unit_test(test_slots_read_write),
        cmocka_unit_test(test_slots_multilock),
        cmocka_unit_test(test_slots_segmented),
        cmocka_unit_test(test_slots_untagged_names_refused),
        cmocka_unit_test(test_fair_order_on_every_master),
        cmocka_unit_test(test_read_write_on_every_master),
        cmocka_unit_test(test_read_write_promised_handoff_wakes_no_reader),
        cmocka_unit_test(test_fencing_on_every_master),
        cmocka_unit_test(test_lock_delay_on_every_master),
        cmocka_unit_test(test_multilock_across_masters),
        cmocka_unit_test(test_segments_spread_over_masters),
        cmocka_unit_test(test_release_request_on_every_master),
        cmocka_unit_test(test_cond_on_every_master),
        cmocka_unit_test(test_cli_on_every_master),
        cmocka_unit_test(test_redlock_with_a_cluster_member),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
