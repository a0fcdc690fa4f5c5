/* The reentrant lock's direct hand-off against a real redis-server: a
 * release gives the lock outright to the wish of the first waiting
 * client, whose waiter then holds without an acquire of its own.  Each
 * way the hand-off can go wrong has its test: the grant's message lost
 * (the waiter's next attempt claims the grant, counted once), the waiter
 * gone before it hears of the grant (its withdraw gives the grant back),
 * the waiting client dead (the grant lasts no longer than its place),
 * the waiter holding longer than its place lasted (a renewal comes first),
 * a Java waiter listening (the release promises and tells it instead of
 * granting), and connections killed under contention (no two holders at
 * once).  The cases are the read-write lock's writers' too
 * (support/line_handoff.h). */
/* ctest-timeout: 120 */
#include <stdbool.h>
#include <stdint.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "support/fixture.h"
#include "support/handoff.h"
#include "support/line_handoff.h"
#include "support/lock_helpers.h"

/* Each test's server; see hl_lock_fixture. */
static hl_lock_fixture fx;

#define CASE(test, fn, name)                                                \
    static void test(void **state)                                          \
    {                                                                       \
        (void)state;                                                        \
        fn(fx.server, &hl_reentrant_line, name);                            \
    }

/* ---- the hand-off (support/line_handoff.h) ------------------------------ */

CASE(test_release_hands_the_lock_over, hl_case_release_hands_over, "handoff")
CASE(test_grant_record_goes_with_the_next_hold,
     hl_case_grant_record_goes_with_next_hold, "grant-record")
CASE(test_line_and_places_kept_together, hl_case_line_keys_kept_together,
     "kept-line")
CASE(test_lost_grant_message_is_claimed, hl_case_lost_grant_claimed,
     "unheard")
CASE(test_gone_waiter_gives_its_grant_back, hl_case_gone_waiter_gives_back,
     "given-back")
CASE(test_dead_client_grant_runs_out_with_its_place,
     hl_case_dead_client_grant, "dead-wish")

/* ---- beside Redisson's clients -------------------------------------------- */

CASE(test_wake_ups_both_ways_beside_java, hl_case_wake_ups_beside_java,
     "mixed-handoff")
CASE(test_java_waiter_is_told_not_passed_over, hl_case_java_waiter_told,
     "java-beside")
CASE(test_java_waiter_beside_a_dead_first_client_is_told,
     hl_case_java_waiter_told_beside_dead_first, "java-beside-dead-first")

/* ---- under faults ------------------------------------------------------- */

/* Grants go out unheard while pub/sub connections are killed, and are
 * claimed, or given back by waiters that gave up (handoff.h). */
static void test_handoffs_under_pubsub_kills(void **state)
{
    (void)state;
    hl_handoffs_under_pubsub_kills(fx.server, hl_new_lock, "killed-handoffs");
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_release_hands_the_lock_over),
        T(test_grant_record_goes_with_the_next_hold),
        T(test_line_and_places_kept_together),
        T(test_lost_grant_message_is_claimed),
        T(test_gone_waiter_gives_its_grant_back),
        T(test_dead_client_grant_runs_out_with_its_place),
        T(test_wake_ups_both_ways_beside_java),
        T(test_java_waiter_is_told_not_passed_over),
        T(test_java_waiter_beside_a_dead_first_client_is_told),
        T(test_handoffs_under_pubsub_kills),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
