/* hilock's word on what a name is, on a real redis-server
 * (docs/guide/operators.md, "What a name is"): a fair or read-write lock's
 * grant leaves it for a day, once an hour per handle; a semaphore's set
 * or add leaves it without expiry; a latch's set leaves it while the
 * latch counts and its opening for a day; a count down of nothing leaves
 * none; hilock_client_name_kind reads it, and takes a word it does not
 * know, or none, for none. */
/* ctest-timeout: 120 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

static hl_lock_fixture fx;

#define DAY_MS 86400000LL

/* The word at name, through the library; "" for none. */
static const char *word_of(hilock_client *c, const char *name)
{
    const char *kind = NULL;
    assert_status(hilock_client_name_kind_n(c, name, strlen(name), &kind),
                  HILOCK_OK);
    return kind ? kind : "";
}

static long long word_pttl(const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "hilock_kind:{%s}", name);
    return hl_raw_pttl(fx.server, key);
}

/* The word's expiry: within a day and not far below it. */
static void assert_about_a_day(const char *name)
{
    long long ttl = word_pttl(name);
    if (ttl <= DAY_MS - 60000 || ttl > DAY_MS)
        fail_msg("the word on %s runs out in %lld ms, not in a day", name,
                 ttl);
}

/* A handle's call answered after the word was sent on the same
 * connection, so the word is in: replies come in order. */
static void settle(hilock_lock *lock)
{
    bool locked;
    assert_status(hilock_lock_is_locked(lock, &locked), HILOCK_OK);
}

static void test_fair_and_read_write_grants_leave_word(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *fair, *reader, *writer, *plain;

    (void)state;
    assert_status(hilock_fair_lock_create(&fair, c, "kw-fair"), HILOCK_OK);
    assert_status(hilock_read_lock_create(&reader, c, "kw-rw"), HILOCK_OK);
    assert_status(hilock_write_lock_create(&writer, c, "kw-rw2"),
                  HILOCK_OK);
    assert_status(hilock_lock_create(&plain, c, "kw-plain"), HILOCK_OK);
    assert_string_equal(word_of(c, "kw-fair"), "");

    assert_status(hilock_lock_try_acquire(fair, 0, 30000), HILOCK_OK);
    assert_status(hilock_lock_try_acquire(reader, 0, 30000), HILOCK_OK);
    assert_status(hilock_lock_try_acquire(writer, 0, 30000), HILOCK_OK);
    assert_status(hilock_lock_try_acquire(plain, 0, 30000), HILOCK_OK);
    settle(fair);
    settle(reader);
    settle(writer);
    settle(plain);
    assert_string_equal(word_of(c, "kw-fair"), "fair");
    assert_string_equal(word_of(c, "kw-rw"), "read-write");
    assert_string_equal(word_of(c, "kw-rw2"), "read-write");
    /* A reentrant lock's data says what it is: no word. */
    assert_string_equal(word_of(c, "kw-plain"), "");
    assert_about_a_day("kw-fair");
    assert_about_a_day("kw-rw");

    /* Once an hour per handle: the next grant writes nothing, the first
     * of a new handle does. */
    assert_status(hilock_lock_release(fair), HILOCK_OK);
    assert_int_equal(hl_raw_int(fx.server, "DEL", "hilock_kind:{kw-fair}",
                                (char *)NULL),
                     1);
    assert_status(hilock_lock_try_acquire(fair, 0, 30000), HILOCK_OK);
    settle(fair);
    assert_string_equal(word_of(c, "kw-fair"), "");
    assert_status(hilock_lock_release(fair), HILOCK_OK);
    hilock_lock *again;
    assert_status(hilock_fair_lock_create(&again, c, "kw-fair"),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(again, 0, 30000), HILOCK_OK);
    settle(again);
    assert_string_equal(word_of(c, "kw-fair"), "fair");
    assert_status(hilock_lock_release(again), HILOCK_OK);

    assert_status(hilock_lock_release(reader), HILOCK_OK);
    assert_status(hilock_lock_release(writer), HILOCK_OK);
    assert_status(hilock_lock_release(plain), HILOCK_OK);
    hilock_lock_destroy(again);
    hilock_lock_destroy(fair);
    hilock_lock_destroy(reader);
    hilock_lock_destroy(writer);
    hilock_lock_destroy(plain);
    hl_free_client(c);
}

static void test_semaphore_counts_leave_word(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_semaphore *sem, *added, *refused;
    bool set = false;
    int64_t count = 0;

    (void)state;
    assert_status(hilock_semaphore_create(&sem, c, "kw-sem"), HILOCK_OK);
    assert_status(hilock_semaphore_try_set(sem, 3, &set), HILOCK_OK);
    assert_true(set);
    assert_status(hilock_semaphore_available(sem, &count), HILOCK_OK);
    assert_string_equal(word_of(c, "kw-sem"), "semaphore");
    /* A semaphore lives as long as its count: so does the word. */
    assert_int_equal(word_pttl("kw-sem"), -1);

    assert_status(hilock_semaphore_create(&added, c, "kw-added"),
                  HILOCK_OK);
    assert_status(hilock_semaphore_add(added, 2, &count), HILOCK_OK);
    assert_status(hilock_semaphore_available(added, &count), HILOCK_OK);
    assert_string_equal(word_of(c, "kw-added"), "semaphore");

    /* A try-set that found a count set nothing, and says nothing. */
    char reply[64];
    hl_redis_server_cmd(fx.server, reply, sizeof reply, "SET", "kw-other",
                        "5", (char *)NULL);
    assert_status(hilock_semaphore_create(&refused, c, "kw-other"),
                  HILOCK_OK);
    assert_status(hilock_semaphore_try_set(refused, 3, &set), HILOCK_OK);
    assert_false(set);
    assert_status(hilock_semaphore_available(refused, &count), HILOCK_OK);
    assert_string_equal(word_of(c, "kw-other"), "");

    hilock_semaphore_destroy(sem);
    hilock_semaphore_destroy(added);
    hilock_semaphore_destroy(refused);
    hl_free_client(c);
}

static void test_latch_word_while_it_counts(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_latch *l, *typo;
    bool set = false, seen = true;
    int64_t left = -1;

    (void)state;
    assert_status(hilock_latch_create(&l, c, "kw-latch"), HILOCK_OK);
    assert_status(hilock_latch_try_set_count(l, 2, &set), HILOCK_OK);
    assert_status(hilock_latch_count(l, &left), HILOCK_OK);
    assert_string_equal(word_of(c, "kw-latch"), "latch");
    assert_int_equal(word_pttl("kw-latch"), -1);
    assert_status(hilock_latch_was_set(l, &seen), HILOCK_OK);
    assert_true(seen);

    assert_status(hilock_latch_count_down(l, &left), HILOCK_OK);
    assert_int_equal(left, 1);
    assert_status(hilock_latch_count_down(l, &left), HILOCK_OK);
    assert_int_equal(left, 0);
    assert_status(hilock_latch_count(l, &left), HILOCK_OK);
    /* Opened: the word stays a day, so that a wait now finds it open. */
    assert_string_equal(word_of(c, "kw-latch"), "latch");
    assert_about_a_day("kw-latch");

    /* A count down of a latch nobody set opens nothing, and leaves no
     * word that would make a typo look opened. */
    assert_status(hilock_latch_create(&typo, c, "kw-typo"), HILOCK_OK);
    assert_status(hilock_latch_count_down(typo, &left), HILOCK_OK);
    assert_int_equal(left, 0);
    assert_status(hilock_latch_count(typo, &left), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "kw-typo"), 0);
    assert_status(hilock_latch_was_set(typo, &seen), HILOCK_OK);
    assert_false(seen);

    hilock_latch_destroy(l);
    hilock_latch_destroy(typo);
    hl_free_client(c);
}

/* A word this version does not know is none; a key of another type is
 * an error; bad arguments are refused. */
static void test_reading_the_word(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    const char *kind = "x";
    char reply[64];

    (void)state;
    hl_redis_server_cmd(fx.server, reply, sizeof reply, "SET",
                        "hilock_kind:{kw-future}", "condition",
                        (char *)NULL);
    assert_string_equal(word_of(c, "kw-future"), "");
    hl_redis_server_cmd(fx.server, reply, sizeof reply, "RPUSH",
                        "hilock_kind:{kw-list}", "fair", (char *)NULL);
    assert_int_equal(hilock_client_name_kind_n(c, "kw-list", 7, &kind),
                     HILOCK_EREDIS);
    assert_null(kind);
    /* A name that brings its own hash tag keeps it, as every key does. */
    hl_redis_server_cmd(fx.server, reply, sizeof reply, "SET",
                        "hilock_kind:a{b}", "latch", (char *)NULL);
    assert_string_equal(word_of(c, "a{b}"), "latch");

    assert_int_equal(hilock_client_name_kind_n(NULL, "n", 1, &kind),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_client_name_kind_n(c, NULL, 1, &kind),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_client_name_kind_n(c, "n", 1, NULL),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_client_name_kind_n(c, "n", 0, &kind),
                     HILOCK_EINVAL);
    assert_int_equal(
        hilock_client_name_kind_n(c, "n", HILOCK_MAX_NAME_LEN + 1, &kind),
        HILOCK_EINVAL);
    hl_free_client(c);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_fair_and_read_write_grants_leave_word),
        T(test_semaphore_counts_leave_word),
        T(test_latch_word_while_it_counts),
        T(test_reading_the_word),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
