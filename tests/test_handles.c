/* Stale handles: a destroyed client, lock, segmented set, multi-lock or
 * RedLock passed to its destroy again answers HILOCK_ECLOSED, also when a
 * new handle has been made since, which the allocator would like to put
 * at the same address (glibc does so at once for a block of the same
 * size). */
/* ctest-timeout: 60 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include <ev.h>

#include "core/base/handle.h"
#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "hilock/multi.h"
#include "hilock/options.h"
#include "hilock/segmented.h"
#include "support/fixture.h"

/* A client on its own loop thread (loop NULL), or on the test's own
 * loop: handles are then made and freed on this thread, where glibc hands
 * a block just freed straight back to the next request of its size. */
static hilock_client *loop_client_of(hl_redis_server *s,
                                     struct ev_loop *loop)
{
    char url[96];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(s));
    hilock_options *o;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    if (loop != NULL)
        assert_int_equal(hilock_options_set_loop(o, loop), HILOCK_OK);
    hilock_client *c = NULL;
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    return c;
}

static hilock_client *client_of(hl_redis_server *s)
{
    return loop_client_of(s, NULL);
}

static void test_double_destroy(void **state)
{
    (void)state;
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = client_of(s);
    hilock_lock *lock;
    assert_int_equal(hilock_lock_create(&lock, c, "h:twice"), HILOCK_OK);
    assert_int_equal(hilock_lock_destroy(lock), HILOCK_OK);
    assert_int_equal(hilock_lock_destroy(lock), HILOCK_ECLOSED);
    hilock_segmented *set;
    assert_int_equal(hilock_segmented_create(&set, c, "h:set", 4),
                     HILOCK_OK);
    assert_int_equal(hilock_segmented_destroy(set), HILOCK_OK);
    assert_int_equal(hilock_segmented_destroy(set), HILOCK_ECLOSED);
    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
    assert_int_equal(hilock_client_destroy(c), HILOCK_ECLOSED);
    assert_int_equal(hilock_client_close(c), HILOCK_ECLOSED);
    hl_redis_server_stop(s);
}

/* Within the documented window, each new lock is made while the stale
 * pointer is passed to destroy again; the new one must stay alive. */
static void test_stale_lock_with_new_locks(void **state)
{
    (void)state;
    hl_redis_server *s = hl_fixture_plain();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    assert_non_null(loop);
    hilock_client *c = loop_client_of(s, loop);
    /* glibc's calloc skips the per-thread cache that free fills first, so
     * fill that cache with blocks of a lock's size: the stale lock's block
     * then goes where the next calloc looks. */
    hilock_lock *filler[16];
    for (int i = 0; i < 16; i++)
        assert_int_equal(hilock_lock_create(&filler[i], c, "h:fill"),
                         HILOCK_OK);
    for (int i = 0; i < 16; i++)
        assert_int_equal(hilock_lock_destroy(filler[i]), HILOCK_OK);
    hilock_lock *stale;
    assert_int_equal(hilock_lock_create(&stale, c, "h:lock"), HILOCK_OK);
    assert_int_equal(hilock_lock_destroy(stale), HILOCK_OK);
    for (int i = 0; i < HL_HANDLE_QUARANTINE - 1; i++) {
        hilock_lock *fresh;
        assert_int_equal(hilock_lock_create(&fresh, c, "h:lock"),
                         HILOCK_OK);
        assert_int_equal(hilock_lock_destroy(stale), HILOCK_ECLOSED);
        assert_int_equal(hilock_lock_destroy(fresh), HILOCK_OK);
        if (fresh == stale)
            fail_msg("new lock %d took the destroyed lock's address", i);
    }
    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
    ev_run(loop, EVRUN_NOWAIT);
    ev_loop_destroy(loop);
    hl_redis_server_stop(s);
}

static void test_stale_client_with_new_client(void **state)
{
    (void)state;
    hl_redis_server *s = hl_fixture_plain();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    assert_non_null(loop);
    hilock_client *stale = loop_client_of(s, loop);
    assert_int_equal(hilock_client_destroy(stale), HILOCK_OK);
    hilock_client *fresh = loop_client_of(s, loop);
    assert_int_equal(hilock_client_destroy(stale), HILOCK_ECLOSED);
    assert_int_equal(hilock_client_close(stale), HILOCK_ECLOSED);
    hilock_lock *lock;
    assert_int_equal(hilock_lock_create(&lock, fresh, "h:c"), HILOCK_OK);
    assert_int_equal(hilock_lock_destroy(lock), HILOCK_OK);
    assert_int_equal(hilock_client_destroy(fresh), HILOCK_OK);
    if (fresh == stale)
        fail_msg("the new client took the destroyed client's address");
    ev_run(loop, EVRUN_NOWAIT);
    ev_loop_destroy(loop);
    hl_redis_server_stop(s);
}

/* As for locks: the coordinator is the test's loop client, so destroy
 * frees the group at once, on this thread. */
static void test_stale_multilock_with_new_multilocks(void **state)
{
    (void)state;
    hl_redis_server *s = hl_fixture_plain();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    assert_non_null(loop);
    hilock_client *c = loop_client_of(s, loop);
    hilock_lock *members[2];
    assert_int_equal(hilock_lock_create(&members[0], c, "h:m0"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_create(&members[1], c, "h:m1"),
                     HILOCK_OK);
    hilock_multilock *filler[16];
    for (int i = 0; i < 16; i++)
        assert_int_equal(hilock_multilock_create(&filler[i], members, 2),
                         HILOCK_OK);
    for (int i = 0; i < 16; i++)
        assert_int_equal(hilock_multilock_destroy(filler[i]), HILOCK_OK);
    hilock_multilock *stale;
    assert_int_equal(hilock_multilock_create(&stale, members, 2), HILOCK_OK);
    assert_int_equal(hilock_multilock_destroy(stale), HILOCK_OK);
    for (int i = 0; i < HL_HANDLE_QUARANTINE - 1; i++) {
        hilock_multilock *fresh;
        assert_int_equal(hilock_multilock_create(&fresh, members, 2),
                         HILOCK_OK);
        assert_int_equal(hilock_multilock_destroy(stale), HILOCK_ECLOSED);
        assert_int_equal(hilock_multilock_destroy(fresh), HILOCK_OK);
        if (fresh == stale)
            fail_msg("new multi-lock %d took the destroyed one's address",
                     i);
    }
    assert_int_equal(hilock_lock_destroy(members[0]), HILOCK_OK);
    assert_int_equal(hilock_lock_destroy(members[1]), HILOCK_OK);
    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
    ev_run(loop, EVRUN_NOWAIT);
    ev_loop_destroy(loop);
    hl_redis_server_stop(s);
}

#define NMASTERS 3

static hilock_redlock *redlock_of(hl_redis_server **masters)
{
    char urls[NMASTERS][96];
    const char *u[NMASTERS];
    for (int i = 0; i < NMASTERS; i++) {
        snprintf(urls[i], sizeof urls[i], "redis://127.0.0.1:%d",
                 hl_redis_server_port(masters[i]));
        u[i] = urls[i];
    }
    hilock_redlock *rl = NULL;
    assert_int_equal(hilock_redlock_create(&rl, u, NMASTERS, NULL),
                     HILOCK_OK);
    return rl;
}

/* A RedLock and a RedLock lock are destroyed on this thread, which made
 * them; the next of the same size is made on it too. */
static void test_stale_redlock_with_new_redlocks(void **state)
{
    (void)state;
    hl_redis_server *masters[NMASTERS];
    hl_fixture_masters(masters, NMASTERS);
    hilock_redlock *stale = redlock_of(masters);
    assert_int_equal(hilock_redlock_destroy(stale), HILOCK_OK);
    hilock_redlock *rl = NULL;
    for (int i = 0; i < 8; i++) {
        hilock_redlock *fresh = redlock_of(masters);
        assert_int_equal(hilock_redlock_destroy(stale), HILOCK_ECLOSED);
        if (fresh == stale)
            fail_msg("new RedLock %d took the destroyed one's address", i);
        if (i == 7) {
            rl = fresh;
            break;
        }
        assert_int_equal(hilock_redlock_destroy(fresh), HILOCK_OK);
    }
    hilock_multilock *stale_lock;
    assert_int_equal(hilock_redlock_multilock_create(&stale_lock, rl, "h:rl"),
                     HILOCK_OK);
    assert_int_equal(hilock_multilock_destroy(stale_lock), HILOCK_OK);
    for (int i = 0; i < 8; i++) {
        hilock_multilock *fresh;
        assert_int_equal(hilock_redlock_multilock_create(&fresh, rl, "h:rl"),
                         HILOCK_OK);
        assert_int_equal(hilock_multilock_destroy(stale_lock),
                         HILOCK_ECLOSED);
        assert_int_equal(hilock_multilock_destroy(fresh), HILOCK_OK);
        if (fresh == stale_lock)
            fail_msg("new RedLock lock %d took the destroyed one's address",
                     i);
    }
    assert_int_equal(hilock_redlock_destroy(rl), HILOCK_OK);
    hl_fixture_stop_masters(masters, NMASTERS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_double_destroy),
        cmocka_unit_test(test_stale_lock_with_new_locks),
        cmocka_unit_test(test_stale_client_with_new_client),
        cmocka_unit_test(test_stale_multilock_with_new_multilocks),
        cmocka_unit_test(test_stale_redlock_with_new_redlocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
