/* The lease engine against a real server, with lock kinds of the test's
 * own: renewal rounds must batch leases however many kinds there are. */
/* ctest-timeout: 60 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "core/engine/lease.h"
#include "core/engine/lock_handle.h"
#include "core/base/monotime.h"
#include "core/transport/script.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/loop_call.h"

/* More kinds than the four the library has today, each with a renew
 * script of its own. */
#define KINDS 6
/* The first kind fills a whole batch before the others appear, so a
 * round sends a batch while it still meets kinds it has not seen. */
#define FIRST_KIND_LEASES HL_LEASE_BATCH
#define LEASES (FIRST_KIND_LEASES + 2 * (KINDS - 1) + 1)

static char bodies[KINDS][256];
static hl_script scripts[KINDS];
static hl_kind kinds[KINDS];

/* Each script writes its kind and the owner field it was given into every
 * key it renews and answers 1 for it: the keys then tell which script
 * renewed which lease, with which argument. */
static void make_kinds(void)
{
    for (int k = 0; k < KINDS; k++) {
        snprintf(bodies[k], sizeof bodies[k],
                 "local r = {}\n"
                 "for i = 1, #KEYS do\n"
                 "  redis.call('set', KEYS[i], 'kind%d ' .. ARGV[i + 1])\n"
                 "  r[i] = 1\n"
                 "end\n"
                 "return r\n",
                 k);
        hl_script_init(&scripts[k], bodies[k]);
        kinds[k].name = "test";
        kinds[k].renew = &scripts[k];
    }
}

typedef struct test_lease {
    hl_lease lease;
    int kind;
    char key[32];
} test_lease;

static test_lease leases[LEASES];
static atomic_int lost_calls;
static atomic_int release_calls;

static void on_lost(hl_lease *l, const char *why)
{
    (void)l;
    assert_non_null(why);
    atomic_fetch_add(&lost_calls, 1);
}

static hl_lease_subject subject(const hl_lease *l)
{
    const test_lease *t = (const test_lease *)(const void *)l;
    return (hl_lease_subject){&kinds[t->kind], t->key, strlen(t->key),
                              (uint64_t)(t - leases) + 1};
}

static void on_release(hl_lease *l)
{
    (void)l;
    atomic_fetch_add(&release_calls, 1);
}

typedef struct engine_state {
    hl_lease_engine *engine;
    hl_lease_stats before;
    hl_lease_stats after;
    int stopped_at_once;
} engine_state;

/* In running order: a full batch of the first kind, then each other kind
 * twice, then the first kind again. */
static int kind_of(int i)
{
    if (i < FIRST_KIND_LEASES)
        return 0;
    i -= FIRST_KIND_LEASES;
    return i < 2 * (KINDS - 1) ? 1 + i % (KINDS - 1) : 0;
}

static void start_leases(hilock_client *c, void *arg)
{
    engine_state *st = arg;
    st->engine = hl_lease_engine_create(c, 600000, 0, subject, on_lost,
                                         on_release);
    assert_non_null(st->engine);
    /* One grant time for all: equal deadlines keep the order of start. */
    hl_monotime now = hl_monotime_now();
    for (int i = 0; i < LEASES; i++) {
        test_lease *t = &leases[i];
        t->kind = kind_of(i);
        snprintf(t->key, sizeof t->key, "lease:%03d", i);
        hl_lease_start(st->engine, &t->lease, now, HILOCK_LEASE_WATCHDOG);
    }
}

static void run_round(hilock_client *c, void *arg)
{
    (void)c;
    engine_state *st = arg;
    st->before = hl_lease_engine_stats(st->engine);
    hl_lease_engine_renew_now(st->engine);
    st->after = hl_lease_engine_stats(st->engine);
}

static void read_stats(hilock_client *c, void *arg)
{
    (void)c;
    engine_state *st = arg;
    st->after = hl_lease_engine_stats(st->engine);
}

static void stop_leases(hilock_client *c, void *arg)
{
    (void)c;
    engine_state *st = arg;
    st->stopped_at_once = 0;
    for (int i = 0; i < LEASES; i++)
        st->stopped_at_once += hl_lease_stop(&leases[i].lease);
    hl_lease_engine_free(st->engine);
}

typedef struct answered_probe {
    hilock_client *client;
    engine_state *st;
} answered_probe;

static bool round_answered(void *arg)
{
    answered_probe *p = arg;
    hl_run_on_loop(p->client, read_stats, p->st);
    return p->st->after.renewing == 0;
}

static void test_round_renews_more_kinds_than_four(void **state)
{
    (void)state;
    make_kinds();
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = hl_new_client(s, NULL);

    static engine_state st;
    hl_run_on_loop(c, start_leases, &st);
    hl_run_on_loop(c, run_round, &st);
    /* One call per batch: two for the first kind, one for each other. */
    assert_int_equal(st.after.renew_calls - st.before.renew_calls, KINDS + 1);
    answered_probe probe = {c, &st};
    if (!hl_wait_until(round_answered, &probe, hl_widen(10000)))
        fail_msg("the round's renewals went unanswered");
    assert_int_equal(st.after.renewed - st.before.renewed, LEASES);
    assert_int_equal(st.after.lost, 0);
    assert_int_equal(atomic_load(&lost_calls), 0);

    /* Each lease was renewed by its own kind's script, for its owner. */
    for (int i = 0; i < LEASES; i++) {
        const char *argv[] = {"GET", leases[i].key};
        hilock_reply *r = NULL;
        assert_status(hilock_client_command(c, 2, argv, NULL, &r),
                      HILOCK_OK);
        char want[96];
        snprintf(want, sizeof want, "kind%d %s:%d", leases[i].kind,
                 hilock_client_id(c), i + 1);
        assert_int_equal(r->type, HILOCK_REPLY_STRING);
        assert_string_equal(r->str, want);
        hilock_reply_free(r);
    }

    hl_run_on_loop(c, stop_leases, &st);
    assert_int_equal(st.stopped_at_once, LEASES);
    assert_int_equal(atomic_load(&release_calls), 0);
    hl_free_client(c);
    hl_redis_server_stop(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_renews_more_kinds_than_four),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
