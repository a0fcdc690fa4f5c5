/* The hilock command as scripts use it: exit statuses, signals passed on
 * to the command, mutual exclusion between two `hilock run`, fencing
 * tokens in the environment, the JSON of `hilock status` and
 * `hilock unlock --force`, and `run` and `status` over RedLock on five
 * masters.  Every run goes against a real redis-server;
 * the test takes locks of its own through the library to play the other
 * party. */
/* ctest-timeout: 120 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/processes.h"
#include "support/redisson_peer.h"

#ifndef HILOCK_TOOL_PATH
#error "HILOCK_TOOL_PATH must name the hilock executable"
#endif

#define OUT_CAP 16384
#define MAX_ARGS 32
/* Room for the temporary directory, a file in it, and a script naming a
 * few such files; short enough for the compiler to see nothing is cut. */
#define DIR_CAP 256
#define PATH_CAP 512
#define SCRIPT_CAP 2048

extern char **environ;

/* ---- helpers ---------------------------------------------------------- */

static bool under_valgrind(void)
{
    return getenv("HILOCK_TEST_UNDER_VALGRIND") != NULL;
}

/* Valgrind slows the test's own library calls, not the tool; bounds still
 * widen so that the test's side never becomes the bottleneck. */
static int widen(int ms)
{
    return under_valgrind() ? ms * 10 : ms;
}

typedef struct fx {
    hl_redis_server *server;
    char url[64];
    char dir[DIR_CAP];
} fx;

static fx *F(void **state)
{
    return *state;
}

static int setup(void **state)
{
    static fx f;
    char tmpl[DIR_CAP];
    const char *tmp = getenv("TMPDIR");

    memset(&f, 0, sizeof f);
    /* The tool must talk to our server only, and a fence from the
     * environment of whoever runs the tests must not leak in. */
    unsetenv("HILOCK_REDIS");
    unsetenv("HILOCK_FENCE");
    f.server = hl_fixture_plain();
    snprintf(f.url, sizeof f.url, "redis://127.0.0.1:%d",
             hl_redis_server_port(f.server));
    if (tmp == NULL || *tmp == '\0' || strlen(tmp) > DIR_CAP - 32)
        tmp = "/tmp";
    snprintf(tmpl, sizeof tmpl, "%s/hilock-cli-XXXXXX", tmp);
    if (mkdtemp(tmpl) == NULL)
        fail_msg("mkdtemp: %s", strerror(errno));
    snprintf(f.dir, sizeof f.dir, "%s", tmpl);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = F(state);
    const char *rm[] = { "rm", "-rf", f->dir, NULL };

    hl_redis_server_stop(f->server);
    f->server = NULL;
    hl_run(rm, NULL, 0, 10000);
    return 0;
}

/* dir/leaf into out. */
static void path_in(const fx *f, char *out, size_t cap, const char *leaf)
{
    snprintf(out, cap, "%s/%s", f->dir, leaf);
}

static bool file_exists(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0;
}

/* argv for the tool: the path, --redis URL (unless url is NULL), then the
 * NULL-terminated list. */
static void tool_argv(const char **argv, const char *url, va_list ap)
{
    int n = 0;
    const char *a;

    argv[n++] = HILOCK_TOOL_PATH;
    if (url != NULL) {
        argv[n++] = "--redis";
        argv[n++] = url;
    }
    while ((a = va_arg(ap, const char *)) != NULL) {
        assert_true(n < MAX_ARGS - 1);
        argv[n++] = a;
    }
    argv[n] = NULL;
}

/* Run the tool against url to its end; its output (stdout and stderr) in
 * out.  Returns its exit status, 128 + signal, or -1 after timeout_ms. */
static int tool_at(const char *url, char *out, int timeout_ms, ...)
{
    const char *argv[MAX_ARGS];
    va_list ap;

    va_start(ap, timeout_ms);
    tool_argv(argv, url, ap);
    va_end(ap);
    return hl_run(argv, out, OUT_CAP, timeout_ms);
}

#define TOOL(f, out, ...) tool_at((f)->url, (out), widen(20000), __VA_ARGS__, \
                                  (char *)NULL)

/* Start argv in the background with stdout and stderr going to out_path
 * and the signals of dfl reset to their default dispositions. */
static pid_t spawn_argv(const char *const *argv, const char *out_path,
                        const sigset_t *dfl)
{
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    sigset_t none;
    pid_t pid;
    int rc;

    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out_path,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    posix_spawnattr_init(&attr);
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, dfl);
    posix_spawnattr_setflags(&attr,
                             POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    rc = posix_spawn(&pid, argv[0], &actions, &attr, (char *const *)argv,
                     environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0)
        fail_msg("spawn %s: %s", argv[0], strerror(rc));
    return pid;
}

/* The tool in the background, with the signals it passes on (and PIPE)
 * at their defaults, as a shell would start it. */
static pid_t spawn_tool(const fx *f, const char *out_path, ...)
{
    const char *argv[MAX_ARGS];
    sigset_t dfl;
    va_list ap;

    va_start(ap, out_path);
    tool_argv(argv, f->url, ap);
    va_end(ap);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGTERM);
    sigaddset(&dfl, SIGINT);
    sigaddset(&dfl, SIGHUP);
    sigaddset(&dfl, SIGPIPE);
    return spawn_argv(argv, out_path, &dfl);
}

static bool still_running(pid_t pid)
{
    int ws;

    return waitpid(pid, &ws, WNOHANG) == 0;
}

static bool path_appears(void *arg)
{
    return file_exists(arg);
}

static void wait_for_file(const char *path)
{
    if (!hl_wait_until(path_appears, (void *)path, widen(10000)))
        fail_msg("%s did not appear", path);
}

typedef struct key_probe {
    hl_redis_server *server;
    const char *key;
} key_probe;

static bool key_exists(void *arg)
{
    key_probe *p = arg;
    char reply[64];

    return hl_redis_server_cmd(p->server, reply, sizeof reply, "EXISTS",
                               p->key, (char *)NULL) == ':'
           && strncmp(reply, ":1", 2) == 0;
}

typedef struct len_probe {
    hl_redis_server *server;
    const char *key;
    long long want;
} len_probe;

static bool list_has_len(void *arg)
{
    len_probe *p = arg;
    char reply[64];

    return hl_redis_server_cmd(p->server, reply, sizeof reply, "LLEN",
                               p->key, (char *)NULL) == ':'
           && atoll(reply + 1) == p->want;
}

/* Entry i of the list at key, as text. */
static void list_entry(const fx *f, const char *key, int i, char *out,
                       size_t cap)
{
    char reply[256], index[16];
    const char *body = NULL;
    int len = -1;

    snprintf(index, sizeof index, "%d", i);
    if (hl_redis_server_cmd(f->server, reply, sizeof reply, "LINDEX", key,
                            index, (char *)NULL) == '$') {
        len = atoi(reply + 1);
        body = strstr(reply, "\r\n");
    }
    if (len < 0 || body == NULL)
        fail_msg("LINDEX %s %d: %s", key, i, reply);
    else
        snprintf(out, cap, "%.*s", len, body + 2);
}

static void assert_has(const char *text, const char *needle)
{
    if (strstr(text, needle) == NULL)
        fail_msg("\"%s\" not found in:\n%s", needle, text);
}

/* A client of the test's own, playing another process. */
static hilock_client *client_for(const fx *f)
{
    hilock_options *o;
    hilock_client *c = NULL;

    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, f->url), HILOCK_OK);
    if (hilock_client_create(&c, o) != HILOCK_OK)
        fail_msg("connect: %s", hilock_last_error());
    hilock_options_free(o);
    return c;
}

static hilock_lock *hold(hilock_client *c, const char *name)
{
    hilock_lock *lock;

    assert_int_equal(hilock_lock_create(&lock, c, name),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_acquire(lock), HILOCK_OK);
    return lock;
}

/* ---- a small JSON checker ----------------------------------------------
 * Strict RFC 8259 syntax, with strings checked for raw control bytes and
 * invalid UTF-8, so that "valid JSON" means what a real parser accepts. */

static const char *js_value(const char *p, int depth);

static const char *js_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')
           || (c >= 'A' && c <= 'F');
}

/* One UTF-8 sequence starting at p; returns its end or NULL. */
static const char *js_utf8(const char *p)
{
    const unsigned char *s = (const unsigned char *)p;
    unsigned long cp;
    int more, i;

    if (s[0] < 0x80)
        return p + 1;
    if ((s[0] & 0xe0) == 0xc0) {
        cp = s[0] & 0x1f;
        more = 1;
    } else if ((s[0] & 0xf0) == 0xe0) {
        cp = s[0] & 0x0f;
        more = 2;
    } else if ((s[0] & 0xf8) == 0xf0) {
        cp = s[0] & 0x07;
        more = 3;
    } else {
        return NULL;
    }
    for (i = 1; i <= more; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return NULL;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((more == 1 && cp < 0x80) || (more == 2 && cp < 0x800)
        || (more == 3 && cp < 0x10000) || cp > 0x10ffff
        || (cp >= 0xd800 && cp <= 0xdfff))
        return NULL;
    return p + 1 + more;
}

static const char *js_string(const char *p)
{
    if (*p++ != '"')
        return NULL;
    while (*p != '"') {
        unsigned char c = (unsigned char)*p;

        if (c < 0x20)
            return NULL; /* raw control byte, or the end of the text */
        if (c == '\\') {
            p++;
            if (*p != '\0' && strchr("\"\\/bfnrt", *p) != NULL) {
                p++;
            } else if (*p == 'u' && is_hex(p[1]) && is_hex(p[2])
                       && is_hex(p[3]) && is_hex(p[4])) {
                p += 5;
            } else {
                return NULL;
            }
        } else if ((p = js_utf8(p)) == NULL) {
            return NULL;
        }
    }
    return p + 1;
}

static const char *js_number(const char *p)
{
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return NULL;
    if (*p == '.') {
        if (!(*++p >= '0' && *p <= '9'))
            return NULL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return NULL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return p;
}

static const char *js_list(const char *p, int depth, char close, bool keyed)
{
    p = js_ws(p + 1);
    if (*p == close)
        return p + 1;
    for (;;) {
        if (keyed) {
            if ((p = js_string(p)) == NULL)
                return NULL;
            p = js_ws(p);
            if (*p++ != ':')
                return NULL;
        }
        if ((p = js_value(p, depth + 1)) == NULL)
            return NULL;
        p = js_ws(p);
        if (*p == close)
            return p + 1;
        if (*p++ != ',')
            return NULL;
        p = js_ws(p);
    }
}

static const char *js_value(const char *p, int depth)
{
    if (depth > 64)
        return NULL;
    p = js_ws(p);
    switch (*p) {
    case '{':
        return js_list(p, depth, '}', true);
    case '[':
        return js_list(p, depth, ']', false);
    case '"':
        return js_string(p);
    case 't':
        return strncmp(p, "true", 4) == 0 ? p + 4 : NULL;
    case 'f':
        return strncmp(p, "false", 5) == 0 ? p + 5 : NULL;
    case 'n':
        return strncmp(p, "null", 4) == 0 ? p + 4 : NULL;
    default:
        return js_number(p);
    }
}

/* The text is one JSON object followed by a newline and nothing else. */
static void assert_json_object(const char *text)
{
    const char *end;

    if (text[0] != '{')
        fail_msg("not a JSON object: %s", text);
    end = js_value(text, 0);
    if (end == NULL || strcmp(end, "\n") != 0)
        fail_msg("not valid JSON (one object and a newline): %s", text);
}

/* status NAME, checked to be valid JSON, into out. */
static void status_of(const fx *f, const char *name, char *out)
{
    int rc = TOOL(f, out, "status", name);

    if (rc != 0)
        fail_msg("status %s exited %d: %s", name, rc, out);
    assert_json_object(out);
}

/* status of name once its first holder's start is listed: the
 * "held_ms" of that holder, which its client lists a quarter of a second
 * after the hold began. */
static long long status_until_held(const fx *f, const char *name, char *out)
{
    int64_t deadline = hl_now_ms() + widen(5000);
    for (;;) {
        status_of(f, name, out);
        const char *p = strstr(out, "\"held_ms\":");
        if (p != NULL && p[10] >= '0' && p[10] <= '9')
            return atoll(p + 10);
        if (hl_now_ms() > deadline)
            fail_msg("no holder's start listed within 5 s:\n%s", out);
        usleep(50 * 1000);
    }
}

static void assert_free(const fx *f, const char *name)
{
    char out[OUT_CAP];

    status_of(f, name, out);
    assert_has(out, "\"locked\":false");
    assert_has(out, "\"ttl_ms\":-1");
    assert_has(out, "\"holders\":[]");
}

/* ---- exit statuses ---------------------------------------------------- */

static void test_exit_status_passes_through(void **state)
{
    fx *f = F(state);
    char out[OUT_CAP];

    assert_int_equal(TOOL(f, out, "run", "x", "--", "sh", "-c", "exit 7"),
                     7);
    assert_int_equal(TOOL(f, out, "run", "x", "--", "true"), 0);
    assert_int_equal(TOOL(f, out, "run", "x", "--", "sh", "-c",
                          "echo hello; exit 0"),
                     0);
    assert_has(out, "hello");
    /* Died of a signal: 128 + its number, as a shell reports it. */
    assert_int_equal(TOOL(f, out, "run", "x", "--", "sh", "-c",
                          "kill -KILL $$"),
                     128 + SIGKILL);
    /* The arguments reach the command unchanged. */
    assert_int_equal(TOOL(f, out, "run", "x", "--", "printf", "[%s]",
                          "a b", "--", "-c"),
                     0);
    assert_has(out, "[a b][--][-c]");
    assert_free(f, "x");
}

static void test_not_acquired_within_wait(void **state)
{
    fx *f = F(state);
    char out[OUT_CAP];
    hilock_client *c = client_for(f);
    hilock_lock *lock = hold(c, "busy");
    int64_t t0 = hl_now_ms(), took;

    assert_int_equal(TOOL(f, out, "run", "--wait", "200", "busy", "--",
                          "sh", "-c", "echo ran"),
                     75);
    took = hl_now_ms() - t0;
    assert_null(strstr(out, "ran\n"));
    assert_true(took >= 190);
    assert_true(took < widen(5000));
    /* 0 is a single attempt. */
    assert_int_equal(TOOL(f, out, "run", "--wait=0", "busy", "--", "true"),
                     75);
    assert_int_equal(hilock_lock_release(lock), HILOCK_OK);
    assert_int_equal(TOOL(f, out, "run", "--wait", "200", "busy", "--",
                          "true"),
                     0);
    hilock_lock_destroy(lock);
    hilock_client_destroy(c);
}

static void test_lease_lost(void **state)
{
    fx *f = F(state);
    char out_path[PATH_CAP], out[OUT_CAP], reply[64];
    key_probe probe = { f->server, "lost" };
    int64_t t0;
    pid_t pid;
    int rc;

    path_in(f, out_path, sizeof out_path, "lost.out");
    /* The TERM reaches the background sleep as well, since hilock
     * signals the command's whole process group. */
    pid = spawn_tool(f, out_path, "--watchdog", "1000", "run", "lost", "--",
                     "sh", "-c",
                     "trap 'echo got-term; kill $!; exit 0' TERM; "
                     "echo started; sleep 30 & wait",
                     (char *)NULL);
    if (!hl_wait_until(key_exists, &probe, widen(10000)))
        fail_msg("the run never took the lock");
    hl_wait_until(path_appears, out_path, widen(5000));
    for (t0 = hl_now_ms(); hl_now_ms() - t0 < widen(5000);) {
        hl_file_read(out_path, out, sizeof out);
        if (strstr(out, "started") != NULL)
            break;
        hl_sleep_ms(5);
    }
    assert_has(out, "started");
    assert_int_equal(hl_redis_server_cmd(f->server, reply, sizeof reply,
                                         "DEL", "lost", (char *)NULL),
                     ':');
    t0 = hl_now_ms();
    /* Renewal every third of 1000 ms: the loss shows within ~340 ms on
     * an idle machine; the bound only catches a run that never ends (a
     * machine too busy to run the test's processes was seen to take 8 s
     * from the loss to the exit). */
    rc = hl_wait_exit(pid, widen(15000));
    hl_file_read(out_path, out, sizeof out);
    if (rc != 76)
        fail_msg("exit %d after %lld ms; output:\n%s", rc,
                 (long long)(hl_now_ms() - t0), out);
    assert_has(out, "got-term");
    /* With the reason: the renewal found the key gone. */
    assert_has(out, "lost the lock lost (a renewal found the lock no "
                    "longer held");
    assert_free(f, "lost");
}

/* --max-hold: the watchdog renews the hold no longer than the cap, then
 * lets it run out, and CMD is stopped as for a lost lock, with the cap
 * named as the reason.  Bad values and --lease beside it are usage
 * errors. */
static void test_max_hold(void **state)
{
    fx *f = F(state);
    char out[OUT_CAP];
    int rc = TOOL(f, out, "--watchdog", "300", "run", "--max-hold", "1s",
                  "capped", "--", "sleep", "30");
    if (rc != 76)
        hl_fail_run("run --max-hold 1s", rc, out);
    assert_has(out, "lost the lock capped");
    assert_has(out, "max_hold cap");
    assert_free(f, "capped");
    assert_int_equal(TOOL(f, out, "run", "--max-hold", "0", "capped", "--",
                          "true"),
                     64);
    assert_has(out, "--max-hold");
    assert_int_equal(TOOL(f, out, "run", "--max-hold", "1s", "--lease",
                          "2s", "capped", "--", "true"),
                     64);
    assert_has(out, "--lease");
    /* A command that ends within the cap is not disturbed. */
    assert_int_equal(TOOL(f, out, "run", "--max-hold", "10s", "capped", "--",
                          "true"),
                     0);
}

/* --lock-delay: a hold taken from run by a forced unlock (CMD forces it
 * itself) leaves the lock closed for the delay: status shows it, a
 * single try is a conflict, a waiting run goes in once it is over.  The
 * URL key does the same for every command; bad values are usage errors
 * that say why. */
static void test_lock_delay(void **state)
{
    fx *f = F(state);
    char out[OUT_CAP], url[256], cmd[512];
    snprintf(cmd, sizeof cmd,
             "%s --redis '%s' unlock --force delayed >/dev/null; sleep 30",
             HILOCK_TOOL_PATH, f->url);
    int rc = TOOL(f, out, "--watchdog", "300", "run", "--lock-delay", "3s",
                  "delayed", "--", "sh", "-c", cmd);
    if (rc != 76)
        hl_fail_run("run --lock-delay 3s", rc, out);
    assert_int_equal(TOOL(f, out, "status", "delayed"), 0);
    assert_has(out, "\"locked\":false");
    assert_has(out, "\"delay_ms\":");
    /* ls lists the free name by its delay key, the only key left. */
    assert_int_equal(TOOL(f, out, "ls", "--json", "delay*"), 0);
    assert_has(out, "{\"name\":\"delayed\",\"kind\":\"reentrant\","
                    "\"locked\":false,\"holders\":0,");
    assert_has(out, ",\"delay_ms\":");
    assert_int_equal(TOOL(f, out, "ls", "delay*"), 0);
    assert_has(out, "\ndelayed ");
    assert_has(out, "  delay ");
    assert_int_equal(TOOL(f, out, "ls", "--json", "other*"), 0);
    assert_string_equal(out, "[]\n");
    assert_int_equal(TOOL(f, out, "run", "-n", "delayed", "--", "true"), 75);
    assert_int_equal(TOOL(f, out, "run", "-w", "10s", "delayed", "--",
                          "true"),
                     0);
    status_of(f, "delayed", out);
    assert_true(strstr(out, "delay_ms") == NULL);

    snprintf(url, sizeof url, "%s?lock_delay=3000&watchdog_timeout=300",
             f->url);
    snprintf(cmd, sizeof cmd,
             "%s --redis '%s' unlock --force delayed-url >/dev/null; "
             "sleep 30",
             HILOCK_TOOL_PATH, f->url);
    rc = tool_at(url, out, widen(20000), "run", "delayed-url", "--", "sh",
                 "-c", cmd, (char *)NULL);
    if (rc != 76)
        hl_fail_run("run with lock_delay=3000", rc, out);
    assert_int_equal(tool_at(url, out, widen(20000), "status", "delayed-url",
                             (char *)NULL),
                     0);
    assert_has(out, "\"delay_ms\":");
    /* A clean run leaves nothing behind. */
    assert_int_equal(tool_at(url, out, widen(20000), "run", "clean", "--",
                             "true", (char *)NULL),
                     0);
    status_of(f, "clean", out);
    assert_true(strstr(out, "delay_ms") == NULL);

    assert_int_equal(TOOL(f, out, "run", "--lock-delay", "-1", "x", "--",
                          "true"),
                     64);
    assert_has(out, "--lock-delay");
    assert_int_equal(TOOL(f, out, "run", "--lock-delay", "2h", "x", "--",
                          "true"),
                     64);
    assert_has(out, "lock delay out of range");
    assert_int_equal(TOOL(f, out, "run", "--lock-delay", "1s", "--permits",
                          "2", "x", "--", "true"),
                     64);
    assert_int_equal(TOOL(f, out, "run", "--lock-delay", "1s", "--kind",
                          "write", "x", "--", "true"),
                     64);
    assert_has(out, "reentrant and fair");
    snprintf(url, sizeof url, "%s?lock_delay=soon", f->url);
    assert_int_equal(tool_at(url, out, widen(20000), "status", "x",
                             (char *)NULL),
                     64);
    assert_has(out, "lock_delay");
}

/* hilock revoke asks a running `hilock run`, which passes the request to
 * its command as the signal --on-request names; a free lock, a holder
 * that does not listen and bad arguments each have their exit status. */
static void test_revoke(void **state)
{
    fx *f = F(state);
    char out_path[PATH_CAP], ready[PATH_CAP], script[SCRIPT_CAP];
    char out[OUT_CAP], log[OUT_CAP];
    pid_t pid;
    int rc;

    path_in(f, out_path, sizeof out_path, "revoke.out");
    path_in(f, ready, sizeof ready, "revoke.ready");
    unlink(ready);
    snprintf(script, sizeof script,
             "trap 'echo got-usr1; kill $!; exit 5' USR1; touch %s; "
             "sleep 30 & wait",
             ready);
    pid = spawn_tool(f, out_path, "run", "--on-request", "usr1", "asked",
                     "--", "sh", "-c", script, (char *)NULL);
    wait_for_file(ready);
    hl_expect_numsub(f->server, "hilock_release_request:{asked}", 1, 1);
    rc = TOOL(f, out, "revoke", "-r", "disk swap", "asked");
    if (rc != 0)
        hl_fail_run("revoke", rc, out);
    assert_has(out, "asked: 1 holder heard");
    rc = hl_wait_exit(pid, widen(10000));
    hl_file_read(out_path, log, sizeof log);
    if (rc != 5)
        fail_msg("the run exited %d, not its command's 5:\n%s", rc, log);
    assert_has(log, "asked to give up the lock asked (disk swap); sending "
                    "SIGUSR1");
    assert_has(log, "got-usr1");
    assert_free(f, "asked");
    assert_int_equal(TOOL(f, out, "revoke", "asked"), 66);
    assert_has(out, "asked is not held");

    /* Held by a run that ignores requests: nobody hears, exit 75. */
    unlink(ready);
    snprintf(script, sizeof script, "touch %s; exec sleep 30", ready);
    pid = spawn_tool(f, out_path, "run", "--on-request", "none", "deaf",
                     "--", "sh", "-c", script, (char *)NULL);
    wait_for_file(ready);
    assert_int_equal(TOOL(f, out, "revoke", "deaf"), 75);
    assert_has(out, "does not listen for requests");
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(hl_wait_exit(pid, widen(10000)), 128 + SIGTERM);

    /* What either command refuses. */
    assert_int_equal(TOOL(f, out, "run", "--on-request", "SIGBOGUS", "x",
                          "--", "true"),
                     64);
    assert_has(out, "--on-request takes a signal");
    assert_int_equal(TOOL(f, out, "run", "--on-request", "TERM",
                          "--permits", "2", "x", "--", "true"),
                     64);
    assert_int_equal(TOOL(f, out, "revoke"), 64);
    char long_reason[300];
    memset(long_reason, 'r', sizeof long_reason - 1);
    long_reason[sizeof long_reason - 1] = '\0';
    assert_int_equal(TOOL(f, out, "revoke", "--reason", long_reason, "x"),
                     64);
    assert_has(out, "at most 256");
    assert_int_equal(hl_redis_server_cmd(f->server, out, sizeof out, "SET",
                                         "plain-string", "v", (char *)NULL),
                     '+');
    assert_int_equal(TOOL(f, out, "revoke", "plain-string"), 65);
}

static void test_unreachable(void **state)
{
    char out[OUT_CAP], refused[64], wrong[96], right[96];
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    hl_redis_server *locked;
    int s;

    (void)state;
    /* A port that was free a moment ago: nothing listens there. */
    s = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s >= 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(s, (struct sockaddr *)&sa, &len), 0);
    close(s);
    snprintf(refused, sizeof refused, "redis://127.0.0.1:%d",
             ntohs(sa.sin_port));
    assert_int_equal(tool_at(refused, out, widen(20000), "run", "x", "--",
                             "sh", "-c", "echo ran", (char *)NULL),
                     69);
    assert_null(strstr(out, "ran\n"));
    assert_int_equal(tool_at(refused, out, widen(20000), "status", "x",
                             (char *)NULL),
                     69);
    assert_int_equal(tool_at(refused, out, widen(20000), "unlock",
                             "--force", "x", (char *)NULL),
                     69);

    locked = hl_fixture_plain_with("s3cret", NULL);
    snprintf(wrong, sizeof wrong, "redis://:wrong@127.0.0.1:%d",
             hl_redis_server_port(locked));
    snprintf(right, sizeof right, "redis://:s3cret@127.0.0.1:%d",
             hl_redis_server_port(locked));
    assert_int_equal(tool_at(wrong, out, widen(20000), "run", "x", "--",
                             "true", (char *)NULL),
                     69);
    assert_int_equal(tool_at(wrong, out, widen(20000), "status", "x",
                             (char *)NULL),
                     69);
    assert_int_equal(tool_at(right, out, widen(20000), "run", "x", "--",
                             "true", (char *)NULL),
                     0);
    /* $HILOCK_REDIS stands in for --redis. */
    setenv("HILOCK_REDIS", wrong, 1);
    assert_int_equal(tool_at(NULL, out, widen(20000), "status", "x",
                             (char *)NULL),
                     69);
    setenv("HILOCK_REDIS", right, 1);
    assert_int_equal(tool_at(NULL, out, widen(20000), "status", "x",
                             (char *)NULL),
                     0);
    unsetenv("HILOCK_REDIS");
    hl_redis_server_stop(locked);
}

static void test_usage_errors(void **state)
{
    static const char *const cases[][8] = {
        { "run", "--", "true" },                      /* no NAME */
        { "run", "u", "true" },                       /* no -- */
        { "run", "u" },
        { "run", "u", "--" },                         /* no CMD */
        { "run", "--bogus", "u", "--", "true" },
        { "run", "--wait", "abc", "u", "--", "true" },
        { "run", "--wait", "-5", "u", "--", "true" },
        { "run", "--wait", "" , "u", "--", "true" },
        { "run", "--lease", "0", "u", "--", "true" },
        { "run", "--lease", "10x", "u", "--", "true" },
        { "run", "--lease", "99999999999999999999999", "u", "--", "true" },
        { "run", "--kind", "no-such-kind", "u", "--", "true" },
        { "run", "u", "--wait" },
        { "run", "a", "b", "--", "true" },
        { "status" },
        { "status", "a", "b" },
        { "status", "--kind", "no-such-kind", "u" },
        { "status", "u", "--kind" },
        { "status", "--bogus", "u" },
        { "unlock", "u" },                            /* no --force */
        { "unlock", "--force" },
        { "--watchdog", "0", "status", "u" },
        { "--watchdog", "x", "status", "u" },
        { "--bogus", "status", "u" },
        { "no-such-command" },
        { "demo", "extra" },
    };
    fx *f = F(state);
    char out[OUT_CAP];
    const char *argv[MAX_ARGS];
    size_t i;
    int n, k, rc;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        n = 0;
        argv[n++] = HILOCK_TOOL_PATH;
        argv[n++] = "--redis";
        argv[n++] = f->url;
        for (k = 0; k < 8 && cases[i][k] != NULL; k++)
            argv[n++] = cases[i][k];
        argv[n] = NULL;
        rc = hl_run(argv, out, sizeof out, widen(20000));
        if (rc != 64)
            fail_msg("case %zu (%s %s ...) exited %d, not 64:\n%s", i,
                     cases[i][0], cases[i][1] ? cases[i][1] : "", rc, out);
        assert_true(strstr(out, "usage") != NULL
                    || strstr(out, "unknown") != NULL);
    }
    /* No command at all is a usage error; --help is not. */
    argv[3] = NULL;
    assert_int_equal(hl_run(argv, out, sizeof out, widen(20000)), 64);
    assert_int_equal(tool_at(NULL, out, widen(20000), "--help",
                             (char *)NULL),
                     0);
    assert_has(out, "usage");
    assert_int_equal(tool_at(NULL, out, widen(20000), "version",
                             (char *)NULL),
                     0);
    assert_has(out, hilock_version_string());
    /* None of them took the lock. */
    assert_free(f, "u");
}

/* A name longer than the library takes is a usage error for every
 * command alike, not a lookup of a key no lock can have. */
static void test_overlong_name(void **state)
{
    static const char *const cmds[][3] = {
        { "run", NULL },
        { "status", NULL },
        { "status", "--kind", "fair" },
        { "unlock", "--force", NULL },
    };
    fx *f = F(state);
    char out[OUT_CAP];
    const char *argv[MAX_ARGS];
    char *name = malloc(HILOCK_MAX_NAME_LEN + 2);
    size_t i;
    int n, k, rc;

    assert_non_null(name);
    memset(name, 'n', HILOCK_MAX_NAME_LEN + 1);
    name[HILOCK_MAX_NAME_LEN + 1] = '\0';
    for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        n = 0;
        argv[n++] = HILOCK_TOOL_PATH;
        argv[n++] = "--redis";
        argv[n++] = f->url;
        for (k = 0; k < 3 && cmds[i][k] != NULL; k++)
            argv[n++] = cmds[i][k];
        argv[n++] = name;
        if (strcmp(cmds[i][0], "run") == 0) {
            argv[n++] = "--";
            argv[n++] = "true";
        }
        argv[n] = NULL;
        rc = hl_run(argv, out, sizeof out, widen(20000));
        if (rc != 64)
            fail_msg("%s with a %d-byte name exited %d, not 64:\n%.300s",
                     cmds[i][0], HILOCK_MAX_NAME_LEN + 1, rc, out);
        assert_has(out, "at most 65536");
    }
    /* The longest allowed name still works. */
    name[HILOCK_MAX_NAME_LEN] = '\0';
    argv[3] = "status";
    argv[4] = name;
    argv[5] = NULL;
    rc = hl_run(argv, out, sizeof out, widen(20000));
    assert_int_equal(rc, 0);
    assert_true(strncmp(out, "{\"name\":\"nnnn", 12) == 0);
    free(name);
}

static void test_command_not_found(void **state)
{
    fx *f = F(state);
    char out[OUT_CAP], script[PATH_CAP];
    FILE *fp;

    assert_int_equal(TOOL(f, out, "run", "nf", "--",
                          "hilock-test-no-such-command"),
                     127);
    assert_int_equal(TOOL(f, out, "run", "nf", "--", "/nonexistent/cmd"),
                     127);
    assert_free(f, "nf");
    /* Found but not executable: 126, as a shell says. */
    path_in(f, script, sizeof script, "not-executable");
    fp = fopen(script, "w");
    assert_non_null(fp);
    fputs("#!/bin/sh\nexit 0\n", fp);
    fclose(fp);
    chmod(script, 0600);
    assert_int_equal(TOOL(f, out, "run", "nf", "--", script), 126);
    assert_free(f, "nf");
}

/* ---- signals ---------------------------------------------------------- */

static void forward_one(fx *f, int sig, const char *sig_name)
{
    char out_path[PATH_CAP], ready[PATH_CAP], marker[PATH_CAP];
    char script[SCRIPT_CAP], out[OUT_CAP];
    pid_t pid;
    int rc;

    path_in(f, out_path, sizeof out_path, "fwd.out");
    path_in(f, ready, sizeof ready, "fwd.ready");
    path_in(f, marker, sizeof marker, "fwd.marker");
    unlink(ready);
    unlink(marker);
    snprintf(script, sizeof script,
             "trap 'touch %s; kill $!; exit 3' %s; touch %s; "
             "sleep 30 & wait",
             marker, sig_name, ready);
    pid = spawn_tool(f, out_path, "run", "fwd", "--", "sh", "-c", script,
                     (char *)NULL);
    wait_for_file(ready);
    assert_int_equal(kill(pid, sig), 0);
    rc = hl_wait_exit(pid, widen(10000));
    hl_file_read(out_path, out, sizeof out);
    if (rc != 3)
        fail_msg("SIG%s: exit %d, not the command's 3:\n%s", sig_name, rc,
                 out);
    assert_true(file_exists(marker));
    assert_free(f, "fwd");
}

static void test_signals_forwarded(void **state)
{
    fx *f = F(state);
    char out_path[PATH_CAP], ready[PATH_CAP], script[SCRIPT_CAP];
    pid_t pid;

    forward_one(f, SIGTERM, "TERM");
    forward_one(f, SIGINT, "INT");
    forward_one(f, SIGHUP, "HUP");

    /* A command that does not catch the signal dies of it; hilock still
     * releases the lock and reports the death as a shell does. */
    path_in(f, out_path, sizeof out_path, "plain.out");
    path_in(f, ready, sizeof ready, "plain.ready");
    snprintf(script, sizeof script, "touch %s; exec sleep 30", ready);
    pid = spawn_tool(f, out_path, "run", "fwd", "--", "sh", "-c", script,
                     (char *)NULL);
    wait_for_file(ready);
    /* The exec may still be under way; a TERM to sh then ends it too. */
    hl_sleep_ms(50);
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(hl_wait_exit(pid, widen(10000)), 128 + SIGTERM);
    assert_free(f, "fwd");
}

/* The signals the command ignores, started by hilock while hilock itself
 * ignores the signals of ignored (and nothing else). */
static unsigned long long ignored_by_command(const fx *f,
                                             const int *ignored, int n)
{
    const char *argv[] = { HILOCK_TOOL_PATH, "--redis", f->url, "run", "sd",
                           "--", "grep", "^SigIgn", "/proc/self/status",
                           NULL };
    struct sigaction ign, old[8];
    char out_path[PATH_CAP], out[OUT_CAP];
    const char *p;
    sigset_t dfl;
    pid_t pid;
    int i, rc;

    assert_true(n <= 8);
    path_in(f, out_path, sizeof out_path, "sd.out");
    /* Every other signal starts at its default, whatever the test runner
     * gave this process. */
    sigfillset(&dfl);
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    for (i = 0; i < n; i++) {
        sigdelset(&dfl, ignored[i]);
        sigaction(ignored[i], &ign, &old[i]);
    }
    pid = spawn_argv(argv, out_path, &dfl);
    for (i = 0; i < n; i++)
        sigaction(ignored[i], &old[i], NULL);
    rc = hl_wait_exit(pid, widen(20000));
    hl_file_read(out_path, out, sizeof out);
    if (rc != 0)
        fail_msg("exit %d:\n%s", rc, out);
    p = strstr(out, "SigIgn:");
    assert_non_null(p);
    return strtoull(p + 7, NULL, 16);
}

static unsigned long long sig_bit(int sig)
{
    return 1ULL << (sig - 1);
}

/* The command gets default dispositions, except that the signals that
 * hilock's parent ignored on purpose for the whole job (nohup, `cmd &` in
 * a script) stay ignored. */
static void test_child_signal_dispositions(void **state)
{
    static const int none[1] = { 0 };
    static const int stray[] = { SIGPIPE, SIGUSR1, SIGTERM };
    static const int nohup[] = { SIGHUP };
    static const int background[] = { SIGINT, SIGQUIT, SIGPIPE };
    fx *f = F(state);

    assert_int_equal(ignored_by_command(f, none, 0), 0);
    assert_int_equal(ignored_by_command(f, stray, 3), sig_bit(SIGTERM));
    assert_int_equal(ignored_by_command(f, nohup, 1), sig_bit(SIGHUP));
    assert_int_equal(ignored_by_command(f, background, 3),
                     sig_bit(SIGINT) | sig_bit(SIGQUIT));
}

/* ---- the command's process group ------------------------------------- */

/* The command of these tests, as a mode of this executable:
 *   test_cli --beat ID FILE COUNT
 * appends "ID PID NS\n" to FILE (NS: CLOCK_MONOTONIC) at once and then
 * every 2 ms, COUNT lines in all, or until killed when COUNT is 0.  One
 * write() per line to a file opened with O_APPEND: the lines lie in the
 * order they were written, across processes. */
static int beat_main(char **argv)
{
    long id = strtol(argv[2], NULL, 10);
    long count = strtol(argv[4], NULL, 10);
    int fd = open(argv[3], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    char line[64];
    long i;

    if (fd < 0)
        return 1;
    for (i = 0; count == 0 || i < count; i++) {
        int n = snprintf(line, sizeof line, "%ld %ld %lld\n", id,
                         (long)getpid(), (long long)hl_now_ns());

        if (write(fd, line, (size_t)n) != n)
            return 1;
        hl_sleep_ms(2);
    }
    return 0;
}

static void self_path(char *out, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);

    if (n <= 0)
        fail_msg("readlink /proc/self/exe: %s", strerror(errno));
    out[n] = '\0';
}

/* A process still runs: it exists and is no zombie (one that outlived its
 * parent waits for init to reap it). */
static bool pid_alive(pid_t pid)
{
    char path[64], stat[256];
    const char *state;

    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    hl_file_read(path, stat, sizeof stat);
    state = strrchr(stat, ')');
    return state != NULL && state[1] == ' ' && state[2] != 'Z'
           && state[2] != 'X';
}

static bool pid_gone(void *arg)
{
    return !pid_alive(*(pid_t *)arg);
}

typedef struct beat_probe {
    const char *path;
    long id;
    pid_t pid; /* of the first line of id, once seen */
} beat_probe;

/* Room for every line of the --beat commands of one test. */
static char beats[1 << 20];

static bool beat_seen(void *arg)
{
    beat_probe *p = arg;
    const char *line;
    const char *text = beats;

    hl_file_read(p->path, beats, sizeof beats);
    for (line = text; *line != '\0';) {
        char *end;
        long id = strtol(line, &end, 10);

        if (id == p->id && strchr(end, '\n') != NULL) {
            p->pid = (pid_t)strtol(end, NULL, 10);
            return true;
        }
        line = strchr(line, '\n');
        if (line == NULL)
            break;
        line++;
    }
    return false;
}

/* hilock killed by SIGKILL takes its command along at once (the kernel's
 * death signal), so the next holder of the lock never runs beside it. */
static void test_killed_run_takes_command_along(void **state)
{
    fx *f = F(state);
    char self[PATH_CAP], log[PATH_CAP], out1[PATH_CAP], out2[PATH_CAP];
    char out[OUT_CAP];
    beat_probe first;
    const char *line;
    long long last_first = 0, first_second = 0;
    int late = 0, rc;
    int64_t t_kill, took;
    bool second_began = false, gone;
    pid_t run1, run2;

    self_path(self, sizeof self);
    path_in(f, log, sizeof log, "beats");
    path_in(f, out1, sizeof out1, "k9-1.out");
    path_in(f, out2, sizeof out2, "k9-2.out");
    first = (beat_probe){ log, 1, 0 };
    /* A short watchdog: once hilock is dead, the lease runs out within
     * a second and the second run takes the lock. */
    run1 = spawn_tool(f, out1, "--watchdog", "1000", "run", "k9", "--",
                      self, "--beat", "1", log, "0", (char *)NULL);
    if (!hl_wait_until(beat_seen, &first, widen(10000)))
        fail_msg("the first command never wrote");
    assert_int_equal(kill(run1, SIGKILL), 0);
    assert_int_equal(hl_wait_exit(run1, widen(5000)), 128 + SIGKILL);
    t_kill = hl_now_ms();
    gone = hl_wait_until(pid_gone, &first.pid, 2000);
    took = hl_now_ms() - t_kill;

    run2 = spawn_tool(f, out2, "run", "k9", "--", self, "--beat", "2", log,
                      "25", (char *)NULL);
    rc = hl_wait_exit(run2, widen(20000));
    hl_file_read(out2, out, sizeof out);
    if (!gone)
        kill(first.pid, SIGKILL);
    if (rc != 0)
        fail_msg("second run: exit %d:\n%s", rc, out);

    hl_file_read(log, beats, sizeof beats);
    for (line = beats; line != NULL && *line != '\0';) {
        long id, pid;
        long long ns;

        if (sscanf(line, "%ld %ld %lld", &id, &pid, &ns) != 3)
            fail_msg("bad line in %s: %.40s", log, line);
        if (id == 2 && !second_began) {
            second_began = true;
            first_second = ns;
        }
        if (id == 1) {
            last_first = ns;
            late += second_began;
        }
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    if (!second_began)
        fail_msg("the second command never wrote");
    if (!gone || late > 0 || last_first >= first_second)
        fail_msg("the command of the killed run %s; %d of its writes came "
                 "after the next holder's command began, the last %.1f ms "
                 "after",
                 gone ? "ended" : "still ran 2 s after the kill", late,
                 (double)(last_first - first_second) / 1e6);
    print_message("command gone %lld ms after the kill of hilock\n",
                  (long long)took);
    assert_free(f, "k9");
}

/* `hilock run` of a shell that starts a sleep in the background and
 * waits for it; returns the pid of hilock, and the sleep's in
 * *grandchild. */
static pid_t run_with_grandchild(const fx *f, const char *name,
                                 const char *watchdog, pid_t *grandchild)
{
    char out_path[PATH_CAP], gc_path[PATH_CAP], script[SCRIPT_CAP];
    char text[64];
    pid_t pid;

    path_in(f, out_path, sizeof out_path, "gc.out");
    path_in(f, gc_path, sizeof gc_path, "gc.pid");
    unlink(gc_path);
    snprintf(script, sizeof script,
             "sleep 30 & echo $! > %s.tmp; mv %s.tmp %s; wait", gc_path,
             gc_path, gc_path);
    pid = spawn_tool(f, out_path, "--watchdog", watchdog, "run", name, "--",
                     "sh", "-c", script, (char *)NULL);
    wait_for_file(gc_path);
    hl_file_read(gc_path, text, sizeof text);
    *grandchild = (pid_t)atol(text);
    assert_true(*grandchild > 0);
    assert_true(pid_alive(*grandchild));
    return pid;
}

/* The command leads a process group of its own. */
static void test_command_own_group(void **state)
{
    fx *f = F(state);
    char out[OUT_CAP];
    long pid = 0, pgrp = 0;

    assert_int_equal(TOOL(f, out, "run", "pg", "--", "sh", "-c",
                          "echo \"$$ $(cut -d' ' -f5 /proc/$$/stat)\""),
                     0);
    if (sscanf(out, "%ld %ld", &pid, &pgrp) != 2)
        fail_msg("unexpected output:\n%s", out);
    assert_int_equal(pgrp, pid);
    assert_int_not_equal(pgrp, (long)getpgrp());
}

/* What hilock sends to the command, on a lost lease and when it passes
 * on a signal, reaches the command's own children as well. */
static void test_group_signalled(void **state)
{
    fx *f = F(state);
    char reply[64], out_path[PATH_CAP], out[OUT_CAP];
    pid_t pid, gc;
    int64_t t0;
    int rc;

    pid = run_with_grandchild(f, "grp", "1000", &gc);
    assert_int_equal(hl_redis_server_cmd(f->server, reply, sizeof reply,
                                         "DEL", "grp", (char *)NULL),
                     ':');
    t0 = hl_now_ms();
    rc = hl_wait_exit(pid, widen(15000));
    if (!hl_wait_until(pid_gone, &gc, widen(2000))) {
        kill(gc, SIGKILL);
        fail_msg("the command's child outlived the lost lease (exit %d)",
                 rc);
    }
    if (rc != 76) {
        path_in(f, out_path, sizeof out_path, "gc.out");
        hl_file_read(out_path, out, sizeof out);
        fail_msg("exit %d after %lld ms; output:\n%s", rc,
                 (long long)(hl_now_ms() - t0), out);
    }

    pid = run_with_grandchild(f, "grp", "30000", &gc);
    assert_int_equal(kill(pid, SIGTERM), 0);
    rc = hl_wait_exit(pid, widen(10000));
    if (!hl_wait_until(pid_gone, &gc, widen(2000))) {
        kill(gc, SIGKILL);
        fail_msg("the command's child outlived a SIGTERM to hilock (exit "
                 "%d)", rc);
    }
    assert_int_equal(rc, 128 + SIGTERM);
    assert_free(f, "grp");
}

/* In the foreground of a terminal, the command gets the terminal (a
 * command in a background group that reads from it would be stopped),
 * and hilock's own group gets it back once the command is done: a shell
 * that ran hilock in its session on a fresh pseudo-terminal reads from it
 * after hilock, and a shell that lost the terminal would read nothing. */
static void test_terminal_handed_over(void **state)
{
    fx *f = F(state);
    char script[SCRIPT_CAP], out[OUT_CAP];
    const char *slave;
    size_t len = 0;
    int64_t deadline;
    int master, rc;
    pid_t pid;

    snprintf(script, sizeof script,
             "%s --redis %s run tty -- sh -c 'read l; echo got:$l'; "
             "read m; echo after:$m",
             HILOCK_TOOL_PATH, f->url);
    master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    assert_true(master >= 0);
    assert_int_equal(grantpt(master), 0);
    assert_int_equal(unlockpt(master), 0);
    slave = ptsname(master);
    assert_non_null(slave);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd;

        /* The first terminal a session leader opens becomes its
         * controlling terminal, with the leader's group in front. */
        if (setsid() < 0 || (fd = open(slave, O_RDWR)) < 0)
            _exit(126);
        dup2(fd, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        execl("/bin/sh", "sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    /* The terminal keeps the lines until each reader takes its own:
     * sh's read takes one byte at a time. */
    assert_int_equal(write(master, "one\ntwo\n", 8), 8);
    /* Until the session ends: then reads fail with EIO. */
    deadline = hl_now_ms() + widen(20000);
    for (;;) {
        struct pollfd p = { .fd = master, .events = POLLIN };
        int left = (int)(deadline - hl_now_ms());
        ssize_t n;

        if (left <= 0 || poll(&p, 1, left) <= 0 || len + 1 >= sizeof out)
            break;
        n = read(master, out + len, sizeof out - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    out[len] = '\0';
    close(master);
    rc = hl_wait_exit(pid, widen(5000));
    if (rc != 0 || strstr(out, "got:one") == NULL
        || strstr(out, "after:two") == NULL)
        fail_msg("exit %d; on the terminal:\n%s", rc, out);
    assert_free(f, "tty");
}

/* ---- locking through the command ------------------------------------- */

static void test_mutual_exclusion(void **state)
{
    enum { RUNS = 3 };
    fx *f = F(state);
    char log[PATH_CAP], script[SCRIPT_CAP], out_path[PATH_CAP];
    char text[OUT_CAP], expect[OUT_CAP] = "";
    pid_t pids[RUNS];
    int i;

    path_in(f, log, sizeof log, "mutex.log");
    snprintf(script, sizeof script,
             "echo start >> %s; sleep 0.2; echo end >> %s", log, log);
    for (i = 0; i < RUNS; i++) {
        char leaf[32];

        snprintf(leaf, sizeof leaf, "mutex%d.out", i);
        path_in(f, out_path, sizeof out_path, leaf);
        pids[i] = spawn_tool(f, out_path, "run", "mx", "--", "sh", "-c",
                             script, (char *)NULL);
    }
    for (i = 0; i < RUNS; i++) {
        assert_int_equal(hl_wait_exit(pids[i], widen(20000)), 0);
        strcat(expect, "start\nend\n");
    }
    hl_file_read(log, text, sizeof text);
    /* Overlapping intervals would show as two starts in a row. */
    assert_string_equal(text, expect);
    assert_free(f, "mx");
}

static void test_fence_env(void **state)
{
    fx *f = F(state);
    char out[OUT_CAP];
    unsigned long long prev = 0, token;
    const char *p;
    int i;

    for (i = 0; i < 3; i++) {
        assert_int_equal(TOOL(f, out, "run", "--fence-env", "fence", "--",
                              "sh", "-c", "echo \"fence=$HILOCK_FENCE\""),
                         0);
        p = strstr(out, "fence=");
        assert_non_null(p);
        token = strtoull(p + 6, NULL, 10);
        if (token <= prev)
            fail_msg("fence %llu after %llu", token, prev);
        prev = token;
    }
    /* Without --fence-env nothing is set. */
    assert_int_equal(TOOL(f, out, "run", "fence", "--", "sh", "-c",
                          "echo \"fence=${HILOCK_FENCE-unset}\""),
                     0);
    assert_has(out, "fence=unset");
    /* One inherited from an outer run is replaced, not doubled. */
    setenv("HILOCK_FENCE", "1", 1);
    assert_int_equal(TOOL(f, out, "run", "--fence-env", "fence", "--",
                          "sh", "-c", "env | grep -c '^HILOCK_FENCE='; "
                                      "echo \"fence=$HILOCK_FENCE\""),
                     0);
    unsetenv("HILOCK_FENCE");
    assert_true(strncmp(out, "1\n", 2) == 0);
    p = strstr(out, "fence=");
    assert_non_null(p);
    assert_true(strtoull(p + 6, NULL, 10) > prev);
}

/* ---- status ----------------------------------------------------------- */

static void test_status_json(void **state)
{
    fx *f = F(state);
    char out[OUT_CAP], out_path[PATH_CAP], ready[PATH_CAP];
    char script[SCRIPT_CAP], owner[128];
    hilock_client *c;
    hilock_lock *lock;
    const char *p;
    pid_t pid;

    status_of(f, "st", out);
    assert_string_equal(out, "{\"name\":\"st\",\"kind\":\"reentrant\","
                             "\"locked\":false,\"ttl_ms\":-1,"
                             "\"holders\":[],\"waiters\":[],"
                             "\"subscribers\":0}\n");

    /* Held by a run: one holder, count 1, a live ttl. */
    path_in(f, out_path, sizeof out_path, "st.out");
    path_in(f, ready, sizeof ready, "st.ready");
    snprintf(script, sizeof script, "touch %s; exec sleep 30", ready);
    pid = spawn_tool(f, out_path, "run", "--describe", "the st test", "st",
                     "--", "sh", "-c", script, (char *)NULL);
    wait_for_file(ready);
    int64_t held_from = hl_now_ms();
    long long held = status_until_held(f, "st", out);
    /* How long it has held, from its client's list: no longer than since
     * the run said it held. */
    if (held < 0 || held > hl_now_ms() - held_from + 1000)
        fail_msg("held_ms %lld, %lld ms after the run took it", held,
                 (long long)(hl_now_ms() - held_from));
    assert_has(out, "\"kind\":\"reentrant\"");
    assert_has(out, "\"locked\":true");
    /* With the card of the client behind it: which process holds. */
    assert_has(out, "\"count\":1,\"held_ms\":");
    assert_has(out, ",\"client\":{\"host\":");
    assert_has(out, "\"program\":\"hilock\",\"description\":\"the st test\"");
    assert_has(out, "\"library\":\"hilock ");
    assert_has(out, "}}]");
    p = strstr(out, "\"ttl_ms\":");
    assert_non_null(p);
    assert_true(atoll(p + 9) > 0);
    /* The owner: "<client uuid>:<owner id>". */
    p = strstr(out, "\"holders\":[{\"owner\":\"");
    assert_non_null(p);
    p += strlen("\"holders\":[{\"owner\":\"");
    assert_true(strlen(p) > HILOCK_CLIENT_ID_LEN + 2);
    assert_int_equal(p[8], '-');
    assert_int_equal(p[HILOCK_CLIENT_ID_LEN], ':');
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(hl_wait_exit(pid, widen(10000)), 128 + SIGTERM);
    assert_free(f, "st");

    /* Held twice by the test: exactly its owner id and count. */
    c = client_for(f);
    lock = hold(c, "st");
    assert_int_equal(hilock_lock_acquire(lock), HILOCK_OK);
    snprintf(owner, sizeof owner,
             "{\"owner\":\"%s:%llu\",\"count\":2,\"held_ms\":",
             hilock_client_id(c),
             (unsigned long long)hilock_thread_owner());
    status_of(f, "st", out);
    assert_has(out, owner);
    snprintf(owner, sizeof owner, "\"pid\":%ld,\"program\":\"test_cli\"",
             (long)getpid());
    assert_has(out, owner);
    assert_int_equal(hilock_lock_release(lock), HILOCK_OK);
    assert_int_equal(hilock_lock_release(lock), HILOCK_OK);
    hilock_lock_destroy(lock);
    hilock_client_destroy(c);
    assert_free(f, "st");

    /* Held the way a Redisson client holds: no card, so null. */
    hl_redis_server_cmd(f->server, out, sizeof out, "HSET", "st",
                        "0b7d1f52-5c3e-4a47-9d3c-2f1e6a7b8c9d:77", "1",
                        (char *)NULL);
    status_of(f, "st", out);
    assert_has(out, "{\"owner\":\"0b7d1f52-5c3e-4a47-9d3c-2f1e6a7b8c9d:77\","
                    "\"count\":1,\"held_ms\":null,\"client\":null}");
    hl_redis_server_cmd(f->server, out, sizeof out, "DEL", "st",
                        (char *)NULL);
}

/* ls lists the locks and counters by pattern, with kind, holders and
 * waiters, and leaves out the keys kept beside a lock and values that are
 * neither. */
static void test_ls(void **state)
{
    fx *f = F(state);
    char out[OUT_CAP], reply[256];
    hilock_client *c = client_for(f);
    hilock_lock *lock = hold(c, "ls-held");
    hilock_lock *fair = NULL;

    assert_int_equal(hilock_lock_acquire(lock), HILOCK_OK);
    assert_int_equal(hilock_fair_lock_create(&fair, c, "ls-fair"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(fair, 0, 30000), HILOCK_OK);
    /* Answered after the grant's word on the same connection: it is in. */
    bool locked = false;
    assert_int_equal(hilock_lock_is_locked(fair, &locked), HILOCK_OK);
    assert_int_equal(TOOL(f, out, "latch", "set", "ls-latch", "4"), 0);
    hilock_semaphore *sem = NULL;
    bool set = false;
    int64_t available = 0;
    assert_int_equal(hilock_semaphore_create(&sem, c, "ls-sem"),
                     HILOCK_OK);
    assert_int_equal(hilock_semaphore_try_set(sem, 3, &set), HILOCK_OK);
    assert_int_equal(hilock_semaphore_available(sem, &available), HILOCK_OK);
    hl_redis_server_cmd(f->server, reply, sizeof reply, "SET", "ls-text",
                        "not a count", (char *)NULL);
    /* A count nobody said anything of: a semaphore's or a latch's that
     * only Redisson set, or any program's counter. */
    hl_redis_server_cmd(f->server, reply, sizeof reply, "SET", "ls-permits",
                        "7", (char *)NULL);
    hl_redis_server_cmd(f->server, reply, sizeof reply, "RPUSH", "ls-list",
                        "x", (char *)NULL);

    assert_int_equal(TOOL(f, out, "ls", "ls-*"), 0);
    assert_has(out, "NAME ");
    assert_has(out, "\nls-fair ");
    assert_has(out, "\nls-held ");
    assert_has(out, "\nls-latch ");
    assert_has(out, "count 4\n");
    /* Sorted by name. */
    assert_true(strstr(out, "ls-fair") < strstr(out, "ls-held"));
    assert_true(strstr(out, "ls-held") < strstr(out, "ls-latch"));
    assert_null(strstr(out, "ls-text"));
    assert_null(strstr(out, "ls-list"));
    assert_null(strstr(out, "redisson_"));
    assert_null(strstr(out, "hilock_"));

    assert_int_equal(TOOL(f, out, "ls", "--json", "ls-*"), 0);
    /* A held fair lock with nobody in its line has only the hash every
     * lock has: the word its grant left says it is fair. */
    assert_has(out, "{\"name\":\"ls-fair\",\"kind\":\"fair\","
                    "\"locked\":true,\"holders\":1,\"waiters\":0,");
    assert_has(out, "{\"name\":\"ls-held\",\"kind\":\"reentrant\","
                    "\"locked\":true,\"holders\":1,\"waiters\":0,");
    assert_has(out, "{\"name\":\"ls-latch\",\"kind\":\"latch\","
                    "\"count\":4}");
    assert_has(out, "{\"name\":\"ls-sem\",\"kind\":\"semaphore\","
                    "\"count\":3}");
    assert_has(out, "{\"name\":\"ls-permits\",\"kind\":\"unknown\","
                    "\"count\":7}");
    assert_int_equal(out[0], '[');
    /* How long the first holder has held, once its client listed it. */
    int64_t deadline = hl_now_ms() + widen(5000);
    while (TOOL(f, out, "ls", "--json", "ls-held") == 0 &&
           strstr(out, "\"held_ms\":null") != NULL && hl_now_ms() < deadline)
        usleep(50 * 1000);
    const char *held = strstr(out, "\"held_ms\":");
    if (held == NULL || held[10] < '0' || held[10] > '9')
        fail_msg("ls-held shows no time held:\n%s", out);
    assert_int_equal(TOOL(f, out, "ls", "ls-held"), 0);
    assert_has(out, "HELD_FOR");

    assert_int_equal(TOOL(f, out, "ls", "--json", "nothing-*"), 0);
    assert_string_equal(out, "[]\n");
    assert_int_equal(TOOL(f, out, "ls", "a", "b"), 64);
    assert_int_equal(TOOL(f, out, "ls", "--bogus"), 64);

    assert_int_equal(hilock_lock_release(fair), HILOCK_OK);
    assert_int_equal(hilock_lock_release(lock), HILOCK_OK);
    hilock_semaphore_destroy(sem);
    hilock_lock_destroy(fair);
    hilock_lock_destroy(lock);
    hilock_client_destroy(c);
}

/* Where the data cannot say what a name is, status reads the word the
 * hilock client that used it left: a fair lock nobody waits for, a
 * semaphore's count; a count without a word is unknown; a --kind the
 * word contradicts is refused. */
static void test_status_reads_the_word(void **state)
{
    fx *f = F(state);
    char out[OUT_CAP], reply[256];
    hilock_client *c = client_for(f);
    hilock_lock *fair = NULL;
    hilock_semaphore *sem = NULL;
    bool set = false, locked = false;
    int64_t available = 0;

    assert_int_equal(hilock_fair_lock_create(&fair, c, "w-fair"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(fair, 0, 30000), HILOCK_OK);
    assert_int_equal(hilock_lock_is_locked(fair, &locked), HILOCK_OK);
    status_of(f, "w-fair", out);
    assert_has(out, "{\"name\":\"w-fair\",\"kind\":\"fair\",\"locked\":true,");
    assert_has(out, "\"queue\":[]");
    assert_int_equal(TOOL(f, out, "status", "--kind", "reentrant", "w-fair"),
                     65);
    assert_int_equal(TOOL(f, out, "status", "--kind", "latch", "w-fair"), 65);
    assert_int_equal(hilock_lock_release(fair), HILOCK_OK);
    /* Free, it is still the fair lock it was a moment ago. */
    status_of(f, "w-fair", out);
    assert_has(out, "\"kind\":\"fair\",\"locked\":false");

    assert_int_equal(hilock_semaphore_create(&sem, c, "w-sem"),
                     HILOCK_OK);
    assert_int_equal(hilock_semaphore_try_set(sem, 4, &set), HILOCK_OK);
    assert_int_equal(hilock_semaphore_available(sem, &available), HILOCK_OK);
    status_of(f, "w-sem", out);
    assert_string_equal(out, "{\"name\":\"w-sem\",\"kind\":\"semaphore\","
                             "\"available\":4,\"permits\":[]}\n");
    assert_int_equal(TOOL(f, out, "status", "--kind", "latch", "w-sem"), 65);
    assert_int_equal(TOOL(f, out, "status", "--kind", "semaphore", "w-sem"),
                     0);

    /* An integer nobody said anything of: shown as it is. */
    hl_redis_server_cmd(f->server, reply, sizeof reply, "SET", "w-int",
                        "-12", (char *)NULL);
    status_of(f, "w-int", out);
    assert_string_equal(out, "{\"name\":\"w-int\",\"kind\":\"unknown\","
                             "\"count\":-12}\n");

    hilock_semaphore_destroy(sem);
    hilock_lock_destroy(fair);
    hilock_client_destroy(c);
}

typedef struct card_count {
    hilock_client *c;
    uint64_t acquires;
} card_count;

/* Whether c's card says it made the acquires. */
static bool card_counts(void *arg)
{
    card_count *w = arg;
    hilock_client_card *card = NULL;
    bool yes = hilock_client_card_get(w->c, hilock_client_id(w->c), &card) ==
                   HILOCK_OK &&
               card->stats != NULL && card->stats->acquires == w->acquires;
    hilock_client_card_free(card);
    return yes;
}

/* stats prints what a running client counts, from its card, as the
 * Prometheus text of that client, named by a comment. */
static void test_stats_of_a_running_client(void **state)
{
    fx *f = F(state);
    char out[OUT_CAP], want[256], pid[24];
    hilock_client *c = client_for(f);
    hilock_lock *lock;
    assert_int_equal(hilock_lock_create(&lock, c, "stats-lock"),
                     HILOCK_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(hilock_lock_acquire(lock), HILOCK_OK);
        assert_int_equal(hilock_lock_release(lock), HILOCK_OK);
    }
    card_count w = {c, 2};
    assert_true(hl_wait_until(card_counts, &w, widen(15000)));

    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    assert_int_equal(TOOL(f, out, "stats", "--pid", pid), 0);
    snprintf(want, sizeof want, "# client %s: %s[%s]@", hilock_client_id(c),
             program_invocation_short_name, pid);
    assert_has(out, want);
    snprintf(want, sizeof want,
             "# TYPE hilock_acquires_total counter\n"
             "hilock_acquires_total{client=\"%s\"} 2\n",
             hilock_client_id(c));
    assert_has(out, want);
    snprintf(want, sizeof want,
             "hilock_acquire_wait_seconds_count{client=\"%s\"} 2\n",
             hilock_client_id(c));
    assert_has(out, want);
    assert_int_equal(TOOL(f, out, "stats", "--client", hilock_client_id(c)),
                     0);
    assert_has(out, want);
    /* Nobody of that name runs. */
    assert_int_equal(TOOL(f, out, "stats", "--program", "no-such-program"),
                     66);
    assert_int_equal(TOOL(f, out, "stats", "--client", "short"), 64);
    assert_int_equal(TOOL(f, out, "stats", "--pid", "x"), 64);
    assert_int_equal(TOOL(f, out, "stats", "extra"), 64);

    /* A client gone: its card lasts a minute, but one not written for
     * 20 s is taken for a client that stopped, not one running. */
    char id[HILOCK_CLIENT_ID_LEN + 1], key[64];
    snprintf(id, sizeof id, "%s", hilock_client_id(c));
    hilock_lock_destroy(lock);
    hilock_client_destroy(c);
    snprintf(key, sizeof key, "hilock_client:{%s}", id);
    char reply[64];
    hl_redis_server_cmd(f->server, reply, sizeof reply, "PEXPIRE", key,
                        "40000", (char *)NULL);
    assert_string_equal(reply, ":1\r\n");
    assert_int_equal(TOOL(f, out, "stats", "--client", id), 66);
}

static void test_status_escapes_names(void **state)
{
    /* A quote, a backslash, control bytes, DEL, valid UTF-8 (e-acute and
     * a 4-byte emoji), a lone invalid byte and a truncated sequence. */
    static const char name[] = "q\"b\\s\x01\t\x7f \xc3\xa9 \xf0\x9f\x94\x92"
                               " \xff \xe2\x82";
    static const char want[] = "\"name\":\"q\\\"b\\\\s\\u0001\\u0009"
                               "\\u007f \xc3\xa9 \xf0\x9f\x94\x92 \\u00ff "
                               "\\u00e2\\u0082\"";
    fx *f = F(state);
    char out[OUT_CAP];
    hilock_client *c = client_for(f);
    hilock_lock *lock = hold(c, name);

    status_of(f, name, out);
    assert_has(out, want);
    assert_has(out, "\"locked\":true");
    assert_int_equal(hilock_lock_release(lock), HILOCK_OK);
    hilock_lock_destroy(lock);
    hilock_client_destroy(c);
    status_of(f, name, out);
    assert_has(out, want);
    assert_has(out, "\"locked\":false");
}

/* The layouts of Redisson's other kinds, written by hand. */
static void test_status_kinds(void **state)
{
    fx *f = F(state);
    char out[OUT_CAP], reply[256];
    hl_redis_server *s = f->server;
    int64_t t0;

    hl_redis_server_cmd(s, reply, sizeof reply, "HSET", "fair", "c:3", "1",
                        (char *)NULL);
    hl_redis_server_cmd(s, reply, sizeof reply, "PEXPIRE", "fair", "60000",
                        (char *)NULL);
    hl_redis_server_cmd(s, reply, sizeof reply, "RPUSH",
                        "redisson_lock_queue:{fair}", "a:1", "b\"2",
                        (char *)NULL);
    status_of(f, "fair", out);
    assert_has(out, "\"kind\":\"fair\",\"locked\":true");
    assert_has(out, "\"holders\":[{\"owner\":\"c:3\",\"count\":1,"
                    "\"held_ms\":null}]");
    assert_has(out, "\"waiters\":[{\"owner\":\"a:1\"},"
                    "{\"owner\":\"b\\\"2\"}]");
    /* No places in the zset yet: the line is shown, its times are not. */
    assert_has(out, "\"queue\":[{\"owner\":\"a:1\",\"expires_in_ms\":null},"
                    "{\"owner\":\"b\\\"2\",\"expires_in_ms\":null}]}\n");
    /* A place that ran out long ago, not yet dropped by an attempt. */
    hl_redis_server_cmd(s, reply, sizeof reply, "ZADD",
                        "redisson_lock_timeout:{fair}", "1000", "a:1",
                        (char *)NULL);
    status_of(f, "fair", out);
    assert_has(out, "\"queue\":[{\"owner\":\"a:1\",\"expires_in_ms\":-");
    assert_has(out, "{\"owner\":\"b\\\"2\",\"expires_in_ms\":null}]}\n");
    /* --kind that the data contradicts is refused, naming what is
     * there; the kind that is there is read. */
    assert_int_equal(TOOL(f, out, "status", "--kind", "reentrant", "fair"),
                     65);
    assert_has(out, "fair holds a fair lock, not a reentrant lock");
    assert_null(strstr(out, "{\"name\""));
    assert_int_equal(TOOL(f, out, "status", "-k", "fair", "fair"), 0);
    assert_has(out, "\"kind\":\"fair\"");
    /* Only the zset of places is enough to tell a fair lock. */
    hl_redis_server_cmd(s, reply, sizeof reply, "ZADD",
                        "redisson_lock_timeout:{tq}", "1000", "a:1",
                        (char *)NULL);
    status_of(f, "tq", out);
    assert_string_equal(out, "{\"name\":\"tq\",\"kind\":\"fair\","
                             "\"locked\":false,\"ttl_ms\":-1,"
                             "\"holders\":[],\"waiters\":[],"
                             "\"queue\":[]}\n");

    hl_redis_server_cmd(s, reply, sizeof reply, "HSET", "rw", "mode",
                        "write", "x:1:write", "2", (char *)NULL);
    hl_redis_server_cmd(s, reply, sizeof reply, "PEXPIRE", "rw", "60000",
                        (char *)NULL);
    status_of(f, "rw", out);
    assert_has(out, "\"kind\":\"read-write\",\"locked\":true");
    assert_has(out, "\"holders\":[{\"owner\":\"x:1:write\",\"count\":2,"
                    "\"held_ms\":null}]");
    assert_has(out, "\"mode\":\"write\",\"readers\":[],"
                    "\"writer\":{\"owner\":\"x:1\",\"count\":2,"
                    "\"held_ms\":null},"
                    "\"waiting_writers\":[]}\n");
    /* The writer reads too (a downgrade under way), another writer
     * waits. */
    hl_redis_server_cmd(s, reply, sizeof reply, "HSET", "rw", "x:1", "1",
                        (char *)NULL);
    hl_redis_server_cmd(s, reply, sizeof reply, "RPUSH",
                        "hilock_rwlock_line:{rw}", "w:2", (char *)NULL);
    hl_redis_server_cmd(s, reply, sizeof reply, "ZADD",
                        "hilock_rwlock_writers:{rw}", "1000", "w:2",
                        (char *)NULL);
    status_of(f, "rw", out);
    assert_has(out, "\"waiters\":[{\"owner\":\"w:2\"}],\"mode\":\"write\","
                    "\"readers\":[{\"owner\":\"x:1\",\"count\":1,"
                    "\"held_ms\":null}],"
                    "\"writer\":{\"owner\":\"x:1\",\"count\":2,"
                    "\"held_ms\":null},"
                    "\"waiting_writers\":[{\"owner\":\"w:2\"}]}\n");
    /* Readers only. */
    hl_redis_server_cmd(s, reply, sizeof reply, "HSET", "rr", "mode", "read",
                        "a:1", "2", (char *)NULL);
    hl_redis_server_cmd(s, reply, sizeof reply, "HSET", "rr", "b:2", "1",
                        (char *)NULL);
    status_of(f, "rr", out);
    assert_has(out, "\"kind\":\"read-write\",\"locked\":true");
    assert_has(out, "\"mode\":\"read\",\"readers\":[{\"owner\":\"a:1\","
                    "\"count\":2,\"held_ms\":null},{\"owner\":\"b:2\","
                    "\"count\":1,\"held_ms\":null}],"
                    "\"writer\":null,\"waiting_writers\":[]}\n");
    /* Free, but a writer waits: still a read-write lock. */
    hl_redis_server_cmd(s, reply, sizeof reply, "RPUSH",
                        "hilock_rwlock_line:{rw3}", "w:3", (char *)NULL);
    hl_redis_server_cmd(s, reply, sizeof reply, "ZADD",
                        "hilock_rwlock_writers:{rw3}", "1000", "w:3",
                        (char *)NULL);
    status_of(f, "rw3", out);
    assert_has(out, "\"kind\":\"read-write\",\"locked\":false");
    assert_has(out, "\"mode\":null,\"readers\":[],\"writer\":null,"
                    "\"waiting_writers\":[{\"owner\":\"w:3\"}]}\n");
    assert_int_equal(TOOL(f, out, "status", "--kind", "fair", "rw"), 65);
    assert_has(out, "rw holds a read-write lock, not a fair lock");
    assert_int_equal(TOOL(f, out, "status", "--kind", "write", "rw"), 0);
    /* Either side names the whole lock. */
    assert_int_equal(TOOL(f, out, "status", "--kind=read", "free"), 0);
    assert_string_equal(out, "{\"name\":\"free\",\"kind\":\"read-write\","
                             "\"locked\":false,\"ttl_ms\":-1,"
                             "\"holders\":[],\"waiters\":[],"
                             "\"mode\":null,\"readers\":[],"
                             "\"writer\":null,\"waiting_writers\":[]}\n");

    /* A name with its own hash tag keeps it: no braces added. */
    hl_redis_server_cmd(s, reply, sizeof reply, "RPUSH",
                        "redisson_lock_queue:{t}x", "w:1", (char *)NULL);
    status_of(f, "{t}x", out);
    assert_has(out, "\"kind\":\"fair\",\"locked\":false");
    assert_has(out, "\"waiters\":[{\"owner\":\"w:1\"}]");

    /* A waiting process shows as its client in the line, and, first in
     * it, as the one subscriber of Redisson's release channel. */
    {
        hilock_client *c = client_for(f);
        hilock_lock *lock = hold(c, "sub");
        char out_path[PATH_CAP];
        pid_t pid;

        path_in(f, out_path, sizeof out_path, "sub.out");
        pid = spawn_tool(f, out_path, "run", "sub", "--", "true",
                         (char *)NULL);
        for (t0 = hl_now_ms(); hl_now_ms() - t0 < widen(10000);) {
            if (hl_fixture_numsub(s, "redisson_lock__channel:{sub}") == 1)
                break;
            hl_sleep_ms(5);
        }
        status_of(f, "sub", out);
        const char *w = strstr(out, "\"waiters\":[{\"owner\":\"");
        if (w == NULL)
            fail_msg("no waiter in:\n%s", out);
        w += strlen("\"waiters\":[{\"owner\":\"");
        /* One client id, and nothing after it but the subscriber. */
        assert_true(strspn(w, "0123456789abcdef-") == HILOCK_CLIENT_ID_LEN);
        assert_has(w + HILOCK_CLIENT_ID_LEN,
                   "\",\"client\":{\"host\":");
        assert_has(w + HILOCK_CLIENT_ID_LEN, "}}],\"subscribers\":1}");
        assert_int_equal(hilock_lock_release(lock), HILOCK_OK);
        assert_int_equal(hl_wait_exit(pid, widen(10000)), 0);
        hilock_lock_destroy(lock);
        hilock_client_destroy(c);
    }

    /* Not a lock at all. */
    hl_redis_server_cmd(s, reply, sizeof reply, "SET", "str", "v",
                        (char *)NULL);
    assert_int_equal(TOOL(f, out, "status", "str"), 65);
}

/* Two `hilock run --kind fair` wait behind the test's hold: status shows
 * them in line order, each with the time its place has left. */
/* A Java holder, as Redisson's RFairLock takes it, beside a hilock
 * process waiting in the same line: status shows the Java holder with no
 * card and no start (Redisson lists none), and the waiter with its card;
 * the Java release hands the lock on to the hilock process. */
static void test_status_java_holder(void **state)
{
    fx *f = F(state);
    len_probe probe = {f->server, "redisson_lock_queue:{fj}", 1};
    char out[OUT_CAP], out_path[PATH_CAP], waiter[128], want[256];
    hilock_client *c = client_for(f);
    hl_rpeer java;

    hl_rpeer_init(&java, c, "fj", "0b7d1f52-5c3e-4a47-9d3c-2f1e6a7b8c9d");
    assert_int_equal(hl_rpeer_attempt(&java, 7, 30000), -1);
    path_in(f, out_path, sizeof out_path, "fj.out");
    pid_t pid = spawn_tool(f, out_path, "run", "--kind", "fair", "--wait",
                           "20s", "fj", "--", "true", (char *)NULL);
    if (!hl_wait_until(list_has_len, &probe, widen(10000)))
        fail_msg("the hilock run never joined the Java holder's line");
    list_entry(f, probe.key, 0, waiter, sizeof waiter);

    status_of(f, "fj", out);
    assert_has(out, "\"kind\":\"fair\",\"locked\":true");
    assert_has(out, "\"holders\":[{\"owner\":"
                    "\"0b7d1f52-5c3e-4a47-9d3c-2f1e6a7b8c9d:7\",\"count\":1,"
                    "\"held_ms\":null,\"client\":null}]");
    snprintf(want, sizeof want, "\"waiters\":[{\"owner\":\"%s\","
             "\"client\":{\"host\":", waiter);
    assert_has(out, want);
    assert_has(out, "\"program\":\"hilock\"");

    assert_int_equal(hl_rpeer_unlock(&java, 7, 30000), 1);
    int rc = hl_wait_exit(pid, widen(10000));
    if (rc != 0) {
        hl_file_read(out_path, out, sizeof out);
        hl_fail_run("the waiting run", rc, out);
    }
    assert_free(f, "fj");
    hilock_client_destroy(c);
}

static void test_status_fair_queue(void **state)
{
    fx *f = F(state);
    len_probe probe = { f->server, "redisson_lock_queue:{fq}", 0 };
    char out[OUT_CAP], out_path[PATH_CAP], owners[2][128];
    char want[512];
    hilock_client *c = client_for(f);
    hilock_lock *lock;
    const char *p;
    pid_t pids[2];
    int i;

    assert_int_equal(hilock_fair_lock_create(&lock, c, "fq"), HILOCK_OK);
    assert_int_equal(hilock_lock_acquire(lock), HILOCK_OK);
    for (i = 0; i < 2; i++) {
        char leaf[32];

        snprintf(leaf, sizeof leaf, "fq%d.out", i);
        path_in(f, out_path, sizeof out_path, leaf);
        pids[i] = spawn_tool(f, out_path, "run", "--kind", "fair", "fq",
                             "--", "true", (char *)NULL);
        /* One at a time, so that the order of the line is known. */
        probe.want = i + 1;
        if (!hl_wait_until(list_has_len, &probe, widen(10000)))
            fail_msg("run %d never joined the line", i);
        list_entry(f, probe.key, i, owners[i], sizeof owners[i]);
    }

    status_of(f, "fq", out);
    assert_has(out, "\"kind\":\"fair\",\"locked\":true");
    snprintf(want, sizeof want, "\"holders\":[{\"owner\":\"%s:%llu\","
             "\"count\":1,\"held_ms\":",
             hilock_client_id(c), (unsigned long long)hilock_thread_owner());
    assert_has(out, want);
    assert_has(strstr(out, want), ",\"client\":{");
    snprintf(want, sizeof want, "\"waiters\":[{\"owner\":\"%s\","
             "\"client\":{",
             owners[0]);
    assert_has(out, want);
    snprintf(want, sizeof want, "}},{\"owner\":\"%s\",\"client\":{",
             owners[1]);
    assert_has(out, want);
    p = strstr(out, "\"queue\":[");
    assert_non_null(p);
    for (i = 0; i < 2; i++) {
        long long ms;

        snprintf(want, sizeof want, "%s{\"owner\":\"%s\",\"expires_in_ms\":",
                 i ? "," : "[", owners[i]);
        p = strstr(p, want);
        if (p == NULL)
            fail_msg("waiter %d (%s) not in line order in:\n%s", i,
                     owners[i], out);
        p += strlen(want);
        ms = strtoll(p, NULL, 10);
        /* A place lasts the waiter timeout (5 s by default) from its last
         * renewal, and waiters renew it every third of that. */
        if (ms <= 0 || ms > 5000)
            fail_msg("waiter %d: expires_in_ms %lld in:\n%s", i, ms, out);
    }
    assert_non_null(strstr(p, "}]}\n"));

    /* Released: the line moves on and empties. */
    assert_int_equal(hilock_lock_release(lock), HILOCK_OK);
    for (i = 0; i < 2; i++) {
        int rc = hl_wait_exit(pids[i], widen(10000));

        if (rc != 0) {
            char leaf[32];

            snprintf(leaf, sizeof leaf, "fq%d.out", i);
            path_in(f, out_path, sizeof out_path, leaf);
            hl_file_read(out_path, out, sizeof out);
            fail_msg("run %d exited %d:\n%s", i, rc, out);
        }
    }
    assert_int_equal(TOOL(f, out, "status", "--kind", "fair", "fq"), 0);
    assert_string_equal(out, "{\"name\":\"fq\",\"kind\":\"fair\","
                             "\"locked\":false,\"ttl_ms\":-1,"
                             "\"holders\":[],\"waiters\":[],"
                             "\"queue\":[]}\n");
    hilock_lock_destroy(lock);
    hilock_client_destroy(c);
}

/* ---- unlock --force --------------------------------------------------- */

static void test_unlock_force(void **state)
{
    fx *f = F(state);
    char out[OUT_CAP], out_path[PATH_CAP], reply[64];
    hilock_client *c = client_for(f);
    hilock_lock *lock = hold(c, "uf");
    pid_t pid;
    int rc;

    path_in(f, out_path, sizeof out_path, "uf.out");
    pid = spawn_tool(f, out_path, "run", "--wait", "5000", "uf", "--",
                     "sh", "-c", "echo acquired", (char *)NULL);
    hl_sleep_ms(300);
    assert_true(still_running(pid));
    assert_int_equal(TOOL(f, out, "unlock", "--force", "uf"), 0);
    assert_string_equal(out, "deleted\n");
    rc = hl_wait_exit(pid, widen(15000));
    hl_file_read(out_path, out, sizeof out);
    if (rc != 0)
        hl_fail_run("the waiting run", rc, out);
    assert_has(out, "acquired");
    assert_int_equal(TOOL(f, out, "unlock", "--force", "uf"), 0);
    assert_string_equal(out, "not locked\n");
    /* The test's hold is gone: its release says so. */
    assert_int_not_equal(hilock_lock_release(lock), HILOCK_OK);
    hilock_lock_destroy(lock);
    hilock_client_destroy(c);

    /* A value that is not a lock is left alone. */
    hl_redis_server_cmd(f->server, reply, sizeof reply, "SET", "s", "v",
                        (char *)NULL);
    assert_int_equal(TOOL(f, out, "unlock", "--force", "s"), 65);
    hl_redis_server_cmd(f->server, reply, sizeof reply, "EXISTS", "s",
                        (char *)NULL);
    assert_string_equal(reply, ":1\r\n");
}

/* A read-write lock freed by force: the kind is read from the server, so
 * the waiting writer hears it on its own channel at once (the reader's
 * lease would keep it waiting a minute), and the reader's hold key goes
 * with the lock.  --kind names the kind outright. */
static void test_unlock_force_read_write(void **state)
{
    fx *f = F(state);
    char out[OUT_CAP], out_path[PATH_CAP], reply[256];
    hilock_client *c = client_for(f);
    hilock_lock *reader;
    pid_t pid;
    int rc;

    assert_int_equal(hilock_read_lock_create(&reader, c, "ufrw"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(reader, 0, 60000), HILOCK_OK);
    path_in(f, out_path, sizeof out_path, "ufrw.out");
    pid = spawn_tool(f, out_path, "run", "--kind", "write", "--wait",
                     "30000", "ufrw", "--", "sh", "-c", "echo acquired",
                     (char *)NULL);
    hl_sleep_ms(300);
    assert_true(still_running(pid));
    assert_int_equal(TOOL(f, out, "unlock", "--force", "ufrw"), 0);
    assert_string_equal(out, "deleted\n");
    rc = hl_wait_exit(pid, widen(15000));
    hl_file_read(out_path, out, sizeof out);
    if (rc != 0)
        hl_fail_run("the waiting writer", rc, out);
    assert_has(out, "acquired");
    hl_redis_server_cmd(f->server, reply, sizeof reply, "KEYS",
                        "*ufrw*rwlock_timeout*", (char *)NULL);
    assert_string_equal(reply, "*0\r\n");
    assert_int_equal(hilock_lock_release(reader), HILOCK_ELEASELOST);

    assert_int_equal(hilock_lock_try_acquire(reader, 0, 60000), HILOCK_OK);
    assert_int_equal(TOOL(f, out, "unlock", "--force", "--kind", "read",
                          "ufrw"), 0);
    assert_string_equal(out, "deleted\n");
    assert_int_equal(TOOL(f, out, "unlock", "--force", "--kind", "nope",
                          "ufrw"), 64);
    hilock_lock_destroy(reader);
    hilock_client_destroy(c);
}

/* ---- RedLock ------------------------------------------------------------
 * Five masters of the test's own.  Their URLs carry quarantine=200: a
 * master votes once it has been up that long, and the library reads a
 * master's uptime in whole seconds, so a fresh one keeps a client waiting
 * until 200 ms after it connected, as long as the server has been up for
 * less than a second.  Runs that must not see that wait say so with
 * --wait (the acquire keeps trying through it), or come after
 * wait_masters_vote(). */

#define N_MASTERS 5
#define URLS_CAP (N_MASTERS * 96)

/* The --redlock list for the masters, each URL ending in ?query. */
static void redlock_urls(hl_redis_server *const *s, const char *query,
                         char *out, size_t cap)
{
    size_t used = 0;
    int i;

    out[0] = '\0';
    for (i = 0; i < N_MASTERS; i++)
        used += (size_t)snprintf(out + used, cap - used,
                                 "%sredis://127.0.0.1:%d?%s", i ? "," : "",
                                 hl_redis_server_port(s[i]), query);
    assert_true(used < cap);
}

/* The tool with --redlock urls in the background, as spawn_tool. */
static pid_t spawn_redlock(const char *urls, const char *out_path, ...)
{
    const char *argv[MAX_ARGS];
    const char *a;
    sigset_t dfl;
    va_list ap;
    int n = 0;

    argv[n++] = HILOCK_TOOL_PATH;
    argv[n++] = "--redlock";
    argv[n++] = urls;
    va_start(ap, out_path);
    while ((a = va_arg(ap, const char *)) != NULL) {
        assert_true(n < MAX_ARGS - 1);
        argv[n++] = a;
    }
    va_end(ap);
    argv[n] = NULL;
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGTERM);
    sigaddset(&dfl, SIGINT);
    sigaddset(&dfl, SIGHUP);
    sigaddset(&dfl, SIGPIPE);
    return spawn_argv(argv, out_path, &dfl);
}

#define REDLOCK(urls, out, ...) tool_at(NULL, (out), widen(20000), \
                                        "--redlock", (urls), __VA_ARGS__, \
                                        (char *)NULL)

typedef struct uptime_probe {
    hl_redis_server *const *servers;
    long long min_s;
} uptime_probe;

static bool masters_up_for(void *arg)
{
    uptime_probe *p = arg;
    char reply[8192];
    const char *v;
    int i;

    for (i = 0; i < N_MASTERS; i++) {
        if (hl_redis_server_cmd(p->servers[i], reply, sizeof reply, "INFO",
                                "server", (char *)NULL) != '$')
            return false;
        v = strstr(reply, "uptime_in_seconds:");
        if (v == NULL || atoll(v + strlen("uptime_in_seconds:")) < p->min_s)
            return false;
    }
    return true;
}

/* Until every master has been up for a whole second, and so for more than
 * the quarantine of the URLs, as the library counts it. */
static void wait_masters_vote(hl_redis_server *const *s)
{
    uptime_probe p = { s, 1 };

    if (!hl_wait_until(masters_up_for, &p, widen(10000)))
        fail_msg("the masters did not report a second of uptime");
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;

    while ((text = strstr(text, needle)) != NULL) {
        n++;
        text += strlen(needle);
    }
    return n;
}

/* status of a RedLock lock, checked to be valid JSON with the masters of
 * s in order, into out; returns locked_on. */
static int redlock_status(const char *urls, hl_redis_server *const *s,
                          const char *name, int want_rc, char *out)
{
    char want[128];
    const char *p;
    int rc = REDLOCK(urls, out, "status", name);
    int i;

    if (rc != want_rc)
        fail_msg("status %s exited %d, not %d: %s", name, rc, want_rc, out);
    /* Masters that cannot be read say so on stderr, which the capture
     * mixes in; the JSON is the line of its own. */
    p = strstr(out, "{\"name\":");
    if (p == NULL || strchr(p, '\n') == NULL)
        fail_msg("no JSON line in:\n%s", out);
    memmove(out, p, (size_t)(strchr(p, '\n') - p) + 1);
    out[strchr(out, '\n') - out + 1] = '\0';
    assert_json_object(out);
    snprintf(want, sizeof want, "{\"name\":\"%s\",\"kind\":\"redlock\","
             "\"masters\":[{\"url\":", name);
    assert_has(out, want);
    p = out;
    for (i = 0; i < N_MASTERS; i++) {
        snprintf(want, sizeof want, "{\"url\":\"127.0.0.1:%d\",",
                 hl_redis_server_port(s[i]));
        if ((p = strstr(p, want)) == NULL)
            fail_msg("master %d missing or out of order in:\n%s", i, out);
    }
    assert_has(out, "\"quorum\":3,\"locked_on\":");
    p = strstr(out, "\"locked_on\":");
    assert_int_equal(count_of(out, "\"locked\":true"),
                     atoi(p + strlen("\"locked_on\":")));
    return atoi(p + strlen("\"locked_on\":"));
}

/* Every master that holds the lock names one holder, once, and they all
 * carry the same owner id after the client id, which differs by master
 * (each has a client of its own). */
static void assert_one_owner(const char *out)
{
    static const char key[] = "\"holders\":[{\"owner\":\"";
    char first[32] = "";
    const char *p = out;

    while ((p = strstr(p, key)) != NULL) {
        const char *end = strchr(p + sizeof key - 1, '"');
        const char *colon = end;
        char id[32];

        assert_non_null(end);
        while (colon > p && *colon != ':')
            colon--;
        snprintf(id, sizeof id, "%.*s", (int)(end - colon), colon);
        if (first[0] == '\0')
            snprintf(first, sizeof first, "%s", id);
        else if (strcmp(first, id) != 0)
            fail_msg("owners %s and %s in:\n%s", first, id, out);
        const char *close = strstr(end, "}}]");
        const char *card = strstr(end, ",\"client\":{");
        if (strncmp(end, "\",\"count\":1,\"held_ms\":", 22) != 0 ||
            card == NULL || close == NULL || card > close ||
            memchr(end, '[', (size_t)(close - end)))
            fail_msg("not one holder with count 1 in:\n%s", out);
        p = end;
    }
    assert_true(first[0] != '\0');
}

/* A run in the background that holds name until killed. */
static pid_t redlock_holder(const fx *f, const char *urls, const char *name,
                            const char *leaf)
{
    char out_path[PATH_CAP], ready[PATH_CAP], script[SCRIPT_CAP];
    char ready_leaf[64];
    pid_t pid;

    snprintf(ready_leaf, sizeof ready_leaf, "%s.ready", leaf);
    path_in(f, ready, sizeof ready, ready_leaf);
    path_in(f, out_path, sizeof out_path, leaf);
    snprintf(script, sizeof script, "touch %s; exec sleep 30", ready);
    pid = spawn_redlock(urls, out_path, "run", "--wait", "10000", name, "--",
                        "sh", "-c", script, (char *)NULL);
    wait_for_file(ready);
    return pid;
}

static void test_redlock_run_and_status(void **state)
{
    fx *f = F(state);
    hl_redis_server *s[N_MASTERS];
    char urls[URLS_CAP], strict[URLS_CAP], out[OUT_CAP];
    int locked_on;
    pid_t pid;

    hl_fixture_masters(s, N_MASTERS);
    redlock_urls(s, "quarantine=200", urls, sizeof urls);

    /* At once: the masters are still in quarantine, and the run waits it
     * out. */
    assert_int_equal(REDLOCK(urls, out, "run", "--wait", "10000", "rl",
                             "--", "sh", "-c", "echo ran"),
                     0);
    assert_has(out, "ran\n");
    wait_masters_vote(s);
    assert_int_equal(redlock_status(urls, s, "rl", 0, out), 0);
    assert_int_equal(count_of(out, "\"locked\":false,\"ttl_ms\":-1,"
                                   "\"holders\":[]"),
                     N_MASTERS);

    /* A quarantine longer than the masters' uptime: no master votes. */
    redlock_urls(s, "quarantine=60000", strict, sizeof strict);
    assert_int_equal(REDLOCK(strict, out, "run", "--wait", "300", "rl", "--",
                             "sh", "-c", "echo ran"),
                     69);
    assert_null(strstr(out, "ran\n"));
    assert_has(out, "quorum");
    assert_has(out, "quarantined");

    /* Held by a run: a quorum at least shows the same owner. */
    pid = redlock_holder(f, urls, "rl", "rl.out");
    locked_on = redlock_status(urls, s, "rl", 0, out);
    if (locked_on < 3)
        fail_msg("held on %d masters only:\n%s", locked_on, out);
    assert_one_owner(out);
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(hl_wait_exit(pid, widen(10000)), 128 + SIGTERM);
    assert_int_equal(redlock_status(urls, s, "rl", 0, out), 0);

    /* Two masters down: still a quorum. */
    hl_fixture_kill9(s[3]);
    hl_fixture_kill9(s[4]);
    assert_int_equal(REDLOCK(urls, out, "run", "rl", "--", "sh", "-c",
                             "echo ran"),
                     0);
    assert_has(out, "ran\n");
    pid = redlock_holder(f, urls, "rl", "rl2.out");
    assert_int_equal(redlock_status(urls, s, "rl", 0, out), 3);
    assert_one_owner(out);
    assert_int_equal(count_of(out, "\"locked\":null,\"ttl_ms\":null,"
                                   "\"holders\":null,"
                                   "\"error\":\"unreachable\""),
                     2);
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(hl_wait_exit(pid, widen(10000)), 128 + SIGTERM);

    /* Three down: no quorum, nothing runs. */
    hl_fixture_kill9(s[2]);
    assert_int_equal(REDLOCK(urls, out, "run", "rl", "--", "sh", "-c",
                             "echo ran"),
                     69);
    assert_null(strstr(out, "ran\n"));
    assert_has(out, "fewer than 3 of 5 masters");
    assert_int_equal(REDLOCK(urls, out, "status", "rl"), 69);
    hl_fixture_stop_masters(s, N_MASTERS);
}

static void test_redlock_not_acquired(void **state)
{
    fx *f = F(state);
    hl_redis_server *s[N_MASTERS];
    char urls[URLS_CAP], out[OUT_CAP];
    int64_t t0, took;
    pid_t pid;

    hl_fixture_masters(s, N_MASTERS);
    redlock_urls(s, "quarantine=200", urls, sizeof urls);
    wait_masters_vote(s);
    pid = redlock_holder(f, urls, "rb", "rb.out");
    t0 = hl_now_ms();
    assert_int_equal(REDLOCK(urls, out, "run", "--wait", "300", "rb", "--",
                             "sh", "-c", "echo ran"),
                     75);
    took = hl_now_ms() - t0;
    assert_null(strstr(out, "ran\n"));
    assert_true(took >= 290);
    assert_int_equal(REDLOCK(urls, out, "run", "--wait=0", "rb", "--",
                             "true"),
                     75);
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(hl_wait_exit(pid, widen(10000)), 128 + SIGTERM);
    assert_int_equal(REDLOCK(urls, out, "run", "--wait=0", "rb", "--",
                             "true"),
                     0);
    hl_fixture_stop_masters(s, N_MASTERS);
}

static void test_redlock_lease_lost(void **state)
{
    fx *f = F(state);
    hl_redis_server *s[N_MASTERS];
    char urls[URLS_CAP], out[OUT_CAP], out_path[PATH_CAP];
    char ready[PATH_CAP], script[SCRIPT_CAP], reply[64];
    int i, rc;
    pid_t pid;

    hl_fixture_masters(s, N_MASTERS);
    redlock_urls(s, "quarantine=200", urls, sizeof urls);
    path_in(f, out_path, sizeof out_path, "rll.out");
    path_in(f, ready, sizeof ready, "rll.ready");
    snprintf(script, sizeof script,
             "trap 'echo got-term; kill $!; exit 0' TERM; touch %s; "
             "sleep 30 & wait",
             ready);
    pid = spawn_redlock(urls, out_path, "--watchdog", "1000", "run",
                        "--wait", "10000", "rll", "--", "sh", "-c", script,
                        (char *)NULL);
    wait_for_file(ready);
    /* Whichever masters the hold has, at most two of them are left. */
    for (i = 0; i < 3; i++)
        assert_int_equal(hl_redis_server_cmd(s[i], reply, sizeof reply,
                                             "DEL", "rll", (char *)NULL),
                         ':');
    rc = hl_wait_exit(pid, widen(15000));
    hl_file_read(out_path, out, sizeof out);
    if (rc != 76)
        fail_msg("exit %d; output:\n%s", rc, out);
    assert_has(out, "got-term");
    assert_has(out, "lost the lock rll");
    hl_fixture_stop_masters(s, N_MASTERS);
}

static void test_redlock_usage(void **state)
{
    static const char *const cases[][8] = {
        { "run", "--kind", "fair", "u", "--", "true" },
        { "run", "--kind=reentrant", "u", "--", "true" },
        { "run", "--fence-env", "u", "--", "true" },
        { "status", "--kind", "reentrant", "u" },
        { "unlock", "--force", "u" },
        { "demo" },
    };
    static const char *const lists[] = {
        "redis://127.0.0.1:1,redis://127.0.0.1:2",
        "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3,"
        "redis://127.0.0.1:4",
        "redis://127.0.0.1:1,,redis://127.0.0.1:3",
        "redis://127.0.0.1:1,redis://:hunter2@127.0.0.1:x,"
        "redis://127.0.0.1:3",
    };
    const char *three = "redis://127.0.0.1:1,redis://127.0.0.1:2,"
                        "redis://127.0.0.1:3";
    fx *f = F(state);
    char out[OUT_CAP];
    const char *argv[MAX_ARGS];
    size_t i;
    int n, k, rc;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        n = 0;
        argv[n++] = HILOCK_TOOL_PATH;
        argv[n++] = "--redlock";
        argv[n++] = three;
        for (k = 0; k < 8 && cases[i][k] != NULL; k++)
            argv[n++] = cases[i][k];
        argv[n] = NULL;
        rc = hl_run(argv, out, sizeof out, widen(20000));
        if (rc != 64)
            fail_msg("case %zu (%s %s ...) exited %d, not 64:\n%s", i,
                     cases[i][0], cases[i][1] ? cases[i][1] : "", rc, out);
        assert_has(out, "redlock");
    }
    for (i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        assert_int_equal(REDLOCK(lists[i], out, "status", "u"), 64);
        assert_has(out, "usage");
        assert_null(strstr(out, "hunter2"));
    }
    /* --redis beside --redlock is a contradiction; $HILOCK_REDIS is only
     * a default, which --redlock replaces. */
    assert_int_equal(tool_at(f->url, out, widen(20000), "--redlock", three,
                             "status", "u", (char *)NULL),
                     64);
    assert_int_equal(tool_at(NULL, out, widen(20000), "--help",
                             (char *)NULL),
                     0);
    assert_has(out, "--redlock URL1,...,URLn");
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exit_status_passes_through,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_acquired_within_wait, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_lease_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_hold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_delay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_revoke, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreachable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overlong_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_not_found, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_signals_forwarded, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_child_signal_dispositions,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_run_takes_command_along,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_own_group, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_group_signalled, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_terminal_handed_over, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_mutual_exclusion, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fence_env, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ls, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_status_reads_the_word, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_stats_of_a_running_client,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_escapes_names, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_status_kinds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_fair_queue, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_status_java_holder, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_unlock_force, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unlock_force_read_write, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_redlock_run_and_status, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_redlock_not_acquired, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_redlock_lease_lost, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_redlock_usage, setup, teardown),
    };

    if (argc == 5 && strcmp(argv[1], "--beat") == 0)
        return beat_main(argv);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
