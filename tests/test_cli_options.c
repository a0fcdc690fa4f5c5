/* The hilock command's options as a user types them: --help on every
 * command, every option it names documented in the man page, short
 * options and durations with units, the conflict exit code, a shell
 * command with -c, and the exit statuses of a replica and of a wait on a
 * server that went away.  Against a real redis-server (and a replica of
 * it). */
/* ctest-timeout: 180 */
#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/processes.h"
#include "support/raw_reads.h"
#include "support/replicated_util.h"

#ifndef HILOCK_TOOL_PATH
#error "HILOCK_TOOL_PATH must name the hilock executable"
#endif
#ifndef HILOCK_MAN_PATH
#error "HILOCK_MAN_PATH must name docs/man/hilock.1"
#endif

#define OUT_CAP 16384
#define MAX_ARGS 24

static hl_redis_server *server;
static char url[64];

static int setup(void **state)
{
    (void)state;
    unsetenv("HILOCK_REDIS");
    server = hl_fixture_plain();
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(server));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_server_stop(server);
    return 0;
}

/* Run hilock with the arguments (NULL-terminated) and no --redis; the
 * output (stdout and stderr) in out; the exit status. */
static int tool(char *out, const char *arg0, ...)
{
    const char *argv[MAX_ARGS];
    int n = 0;
    argv[n++] = HILOCK_TOOL_PATH;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a != NULL && n < MAX_ARGS - 1;
         a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    return hl_run(argv, out, OUT_CAP, hl_widen(30000));
}

static void assert_has(const char *text, const char *needle)
{
    if (strstr(text, needle) == NULL)
        fail_msg("expected \"%s\" in:\n%s", needle, text);
}

/* The man page's text with its escapes for a minus sign undone. */
static void read_man(char *out, size_t cap)
{
    FILE *f = fopen(HILOCK_MAN_PATH, "r");
    assert_non_null(f);
    size_t n = 0;
    int c, prev = 0;
    while ((c = fgetc(f)) != EOF && n + 1 < cap) {
        if (prev == '\\' && c == '-') {
            out[n - 1] = '-';
            prev = 0;
            continue;
        }
        out[n++] = (char)c;
        prev = c;
    }
    out[n] = '\0';
    assert_true(n + 1 < cap);
    fclose(f);
}

/* Whether option opt appears in text as a word of its own. */
static bool has_option(const char *text, const char *opt)
{
    size_t n = strlen(opt);
    for (const char *p = strstr(text, opt); p != NULL;
         p = strstr(p + 1, opt)) {
        bool starts = p == text || !(isalnum((unsigned char)p[-1]) ||
                                     p[-1] == '-');
        bool ends = !(isalnum((unsigned char)p[n]) || p[n] == '-');
        if (starts && ends)
            return true;
    }
    return false;
}

/* Every option a --help text names ("-x" or "--word"), each found in the
 * man page; returns how many it checked. */
static int check_options_in_man(const char *help, const char *man,
                                const char *which)
{
    int checked = 0;
    for (const char *p = help; *p != '\0'; p++) {
        if (*p != '-' || (p > help && !isspace((unsigned char)p[-1]) &&
                          p[-1] != '[' && p[-1] != '(' && p[-1] != ','))
            continue;
        char opt[48];
        size_t n = 0;
        while ((isalnum((unsigned char)p[n]) || p[n] == '-') &&
               n + 1 < sizeof opt) {
            opt[n] = p[n];
            n++;
        }
        opt[n] = '\0';
        bool is_short = n == 2 && opt[1] != '-';
        bool is_long = n > 2 && opt[1] == '-' && opt[2] != '-';
        if (!is_short && !is_long)
            continue;
        if (!has_option(man, opt))
            fail_msg("%s names %s, which the man page does not", which,
                     opt);
        checked++;
        p += n - 1;
    }
    return checked;
}

/* --help on the command line and on each command: exit 0, a usage line,
 * and every option it names in the man page. */
static void test_every_option_of_every_help_is_in_the_man_page(void **state)
{
    (void)state;
    static char man[65536], out[OUT_CAP];
    read_man(man, sizeof man);
    static const char *const commands[] = {"run",   "status", "unlock",
                                           "latch", "demo",   "version"};
    assert_int_equal(tool(out, "--help", (char *)NULL), 0);
    assert_has(out, "usage: hilock");
    int checked = check_options_in_man(out, man, "hilock --help");
    assert_int_equal(tool(out, "-h", (char *)NULL), 0);
    assert_has(out, "usage: hilock");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        assert_int_equal(tool(out, commands[i], "--help", (char *)NULL), 0);
        char usage[64];
        snprintf(usage, sizeof usage, "usage: hilock");
        assert_has(out, usage);
        char which[64];
        snprintf(which, sizeof which, "hilock %s --help", commands[i]);
        checked += check_options_in_man(out, man, which);
        assert_has(man, commands[i]);
        assert_int_equal(tool(out, commands[i], "-h", (char *)NULL), 0);
    }
    printf("# %d options named by --help, all in the man page\n", checked);
    assert_true(checked >= 20);
    for (size_t i = 0; i < 4; i++) {
        static const char *const sections[] = {".SH ENVIRONMENT",
                                               ".SH EXIT STATUS",
                                               ".SH EXAMPLES", "HILOCK_REDIS"};
        assert_has(man, sections[i]);
    }
}

static void test_version(void **state)
{
    (void)state;
    char out[OUT_CAP];
    char want[64];
    snprintf(want, sizeof want, "hilock %s\n", hilock_version_string());
    assert_int_equal(tool(out, "--version", (char *)NULL), 0);
    assert_string_equal(out, want);
    assert_int_equal(tool(out, "-V", (char *)NULL), 0);
    assert_string_equal(out, want);
}

/* Bad durations and options are usage errors, and name the option. */
static void test_bad_values_are_usage_errors(void **state)
{
    (void)state;
    char out[OUT_CAP];
    static const char *const waits[] = {"1.5s", "10x", "s", "-1s", "1 s",
                                        "99999999999h"};
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        int rc = tool(out, "--redis", url, "run", "-w", waits[i], "u", "--",
                      "true", (char *)NULL);
        if (rc != 64)
            fail_msg("-w '%s' exited %d:\n%s", waits[i], rc, out);
        assert_has(out, "--wait");
    }
    assert_int_equal(tool(out, "--redis", url, "run", "-E", "0", "u", "--",
                          "true", (char *)NULL),
                     64);
    assert_int_equal(tool(out, "--redis", url, "run", "-E", "256", "u", "--",
                          "true", (char *)NULL),
                     64);
    assert_int_equal(tool(out, "--redis", url, "run", "-c", "true", "u", "--",
                          "true", (char *)NULL),
                     64);
    assert_has(out, "--command");
    assert_int_equal(tool(out, "--redis", url, "run", "-n", "-w", "1s", "u",
                          "--", "true", (char *)NULL),
                     64);
    assert_int_equal(tool(out, "--redis", url, "latch", "wait", "-t", "5q",
                          "u", (char *)NULL),
                     64);
    assert_int_equal(tool(out, "--watchdog", "25h", "status", "u",
                          (char *)NULL),
                     64);
    assert_int_equal(tool(out, "--redis", url, "unlock", "-f", "-k", "nope",
                          "u", (char *)NULL),
                     64);
    /* A URL that cannot be read, before any connection is made: every
     * command says so and exits 64, none crashes on what it was never
     * given. */
    static const char *const bad_urls[] = {
        "vk://127.0.0.1:1", "redis://127.0.0.1:1/?redisson_pubsub=auto",
        "redis://127.0.0.1:1/?fsync=maybe"};
    for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++) {
        const char *const cmds[][4] = {{"run", "u", "--", "true"},
                                       {"status", "u", NULL, NULL},
                                       {"unlock", "--force", "u", NULL},
                                       {"ls", NULL, NULL, NULL},
                                       {"latch", "count", "u", NULL}};
        for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
            int rc = tool(out, "--redis", bad_urls[i], cmds[k][0],
                          cmds[k][1], cmds[k][2], cmds[k][3],
                          (char *)NULL);
            if (rc != 64 || strstr(out, "bad Redis URL") == NULL)
                fail_msg("%s with %s exited %d:\n%s", cmds[k][0],
                         bad_urls[i], rc, out);
        }
    }
    /* Nothing was taken by any of them. */
    assert_int_equal(hl_raw_exists(server, "u"), 0);
}

/* Short options and durations at work: -n and -E on a held lock, -w
 * with a unit, -c through the shell, and the conflict message. */
static void test_short_options_and_durations(void **state)
{
    (void)state;
    char out[OUT_CAP];
    hilock_client *c = hl_new_client(server, NULL);
    hilock_lock *l;
    assert_status(hilock_lock_create(&l, c, "opts"), HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, 60000), HILOCK_OK);
    assert_int_equal(tool(out, "--redis", url, "run", "-n", "opts", "--",
                          "echo", "ran", (char *)NULL),
                     75);
    assert_has(out, "held by another owner");
    assert_true(strstr(out, "ran") == NULL);
    assert_int_equal(tool(out, "--redis", url, "run", "-w", "300ms", "-E",
                          "3", "opts", "-c", "echo ran", (char *)NULL),
                     3);
    assert_int_equal(tool(out, "--redis", url, "run", "--wait=0s",
                          "--conflict-exit-code=9", "opts", "--", "true",
                          (char *)NULL),
                     9);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    assert_int_equal(tool(out, "--redis", url, "--watchdog", "30s", "run",
                          "-w10s", "-k", "fair", "opts", "-c",
                          "echo \"in $0\"; exit 7", (char *)NULL),
                     7);
    assert_has(out, "in /bin/sh");
    assert_int_equal(tool(out, "--redis", url, "run", "-l", "2m", "-n",
                          "opts", "--", "true", (char *)NULL),
                     0);
    assert_int_equal(tool(out, "--redis", url, "status", "-k", "fair",
                          "opts", (char *)NULL),
                     0);
    assert_has(out, "\"locked\":false");
    hilock_lock_destroy(l);
    hl_free_client(c);
}

/* A URL naming a replica: every write is refused READONLY, which is no
 * fault of the lock's data (65) but a server that cannot serve (69), and
 * the message says what to give instead. */
static void test_a_replica_exits_unavailable(void **state)
{
    (void)state;
    char out[OUT_CAP], reply[256], port[16];
    hl_redis_server *replica = hl_fixture_plain();
    snprintf(port, sizeof port, "%d", hl_redis_server_port(server));
    assert_int_equal(hl_raw_cmd(replica, reply, sizeof reply, "REPLICAOF",
                                "127.0.0.1", port, (char *)NULL),
                     '+');
    char rurl[64];
    snprintf(rurl, sizeof rurl, "redis://127.0.0.1:%d",
             hl_redis_server_port(replica));
    int rc = tool(out, "--redis", rurl, "run", "-w", "2s", "r", "--", "true",
                  (char *)NULL);
    if (rc != 69)
        hl_fail_run("run against a replica", rc, out);
    assert_has(out, "READONLY");
    assert_has(out, "replica");
    assert_has(out, "redis-sentinel://");
    /* --missing-ok: past the check for a latch, to the write. */
    assert_int_equal(tool(out, "--redis", rurl, "latch", "down",
                          "--missing-ok", "r", (char *)NULL),
                     69);
    assert_int_equal(tool(out, "--redis", rurl, "unlock", "--force", "r",
                          (char *)NULL),
                     69);

    /* The library says it with a code of its own, for a lock's script,
     * a semaphore's and a raw write alike, and reads still work. */
    hilock_client *c = hl_new_client(replica, NULL);
    hilock_lock *l = hl_new_lock(c, "r");
    assert_status(hilock_lock_try_acquire(l, 0, 1000), HILOCK_EREADONLY);
    assert_non_null(strstr(hilock_last_error(), "replica"));
    assert_non_null(strstr(hilock_last_error(), "READONLY"));
    hilock_semaphore *s = NULL;
    assert_status(hilock_semaphore_create(&s, c, "r-sem"), HILOCK_OK);
    assert_status(hilock_semaphore_set(s, 1), HILOCK_EREADONLY);
    const char *set[] = {"SET", "r-raw", "1"};
    hilock_reply *r = NULL;
    assert_status(hilock_client_command(c, 3, set, NULL, &r),
                  HILOCK_EREADONLY);
    hilock_reply_free(r);
    bool locked = true;
    assert_status(hilock_lock_is_locked(l, &locked), HILOCK_OK);
    assert_false(locked);
    assert_string_equal(hilock_errname(HILOCK_EREADONLY), "EREADONLY");
    hilock_semaphore_destroy(s);
    hl_free_lock(l);
    hl_free_client(c);
    hl_redis_server_stop(replica);
}

/* A master with a replica whose WAIT is gone (renamed away, as a
 * platform that forbids it does): the default policy cannot be kept, so
 * the client's creation and every command fail at once with a code of
 * their own and the option that accepts less; replicas=none works, and
 * so does the default once the master has no replica to wait for. */
static void test_wait_refused_fails_at_once(void **state)
{
    (void)state;
    char out[OUT_CAP], murl[96], none_url[128], port[16];
    hl_redis_server *master =
        hl_fixture_plain_with(NULL, "rename-command WAIT \"\"");
    hl_redis_server *replica = hl_fixture_plain();
    hl_replica_of(replica, master);
    hl_online_probe online = {master, 1};
    if (!hl_wait_until(hl_online_is, &online, hl_widen(10000)))
        fail_msg("the replica never came online");
    snprintf(port, sizeof port, "%d", hl_redis_server_port(master));
    snprintf(murl, sizeof murl, "redis://127.0.0.1:%s", port);
    snprintf(none_url, sizeof none_url, "%s?replicas=none", murl);

    hilock_options *o = NULL;
    hilock_client *c = NULL;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, murl), HILOCK_OK);
    assert_status(hilock_client_create(&c, o), HILOCK_EUNSUPPORTED);
    assert_null(c);
    assert_non_null(strstr(hilock_last_error(), "WAIT"));
    assert_non_null(strstr(hilock_last_error(), "replicas=none"));
    assert_non_null(strstr(hilock_last_error(), port));
    int rc = tool(out, "--redis", murl, "run", "-w", "2s", "w", "--", "true",
                  (char *)NULL);
    if (rc != 69)
        hl_fail_run("run with WAIT refused", rc, out);
    assert_has(out, "replicas=none");

    assert_status(hilock_options_set_url(o, none_url), HILOCK_OK);
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    hilock_lock *l = hl_new_lock(c, "w");
    assert_status(hilock_lock_try_acquire(l, 0, 5000), HILOCK_OK);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    hl_free_lock(l);
    hilock_client_destroy(c);
    assert_int_equal(tool(out, "--redis", none_url, "run", "w", "--", "true",
                          (char *)NULL),
                     0);

    /* No replica left: nothing to wait for, nothing refused. */
    hl_replica_of(replica, NULL);
    online.want = 0;
    if (!hl_wait_until(hl_online_is, &online, hl_widen(10000)))
        fail_msg("the replica never left");
    assert_status(hilock_options_set_url(o, murl), HILOCK_OK);
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    l = hl_new_lock(c, "w");
    assert_status(hilock_lock_try_acquire(l, 0, 5000), HILOCK_OK);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    hl_free_lock(l);
    hilock_client_destroy(c);
    hilock_options_free(o);
    hl_redis_server_stop(replica);
    hl_redis_server_stop(master);
}

/* A wait on a server that stops answering says so within seconds, and
 * again when the server is back; then the lock is taken. */
static void test_a_wait_on_a_lost_server_says_so(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(server, NULL);
    hilock_lock *l;
    assert_status(hilock_lock_create(&l, c, "gone"), HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, 60000), HILOCK_OK);
    char path[] = "/tmp/hilock-cli-options-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", url, "run", "-w",
                          "60s", "gone", "--", "echo", "ran", NULL};
    pid_t pid = hl_spawn_logged(argv, path);
    /* In line before the server goes, so the wait is for the lock. */
    int64_t until = hl_now_ms() + hl_widen(10000);
    while (hl_raw_int(server, "LLEN", "hilock_lock_line:{gone}",
                      (char *)NULL) != 1)
        assert_true(hl_now_ms() < until), hl_sleep_ms(5);
    hl_fixture_kill9(server);
    hl_expect_file_has(path, "out of reach", hl_widen(15000));
    hl_fixture_restart(server);
    hl_expect_file_has(path, "reachable again", hl_widen(20000));
    /* The holder's key died with the server's memory: the lock is free. */
    int rc = hl_wait_exit(pid, hl_widen(30000));
    char out[OUT_CAP];
    hl_file_read(path, out, sizeof out);
    if (rc != 0)
        hl_fail_run("the wait", rc, out);
    assert_has(out, "ran");
    unlink(path);
    hilock_lock_destroy(l);
    hl_free_client(c);
}

/* --verbose prints the client's events as they happen. */
static void test_verbose_prints_events(void **state)
{
    (void)state;
    char out[OUT_CAP], want[96];
    assert_int_equal(tool(out, "-v", "--redis", url, "run", "-n", "verbose",
                          "--", "true", (char *)NULL),
                     0);
    snprintf(want, sizeof want, "hilock: [connected] 127.0.0.1:%d\n",
             hl_redis_server_port(server));
    assert_has(out, want);
    assert_int_equal(tool(out, "--redis", url, "run", "-n", "verbose", "--",
                          "true", (char *)NULL),
                     0);
    assert_true(strstr(out, "[connected]") == NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_option_of_every_help_is_in_the_man_page),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_bad_values_are_usage_errors),
        cmocka_unit_test(test_short_options_and_durations),
        cmocka_unit_test(test_a_replica_exits_unavailable),
        cmocka_unit_test(test_wait_refused_fails_at_once),
        cmocka_unit_test(test_a_wait_on_a_lost_server_says_so),
        cmocka_unit_test(test_verbose_prints_events),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
