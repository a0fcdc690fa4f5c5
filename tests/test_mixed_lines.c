/* hilock beside Redisson's own scripts on one server.  A peer that
 * follows Redisson's published algorithm (support/redisson_peer.h, and
 * for the read-write lock the keys a Java reader writes) shares a lock
 * with hilock handles, and each test checks what the Java side would
 * see: its keys, its place in a fair line, and the messages on its
 * channels, read over connections of the fixture's own.
 *
 * Covered: a hilock read release beside a Java reader whose hold ran
 * out; fair lines mixing Java and hilock waiters (places kept, order of
 * grants, each waiter messaged on its own channel at the head). */
/* ctest-timeout: 120 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "hilock/rwlock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/plain_sub.h"
#include "support/raw_reads.h"

static hl_lock_fixture fx;

/* Long enough that no lease or place of a live party runs out during a
 * test: only releases and messages can explain what happens. */
#define LONG_MS 300000

#define OWNER_A UINT64_C(0xA1)

#define KEY_CAP 256
#define FIELD_CAP 128

typedef struct pttl_want {
    const char *key;
} pttl_want;

static bool key_gone(void *arg)
{
    return hl_raw_pttl(fx.server, ((pttl_want *)arg)->key) == -2;
}

/* Waits for key to run out on the server, by its PTTL. */
static void expect_key_runs_out(const char *key, int timeout_ms)
{
    pttl_want w = { key };

    if (!hl_wait_until(key_gone, &w, timeout_ms))
        fail_msg("%s still had PTTL %lld after %d ms", key,
                 hl_raw_pttl(fx.server, key), timeout_ms);
}

/* ---- read-write lock --------------------------------------------------- */

/* A Java reader that died: its field in the hash, and the key of its one
 * read hold, which runs out soon as nobody renews it. */
static void java_reader_that_dies(const char *name, const char *field,
                                  int lease_ms)
{
    char tkey[KEY_CAP], ms[24];

    snprintf(tkey, sizeof tkey, "{%s}:%s:rwlock_timeout:1", name, field);
    snprintf(ms, sizeof ms, "%d", lease_ms);
    assert_int_equal(hl_raw_int(fx.server, "HINCRBY", name, field, "1",
                                (char *)NULL), 1);
    hl_raw_cmd(fx.server, NULL, 0, "SET", tkey, "1", "PX", ms, (char *)NULL);
    expect_key_runs_out(tkey, hl_widen(5000));
}

/* The last live reader is hilock's, and the other reader's hold ran out:
 * Redisson's read release frees the lock then and says so, so a Java
 * writer (which only retries on that message or the lock's ttl) gets in
 * at once.  hilock's release must do the same. */
static void test_read_release_beside_expired_java_reader(void **state)
{
    static const char name[] = "rwmix";
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *r = hl_new_read_lock(c, name);
    hl_plain_sub *sub;
    char msg[32];

    (void)state;
    assert_status(hilock_lock_try_acquire(r, 0, LONG_MS), HILOCK_OK);
    java_reader_that_dies(name, "java-uuid:7", 50);
    sub = hl_plain_sub_open(fx.server, "redisson_rwlock:{rwmix}");
    assert_status(hilock_lock_release(r), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, name), 0);
    if (!hl_plain_sub_next(sub, msg, sizeof msg, hl_widen(5000)))
        fail_msg("the release published nothing on the lock's channel");
    assert_string_equal(msg, "0");
    hl_plain_sub_close(sub);
    hl_free_lock(r);
    hl_free_client(c);
}

/* A live Java reader keeps the lock: the release says nothing and the
 * hash lives on with the Java hold's lease. */
static void test_read_release_beside_live_java_reader(void **state)
{
    static const char name[] = "rwlive";
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *r = hl_new_read_lock(c, name);
    hl_plain_sub *sub;
    char msg[32];

    (void)state;
    assert_status(hilock_lock_try_acquire(r, 0, LONG_MS), HILOCK_OK);
    assert_int_equal(hl_raw_int(fx.server, "HINCRBY", name, "java-uuid:8",
                                "1", (char *)NULL), 1);
    hl_raw_cmd(fx.server, NULL, 0, "SET", "{rwlive}:java-uuid:8:rwlock_timeout:1",
               "1", "PX", "600000", (char *)NULL);
    sub = hl_plain_sub_open(fx.server, "redisson_rwlock:{rwlive}");
    assert_status(hilock_lock_release(r), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, name), 1);
    assert_true(hl_raw_pttl(fx.server, name) > LONG_MS);
    /* A marker published after the release comes first only if the
     * release published nothing. */
    assert_int_equal(hl_raw_int(fx.server, "PUBLISH",
                                "redisson_rwlock:{rwlive}", "marker",
                                (char *)NULL), 1);
    assert_true(hl_plain_sub_next(sub, msg, sizeof msg, hl_widen(5000)));
    assert_string_equal(msg, "marker");
    hl_plain_sub_close(sub);
    hl_free_lock(r);
    hl_free_client(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        hl_lock_test(test_read_release_beside_expired_java_reader, &fx),
        hl_lock_test(test_read_release_beside_live_java_reader, &fx),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
