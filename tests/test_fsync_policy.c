/* fsync=yes on servers that cannot keep it: each reason is found in the
 * handshake and fails the client's creation at once, with its own code
 * (HILOCK_EUNSUPPORTED) and words that name what is missing and the
 * option that goes without; hilock exits 69.  The servers here are Redis
 * 7.0, which has no WAITAOF, so a master that has everything else still
 * refuses; appendonly and appendfsync are checked before, so that their
 * words show here too.  fsync=no on the same servers takes locks. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/replicated_util.h"

#define PASSWORD "Fsync-Probe-Pw-3"

static hl_redis_server *server;

static int setup(void **state)
{
    (void)state;
    server = hl_fixture_plain();
    return server ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_server_stop(server);
    return 0;
}

static void config_set(hl_redis_server *s, const char *name,
                       const char *value)
{
    char reply[256];
    if (hl_redis_server_cmd(s, reply, sizeof reply, "CONFIG", "SET", name,
                            value, (char *)NULL) != '+')
        fail_msg("CONFIG SET %s %s: %s", name, value, reply);
}

static int create(hilock_client **out, hl_redis_server *s, const char *auth,
                  const char *query)
{
    char url[256];
    snprintf(url, sizeof url, "redis://%s127.0.0.1:%d/?%s", auth,
             hl_redis_server_port(s), query);
    hilock_options *o = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    *out = NULL;
    int rc = hilock_client_create(out, o);
    hilock_options_free(o);
    return rc;
}

/* Refused at creation, with words holding each of want (NULL-ended). */
static void refused_with(hl_redis_server *s, const char *auth,
                         const char *want, ...)
{
    hilock_client *c = NULL;
    int rc = create(&c, s, auth, "fsync=yes");
    if (rc != HILOCK_EUNSUPPORTED)
        fail_msg("fsync=yes: %s (%s)", hilock_errname(rc),
                 hilock_last_error());
    assert_null(c);
    const char *detail = hilock_last_error();
    char port[16];
    snprintf(port, sizeof port, ":%d", hl_redis_server_port(s));
    va_list ap;
    va_start(ap, want);
    for (const char *w = want; w != NULL; w = va_arg(ap, const char *))
        if (strstr(detail, w) == NULL)
            fail_msg("'%s' missing from: %s", w, detail);
    va_end(ap);
    if (strstr(detail, port) == NULL || strstr(detail, "fsync=no") == NULL ||
        strstr(detail, PASSWORD) != NULL)
        fail_msg("unexpected words: %s", detail);
}

/* Without the option nothing is asked, and locks are taken. */
static void works_without(hl_redis_server *s, const char *auth)
{
    hilock_client *c = NULL;
    assert_int_equal(create(&c, s, auth, "fsync=no"), HILOCK_OK);
    hilock_lock *l = hl_new_lock(c, "fsync-probe");
    assert_int_equal(hilock_lock_try_acquire(l, 0, 5000), HILOCK_OK);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    hl_free_lock(l);
    hilock_client_destroy(c);
}

static void test_no_append_only_file(void **state)
{
    (void)state;
    config_set(server, "appendonly", "no");
    refused_with(server, "", "appendonly no", NULL);
    works_without(server, "");
}

static void test_appendfsync_no(void **state)
{
    (void)state;
    config_set(server, "appendonly", "yes");
    config_set(server, "appendfsync", "no");
    refused_with(server, "", "appendfsync no", "cannot complete", NULL);
    works_without(server, "");
    config_set(server, "appendfsync", "everysec");
    config_set(server, "appendonly", "no");
}

/* Everything but WAITAOF, which Redis 7.0 does not have. */
static void test_waitaof_unknown(void **state)
{
    (void)state;
    config_set(server, "appendonly", "yes");
    config_set(server, "appendfsync", "everysec");
    refused_with(server, "", "refuses WAITAOF", "7.2", NULL);
    works_without(server, "");
    config_set(server, "appendonly", "no");
}

/* A user who may not read the settings cannot be shown to have them. */
static void test_config_denied(void **state)
{
    (void)state;
    char reply[256];
    if (hl_redis_server_cmd(server, reply, sizeof reply, "ACL", "SETUSER",
                            "noconfig", "reset", "on", ">" PASSWORD, "~*",
                            "&*", "+@all", "-config", (char *)NULL) != '+')
        fail_msg("ACL SETUSER: %s", reply);
    config_set(server, "appendonly", "yes");
    refused_with(server, "noconfig:" PASSWORD "@", "refuses CONFIG GET",
                 NULL);
    works_without(server, "noconfig:" PASSWORD "@");
    config_set(server, "appendonly", "no");
    assert_int_equal(hl_redis_server_cmd(server, reply, sizeof reply, "ACL",
                                         "DELUSER", "noconfig",
                                         (char *)NULL),
                     ':');
}

/* A replica takes no writes and is not refused for what it lacks: the
 * client is made, and a write there says it is a replica. */
static void test_replica_not_refused(void **state)
{
    (void)state;
    hl_redis_server *replica = hl_fixture_plain();
    assert_non_null(replica);
    hl_replica_of(replica, server);
    hl_online_probe online = {server, 1};
    if (!hl_wait_until(hl_online_is, &online, hl_widen(10000)))
        fail_msg("the replica never came online");
    hilock_client *c = NULL;
    assert_int_equal(create(&c, replica, "", "fsync=yes&replicas=none"),
                     HILOCK_OK);
    hilock_lock *l = hl_new_lock(c, "fsync-replica");
    assert_int_equal(hilock_lock_try_acquire(l, 0, 5000), HILOCK_EREADONLY);
    hl_free_lock(l);
    hilock_client_destroy(c);
    hl_replica_of(replica, NULL);
    hl_redis_server_stop(replica);
}

/* hilock says the same, and exits as for a server that cannot give
 * what is asked. */
static void test_cli_exits_unavailable(void **state)
{
    (void)state;
    char url[128], out[8192];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/?fsync=yes",
             hl_redis_server_port(server));
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", url, "run",
                          "fsync-cli", "--", "true", NULL};
    int code = hl_run(argv, out, sizeof out, hl_widen(20000));
    if (code != 69 || strstr(out, "fsync=no") == NULL)
        hl_fail_run("hilock run with fsync=yes", code, out);
}

static void test_option(void **state)
{
    (void)state;
    hilock_options *o = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_wait_fsync(o), 0);
    assert_int_equal(hilock_options_set_wait_fsync(o, true), HILOCK_OK);
    assert_int_equal(hilock_options_wait_fsync(o), 1);
    assert_int_equal(hilock_options_set_url(o, "redis://h/?fsync=no"),
                     HILOCK_OK);
    assert_int_equal(hilock_options_wait_fsync(o), 0);
    assert_int_equal(hilock_options_set_url(o, "redis://h/?fsync=YES"),
                     HILOCK_OK);
    assert_int_equal(hilock_options_wait_fsync(o), 1);
    assert_int_equal(hilock_options_set_url(o, "redis://h/?fsync=always"),
                     HILOCK_EINVAL);
    assert_non_null(strstr(hilock_last_error(), "fsync"));
    assert_int_equal(hilock_options_set_url(o, "redis://h/?fsync=1&fsync=0"),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_wait_fsync(NULL, true),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_wait_fsync(NULL), -1);
    hilock_options_free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_option),
        cmocka_unit_test(test_no_append_only_file),
        cmocka_unit_test(test_appendfsync_no),
        cmocka_unit_test(test_waitaof_unknown),
        cmocka_unit_test(test_config_denied),
        cmocka_unit_test(test_replica_not_refused),
        cmocka_unit_test(test_cli_exits_unavailable),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
