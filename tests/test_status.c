/* hilock_lock_status_get and hilock_lock_status_async against a real
 * redis-server, for every kind: a free lock, an owner holding twice, a
 * waiting client counted on the release channel, a fair lock's line in
 * order with the time each place has left, a read-write lock with
 * readers, with a writer and with a writer waiting; and the errors.
 *
 * Waiters are known to be in place by what the server holds (a queue's
 * length, a zset's size, a channel's subscribers), never by sleeping. */
/* ctest-timeout: 120 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/fair.h"
#include "hilock/lock.h"
#include "hilock/rwlock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

static hl_lock_fixture fx;

#define LONG_MS 300000
#define WAITER_MS 60000

#define OWNER_A UINT64_C(0xA1)
#define OWNER_B UINT64_C(0xB2)
#define OWNER_C UINT64_C(0xC3)

/* "<client id>:<owner>", the owner id a status shows. */
static void owner_id(hilock_client *c, uint64_t owner, char *out, size_t cap)
{
    snprintf(out, cap, "%s:%llu", hilock_client_id(c),
             (unsigned long long)owner);
}

static void assert_owner(const hilock_lock_owner *o, const char *want,
                         int64_t count)
{
    assert_non_null(o);
    assert_int_equal(o->owner_len, strlen(want));
    assert_string_equal(o->owner, want);
    assert_int_equal(o->count, count);
}

static hilock_lock_status *status_of(hilock_lock *lock)
{
    hilock_lock_status *st = NULL;
    assert_status(hilock_lock_status_get(lock, &st), HILOCK_OK);
    assert_non_null(st);
    return st;
}

/* An acquire for owner that must succeed at once. */
static void take(hilock_client *c, hilock_lock *lock, uint64_t owner)
{
    static hl_acquire_rec rec;
    hl_acquire_rec_init(&rec, c);
    assert_status(hilock_lock_acquire_async(lock, owner, 0, LONG_MS, 0,
                                            hl_record_acquire, &rec, NULL),
                  HILOCK_OK);
    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
}

typedef struct key_size {
    const char *cmd;
    const char *key;
    long long want;
} key_size;

static bool key_has_size(void *arg)
{
    key_size *k = arg;
    return hl_raw_int(fx.server, k->cmd, k->key, (char *)NULL) == k->want;
}

static void expect_size(const char *cmd, const char *key, long long want)
{
    key_size k = {cmd, key, want};
    if (!hl_wait_until(key_has_size, &k, hl_widen(10000)))
        fail_msg("%s %s never came to %lld", cmd, key, want);
}

/* ---- reentrant ---------------------------------------------------------- */

static void test_free_lock(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *lock = hl_new_lock(c, "free");
    hilock_lock_status *st = status_of(lock);

    assert_string_equal(st->kind, "reentrant");
    assert_false(st->kind_seen);
    assert_false(st->locked);
    assert_int_equal(st->ttl_ms, -1);
    assert_int_equal(st->holders_len, 0);
    assert_int_equal(st->waiters_len, 0);
    assert_null(st->mode);
    assert_int_equal(st->readers_len, 0);
    assert_null(st->writer);
    assert_int_equal(st->subscribers, 0);
    hilock_lock_status_free(st);
    hilock_lock_status_free(NULL);
    hl_free_lock(lock);

    /* A free lock of the other kinds shows nothing of its kind either. */
    hilock_lock *fair = hl_new_fair_lock(c, "free");
    hilock_lock *rd = hl_new_read_lock(c, "free");
    st = status_of(fair);
    assert_string_equal(st->kind, "fair");
    assert_false(st->kind_seen);
    assert_false(st->locked);
    assert_int_equal(st->subscribers, -1);
    hilock_lock_status_free(st);
    st = status_of(rd);
    assert_string_equal(st->kind, "read-write");
    assert_false(st->kind_seen);
    assert_false(st->locked);
    assert_null(st->mode);
    hilock_lock_status_free(st);
    hl_free_lock(rd);
    hl_free_lock(fair);
    hl_free_client(c);
}

static void test_owner_holding_twice(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *other = hl_new_client(fx.server, NULL);
    hilock_lock *lock = hl_new_lock(c, "twice");
    hilock_lock *theirs = hl_new_lock(other, "twice");
    static hl_acquire_rec waiting;
    char me[128];

    assert_status(hilock_lock_try_acquire(lock, 0, LONG_MS), HILOCK_OK);
    assert_status(hilock_lock_try_acquire(lock, 0, LONG_MS), HILOCK_OK);
    owner_id(c, hilock_thread_owner(), me, sizeof me);
    hilock_lock_status *st = status_of(lock);
    assert_string_equal(st->kind, "reentrant");
    assert_true(st->locked);
    assert_true(st->ttl_ms > 0 && st->ttl_ms <= LONG_MS);
    assert_int_equal(st->holders_len, 1);
    assert_owner(&st->holders[0], me, 2);
    assert_false(st->holders[0].writer);
    assert_int_equal(st->waiters_len, 0);
    assert_int_equal(st->subscribers, 0);
    hilock_lock_status_free(st);

    /* Another client waits: the server keeps no line of it, but counts it
     * among the release channel's subscribers. */
    hl_acquire_rec_init(&waiting, other);
    assert_status(hilock_lock_acquire_async(theirs, OWNER_B, LONG_MS, LONG_MS,
                                            0, hl_record_acquire, &waiting,
                                            &waiting.id),
                  HILOCK_OK);
    hl_expect_numsub(fx.server, "redisson_lock__channel:{twice}", 1, 1);
    st = status_of(theirs);
    assert_int_equal(st->subscribers, 1);
    assert_int_equal(st->holders_len, 1);
    assert_owner(&st->holders[0], me, 2);
    hilock_lock_status_free(st);

    assert_status(hilock_lock_cancel(theirs, waiting.id), HILOCK_OK);
    assert_status(hl_expect_acquire(&waiting), HILOCK_ECANCELED);
    assert_status(hilock_lock_release(lock), HILOCK_OK);
    assert_status(hilock_lock_release(lock), HILOCK_OK);
    hl_free_lock(theirs);
    hl_free_lock(lock);
    hl_free_client(other);
    hl_free_client(c);
}

/* ---- fair --------------------------------------------------------------- */

static void test_fair_line(void **state)
{
    hl_client_opts opts = {.waiter_ms = WAITER_MS};
    hilock_client *c = hl_new_client(fx.server, &opts);
    hilock_lock *lock = hl_new_fair_lock(c, "line");
    static hl_acquire_rec recs[2];
    const uint64_t owners[2] = {OWNER_B, OWNER_C};
    char holder[128], waiter[2][128];

    take(c, lock, OWNER_A);
    owner_id(c, OWNER_A, holder, sizeof holder);
    for (int i = 0; i < 2; i++) {
        hl_acquire_rec_init(&recs[i], c);
        assert_status(hilock_lock_acquire_async(lock, owners[i], LONG_MS,
                                                LONG_MS, 0, hl_record_acquire,
                                                &recs[i], &recs[i].id),
                      HILOCK_OK);
        /* One at a time, so that the order of the line is known. */
        expect_size("LLEN", "redisson_lock_queue:{line}", i + 1);
        owner_id(c, owners[i], waiter[i], sizeof waiter[i]);
    }

    hilock_lock_status *st = status_of(lock);
    assert_string_equal(st->kind, "fair");
    assert_true(st->kind_seen);
    assert_true(st->locked);
    assert_true(st->ttl_ms > 0);
    assert_int_equal(st->holders_len, 1);
    assert_owner(&st->holders[0], holder, 1);
    assert_int_equal(st->waiters_len, 2);
    for (int i = 0; i < 2; i++) {
        assert_owner(&st->waiters[i], waiter[i], 0);
        assert_true(st->waiters[i].expires);
        assert_true(st->waiters[i].expires_in_ms > 0 &&
                    st->waiters[i].expires_in_ms <= WAITER_MS);
    }
    assert_int_equal(st->subscribers, -1);
    assert_null(st->mode);
    hilock_lock_status_free(st);

    for (int i = 0; i < 2; i++) {
        assert_status(hilock_lock_cancel(lock, recs[i].id), HILOCK_OK);
        assert_status(hl_expect_acquire(&recs[i]), HILOCK_ECANCELED);
    }
    expect_size("LLEN", "redisson_lock_queue:{line}", 0);
    st = status_of(lock);
    assert_int_equal(st->waiters_len, 0);
    assert_int_equal(st->holders_len, 1);
    hilock_lock_status_free(st);
    hl_free_lock(lock);
    hl_free_client(c);
}

/* ---- read-write --------------------------------------------------------- */

static void test_rwlock_readers(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *rd = hl_new_read_lock(c, "rw");
    hilock_lock *wr = hl_new_write_lock(c, "rw");
    char a[128], b[128];

    take(c, rd, OWNER_A);
    take(c, rd, OWNER_A);
    take(c, rd, OWNER_B);
    owner_id(c, OWNER_A, a, sizeof a);
    owner_id(c, OWNER_B, b, sizeof b);
    /* Either side shows the whole lock. */
    hilock_lock *sides[2] = {rd, wr};
    for (int s = 0; s < 2; s++) {
        hilock_lock_status *st = status_of(sides[s]);
        assert_string_equal(st->kind, "read-write");
        assert_true(st->kind_seen);
        assert_true(st->locked);
        assert_true(st->ttl_ms > 0);
        assert_string_equal(st->mode, "read");
        assert_int_equal(st->readers_len, 2);
        const hilock_lock_owner *ra = &st->readers[0], *rb = &st->readers[1];
        if (strcmp(ra->owner, a) != 0) {
            const hilock_lock_owner *t = ra;
            ra = rb;
            rb = t;
        }
        assert_owner(ra, a, 2);
        assert_owner(rb, b, 1);
        assert_int_equal(st->holders_len, 2);
        assert_null(st->writer);
        assert_int_equal(st->waiters_len, 0);
        assert_int_equal(st->subscribers, -1);
        hilock_lock_status_free(st);
    }
    /* Read as a reentrant lock, the same hash shows its holders, and its
     * mode field as none of them. */
    hilock_lock *plain = hl_new_lock(c, "rw");
    hilock_lock_status *st = status_of(plain);
    assert_string_equal(st->kind, "reentrant");
    assert_true(st->locked);
    assert_int_equal(st->holders_len, 2);
    assert_null(st->mode);
    hilock_lock_status_free(st);
    hl_free_lock(plain);
    hl_free_lock(wr);
    hl_free_lock(rd);
    hl_free_client(c);
}

static void test_rwlock_writer(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *wr = hl_new_write_lock(c, "w");
    char a[128];

    take(c, wr, OWNER_A);
    take(c, wr, OWNER_A);
    owner_id(c, OWNER_A, a, sizeof a);
    hilock_lock_status *st = status_of(wr);
    assert_string_equal(st->kind, "read-write");
    assert_true(st->locked);
    assert_string_equal(st->mode, "write");
    assert_int_equal(st->readers_len, 0);
    assert_owner(st->writer, a, 2);
    assert_true(st->writer->writer);
    assert_int_equal(st->holders_len, 1);
    assert_owner(&st->holders[0], a, 2);
    assert_true(st->holders[0].writer);
    hilock_lock_status_free(st);
    hl_free_lock(wr);
    hl_free_client(c);
}

static void test_rwlock_waiting_writer(void **state)
{
    hl_client_opts opts = {.waiter_ms = WAITER_MS};
    hilock_client *c = hl_new_client(fx.server, &opts);
    hilock_lock *rd = hl_new_read_lock(c, "ww");
    hilock_lock *wr = hl_new_write_lock(c, "ww");
    static hl_acquire_rec rec;
    char a[128];

    take(c, rd, OWNER_A);
    hl_acquire_rec_init(&rec, c);
    assert_status(hilock_lock_acquire_async(wr, OWNER_B, LONG_MS, LONG_MS, 0,
                                            hl_record_acquire, &rec,
                                            &rec.id),
                  HILOCK_OK);
    expect_size("ZCARD", "hilock_rwlock_writers:{ww}", 1);
    owner_id(c, OWNER_A, a, sizeof a);
    hilock_lock_status *st = status_of(rd);
    assert_true(st->kind_seen);
    assert_string_equal(st->mode, "read");
    assert_int_equal(st->readers_len, 1);
    assert_owner(&st->readers[0], a, 1);
    assert_null(st->writer);
    /* Writers wait in line by client, each place with its time left. */
    assert_int_equal(st->waiters_len, 1);
    assert_owner(&st->waiters[0], hilock_client_id(c), 0);
    assert_true(st->waiters[0].expires);
    assert_in_range(st->waiters[0].expires_in_ms, 1, WAITER_MS);
    hilock_lock_status_free(st);

    assert_status(hilock_lock_cancel(wr, rec.id), HILOCK_OK);
    assert_status(hl_expect_acquire(&rec), HILOCK_ECANCELED);
    hl_free_lock(wr);
    hl_free_lock(rd);
    hl_free_client(c);
}

/* ---- async -------------------------------------------------------------- */

typedef struct status_rec {
    atomic_int calls;
    int status;
    hilock_lock_status *st;
} status_rec;

static void record_status(hilock_lock *lock, int status,
                          hilock_lock_status *st, void *data)
{
    status_rec *r = data;
    r->status = status;
    r->st = st;
    atomic_fetch_add(&r->calls, 1);
}

static void test_async(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *lock = hl_new_lock(c, "as");
    static status_rec rec;
    char me[128];

    assert_status(hilock_lock_try_acquire(lock, 0, LONG_MS), HILOCK_OK);
    owner_id(c, hilock_thread_owner(), me, sizeof me);
    memset(&rec, 0, sizeof rec);
    assert_status(hilock_lock_status_async(lock, record_status, &rec),
                  HILOCK_OK);
    hl_expect_count(&rec.calls, 1, hl_widen(10000));
    assert_status(rec.status, HILOCK_OK);
    assert_non_null(rec.st);
    assert_true(rec.st->locked);
    assert_int_equal(rec.st->holders_len, 1);
    assert_owner(&rec.st->holders[0], me, 1);
    hilock_lock_status_free(rec.st);
    assert_status(hilock_lock_release(lock), HILOCK_OK);
    hl_free_lock(lock);
    hl_free_client(c);
}

/* ---- errors ------------------------------------------------------------- */

static void test_errors(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *lock = hl_new_lock(c, "str");
    hilock_lock_status *st = (hilock_lock_status *)&st;
    static status_rec rec;

    assert_status(hilock_lock_status_get(NULL, &st), HILOCK_EINVAL);
    assert_null(st);
    assert_status(hilock_lock_status_get(lock, NULL), HILOCK_EINVAL);
    assert_status(hilock_lock_status_async(NULL, record_status, &rec),
                  HILOCK_EINVAL);
    assert_status(hilock_lock_status_async(lock, NULL, &rec), HILOCK_EINVAL);

    /* Not a lock: the name holds a string. */
    char reply[64];
    hl_raw_cmd(fx.server, reply, sizeof reply, "SET", "str", "v",
               (char *)NULL);
    st = (hilock_lock_status *)&st;
    assert_status(hilock_lock_status_get(lock, &st), HILOCK_EREDIS);
    assert_null(st);

    assert_status(hilock_client_close(c), HILOCK_OK);
    assert_status(hilock_lock_status_get(lock, &st), HILOCK_ECLOSED);
    assert_null(st);
    assert_status(hilock_lock_status_async(lock, record_status, &rec),
                  HILOCK_ECLOSED);
    hl_free_lock(lock);
    hl_free_client(c);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_free_lock),
        T(test_owner_holding_twice),
        T(test_fair_line),
        T(test_rwlock_readers),
        T(test_rwlock_writer),
        T(test_rwlock_waiting_writer),
        T(test_async),
        T(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
