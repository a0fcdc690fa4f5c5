/* The library never aborts the process: a CSPRNG that fails makes client
 * creation fail with HILOCK_ERANDOM, and registering more scripts than a
 * connection can track by SHA1 still works (those run as EVAL). */
/* ctest-timeout: 120 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include <ev.h>
#include <openssl/rand.h>

#include "core/runtime/client_state.h"
#include "core/transport/script.h"
#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "hilock/multi.h"
#include "hilock/options.h"
#include "hilock/reply.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/loop_call.h"

/* ---- a CSPRNG that fails ------------------------------------------------ */

static atomic_int rand_calls;

static int failing_rand(unsigned char *buf, int num)
{
    (void)buf;
    (void)num;
    atomic_fetch_add(&rand_calls, 1);
    return 0;
}

static hilock_options *options_for(const hl_redis_server *s)
{
    char url[128];
    hilock_options *o = NULL;
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(s));
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, url), HILOCK_OK);
    return o;
}

static void assert_last_error_has(const char *needle)
{
    if (strstr(hilock_last_error(), needle) == NULL)
        fail_msg("detail '%s' does not mention '%s'", hilock_last_error(),
                 needle);
}

static void test_csprng_failure_fails_client_create(void **state)
{
    (void)state;
    hl_redis_server *s = hl_fixture_plain();
    hilock_options *o = options_for(s);
    hilock_client *c = (hilock_client *)&c;

    atomic_store(&rand_calls, 0);
    hilock__rand_bytes = failing_rand;
    int rc = hilock_client_create(&c, o);
    hilock__rand_bytes = RAND_bytes;
    assert_status(rc, HILOCK_ERANDOM);
    assert_last_error_has("CSPRNG");
    assert_null(c);
    assert_int_equal(atomic_load(&rand_calls), 1);

    /* On the caller's loop create returns before connecting; the id is
     * made first all the same. */
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    assert_non_null(loop);
    assert_status(hilock_options_set_loop(o, loop), HILOCK_OK);
    c = (hilock_client *)&c;
    hilock__rand_bytes = failing_rand;
    rc = hilock_client_create(&c, o);
    hilock__rand_bytes = RAND_bytes;
    assert_status(rc, HILOCK_ERANDOM);
    assert_null(c);
    assert_int_equal(atomic_load(&rand_calls), 2);
    ev_loop_destroy(loop);

    /* The failure left nothing behind: the next create is whole. */
    hilock_options_free(o);
    o = options_for(s);
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    const char *id = hilock_client_id(c);
    assert_int_equal(strlen(id), HILOCK_CLIENT_ID_LEN);
    assert_int_equal(id[14], '4');
    assert_status(hilock_client_destroy(c), HILOCK_OK);
    hilock_options_free(o);
    hl_redis_server_stop(s);
}

static void test_csprng_failure_fails_redlock_create(void **state)
{
    (void)state;
    hl_redis_server *m[3];
    char buf[3][64];
    const char *urls[3];
    hl_fixture_masters(m, 3);
    for (int i = 0; i < 3; i++) {
        snprintf(buf[i], sizeof buf[i], "redis://127.0.0.1:%d",
                 hl_redis_server_port(m[i]));
        urls[i] = buf[i];
    }
    hilock_redlock *rl = (hilock_redlock *)&rl;

    atomic_store(&rand_calls, 0);
    hilock__rand_bytes = failing_rand;
    int rc = hilock_redlock_create(&rl, urls, 3, NULL);
    hilock__rand_bytes = RAND_bytes;
    /* Not ENOQUORUM: every master was there, the process was not. */
    assert_status(rc, HILOCK_ERANDOM);
    assert_last_error_has("CSPRNG");
    assert_null(rl);
    assert_true(atomic_load(&rand_calls) >= 1);

    assert_status(hilock_redlock_create(&rl, urls, 3, NULL), HILOCK_OK);
    assert_status(hilock_redlock_destroy(rl), HILOCK_OK);
    hl_fixture_stop_masters(m, 3);
}

/* ---- more scripts than a connection tracks ------------------------------ */

#define NSCRIPTS (HL_SHA_SCRIPTS + 6)

static hl_script scripts[NSCRIPTS];
static char bodies[NSCRIPTS][96];

typedef struct script_result {
    atomic_bool done;
    int status;
    char text[96];
} script_result;

typedef struct script_run {
    const hl_script *script;
    const char *key;
    const char *arg;
    script_result *res;
    int queued;
} script_run;

static void on_script_reply(void *data, int status, hilock_reply *reply)
{
    script_result *res = data;
    res->status = status;
    if (reply != NULL && (reply->type == HILOCK_REPLY_STRING ||
                          reply->type == HILOCK_REPLY_ERROR))
        snprintf(res->text, sizeof res->text, "%s", reply->str);
    hilock_reply_free(reply);
    atomic_store(&res->done, true);
}

static void run_on_loop(hilock_client *c, void *arg)
{
    script_run *run = arg;
    const char *argv[] = {run->key, run->arg};
    size_t lens[] = {strlen(run->key), strlen(run->arg)};
    run->queued = hl_script_run(c->conn, run->script, 1, 2, argv, lens,
                                on_script_reply, run->res);
}

/* Runs script i with one key and one argument; returns its string reply. */
static void run_script(hilock_client *c, int i, const char *key,
                       const char *arg, char *out, size_t cap)
{
    script_result res = {.status = -1};
    script_run run = {&scripts[i], key, arg, &res, -1};
    hl_run_on_loop(c, run_on_loop, &run);
    assert_status(run.queued, HILOCK_OK);
    if (!hl_wait_flag(&res.done, hl_widen(5000)))
        fail_msg("script %d got no reply", i);
    assert_status(res.status, HILOCK_OK);
    snprintf(out, cap, "%s", res.text);
}

static long long eval_calls(hilock_client *c, const char *cmd)
{
    const char *argv[] = {"INFO", "commandstats"};
    hilock_reply *r = NULL;
    char needle[64];
    assert_status(hilock_client_command(c, 2, argv, NULL, &r), HILOCK_OK);
    snprintf(needle, sizeof needle, "cmdstat_%s:calls=", cmd);
    const char *at = strstr(r->str, needle);
    long long n = at ? atoll(at + strlen(needle)) : 0;
    hilock_reply_free(r);
    return n;
}

static void test_more_scripts_than_the_table(void **state)
{
    (void)state;
    hl_redis_server *s = hl_fixture_plain();
    hilock_options *o = options_for(s);
    hilock_client *c = NULL;
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);

    /* Whatever the kinds registered before, these fill the table and
     * overflow it by at least six. */
    for (int i = 0; i < NSCRIPTS; i++) {
        snprintf(bodies[i], sizeof bodies[i],
                 "return 'script %d ' .. KEYS[1] .. ' ' .. ARGV[1]", i);
        hl_script_init(&scripts[i], bodies[i]);
    }
    assert_true(scripts[NSCRIPTS - 1].index < 0);
    assert_true(scripts[0].index < HL_SHA_SCRIPTS);

    const char *reset[] = {"CONFIG", "RESETSTAT"};
    hilock_reply *r = NULL;
    assert_status(hilock_client_command(c, 2, reset, NULL, &r), HILOCK_OK);
    hilock_reply_free(r);

    char got[96];
    for (int round = 0; round < 2; round++) {
        run_script(c, NSCRIPTS - 1, "k", "a", got, sizeof got);
        char want[96];
        snprintf(want, sizeof want, "script %d k a", NSCRIPTS - 1);
        assert_string_equal(got, want);
    }
    /* Past the table a script goes as EVAL, so it can never meet
     * NOSCRIPT, and it went nowhere as EVALSHA. */
    assert_int_equal(eval_calls(c, "eval"), 2);
    assert_int_equal(eval_calls(c, "evalsha"), 0);

    /* A lock kind registering its scripts now lands past the table too,
     * and its locks still work. */
    hilock_lock *l = NULL;
    assert_status(hilock_lock_create(&l, c, "noabort"), HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, 10000), HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, 10000), HILOCK_OK);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    assert_status(hilock_lock_release(l), HILOCK_ENOTOWNER);
    assert_status(hilock_lock_destroy(l), HILOCK_OK);
    assert_true(eval_calls(c, "eval") > 2);
    assert_int_equal(eval_calls(c, "evalsha"), 0);

    assert_status(hilock_client_destroy(c), HILOCK_OK);
    hl_redis_server_stop(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csprng_failure_fails_client_create),
        cmocka_unit_test(test_csprng_failure_fails_redlock_create),
        cmocka_unit_test(test_more_scripts_than_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
