/* The hilock command through Redis Sentinel: run, status, unlock and the
 * demo reach the master the sentinels name; status shows that master, its replicas
 * and the acknowledgement policy; the sentinels' configuration errors
 * come out clearly; and `hilock demo --replicas` survives a failover, on
 * a private group and on the group of a URL.  One master, two replicas
 * and three sentinels for the file; the failover case comes last. */
/* ctest-timeout: 240 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"

#ifndef HILOCK_TOOL_PATH
#error "HILOCK_TOOL_PATH must name the hilock executable"
#endif

#define OUT_CAP 65536

static hl_redis_replicated *group;
static const char *url;
static char out[OUT_CAP];
static char reply[4096];

static int setup(void **state)
{
    (void)state;
    unsetenv("HILOCK_REDIS");
    unsetenv("HILOCK_FENCE");
    group = hl_fixture_replicated();
    if (group == NULL)
        return -1;
    url = hl_redis_replicated_sentinel_url(group);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_replicated_stop(group);
    return 0;
}

/* The demos run for seconds whatever the test runs under; valgrind only
 * slows the test's side, which waits. */
static int tool_timeout_ms(void)
{
    return getenv("HILOCK_TEST_UNDER_VALGRIND") ? 300000 : 90000;
}

static void assert_has(const char *text, const char *needle)
{
    if (strstr(text, needle) == NULL) {
        /* In full: cmocka cuts its messages short. */
        fprintf(stderr, "expected \"%s\" in:\n%s\n", needle, text);
        fail_msg("expected \"%s\" (output above)", needle);
    }
}

static const char *master_addr(char *buf, size_t cap)
{
    hl_redis_server *m = hl_redis_replicated_master(group);
    assert_non_null(m);
    snprintf(buf, cap, "127.0.0.1:%d", hl_redis_server_port(m));
    return buf;
}

static hilock_client *sentinel_client(void)
{
    hilock_options *o = NULL;
    hilock_client *c = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    int rc = hilock_client_create(&c, o);
    hilock_options_free(o);
    if (rc != HILOCK_OK)
        fail_msg("client: %s: %s", hilock_errname(rc), hilock_last_error());
    return c;
}

static bool master_has_key(const char *key)
{
    hl_redis_server *m = hl_redis_replicated_master(group);
    assert_non_null(m);
    assert_int_equal(hl_redis_server_cmd(m, reply, sizeof reply, "EXISTS",
                                         key, (char *)NULL),
                     ':');
    return strcmp(reply, ":1\r\n") == 0;
}

/* Whether the master counts both replicas online: a replica the fixture
 * saw linked may still be waiting for its first sync on the master's
 * side, or be syncing again on a busy machine. */
static bool both_replicas_online(void *arg)
{
    (void)arg;
    hl_redis_server *m = hl_redis_replicated_master(group);
    char info[4096];
    if (m == NULL || hl_redis_server_cmd(m, info, sizeof info, "INFO",
                                         "replication", (char *)NULL) != '$')
        return false;
    int online = 0;
    for (const char *p = info; (p = strstr(p, "state=online")) != NULL; p++)
        online++;
    return online == 2;
}

/* A lock held through the sentinels shows as locked, with the master the
 * command reached (the one the fixture calls master), both replicas the
 * master reports, the master's name, and the policy in force. */
static void test_status_shows_master_replicas_and_policy(void **state)
{
    (void)state;
    assert_true(hl_wait_until(both_replicas_online, NULL, 60000));
    hilock_client *c = sentinel_client();
    hilock_lock *l = NULL;
    assert_int_equal(hilock_lock_create(&l, c, "st-sent"), HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, 0, 60000), HILOCK_OK);

    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", url, "status",
                          "st-sent", NULL};
    int rc = hl_run(argv, out, sizeof out, tool_timeout_ms());
    if (rc != 0)
        hl_fail_run("status", rc, out);
    assert_has(out, "{\"name\":\"st-sent\",\"kind\":\"reentrant\","
                    "\"locked\":true");
    char want[128], addr[64];
    snprintf(want, sizeof want, ",\"replication\":{\"master\":\"%s\"",
             master_addr(addr, sizeof addr));
    assert_has(out, want);
    hl_redis_server *m = hl_redis_replicated_master(group);
    int replicas = 0;
    for (size_t i = 0; i < hl_redis_replicated_nodes(group); i++) {
        hl_redis_server *n = hl_redis_replicated_node(group, i);
        if (n == m)
            continue;
        snprintf(want, sizeof want,
                 "{\"addr\":\"127.0.0.1:%d\",\"state\":\"online\"}",
                 hl_redis_server_port(n));
        assert_has(out, want);
        replicas++;
    }
    assert_int_equal(replicas, 2);
    assert_has(out, "\"sentinel_master\":\"mymaster\",\"ack\":\"majority\","
                    "\"ack_timeout_ms\":1000}}\n");

    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

/* The master named directly (no Sentinel) reports its replicas too; a
 * replica named directly says it is one instead of passing for the
 * master. */
static void test_status_on_nodes_named_directly(void **state)
{
    (void)state;
    char addr[64], direct[96];
    snprintf(direct, sizeof direct, "redis://%s",
             master_addr(addr, sizeof addr));
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", direct, "status",
                          "st-free", NULL};
    int rc = hl_run(argv, out, sizeof out, tool_timeout_ms());
    if (rc != 0)
        hl_fail_run("status", rc, out);
    assert_has(out, "\"locked\":false");
    char want[128];
    snprintf(want, sizeof want, "\"replication\":{\"master\":\"%s\","
             "\"replicas\":[{", addr);
    assert_has(out, want);
    assert_has(out, "\"sentinel_master\":null,\"ack\":\"majority\"");

    hl_redis_server *m = hl_redis_replicated_master(group), *r = NULL;
    for (size_t i = 0; i < hl_redis_replicated_nodes(group) && !r; i++)
        if (hl_redis_replicated_node(group, i) != m)
            r = hl_redis_replicated_node(group, i);
    snprintf(direct, sizeof direct, "redis://127.0.0.1:%d",
             hl_redis_server_port(r));
    rc = hl_run(argv, out, sizeof out, tool_timeout_ms());
    if (rc != 0)
        hl_fail_run("status on the replica", rc, out);
    assert_has(out, "\"role\":\"slave\",\"replicas\":[]");
}

/* run takes the lock on the master the sentinels name: a status asked
 * from inside CMD sees it held, the fencing token reaches CMD, CMD's
 * exit status comes back, and the lock is gone afterwards. */
static void test_run_holds_on_the_master(void **state)
{
    (void)state;
    char script[1024];
    snprintf(script, sizeof script,
             "echo fence=$HILOCK_FENCE; '%s' --redis '%s' status run-sent; "
             "'%s' --redis '%s' top -b -n 1 'run-*'; exit 3",
             HILOCK_TOOL_PATH, url, HILOCK_TOOL_PATH, url);
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", url, "run",
                          "--fence-env", "run-sent", "--", "sh", "-c",
                          script, NULL};
    int rc = hl_run(argv, out, sizeof out, tool_timeout_ms());
    if (rc != 3)
        fail_msg("run exited %d, not 3:\n%s", rc, out);
    assert_has(out, "fence=");
    assert_null(strstr(out, "fence=\n"));
    assert_has(out, "{\"name\":\"run-sent\",\"kind\":\"reentrant\","
                    "\"locked\":true");
    /* top sees the hold there too, with the process that holds it. */
    assert_has(out, "\nrun-sent                     reentrant  hilock[");
    assert_false(master_has_key("run-sent"));
}

/* unlock --force deletes a lock held by someone else, on the master. */
static void test_unlock_through_sentinel(void **state)
{
    (void)state;
    hilock_client *c = sentinel_client();
    hilock_lock *l = NULL;
    assert_int_equal(hilock_lock_create(&l, c, "un-sent"), HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, 0, 60000), HILOCK_OK);
    assert_true(master_has_key("un-sent"));
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", url, "unlock",
                          "--force", "un-sent", NULL};
    int rc = hl_run(argv, out, sizeof out, tool_timeout_ms());
    if (rc != 0)
        hl_fail_run("unlock", rc, out);
    assert_string_equal(out, "deleted\n");
    assert_false(master_has_key("un-sent"));
    assert_int_equal(hilock_lock_release(l), HILOCK_ELEASELOST);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

/* A policy in the URL is what status reports.  Until the library
 * applies policies, it refuses them, and the command says so. */
static void test_status_reports_the_urls_policy(void **state)
{
    (void)state;
    char with_ack[1024];
    const char *hash = strrchr(url, '#');
    assert_non_null(hash);
    snprintf(with_ack, sizeof with_ack, "%.*s?replicas=all&ack_timeout=250%s",
             (int)(hash - url), url, hash);
    hilock_options *o = NULL;
    hilock_client *c = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, with_ack), HILOCK_OK);
    assert_int_equal(hilock_options_replica_ack(o), HILOCK_ACK_ALL);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    hilock_client_destroy(c);

    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", with_ack, "status",
                          "ack-sent", NULL};
    int rc = hl_run(argv, out, sizeof out, tool_timeout_ms());
    if (rc != 0)
        hl_fail_run("status", rc, out);
    assert_has(out, "\"ack\":\"all\",\"ack_timeout_ms\":250}}\n");
}

/* Configuration errors of the sentinels, each said with its cause. */
static void test_sentinel_errors(void **state)
{
    (void)state;
    char wrong[1024];
    const char *hash = strrchr(url, '#');
    snprintf(wrong, sizeof wrong, "%.*s#nobody", (int)(hash - url), url);
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", wrong, "status",
                          "x", NULL};
    int rc = hl_run(argv, out, sizeof out, tool_timeout_ms());
    assert_int_equal(rc, 64);
    assert_has(out, "cannot reach master 'nobody' through the sentinels");
    assert_has(out, "knows a master named 'nobody'");

    /* Port 1 on loopback: nobody listens there. */
    const char *down[] = {HILOCK_TOOL_PATH, "--redis",
                          "redis-sentinel://127.0.0.1:1#mymaster", "unlock",
                          "--force", "x", NULL};
    rc = hl_run(down, out, sizeof out, tool_timeout_ms());
    assert_int_equal(rc, 69);
    assert_has(out, "no sentinel (of 1)");

    /* demo --replicas wants a group, not one server. */
    char plain[96], addr[64];
    snprintf(plain, sizeof plain, "redis://%s",
             master_addr(addr, sizeof addr));
    const char *demo[] = {HILOCK_TOOL_PATH, "--redis", plain, "demo",
                          "--replicas", NULL};
    rc = hl_run(demo, out, sizeof out, tool_timeout_ms());
    assert_int_equal(rc, 64);
    assert_has(out, "needs a redis-sentinel://");
}

/* The plain demo through the sentinels: it names the master they gave,
 * and its stock checks hold there. */
static void test_plain_demo_through_sentinel(void **state)
{
    (void)state;
    char addr[64], want[128];
    master_addr(addr, sizeof addr);
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", url, "demo", NULL};
    int rc = hl_run(argv, out, sizeof out, tool_timeout_ms());
    if (rc != 0)
        hl_fail_run("demo", rc, out);
    snprintf(want, sizeof want, "connected to master %s ('mymaster', named "
             "by the sentinels)", addr);
    assert_has(out, want);
    assert_null(strstr(out, "starting a private"));
    assert_null(strstr(out, "MISMATCH"));
    int consistent = 0;
    for (const char *p = strstr(out, ": consistent"); p;
         p = strstr(p + 1, ": consistent"))
        consistent++;
    assert_int_equal(consistent, 2);
}

/* Each worker's fate line, and the failover line naming both masters. */
static void assert_failover_told(const char *old_master)
{
    char want[128];
    snprintf(want, sizeof want, "failover: %s -> 127.0.0.1:", old_master);
    assert_has(out, want);
    /* Worker 1's hold reached both replicas before the master went down
     * and the lease outlasts the failover: it is found, not lost. */
    assert_has(out, "worker 1: fate: held on the new master");
    assert_null(strstr(out, "LOST"));
    assert_has(out, "worker 2: fate: acquired and released on the new "
                    "master");
    assert_has(out, "worker 3: fate: acquired and released on the new "
                    "master");
    assert_has(out, "is free");
}

static void test_demo_replicas_private_group(void **state)
{
    (void)state;
    const char *argv[] = {HILOCK_TOOL_PATH, "demo", "--replicas", NULL};
    int rc = hl_run(argv, out, sizeof out, tool_timeout_ms());
    if (rc != 0)
        hl_fail_run("demo", rc, out);
    assert_has(out, "starting a private master with 2 replicas and 3 "
                    "sentinels");
    assert_has(out, "kill -9 of the master");
    /* The master it killed is the one it showed first. */
    const char *before = strstr(out, "before: master ");
    assert_non_null(before);
    char old_master[64];
    assert_int_equal(sscanf(before, "before: master %63[^,]", old_master), 1);
    assert_failover_told(old_master);
    assert_has(out, "private master, replicas and sentinels stopped");
}

/* On the fixture's group (last: it moves the master). */
static void test_demo_replicas_on_the_urls_group(void **state)
{
    (void)state;
    char old_master[64];
    master_addr(old_master, sizeof old_master);
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", url, "demo",
                          "--replicas", NULL};
    int rc = hl_run(argv, out, sizeof out, tool_timeout_ms());
    if (rc != 0)
        hl_fail_run("demo", rc, out);
    assert_null(strstr(out, "starting a private"));
    assert_has(out, "SENTINEL FAILOVER mymaster");
    assert_failover_told(old_master);
    /* The group's own view agrees: a new master, elsewhere. */
    hl_redis_server *m = hl_redis_replicated_wait_master(group, NULL, 60000);
    assert_non_null(m);
    char now[64];
    snprintf(now, sizeof now, "127.0.0.1:%d", hl_redis_server_port(m));
    assert_string_not_equal(now, old_master);
    char want[128];
    snprintf(want, sizeof want, "-> %s after", now);
    assert_has(out, want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_shows_master_replicas_and_policy),
        cmocka_unit_test(test_status_on_nodes_named_directly),
        cmocka_unit_test(test_run_holds_on_the_master),
        cmocka_unit_test(test_unlock_through_sentinel),
        cmocka_unit_test(test_status_reports_the_urls_policy),
        cmocka_unit_test(test_sentinel_errors),
        cmocka_unit_test(test_plain_demo_through_sentinel),
        cmocka_unit_test(test_demo_replicas_private_group),
        cmocka_unit_test(test_demo_replicas_on_the_urls_group),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
