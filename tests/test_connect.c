/* Connecting a client: plain and TLS, credentials, SELECT, every way the
 * first connection can fail and the status each failure must map to, the
 * thread rules of a client on the caller's loop, and handle life cycle.
 * Every server is a real redis-server; the peers that never answer are
 * listening sockets owned by the test, since no server can be made to
 * accept a connection and then stay mute for a chosen time. */
/* ctest-timeout: 120 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include <ev.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/options.h"
#include "hilock/reply.h"
#include "support/fixture.h"

/* ---- helpers ---------------------------------------------------------- */

static bool under_valgrind(void)
{
    return getenv("HILOCK_TEST_UNDER_VALGRIND") != NULL;
}

/* Valgrind runs the library tens of times slower, so bounds that catch a
 * hang on a normal build would catch mere slowness there. */
static int widen(int ms)
{
    return under_valgrind() ? ms * 10 : ms;
}

/* hilock_last_error() only lasts until the next hilock call, and freeing
 * the options is one; keep the detail of the interesting call here. */
static char detail[256];

static void keep_detail(void)
{
    snprintf(detail, sizeof detail, "%s", hilock_last_error());
}

static void assert_detail_has(const char *needle)
{
    if (strstr(detail, needle) == NULL)
        fail_msg("error detail \"%s\" does not mention \"%s\"", detail,
                 needle);
}

/* Paths end up in URL query values, where '/' and friends must be
 * percent-encoded; encoding every reserved byte keeps odd TMPDIRs safe. */
static void pct_encode(char *out, size_t cap, const char *in)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;

    for (; *in != '\0'; in++) {
        unsigned char ch = (unsigned char)*in;
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
                     || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.'
                     || ch == '_' || ch == '~';

        assert_true(n + 4 < cap);
        if (plain) {
            out[n++] = (char)ch;
        } else {
            out[n++] = '%';
            out[n++] = hex[ch >> 4];
            out[n++] = hex[ch & 15];
        }
    }
    out[n] = '\0';
}

static hilock_options *options_for(const char *url)
{
    hilock_options *o = NULL;

    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    if (under_valgrind()) {
        /* A TLS handshake under valgrind can outlast the defaults; a URL
         * that names its own timeouts still overrides these. */
        assert_int_equal(hilock_options_set_connect_timeout_ms(o, 20000),
                         HILOCK_OK);
        assert_int_equal(hilock_options_set_command_timeout_ms(o, 20000),
                         HILOCK_OK);
    }
    if (hilock_options_set_url(o, url) != HILOCK_OK)
        fail_msg("URL %s refused: %s", url, hilock_last_error());
    return o;
}

/* Creates a client from a URL; the detail of a failure lands in detail. */
static int create_url(hilock_client **out, const char *url)
{
    hilock_options *o = options_for(url);
    int rc = hilock_client_create(out, o);

    keep_detail();
    hilock_options_free(o);
    if (rc != HILOCK_OK)
        assert_null(*out);
    return rc;
}

static hilock_client *connect_url(const char *url)
{
    hilock_client *c = NULL;

    if (create_url(&c, url) != HILOCK_OK)
        fail_msg("connecting to %s failed: %s", url, detail);
    assert_non_null(c);
    return c;
}

static void plain_url(char *out, size_t cap, const hl_redis_server *s,
                      const char *rest)
{
    snprintf(out, cap, "redis://127.0.0.1:%d%s", hl_redis_server_port(s),
             rest ? rest : "");
}

/* rediss://host:port?ca_file=CA[&cert_file=..&key_file=..][&extra] */
static void tls_url(char *out, size_t cap, const char *host, int port,
                    const char *ca, bool client_cert, const char *extra)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    char ca_enc[1024], cert_enc[1024], key_enc[1024];
    int n;

    pct_encode(ca_enc, sizeof ca_enc, ca);
    pct_encode(cert_enc, sizeof cert_enc, t->client_cert);
    pct_encode(key_enc, sizeof key_enc, t->client_key);
    n = snprintf(out, cap, "rediss://%s:%d?ca_file=%s%s%s%s%s%s%s", host,
                 port, ca_enc, client_cert ? "&cert_file=" : "",
                 client_cert ? cert_enc : "",
                 client_cert ? "&key_file=" : "",
                 client_cert ? key_enc : "", extra ? "&" : "",
                 extra ? extra : "");
    assert_true(n > 0 && (size_t)n < cap);
}

/* A command from NULL-terminated string arguments. */
static int run(hilock_client *c, hilock_reply **reply, const char *arg0, ...)
    __attribute__((sentinel));

static int run(hilock_client *c, hilock_reply **reply, const char *arg0, ...)
{
    const char *argv[16];
    int argc = 0, rc;
    va_list ap;

    va_start(ap, arg0);
    for (const char *a = arg0; a != NULL; a = va_arg(ap, const char *)) {
        assert_true(argc < 16);
        argv[argc++] = a;
    }
    va_end(ap);
    rc = hilock_client_command(c, argc, argv, NULL, reply);
    keep_detail();
    return rc;
}

static void assert_reply(const hilock_reply *r, hilock_reply_type type,
                         const char *text)
{
    assert_non_null(r);
    assert_int_equal(r->type, type);
    assert_int_equal(r->len, strlen(text));
    assert_memory_equal(r->str, text, r->len);
}

static void assert_pong(hilock_client *c)
{
    hilock_reply *r = NULL;

    if (run(c, &r, "PING", (char *)NULL) != HILOCK_OK)
        fail_msg("PING failed: %s", detail);
    assert_reply(r, HILOCK_REPLY_STATUS, "PONG");
    hilock_reply_free(r);
}

static void destroy(hilock_client *c)
{
    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
}

static int bound_socket(int *port, bool listening)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    if (listening)
        assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

/* The kernel completes the TCP handshake for the backlog, so a client
 * gets a connected socket and then hears nothing, ever. */
static int silent_listener(int *port)
{
    return bound_socket(port, true);
}

/* Takes the oldest connection the silent listener queued (the client has
 * given it up by now) and returns what the client had sent on it. */
static size_t sent_to_listener(int listener, unsigned char *buf, size_t cap)
{
    struct pollfd pfd = { listener, POLLIN, 0 };
    size_t got = 0;
    int fd;

    assert_int_equal(poll(&pfd, 1, widen(2000)), 1);
    fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    assert_true(fd >= 0);
    pfd.fd = fd;
    while (got < cap && poll(&pfd, 1, widen(2000)) == 1) {
        ssize_t n = recv(fd, buf + got, cap - got, 0);

        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    return got;
}

static int setup_plain(void **state)
{
    *state = hl_fixture_plain();
    return 0;
}

static int setup_tls(void **state)
{
    *state = hl_fixture_tls("optional");
    return 0;
}

static int setup_tls_required(void **state)
{
    *state = hl_fixture_tls("yes");
    return 0;
}

static int teardown_server(void **state)
{
    hl_redis_server_stop(*state);
    *state = NULL;
    return 0;
}

/* ---- plain ------------------------------------------------------------ */

static void assert_uuid_v4(const char *id)
{
    assert_non_null(id);
    assert_int_equal(strlen(id), HILOCK_CLIENT_ID_LEN);
    for (int i = 0; i < HILOCK_CLIENT_ID_LEN; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            assert_int_equal(id[i], '-');
            continue;
        }
        if (strchr("0123456789abcdef", id[i]) == NULL || id[i] == '\0')
            fail_msg("client id %s: '%c' at %d is not lower-case hex", id,
                     id[i], i);
    }
    assert_int_equal(id[14], '4');
    if (strchr("89ab", id[19]) == NULL)
        fail_msg("client id %s: variant nibble '%c' is not RFC 4122", id,
                 id[19]);
}

static void test_plain_connect(void **state)
{
    char url[256];
    hilock_client *a, *b;

    plain_url(url, sizeof url, *state, NULL);
    a = connect_url(url);
    b = connect_url(url);

    assert_pong(a);
    assert_int_equal(hilock_client_is_connected(a), 1);
    assert_int_equal(hilock_client_is_tls(a), 0);
    assert_non_null(hilock_client_loop(a));
    assert_uuid_v4(hilock_client_id(a));
    assert_uuid_v4(hilock_client_id(b));
    assert_string_not_equal(hilock_client_id(a), hilock_client_id(b));
    destroy(a);
    destroy(b);
}

/* ---- TLS -------------------------------------------------------------- */

static void test_tls_connect(void **state)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    char url[4096];
    hilock_client *c;

    tls_url(url, sizeof url, "localhost", hl_redis_server_port(*state),
            t->ca_cert, true, NULL);
    c = connect_url(url);
    assert_pong(c);
    assert_int_equal(hilock_client_is_tls(c), 1);
    assert_int_equal(hilock_client_is_connected(c), 1);
    destroy(c);
}

/* Valkey's spellings of the schemes reach the same servers, plain and
 * TLS. */
static void test_valkey_scheme(void **state)
{
    char url[256];
    snprintf(url, sizeof url, "valkey://127.0.0.1:%d",
             hl_redis_server_port(*state));
    hilock_client *plain = connect_url(url);
    assert_int_equal(hilock_client_is_tls(plain), 0);
    assert_pong(plain);
    destroy(plain);
}

static void test_valkeys_scheme(void **state)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    char url[4096];
    tls_url(url, sizeof url, "localhost", hl_redis_server_port(*state),
            t->ca_cert, true, NULL);
    char vk[4200];
    snprintf(vk, sizeof vk, "valkeys://%s", url + strlen("rediss://"));
    hilock_client *tls = connect_url(vk);
    assert_pong(tls);
    assert_int_equal(hilock_client_is_tls(tls), 1);
    destroy(tls);
}

/* The same TLS set-up through the setters instead of a URL. */
static void test_tls_connect_setters(void **state)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    hilock_options *o = NULL;
    hilock_client *c = NULL;

    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_host(o, "localhost"), HILOCK_OK);
    assert_int_equal(hilock_options_set_port(o, hl_redis_server_port(*state)),
                     HILOCK_OK);
    assert_int_equal(hilock_options_set_tls(o, 1), HILOCK_OK);
    assert_int_equal(hilock_options_set_tls_ca_file(o, t->ca_cert),
                     HILOCK_OK);
    assert_int_equal(hilock_options_set_tls_cert_file(o, t->client_cert),
                     HILOCK_OK);
    assert_int_equal(hilock_options_set_tls_key_file(o, t->client_key),
                     HILOCK_OK);
    if (under_valgrind())
        assert_int_equal(hilock_options_set_connect_timeout_ms(o, 20000),
                         HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    assert_pong(c);
    assert_int_equal(hilock_client_is_tls(c), 1);
    destroy(c);
}

/* The certificate carries IP:127.0.0.1, so an address is verified like a
 * name; the wrong CA at the same address shows verification was on. */
static void test_tls_ip_verified(void **state)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    int port = hl_redis_server_port(*state);
    char url[4096];
    hilock_client *c = NULL;

    tls_url(url, sizeof url, "127.0.0.1", port, t->ca_cert, false, NULL);
    c = connect_url(url);
    assert_pong(c);
    destroy(c);

    tls_url(url, sizeof url, "127.0.0.1", port, t->wrong_ca_cert, false,
            NULL);
    assert_int_equal(create_url(&c, url), HILOCK_ETLS);
}

static void test_tls_wrong_ca(void **state)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    char url[4096];
    /* Not NULL, so that a create which forgets to clear out shows. */
    hilock_client *c = (hilock_client *)&c;

    tls_url(url, sizeof url, "localhost", hl_redis_server_port(*state),
            t->wrong_ca_cert, true, NULL);
    assert_int_equal(create_url(&c, url), HILOCK_ETLS);
    assert_null(c);
    assert_detail_has("certificate verification");
}

/* rediss:// to a plaintext server: whether the server answers the hello
 * with an error line or waits for a line end, the error says TLS is the
 * likely problem. */
static void test_tls_to_plaintext_server(void **state)
{
    hl_redis_server *plain = hl_fixture_plain();
    const hl_tls_files *t = hl_fixture_tls_files();
    char url[4096];
    hilock_client *c = NULL;

    (void)state;
    for (int i = 0; i < 3; i++) {
        tls_url(url, sizeof url, "localhost", hl_redis_server_port(plain),
                t->ca_cert, false, "connect_timeout=500");
        int rc = create_url(&c, url);
        assert_null(c);
        if (rc != HILOCK_ETLS && rc != HILOCK_ETIMEDOUT)
            fail_msg("status %d: %s", rc, detail);
        assert_detail_has("speak TLS");
    }
    hl_redis_server_stop(plain);
}

/* A CA directory or file that is not there is named, rather than failing
 * the server's certificate later. */
static void test_tls_missing_ca_location(void **state)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    char url[4096];
    hilock_client *c = NULL;

    tls_url(url, sizeof url, "localhost", hl_redis_server_port(*state),
            t->ca_cert, true, "ca_dir=/nonexistent/hilock-ca");
    assert_int_equal(create_url(&c, url), HILOCK_ETLS);
    assert_null(c);
    assert_detail_has("ca_dir /nonexistent/hilock-ca");
    assert_detail_has("No such file");

    tls_url(url, sizeof url, "localhost", hl_redis_server_port(*state),
            "/nonexistent/hilock-ca.pem", true, NULL);
    assert_int_equal(create_url(&c, url), HILOCK_ETLS);
    assert_detail_has("ca_file /nonexistent/hilock-ca.pem");

    tls_url(url, sizeof url, "localhost", hl_redis_server_port(*state),
            t->ca_cert, true, "ca_dir=%2Fetc%2Fhostname");
    assert_int_equal(create_url(&c, url), HILOCK_ETLS);
    assert_detail_has("not a directory");
}

static void test_tls_wrong_name(void **state)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    int port = hl_redis_server_port(*state);
    char url[4096];
    hilock_options *o;
    hilock_client *c = NULL;

    tls_url(url, sizeof url, "127.0.0.1", port, t->ca_cert, true, NULL);
    o = options_for(url);
    assert_int_equal(hilock_options_set_tls_server_name(o,
                                                        "wrong.example.com"),
                     HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_ETLS);
    keep_detail();
    hilock_options_free(o);
    assert_null(c);
    assert_detail_has("certificate verification");

    tls_url(url, sizeof url, "127.0.0.1", port, t->ca_cert, true,
            "sni=wrong.example.com");
    assert_int_equal(create_url(&c, url), HILOCK_ETLS);
    assert_detail_has("certificate verification");

    /* The right name through sni= passes, so the failures above are the
     * name check and not the parameter itself. */
    tls_url(url, sizeof url, "127.0.0.1", port, t->ca_cert, true,
            "sni=localhost");
    c = connect_url(url);
    assert_pong(c);
    destroy(c);
}

static void test_tls_verify_off(void **state)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    int port = hl_redis_server_port(*state);
    char url[4096];
    hilock_client *c;

    tls_url(url, sizeof url, "localhost", port, t->wrong_ca_cert, true,
            "verify=no");
    c = connect_url(url);
    assert_pong(c);
    assert_int_equal(hilock_client_is_tls(c), 1);
    destroy(c);

    tls_url(url, sizeof url, "127.0.0.1", port, t->wrong_ca_cert, true,
            "verify=no&sni=wrong.example.com");
    c = connect_url(url);
    assert_pong(c);
    destroy(c);
}

/* With TLS 1.3 the client's side of the handshake is over before the
 * server has looked at the (missing) certificate; the refusal arrives as
 * an alert on the first read, during AUTH/SELECT/PING.  It is still the
 * handshake that failed, and under TLS 1.2 the same refusal comes inside
 * it, so the status must be HILOCK_ETLS either way. */
static void test_tls_client_cert_required(void **state)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    int port = hl_redis_server_port(*state);
    char url[4096];
    hilock_client *c = NULL;

    tls_url(url, sizeof url, "localhost", port, t->ca_cert, false, NULL);
    assert_int_equal(create_url(&c, url), HILOCK_ETLS);
    assert_null(c);
    assert_detail_has("certificate required");

    tls_url(url, sizeof url, "localhost", port, t->ca_cert, true, NULL);
    c = connect_url(url);
    assert_pong(c);
    destroy(c);
}

/* ---- credentials ------------------------------------------------------ */

static void test_acl_user(void **state)
{
    hl_redis_server *s = *state;
    char url[256];
    hilock_client *c = NULL;
    hilock_reply *r = NULL;

    hl_fixture_acl_user(s, "alice", "secret");
    snprintf(url, sizeof url, "redis://alice:secret@127.0.0.1:%d",
             hl_redis_server_port(s));
    c = connect_url(url);
    assert_int_equal(run(c, &r, "ACL", "WHOAMI", (char *)NULL), HILOCK_OK);
    assert_reply(r, HILOCK_REPLY_STRING, "alice");
    hilock_reply_free(r);
    destroy(c);

    snprintf(url, sizeof url, "redis://alice:wrong@127.0.0.1:%d",
             hl_redis_server_port(s));
    assert_int_equal(create_url(&c, url), HILOCK_EAUTH);
    assert_null(c);
}

static void test_requirepass(void **state)
{
    hl_redis_server *s = hl_fixture_plain_with("sesame", NULL);
    char url[256];
    hilock_client *c = NULL;

    (void)state;
    plain_url(url, sizeof url, s, NULL);
    assert_int_equal(create_url(&c, url), HILOCK_EAUTH);
    assert_null(c);

    snprintf(url, sizeof url, "redis://:sesame@127.0.0.1:%d",
             hl_redis_server_port(s));
    c = connect_url(url);
    assert_pong(c);
    destroy(c);
    hl_redis_server_stop(s);
}

static void test_user_without_password(void **state)
{
    char url[256];
    hilock_options *o;
    hilock_client *c = (hilock_client *)&c;

    plain_url(url, sizeof url, *state, NULL);
    o = options_for(url);
    assert_int_equal(hilock_options_set_user(o, "alice"), HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_EINVAL);
    assert_null(c);
    hilock_options_free(o);
}

/* ---- SELECT ----------------------------------------------------------- */

static void test_select(void **state)
{
    hl_redis_server *s = *state;
    char url[256];
    hilock_client *db3, *other3, *db0, *c = NULL;
    hilock_reply *r = NULL;

    plain_url(url, sizeof url, s, "/3");
    db3 = connect_url(url);
    other3 = connect_url(url);
    plain_url(url, sizeof url, s, NULL);
    db0 = connect_url(url);

    assert_int_equal(run(db3, &r, "SET", "k", "v", (char *)NULL), HILOCK_OK);
    assert_reply(r, HILOCK_REPLY_STATUS, "OK");
    hilock_reply_free(r);
    assert_int_equal(run(other3, &r, "GET", "k", (char *)NULL), HILOCK_OK);
    assert_reply(r, HILOCK_REPLY_STRING, "v");
    hilock_reply_free(r);
    assert_int_equal(run(db0, &r, "GET", "k", (char *)NULL), HILOCK_OK);
    assert_non_null(r);
    assert_int_equal(r->type, HILOCK_REPLY_NIL);
    hilock_reply_free(r);
    destroy(db3);
    destroy(other3);
    destroy(db0);

    plain_url(url, sizeof url, s, "/99999");
    assert_int_equal(create_url(&c, url), HILOCK_EREDIS);
    assert_null(c);
    assert_detail_has("DB index");
}

/* ---- failures to connect ---------------------------------------------- */

static void test_refused(void **state)
{
    char url[256];
    hilock_client *c = NULL;
    int64_t t0;
    int port;
    /* Bound but not listening: connections are refused, and holding the
     * port keeps anyone else from starting to listen there meanwhile. */
    int fd = bound_socket(&port, false);

    (void)state;
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    t0 = hl_now_ms();
    assert_int_equal(create_url(&c, url), HILOCK_EIO);
    assert_true(hl_now_ms() - t0 < widen(1000));
    assert_null(c);
    assert_detail_has("refused");
    close(fd);
}

static void test_connect_timeout_plain(void **state)
{
    /* PING, and ROLE and WAIT 0 0 for the default replica
     * acknowledgement policy, which needs WAIT on a master with
     * replicas. */
    static const char ping[] = "*1\r\n$4\r\nPING\r\n"
                               "*1\r\n$4\r\nROLE\r\n"
                               "*3\r\n$4\r\nWAIT\r\n$1\r\n0\r\n$1\r\n0\r\n";
    unsigned char buf[96];
    char url[256];
    hilock_client *c = NULL;
    int64_t t0, elapsed;
    int port;
    int fd = silent_listener(&port);

    (void)state;
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?connect_timeout=300",
             port);
    t0 = hl_now_ms();
    assert_int_equal(create_url(&c, url), HILOCK_ETIMEDOUT);
    elapsed = hl_now_ms() - t0;
    assert_null(c);
    assert_true(elapsed >= 290);
    assert_true(elapsed < widen(3000));
    assert_detail_has("connect timeout");
    /* It got as far as the handshake and waited for the answers. */
    assert_int_equal(sent_to_listener(fd, buf, sizeof buf),
                     sizeof ping - 1);
    assert_memory_equal(buf, ping, sizeof ping - 1);
    close(fd);
}

static void test_connect_timeout_tls(void **state)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    unsigned char buf[5];
    char url[4096];
    hilock_client *c = NULL;
    int64_t t0, elapsed;
    int port;
    int fd = silent_listener(&port);

    (void)state;
    tls_url(url, sizeof url, "localhost", port, t->ca_cert, true,
            "connect_timeout=300");
    t0 = hl_now_ms();
    assert_int_equal(create_url(&c, url), HILOCK_ETIMEDOUT);
    elapsed = hl_now_ms() - t0;
    assert_null(c);
    assert_true(elapsed >= 290);
    assert_true(elapsed < widen(3000));
    assert_detail_has("connect timeout");
    /* A TLS handshake record: the client hello went out unanswered. */
    assert_int_equal(sent_to_listener(fd, buf, sizeof buf), sizeof buf);
    assert_int_equal(buf[0], 0x16);
    assert_int_equal(buf[1], 0x03);
    close(fd);
}

static void test_connect_timeout_paused(void **state)
{
    hl_redis_server *s = *state;
    char url[256];
    hilock_client *c = NULL;
    int64_t t0, elapsed;

    plain_url(url, sizeof url, s, "?connect_timeout=300");
    hl_fixture_pause(s);
    t0 = hl_now_ms();
    assert_int_equal(create_url(&c, url), HILOCK_ETIMEDOUT);
    elapsed = hl_now_ms() - t0;
    hl_fixture_resume(s);
    assert_null(c);
    assert_true(elapsed >= 290);
    assert_true(elapsed < widen(3000));
    assert_detail_has("connect timeout");

    c = connect_url(url);
    assert_pong(c);
    destroy(c);
}

/* ---- the caller's loop ------------------------------------------------ */

typedef struct loop_probe {
    struct ev_loop *loop;
    ev_timer tick;
    ev_timer guard;
    int ticks;
    bool guard_fired;
    int calls;
    int status;
    int ticks_at_done;
    bool reply_null;
    hilock_reply *reply;
    int inner_status;
    bool inner_reply_null;
    char detail[256];
    char inner_detail[256];
} loop_probe;

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    loop_probe *p = w->data;

    (void)loop;
    (void)revents;
    p->ticks++;
}

static void on_guard(struct ev_loop *loop, ev_timer *w, int revents)
{
    loop_probe *p = w->data;

    (void)revents;
    p->guard_fired = true;
    ev_break(loop, EVBREAK_ALL);
}

static void probe_init(loop_probe *p, double guard_s)
{
    memset(p, 0, sizeof *p);
    p->status = -1;
    p->inner_status = -1;
    p->loop = ev_loop_new(EVFLAG_AUTO);
    assert_non_null(p->loop);
    ev_timer_init(&p->tick, on_tick, 0.02, 0.02);
    p->tick.data = p;
    ev_timer_init(&p->guard, on_guard, guard_s, 0.0);
    p->guard.data = p;
    ev_timer_start(p->loop, &p->guard);
}

/* After the client is gone, nothing of it may stay on the loop: with only
 * an unreferenced guard left, ev_run must return at once. */
static void probe_finish(loop_probe *p)
{
    ev_timer_stop(p->loop, &p->tick);
    ev_timer_stop(p->loop, &p->guard);
    p->guard_fired = false;
    ev_timer_set(&p->guard, widen(5000) / 1000.0, 0.0);
    ev_timer_start(p->loop, &p->guard);
    ev_unref(p->loop);
    ev_run(p->loop, 0);
    ev_ref(p->loop);
    ev_timer_stop(p->loop, &p->guard);
    if (p->guard_fired)
        fail_msg("the destroyed client left watchers on the loop");
    ev_loop_destroy(p->loop);
}

static hilock_options *loop_options(const char *url, struct ev_loop *loop)
{
    hilock_options *o = options_for(url);

    assert_int_equal(hilock_options_set_loop(o, loop), HILOCK_OK);
    return o;
}

static void on_ping_done(hilock_client *c, int status, hilock_reply *reply,
                         void *user_data)
{
    loop_probe *p = user_data;

    (void)c;
    p->calls++;
    p->status = status;
    p->ticks_at_done = p->ticks;
    p->reply_null = reply == NULL;
    snprintf(p->detail, sizeof p->detail, "%s", hilock_last_error());
    hilock_reply_free(reply);
    ev_break(p->loop, EVBREAK_ALL);
}

static void test_tls_handshake_does_not_block_loop(void **state)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    const char *ping[] = { "PING" };
    char url[4096];
    hilock_options *o;
    hilock_client *c = NULL;
    loop_probe p;
    int64_t t0;
    unsigned char buf[5];
    int port;
    int fd = silent_listener(&port);

    (void)state;
    probe_init(&p, widen(10000) / 1000.0);
    tls_url(url, sizeof url, "localhost", port, t->ca_cert, true,
            "connect_timeout=1000&command_timeout=1500");
    o = loop_options(url, p.loop);
    t0 = hl_now_ms();
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    /* Returning before even one connect timeout has passed is what tells
     * "connects when the loop runs" from a create that blocks. */
    assert_true(hl_now_ms() - t0 < 1000);
    hilock_options_free(o);
    assert_non_null(c);
    assert_int_equal(hilock_client_is_connected(c), 0);
    assert_int_equal(hilock_client_loop(c), p.loop);

    assert_int_equal(hilock_client_command_async(c, 1, ping, NULL,
                                                 on_ping_done, &p),
                     HILOCK_OK);
    /* On the loop's thread an accepted call must not complete inline. */
    assert_int_equal(p.calls, 0);
    ev_timer_start(p.loop, &p.tick);
    ev_run(p.loop, 0);

    assert_false(p.guard_fired);
    assert_int_equal(p.calls, 1);
    if (p.status != HILOCK_ETIMEDOUT)
        fail_msg("PING ended with %s (%s), want ETIMEDOUT",
                 hilock_errname(p.status), p.detail);
    assert_true(p.reply_null);
    assert_non_null(strstr(p.detail, "not connected"));
    if (p.ticks_at_done < 10)
        fail_msg("the loop ticked only %d times in the handshake",
                 p.ticks_at_done);
    assert_int_equal(hilock_client_is_connected(c), 0);

    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
    probe_finish(&p);
    assert_int_equal(sent_to_listener(fd, buf, sizeof buf), sizeof buf);
    assert_int_equal(buf[0], 0x16);
    close(fd);
}

static void on_ping_call_sync(hilock_client *c, int status,
                              hilock_reply *reply, void *user_data)
{
    loop_probe *p = user_data;
    hilock_reply *inner = (hilock_reply *)&inner;
    const char *ping[] = { "PING" };

    p->calls++;
    p->status = status;
    p->reply = reply;
    p->inner_status = hilock_client_command(c, 1, ping, NULL, &inner);
    p->inner_reply_null = inner == NULL;
    snprintf(p->inner_detail, sizeof p->inner_detail, "%s",
             hilock_last_error());
    ev_break(p->loop, EVBREAK_ALL);
}

static void test_sync_on_caller_loop(void **state)
{
    const char *ping[] = { "PING" };
    char url[256];
    hilock_options *o;
    hilock_client *c = NULL;
    loop_probe p;

    probe_init(&p, widen(10000) / 1000.0);
    plain_url(url, sizeof url, *state, NULL);
    o = loop_options(url, p.loop);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);

    /* Outside any callback, but still on the loop's thread. */
    assert_int_equal(hilock_client_command(c, 1, ping, NULL, NULL),
                     HILOCK_EDEADLK);

    assert_int_equal(hilock_client_command_async(c, 1, ping, NULL,
                                                 on_ping_call_sync, &p),
                     HILOCK_OK);
    ev_run(p.loop, 0);
    assert_false(p.guard_fired);
    assert_int_equal(p.calls, 1);
    assert_int_equal(p.status, HILOCK_OK);
    assert_reply(p.reply, HILOCK_REPLY_STATUS, "PONG");
    hilock_reply_free(p.reply);
    assert_int_equal(p.inner_status, HILOCK_EDEADLK);
    assert_true(p.inner_reply_null);
    assert_non_null(strstr(p.inner_detail, "loop thread"));

    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
    probe_finish(&p);
}

/* The same rule on the client's own loop thread. */
typedef struct own_thread_probe {
    atomic_int done;
    int status;
    int inner_status;
} own_thread_probe;

static void on_ping_own_thread(hilock_client *c, int status,
                               hilock_reply *reply, void *user_data)
{
    own_thread_probe *p = user_data;
    const char *ping[] = { "PING" };

    hilock_reply_free(reply);
    p->status = status;
    p->inner_status = hilock_client_command(c, 1, ping, NULL, NULL);
    atomic_store(&p->done, 1);
}

static bool own_thread_done(void *arg)
{
    own_thread_probe *p = arg;

    return atomic_load(&p->done) != 0;
}

static void test_sync_on_own_loop_thread(void **state)
{
    const char *ping[] = { "PING" };
    own_thread_probe p = { 0, -1, -1 };
    char url[256];
    hilock_client *c;

    plain_url(url, sizeof url, *state, NULL);
    c = connect_url(url);
    assert_int_equal(hilock_client_command_async(c, 1, ping, NULL,
                                                 on_ping_own_thread, &p),
                     HILOCK_OK);
    assert_true(hl_wait_until(own_thread_done, &p, widen(5000)));
    assert_int_equal(p.status, HILOCK_OK);
    assert_int_equal(p.inner_status, HILOCK_EDEADLK);
    destroy(c);
}

/* ---- handles ---------------------------------------------------------- */

static void never_called(hilock_client *c, int status, hilock_reply *reply,
                         void *user_data)
{
    (void)c;
    (void)reply;
    (void)user_data;
    fail_msg("callback of a refused call ran with %s",
             hilock_errname(status));
}

static void test_handles(void **state)
{
    const char *ping[] = { "PING" };
    const char *with_null[] = { "GET", NULL };
    char url[256];
    hilock_client *c;
    hilock_reply *r = (hilock_reply *)&r;

    plain_url(url, sizeof url, *state, NULL);
    c = connect_url(url);
    assert_int_equal(hilock_client_close(c), HILOCK_OK);
    assert_int_equal(hilock_client_close(c), HILOCK_ECLOSED);
    assert_int_equal(hilock_client_is_connected(c), 0);
    assert_int_equal(hilock_client_command(c, 1, ping, NULL, &r),
                     HILOCK_ECLOSED);
    assert_null(r);
    assert_int_equal(hilock_client_command_async(c, 1, ping, NULL,
                                                 never_called, NULL),
                     HILOCK_ECLOSED);
    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
    assert_int_equal(hilock_client_destroy(c), HILOCK_ECLOSED);
    assert_int_equal(hilock_client_close(c), HILOCK_ECLOSED);

    /* Destroy without a close first, then twice. */
    c = connect_url(url);
    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
    assert_int_equal(hilock_client_destroy(c), HILOCK_ECLOSED);

    assert_int_equal(hilock_client_create(NULL, NULL), HILOCK_EINVAL);
    assert_int_equal(hilock_client_close(NULL), HILOCK_EINVAL);
    assert_int_equal(hilock_client_destroy(NULL), HILOCK_EINVAL);
    r = (hilock_reply *)&r;
    assert_int_equal(hilock_client_command(NULL, 1, ping, NULL, &r),
                     HILOCK_EINVAL);
    assert_null(r);
    assert_int_equal(hilock_client_command_async(NULL, 1, ping, NULL,
                                                 never_called, NULL),
                     HILOCK_EINVAL);
    assert_null(hilock_client_id(NULL));
    assert_int_equal(hilock_client_is_tls(NULL), -1);
    assert_int_equal(hilock_client_is_connected(NULL), 0);
    assert_null(hilock_client_loop(NULL));

    /* Bad arguments on a live client are refused before anything is
     * queued, and no callback follows. */
    c = connect_url(url);
    assert_int_equal(hilock_client_command(c, 0, ping, NULL, NULL),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_client_command(c, 1, NULL, NULL, NULL),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_client_command(c, 2, with_null, NULL, NULL),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_client_command_async(c, 1, ping, NULL, NULL,
                                                 NULL),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_client_command_async(c, 2, with_null, NULL,
                                                 never_called, NULL),
                     HILOCK_EINVAL);
    assert_pong(c);
    destroy(c);
}

/* ---- error table ------------------------------------------------------ */

/* The table grows at its end while the library evolves, so the entries
 * are taken from the header's own X-macro rather than a fixed count. */
typedef struct error_entry {
    int num;
    const char *name;
    const char *msg;
} error_entry;

#define ERROR_ENTRY_(name, num, msg) { num, #name, msg },
static const error_entry error_entries[] = {
    HILOCK_ERROR_TABLE(ERROR_ENTRY_)
};
#undef ERROR_ENTRY_

static void test_error_table(void **state)
{
    const int n = (int)(sizeof error_entries / sizeof error_entries[0]);
    const int unknown[] = { -1, n, n + 1, 1000, INT_MIN, INT_MAX };

    (void)state;
    /* Codes 0..15 are what the first release shipped; none may go. */
    assert_true(n >= 16);
    for (int i = 0; i < n; i++) {
        const char *msg = hilock_strerror(i);
        const char *name = hilock_errname(i);

        /* Dense numbering: the n-th entry is code n. */
        assert_int_equal(error_entries[i].num, i);
        assert_non_null(msg);
        assert_non_null(name);
        assert_true(msg[0] != '\0');
        assert_true(name[0] != '\0');
        assert_string_not_equal(msg, "unknown error");
        assert_string_not_equal(name, "UNKNOWN");
        assert_string_equal(name, error_entries[i].name);
        assert_string_equal(msg, error_entries[i].msg);
        for (int j = 0; j < i; j++)
            if (strcmp(name, hilock_errname(j)) == 0)
                fail_msg("codes %d and %d are both named %s", j, i, name);
    }
    /* Numbers are part of the ABI; spot-check the first release's. */
    assert_string_equal(hilock_errname(0), "OK");
    assert_string_equal(hilock_errname(1), "EINVAL");
    assert_string_equal(hilock_errname(4), "ETIMEDOUT");
    assert_string_equal(hilock_errname(8), "ECLOSED");
    assert_string_equal(hilock_errname(12), "EDEADLK");
    assert_string_equal(hilock_errname(15), "EBUSY");
    assert_int_equal(HILOCK_ETLS, 7);
    assert_int_equal(HILOCK_EREDIS, 13);
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        assert_string_equal(hilock_strerror(unknown[i]), "unknown error");
        assert_string_equal(hilock_errname(unknown[i]), "UNKNOWN");
    }
}

/* ---- timeouts from the URL -------------------------------------------- */

static bool ping_succeeds(void *arg)
{
    hilock_reply *r = NULL;
    int rc = run(arg, &r, "PING", (char *)NULL);

    hilock_reply_free(r);
    return rc == HILOCK_OK;
}

static void test_command_timeout_from_url(void **state)
{
    hl_redis_server *s = *state;
    const char *ping[] = { "PING" };
    char url[256];
    hilock_options *o;
    hilock_client *c;
    hilock_reply *r = (hilock_reply *)&r;
    int64_t t0, elapsed;

    plain_url(url, sizeof url, s, "?command_timeout=200");
    o = options_for(url);
    assert_int_equal(hilock_options_command_timeout_ms(o), 200);
    hilock_options_free(o);
    c = connect_url(url);
    assert_pong(c);

    hl_fixture_debug_sleep(s, under_valgrind() ? 3.0 : 1.0);
    t0 = hl_now_ms();
    assert_int_equal(hilock_client_command(c, 1, ping, NULL, &r),
                     HILOCK_ETIMEDOUT);
    elapsed = hl_now_ms() - t0;
    keep_detail();
    assert_null(r);
    assert_true(elapsed >= 190);
    assert_true(elapsed < widen(600));
    assert_detail_has("command timeout");

    /* The server answers again once it wakes; the client reconnects on
     * its own, and meanwhile each PING may still time out. */
    assert_true(hl_wait_until(ping_succeeds, c, widen(10000)));
    assert_pong(c);
    destroy(c);
}

/* ---- binary-safe arguments -------------------------------------------- */

static void test_binary_arguments(void **state)
{
    static const char key[] = "k\0\xff" "b";
    static const char value[] = "\0a\xff\0\r\n\xfe" "z";
    const char *set[] = { "SET", key, value };
    const size_t set_len[] = { 3, sizeof key - 1, sizeof value - 1 };
    const char *get[] = { "GET", key };
    const size_t get_len[] = { 3, sizeof key - 1 };
    char url[256];
    hilock_client *c;
    hilock_reply *r = NULL;

    plain_url(url, sizeof url, *state, NULL);
    c = connect_url(url);
    assert_int_equal(hilock_client_command(c, 3, set, set_len, &r),
                     HILOCK_OK);
    assert_reply(r, HILOCK_REPLY_STATUS, "OK");
    hilock_reply_free(r);

    assert_int_equal(hilock_client_command(c, 2, get, get_len, &r),
                     HILOCK_OK);
    assert_non_null(r);
    assert_int_equal(r->type, HILOCK_REPLY_STRING);
    assert_int_equal(r->len, sizeof value - 1);
    assert_memory_equal(r->str, value, sizeof value - 1);
    assert_int_equal(r->str[r->len], '\0');
    hilock_reply_free(r);

    /* A key cut at its first NUL would be "k"; it must not exist. */
    assert_int_equal(run(c, &r, "EXISTS", "k", (char *)NULL), HILOCK_OK);
    assert_non_null(r);
    assert_int_equal(r->type, HILOCK_REPLY_INTEGER);
    assert_int_equal(r->integer, 0);
    hilock_reply_free(r);
    destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_plain_connect, setup_plain,
                                        teardown_server),
        cmocka_unit_test_setup_teardown(test_tls_connect, setup_tls,
                                        teardown_server),
        cmocka_unit_test_setup_teardown(test_valkey_scheme, setup_plain,
                                        teardown_server),
        cmocka_unit_test_setup_teardown(test_valkeys_scheme, setup_tls,
                                        teardown_server),
        cmocka_unit_test_setup_teardown(test_tls_connect_setters, setup_tls,
                                        teardown_server),
        cmocka_unit_test_setup_teardown(test_tls_ip_verified, setup_tls,
                                        teardown_server),
        cmocka_unit_test_setup_teardown(test_tls_wrong_ca, setup_tls,
                                        teardown_server),
        cmocka_unit_test_setup_teardown(test_tls_missing_ca_location,
                                        setup_tls, teardown_server),
        cmocka_unit_test(test_tls_to_plaintext_server),
        cmocka_unit_test_setup_teardown(test_tls_wrong_name, setup_tls,
                                        teardown_server),
        cmocka_unit_test_setup_teardown(test_tls_verify_off, setup_tls,
                                        teardown_server),
        cmocka_unit_test_setup_teardown(test_tls_client_cert_required,
                                        setup_tls_required, teardown_server),
        cmocka_unit_test_setup_teardown(test_acl_user, setup_plain,
                                        teardown_server),
        cmocka_unit_test(test_requirepass),
        cmocka_unit_test_setup_teardown(test_user_without_password,
                                        setup_plain, teardown_server),
        cmocka_unit_test_setup_teardown(test_select, setup_plain,
                                        teardown_server),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_connect_timeout_plain),
        cmocka_unit_test(test_connect_timeout_tls),
        cmocka_unit_test_setup_teardown(test_connect_timeout_paused,
                                        setup_plain, teardown_server),
        cmocka_unit_test(test_tls_handshake_does_not_block_loop),
        cmocka_unit_test_setup_teardown(test_sync_on_caller_loop,
                                        setup_plain, teardown_server),
        cmocka_unit_test_setup_teardown(test_sync_on_own_loop_thread,
                                        setup_plain, teardown_server),
        cmocka_unit_test_setup_teardown(test_handles, setup_plain,
                                        teardown_server),
        cmocka_unit_test(test_error_table),
        cmocka_unit_test_setup_teardown(test_command_timeout_from_url,
                                        setup_plain, teardown_server),
        cmocka_unit_test_setup_teardown(test_binary_arguments, setup_plain,
                                        teardown_server),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
