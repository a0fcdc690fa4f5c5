/* Every script hilock runs touches only the keys its caller passes in
 * KEYS, as servers that refuse undeclared keys (Dragonfly by default)
 * require: each script's text is read (support/lua_keys.h) against the
 * table its kind runs it from (core/transport/script_def.h), so the
 * check cannot drift from what the code passes.  The few scripts that
 * must name keys no caller can know carry a named exception with its
 * reason, and Dragonfly's flag that lets them.  Each script's name, by
 * which a failure is reported, is its own.  No server needed. */
/* ctest-timeout: 60 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../tools/cli/sem_status_lua.h"
#include "core/runtime/presence.h"
#include "core/transport/keyslot.h"
#include "core/transport/script_def.h"
#include "kindkit/script_registry.h"
#include "layout/layout.h"
#include "support/lua_keys.h"

/* The CLI's script, as the CLI runs it (it sees no internal header). */
static const hl_script_def cli_sem_status_def = {
    .what = "hilock status of a semaphore",
    .body = CLI_SEM_STATUS_LUA,
    .nkeys = CLI_SEM_STATUS_KEYS,
    .keys = (const char *const[]){hl_key_name, hl_key_given},
};

static const hl_script_def *const loose_defs[] = {&hl_presence_since_def,
                                                  &cli_sem_status_def, NULL};

static const hl_script_def *const *const def_lists[] = {
    hl_reentrant_script_defs,
    hl_fair_script_defs,
    hl_rwlock_script_defs,
    hl_semaphore_script_defs,
    hl_latch_script_defs,
    hl_kindkit_script_defs,
    hl_cond_script_defs,
    loose_defs};

#define NLISTS (sizeof def_lists / sizeof def_lists[0])

static lua_keys_spec spec_of(const hl_script_def *def)
{
    return (lua_keys_spec){.nkeys = def->nkeys,
                           .batch = def->batch,
                           .maker = def->undeclared ? def->undeclared->maker
                                                    : NULL};
}

/* Print what is wrong with def, once per problem; the count of them. */
static int problems_of(const hl_script_def *def)
{
    int bad = 0;
    lua_keys_spec spec = spec_of(def);
    lua_keys_report rep;
    if (lua_keys_check(def->body, &spec, &rep) != 0) {
        print_error("%s: %s\n", def->what, rep.error);
        return 1;
    }
    if (rep.calls == 0) {
        print_error("%s: no redis.call read\n", def->what);
        bad++;
    }
    if (def->nkeys < 1 || def->nkeys > HL_SCRIPT_MAX_KEYS ||
        def->keys == NULL) {
        print_error("%s: %d keys\n", def->what, def->nkeys);
        return bad + 1;
    }
    for (int k = 1; !def->batch && k <= def->nkeys; k++) {
        bool named = rep.named & (UINT64_C(1) << (k - 1));
        bool spare = def->spare_keys & (1u << (k - 1));
        if (named == spare) {
            print_error(
                "%s: KEYS[%d] (%s) is %s\n", def->what, k, def->keys[k - 1],
                spare ? "named, yet called spare" : "passed, yet never named");
            bad++;
        }
    }
    bool flagged = strncmp(def->body, HL_LUA_UNDECLARED_KEYS,
                           strlen(HL_LUA_UNDECLARED_KEYS)) == 0;
    if (def->undeclared != NULL &&
        (rep.made == 0 || !flagged || def->undeclared->why == NULL ||
         strlen(def->undeclared->why) < 20)) {
        print_error("%s: an exception for %s() it does not use, or without "
                    "its flag line or its reason\n",
                    def->what, def->undeclared->maker);
        bad++;
    }
    if (def->undeclared == NULL && strstr(def->body, "--!df") != NULL) {
        print_error("%s: Dragonfly's flag line without an exception\n",
                    def->what);
        bad++;
    }
    return bad;
}

static void every_script_names_only_its_keys(void **state)
{
    (void)state;
    int bad = 0, scripts = 0;
    for (size_t l = 0; l < NLISTS; l++)
        for (const hl_script_def *const *d = def_lists[l]; *d; d++) {
            bad += problems_of(*d);
            scripts++;
        }
    print_message("%d scripts read\n", scripts);
    assert_true(scripts >= 40);
    assert_int_equal(bad, 0);
}

/* The check reads the real scripts, not around them: each names its last
 * key, and so fails when told the caller passes one key fewer. */
static void one_key_fewer_fails(void **state)
{
    (void)state;
    for (size_t l = 0; l < NLISTS; l++)
        for (const hl_script_def *const *d = def_lists[l]; *d; d++) {
            if ((*d)->batch)
                continue;
            lua_keys_spec spec = spec_of(*d);
            spec.nkeys--;
            lua_keys_report rep;
            if (lua_keys_check((*d)->body, &spec, &rep) == 0)
                fail_msg("%s passes with %d keys", (*d)->what, spec.nkeys);
            assert_non_null(strstr(rep.error, "beyond the"));
        }
}

/* Only the scripts whose def names an exception carry Dragonfly's flag;
 * each of them is listed here, with its reason, for whoever reads the
 * test's output. */
static void exceptions_are_named(void **state)
{
    (void)state;
    int n = 0;
    for (size_t l = 0; l < NLISTS; l++)
        for (const hl_script_def *const *d = def_lists[l]; *d; d++)
            if ((*d)->undeclared != NULL) {
                print_message("exception: %s names keys made by %s(): %s\n",
                              (*d)->what, (*d)->undeclared->maker,
                              (*d)->undeclared->why);
                n++;
            }
    print_message("%d scripts name keys they are not given\n", n);
}

/* A failed script is reported by its def's name, so no two defs share
 * one: an error must say which script ran (the lean release's lone-server
 * and cluster forms once did not). */
static void every_script_has_a_name_of_its_own(void **state)
{
    (void)state;
    const hl_script_def *seen[256];
    size_t n = 0;
    for (size_t l = 0; l < NLISTS; l++)
        for (const hl_script_def *const *d = def_lists[l]; *d; d++) {
            assert_non_null((*d)->what);
            for (size_t i = 0; i < n; i++)
                if (strcmp(seen[i]->what, (*d)->what) == 0)
                    fail_msg("two scripts are called \"%s\"", (*d)->what);
            assert_true(n < sizeof seen / sizeof seen[0]);
            seen[n++] = *d;
        }
    assert_true(n >= 40);
}

/* ---- the checker itself ------------------------------------------------ */

typedef struct sample {
    const char *text;
    int nkeys;
    bool batch;
    const char *maker;
    const char *refusal; /* NULL: the text passes */
} sample;

static const sample samples[] = {
    /* Keys the caller did not pass. */
    {"return redis.call('get', 'orders')\n", 1, false, NULL,
     "key 'orders' of 'get'"},
    {"return redis.call('get', KEYS[3])\n", 2, false, NULL,
     "KEYS[3], beyond the 2 keys"},
    {"local k = ARGV[1]\nredis.call('del', KEYS[1], k)\n", 1, false, NULL,
     "key k of 'del'"},
    {"redis.call('set', KEYS[1] .. ':copy', 1)\n", 1, false, NULL,
     "key KEYS[1] .. ..."},
    {"local function bump(k)\n  return redis.call('incr', k)\nend\n"
     "bump(KEYS[1])\nbump(ARGV[1])\n",
     1, false, NULL, "parameter 1 of bump()"},
    {"local k = KEYS[1]\nif ARGV[1] then k = ARGV[1] end\n"
     "redis.call('del', k)\n",
     1, false, NULL, "k stands for a key and is assigned again"},
    {"local function tkey(n) return n .. ':t' end\n"
     "redis.call('del', tkey(KEYS[1]))\n",
     1, false, NULL, "key tkey(...) of 'del'"},
    {"redis.call('publish', ARGV[1], 'x')\n", 1, false, NULL,
     "channel ARGV[1] of 'publish'"},
    {"return redis.call('pttl', ARGV[1] == '2' and KEYS[1] or 'other')\n", 1,
     false, NULL, "key 'other' of 'pttl'"},
    /* A function whose parameter KEYS stands for keys the caller lists. */
    {"local function rel(KEYS) return redis.call('del', KEYS[2]) end\n"
     "return rel({KEYS[1]})\n",
     1, false, NULL, "1 keys, where it reads KEYS[2]"},
    {"local function rel(KEYS) return redis.call('del', KEYS[1]) end\n"
     "return rel({ARGV[1]})\n",
     1, false, NULL, "key ARGV[1] of the KEYS of rel()"},
    {"local function rel(KEYS) return redis.call('del', KEYS[1]) end\n"
     "local t = {KEYS[1]}\nreturn rel(t)\n",
     1, false, NULL, "no table constructor"},
    {"local function rel(KEYS) return redis.call('del', unpack(KEYS)) end\n"
     "return rel({KEYS[1]})\n",
     1, false, NULL, "KEYS read other than as KEYS[i]"},
    {"local function rel(KEYS, i) return redis.call('del', KEYS[i]) end\n"
     "return rel({KEYS[1]}, 1)\n",
     1, false, NULL, "no constant from 1"},
    {"local function rel(KEYS) return redis.call('del', KEYS[1]) end\n"
     "return rel({KEYS[3]})\n",
     2, false, NULL, "KEYS[3], beyond the 2 keys"},
    /* What the check does not read is refused, not passed. */
    {"return redis.call(ARGV[1], KEYS[1])\n", 1, false, NULL,
     "no literal string"},
    {"return redis.call('keys', '*')\n", 1, false, NULL, "the command 'keys'"},
    {"local c = redis.call\nreturn c('get', KEYS[1])\n", 1, false, NULL,
     "redis read other than"},
    {"return redis.call('del', unpack(KEYS))\n", 1, false, NULL,
     "KEYS read other than"},
    {"for i = 1, #KEYS - 1 do redis.call('del', KEYS[i + 1]) end\n", 2, false,
     NULL, "an index neither constant"},
    {"return redis.call('pttl', KEYS[1])\n", 1, true, NULL,
     "KEYS[1] in a batch script"},
    {"return loadstring(ARGV[1])()\n", 1, false, NULL,
     "the global loadstring"},
    {"local s = [[x]]\nreturn redis.call('get', KEYS[1])\n", 1, false, NULL,
     "a long string"},
    {"return redis.call('get', KEYS[1]):upper()\n", 1, false, NULL,
     "a method call"},
    /* Shapes the scripts use, which pass. */
    {"local k = KEYS[2]\nlocal function extend(key, ms)\n"
     "  redis.call('pexpire', key, ms)\nend\n"
     "extend(k, ARGV[1])\nextend(KEYS[1], ARGV[1])\n",
     2, false, NULL, NULL},
    {"local out = {}\nfor i = 1, #KEYS do\n"
     "  out[i] = redis.call('pexpire', KEYS[i], ARGV[i + 1])\nend\n"
     "return out\n",
     0, true, NULL, NULL},
    {"local function wake(base, c)\n"
     "  redis.pcall('publish', base .. ':' .. c, '0')\nend\n"
     "local first = redis.call('lindex', KEYS[2 + 1], 0)\n"
     "if first then wake(KEYS[1], first) end\n",
     3, false, NULL, NULL},
    {"return redis.call('pttl', ARGV[1] == '2' and KEYS[2] or KEYS[1])\n", 2,
     false, NULL, NULL},
    {"local function n(ch, sharded)\n"
     "  return redis.call('pubsub', sharded == '1' and 'shardnumsub' or\n"
     "                    'numsub', ch)[2]\nend\n"
     "return n(KEYS[1], ARGV[1])\n",
     1, false, NULL, NULL},
    {"local function rel(KEYS, ARGV)\n"
     "  redis.call('del', KEYS[2])\n"
     "  local function wake(c) redis.call('publish', KEYS[1] .. c, '0') end\n"
     "  wake(ARGV[1])\nend\n"
     "rel({KEYS[3], KEYS[1]}, {ARGV[2]})\n",
     3, false, NULL, NULL},
    {"local function tkey(n, i) return n .. ':' .. i end\n"
     "return redis.call('exists', tkey(KEYS[1], 1))\n",
     1, false, "tkey", NULL},
};

static void checker_refuses_what_it_should(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        const sample *s = &samples[i];
        lua_keys_spec spec = {s->nkeys, s->batch, s->maker};
        lua_keys_report rep;
        int rc = lua_keys_check(s->text, &spec, &rep);
        if (s->refusal == NULL && rc != 0)
            fail_msg("sample %zu refused: %s", i, rep.error);
        if (s->refusal != NULL &&
            (rc == 0 || strstr(rep.error, s->refusal) == NULL))
            fail_msg("sample %zu: wanted a refusal with \"%s\", got %s", i,
                     s->refusal, rc == 0 ? "none" : rep.error);
    }
}

/* ---- the keys' slots --------------------------------------------------- */

/* Every key a def names by a layout prefix lies in the name's cluster
 * slot, for names without braces and with a hash tag of their own (the
 * names a cluster accepts, hl_check_name_slot). */
static void prefixed_keys_share_the_name_slot(void **state)
{
    (void)state;
    static const char *const names[] = {"orders", "stock:{42}:a", "{x}"};
    int checked = 0;
    for (size_t l = 0; l < NLISTS; l++)
        for (const hl_script_def *const *d = def_lists[l]; *d; d++)
            for (int k = 0; k < (*d)->nkeys; k++) {
                const char *prefix = (*d)->keys[k];
                if (prefix == hl_key_name || prefix == hl_key_given ||
                    prefix == hl_key_channel)
                    continue;
                for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
                    hl_aux_name key;
                    assert_int_equal(hl_layout_key(&key, prefix, names[n],
                                                   strlen(names[n]), NULL, 0),
                                     0);
                    if (hl_keyslot(key.s, key.len) !=
                        hl_keyslot(names[n], strlen(names[n])))
                        fail_msg("%s: %s is not in %s's slot", (*d)->what,
                                 key.s, names[n]);
                    hl_aux_name_done(&key);
                    checked++;
                }
            }
    assert_true(checked > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_script_names_only_its_keys),
        cmocka_unit_test(one_key_fewer_fails),
        cmocka_unit_test(exceptions_are_named),
        cmocka_unit_test(every_script_has_a_name_of_its_own),
        cmocka_unit_test(checker_refuses_what_it_should),
        cmocka_unit_test(prefixed_keys_share_the_name_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
