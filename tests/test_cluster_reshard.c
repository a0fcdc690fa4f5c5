/* Resharding a real Redis Cluster (3 masters, 3 replicas) under the
 * client's feet: the slots of held and contended locks move from one
 * master to another and back, by hand as redis-cli --cluster reshard does
 * it (SETSLOT IMPORTING / MIGRATING, MIGRATE in batches, SETSLOT NODE on
 * every node), while worker threads lock and unlock them.  What must
 * hold: ASK is followed (the importing node sees ASKING), no two holders
 * overlap, no increment of the checker is lost, every hold the client
 * reports is on the server, and no lease is lost.  Beside that load, the
 * half-moved states one at a time: a script on keys split between the two
 * nodes, a release on the importing node (TRYAGAIN until the move ends),
 * and scripts first used on the importing node through ASK. */
/* ctest-timeout: 240 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "core/runtime/cluster.h"
#include "core/transport/keyslot.h"
#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/fair.h"
#include "hilock/lock.h"
#include "hilock/options.h"
#include "hilock/reply.h"
#include "hilock/rwlock.h"
#include "support/cluster_util.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/loop_call.h"
#include "support/mutex_checker.h"

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

/* ---- the cluster, by hand ------------------------------------------------ */

/* watchdog_ms and command_ms 0 for the defaults. */
static hilock_client *client_at(const char *url, int64_t watchdog_ms,
                                int64_t command_ms)
{
    return hl_fx_cluster_client(url, watchdog_ms, command_ms);
}

static hl_redis_server *master_of(int slot)
{
    return hl_fx_master_of(cluster, slot);
}

/* The three masters, in the order of the slots they serve. */
static hl_redis_server *master(int i) { return hl_fx_master(cluster, i); }

static void node_id(hl_redis_server *s, char *out, size_t cap)
{
    hl_fx_node_id(s, out, cap);
}

static void expect_ok(hl_redis_server *s, const char *a0, ...)
    __attribute__((sentinel));
static void expect_ok(hl_redis_server *s, const char *a0, ...)
{
    const char *argv[8];
    int argc = 0;
    va_list ap;
    va_start(ap, a0);
    for (const char *a = a0; a != NULL; a = va_arg(ap, const char *)) {
        assert_true(argc < 8);
        argv[argc++] = a;
    }
    va_end(ap);
    int type = hl_redis_server_command(s, reply, sizeof reply, 0, argc, argv);
    if (type != '+')
        fail_msg("%s %s on :%d: %s", argv[0], argc > 1 ? argv[1] : "",
                 hl_redis_server_port(s), type < 0 ? "no answer" : reply);
}

/* A counter of one of INFO's "name:key=value,..." lines ("cmdstat_asking",
 * "calls"); 0 when the line is absent. */
static long long info_count(hl_redis_server *s, const char *section,
                            const char *line, const char *key)
{
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "INFO",
                                         section, (char *)NULL), '$');
    char want[96];
    snprintf(want, sizeof want, "\n%s:", line);
    const char *p = strstr(reply, want);
    if (p == NULL)
        return 0;
    const char *eol = strchr(p + 1, '\n');
    snprintf(want, sizeof want, "%s=", key);
    const char *v = strstr(p, want);
    if (v == NULL || (eol && v > eol))
        return 0;
    return atoll(v + strlen(want));
}

static long long asking_calls(hl_redis_server *s)
{
    return info_count(s, "commandstats", "cmdstat_asking", "calls");
}

static long long tryagain_errors(hl_redis_server *s)
{
    return info_count(s, "errorstats", "errorstat_TRYAGAIN", "count");
}

/* Up to max keys of slot on s (CLUSTER GETKEYSINSLOT), copied into keys;
 * their number. */
static int keys_in_slot(hl_redis_server *s, int slot, char (*keys)[128],
                        int max)
{
    char slot_text[16], count[16];
    snprintf(slot_text, sizeof slot_text, "%d", slot);
    snprintf(count, sizeof count, "%d", max);
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "CLUSTER",
                                         "GETKEYSINSLOT", slot_text, count,
                                         (char *)NULL), '*');
    int n = atoi(reply + 1);
    assert_true(n >= 0 && n <= max);
    const char *p = strstr(reply, "\r\n") + 2;
    for (int i = 0; i < n; i++) {
        assert_int_equal(*p, '$');
        int len = atoi(p + 1);
        p = strstr(p, "\r\n") + 2;
        assert_true(len < 128);
        memcpy(keys[i], p, (size_t)len);
        keys[i][len] = '\0';
        p += len + 2;
    }
    return n;
}

/* MIGRATE the keys of slot from src to dst, at most batch at a time,
 * calling between(arg) after each batch; how many moved. */
static int migrate_keys(hl_redis_server *src, hl_redis_server *dst, int slot,
                        int batch, void (*between)(void *), void *arg)
{
    char keys[8][128], port[16];
    snprintf(port, sizeof port, "%d", hl_redis_server_port(dst));
    assert_true(batch <= 8);
    int moved = 0, n;
    while ((n = keys_in_slot(src, slot, keys, batch)) > 0) {
        const char *argv[16] = {"MIGRATE", "127.0.0.1", port, "", "0",
                                "5000", "KEYS"};
        int argc = 7;
        for (int i = 0; i < n; i++)
            argv[argc++] = keys[i];
        int type = hl_redis_server_command(src, reply, sizeof reply, 0, argc,
                                           argv);
        /* +OK, or +NOKEY when they expired or were deleted meanwhile. */
        if (type != '+')
            fail_msg("MIGRATE of slot %d: %s", slot, reply);
        moved += n;
        if (between)
            between(arg);
    }
    return moved;
}

static void open_migration(int slot, hl_redis_server *src,
                           const char *src_id, hl_redis_server *dst,
                           const char *dst_id)
{
    char slot_text[16];
    snprintf(slot_text, sizeof slot_text, "%d", slot);
    expect_ok(dst, "CLUSTER", "SETSLOT", slot_text, "IMPORTING", src_id,
              (char *)NULL);
    expect_ok(src, "CLUSTER", "SETSLOT", slot_text, "MIGRATING", dst_id,
              (char *)NULL);
}

/* ---- what the client says -------------------------------------------- */

static void read_redirects(hilock_client *c, void *arg)
{
    *(unsigned *)arg = c->cluster ? hl_cluster_redirects(c->cluster) : 0;
}

static unsigned redirects(hilock_client *c)
{
    unsigned n = 0;
    hl_run_on_loop(c, read_redirects, &n);
    return n;
}

/* A tag whose slot s serves, and not slot avoid. */
static int tag_on(hl_redis_server *s, const char *prefix, int avoid,
                  char *out, size_t cap)
{
    for (int n = 0; n < 1000; n++) {
        snprintf(out, cap, "%s%d", prefix, n);
        int slot = (int)hl_keyslot(out, strlen(out));
        if (slot != avoid && master_of(slot) == s)
            return slot;
    }
    fail_msg("no tag of prefix %s on the master", prefix);
    return -1;
}

/* ---- workers ------------------------------------------------------------ */

static atomic_int lost; /* lost callbacks, every lock */

static void on_lost(hilock_lock *lock, uint64_t owner, void *data)
{
    (void)lock, (void)owner, (void)data;
    atomic_fetch_add(&lost, 1);
}

/* Who is inside a read-write lock, as its holders say. */
typedef struct rw_inside {
    atomic_int readers;
    atomic_int writers;
    atomic_int reads; /* read holds so far */
} rw_inside;

typedef struct worker {
    hilock_lock *lock;
    hl_mutex_checker *mc; /* for a reader: where failures go */
    uint32_t id;
    bool reentrant;
    rw_inside *rw; /* for either side of a read-write lock */
    atomic_bool *stop;
} worker;

static bool held_on_server(worker *w, const char *when)
{
    bool held = false;
    int rc = hilock_lock_is_held_by_me(w->lock, &held);
    if (rc != HILOCK_OK || !held) {
        hl_mutex_checker_fail(w->mc, "worker %u: hold not on the server %s: "
                              "%s %s", w->id, when, hilock_errname(rc),
                              rc ? hilock_last_error() : "");
        return false;
    }
    return true;
}

/* Lock, check the hold is on the server, hold a little (now and then
 * past a watchdog renewal, and now and then taken twice), unlock; until
 * told to stop.  Every status other than OK is a failure: a resharding
 * must not show through. */
static void *worker_main(void *arg)
{
    worker *w = arg;
    for (unsigned n = 0; !atomic_load(w->stop); n++) {
        int rc = hilock_lock_try_acquire(w->lock, 10000,
                                         HILOCK_LEASE_WATCHDOG);
        if (rc != HILOCK_OK) {
            hl_mutex_checker_fail(w->mc, "worker %u: acquire: %s: %s", w->id,
                                  hilock_errname(rc), hilock_last_error());
            hl_sleep_ms(50);
            continue;
        }
        long slot = hl_mutex_checker_enter(w->mc, w->id, 0);
        if (w->rw) {
            atomic_fetch_add(&w->rw->writers, 1);
            if (atomic_load(&w->rw->readers) > 0)
                hl_mutex_checker_fail(w->mc, "writer %u: readers inside",
                                      w->id);
        }
        held_on_server(w, "after acquire");
        bool twice = w->reentrant && n % 5 == 2;
        if (twice && (rc = hilock_lock_try_acquire(w->lock, 0,
                                                   HILOCK_LEASE_WATCHDOG)))
            hl_mutex_checker_fail(w->mc, "worker %u: reentry: %s: %s", w->id,
                                  hilock_errname(rc), hilock_last_error());
        /* One renewal comes every third of the 3 s watchdog timeout. */
        bool across = n % 16 == 7;
        hl_sleep_ms(across ? 1300 : 2);
        if (across)
            held_on_server(w, "after a renewal");
        if (w->rw)
            atomic_fetch_sub(&w->rw->writers, 1);
        hl_mutex_checker_exit(w->mc, slot);
        if (twice && (rc = hilock_lock_release(w->lock)) != HILOCK_OK)
            hl_mutex_checker_fail(w->mc, "worker %u: inner release: %s: %s",
                                  w->id, hilock_errname(rc),
                                  hilock_last_error());
        if ((rc = hilock_lock_release(w->lock)) != HILOCK_OK)
            hl_mutex_checker_fail(w->mc,
                                  "worker %u: release: %s: %s (losses "
                                  "reported so far: %d; cycle %u%s%s)",
                                  w->id, hilock_errname(rc),
                                  hilock_last_error(), atomic_load(&lost), n,
                                  twice ? ", taken twice" : "",
                                  across ? ", held across a renewal" : "");
        /* Two writers taking turns at once would keep the readers out
         * (the lock is not fair). */
        if (w->rw)
            hl_sleep_ms(5);
    }
    return NULL;
}

/* Read holds of a read-write lock whose writers are workers as above:
 * no writer may be inside while a reader is. */
static void *reader_main(void *arg)
{
    worker *w = arg;
    while (!atomic_load(w->stop)) {
        int rc = hilock_lock_try_acquire(w->lock, 30000,
                                         HILOCK_LEASE_WATCHDOG);
        if (rc != HILOCK_OK) {
            hl_mutex_checker_fail(w->mc, "reader %u: acquire: %s: %s", w->id,
                                  hilock_errname(rc), hilock_last_error());
            hl_sleep_ms(50);
            continue;
        }
        atomic_fetch_add(&w->rw->readers, 1);
        if (atomic_load(&w->rw->writers) > 0)
            hl_mutex_checker_fail(w->mc, "reader %u: a writer inside", w->id);
        held_on_server(w, "after a read acquire");
        hl_sleep_ms(3);
        atomic_fetch_add(&w->rw->reads, 1);
        atomic_fetch_sub(&w->rw->readers, 1);
        if ((rc = hilock_lock_release(w->lock)) != HILOCK_OK)
            hl_mutex_checker_fail(w->mc, "reader %u: release: %s: %s", w->id,
                                  hilock_errname(rc), hilock_last_error());
        /* Room for the writers, which wait while readers hold. */
        hl_sleep_ms(5);
    }
    return NULL;
}

enum { KIND_REENTRANT, KIND_FAIR, KIND_WRITE };

static int make_lock(hilock_lock **out, hilock_client *c, int kind,
                     const char *name)
{
    switch (kind) {
    case KIND_FAIR:
        return hilock_fair_lock_create(out, c, name);
    case KIND_WRITE:
        return hilock_write_lock_create(out, c, name);
    default:
        return hilock_lock_create(out, c, name);
    }
}

typedef struct progress {
    hl_mutex_checker **mcs;
    int n;
    size_t at_least;
} progress;

static bool every_lock_taken(void *arg)
{
    progress *p = arg;
    for (int i = 0; i < p->n; i++)
        if (hl_mutex_checker_count(p->mcs[i]) < p->at_least)
            return false;
    return true;
}

typedef struct window {
    hl_redis_server *importing;
    long long asking_before;
    long long times; /* ASKINGs to wait for */
    int max_ms;
} window;

static bool asked(void *arg)
{
    window *w = arg;
    return asking_calls(w->importing) >= w->asking_before + w->times;
}

/* Leave the slot half-moved until the importing node has been asked
 * again (or max_ms passed: a window with no request in it is still a
 * window). */
static void hold_window(void *arg)
{
    window *w = arg;
    w->asking_before = asking_calls(w->importing);
    (void)hl_wait_until(asked, w, w->max_ms);
}

/* One slot from src to dst while the workers run, one key per MIGRATE,
 * with a pause for requests in each half-moved state. */
static void move_slot(int slot, hl_redis_server *src, hl_redis_server *dst)
{
    char src_id[64], dst_id[64];
    node_id(src, src_id, sizeof src_id);
    node_id(dst, dst_id, sizeof dst_id);
    window w = {.importing = dst, .times = 1, .max_ms = 300};
    open_migration(slot, src, src_id, dst, dst_id);
    hold_window(&w);
    migrate_keys(src, dst, slot, 1, hold_window, &w);
    /* Every key moved, the slot not yet: every request is sent on to the
     * importing node, and scripts on several keys are refused there. */
    w.times = 8;
    w.max_ms = 600;
    hold_window(&w);
    hl_fx_assign_slot(cluster, slot, dst);
}

#define LOCKS 4
#define PER_LOCK 2

/* Two reentrant locks in one slot (so that renewals carry both keys in
 * one script), a fair lock and a read-write lock in slots of their own,
 * all on one master, each contended by a worker on each of two clients
 * (a writer for the read-write lock, and a reader besides).  Their slots
 * move to another master and back while the workers run. */
static void test_reshard_under_load(void **state)
{
    (void)state;
    atomic_store(&lost, 0);
    hl_redis_server *src = master(0), *dst = master(1);
    char tag_a[16], tag_b[16], tag_c[16];
    int slot_a = tag_on(src, "rsa", -1, tag_a, sizeof tag_a);
    int slot_b = tag_on(src, "rsb", slot_a, tag_b, sizeof tag_b);
    int slot_c = tag_on(src, "rsc", slot_a, tag_c, sizeof tag_c);
    assert_int_not_equal(slot_b, slot_c);
    char names[LOCKS][48];
    snprintf(names[0], sizeof names[0], "{%s}:one", tag_a);
    snprintf(names[1], sizeof names[1], "{%s}:two", tag_a);
    snprintf(names[2], sizeof names[2], "{%s}:fair", tag_b);
    snprintf(names[3], sizeof names[3], "{%s}:rw", tag_c);
    const int kinds[LOCKS] = {KIND_REENTRANT, KIND_REENTRANT, KIND_FAIR,
                              KIND_WRITE};

    /* Calls on a moving slot wait for the end of its move (see
     * test_release_on_the_importing_node): a command timeout well above
     * the longest move keeps a slow build from failing them. */
    hilock_client *clients[PER_LOCK];
    for (int i = 0; i < PER_LOCK; i++)
        clients[i] = client_at(hl_redis_cluster_url(cluster), 3000, 10000);
    long long asked_src = asking_calls(src), asked_dst = asking_calls(dst);
    unsigned redirected = 0;
    for (int i = 0; i < PER_LOCK; i++)
        redirected += redirects(clients[i]);

    atomic_bool stop = false;
    rw_inside rw = {0};
    hl_mutex_checker *mcs[LOCKS];
    hilock_lock *locks[LOCKS][PER_LOCK];
    worker workers[LOCKS][PER_LOCK];
    pthread_t threads[LOCKS][PER_LOCK];
    for (int l = 0; l < LOCKS; l++) {
        mcs[l] = hl_mutex_checker_create(100000, 20);
        assert_non_null(mcs[l]);
        for (int k = 0; k < PER_LOCK; k++) {
            assert_int_equal(make_lock(&locks[l][k], clients[k], kinds[l],
                                       names[l]),
                             HILOCK_OK);
            assert_int_equal(hilock_lock_set_lost_callback(locks[l][k],
                                                           on_lost, NULL),
                             HILOCK_OK);
            workers[l][k] = (worker){.lock = locks[l][k],
                                     .mc = mcs[l],
                                     .id = (uint32_t)(l * PER_LOCK + k),
                                     .reentrant = kinds[l] != KIND_FAIR,
                                     .rw = kinds[l] == KIND_WRITE ? &rw
                                                                  : NULL,
                                     .stop = &stop};
            assert_int_equal(pthread_create(&threads[l][k], NULL, worker_main,
                                            &workers[l][k]),
                             0);
        }
    }
    /* And a reader of the read-write lock on each client. */
    hilock_lock *reading[PER_LOCK];
    worker readers[PER_LOCK];
    pthread_t reader_threads[PER_LOCK];
    for (int k = 0; k < PER_LOCK; k++) {
        assert_int_equal(hilock_read_lock_create(&reading[k], clients[k],
                                                 names[3]),
                         HILOCK_OK);
        assert_int_equal(hilock_lock_set_lost_callback(reading[k], on_lost,
                                                       NULL),
                         HILOCK_OK);
        readers[k] = (worker){.lock = reading[k],
                              .mc = mcs[3],
                              .id = (uint32_t)(100 + k),
                              .rw = &rw,
                              .stop = &stop};
        assert_int_equal(pthread_create(&reader_threads[k], NULL, reader_main,
                                        &readers[k]),
                         0);
    }
    progress p = {.mcs = mcs, .n = LOCKS, .at_least = 4};
    assert_true(hl_wait_until(every_lock_taken, &p, hl_widen(20000)));

    const int slots[3] = {slot_a, slot_b, slot_c};
    int moves = hl_scaled(4, 2);
    for (int m = 0; m < moves; m++) {
        hl_redis_server *from = m % 2 ? dst : src, *to = m % 2 ? src : dst;
        for (int s = 0; s < 3; s++) {
            move_slot(slots[s], from, to);
            /* The workers get through a slot's move before the next. */
            size_t counts[LOCKS];
            for (int l = 0; l < LOCKS; l++)
                counts[l] = hl_mutex_checker_count(mcs[l]);
            for (int l = 0; l < LOCKS; l++) {
                progress one = {.mcs = &mcs[l], .n = 1,
                                .at_least = counts[l] + 1};
                assert_true(hl_wait_until(every_lock_taken, &one,
                                          hl_widen(20000)));
            }
        }
    }
    assert_int_equal(hl_redis_cluster_wait_ok(cluster, 30000), 0);
    atomic_store(&stop, true);
    for (int l = 0; l < LOCKS; l++)
        for (int k = 0; k < PER_LOCK; k++)
            pthread_join(threads[l][k], NULL);
    for (int k = 0; k < PER_LOCK; k++)
        pthread_join(reader_threads[k], NULL);

    for (int l = 0; l < LOCKS; l++) {
        char why[512];
        if (!hl_mutex_checker_verify(mcs[l], false, why, sizeof why))
            fail_msg("lock %s: %s", names[l], why);
        print_message("lock %s: %zu holds\n", names[l],
                      hl_mutex_checker_count(mcs[l]));
    }
    print_message("lock %s: %d read holds\n", names[3],
                  atomic_load(&rw.reads));
    assert_true(atomic_load(&rw.reads) > 0);
    assert_int_equal(atomic_load(&lost), 0);
    /* ASK was followed both ways: each importing node was asked. */
    assert_true(asking_calls(dst) > asked_dst);
    assert_true(asking_calls(src) > asked_src);
    unsigned after = 0;
    for (int i = 0; i < PER_LOCK; i++)
        after += redirects(clients[i]);
    assert_true(after > redirected);
    print_message("%d moves of 3 slots; %u redirections followed\n", moves,
                  after - redirected);

    for (int k = 0; k < PER_LOCK; k++)
        hilock_lock_destroy(reading[k]);
    for (int l = 0; l < LOCKS; l++) {
        for (int k = 0; k < PER_LOCK; k++)
            hilock_lock_destroy(locks[l][k]);
        hl_mutex_checker_free(mcs[l]);
    }
    for (int i = 0; i < PER_LOCK; i++)
        hilock_client_destroy(clients[i]);
}

typedef struct answer {
    atomic_bool done;
    int status;
    long long value;
    char error[128];
} answer;

static void on_answer(hilock_client *c, int status, hilock_reply *r,
                      void *data)
{
    (void)c;
    answer *a = data;
    a->status = status;
    if (r && r->type == HILOCK_REPLY_INTEGER)
        a->value = r->integer;
    if (r && r->type == HILOCK_REPLY_ERROR)
        snprintf(a->error, sizeof a->error, "%s", r->str);
    hilock_reply_free(r);
    atomic_store(&a->done, true);
}

typedef struct tryagain_probe {
    hl_redis_server *nodes[2];
    long long before;
} tryagain_probe;

static bool refused(void *arg)
{
    tryagain_probe *p = arg;
    return tryagain_errors(p->nodes[0]) + tryagain_errors(p->nodes[1]) >
           p->before;
}

/* A script on two keys of one slot, sent while one key has moved to the
 * importing node and the other has not: both nodes refuse it (ASK, then
 * TRYAGAIN from the importing node), and it runs once both keys are on
 * one node, within its command timeout, instead of failing. */
static void test_script_on_keys_split_between_nodes(void **state)
{
    (void)state;
    hl_redis_server *src = master(2), *dst = master(0);
    char tag[16], x[32], y[32], src_id[64], dst_id[64];
    int slot = tag_on(src, "split", -1, tag, sizeof tag);
    snprintf(x, sizeof x, "{%s}x", tag);
    snprintf(y, sizeof y, "{%s}y", tag);
    expect_ok(src, "SET", x, "1", (char *)NULL);
    expect_ok(src, "SET", y, "1", (char *)NULL);
    node_id(src, src_id, sizeof src_id);
    node_id(dst, dst_id, sizeof dst_id);
    hilock_client *c = client_at(hl_redis_cluster_url(cluster), 0, 0);

    open_migration(slot, src, src_id, dst, dst_id);
    char port[16];
    snprintf(port, sizeof port, "%d", hl_redis_server_port(dst));
    expect_ok(src, "MIGRATE", "127.0.0.1", port, x, "0", "5000",
              (char *)NULL);
    tryagain_probe p = {.nodes = {src, dst}};
    p.before = tryagain_errors(src) + tryagain_errors(dst);
    const char *argv[] = {"EVAL",
                          "return redis.call('EXISTS', KEYS[1]) + "
                          "redis.call('EXISTS', KEYS[2])",
                          "2", x, y};
    answer a = {.status = -1};
    assert_int_equal(hilock_client_command_async(c, 5, argv, NULL, on_answer,
                                                 &a),
                     HILOCK_OK);
    assert_true(hl_wait_until(refused, &p, hl_widen(5000)));
    expect_ok(src, "MIGRATE", "127.0.0.1", port, y, "0", "5000",
              (char *)NULL);
    hl_fx_assign_slot(cluster, slot, dst);
    assert_true(hl_wait_flag(&a.done, hl_widen(10000)));
    if (a.status != HILOCK_OK)
        fail_msg("the script failed: %s: %s", hilock_errname(a.status),
                 a.error);
    assert_int_equal(a.value, 2);
    hilock_client_destroy(c);
    assert_int_equal(hl_redis_cluster_wait_ok(cluster, 30000), 0);
}

typedef struct released {
    atomic_bool done;
    int status;
} released;

static void on_released(hilock_lock *lock, int status, int64_t value,
                        void *data)
{
    (void)lock, (void)value;
    released *r = data;
    r->status = status;
    atomic_store(&r->done, true);
}

static bool refused_often(void *arg)
{
    tryagain_probe *p = arg;
    return tryagain_errors(p->nodes[0]) >= p->before + 4;
}

/* A release after the lock's key has moved, while the slot is still
 * being migrated: the old master sends it on (ASK), and the importing
 * node, which has the lock but not its channel, refuses a script on both
 * (TRYAGAIN) until the slot is its own.  The release is retried there,
 * still ASKING, and goes through once the migration ends. */
static void test_release_on_the_importing_node(void **state)
{
    (void)state;
    hl_redis_server *src = master(1), *dst = master(2);
    char tag[16], name[32], src_id[64], dst_id[64];
    int slot = tag_on(src, "rel", -1, tag, sizeof tag);
    snprintf(name, sizeof name, "{%s}:lock", tag);
    node_id(src, src_id, sizeof src_id);
    node_id(dst, dst_id, sizeof dst_id);
    hilock_client *c = client_at(hl_redis_cluster_url(cluster), 0, 0);
    hilock_lock *l = NULL;
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, 0, 60000), HILOCK_OK);

    open_migration(slot, src, src_id, dst, dst_id);
    assert_true(migrate_keys(src, dst, slot, 8, NULL, NULL) >= 1);
    tryagain_probe p = {.nodes = {dst, dst}};
    p.before = tryagain_errors(dst);
    released r = {.status = -1};
    assert_int_equal(hilock_lock_release_async(l, hilock_thread_owner(),
                                               on_released, &r),
                     HILOCK_OK);
    /* Refused again and again, and still waiting for the slot. */
    bool retried = hl_wait_until(refused_often, &p, hl_widen(3000));
    bool early = atomic_load(&r.done);
    hl_fx_assign_slot(cluster, slot, dst);
    assert_true(hl_wait_flag(&r.done, hl_widen(10000)));
    if (r.status != HILOCK_OK)
        fail_msg("release: %s", hilock_errname(r.status));
    assert_true(retried);
    assert_false(early);
    char exists[64];
    assert_int_equal(hl_redis_server_cmd(dst, exists, sizeof exists,
                                         "EXISTS", name, (char *)NULL), ':');
    assert_string_equal(exists, ":0\r\n");
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
    assert_int_equal(hl_redis_cluster_wait_ok(cluster, 30000), 0);
}

static long long noscript_errors(hl_redis_server *s)
{
    return info_count(s, "errorstats", "errorstat_NOSCRIPT", "count");
}

static long long exists_on(hl_redis_server *s, const char *key)
{
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "EXISTS",
                                         key, (char *)NULL), ':');
    return atoll(reply + 1);
}

typedef struct renewals {
    hilock_client *client;
    uint64_t want;
} renewals;

static uint64_t renewed(hilock_client *c)
{
    hilock_client_stats st;
    assert_int_equal(hl_client_counters(c, &st), HILOCK_OK);
    assert_int_equal(st.leases_lost, 0);
    return st.leases_renewed;
}

static bool renewed_enough(void *arg)
{
    renewals *r = arg;
    return renewed(r->client) >= r->want;
}

/* The watchdog's renewal reaches the importing node through ASK once the
 * lock's key has moved there (the renewal names that key alone).  The
 * client loads the script there first (SCRIPT LOAD ahead of ASKING,
 * which admits only the command right behind it), so the renewal meets
 * no NOSCRIPT.  After a SCRIPT FLUSH on that node, the renewal that meets
 * NOSCRIPT runs as EVAL (through the old master's ASK again), which puts
 * the script back in that node's cache: one NOSCRIPT, not one per
 * renewal, and no lease lost. */
static void test_scripts_on_the_importing_node(void **state)
{
    (void)state;
    hl_redis_server *src = master(0), *dst = master(2);
    char tag[16], src_id[64], dst_id[64], name[32];
    int slot = tag_on(src, "first", -1, tag, sizeof tag);
    snprintf(name, sizeof name, "{%s}:lock", tag);
    node_id(src, src_id, sizeof src_id);
    node_id(dst, dst_id, sizeof dst_id);
    hilock_client *c = client_at(hl_redis_cluster_url(cluster), 1500, 0);
    hilock_lock *l = NULL;
    assert_int_equal(hilock_lock_create(&l, c, name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                     HILOCK_OK);

    open_migration(slot, src, src_id, dst, dst_id);
    assert_true(migrate_keys(src, dst, slot, 8, NULL, NULL) >= 1);
    long long noscript = noscript_errors(dst), asking = asking_calls(dst);
    renewals r = {.client = c, .want = renewed(c) + 2};
    assert_true(hl_wait_until(renewed_enough, &r, hl_widen(5000)));
    assert_true(asking_calls(dst) >= asking + 2);
    assert_int_equal(noscript_errors(dst), noscript);
    char slot_text[16];
    snprintf(slot_text, sizeof slot_text, "%d", slot);
    assert_int_equal(hl_redis_server_cmd(src, reply, sizeof reply, "CLUSTER",
                                         "COUNTKEYSINSLOT", slot_text,
                                         (char *)NULL), ':');
    assert_string_equal(reply, ":0\r\n");

    expect_ok(dst, "SCRIPT", "FLUSH", (char *)NULL);
    r.want = renewed(c) + 3;
    assert_true(hl_wait_until(renewed_enough, &r, hl_widen(8000)));
    assert_int_equal(noscript_errors(dst), noscript + 1);

    hl_fx_assign_slot(cluster, slot, dst);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    assert_int_equal(exists_on(dst, name), 0);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
    assert_int_equal(hl_redis_cluster_wait_ok(cluster, 30000), 0);
}

/* A release that waits out a slot's move (refused with TRYAGAIN until
 * the slot is the importing node's, as above) for longer than the
 * watchdog's lease: the watchdog keeps renewing the hold meanwhile, so
 * the release finds it and frees it, and no loss is reported.  Left
 * unrenewed, the key would run out under the waiting release, which
 * would then answer ELEASELOST for a loss nothing caused. */
static void test_release_outlasting_a_lease(void **state)
{
    (void)state;
    hl_redis_server *src = master(2), *dst = master(0);
    char tag[16], name[32], src_id[64], dst_id[64];
    int slot = tag_on(src, "out", -1, tag, sizeof tag);
    snprintf(name, sizeof name, "{%s}:lock", tag);
    node_id(src, src_id, sizeof src_id);
    node_id(dst, dst_id, sizeof dst_id);
    hilock_client *c = client_at(hl_redis_cluster_url(cluster), 1500, 20000);
    hilock_lock *l = NULL;
    assert_int_equal(hilock_lock_create(&l, c, name), HILOCK_OK);
    atomic_store(&lost, 0);
    assert_int_equal(hilock_lock_set_lost_callback(l, on_lost, NULL),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                     HILOCK_OK);

    open_migration(slot, src, src_id, dst, dst_id);
    assert_true(migrate_keys(src, dst, slot, 8, NULL, NULL) >= 1);
    released r = {.status = -1};
    assert_int_equal(hilock_lock_release_async(l, hilock_thread_owner(),
                                               on_released, &r),
                     HILOCK_OK);
    /* Four renewals, a third of the lease apart: the lease the hold had
     * when the release left has run out well before the last. */
    renewals more = {.client = c, .want = renewed(c) + 4};
    bool kept = hl_wait_until(renewed_enough, &more, hl_widen(10000));
    bool early = atomic_load(&r.done);
    hl_fx_assign_slot(cluster, slot, dst);
    assert_true(hl_wait_flag(&r.done, hl_widen(20000)));
    if (r.status != HILOCK_OK)
        fail_msg("release: %s", hilock_errname(r.status));
    assert_true(kept);
    assert_false(early);
    assert_int_equal(exists_on(dst, name), 0);
    assert_int_equal(atomic_load(&lost), 0);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
    assert_int_equal(hl_redis_cluster_wait_ok(cluster, 30000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_script_on_keys_split_between_nodes),
        cmocka_unit_test(test_release_on_the_importing_node),
        cmocka_unit_test(test_scripts_on_the_importing_node),
        cmocka_unit_test(test_release_outlasting_a_lease),
        cmocka_unit_test(test_reshard_under_load),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
