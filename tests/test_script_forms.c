/* The forms a publishing script takes (hl_script_form): as written, its
 * sharded twin, and the twins for a cluster whose channels shared with
 * Redisson are published plain or both ways.  Each form runs on one
 * server (Redis 7 takes SPUBLISH and SSUBSCRIBE outside a cluster too),
 * with a plain and a sharded listener on a shared channel and on one of
 * hilock's own, and the test checks which listeners each form reaches
 * and what its subscriber counts say.  The layout's channels are checked
 * to fall on the right side of the rule that tells them apart. */
/* ctest-timeout: 60 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/transport/pubsub.h"
#include "core/transport/script.h"
#include "core/transport/script_def.h"
#include "kindkit/script_registry.h"
#include "layout/layout.h"
#include "support/fixture.h"
#include "support/plain_sub.h"

static hl_redis_server *server;
static hl_script script;

#define SHARED "redisson_lock__channel:{forms}"
#define OWN HL_LAYOUT_LOCK_WAKE ":{forms}:5f0c8c1e-client"

/* KEYS: a shared channel, an own channel.  Replies how many heard the
 * first publish, and the counts of the shared channel's plain
 * subscribers and of the own channel's sharded ones. */
static const char body[] =
    "local r = redis.pcall('publish', KEYS[1], ARGV[1])\n"
    "redis.call('publish', KEYS[2], ARGV[1])\n"
    "local n = redis.call('pubsub', 'numsub', KEYS[1])[2]\n"
    "local m = redis.pcall('pubsub', 'shardnumsub', KEYS[2])[2]\n"
    "return {r, n, m}\n";

static int setup(void **state)
{
    (void)state;
    hl_script_init(&script, body);
    server = hl_fixture_plain();
    return server ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_server_stop(server);
    return 0;
}

/* Who hears a form: the shared channel's plain and sharded listeners,
 * then the own channel's. */
typedef struct heard {
    hl_publish how;
    bool shared_plain, shared_sharded, own_plain, own_sharded;
    const char *reply;
} heard;

static void expect(hl_plain_sub *sub, bool hears, const char *what,
                   const heard *h)
{
    char msg[32];
    if (hears) {
        if (!hl_plain_sub_next(sub, msg, sizeof msg, hl_widen(5000)))
            fail_msg("form %d: the %s listener heard nothing", (int)h->how,
                     what);
        assert_string_equal(msg, "0");
    }
}

static void expect_quiet(hl_plain_sub *sub, bool hears, const char *what,
                         const heard *h)
{
    if (!hl_plain_sub_quiet(sub))
        fail_msg("form %d: the %s listener heard %s", (int)h->how, what,
                 hears ? "the message twice" : "a message");
}

static void test_each_form_reaches_its_listeners(void **state)
{
    (void)state;
    static const heard forms[] = {
        {HL_PUBLISH_PLAIN, true, false, true, false,
         "*3\r\n:1\r\n:1\r\n:1\r\n"},
        {HL_PUBLISH_SHARDED, false, true, false, true,
         "*3\r\n:1\r\n:1\r\n:1\r\n"},
        /* The shared channel's plain subscribers count as many: they may
         * be on any node of a cluster. */
        {HL_PUBLISH_SHARED_PLAIN, true, false, false, true,
         "*3\r\n:1\r\n:1000000000\r\n:1\r\n"},
        {HL_PUBLISH_SHARED_BOTH, true, true, false, true,
         "*3\r\n:2\r\n:1000000000\r\n:1\r\n"},
    };
    hl_plain_sub *shared_plain = hl_plain_sub_open(server, SHARED);
    hl_plain_sub *shared_sharded = hl_plain_sub_open_sharded(server, SHARED);
    hl_plain_sub *own_plain = hl_plain_sub_open(server, OWN);
    hl_plain_sub *own_sharded = hl_plain_sub_open_sharded(server, OWN);

    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        const heard *h = &forms[i];
        const hl_script *form = hl_script_form(&script, h->how);
        assert_non_null(form);
        /* Made once: the same form every time. */
        assert_ptr_equal(hl_script_form(&script, h->how), form);
        char reply[256];
        assert_int_equal(hl_redis_server_cmd(server, reply, sizeof reply,
                                             "EVAL", form->body, "2", SHARED,
                                             OWN, "0", (char *)NULL),
                         '*');
        if (strcmp(reply, h->reply) != 0)
            fail_msg("form %d replied %s", (int)h->how, reply);
        expect(shared_plain, h->shared_plain, "shared plain", h);
        expect(shared_sharded, h->shared_sharded, "shared sharded", h);
        expect(own_plain, h->own_plain, "own plain", h);
        expect(own_sharded, h->own_sharded, "own sharded", h);
        /* The script published everything before it replied, so a PING
         * behind it finds anything else it sent. */
        expect_quiet(shared_plain, h->shared_plain, "shared plain", h);
        expect_quiet(shared_sharded, h->shared_sharded, "shared sharded", h);
        expect_quiet(own_plain, h->own_plain, "own plain", h);
        expect_quiet(own_sharded, h->own_sharded, "own sharded", h);
    }
    hl_plain_sub_close(shared_plain);
    hl_plain_sub_close(shared_sharded);
    hl_plain_sub_close(own_plain);
    hl_plain_sub_close(own_sharded);
}

/* The forms differ from the script only where they must. */
static void test_forms_of_scripts(void **state)
{
    (void)state;
    static hl_script quiet, odd, odd_count;
    hl_script_init(&quiet, "return redis.call('pubsub', 'numsub', 'x')\n");
    /* A PUBLISH the rewrite does not know would go out as written, in
     * the wrong way: such a script gets no shared form rather than that
     * one. */
    hl_script_init(&odd, "return redis.call( 'publish', KEYS[1], 'x')\n");
    /* Nor does a count of subscribers in a form it does not know, which
     * would count a shared channel's plain listeners on one node. */
    hl_script_init(&odd_count,
                   "redis.call('publish', KEYS[1], 'x')\n"
                   "return redis.call ('pubsub', 'numsub', KEYS[1])\n");

    assert_ptr_equal(hl_script_form(&script, HL_PUBLISH_PLAIN), &script);
    const hl_script *sharded = hl_script_form(&script, HL_PUBLISH_SHARDED);
    assert_non_null(strstr(sharded->body, "'spublish'"));
    assert_null(strstr(sharded->body, "'publish'"));
    for (int how = HL_PUBLISH_PLAIN; how <= HL_PUBLISH_SHARED_BOTH; how++)
        assert_ptr_equal(hl_script_form(&quiet, (hl_publish)how), &quiet);
    assert_true(odd.rewrite_unknown);
    assert_true(odd_count.rewrite_unknown);
    assert_null(hl_script_form(&odd_count, HL_PUBLISH_SHARED_PLAIN));
    assert_false(script.rewrite_unknown);
    assert_non_null(hl_script_form(&odd, HL_PUBLISH_SHARDED));
    assert_null(hl_script_form(&odd, HL_PUBLISH_SHARED_PLAIN));
    assert_null(hl_script_form(&odd, HL_PUBLISH_SHARED_BOTH));
    const hl_script *both = hl_script_form(&script, HL_PUBLISH_SHARED_BOTH);
    assert_ptr_not_equal(both, hl_script_form(&script,
                                              HL_PUBLISH_SHARED_PLAIN));
    assert_string_not_equal(both->sha1, script.sha1);
}

/* Every script of the library has each form: one it could not be
 * given would fail every call on a cluster that asks for it. */
static void test_every_script_has_its_forms(void **state)
{
    (void)state;
    const hl_script_def *const *const lists[] = {
        hl_reentrant_script_defs, hl_fair_script_defs,
        hl_rwlock_script_defs,    hl_semaphore_script_defs,
        hl_latch_script_defs,     hl_kindkit_script_defs,
        hl_cond_script_defs};
    static hl_script scripts[128];
    size_t n = 0, publishing = 0;
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++)
        for (const hl_script_def *const *d = lists[l]; *d != NULL; d++) {
            assert_true(n < sizeof scripts / sizeof scripts[0]);
            hl_script *s = &scripts[n++];
            hl_script_init(s, (*d)->body);
            if (s->rewrite_unknown)
                print_error("%s publishes or counts subscribers in a form "
                            "the rewrite does not know\n",
                            (*d)->what);
            assert_false(s->rewrite_unknown);
            publishing += s->publishes;
            for (int how = HL_PUBLISH_PLAIN; how <= HL_PUBLISH_SHARED_BOTH;
                 how++)
                assert_non_null(hl_script_form(s, (hl_publish)how));
        }
    /* The releases of every kind publish. */
    assert_true(publishing >= 10);
}

static bool own(const char *prefix)
{
    return hl_channel_is_own(prefix, strlen(prefix));
}

/* A client's wake-up channels are hilock's own; the channels Redisson's
 * clients listen on are not. */
static void test_layout_channels_by_the_rule(void **state)
{
    (void)state;
    assert_true(own(HL_LAYOUT_LOCK_WAKE));
    assert_true(own(HL_LAYOUT_RWLOCK_WAKE));
    assert_true(own(HL_LAYOUT_SEM_WAKE));
    assert_false(own(HL_LAYOUT_LOCK_CHANNEL));
    assert_false(own(HL_LAYOUT_RWLOCK_CHANNEL));
    assert_false(own(HL_LAYOUT_SEMAPHORE_CHANNEL));
    assert_false(own(HL_LAYOUT_LATCH_CHANNEL));
    assert_false(hl_channel_is_own("hilock", 6));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_form_reaches_its_listeners),
        cmocka_unit_test(test_forms_of_scripts),
        cmocka_unit_test(test_every_script_has_its_forms),
        cmocka_unit_test(test_layout_channels_by_the_rule),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
