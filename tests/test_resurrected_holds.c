/* A released hold that the server brings back is never joined.
 *
 * A failover to a replica that never saw a release promotes the hold it
 * released: the owner's field is back with its count, and the lock is
 * held by an owner whose client holds nothing.  Were the owner's next
 * acquire to join that field, its server count would stay one above the
 * client's, the owner's last release would leave the lock held, and
 * every acquire of the owner would renew it: nobody else would get the
 * lock for as long as the owner cycles.
 *
 * The test brings the hold back as the failover would: it copies every
 * key of the server aside while the hold is there, and copies them back
 * after the release. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

static hl_lock_fixture fx;

#define SNAP_PREFIX "snapshot|"
#define MAX_KEYS 16

typedef struct snapshot {
    char keys[MAX_KEYS][128];
    int n;
} snapshot;

/* What a replica holds while the hold is there. */
static void snapshot_take(snapshot *s)
{
    char reply[HL_RAW_REPLY_CAP];
    assert_int_equal(hl_raw_cmd(fx.server, reply, sizeof reply, "KEYS", "*",
                                (char *)NULL),
                     '*');
    const char *p = reply;
    long n = hl_raw_parse_array(&p);
    assert_true(n > 0 && n <= MAX_KEYS);
    s->n = 0;
    for (long i = 0; i < n; i++) {
        char *key = s->keys[s->n++];
        assert_true(hl_raw_parse_bulk(&p, key, sizeof s->keys[0]) > 0);
        char copy[160];
        snprintf(copy, sizeof copy, SNAP_PREFIX "%s", key);
        assert_int_equal(hl_raw_int(fx.server, "COPY", key, copy,
                                    (char *)NULL),
                         1);
    }
}

/* The replica promoted: what it held comes back, expiry and all. */
static void snapshot_restore(const snapshot *s)
{
    for (int i = 0; i < s->n; i++) {
        char copy[160];
        snprintf(copy, sizeof copy, SNAP_PREFIX "%s", s->keys[i]);
        assert_int_equal(hl_raw_int(fx.server, "COPY", copy, s->keys[i],
                                    "REPLACE", (char *)NULL),
                         1);
        assert_int_equal(hl_raw_int(fx.server, "DEL", copy, (char *)NULL),
                         1);
    }
}

typedef hilock_lock *lock_maker(hilock_client *c, const char *name);

/* Take la with the watchdog; its fencing token when fenced, else 0. */
static uint64_t take(hilock_lock *la, bool fenced)
{
    uint64_t token = 0;
    if (fenced)
        assert_status(hilock_lock_acquire_fenced(la, 0, HILOCK_LEASE_WATCHDOG,
                                                 &token),
                      HILOCK_OK);
    else
        assert_status(hilock_lock_try_acquire(la, 0, HILOCK_LEASE_WATCHDOG),
                      HILOCK_OK);
    return token;
}

static int64_t server_count(hilock_lock *l)
{
    int64_t n = -1;
    assert_status(hilock_lock_hold_count(l, &n), HILOCK_OK);
    return n;
}

/* make: the owner's kind; rival: a kind its hold excludes. */
static void released_hold_comes_back(lock_maker *make, lock_maker *rival,
                                     bool fenced)
{
    const char *name = "resurrected";
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *la = make(a, name), *lb = rival(b, name);
    uint64_t first_token = take(la, fenced);
    snapshot snap;
    snapshot_take(&snap);
    assert_status(hilock_lock_release(la), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, name), 0);
    snapshot_restore(&snap);
    assert_int_equal(hl_raw_exists(fx.server, name), 1);

    /* The owner takes the lock again: a hold of its own, not the one
     * brought back. */
    for (int round = 0; round < 3; round++) {
        uint64_t token = take(la, fenced);
        assert_int_equal(server_count(la), 1);
        if (fenced)
            assert_true(token > first_token);
        assert_status(hilock_lock_try_acquire(lb, 0, 30000), HILOCK_EBUSY);
        assert_status(hilock_lock_release(la), HILOCK_OK);
        /* Its last release frees the lock, as for any hold. */
        assert_int_equal(hl_raw_exists(fx.server, name), 0);
    }
    assert_status(hilock_lock_try_acquire(lb, 0, 30000), HILOCK_OK);
    assert_status(hilock_lock_release(lb), HILOCK_OK);

    hilock_lock_destroy(la);
    hilock_lock_destroy(lb);
    hilock_client_destroy(a);
    hilock_client_destroy(b);
}

static void test_reentrant(void **state)
{
    (void)state;
    released_hold_comes_back(hl_new_lock, hl_new_lock, false);
}

static void test_reentrant_fenced(void **state)
{
    (void)state;
    released_hold_comes_back(hl_new_lock, hl_new_lock, true);
}

static void test_fair(void **state)
{
    (void)state;
    released_hold_comes_back(hl_new_fair_lock, hl_new_fair_lock, false);
}

static void test_read(void **state)
{
    (void)state;
    released_hold_comes_back(hl_new_read_lock, hl_new_write_lock, false);
}

static void test_write(void **state)
{
    (void)state;
    released_hold_comes_back(hl_new_write_lock, hl_new_read_lock, false);
}

/* A reentry finds one more hold than the client knows of: the extra one
 * goes, the reentry counts, and two releases free the lock. */
static void test_reentry_over_a_hold_brought_back(void **state)
{
    (void)state;
    const char *name = "reentered";
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_lock *la = hl_new_lock(a, name);

    assert_status(hilock_lock_try_acquire(la, 0, 30000), HILOCK_OK);
    assert_status(hilock_lock_try_acquire(la, 0, 30000), HILOCK_OK);
    snapshot snap;
    snapshot_take(&snap);
    assert_status(hilock_lock_release(la), HILOCK_OK);
    snapshot_restore(&snap); /* the server counts 2, the client 1 */

    assert_status(hilock_lock_try_acquire(la, 0, 30000), HILOCK_OK);
    assert_int_equal(server_count(la), 2);
    assert_status(hilock_lock_release(la), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, name), 1);
    assert_status(hilock_lock_release(la), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, name), 0);

    hilock_lock_destroy(la);
    hilock_client_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        hl_lock_test(test_reentrant, &fx),
        hl_lock_test(test_reentrant_fenced, &fx),
        hl_lock_test(test_fair, &fx),
        hl_lock_test(test_read, &fx),
        hl_lock_test(test_write, &fx),
        hl_lock_test(test_reentry_over_a_hold_brought_back, &fx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
