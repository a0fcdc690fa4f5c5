/* The read-write lock kinds against a real redis-server: readers sharing,
 * writers excluding everyone, a writer getting in past a stream of
 * readers, downgrade, refused upgrade, the holds of a killed reader
 * running out while live readers keep theirs, wake-ups by message, a
 * waiting writer's claim given up at once when it stops waiting and
 * lapsing when its process dies, reentrancy and ownership on both sides,
 * force release, and the watchdog on both sides.
 *
 * The server is observed through the fixture's own connections (raw
 * RESP), never through the library under test. */
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
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "hilock/options.h"
#include "hilock/rwlock.h"
#include "support/children.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

/* ---- helpers ----------------------------------------------------------- */

/* Each test's server and forked children; see hl_lock_fixture. */
static hl_lock_fixture fx;

/* Leases and waiter timeouts so long that neither a lease running out nor
 * a waiting writer's heartbeat can explain a waiter getting in within
 * seconds: only a release message can. */
#define LONG_MS 300000

#define OWNER_A UINT64_C(0xA1)
#define OWNER_B UINT64_C(0xB2)
#define OWNER_C UINT64_C(0xC3)
#define OWNER_D UINT64_C(0xD4)

/* ---- the server seen through the fixture ------------------------------- */

#define HASH_MAX 32

typedef struct hash_view {
    int n;
    char field[HASH_MAX][96];
    char value[HASH_MAX][32];
} hash_view;

static void srv_hash(hash_view *h, const char *key)
{
    char reply[HL_RAW_REPLY_CAP];
    const char *p = reply;
    long n;

    memset(h, 0, sizeof *h);
    hl_raw_cmd(fx.server, reply, sizeof reply, "HGETALL", key, (char *)NULL);
    n = hl_raw_parse_array(&p);
    if (n < 0 || n % 2 != 0 || n / 2 > HASH_MAX)
        fail_msg("HGETALL %s: unexpected reply %s", key, reply);
    for (int i = 0; i < n / 2; i++) {
        if (hl_raw_parse_bulk(&p, h->field[i], sizeof h->field[i]) < 0 ||
            hl_raw_parse_bulk(&p, h->value[i], sizeof h->value[i]) < 0)
            fail_msg("HGETALL %s: malformed reply %s", key, reply);
    }
    h->n = (int)(n / 2);
}

static const char *hash_get(const hash_view *h, const char *field)
{
    for (int i = 0; i < h->n; i++)
        if (strcmp(h->field[i], field) == 0)
            return h->value[i];
    return NULL;
}

/* value NULL: the field must be absent. */
static void expect_field(const hash_view *h, const char *field,
                         const char *value)
{
    const char *got = hash_get(h, field);

    if (value == NULL && got != NULL)
        fail_msg("field %s is %s, expected it gone", field, got);
    if (value != NULL && (got == NULL || strcmp(got, value) != 0))
        fail_msg("field %s is %s, expected %s", field,
                 got ? got : "absent", value);
}

/* ---- names of things in Redis ------------------------------------------ */

#define FIELD_CAP 96
#define KEY_CAP 200

/* "<client id>:<owner>", a reader's field and a waiting writer's member. */
static void field_of(char *out, hilock_client *c, uint64_t owner)
{
    snprintf(out, FIELD_CAP, "%s:%" PRIu64, hilock_client_id(c), owner);
}

static void write_field_of(char *out, hilock_client *c, uint64_t owner)
{
    snprintf(out, FIELD_CAP, "%s:%" PRIu64 ":write", hilock_client_id(c),
             owner);
}

static void writers_key(char *out, const char *name)
{
    snprintf(out, KEY_CAP, "hilock_rwlock_writers:{%s}", name);
}

static void timeout_key(char *out, const char *name, const char *field,
                        int n)
{
    snprintf(out, KEY_CAP, "{%s}:%s:rwlock_timeout:%d", name, field, n);
}

/* A waiting writer's claim: its client's place in the writers' zset
 * (writers line up by client; member is the writer's field, whose first
 * HILOCK_CLIENT_ID_LEN characters are its client's id). */
static bool claim_present(const char *name, const char *member)
{
    char key[KEY_CAP], score[64], client[HILOCK_CLIENT_ID_LEN + 1];

    writers_key(key, name);
    snprintf(client, sizeof client, "%s", member);
    return hl_raw_bulk(fx.server, score, sizeof score, "ZSCORE", key, client,
                       (char *)NULL);
}

static long long claim_score(const char *name, const char *member)
{
    char key[KEY_CAP], score[64], client[HILOCK_CLIENT_ID_LEN + 1];

    writers_key(key, name);
    snprintf(client, sizeof client, "%s", member);
    if (!hl_raw_bulk(fx.server, score, sizeof score, "ZSCORE", key, client,
                     (char *)NULL))
        return -1;
    return strtoll(score, NULL, 10);
}

typedef struct claim_want {
    const char *name;
    const char *member;
    bool present;
} claim_want;

static bool claim_reached(void *arg)
{
    claim_want *w = arg;

    return claim_present(w->name, w->member) == w->present;
}

static bool wait_claim_for(const char *name, const char *member,
                           bool present, int timeout_ms)
{
    claim_want w = { name, member, present };

    return hl_wait_until(claim_reached, &w, timeout_ms);
}

static void wait_claim(const char *name, const char *member, bool present)
{
    if (!wait_claim_for(name, member, present, hl_widen(10000)))
        fail_msg("the writer %s's claim on %s never %s", member, name,
                 present ? "appeared" : "went away");
}

/* ---- acquires and releases for any owner ------------------------------- */

static int acquire_begin(hl_acquire_rec *a, hilock_lock *l, uint64_t owner,
                         int64_t wait_ms, int64_t lease_ms)
{
    hl_acquire_rec_init(a, NULL);
    return hilock_lock_acquire_async(l, owner, wait_ms, lease_ms, 0,
                                     hl_record_acquire, a, &a->id);
}

static void acquire_start(hl_acquire_rec *a, hilock_lock *l, uint64_t owner,
                          int64_t wait_ms, int64_t lease_ms)
{
    assert_status(acquire_begin(a, l, owner, wait_ms, lease_ms), HILOCK_OK);
}

/* The status of an acquire started with acquire_start, which must call
 * back exactly once. */
static int acquire_end(hl_acquire_rec *a)
{
    int status = hl_expect_acquire(a);

    assert_int_equal(atomic_load(&a->calls), 1);
    return status;
}

/* No cmocka: the reader threads use these too.  -1 when no answer came
 * in time; the record is then left to the callback, never freed. */
static int acquire_owner(hilock_lock *l, uint64_t owner, int64_t wait_ms,
                         int64_t lease_ms, int64_t *count)
{
    hl_acquire_rec *a = malloc(sizeof *a);
    int rc, limit = (wait_ms > 0 ? (int)wait_ms : 0) + hl_widen(10000);

    if (a == NULL)
        return HILOCK_ENOMEM;
    rc = acquire_begin(a, l, owner, wait_ms, lease_ms);
    if (rc != HILOCK_OK) {
        free(a);
        return rc;
    }
    if (!hl_wait_count(&a->calls, 1, limit))
        return -1;
    rc = a->status;
    if (count)
        *count = a->got.hold_count;
    free(a);
    return rc;
}

typedef int val_call(hilock_lock *l, uint64_t owner, hilock_lock_cb *cb,
                     void *data);

static int value_owner(val_call *fn, hilock_lock *l, uint64_t owner,
                       int64_t *value)
{
    hl_value_rec *v = malloc(sizeof *v);
    int rc;

    if (v == NULL)
        return HILOCK_ENOMEM;
    hl_value_rec_init(v);
    rc = fn(l, owner, hl_record_value, v);
    if (rc != HILOCK_OK) {
        free(v);
        return rc;
    }
    if (!hl_wait_count(&v->calls, 1, hl_widen(10000)))
        return -1;
    rc = v->status;
    if (value)
        *value = v->value;
    free(v);
    return rc;
}

static int release_owner(hilock_lock *l, uint64_t owner)
{
    return value_owner(hilock_lock_release_async, l, owner, NULL);
}

static int acquire_as(hilock_lock *l, uint64_t owner, int64_t wait_ms,
                      int64_t lease_ms)
{
    int rc = acquire_owner(l, owner, wait_ms, lease_ms, NULL);

    if (rc == -1)
        fail_msg("an acquire for owner %" PRIu64 " never completed", owner);
    return rc;
}

static int release_as(hilock_lock *l, uint64_t owner)
{
    int rc = release_owner(l, owner);

    if (rc == -1)
        fail_msg("a release for owner %" PRIu64 " never completed", owner);
    return rc;
}

static int64_t hold_count_as(hilock_lock *l, uint64_t owner)
{
    int64_t n = -1;
    int rc = value_owner(hilock_lock_hold_count_async, l, owner, &n);

    if (rc != HILOCK_OK)
        fail_msg("hold count: %s", rc == -1 ? "no answer"
                                            : hilock_errname(rc));
    return n;
}

static bool locked(hilock_lock *l)
{
    bool b = false;

    assert_status(hilock_lock_is_locked(l, &b), HILOCK_OK);
    return b;
}

/* ---- readers share ----------------------------------------------------- */

#define SHARERS 6

typedef struct sharer {
    pthread_t thread;
    hilock_lock *lock;
    atomic_int *arrived;
    atomic_bool *go;
    uint64_t owner;
    int rc;
    int release_rc;
    bool go_seen;
} sharer;

static void *sharer_main(void *arg)
{
    sharer *s = arg;

    s->owner = hilock_thread_owner();
    s->rc = hilock_lock_try_acquire(s->lock, hl_widen(10000),
                                    HILOCK_LEASE_WATCHDOG);
    if (s->rc != HILOCK_OK)
        return NULL;
    atomic_fetch_add(s->arrived, 1);
    /* Nobody lets go before the parent has seen every reader holding. */
    s->go_seen = hl_wait_flag(s->go, hl_widen(20000));
    s->release_rc = hilock_lock_release(s->lock);
    return NULL;
}

static void test_readers_share(void **state)
{
    int n = hl_scaled(SHARERS, 4);
    hilock_client *c[2] = { hl_new_client(fx.server, NULL),
                            hl_new_client(fx.server, NULL) };
    hilock_client *wc = hl_new_client(fx.server, NULL);
    hilock_lock *r[2] = { hl_new_read_lock(c[0], "shared"),
                          hl_new_read_lock(c[1], "shared") };
    hilock_lock *w = hl_new_write_lock(wc, "shared");
    /* Static, as every record a thread or a callback may still write
     * after a failed assertion ended the test early. */
    static sharer s[SHARERS];
    static atomic_int arrived;
    static atomic_bool go;
    hash_view h;
    char field[FIELD_CAP], zkey[KEY_CAP];
    bool all;

    (void)state;
    atomic_store(&arrived, 0);
    atomic_store(&go, false);
    for (int i = 0; i < n; i++) {
        memset(&s[i], 0, sizeof s[i]);
        s[i].lock = r[i % 2];
        s[i].arrived = &arrived;
        s[i].go = &go;
        s[i].rc = s[i].release_rc = -1;
        assert_int_equal(pthread_create(&s[i].thread, NULL, sharer_main,
                                        &s[i]), 0);
    }
    /* Each reader counts itself only once it holds, and none lets go
     * before go: reaching n means all n hold at the same time. */
    all = hl_wait_count(&arrived, n, hl_widen(15000));
    if (all) {
        srv_hash(&h, "shared");
        expect_field(&h, "mode", "read");
        assert_int_equal(h.n, n + 1);
        for (int i = 0; i < n; i++) {
            field_of(field, c[i % 2], s[i].owner);
            expect_field(&h, field, "1");
        }
        assert_true(locked(r[0]));
        assert_true(locked(w));
        /* The writer is the one left out. */
        assert_status(hilock_lock_try_acquire(w, 0, HILOCK_LEASE_WATCHDOG),
                      HILOCK_EBUSY);
        /* A single try claims no turn, so it holds no reader back. */
        writers_key(zkey, "shared");
        assert_int_equal(hl_raw_exists(fx.server, zkey), 0);
    }
    atomic_store(&go, true);
    for (int i = 0; i < n; i++)
        pthread_join(s[i].thread, NULL);
    if (!all)
        fail_msg("only %d of %d readers held the read lock at once",
                 atomic_load(&arrived), n);
    for (int i = 0; i < n; i++) {
        if (s[i].rc != HILOCK_OK || s[i].release_rc != HILOCK_OK ||
            !s[i].go_seen)
            fail_msg("reader %d: acquire %s, release %s", i,
                     hilock_errname(s[i].rc),
                     hilock_errname(s[i].release_rc));
    }
    assert_int_equal(hl_raw_exists(fx.server, "shared"), 0);
    assert_false(locked(r[1]));
    assert_false(locked(w));
    hl_free_lock(w);
    hl_free_lock(r[1]);
    hl_free_lock(r[0]);
    hl_free_client(wc);
    hl_free_client(c[1]);
    hl_free_client(c[0]);
}

/* ---- writers exclude everyone ------------------------------------------ */

#define MIX_THREADS 6

typedef struct section {
    int64_t enter_ns;
    int64_t exit_ns;
    int thread;
    bool write;
} section;

typedef struct mix_thread {
    pthread_t thread;
    hilock_lock *rlock;
    hilock_lock *wlock;
    section *out; /* cycles entries */
    int cycles;
    int index;
    int64_t longest_wait_ms;
    char error[256];
} mix_thread;

static void spin_us(int us)
{
    int64_t end = hl_now_ns() + (int64_t)us * 1000;

    while (hl_now_ns() < end)
        ;
}

static void *mix_main(void *arg)
{
    mix_thread *t = arg;
    uint32_t x = 2654435761u * (uint32_t)(t->index + 1);

    for (int i = 0; i < t->cycles; i++) {
        bool write;
        hilock_lock *l;
        int64_t t0, waited;
        int rc;

        x = x * 1103515245u + 12345u;
        write = (x >> 16) % 3 == 0;
        l = write ? t->wlock : t->rlock;
        t0 = hl_now_ms();
        /* Finite: a lost wake-up becomes a report, not a hang. */
        rc = hilock_lock_try_acquire(l, hl_widen(30000),
                                     HILOCK_LEASE_WATCHDOG);
        waited = hl_now_ms() - t0;
        if (waited > t->longest_wait_ms)
            t->longest_wait_ms = waited;
        if (rc != HILOCK_OK) {
            snprintf(t->error, sizeof t->error, "cycle %d: %s acquire: %s "
                     "(%s)", i, write ? "write" : "read", hilock_errname(rc),
                     hilock_last_error());
            return NULL;
        }
        t->out[i].enter_ns = hl_now_ns();
        t->out[i].write = write;
        t->out[i].thread = t->index;
        /* Readers stay a little longer, so that they overlap each other
         * and writers have readers to wait for. */
        spin_us(write ? 100 : 400);
        t->out[i].exit_ns = hl_now_ns();
        rc = hilock_lock_release(l);
        if (rc != HILOCK_OK) {
            snprintf(t->error, sizeof t->error, "cycle %d: %s release: %s",
                     i, write ? "write" : "read", hilock_errname(rc));
            return NULL;
        }
    }
    return NULL;
}

static void test_writers_exclude(void **state)
{
    int threads = hl_scaled(MIX_THREADS, 3), cycles = hl_scaled(40, 6);
    hilock_client *c[2] = { hl_new_client(fx.server, NULL),
                            hl_new_client(fx.server, NULL) };
    hilock_lock *r[2] = { hl_new_read_lock(c[0], "mixed"),
                          hl_new_read_lock(c[1], "mixed") };
    hilock_lock *w[2] = { hl_new_write_lock(c[0], "mixed"),
                          hl_new_write_lock(c[1], "mixed") };
    size_t total = (size_t)threads * (size_t)cycles;
    section *all = calloc(total, sizeof *all);
    mix_thread t[MIX_THREADS];
    int writes = 0, reads = 0, shared = 0;
    int64_t longest = 0;

    (void)state;
    assert_non_null(all);
    for (int i = 0; i < threads; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].rlock = r[i % 2];
        t[i].wlock = w[i % 2];
        t[i].out = all + (size_t)i * (size_t)cycles;
        t[i].cycles = cycles;
        t[i].index = i;
        assert_int_equal(pthread_create(&t[i].thread, NULL, mix_main, &t[i]),
                         0);
    }
    for (int i = 0; i < threads; i++)
        pthread_join(t[i].thread, NULL);
    for (int i = 0; i < threads; i++) {
        if (t[i].error[0] != '\0')
            fail_msg("thread %d: %s", i, t[i].error);
        if (t[i].longest_wait_ms > longest)
            longest = t[i].longest_wait_ms;
    }
    for (size_t i = 0; i < total; i++) {
        const section *a = &all[i];

        if (a->write)
            writes++;
        else
            reads++;
        for (size_t j = i + 1; j < total; j++) {
            const section *b = &all[j];
            bool overlap = a->enter_ns < b->exit_ns &&
                           b->enter_ns < a->exit_ns;

            if (!overlap)
                continue;
            if (a->write || b->write)
                fail_msg("a %s hold of thread %d [%" PRId64 ", %" PRId64
                         "] overlaps a %s hold of thread %d [%" PRId64
                         ", %" PRId64 "] (ns)",
                         a->write ? "write" : "read", a->thread,
                         a->enter_ns, a->exit_ns,
                         b->write ? "write" : "read", b->thread,
                         b->enter_ns, b->exit_ns);
            shared++;
        }
    }
    /* Both kinds took part, or the check above proved little. */
    if (writes == 0 || reads == 0)
        fail_msg("%d write holds and %d read holds", writes, reads);
    /* Every hold is short: an acquire that waited this long sat out a
     * lease or a heartbeat instead of hearing a release. */
    if (longest > hl_widen(10000))
        fail_msg("an acquire waited %lld ms for holds of microseconds",
                 (long long)longest);
    print_message("%d write holds, %d read holds, %d overlapping read "
                  "pairs, longest wait %lld ms\n", writes, reads, shared,
                  (long long)longest);
    assert_int_equal(hl_raw_exists(fx.server, "mixed"), 0);
    free(all);
    for (int i = 0; i < 2; i++) {
        hl_free_lock(w[i]);
        hl_free_lock(r[i]);
    }
    hl_free_client(c[1]);
    hl_free_client(c[0]);
}

/* ---- a writer is not starved ------------------------------------------- */

#define CHURNERS 4

/* A reader thread that is never without a read hold: it takes a hold for
 * one of its two owners before giving up the other's.  Without the rule
 * that a waiting writer holds new readers back, the lock would never be
 * free.  Once a new hold is refused it lets go of the one it has. */
typedef struct churner {
    pthread_t thread;
    hilock_lock *lock;
    uint64_t owner[2];
    atomic_bool *stop;
    atomic_int cycles;
    atomic_bool finished;
    bool turned_away;
    int64_t turned_away_ms;
    char error[256];
} churner;

static void *churner_main(void *arg)
{
    churner *t = arg;
    uint64_t held = t->owner[0], next = t->owner[1];
    int rc = acquire_owner(t->lock, held, hl_widen(5000),
                           HILOCK_LEASE_WATCHDOG, NULL);

    if (rc != HILOCK_OK) {
        snprintf(t->error, sizeof t->error, "first acquire: %s",
                 hilock_errname(rc));
        atomic_store(&t->finished, true);
        return NULL;
    }
    while (!atomic_load(t->stop)) {
        uint64_t swap;

        rc = acquire_owner(t->lock, next, 0, HILOCK_LEASE_WATCHDOG, NULL);
        if (rc == HILOCK_EBUSY) {
            t->turned_away = true;
            t->turned_away_ms = hl_now_ms();
            break;
        }
        if (rc != HILOCK_OK) {
            snprintf(t->error, sizeof t->error, "acquire: %s",
                     hilock_errname(rc));
            break;
        }
        rc = release_owner(t->lock, held);
        if (rc != HILOCK_OK) {
            snprintf(t->error, sizeof t->error, "release: %s",
                     hilock_errname(rc));
            break;
        }
        swap = held;
        held = next;
        next = swap;
        atomic_fetch_add(&t->cycles, 1);
    }
    rc = release_owner(t->lock, held);
    if (rc != HILOCK_OK && t->error[0] == '\0')
        snprintf(t->error, sizeof t->error, "last release: %s",
                 hilock_errname(rc));
    atomic_store(&t->finished, true);
    return NULL;
}

typedef struct churn_all {
    churner *t;
    int n;
    int min_cycles;
} churn_all;

static bool churned_enough(void *arg)
{
    churn_all *a = arg;

    for (int i = 0; i < a->n; i++)
        if (atomic_load(&a->t[i].cycles) < a->min_cycles ||
            atomic_load(&a->t[i].finished))
            return false;
    return true;
}

static bool churn_finished(void *arg)
{
    churn_all *a = arg;

    for (int i = 0; i < a->n; i++)
        if (!atomic_load(&a->t[i].finished))
            return false;
    return true;
}

static void test_writer_not_starved(void **state)
{
    int n = hl_scaled(CHURNERS, 3);
    hilock_client *c[2] = { hl_new_client(fx.server, NULL),
                            hl_new_client(fx.server, NULL) };
    hilock_client *wc = hl_new_client(fx.server, NULL);
    hilock_lock *r[2] = { hl_new_read_lock(c[0], "stream"),
                          hl_new_read_lock(c[1], "stream") };
    hilock_lock *w = hl_new_write_lock(wc, "stream");
    static churner t[CHURNERS];
    churn_all ca = { t, n, 10 };
    static atomic_bool stop;
    int64_t t_ask, t_got;
    hash_view h;
    char wfield[FIELD_CAP];
    int rc;

    (void)state;
    atomic_store(&stop, false);
    for (int i = 0; i < n; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].lock = r[i % 2];
        t[i].owner[0] = 1000 + 2 * (uint64_t)i;
        t[i].owner[1] = 1001 + 2 * (uint64_t)i;
        t[i].stop = &stop;
        atomic_init(&t[i].cycles, 0);
        atomic_init(&t[i].finished, false);
        assert_int_equal(pthread_create(&t[i].thread, NULL, churner_main,
                                        &t[i]), 0);
    }
    /* Every reader is churning, each always holding something. */
    if (!hl_wait_until(churned_enough, &ca, hl_widen(20000))) {
        atomic_store(&stop, true);
        for (int i = 0; i < n; i++)
            pthread_join(t[i].thread, NULL);
        for (int i = 0; i < n; i++)
            if (t[i].error[0] != '\0')
                fail_msg("reader %d: %s", i, t[i].error);
        fail_msg("the readers did not get going");
    }
    t_ask = hl_now_ms();
    rc = hilock_lock_try_acquire(w, hl_widen(5000), HILOCK_LEASE_WATCHDOG);
    t_got = hl_now_ms();
    if (rc == HILOCK_OK) {
        /* Nobody reads any more: the writer is alone in the hash. */
        srv_hash(&h, "stream");
        write_field_of(wfield, wc, hilock_thread_owner());
        expect_field(&h, "mode", "write");
        expect_field(&h, wfield, "1");
        assert_int_equal(h.n, 2);
        field_of(wfield, wc, hilock_thread_owner());
        assert_false(claim_present("stream", wfield));
    }
    atomic_store(&stop, true);
    if (!hl_wait_until(churn_finished, &ca, hl_widen(20000)))
        fail_msg("the reader threads did not stop");
    for (int i = 0; i < n; i++)
        pthread_join(t[i].thread, NULL);
    if (rc != HILOCK_OK)
        fail_msg("the writer got %s after waiting %lld ms behind readers",
                 hilock_errname(rc), (long long)(t_got - t_ask));
    for (int i = 0; i < n; i++) {
        if (t[i].error[0] != '\0')
            fail_msg("reader %d: %s", i, t[i].error);
        /* It held all along until turned away, so it must have been
         * turned away for the writer to get in; and only because of the
         * writer. */
        if (!t[i].turned_away)
            fail_msg("reader %d was never turned away, yet the writer got "
                     "the lock", i);
        if (t[i].turned_away_ms < t_ask)
            fail_msg("reader %d was turned away %lld ms before any writer "
                     "asked", i, (long long)(t_ask - t[i].turned_away_ms));
    }
    print_message("the writer waited %lld ms\n", (long long)(t_got - t_ask));
    assert_status(hilock_lock_release(w), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "stream"), 0);
    hl_free_lock(w);
    hl_free_lock(r[1]);
    hl_free_lock(r[0]);
    hl_free_client(wc);
    hl_free_client(c[1]);
    hl_free_client(c[0]);
}

static void test_waiting_writer_holds_new_readers_back(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *wc =
        hl_new_client(fx.server, &(hl_client_opts){ .waiter_ms = LONG_MS });
    hilock_lock *r = hl_new_read_lock(c, "behind");
    hilock_lock *w = hl_new_write_lock(wc, "behind");
    char wmember[FIELD_CAP], field[FIELD_CAP], tkey[KEY_CAP];
    int64_t t_rel;
    hash_view h;
    static hl_acquire_rec wa;

    (void)state;
    field_of(wmember, wc, OWNER_C);
    assert_status(acquire_as(r, OWNER_A, 0, LONG_MS), HILOCK_OK);
    acquire_start(&wa, w, OWNER_C, hl_widen(20000), HILOCK_LEASE_WATCHDOG);
    wait_claim("behind", wmember, true);
    /* A newcomer waits behind the writer... */
    assert_status(acquire_as(r, OWNER_B, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_EBUSY);
    /* ...but a reader reading again does not: the writer waits for it. */
    assert_status(acquire_as(r, OWNER_A, 0, LONG_MS), HILOCK_OK);
    assert_int_equal(hold_count_as(r, OWNER_A), 2);
    srv_hash(&h, "behind");
    field_of(field, c, OWNER_A);
    expect_field(&h, "mode", "read");
    expect_field(&h, field, "2");
    field_of(field, c, OWNER_B);
    expect_field(&h, field, NULL);
    timeout_key(tkey, "behind", field, 1);
    assert_int_equal(hl_raw_exists(fx.server, tkey), 0);
    assert_int_equal(h.n, 2);
    assert_int_equal(atomic_load(&wa.calls), 0);
    assert_status(release_as(r, OWNER_A), HILOCK_OK);
    assert_int_equal(atomic_load(&wa.calls), 0);
    t_rel = hl_now_ms();
    assert_status(release_as(r, OWNER_A), HILOCK_OK);
    assert_status(acquire_end(&wa), HILOCK_OK);
    if (wa.at_ms - t_rel > hl_widen(2000))
        fail_msg("the writer got in %lld ms after the last read release",
                 (long long)(wa.at_ms - t_rel));
    assert_false(claim_present("behind", wmember));
    assert_status(release_as(w, OWNER_C), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "behind"), 0);
    hl_free_lock(w);
    hl_free_lock(r);
    hl_free_client(wc);
    hl_free_client(c);
}

/* ---- downgrade --------------------------------------------------------- */

static void test_downgrade(void **state)
{
    /* The waiting writer's heartbeat is minutes apart: only a release
     * message can let it in soon. */
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *d =
        hl_new_client(fx.server, &(hl_client_opts){ .waiter_ms = LONG_MS });
    hilock_lock *r = hl_new_read_lock(c, "down");
    hilock_lock *w = hl_new_write_lock(c, "down");
    hilock_lock *rd = hl_new_read_lock(d, "down");
    hilock_lock *wd = hl_new_write_lock(d, "down");
    char of[FIELD_CAP], owf[FIELD_CAP], pf[FIELD_CAP];
    char qm[FIELD_CAP], qwf[FIELD_CAP], tkey[KEY_CAP];
    static hl_acquire_rec pa, qa;
    int64_t t_rel;
    hash_view h;

    (void)state;
    field_of(of, c, OWNER_A);
    write_field_of(owf, c, OWNER_A);
    field_of(pf, d, OWNER_B);
    field_of(qm, d, OWNER_C);
    write_field_of(qwf, d, OWNER_C);
    /* The write lease is long, so that only the downgrade's message can
     * let the waiting reader in soon. */
    assert_status(acquire_as(w, OWNER_A, 0, LONG_MS), HILOCK_OK);
    assert_status(acquire_as(rd, OWNER_B, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_EBUSY);
    acquire_start(&pa, rd, OWNER_B, hl_widen(60000), HILOCK_LEASE_WATCHDOG);
    hl_expect_pending(d, rd, 1);
    /* The writer may read too, and write again while reading: it is not
     * an upgrade when it holds the write lock already. */
    assert_status(acquire_as(r, OWNER_A, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(acquire_as(w, OWNER_A, 0, LONG_MS), HILOCK_OK);
    srv_hash(&h, "down");
    expect_field(&h, "mode", "write");
    expect_field(&h, owf, "2");
    expect_field(&h, of, "1");
    assert_int_equal(h.n, 3);
    assert_int_equal(hold_count_as(w, OWNER_A), 2);
    assert_int_equal(hold_count_as(r, OWNER_A), 1);
    assert_status(release_as(w, OWNER_A), HILOCK_OK);
    assert_int_equal(atomic_load(&pa.calls), 0);
    t_rel = hl_now_ms();
    assert_status(release_as(w, OWNER_A), HILOCK_OK);

    /* Downgraded: still reading, no longer writing, and the reader that
     * waited is told it may join. */
    assert_status(acquire_end(&pa), HILOCK_OK);
    if (pa.at_ms - t_rel > hl_widen(2000))
        fail_msg("the waiting reader got in %lld ms after the downgrade",
                 (long long)(pa.at_ms - t_rel));
    srv_hash(&h, "down");
    expect_field(&h, "mode", "read");
    expect_field(&h, of, "1");
    expect_field(&h, pf, "1");
    expect_field(&h, owf, NULL);
    assert_int_equal(h.n, 3);
    timeout_key(tkey, "down", of, 1);
    assert_true(hl_raw_pttl(fx.server, tkey) > 0);
    assert_true(hl_raw_pttl(fx.server, "down") > 0);
    assert_int_equal(hold_count_as(w, OWNER_A), 0);
    assert_int_equal(hold_count_as(r, OWNER_A), 1);
    assert_status(acquire_as(wd, OWNER_C, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_EBUSY);

    /* A writer waits for the downgraded owner as for any reader. */
    acquire_start(&qa, wd, OWNER_C, hl_widen(20000), HILOCK_LEASE_WATCHDOG);
    wait_claim("down", qm, true);
    assert_status(release_as(rd, OWNER_B), HILOCK_OK);
    srv_hash(&h, "down");
    expect_field(&h, of, "1");
    expect_field(&h, qwf, NULL);
    assert_int_equal(atomic_load(&qa.calls), 0);
    /* Behind the waiting writer a new reader waits, the one reading
     * does not. */
    assert_status(acquire_as(rd, OWNER_B, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_EBUSY);
    assert_status(acquire_as(r, OWNER_A, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(release_as(r, OWNER_A), HILOCK_OK);
    assert_int_equal(atomic_load(&qa.calls), 0);
    t_rel = hl_now_ms();
    assert_status(release_as(r, OWNER_A), HILOCK_OK);
    assert_status(acquire_end(&qa), HILOCK_OK);
    if (qa.at_ms - t_rel > hl_widen(2000))
        fail_msg("the writer got in %lld ms after the downgraded owner's "
                 "last read release", (long long)(qa.at_ms - t_rel));
    srv_hash(&h, "down");
    expect_field(&h, "mode", "write");
    expect_field(&h, qwf, "1");
    assert_int_equal(h.n, 2);
    assert_status(release_as(wd, OWNER_C), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "down"), 0);
    hl_free_lock(wd);
    hl_free_lock(rd);
    hl_free_lock(w);
    hl_free_lock(r);
    hl_free_client(d);
    hl_free_client(c);
}

/* ---- upgrade is refused ------------------------------------------------ */

static void assert_same_hash(const hash_view *a, const hash_view *b)
{
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++)
        expect_field(b, a->field[i], a->value[i]);
}

static void test_upgrade_refused(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *d = hl_new_client(fx.server, NULL);
    hilock_lock *r = hl_new_read_lock(c, "upgrade");
    hilock_lock *w = hl_new_write_lock(c, "upgrade");
    hilock_lock *rd = hl_new_read_lock(d, "upgrade");
    char of[FIELD_CAP], tkey[KEY_CAP], zkey[KEY_CAP];
    hash_view before, after;
    int64_t t0, took;
    int rc;

    (void)state;
    field_of(of, c, OWNER_A);
    writers_key(zkey, "upgrade");
    assert_status(acquire_as(r, OWNER_A, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(acquire_as(r, OWNER_A, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(acquire_as(rd, OWNER_B, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    srv_hash(&before, "upgrade");
    expect_field(&before, of, "2");

    /* With a long wait it would wait for itself: refused at once. */
    t0 = hl_now_ms();
    rc = acquire_as(w, OWNER_A, hl_widen(30000), HILOCK_LEASE_WATCHDOG);
    took = hl_now_ms() - t0;
    assert_status(rc, HILOCK_EUPGRADE);
    if (took > hl_widen(1000))
        fail_msg("the upgrade was refused only after %lld ms",
                 (long long)took);
    srv_hash(&after, "upgrade");
    assert_same_hash(&before, &after);
    for (int i = 1; i <= 2; i++) {
        timeout_key(tkey, "upgrade", of, i);
        assert_true(hl_raw_pttl(fx.server, tkey) > 0);
    }
    /* No claim was left to hold other readers back. */
    assert_int_equal(hl_raw_exists(fx.server, zkey), 0);
    assert_status(acquire_as(rd, OWNER_C, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(release_as(rd, OWNER_C), HILOCK_OK);
    assert_int_equal(hold_count_as(r, OWNER_A), 2);
    assert_int_equal(hold_count_as(w, OWNER_A), 0);
    assert_status(release_as(w, OWNER_A), HILOCK_ENOTOWNER);

    /* The sync calls, waiting for ever, are refused the same way. */
    assert_status(hilock_lock_try_acquire(r, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    t0 = hl_now_ms();
    assert_status(hilock_lock_try_acquire(w, HILOCK_WAIT_FOREVER,
                                          HILOCK_LEASE_WATCHDOG),
                  HILOCK_EUPGRADE);
    assert_status(hilock_lock_acquire(w), HILOCK_EUPGRADE);
    took = hl_now_ms() - t0;
    if (took > hl_widen(2000))
        fail_msg("two refused upgrades took %lld ms", (long long)took);
    assert_status(hilock_lock_release(r), HILOCK_OK);

    /* Release the read holds first, then write. */
    assert_status(release_as(r, OWNER_A), HILOCK_OK);
    assert_status(release_as(r, OWNER_A), HILOCK_OK);
    assert_status(acquire_as(w, OWNER_A, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_EBUSY);
    assert_status(release_as(rd, OWNER_B), HILOCK_OK);
    assert_status(acquire_as(w, OWNER_A, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(release_as(w, OWNER_A), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "upgrade"), 0);
    hl_free_lock(rd);
    hl_free_lock(w);
    hl_free_lock(r);
    hl_free_client(d);
    hl_free_client(c);
}

/* ---- a killed reader's holds run out, the others' stay ----------------- */

typedef struct key_state {
    const char *key;
    long long want;
} key_state;

static bool key_exists_is(void *arg)
{
    key_state *k = arg;

    return hl_raw_exists(fx.server, k->key) == k->want;
}

static void test_dead_reader_expires(void **state)
{
    const int watchdog_ms = 1000;
    const hl_client_opts watched = { .watchdog_ms = watchdog_ms };
    int ready[2];
    char child_field[FIELD_CAP], pf[FIELD_CAP];
    char child_tkey[KEY_CAP], parent_tkey[KEY_CAP];
    hilock_client *c, *wc;
    hilock_lock *r, *w;
    key_state gone;
    int64_t t_kill, t_rel, count = -1;
    static hl_lost_rec lr;
    hash_view h;
    bool lost = true;
    static hl_acquire_rec wa;

    (void)state;
    assert_int_equal(pipe(ready), 0);
    /* Fork first: the child must not inherit a client whose threads it
     * does not have. */
    if (hl_children_fork(&fx.kids, 0) == 0) {
        char why[300], line[FIELD_CAP + 1];
        hilock_client *hc;
        hilock_lock *hr = NULL;
        int len;

        close(ready[0]);
        hc = hl_open_client(fx.server, &watched, why, sizeof why);
        if (hc == NULL || hilock_read_lock_create(&hr, hc, "dead") != 0 ||
            hilock_lock_try_acquire(hr, 0, HILOCK_LEASE_WATCHDOG) != 0)
            _exit(1);
        len = snprintf(line, sizeof line, "%s:%" PRIu64 "\n",
                       hilock_client_id(hc), hilock_thread_owner());
        if (write(ready[1], line, (size_t)len) != len)
            _exit(1);
        /* Read, with the watchdog renewing, until the parent kills us. */
        for (;;)
            pause();
    }
    close(ready[1]);
    if (!hl_read_line(ready[0], child_field, sizeof child_field,
                      hl_widen(10000)))
        fail_msg("the child never reported holding the read lock");
    close(ready[0]);
    c = hl_new_client(fx.server, &watched);
    wc = hl_new_client(fx.server, &(hl_client_opts){ .waiter_ms = LONG_MS });
    r = hl_new_read_lock(c, "dead");
    w = hl_new_write_lock(wc, "dead");
    hl_lost_rec_init(&lr, NULL);
    assert_status(hilock_lock_set_lost_callback(r, hl_record_lost, &lr),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(r, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    field_of(pf, c, hilock_thread_owner());
    timeout_key(child_tkey, "dead", child_field, 1);
    timeout_key(parent_tkey, "dead", pf, 1);
    srv_hash(&h, "dead");
    expect_field(&h, child_field, "1");
    expect_field(&h, pf, "1");

    assert_int_equal(hl_children_kill(&fx.kids, 0), 0);
    t_kill = hl_now_ms();
    /* Nobody renews the child's hold: it runs out within a watchdog
     * timeout of its last renewal. */
    gone.key = child_tkey;
    gone.want = 0;
    if (!hl_wait_until(key_exists_is, &gone, watchdog_ms + hl_widen(2000)))
        fail_msg("the killed reader's hold was still there %lld ms after "
                 "the kill", (long long)(hl_now_ms() - t_kill));
    assert_true(hl_raw_pttl(fx.server, parent_tkey) > 0);
    /* A writer looking drops the dead reader but still waits for the
     * live one. */
    assert_status(hilock_lock_try_acquire(w, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_EBUSY);
    srv_hash(&h, "dead");
    expect_field(&h, child_field, NULL);
    expect_field(&h, pf, "1");
    expect_field(&h, "mode", "read");
    assert_int_equal(h.n, 2);

    /* The live reader's hold outlasts three watchdog timeouts. */
    while (hl_now_ms() - t_kill < 3 * watchdog_ms) {
        long long ttl = hl_raw_pttl(fx.server, parent_tkey);

        if (ttl <= 0 || ttl > watchdog_ms)
            fail_msg("the live reader's hold has PTTL %lld, %lld ms after "
                     "the kill", ttl, (long long)(hl_now_ms() - t_kill));
        assert_int_equal(atomic_load(&lr.calls), 0);
        hl_sleep_ms(50);
    }
    assert_status(hilock_lock_hold_count(r, &count), HILOCK_OK);
    assert_int_equal(count, 1);
    assert_status(hilock_lock_lease_lost(r, &lost), HILOCK_OK);
    assert_false(lost);

    acquire_start(&wa, w, OWNER_D, hl_widen(20000), HILOCK_LEASE_WATCHDOG);
    field_of(pf, wc, OWNER_D);
    wait_claim("dead", pf, true);
    t_rel = hl_now_ms();
    assert_status(hilock_lock_release(r), HILOCK_OK);
    assert_status(acquire_end(&wa), HILOCK_OK);
    if (wa.at_ms - t_rel > hl_widen(2000))
        fail_msg("the writer got in %lld ms after the last live reader "
                 "let go", (long long)(wa.at_ms - t_rel));
    assert_status(release_as(w, OWNER_D), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "dead"), 0);
    assert_int_equal(atomic_load(&lr.calls), 0);
    hl_free_lock(w);
    hl_free_lock(r);
    hl_free_client(wc);
    hl_free_client(c);
}

/* ---- wake-ups by message ----------------------------------------------- */

static void test_writer_woken_by_message(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *wc =
        hl_new_client(fx.server, &(hl_client_opts){ .waiter_ms = LONG_MS });
    hilock_lock *r = hl_new_read_lock(c, "wakew");
    hilock_lock *w = hl_new_write_lock(wc, "wakew");
    char member[FIELD_CAP];
    int64_t t_rel;
    static hl_acquire_rec wa;

    (void)state;
    field_of(member, wc, OWNER_B);
    assert_status(acquire_as(r, OWNER_A, 0, LONG_MS), HILOCK_OK);
    acquire_start(&wa, w, OWNER_B, hl_widen(60000), HILOCK_LEASE_WATCHDOG);
    wait_claim("wakew", member, true);
    hl_expect_pending(wc, w, 1);
    t_rel = hl_now_ms();
    assert_status(release_as(r, OWNER_A), HILOCK_OK);
    assert_status(acquire_end(&wa), HILOCK_OK);
    /* The reader's lease had minutes left and the writer's heartbeat is
     * minutes apart: only the release message explains this. */
    if (wa.at_ms - t_rel > hl_widen(2000))
        fail_msg("the writer got in %lld ms after the read release",
                 (long long)(wa.at_ms - t_rel));
    assert_status(release_as(w, OWNER_B), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "wakew"), 0);
    hl_free_lock(w);
    hl_free_lock(r);
    hl_free_client(wc);
    hl_free_client(c);
}

#define WOKEN 4

static void test_readers_woken_by_message(void **state)
{
    hilock_client *wc = hl_new_client(fx.server, NULL);
    hilock_client *c[2] = { hl_new_client(fx.server, NULL),
                            hl_new_client(fx.server, NULL) };
    hilock_lock *w = hl_new_write_lock(wc, "waker");
    hilock_lock *r[2] = { hl_new_read_lock(c[0], "waker"),
                          hl_new_read_lock(c[1], "waker") };
    static hl_acquire_rec ra[WOKEN];
    int64_t t_rel;
    hash_view h;

    (void)state;
    assert_status(acquire_as(w, OWNER_A, 0, LONG_MS), HILOCK_OK);
    for (int i = 0; i < WOKEN; i++)
        acquire_start(&ra[i], r[i % 2], OWNER_B + (uint64_t)i, hl_widen(60000),
                      HILOCK_LEASE_WATCHDOG);
    hl_expect_pending(c[0], r[0], WOKEN / 2);
    hl_expect_pending(c[1], r[1], WOKEN / 2);
    t_rel = hl_now_ms();
    assert_status(release_as(w, OWNER_A), HILOCK_OK);
    for (int i = 0; i < WOKEN; i++) {
        assert_status(acquire_end(&ra[i]), HILOCK_OK);
        if (ra[i].at_ms - t_rel > hl_widen(2000))
            fail_msg("reader %d got in %lld ms after the write release", i,
                     (long long)(ra[i].at_ms - t_rel));
    }
    /* All of them at once. */
    srv_hash(&h, "waker");
    expect_field(&h, "mode", "read");
    assert_int_equal(h.n, WOKEN + 1);
    for (int i = 0; i < WOKEN; i++)
        assert_status(release_as(r[i % 2], OWNER_B + (uint64_t)i),
                      HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "waker"), 0);
    hl_free_lock(r[1]);
    hl_free_lock(r[0]);
    hl_free_lock(w);
    hl_free_client(c[1]);
    hl_free_client(c[0]);
    hl_free_client(wc);
}

/* ---- a writer that stops waiting gives up its claim -------------------- */

/* A sync try-acquire of the write lock in a thread of its own. */
typedef struct sync_writer {
    pthread_t thread;
    hilock_lock *lock;
    int64_t wait_ms;
    _Atomic uint64_t owner;
    int rc;
    int64_t ended_ms;
    atomic_bool done;
} sync_writer;

static void *sync_writer_main(void *arg)
{
    sync_writer *s = arg;

    atomic_store(&s->owner, hilock_thread_owner());
    s->rc = hilock_lock_try_acquire(s->lock, s->wait_ms,
                                    HILOCK_LEASE_WATCHDOG);
    s->ended_ms = hl_now_ms();
    atomic_store(&s->done, true);
    return NULL;
}

static bool owner_known(void *arg)
{
    return atomic_load(&((sync_writer *)arg)->owner) != 0;
}

/* A reader waits behind a writer's claim that would outlast the test;
 * the writer stops waiting, by running out of time (a sync try-acquire)
 * or by being cancelled (async), and must give the claim back. */
static void claim_given_up(hilock_client *wc, hilock_lock *w,
                           hilock_client *rc2, hilock_lock *r2,
                           uint64_t reader, bool cancel)
{
    /* Static: a thread or a callback still using it after a failed
     * assertion must not write into a dead stack frame. */
    static sync_writer sw;
    static hl_acquire_rec wa, ra;
    char member[FIELD_CAP];
    int64_t t_end;

    if (cancel) {
        acquire_start(&wa, w, OWNER_C, HILOCK_WAIT_FOREVER,
                      HILOCK_LEASE_WATCHDOG);
        field_of(member, wc, OWNER_C);
    } else {
        memset(&sw, 0, sizeof sw);
        sw.lock = w;
        sw.wait_ms = 1500;
        sw.rc = -1;
        atomic_init(&sw.owner, 0);
        atomic_init(&sw.done, false);
        assert_int_equal(pthread_create(&sw.thread, NULL, sync_writer_main,
                                        &sw), 0);
        if (!hl_wait_until(owner_known, &sw, hl_widen(5000)))
            fail_msg("the writer thread did not start");
        field_of(member, wc, atomic_load(&sw.owner));
    }
    wait_claim("claim", member, true);
    acquire_start(&ra, r2, reader, hl_widen(60000), HILOCK_LEASE_WATCHDOG);
    hl_expect_pending(rc2, r2, 1);
    assert_int_equal(atomic_load(&ra.calls), 0);
    if (cancel) {
        assert_status(hilock_lock_cancel(w, wa.id), HILOCK_OK);
        assert_status(acquire_end(&wa), HILOCK_ECANCELED);
        t_end = wa.at_ms;
    } else {
        if (!hl_wait_flag(&sw.done, hl_widen(10000))) {
            pthread_detach(sw.thread);
            fail_msg("the writer's 1500 ms try-acquire did not return");
        }
        pthread_join(sw.thread, NULL);
        assert_status(sw.rc, HILOCK_EBUSY);
        t_end = sw.ended_ms;
    }
    /* On its own the claim would last minutes. */
    if (!wait_claim_for("claim", member, false, hl_widen(500)))
        fail_msg("the writer's claim outlived its %s by 500 ms",
                 cancel ? "cancel" : "timeout");
    assert_status(acquire_end(&ra), HILOCK_OK);
    if (ra.at_ms - t_end > hl_widen(2000))
        fail_msg("the reader got in %lld ms after the writer gave up",
                 (long long)(ra.at_ms - t_end));
    assert_status(release_as(r2, reader), HILOCK_OK);
}

static void test_writer_gives_up_claim(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *c2 = hl_new_client(fx.server, NULL);
    hilock_client *wc =
        hl_new_client(fx.server, &(hl_client_opts){ .waiter_ms = LONG_MS });
    hilock_lock *r = hl_new_read_lock(c, "claim");
    hilock_lock *r2 = hl_new_read_lock(c2, "claim");
    hilock_lock *w = hl_new_write_lock(wc, "claim");

    (void)state;
    assert_status(acquire_as(r, OWNER_A, 0, LONG_MS), HILOCK_OK);
    claim_given_up(wc, w, c2, r2, OWNER_B, false);
    claim_given_up(wc, w, c2, r2, OWNER_D, true);
    assert_status(release_as(r, OWNER_A), HILOCK_OK);
    /* Nothing at all is left behind: no hash, no per-hold keys, no
     * claims. */
    assert_int_equal(hl_raw_dbsize_locks(fx.server), 0);
    hl_free_lock(w);
    hl_free_lock(r2);
    hl_free_lock(r);
    hl_free_client(wc);
    hl_free_client(c2);
    hl_free_client(c);
}

/* ---- a dead writer's claim lapses -------------------------------------- */

static void test_dead_writer_claim_lapses(void **state)
{
    /* Short enough for the test; long enough that a loaded machine (or
     * valgrind) does not miss a heartbeat by that much. */
    const int waiter_ms = hl_under_valgrind() ? 5000 : 2000;
    const int bound = waiter_ms + hl_widen(1500);
    int ready[2], go[2];
    char member[FIELD_CAP], zkey[KEY_CAP];
    hilock_client *c, *c2;
    hilock_lock *r, *r2;
    long long first, later = -1;
    int64_t t0, t_kill, took;
    int rc;

    (void)state;
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(go), 0);
    if (hl_children_fork(&fx.kids, 0) == 0) {
        const hl_client_opts opts = { .waiter_ms = waiter_ms };
        char why[300], line[FIELD_CAP + 1], go_byte;
        hilock_client *hc;
        hilock_lock *hw = NULL;
        int len;

        close(ready[0]);
        close(go[1]);
        hc = hl_open_client(fx.server, &opts, why, sizeof why);
        if (hc == NULL || hilock_write_lock_create(&hw, hc, "claim") != 0)
            _exit(1);
        len = snprintf(line, sizeof line, "%s:%" PRIu64 "\n",
                       hilock_client_id(hc), hilock_thread_owner());
        if (write(ready[1], line, (size_t)len) != len)
            _exit(1);
        if (!hl_read_exact(go[0], &go_byte, 1, 30000))
            _exit(1);
        /* Waits, renewing its claim, until the parent kills us. */
        hilock_lock_try_acquire(hw, HILOCK_WAIT_FOREVER,
                                HILOCK_LEASE_WATCHDOG);
        _exit(1);
    }
    close(ready[1]);
    close(go[0]);
    if (!hl_read_line(ready[0], member, sizeof member, hl_widen(10000)))
        fail_msg("the child never reported its client");
    close(ready[0]);
    c = hl_new_client(fx.server, NULL);
    c2 = hl_new_client(fx.server, NULL);
    r = hl_new_read_lock(c, "claim");
    r2 = hl_new_read_lock(c2, "claim");
    writers_key(zkey, "claim");
    assert_status(acquire_as(r, OWNER_A, 0, LONG_MS), HILOCK_OK);
    assert_int_equal(write(go[1], "g", 1), 1);
    close(go[1]);
    wait_claim("claim", member, true);

    /* While the writer lives its claim is renewed past the waiter
     * timeout, and new readers keep waiting. */
    first = claim_score("claim", member);
    t0 = hl_now_ms();
    while (hl_now_ms() - t0 < waiter_ms + waiter_ms / 2) {
        later = claim_score("claim", member);
        if (later < 0)
            fail_msg("the live writer's claim went away after %lld ms",
                     (long long)(hl_now_ms() - t0));
        hl_sleep_ms(50);
    }
    if (later <= first)
        fail_msg("the claim was not renewed: score %lld, then %lld", first,
                 later);
    assert_status(acquire_as(r2, OWNER_B, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_EBUSY);

    assert_int_equal(hl_children_kill(&fx.kids, 0), 0);
    t_kill = hl_now_ms();
    /* The live reader's lease has minutes left, so only the claim's own
     * deadline can let this reader in. */
    rc = acquire_as(r2, OWNER_C, bound + 3000, HILOCK_LEASE_WATCHDOG);
    took = hl_now_ms() - t_kill;
    assert_status(rc, HILOCK_OK);
    if (took > bound)
        fail_msg("a new reader got in %lld ms after the waiting writer was "
                 "killed; its claim lapses %d ms after its last renewal",
                 (long long)took, waiter_ms);
    /* Nobody writes to the places again: the key goes within twice the
     * waiter timeout of the dead writer's last renewal. */
    {
        key_state gone = {zkey, 0};
        if (!hl_wait_until(key_exists_is, &gone,
                           2 * waiter_ms + hl_widen(1500)))
            fail_msg("the dead writer's places were still there %lld ms "
                     "after the kill",
                     (long long)(hl_now_ms() - t_kill));
    }
    assert_status(release_as(r2, OWNER_C), HILOCK_OK);
    assert_status(release_as(r, OWNER_A), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "claim"), 0);
    hl_free_lock(r2);
    hl_free_lock(r);
    hl_free_client(c2);
    hl_free_client(c);
}

/* ---- reentrancy, ownership, is_locked ---------------------------------- */

static void test_reentrant_both_sides(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *r = hl_new_read_lock(c, "again");
    hilock_lock *w = hl_new_write_lock(c, "again");
    char f[FIELD_CAP], wf[FIELD_CAP], tkey[KEY_CAP], count[8];
    bool held = true;
    int64_t n = -1;

    (void)state;
    field_of(f, c, hilock_thread_owner());
    write_field_of(wf, c, hilock_thread_owner());
    assert_false(locked(r));
    assert_false(locked(w));

    for (int i = 1; i <= 3; i++) {
        assert_status(hilock_lock_try_acquire(r, 0, HILOCK_LEASE_WATCHDOG),
                      HILOCK_OK);
        assert_status(hilock_lock_hold_count(r, &n), HILOCK_OK);
        assert_int_equal(n, i);
        snprintf(count, sizeof count, "%d", i);
        assert_true(hl_raw_bulk(fx.server, count, sizeof count, "HGET",
                                "again", f, (char *)NULL));
        assert_int_equal(strtol(count, NULL, 10), i);
        /* One lease per hold. */
        timeout_key(tkey, "again", f, i);
        assert_true(hl_raw_pttl(fx.server, tkey) > 0);
    }
    assert_status(hilock_lock_hold_count(w, &n), HILOCK_OK);
    assert_int_equal(n, 0);
    assert_status(hilock_lock_is_held_by_me(w, &held), HILOCK_OK);
    assert_false(held);
    assert_true(locked(r));
    assert_true(locked(w));
    for (int i = 2; i >= 0; i--) {
        assert_status(hilock_lock_release(r), HILOCK_OK);
        assert_status(hilock_lock_hold_count(r, &n), HILOCK_OK);
        assert_int_equal(n, i);
        /* The lease of the hold given back goes with it. */
        timeout_key(tkey, "again", f, i + 1);
        assert_int_equal(hl_raw_exists(fx.server, tkey), 0);
        if (i > 0) {
            timeout_key(tkey, "again", f, i);
            assert_true(hl_raw_pttl(fx.server, tkey) > 0);
        }
    }
    assert_int_equal(hl_raw_exists(fx.server, "again"), 0);
    assert_false(locked(r));
    assert_false(locked(w));
    assert_status(hilock_lock_release(r), HILOCK_ENOTOWNER);

    for (int i = 1; i <= 3; i++) {
        assert_status(hilock_lock_try_acquire(w, 0, HILOCK_LEASE_WATCHDOG),
                      HILOCK_OK);
        assert_status(hilock_lock_hold_count(w, &n), HILOCK_OK);
        assert_int_equal(n, i);
        assert_true(hl_raw_bulk(fx.server, count, sizeof count, "HGET",
                                "again", wf, (char *)NULL));
        assert_int_equal(strtol(count, NULL, 10), i);
    }
    assert_status(hilock_lock_hold_count(r, &n), HILOCK_OK);
    assert_int_equal(n, 0);
    assert_status(hilock_lock_is_held_by_me(w, &held), HILOCK_OK);
    assert_true(held);
    assert_true(locked(r));
    assert_true(locked(w));
    /* The other side's release is not this side's. */
    assert_status(hilock_lock_release(r), HILOCK_ENOTOWNER);
    for (int i = 2; i >= 0; i--) {
        assert_status(hilock_lock_release(w), HILOCK_OK);
        assert_status(hilock_lock_hold_count(w, &n), HILOCK_OK);
        assert_int_equal(n, i);
        if (i > 0)
            assert_true(hl_raw_pttl(fx.server, "again") > 0);
    }
    assert_int_equal(hl_raw_exists(fx.server, "again"), 0);
    assert_false(locked(r));
    assert_false(locked(w));
    assert_status(hilock_lock_release(w), HILOCK_ENOTOWNER);
    hl_free_lock(w);
    hl_free_lock(r);
    hl_free_client(c);
}

static void test_release_by_non_owner(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *d = hl_new_client(fx.server, NULL);
    hilock_lock *r = hl_new_read_lock(c, "owned");
    hilock_lock *w = hl_new_write_lock(c, "owned");
    hilock_lock *rd = hl_new_read_lock(d, "owned");
    hilock_lock *wd = hl_new_write_lock(d, "owned");
    char f[FIELD_CAP], wf[FIELD_CAP];
    hash_view h;

    (void)state;
    field_of(f, c, OWNER_A);
    write_field_of(wf, c, OWNER_B);
    assert_status(acquire_as(r, OWNER_A, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    /* Another owner, the same owner id on another client, the owner on
     * the other side: none of them holds this read hold. */
    assert_status(release_as(r, OWNER_B), HILOCK_ENOTOWNER);
    assert_status(release_as(rd, OWNER_A), HILOCK_ENOTOWNER);
    assert_status(release_as(w, OWNER_A), HILOCK_ENOTOWNER);
    assert_status(release_as(wd, OWNER_A), HILOCK_ENOTOWNER);
    srv_hash(&h, "owned");
    expect_field(&h, f, "1");
    assert_int_equal(h.n, 2);
    assert_int_equal(hold_count_as(r, OWNER_A), 1);
    assert_status(release_as(r, OWNER_A), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "owned"), 0);

    assert_status(acquire_as(w, OWNER_B, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(release_as(w, OWNER_A), HILOCK_ENOTOWNER);
    assert_status(release_as(wd, OWNER_B), HILOCK_ENOTOWNER);
    assert_status(release_as(r, OWNER_B), HILOCK_ENOTOWNER);
    assert_status(release_as(rd, OWNER_B), HILOCK_ENOTOWNER);
    srv_hash(&h, "owned");
    expect_field(&h, wf, "1");
    expect_field(&h, "mode", "write");
    assert_int_equal(h.n, 2);
    assert_int_equal(hold_count_as(w, OWNER_B), 1);
    assert_status(release_as(w, OWNER_B), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "owned"), 0);
    hl_free_lock(wd);
    hl_free_lock(rd);
    hl_free_lock(w);
    hl_free_lock(r);
    hl_free_client(d);
    hl_free_client(c);
}

/* ---- force release ----------------------------------------------------- */

static void test_force_release_frees_both(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *d = hl_new_client(fx.server, NULL);
    hilock_lock *r = hl_new_read_lock(c, "forced");
    hilock_lock *w = hl_new_write_lock(c, "forced");
    hilock_lock *rd = hl_new_read_lock(d, "forced");
    hilock_lock *wd = hl_new_write_lock(d, "forced");
    bool deleted = false;
    int64_t t_force;
    static hl_acquire_rec wa, ra;

    (void)state;
    assert_status(acquire_as(r, OWNER_A, 0, LONG_MS), HILOCK_OK);
    assert_status(acquire_as(rd, OWNER_B, 0, LONG_MS), HILOCK_OK);
    acquire_start(&wa, wd, OWNER_C, hl_widen(60000), LONG_MS);
    hl_expect_pending(d, wd, 1);

    /* The write handle frees the readers, and its message wakes the
     * writer, whose wait the readers' long leases would not end. */
    t_force = hl_now_ms();
    assert_status(hilock_lock_force_release(w, &deleted), HILOCK_OK);
    assert_true(deleted);
    /* Nothing of the read holds is left: their keys went with the hash. */
    {
        char keys[256];
        hl_redis_server_cmd(fx.server, keys, sizeof keys, "KEYS",
                            "*forced*rwlock_timeout*", (char *)NULL);
        assert_string_equal(keys, "*0\r\n");
    }
    assert_status(acquire_end(&wa), HILOCK_OK);
    if (wa.at_ms - t_force > hl_widen(2000))
        fail_msg("the writer got in %lld ms after the force release",
                 (long long)(wa.at_ms - t_force));
    assert_true(locked(r));

    /* The read handle frees the writer. */
    acquire_start(&ra, r, OWNER_D, hl_widen(60000), HILOCK_LEASE_WATCHDOG);
    hl_expect_pending(c, r, 1);
    t_force = hl_now_ms();
    deleted = false;
    assert_status(hilock_lock_force_release(rd, &deleted), HILOCK_OK);
    assert_true(deleted);
    assert_status(acquire_end(&ra), HILOCK_OK);
    if (ra.at_ms - t_force > hl_widen(2000))
        fail_msg("the reader got in %lld ms after the force release",
                 (long long)(ra.at_ms - t_force));
    assert_status(release_as(r, OWNER_D), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "forced"), 0);
    assert_false(locked(r));
    assert_false(locked(w));

    /* The holds taken away are reported lost, not silently dropped. */
    assert_status(release_as(r, OWNER_A), HILOCK_ELEASELOST);
    assert_status(release_as(rd, OWNER_B), HILOCK_ELEASELOST);
    assert_status(release_as(wd, OWNER_C), HILOCK_ELEASELOST);
    deleted = true;
    assert_status(hilock_lock_force_release(w, &deleted), HILOCK_OK);
    assert_false(deleted);
    hl_free_lock(wd);
    hl_free_lock(rd);
    hl_free_lock(w);
    hl_free_lock(r);
    hl_free_client(d);
    hl_free_client(c);
}

/* ---- the watchdog keeps both sides ------------------------------------- */

static void test_watchdog_keeps_both_sides(void **state)
{
    const int watchdog_ms = 1000;
    const hl_client_opts watched = { .watchdog_ms = watchdog_ms };
    hilock_client *c = hl_new_client(fx.server, &watched);
    hilock_client *other = hl_new_client(fx.server, NULL);
    hilock_lock *r = hl_new_read_lock(c, "wd:r");
    hilock_lock *w = hl_new_write_lock(c, "wd:w");
    hilock_lock *ow = hl_new_write_lock(other, "wd:r");
    hilock_lock *orr = hl_new_read_lock(other, "wd:w");
    char f[FIELD_CAP], tkey[KEY_CAP];
    static hl_lost_rec lr_r, lr_w;
    int64_t t0;
    bool lost = true;

    (void)state;
    hl_lost_rec_init(&lr_r, NULL);
    hl_lost_rec_init(&lr_w, NULL);
    assert_status(hilock_lock_set_lost_callback(r, hl_record_lost, &lr_r),
                  HILOCK_OK);
    assert_status(hilock_lock_set_lost_callback(w, hl_record_lost, &lr_w),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(r, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(w, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    field_of(f, c, hilock_thread_owner());
    timeout_key(tkey, "wd:r", f, 1);
    /* Three and a half watchdog timeouts: without renewals both would
     * have run out three times over. */
    t0 = hl_now_ms();
    while (hl_now_ms() - t0 < 3 * watchdog_ms + watchdog_ms / 2) {
        long long hold = hl_raw_pttl(fx.server, tkey);
        long long rname = hl_raw_pttl(fx.server, "wd:r");
        long long wname = hl_raw_pttl(fx.server, "wd:w");

        if (hold <= 0 || hold > watchdog_ms || rname <= 0 || wname <= 0 ||
            wname > watchdog_ms)
            fail_msg("after %lld ms: read hold PTTL %lld, read lock %lld, "
                     "write lock %lld", (long long)(hl_now_ms() - t0), hold,
                     rname, wname);
        assert_int_equal(atomic_load(&lr_r.calls), 0);
        assert_int_equal(atomic_load(&lr_w.calls), 0);
        hl_sleep_ms(50);
    }
    assert_status(hilock_lock_lease_lost(r, &lost), HILOCK_OK);
    assert_false(lost);
    lost = true;
    assert_status(hilock_lock_lease_lost(w, &lost), HILOCK_OK);
    assert_false(lost);
    assert_status(hilock_lock_try_acquire(ow, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_EBUSY);
    assert_status(hilock_lock_try_acquire(orr, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_EBUSY);
    assert_status(hilock_lock_release(r), HILOCK_OK);
    assert_status(hilock_lock_release(w), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "wd:r"), 0);
    assert_int_equal(hl_raw_exists(fx.server, "wd:w"), 0);
    assert_int_equal(hl_raw_exists(fx.server, tkey), 0);
    assert_int_equal(atomic_load(&lr_r.calls), 0);
    assert_int_equal(atomic_load(&lr_w.calls), 0);
    hl_free_lock(orr);
    hl_free_lock(ow);
    hl_free_lock(w);
    hl_free_lock(r);
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
    hilock_lock *r = hl_new_read_lock(c, "re:r");
    hilock_lock *w = hl_new_write_lock(c, "re:w");

    (void)state;
    hl_expect_reentry_finds_loss(c, r, other, "re:r", HILOCK_LEASE_WATCHDOG);
    hl_expect_reentry_finds_loss(c, r, other, "re:r", 30000);
    hl_expect_reentry_finds_loss(c, w, other, "re:w", HILOCK_LEASE_WATCHDOG);
    hl_expect_reentry_finds_loss(c, w, other, "re:w", 30000);
    hl_free_lock(w);
    hl_free_lock(r);
    hl_free_client(other);
    hl_free_client(c);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_readers_share),
        T(test_writers_exclude),
        T(test_writer_not_starved),
        T(test_waiting_writer_holds_new_readers_back),
        T(test_downgrade),
        T(test_upgrade_refused),
        T(test_dead_reader_expires),
        T(test_writer_woken_by_message),
        T(test_readers_woken_by_message),
        T(test_writer_gives_up_claim),
        T(test_dead_writer_claim_lapses),
        T(test_reentrant_both_sides),
        T(test_release_by_non_owner),
        T(test_force_release_frees_both),
        T(test_watchdog_keeps_both_sides),
        T(test_reentry_after_loss),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
