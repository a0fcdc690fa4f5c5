/* The fixture is what every other test trusts to tell a working lock from
 * a broken one, so it gets tests of its own. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "support/fixture.h"

/* ctest-timeout: 120 */

static char reply[4096];

/* A client the fixture knows nothing about, to be the victim of faults. */
static int raw_connect(const hl_redis_server *s)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)hl_redis_server_port(s));
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

/* Sends an inline command and returns what the server answered first. */
static void raw_roundtrip(int fd, const char *line, char *out, size_t cap)
{
    struct pollfd pfd = { fd, POLLIN, 0 };
    ssize_t n;

    assert_int_equal(send(fd, line, strlen(line), MSG_NOSIGNAL),
                     (ssize_t)strlen(line));
    assert_int_equal(poll(&pfd, 1, 5000), 1);
    n = recv(fd, out, cap - 1, 0);
    assert_true(n > 0);
    out[n] = '\0';
}

static bool raw_closed_by_peer(int fd, int timeout_ms)
{
    struct pollfd pfd = { fd, POLLIN, 0 };
    char c;

    return poll(&pfd, 1, timeout_ms) == 1 && recv(fd, &c, 1, 0) <= 0;
}

static void test_plain_answers(void **state)
{
    hl_redis_server *s = hl_fixture_plain();

    (void)state;
    assert_true(hl_redis_server_port(s) > 0);
    assert_true(hl_redis_server_pid(s) > 0);
    assert_true(hl_redis_server_is_running(s));
    assert_false(hl_redis_server_is_tls(s));
    assert_true(hl_redis_server_ping(s, 2000));

    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "PING",
                                         (char *)NULL), '+');
    assert_string_equal(reply, "+PONG\r\n");
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "SET", "k",
                                         "v", (char *)NULL), '+');
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "GET", "k",
                                         (char *)NULL), '$');
    assert_string_equal(reply, "$1\r\nv\r\n");
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "NOPE",
                                         (char *)NULL), '-');

    /* No persistence, whatever the defaults of the installed server. */
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "CONFIG",
                                         "GET", "save", (char *)NULL), '*');
    assert_string_equal(reply, "*2\r\n$4\r\nsave\r\n$0\r\n\r\n");
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "CONFIG",
                                         "GET", "appendonly", (char *)NULL),
                     '*');
    assert_string_equal(reply, "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n");

    /* A reply that does not fit is an error, not a silent truncation. */
    assert_int_equal(hl_redis_server_cmd(s, reply, 4, "PING", (char *)NULL),
                     -1);
    hl_redis_server_stop(s);
}

static void test_password(void **state)
{
    hl_redis_server *s = hl_fixture_plain_with("sesame", NULL);

    (void)state;
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "PING",
                                         (char *)NULL), '+');
    hl_redis_server_set_auth(s, NULL, NULL);
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "PING",
                                         (char *)NULL), '-');
    assert_memory_equal(reply, "-NOAUTH", 7);
    hl_redis_server_stop(s);
}

static void test_acl_user(void **state)
{
    hl_redis_server *s = hl_fixture_plain();

    (void)state;
    hl_fixture_acl_user(s, "alice", "secret");
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "AUTH",
                                         "alice", "secret", (char *)NULL),
                     '+');
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "AUTH",
                                         "alice", "wrong", (char *)NULL),
                     '-');
    assert_memory_equal(reply, "-WRONGPASS", 10);

    hl_redis_server_set_auth(s, "alice", "secret");
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "ACL",
                                         "WHOAMI", (char *)NULL), '$');
    assert_string_equal(reply, "$5\r\nalice\r\n");
    hl_redis_server_set_auth(s, "alice", "wrong");
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "PING",
                                         (char *)NULL), -1);
    hl_redis_server_stop(s);
}

static int run_redis_cli(const hl_redis_server *s, const char *cacert,
                         const char *cert, const char *key, char *out,
                         size_t cap)
{
    char port[16];
    const char *argv[] = { "redis-cli", "--tls", "--cacert", cacert,
                           "--cert", cert, "--key", key, "-h", "127.0.0.1",
                           "-p", port, "PING", NULL };

    snprintf(port, sizeof port, "%d", hl_redis_server_port(s));
    return hl_run(argv, out, cap, 10000);
}

static void test_tls(void **state)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    hl_redis_server *s = hl_fixture_tls("yes");
    char out[1024], port[16];
    int fd;

    (void)state;
    assert_true(hl_redis_server_is_tls(s));
    assert_int_equal(run_redis_cli(s, t->ca_cert, t->client_cert,
                                   t->client_key, out, sizeof out), 0);
    assert_string_equal(out, "PONG\n");

    /* The helper speaks TLS too, with the client certificate. */
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "PING",
                                         (char *)NULL), '+');
    assert_true(hl_redis_server_ping(s, 2000));

    /* The client must refuse a server its CA did not sign... */
    run_redis_cli(s, t->wrong_ca_cert, t->client_cert, t->client_key, out,
                  sizeof out);
    assert_null(strstr(out, "PONG"));
    /* ...and the server a client certificate from elsewhere. */
    run_redis_cli(s, t->ca_cert, t->wrong_client_cert, t->wrong_client_key,
                  out, sizeof out);
    assert_null(strstr(out, "PONG"));

    /* TLS-only: plain text on the port gets no answer. */
    snprintf(port, sizeof port, "%d", hl_redis_server_port(s));
    {
        const char *plain[] = { "redis-cli", "-h", "127.0.0.1", "-p", port,
                                "PING", NULL };
        hl_run(plain, out, sizeof out, 10000);
        assert_null(strstr(out, "PONG"));
    }
    fd = raw_connect(s);
    close(fd);

    hl_fixture_kill9(s);
    hl_fixture_restart(s);
    assert_int_equal(run_redis_cli(s, t->ca_cert, t->client_cert,
                                   t->client_key, out, sizeof out), 0);
    assert_string_equal(out, "PONG\n");
    hl_redis_server_stop(s);
}

static void test_kill9_restart(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    int port = hl_redis_server_port(s);
    pid_t old = hl_redis_server_pid(s);

    (void)state;
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "SET", "k",
                                         "v", (char *)NULL), '+');
    hl_fixture_kill9(s);
    assert_false(hl_redis_server_is_running(s));
    assert_int_equal(hl_redis_server_pid(s), 0);
    assert_int_equal(kill(old, 0), -1);
    assert_int_equal(errno, ESRCH);
    assert_false(hl_redis_server_ping(s, 200));

    hl_fixture_restart(s);
    assert_int_equal(hl_redis_server_port(s), port);
    assert_true(hl_redis_server_pid(s) > 0);
    assert_int_not_equal(hl_redis_server_pid(s), old);
    assert_true(hl_redis_server_ping(s, 2000));
    /* A restart loses the data, as a master without AOF does. */
    assert_int_equal(hl_redis_server_cmd(s, reply, sizeof reply, "GET", "k",
                                         (char *)NULL), '$');
    assert_string_equal(reply, "$-1\r\n");

    /* Restart of a running server kills it first. */
    old = hl_redis_server_pid(s);
    hl_fixture_restart(s);
    assert_int_equal(hl_redis_server_port(s), port);
    assert_int_not_equal(hl_redis_server_pid(s), old);
    assert_true(hl_redis_server_ping(s, 2000));
    hl_redis_server_stop(s);
}

static void test_pause_resume(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    int64_t t0;

    (void)state;
    hl_fixture_pause(s);
    assert_true(hl_redis_server_is_running(s));
    assert_false(hl_redis_server_ping(s, 200));
    hl_fixture_resume(s);
    assert_true(hl_redis_server_ping(s, 2000));

    /* Stopping a paused server must not wait for the SIGKILL fallback. */
    hl_fixture_pause(s);
    t0 = hl_now_ms();
    hl_redis_server_stop(s);
    assert_true(hl_now_ms() - t0 < 3000);
}

static void test_masters(void **state)
{
    hl_redis_server *m[3];
    int i, j;

    (void)state;
    hl_fixture_masters(m, 3);
    for (i = 0; i < 3; i++) {
        assert_true(hl_redis_server_ping(m[i], 2000));
        for (j = 0; j < i; j++) {
            assert_int_not_equal(hl_redis_server_port(m[i]),
                                 hl_redis_server_port(m[j]));
            assert_string_not_equal(hl_redis_server_dir(m[i]),
                                    hl_redis_server_dir(m[j]));
        }
    }
    assert_int_equal(hl_redis_server_cmd(m[0], reply, sizeof reply, "SET",
                                         "k", "v", (char *)NULL), '+');
    assert_int_equal(hl_redis_server_cmd(m[1], reply, sizeof reply, "GET",
                                         "k", (char *)NULL), '$');
    assert_string_equal(reply, "$-1\r\n");
    hl_fixture_stop_masters(m, 3);
    assert_null(m[0]);
}

static void test_stop_cleans_up(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    char *dir = strdup(hl_redis_server_dir(s));
    pid_t pid = hl_redis_server_pid(s);
    struct stat st;

    (void)state;
    assert_int_equal(stat(dir, &st), 0);
    hl_redis_server_stop(s);
    assert_int_equal(stat(dir, &st), -1);
    assert_int_equal(errno, ENOENT);
    /* Reaped, not a zombie: the pid no longer exists at all. */
    assert_int_equal(kill(pid, 0), -1);
    assert_int_equal(errno, ESRCH);
    free(dir);
    hl_redis_server_stop(NULL);
}

static void test_start_failure_is_fast(void **state)
{
    const char *saved = getenv("HILOCK_REDIS_SERVER");
    char *copy = saved ? strdup(saved) : NULL;
    hl_redis_server *s;
    int64_t t0 = hl_now_ms();

    (void)state;
    setenv("HILOCK_REDIS_SERVER", "/bin/false", 1);
    s = hl_redis_server_start(NULL);
    if (copy)
        setenv("HILOCK_REDIS_SERVER", copy, 1);
    else
        unsetenv("HILOCK_REDIS_SERVER");
    free(copy);
    assert_null(s);
    assert_true(hl_now_ms() - t0 < 2000);
}

struct numsub_arg {
    hl_redis_server *s;
    long long want;
};

static bool numsub_is(void *p)
{
    struct numsub_arg *a = p;

    return hl_fixture_numsub(a->s, "news") == a->want;
}

static void test_client_kill(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    struct numsub_arg arg = { s, 1 };
    char out[256];
    int normal, sub;

    (void)state;
    normal = raw_connect(s);
    raw_roundtrip(normal, "PING\r\n", out, sizeof out);
    assert_string_equal(out, "+PONG\r\n");
    sub = raw_connect(s);
    raw_roundtrip(sub, "SUBSCRIBE news\r\n", out, sizeof out);
    assert_true(hl_wait_until(numsub_is, &arg, 2000));

    assert_int_equal(hl_fixture_client_kill(s, "normal"), 1);
    assert_true(raw_closed_by_peer(normal, 2000));
    assert_true(hl_redis_server_ping(s, 2000));

    assert_int_equal(hl_fixture_client_kill(s, "pubsub"), 1);
    assert_true(raw_closed_by_peer(sub, 2000));
    arg.want = 0;
    assert_true(hl_wait_until(numsub_is, &arg, 2000));
    close(normal);
    close(sub);
    hl_redis_server_stop(s);
}

static void test_debug_sleep(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    int64_t t0, t1;

    (void)state;
    t0 = hl_now_ms();
    hl_fixture_debug_sleep(s, 1.0);
    t1 = hl_now_ms();
    assert_true(t1 - t0 < 800);
    /* The server is busy for most of the second that follows. */
    assert_true(hl_redis_server_ping(s, 5000));
    assert_true(hl_now_ms() - t1 > 500);
    hl_redis_server_stop(s);
}

static bool never(void *arg)
{
    (void)arg;
    return false;
}

static void test_wait_until(void **state)
{
    int64_t t0 = hl_now_ms();

    (void)state;
    assert_false(hl_wait_until(never, NULL, 100));
    assert_true(hl_now_ms() - t0 >= 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_answers),
        cmocka_unit_test(test_password),
        cmocka_unit_test(test_acl_user),
        cmocka_unit_test(test_tls),
        cmocka_unit_test(test_kill9_restart),
        cmocka_unit_test(test_pause_resume),
        cmocka_unit_test(test_masters),
        cmocka_unit_test(test_stop_cleans_up),
        cmocka_unit_test(test_start_failure_is_fast),
        cmocka_unit_test(test_client_kill),
        cmocka_unit_test(test_debug_sleep),
        cmocka_unit_test(test_wait_until),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
