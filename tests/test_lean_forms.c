/* The reentrant lock's lean forms against a real redis-server.  A client
 * that knows of no contention on a lock grants a first hold and releases
 * it with scripts that read only what such a call needs; whatever else
 * they find (a holder, a promise, a lock delay, a voided attempt's
 * record, clients in line) sends the call back for the full form, which
 * judges it as it always did, and the handle then goes in full at once.
 *
 * Which form ran is read off the server's command counts: on these
 * paths only the full acquire asks SISMEMBER, and the line's head is read
 * (LINDEX) only by a full release, or by a full acquire refused. */
/* ctest-timeout: 120 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "support/fixture.h"
#include "support/handoff.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

static hl_lock_fixture fx;

#define OWNER 1

typedef struct counts {
    long long scripts, full_acquires, line_reads;
} counts;

static counts read_counts(void)
{
    return (counts){hl_scripts_run(fx.server),
                    hl_fixture_calls(fx.server, "sismember"),
                    hl_fixture_calls(fx.server, "lindex")};
}

/* Scripts run since before, how many of them were full acquires, and how
 * often the line's head was read. */
static void expect_since(const counts *before, long long scripts,
                         long long full_acquires, long long line_reads)
{
    counts now = read_counts();
    assert_int_equal(now.scripts - before->scripts, scripts);
    assert_int_equal(now.full_acquires - before->full_acquires,
                     full_acquires);
    assert_int_equal(now.line_reads - before->line_reads, line_reads);
}

static void key_of(const char *prefix, const char *name, char *out,
                   size_t cap)
{
    snprintf(out, cap, "%s:{%s}", prefix, name);
}

/* An uncontended acquire and release are one lean script each; a
 * reentry joins its hold in the full form, and the count-downs stay
 * lean. */
static void test_uncontended_calls_are_lean(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "lean");

    counts before = read_counts();
    assert_status(hilock_lock_try_acquire(l, 0, 30000), HILOCK_OK);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    expect_since(&before, 2, 0, 0);
    assert_int_equal(hl_raw_exists(fx.server, "lean"), 0);

    before = read_counts();
    assert_status(hilock_lock_try_acquire(l, 0, 30000), HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, 30000), HILOCK_OK);
    int64_t held = 0;
    assert_status(hilock_lock_hold_count(l, &held), HILOCK_OK);
    assert_int_equal(held, 2);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "lean"), 1);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    expect_since(&before, 4, 1, 0);
    assert_int_equal(hl_raw_exists(fx.server, "lean"), 0);
    hl_free_lock(l);
    hl_free_client(c);
}

/* What a lean acquire sends back, and what the full form then makes of
 * it: a lock held by another (Redisson-shaped here), a promise to another
 * client, a lock delay, all refused; a voided attempt's record, which is
 * not this attempt's, granted.  Each costs the two scripts once; the
 * handle's next try goes in full at once. */
static void test_acquire_sent_back(void **state)
{
    (void)state;
    static const struct {
        const char *prefix; /* the key written beside the lock, or NULL */
        const char *value;
        int status;         /* the full form's answer */
    } cases[] = {
        {NULL, NULL, HILOCK_EBUSY},
        {"hilock_lock_next", "00000000-0000-4000-8000-000000000000",
         HILOCK_EBUSY},
        {"hilock_lock_delay", "60000", HILOCK_EBUSY},
        {"hilock_void", "someone-else:1", HILOCK_OK},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32], key[96];
        snprintf(name, sizeof name, "lean-back-%zu", i);
        if (cases[i].prefix == NULL) {
            assert_int_equal(hl_raw_int(fx.server, "HSET", name,
                                        "java-client:1", "1", NULL),
                             1);
            assert_int_equal(
                hl_raw_int(fx.server, "PEXPIRE", name, "60000", NULL), 1);
        } else {
            key_of(cases[i].prefix, name, key, sizeof key);
            char reply[64];
            if (strcmp(cases[i].prefix, "hilock_void") == 0)
                hl_raw_cmd(fx.server, reply, sizeof reply, "SADD", key,
                           cases[i].value, NULL);
            else
                hl_raw_cmd(fx.server, reply, sizeof reply, "SET", key,
                           cases[i].value, "PX", "60000", NULL);
            assert_int_equal(hl_raw_exists(fx.server, key), 1);
        }
        hilock_client *c = hl_new_client(fx.server, NULL);
        hilock_lock *l = hl_new_lock(c, name);

        /* A refusal reads the line's head once. */
        long long refused = cases[i].status == HILOCK_OK ? 0 : 1;
        counts before = read_counts();
        assert_status(hilock_lock_try_acquire(l, 0, 30000), cases[i].status);
        expect_since(&before, 2, 1, refused);
        if (cases[i].status == HILOCK_OK) {
            assert_status(hilock_lock_release(l), HILOCK_OK);
            /* Contended lately: the release goes in full. */
            expect_since(&before, 3, 1, 1);
        } else {
            assert_status(hilock_lock_try_acquire(l, 0, 30000),
                          cases[i].status);
            expect_since(&before, 3, 2, 2);
        }
        hl_free_lock(l);
        hl_free_client(c);
    }
}

/* A holder whose client knows of nobody waiting releases lean; with a
 * client in line that release changes nothing and is made again in
 * full, which hands the lock straight to the waiter's wish: two scripts
 * in all, and the waiter holds it at once.  The holder counts as
 * contended then, and its next release is full at once. */
static void test_release_sent_back_hands_on(void **state)
{
    (void)state;
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_client *w = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_lock(h, "lean-line");
    hilock_lock *lw = hl_new_lock(w, "lean-line");
    static hl_acquire_rec rec;

    assert_status(hilock_lock_try_acquire(lh, 0, 60000), HILOCK_OK);
    hl_wait_in_line(w, lw, OWNER, &rec, NULL);
    char line[96];
    key_of("hilock_lock_line", "lean-line", line, sizeof line);
    assert_int_equal(hl_raw_int(fx.server, "LLEN", line, NULL), 1);
    (void)hl_expect_wish(fx.server, &hl_lock_line_keys, "lean-line", w,
                         OWNER);

    long long before = hl_scripts_run(fx.server);
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
    assert_int_equal(hl_scripts_run(fx.server) - before, 2);
    assert_int_equal(hl_handed_to(w), 1);
    assert_int_equal(hl_release_one(lw, OWNER), 0);
    assert_int_equal(hl_raw_exists(fx.server, "lean-line"), 0);

    counts since = read_counts();
    assert_status(hilock_lock_try_acquire(lh, 0, 60000), HILOCK_OK);
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    expect_since(&since, 2, 1, 1);
    hl_free_lock(lw);
    hl_free_lock(lh);
    hl_free_client(w);
    hl_free_client(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        hl_lock_test(test_uncontended_calls_are_lean, &fx),
        hl_lock_test(test_acquire_sent_back, &fx),
        hl_lock_test(test_release_sent_back_hands_on, &fx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
