/* `hilock demo --cluster`: the demo on a Redis Cluster, on a private one
 * it starts itself and on one a URL names, with the stock demo's
 * segments spread over the three masters and every deduction accounted
 * for; and a refusal when the URL names a server that is no cluster. */
/* ctest-timeout: 180 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/transport/keyslot.h"
#include "hilock/hilock.h"
#include "support/fixture.h"

#ifndef HILOCK_TOOL_PATH
#error "HILOCK_TOOL_PATH must name the hilock executable"
#endif

#define OUT_CAP 65536
#define MASTERS 3
#define SEGMENTS 16

static hl_redis_cluster *cluster;
static char out[OUT_CAP];

static int setup(void **state)
{
    (void)state;
    /* The demo must reach only the servers the test names. */
    unsetenv("HILOCK_REDIS");
    cluster = hl_fixture_cluster();
    return cluster ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_cluster_stop(cluster);
    return 0;
}

/* The demo runs for about ten seconds whatever the test runs under;
 * valgrind only slows the test's side, which waits. */
static int demo_timeout_ms(void)
{
    return getenv("HILOCK_TEST_UNDER_VALGRIND") ? 300000 : 90000;
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

typedef struct placement {
    int masters;
    char addr[MASTERS + 1][64];
    int segments[MASTERS + 1];
} placement;

/* The "S=16 master ADDR (N slots): K segments" lines of the output. */
static void read_placement(const char *text, placement *pl)
{
    const char *tag = "S=16 master ";
    memset(pl, 0, sizeof *pl);
    for (const char *p = strstr(text, tag); p; p = strstr(p + 1, tag)) {
        char addr[64];
        int slots = 0, segs = -1;
        assert_int_equal(sscanf(p + strlen(tag),
                                "%63s (%d slots): %d segment", addr, &slots,
                                &segs),
                         3);
        assert_true(pl->masters < MASTERS + 1);
        snprintf(pl->addr[pl->masters], sizeof pl->addr[0], "%s", addr);
        pl->segments[pl->masters++] = segs;
    }
}

/* Every segment line names one of the masters of the placement. */
static void assert_segments_on(const char *text, const placement *pl)
{
    const char *tag = "S=16 segment ";
    int seen = 0;
    for (const char *p = strstr(text, tag); p; p = strstr(p + 1, tag)) {
        const char *m = strstr(p, "on master ");
        assert_non_null(m);
        char addr[64];
        assert_int_equal(sscanf(m + strlen("on master "), "%63s", addr), 1);
        bool known = false;
        for (int i = 0; i < pl->masters; i++)
            known = known || strcmp(pl->addr[i], addr) == 0;
        if (!known)
            fail_msg("segment line names unknown master %s", addr);
        seen++;
    }
    assert_int_equal(seen, SEGMENTS);
}

static void assert_demo_succeeded(int rc)
{
    if (rc != 0)
        hl_fail_run("demo", rc, out);
    assert_int_equal(count_of(out, ": consistent"), 2);
    assert_null(strstr(out, "MISMATCH"));
    assert_non_null(strstr(out, "cluster: 3 masters"));
}

static void test_demo_starts_its_own_cluster(void **state)
{
    const char *argv[] = { HILOCK_TOOL_PATH, "demo", "--cluster", NULL };
    placement pl;

    (void)state;
    assert_demo_succeeded(hl_run(argv, out, sizeof out, demo_timeout_ms()));
    assert_non_null(strstr(out, "starting a private Redis Cluster of 3 "
                                "masters"));
    assert_non_null(strstr(out, "private cluster stopped"));
    read_placement(out, &pl);
    assert_int_equal(pl.masters, MASTERS);
    int total = 0;
    for (int i = 0; i < MASTERS; i++) {
        for (int j = 0; j < i; j++)
            assert_string_not_equal(pl.addr[i], pl.addr[j]);
        if (pl.segments[i] < 1)
            fail_msg("master %s has no segment:\n%s", pl.addr[i], out);
        total += pl.segments[i];
    }
    assert_int_equal(total, SEGMENTS);
    assert_segments_on(out, &pl);
}

static void test_demo_uses_the_cluster_of_the_url(void **state)
{
    const char *argv[] = { HILOCK_TOOL_PATH, "--redis",
                           hl_redis_cluster_url(cluster), "demo",
                           "--cluster", NULL };
    placement pl;

    (void)state;
    assert_demo_succeeded(hl_run(argv, out, sizeof out, demo_timeout_ms()));
    assert_null(strstr(out, "starting a private"));
    read_placement(out, &pl);
    assert_int_equal(pl.masters, MASTERS);
    /* The masters it shows are the cluster's: the first three nodes, as
     * created, none having failed over. */
    for (int i = 0; i < MASTERS; i++) {
        char addr[64];
        snprintf(addr, sizeof addr, "127.0.0.1:%d",
                 hl_redis_server_port(hl_redis_cluster_node(cluster,
                                                            (size_t)i)));
        int found = 0;
        for (int j = 0; j < pl.masters; j++)
            found += strcmp(pl.addr[j], addr) == 0;
        if (found != 1)
            fail_msg("master %s not shown once:\n%s", addr, out);
    }
    int total = 0;
    for (int i = 0; i < MASTERS; i++)
        total += pl.segments[i];
    assert_int_equal(total, SEGMENTS);
    assert_segments_on(out, &pl);
}

static void test_demo_refuses_a_plain_server(void **state)
{
    hl_redis_server *plain = hl_fixture_plain();
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(plain));
    const char *argv[] = { HILOCK_TOOL_PATH, "--redis", url, "demo",
                           "--cluster", NULL };

    (void)state;
    int rc = hl_run(argv, out, sizeof out, demo_timeout_ms());
    hl_redis_server_stop(plain);
    if (rc != 69)
        fail_msg("demo exited %d, not 69:\n%s", rc, out);
    assert_non_null(strstr(out, "not a Redis Cluster"));
    assert_null(strstr(out, "contend for"));
}

/* A name whose hash tag is empty ("{}x") cannot be placed with the keys
 * beside it on a cluster: a usage error (64) for run, status and unlock,
 * never an internal one. */
static void test_a_name_a_cluster_cannot_place_is_a_usage_error(void **state)
{
    (void)state;
    static const char *const cmds[][4] = {
        {"run", "{}x", "--", "true"},
        {"status", "{}x", NULL, NULL},
        {"unlock", "--force", "{}x", NULL},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        const char *argv[8] = {HILOCK_TOOL_PATH, "--redis",
                               hl_redis_cluster_url(cluster)};
        int n = 3;
        for (int k = 0; k < 4 && cmds[i][k] != NULL; k++)
            argv[n++] = cmds[i][k];
        argv[n] = NULL;
        int rc = hl_run(argv, out, sizeof out, hl_widen(30000));
        if (rc != 64)
            fail_msg("%s {}x on a cluster exited %d, not 64:\n%s",
                     cmds[i][0], rc, out);
    }
}

/* status on a cluster names the process behind a hold: the holder's
 * card lives in a slot of its own, on whichever master has it, and is
 * read there. */
static void test_status_names_the_holder_on_a_cluster(void **state)
{
    (void)state;
    hilock_options *o;
    hilock_client *c;
    hilock_lock *l;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, hl_redis_cluster_url(cluster)),
                     HILOCK_OK);
    assert_int_equal(hilock_options_set_description(o, "cluster holder"),
                     HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    assert_int_equal(hilock_lock_create(&l, c, "held-on-cluster"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_acquire(l), HILOCK_OK);
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis",
                          hl_redis_cluster_url(cluster), "status",
                          "held-on-cluster", NULL};
    char want[160];
    snprintf(want, sizeof want, "\"pid\":%ld,", (long)getpid());
    /* The card is written once the client knows where its slot lives,
     * which it learns while it connects; a refresh comes 20 s later. */
    int64_t until = hl_now_ms() + hl_widen(10000);
    int rc;
    do {
        rc = hl_run(argv, out, sizeof out, hl_widen(30000));
    } while (rc == 0 && strstr(out, "\"description\":\"cluster holder\"") ==
                            NULL &&
             hl_now_ms() < until && (hl_sleep_ms(50), true));
    if (rc != 0 || strstr(out, want) == NULL ||
        strstr(out, "\"description\":\"cluster holder\"") == NULL)
        fail_msg("status exited %d without the holder's card:\n%s", rc, out);
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

/* ls on a cluster walks every master: locks whose names hash to each of
 * them are all listed, once. */
static void test_ls_walks_every_master(void **state)
{
    (void)state;
    enum { N = 12 };
    hilock_options *o;
    hilock_client *c;
    hilock_lock *l[N];
    hl_redis_server *seen[N];
    int masters = 0;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, hl_redis_cluster_url(cluster)),
                     HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "ls-spread-%d", i);
        assert_int_equal(hilock_lock_create(&l[i], c, name),
                         HILOCK_OK);
        assert_int_equal(hilock_lock_acquire(l[i]), HILOCK_OK);
        hl_redis_server *m = hl_redis_cluster_master_of(
            cluster, (int)hl_keyslot(name, strlen(name)));
        bool known = false;
        for (int k = 0; k < masters; k++)
            known |= seen[k] == m;
        if (!known)
            seen[masters++] = m;
    }
    /* The names lie on every master (the slots of these names do). */
    assert_int_equal(masters, MASTERS);
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis",
                          hl_redis_cluster_url(cluster), "ls", "--json",
                          "ls-spread-*", NULL};
    int rc = hl_run(argv, out, sizeof out, hl_widen(30000));
    if (rc != 0)
        hl_fail_run("ls", rc, out);
    for (int i = 0; i < N; i++) {
        char want[64];
        snprintf(want, sizeof want, "{\"name\":\"ls-spread-%d\",", i);
        if (count_of(out, want) != 1)
            fail_msg("ls-spread-%d listed %d times in:\n%s", i,
                     count_of(out, want), out);
    }
    assert_int_equal(count_of(out, "\"locked\":true"), N);
    /* top finds them as ls does, each with its holder's process. */
    const char *top[] = {HILOCK_TOOL_PATH, "--redis",
                         hl_redis_cluster_url(cluster), "top", "--batch",
                         "-n", "1", "ls-spread-*", NULL};
    rc = hl_run(top, out, sizeof out, hl_widen(30000));
    if (rc != 0)
        hl_fail_run("top", rc, out);
    assert_int_equal(count_of(out, "\nls-spread-"), N);
    char holder[64];
    snprintf(holder, sizeof holder, " %s[%ld]@", program_invocation_short_name,
             (long)getpid());
    assert_int_equal(count_of(out, holder), N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(hilock_lock_release(l[i]), HILOCK_OK);
        hilock_lock_destroy(l[i]);
    }
    hilock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demo_starts_its_own_cluster),
        cmocka_unit_test(test_demo_uses_the_cluster_of_the_url),
        cmocka_unit_test(test_demo_refuses_a_plain_server),
        cmocka_unit_test(test_a_name_a_cluster_cannot_place_is_a_usage_error),
        cmocka_unit_test(test_status_names_the_holder_on_a_cluster),
        cmocka_unit_test(test_ls_walks_every_master),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
