/* Options object and URL parser: defaults, setters and their bounds, deep
 * copies, and a corpus of good and bad URLs.  A rejected URL must leave
 * every field exactly as it was, so each bad case is checked against a
 * snapshot of the whole struct. */
/* ctest-timeout: 60 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/option_values.h"
#include "hilock/alloc.h"
#include "hilock/error.h"
#include "hilock/options.h"

#define URL_MAX 8192

/* The password used by the bad-URL corpus; no error text may quote it. */
#define SECRET "s3cret"

/* ---- helpers ---------------------------------------------------------- */

static void assert_str_eq_or_null(const char *want, const char *got,
                                  const char *what, const char *url)
{
    if (want == NULL && got == NULL)
        return;
    if (want == NULL || got == NULL || strcmp(want, got) != 0) {
        print_error("%s: %s is \"%s\", want \"%s\"\n", url, what,
                    got ? got : "(null)", want ? want : "(null)");
        fail();
    }
}

static void assert_same_options(const hilock_options *a,
                                const hilock_options *b, const char *url)
{
    assert_str_eq_or_null(a->host, b->host, "host", url);
    assert_str_eq_or_null(a->user, b->user, "user", url);
    assert_str_eq_or_null(a->password, b->password, "password", url);
    assert_str_eq_or_null(a->tls_ca_file, b->tls_ca_file, "ca_file", url);
    assert_str_eq_or_null(a->tls_ca_dir, b->tls_ca_dir, "ca_dir", url);
    assert_str_eq_or_null(a->tls_cert_file, b->tls_cert_file, "cert_file",
                          url);
    assert_str_eq_or_null(a->tls_key_file, b->tls_key_file, "key_file", url);
    assert_str_eq_or_null(a->tls_server_name, b->tls_server_name, "sni",
                          url);
    assert_int_equal(a->port, b->port);
    assert_int_equal(a->db, b->db);
    assert_int_equal(a->connect_timeout_ms, b->connect_timeout_ms);
    assert_int_equal(a->command_timeout_ms, b->command_timeout_ms);
    assert_int_equal(a->watchdog_timeout_ms, b->watchdog_timeout_ms);
    assert_int_equal(a->reconnect_min_ms, b->reconnect_min_ms);
    assert_int_equal(a->reconnect_max_ms, b->reconnect_max_ms);
    assert_int_equal(a->max_reply_bytes, b->max_reply_bytes);
    assert_int_equal(a->max_reply_elements, b->max_reply_elements);
    assert_int_equal(a->max_reply_depth, b->max_reply_depth);
    assert_int_equal(a->tls, b->tls);
    assert_int_equal(a->tls_verify, b->tls_verify);
    assert_ptr_equal(a->loop, b->loop);
}

static hilock_options *make_defaults(void)
{
    hilock_options *o = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_non_null(o);
    return o;
}

/* Every field away from its default, so that "unchanged" cannot pass by
 * accident when a failed parse resets something to a default. */
static hilock_options *make_preset(void)
{
    hilock_options *o = make_defaults();
    assert_int_equal(hilock_options_set_host(o, "preset.example"), 0);
    assert_int_equal(hilock_options_set_port(o, 7001), 0);
    assert_int_equal(hilock_options_set_user(o, "olduser"), 0);
    assert_int_equal(hilock_options_set_password(o, "oldpass"), 0);
    assert_int_equal(hilock_options_set_db(o, 9), 0);
    assert_int_equal(hilock_options_set_connect_timeout_ms(o, 111), 0);
    assert_int_equal(hilock_options_set_command_timeout_ms(o, 222), 0);
    assert_int_equal(hilock_options_set_watchdog_timeout_ms(o, 333), 0);
    assert_int_equal(hilock_options_set_reconnect_backoff_ms(o, 7, 70), 0);
    assert_int_equal(hilock_options_set_max_reply_bytes(o, 4096), 0);
    assert_int_equal(hilock_options_set_max_reply_elements(o, 99), 0);
    assert_int_equal(hilock_options_set_max_reply_depth(o, 3), 0);
    assert_int_equal(hilock_options_set_tls(o, 1), 0);
    assert_int_equal(hilock_options_set_tls_verify(o, 0), 0);
    assert_int_equal(hilock_options_set_tls_ca_file(o, "/old/ca"), 0);
    assert_int_equal(hilock_options_set_tls_ca_dir(o, "/old/cadir"), 0);
    assert_int_equal(hilock_options_set_tls_cert_file(o, "/old/cert"), 0);
    assert_int_equal(hilock_options_set_tls_key_file(o, "/old/key"), 0);
    assert_int_equal(hilock_options_set_tls_server_name(o, "old.sni"), 0);
    assert_int_equal(
        hilock_options_set_loop(o, (struct ev_loop *)(uintptr_t)0x1000), 0);
    return o;
}

static hilock_options *snapshot(const hilock_options *o)
{
    hilock_options *s = NULL;
    assert_int_equal(hilock_options_copy(&s, o), HILOCK_OK);
    return s;
}

/* Apply a URL that must be refused and check the object did not move. */
static void expect_bad_url(hilock_options *o, const char *url,
                           const char *label, const char *detail)
{
    hilock_options *before = snapshot(o);
    int rc = hilock_options_set_url(o, url);
    if (rc != HILOCK_EINVAL) {
        print_error("%s: accepted or wrong status %d\n", label, rc);
        fail();
    }
    const char *err = hilock_last_error();
    if (err[0] == '\0') {
        print_error("%s: no error detail\n", label);
        fail();
    }
    if (detail != NULL && strstr(err, detail) == NULL) {
        print_error("%s: detail \"%s\" lacks \"%s\"\n", label, err, detail);
        fail();
    }
    if (strstr(err, SECRET) != NULL) {
        print_error("%s: detail quotes the password: %s\n", label, err);
        fail();
    }
    assert_same_options(before, o, label);
    hilock_options_free(before);
}

/* ---- defaults, create, copy, free ------------------------------------ */

static void test_defaults(void **state)
{
    (void)state;
    hilock_options *o = make_defaults();
    assert_string_equal(hilock_options_host(o), "127.0.0.1");
    assert_int_equal(hilock_options_port(o), HILOCK_DEFAULT_PORT);
    assert_null(hilock_options_user(o));
    assert_int_equal(hilock_options_has_password(o), 0);
    assert_int_equal(hilock_options_db(o), 0);
    assert_int_equal(hilock_options_tls(o), 0);
    assert_int_equal(hilock_options_tls_verify(o), 1);
    assert_null(hilock_options_tls_ca_file(o));
    assert_null(hilock_options_tls_ca_dir(o));
    assert_null(hilock_options_tls_cert_file(o));
    assert_null(hilock_options_tls_key_file(o));
    assert_null(hilock_options_tls_server_name(o));
    assert_int_equal(hilock_options_connect_timeout_ms(o),
                     HILOCK_DEFAULT_CONNECT_TIMEOUT_MS);
    assert_int_equal(hilock_options_command_timeout_ms(o),
                     HILOCK_DEFAULT_COMMAND_TIMEOUT_MS);
    assert_int_equal(hilock_options_watchdog_timeout_ms(o),
                     HILOCK_DEFAULT_WATCHDOG_TIMEOUT_MS);
    assert_int_equal(o->reconnect_min_ms, HILOCK_DEFAULT_RECONNECT_MIN_MS);
    assert_int_equal(o->reconnect_max_ms, HILOCK_DEFAULT_RECONNECT_MAX_MS);
    assert_int_equal(o->max_reply_bytes, HILOCK_DEFAULT_MAX_REPLY_BYTES);
    assert_int_equal(o->max_reply_elements,
                     HILOCK_DEFAULT_MAX_REPLY_ELEMENTS);
    assert_int_equal(o->max_reply_depth, HILOCK_DEFAULT_MAX_REPLY_DEPTH);
    assert_null(o->loop);
    hilock_options_free(o);
}

static void test_null_arguments(void **state)
{
    (void)state;
    hilock_options *o = make_defaults();
    hilock_options *out = (hilock_options *)(uintptr_t)1;

    assert_int_equal(hilock_options_create(NULL), HILOCK_EINVAL);
    assert_int_equal(hilock_options_copy(NULL, o), HILOCK_EINVAL);
    assert_int_equal(hilock_options_copy(&out, NULL), HILOCK_EINVAL);
    assert_null(out);
    hilock_options_free(NULL);

    assert_int_equal(hilock_options_set_url(NULL, "redis://h"),
                     HILOCK_EINVAL);
    assert_string_not_equal(hilock_last_error(), "");
    hilock_options *before = snapshot(o);
    assert_int_equal(hilock_options_set_url(o, NULL), HILOCK_EINVAL);
    assert_same_options(before, o, "NULL url");
    hilock_options_free(before);

    assert_int_equal(hilock_options_set_host(NULL, "h"), HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_port(NULL, 1), HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_user(NULL, "u"), HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_password(NULL, "p"), HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_db(NULL, 0), HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_connect_timeout_ms(NULL, 5),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_command_timeout_ms(NULL, 5),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_watchdog_timeout_ms(NULL, 5),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_reconnect_backoff_ms(NULL, 1, 2),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_max_reply_bytes(NULL, 4096),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_max_reply_elements(NULL, 5),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_max_reply_depth(NULL, 5),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_tls(NULL, 1), HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_tls_verify(NULL, 1), HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_tls_ca_file(NULL, "x"),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_tls_ca_dir(NULL, "x"),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_tls_cert_file(NULL, "x"),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_tls_key_file(NULL, "x"),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_tls_server_name(NULL, "x"),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_loop(NULL, NULL), HILOCK_EINVAL);

    assert_null(hilock_options_host(NULL));
    assert_null(hilock_options_user(NULL));
    assert_int_equal(hilock_options_has_password(NULL), -1);
    assert_null(hilock_options_tls_ca_file(NULL));
    assert_null(hilock_options_tls_ca_dir(NULL));
    assert_null(hilock_options_tls_cert_file(NULL));
    assert_null(hilock_options_tls_key_file(NULL));
    assert_null(hilock_options_tls_server_name(NULL));
    assert_int_equal(hilock_options_port(NULL), -1);
    assert_int_equal(hilock_options_db(NULL), -1);
    assert_int_equal(hilock_options_tls(NULL), -1);
    assert_int_equal(hilock_options_tls_verify(NULL), -1);
    assert_int_equal(hilock_options_connect_timeout_ms(NULL), -1);
    assert_int_equal(hilock_options_command_timeout_ms(NULL), -1);
    assert_int_equal(hilock_options_watchdog_timeout_ms(NULL), -1);
    hilock_options_free(o);
}

static void test_copy_is_deep(void **state)
{
    (void)state;
    hilock_options *o = make_preset();
    hilock_options *c = snapshot(o);
    assert_same_options(o, c, "copy");
    assert_ptr_not_equal(o->host, c->host);
    assert_ptr_not_equal(o->user, c->user);
    assert_ptr_not_equal(o->password, c->password);
    assert_ptr_not_equal(o->tls_ca_file, c->tls_ca_file);
    assert_ptr_not_equal(o->tls_ca_dir, c->tls_ca_dir);
    assert_ptr_not_equal(o->tls_cert_file, c->tls_cert_file);
    assert_ptr_not_equal(o->tls_key_file, c->tls_key_file);
    assert_ptr_not_equal(o->tls_server_name, c->tls_server_name);

    /* The copy must survive the original, and the reverse. */
    hilock_options_free(o);
    assert_string_equal(c->host, "preset.example");
    assert_string_equal(c->tls_server_name, "old.sni");
    hilock_options *d = snapshot(c);
    assert_int_equal(hilock_options_set_host(c, "other"), 0);
    assert_string_equal(d->host, "preset.example");
    hilock_options_free(c);
    hilock_options_free(d);

    /* A copy of an object with unset strings keeps them unset. */
    hilock_options *e = make_defaults();
    hilock_options *f = snapshot(e);
    assert_same_options(e, f, "copy defaults");
    hilock_options_free(e);
    hilock_options_free(f);
}

/* ---- setters and their bounds ----------------------------------------- */

enum setter {
    S_PORT,
    S_DB,
    S_CONNECT,
    S_COMMAND,
    S_WATCHDOG,
    S_BYTES,
    S_ELEMENTS,
    S_DEPTH,
    S_TLS,
    S_VERIFY
};

static const struct {
    enum setter which;
    int64_t value;
    int ok;
} range_cases[] = {
    {S_PORT, 1, 1},
    {S_PORT, 65535, 1},
    {S_PORT, 0, 0},
    {S_PORT, -1, 0},
    {S_PORT, 65536, 0},
    {S_PORT, INT32_MIN, 0},
    {S_DB, 0, 1},
    {S_DB, INT32_MAX, 1},
    {S_DB, -1, 0},
    {S_DB, INT32_MIN, 0},
    {S_CONNECT, 1, 1},
    {S_CONNECT, 86400000, 1},
    {S_CONNECT, 0, 0},
    {S_CONNECT, -1, 0},
    {S_CONNECT, 86400001, 0},
    {S_CONNECT, INT64_MAX, 0},
    {S_CONNECT, INT64_MIN, 0},
    {S_COMMAND, 1, 1},
    {S_COMMAND, 86400000, 1},
    {S_COMMAND, 0, 0},
    {S_COMMAND, 86400001, 0},
    {S_WATCHDOG, 1, 1},
    {S_WATCHDOG, 86400000, 1},
    {S_WATCHDOG, 0, 0},
    {S_WATCHDOG, 86400001, 0},
    {S_BYTES, 1024, 1},
    {S_BYTES, 4294967296LL, 1},
    {S_BYTES, 1023, 0},
    {S_BYTES, 0, 0},
    {S_BYTES, 4294967297LL, 0},
    {S_ELEMENTS, 1, 1},
    {S_ELEMENTS, INT32_MAX, 1},
    {S_ELEMENTS, 0, 0},
    {S_ELEMENTS, -1, 0},
    {S_ELEMENTS, (int64_t)INT32_MAX + 1, 0},
    {S_DEPTH, 1, 1},
    {S_DEPTH, 7, 1},
    {S_DEPTH, 0, 0},
    {S_DEPTH, 8, 0},
    {S_TLS, 0, 1},
    {S_TLS, 1, 1},
    {S_VERIFY, 0, 1},
    {S_VERIFY, 1, 1},
};

static int call_setter(hilock_options *o, enum setter which, int64_t v)
{
    switch (which) {
    case S_PORT:
        return hilock_options_set_port(o, (int)v);
    case S_DB:
        return hilock_options_set_db(o, (int)v);
    case S_CONNECT:
        return hilock_options_set_connect_timeout_ms(o, v);
    case S_COMMAND:
        return hilock_options_set_command_timeout_ms(o, v);
    case S_WATCHDOG:
        return hilock_options_set_watchdog_timeout_ms(o, v);
    case S_BYTES:
        return hilock_options_set_max_reply_bytes(o, (uint64_t)v);
    case S_ELEMENTS:
        return hilock_options_set_max_reply_elements(o, v);
    case S_DEPTH:
        return hilock_options_set_max_reply_depth(o, (int)v);
    case S_TLS:
        return hilock_options_set_tls(o, v != 0);
    case S_VERIFY:
        return hilock_options_set_tls_verify(o, v != 0);
    }
    return -1;
}

static int64_t read_field(const hilock_options *o, enum setter which)
{
    switch (which) {
    case S_PORT:
        return o->port;
    case S_DB:
        return o->db;
    case S_CONNECT:
        return o->connect_timeout_ms;
    case S_COMMAND:
        return o->command_timeout_ms;
    case S_WATCHDOG:
        return o->watchdog_timeout_ms;
    case S_BYTES:
        return (int64_t)o->max_reply_bytes;
    case S_ELEMENTS:
        return o->max_reply_elements;
    case S_DEPTH:
        return o->max_reply_depth;
    case S_TLS:
        return o->tls;
    case S_VERIFY:
        return o->tls_verify;
    }
    return -1;
}

static void test_setter_ranges(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof range_cases / sizeof range_cases[0];
         i++) {
        hilock_options *o = make_preset();
        hilock_options *before = snapshot(o);
        char label[64];
        snprintf(label, sizeof label, "range case %zu", i);
        int rc = call_setter(o, range_cases[i].which, range_cases[i].value);
        if (range_cases[i].ok) {
            if (rc != HILOCK_OK) {
                print_error("%s: refused: %s\n", label, hilock_last_error());
                fail();
            }
            assert_int_equal(read_field(o, range_cases[i].which),
                             range_cases[i].value);
        } else {
            if (rc != HILOCK_EINVAL) {
                print_error("%s: accepted\n", label);
                fail();
            }
            assert_string_not_equal(hilock_last_error(), "");
            assert_same_options(before, o, label);
        }
        hilock_options_free(before);
        hilock_options_free(o);
    }
}

static void test_backoff_ranges(void **state)
{
    (void)state;
    static const struct {
        int64_t min, max;
        int ok;
    } cases[] = {
        {1, 1, 1},         {1, 3600000, 1}, {3600000, 3600000, 1},
        {50, 5000, 1},     {0, 10, 0},      {-1, 10, 0},
        {10, 9, 0},        {1, 3600001, 0}, {3600001, 3600001, 0},
        {INT64_MIN, 1, 0}, {1, INT64_MAX, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hilock_options *o = make_preset();
        hilock_options *before = snapshot(o);
        int rc = hilock_options_set_reconnect_backoff_ms(o, cases[i].min,
                                                         cases[i].max);
        if (cases[i].ok) {
            assert_int_equal(rc, HILOCK_OK);
            assert_int_equal(o->reconnect_min_ms, cases[i].min);
            assert_int_equal(o->reconnect_max_ms, cases[i].max);
        } else {
            assert_int_equal(rc, HILOCK_EINVAL);
            assert_same_options(before, o, "backoff");
        }
        hilock_options_free(before);
        hilock_options_free(o);
    }
}

static void test_string_setters(void **state)
{
    (void)state;
    typedef int (*string_setter)(hilock_options *, const char *);
    static const struct {
        string_setter set;
        size_t offset;
        int optional;
    } setters[] = {
        {hilock_options_set_host, offsetof(hilock_options, host), 0},
        {hilock_options_set_user, offsetof(hilock_options, user), 1},
        {hilock_options_set_password, offsetof(hilock_options, password), 1},
        {hilock_options_set_tls_ca_file,
         offsetof(hilock_options, tls_ca_file), 1},
        {hilock_options_set_tls_ca_dir, offsetof(hilock_options, tls_ca_dir),
         1},
        {hilock_options_set_tls_cert_file,
         offsetof(hilock_options, tls_cert_file), 1},
        {hilock_options_set_tls_key_file,
         offsetof(hilock_options, tls_key_file), 1},
        {hilock_options_set_tls_server_name,
         offsetof(hilock_options, tls_server_name), 1},
    };
    for (size_t i = 0; i < sizeof setters / sizeof setters[0]; i++) {
        hilock_options *o = make_preset();
        char **field = (char **)((char *)o + setters[i].offset);

        /* Copied, not borrowed. */
        char value[] = "some value";
        assert_int_equal(setters[i].set(o, value), HILOCK_OK);
        assert_ptr_not_equal(*field, value);
        value[0] = 'X';
        assert_string_equal(*field, "some value");

        hilock_options *before = snapshot(o);
        assert_int_equal(setters[i].set(o, ""), HILOCK_EINVAL);
        assert_same_options(before, o, "empty string");
        if (setters[i].optional) {
            assert_int_equal(setters[i].set(o, NULL), HILOCK_OK);
            assert_null(*field);
        } else {
            assert_int_equal(setters[i].set(o, NULL), HILOCK_EINVAL);
            assert_same_options(before, o, "NULL host");
        }
        hilock_options_free(before);
        hilock_options_free(o);
    }

    hilock_options *o = make_defaults();
    struct ev_loop *fake = (struct ev_loop *)(uintptr_t)0x2000;
    assert_int_equal(hilock_options_set_loop(o, fake), HILOCK_OK);
    assert_ptr_equal(o->loop, fake);
    assert_int_equal(hilock_options_set_loop(o, NULL), HILOCK_OK);
    assert_null(o->loop);
    hilock_options_free(o);
}

/* ---- good URLs --------------------------------------------------------- */

/* Expected values after applying a URL to default options.  0 for port
 * and the timeouts means "the default"; noverify 1 means verify is off. */
struct good_url {
    const char *url;
    const char *host;
    int port;
    const char *user;
    const char *password;
    int db;
    int tls;
    int noverify;
    int64_t connect, command, watchdog;
    const char *ca_file, *ca_dir, *cert_file, *key_file, *sni;
};

static const struct good_url good_urls[] = {
    {.url = "redis://localhost", .host = "localhost"},
    {.url = "redis://localhost:6380", .host = "localhost", .port = 6380},
    {.url = "REDIS://Example.COM:1", .host = "Example.COM", .port = 1},
    {.url = "redis://10.0.0.1:65535/15",
     .host = "10.0.0.1",
     .port = 65535,
     .db = 15},
    {.url = "redis://h:06379", .host = "h", .port = 6379},
    {.url = "redis://my_host-1.example.", .host = "my_host-1.example."},
    {.url = "redis://h/", .host = "h"},
    {.url = "redis://h/0", .host = "h"},
    {.url = "redis://h/007", .host = "h", .db = 7},
    {.url = "redis://h/2147483647", .host = "h", .db = INT32_MAX},
    {.url = "redis://:pw@h", .host = "h", .password = "pw"},
    {.url = "redis://alice:pw@h:7000/3",
     .host = "h",
     .port = 7000,
     .user = "alice",
     .password = "pw",
     .db = 3},
    {.url = "redis://alice:p%40ss%3Aw%2Ford@h",
     .host = "h",
     .user = "alice",
     .password = "p@ss:w/ord"},
    {.url = "redis://:a:b@h", .host = "h", .password = "a:b"},
    {.url = "redis://us%65r:%25%2f%3F%23%26%20@h",
     .host = "h",
     .user = "user",
     .password = "%/?#& "},
    {.url = "redis://:%C3%A9t%C3%A9@h", .host = "h",
     .password = "\xc3\xa9t\xc3\xa9"},
    {.url = "redis://:!$'()*+,;=&[]~@h",
     .host = "h",
     .password = "!$'()*+,;=&[]~"},
    {.url = "redis://[::1]", .host = "::1"},
    {.url = "redis://[::1]:6380/2", .host = "::1", .port = 6380, .db = 2},
    {.url = "redis://u:pw@[2001:db8::7]:1234",
     .host = "2001:db8::7",
     .port = 1234,
     .user = "u",
     .password = "pw"},
    {.url = "redis://[::ffff:192.0.2.1]", .host = "::ffff:192.0.2.1"},
    {.url = "rediss://h", .host = "h", .tls = 1},
    {.url = "RedisS://h", .host = "h", .tls = 1},
    {.url = "rediss://h:6390?ca_file=%2Fetc%2Fca.pem&verify=no",
     .host = "h",
     .port = 6390,
     .tls = 1,
     .noverify = 1,
     .ca_file = "/etc/ca.pem"},
    {.url = "rediss://h?ca_dir=/etc/ssl/certs&cert_file=/c.pem&key_file="
            "/k.pem&sni=redis.example.com&verify=TRUE",
     .host = "h",
     .tls = 1,
     .ca_dir = "/etc/ssl/certs",
     .cert_file = "/c.pem",
     .key_file = "/k.pem",
     .sni = "redis.example.com"},
    {.url = "rediss://h?ca_file=/a=b+c?d/@e", .host = "h", .tls = 1,
     .ca_file = "/a=b+c?d/@e"},
    {.url = "rediss://h?verify=0", .host = "h", .tls = 1, .noverify = 1},
    {.url = "rediss://h?verify=1", .host = "h", .tls = 1},
    {.url = "rediss://h?verify=yes", .host = "h", .tls = 1},
    {.url = "rediss://h?verify=False", .host = "h", .tls = 1,
     .noverify = 1},
    {.url = "redis://h?connect_timeout=1&command_timeout=86400000&"
            "watchdog_timeout=45000",
     .host = "h",
     .connect = 1,
     .command = 86400000,
     .watchdog = 45000},
    {.url = "redis://h/?connect_timeout=250", .host = "h", .connect = 250},
    {.url = "redis://h/4?command_timeout=0010",
     .host = "h",
     .db = 4,
     .command = 10},
    {.url = "redis://h?watchdog_timeout=%31%30", .host = "h",
     .watchdog = 10},
    {.url = "redis://h?", .host = "h"},
    {.url = "redis://h/?", .host = "h"},
};

static void check_good(const hilock_options *o, const struct good_url *g)
{
    const char *u = g->url;
    assert_str_eq_or_null(g->host, hilock_options_host(o), "host", u);
    assert_str_eq_or_null(g->user, hilock_options_user(o), "user", u);
    /* Read from the object itself: the library has no password getter. */
    assert_str_eq_or_null(g->password, o->password, "password", u);
    assert_int_equal(hilock_options_has_password(o), g->password != NULL);
    assert_str_eq_or_null(g->ca_file, hilock_options_tls_ca_file(o),
                          "ca_file", u);
    assert_str_eq_or_null(g->ca_dir, hilock_options_tls_ca_dir(o), "ca_dir",
                          u);
    assert_str_eq_or_null(g->cert_file, hilock_options_tls_cert_file(o),
                          "cert_file", u);
    assert_str_eq_or_null(g->key_file, hilock_options_tls_key_file(o),
                          "key_file", u);
    assert_str_eq_or_null(g->sni, hilock_options_tls_server_name(o), "sni",
                          u);
    assert_int_equal(hilock_options_port(o),
                     g->port ? g->port : HILOCK_DEFAULT_PORT);
    assert_int_equal(hilock_options_db(o), g->db);
    assert_int_equal(hilock_options_tls(o), g->tls);
    assert_int_equal(hilock_options_tls_verify(o), g->noverify ? 0 : 1);
    assert_int_equal(hilock_options_connect_timeout_ms(o),
                     g->connect ? g->connect
                                : HILOCK_DEFAULT_CONNECT_TIMEOUT_MS);
    assert_int_equal(hilock_options_command_timeout_ms(o),
                     g->command ? g->command
                                : HILOCK_DEFAULT_COMMAND_TIMEOUT_MS);
    assert_int_equal(hilock_options_watchdog_timeout_ms(o),
                     g->watchdog ? g->watchdog
                                 : HILOCK_DEFAULT_WATCHDOG_TIMEOUT_MS);
    /* Fields a URL cannot name stay at their defaults. */
    assert_int_equal(o->reconnect_min_ms, HILOCK_DEFAULT_RECONNECT_MIN_MS);
    assert_int_equal(o->reconnect_max_ms, HILOCK_DEFAULT_RECONNECT_MAX_MS);
    assert_int_equal(o->max_reply_bytes, HILOCK_DEFAULT_MAX_REPLY_BYTES);
    assert_int_equal(o->max_reply_depth, HILOCK_DEFAULT_MAX_REPLY_DEPTH);
    assert_null(o->loop);
}

static void test_good_urls(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof good_urls / sizeof good_urls[0]; i++) {
        hilock_options *o = make_defaults();
        int rc = hilock_options_set_url(o, good_urls[i].url);
        if (rc != HILOCK_OK) {
            print_error("%s: refused: %s\n", good_urls[i].url,
                        hilock_last_error());
            fail();
        }
        check_good(o, &good_urls[i]);
        /* Applying the same URL twice is idempotent. */
        assert_int_equal(hilock_options_set_url(o, good_urls[i].url), 0);
        check_good(o, &good_urls[i]);
        hilock_options_free(o);
    }
}

/* A URL lands on top of what is there: absent parts keep their values,
 * except the port, which goes with the host. */
static void test_url_on_top(void **state)
{
    (void)state;
    hilock_options *o = make_preset();
    assert_int_equal(hilock_options_set_url(o, "rediss://newhost"), 0);
    assert_string_equal(o->host, "newhost");
    assert_int_equal(o->port, HILOCK_DEFAULT_PORT);
    assert_string_equal(o->user, "olduser");
    assert_string_equal(o->password, "oldpass");
    assert_int_equal(o->db, 9);
    assert_int_equal(o->connect_timeout_ms, 111);
    assert_int_equal(o->tls_verify, 0);
    assert_string_equal(o->tls_ca_file, "/old/ca");
    assert_int_equal(o->max_reply_depth, 3);
    assert_ptr_equal(o->loop, (struct ev_loop *)(uintptr_t)0x1000);

    /* The scheme decides TLS both ways. */
    assert_int_equal(hilock_options_set_url(o, "redis://newhost/"), 0);
    assert_int_equal(o->tls, 0);
    assert_int_equal(o->db, 9);

    /* User info replaces both; an empty user means the default user. */
    assert_int_equal(hilock_options_set_url(o, "redis://:pw@h"), 0);
    assert_null(o->user);
    assert_string_equal(o->password, "pw");
    assert_int_equal(hilock_options_set_url(o, "redis://bob:pw2@h/0"), 0);
    assert_string_equal(o->user, "bob");
    assert_string_equal(o->password, "pw2");
    assert_int_equal(o->db, 0);
    hilock_options_free(o);
}

/* ---- bad URLs ---------------------------------------------------------- */

static const struct {
    const char *url;
    const char *detail; /* a word the error detail must hold, or NULL */
} bad_urls[] = {
    {"", "scheme"},
    {"localhost", "scheme"},
    {"localhost:6379", "scheme"},
    {"user:" SECRET "@host", "scheme"},
    {"redis:/h", "scheme"},
    {"redis:h", "scheme"},
    {"redis//h", "scheme"},
    {"://h", "scheme"},
    {"http://h", "scheme 'http'"},
    {"redis+sentinel://h", "scheme"},
    {"unix:///tmp/redis.sock", "scheme"},
    {"rediss+tls://h", "scheme"},
    {"redis://", "host"},
    {"redis:///0", "host"},
    {"redis://?connect_timeout=5", "host"},
    {"redis://:6379", "host"},
    {"redis://u:" SECRET "@", "host"},
    {"redis://u:" SECRET "@:6379", "host"},
    {"redis://h:", "port"},
    {"redis://h:0", "port"},
    {"redis://h:65536", "port"},
    {"redis://h:99999999999999999999999999", "port"},
    {"redis://h:-1", "port"},
    {"redis://h:+1", "port"},
    {"redis://h:12a", "port"},
    {"redis://h:6379:1", "IPv6"},
    {"redis://::1", "IPv6"},
    {"redis://fe80::1:6379", "IPv6"},
    {"redis://[::1", "]"},
    {"redis://[]", "IPv6"},
    {"redis://[::1]x", "IPv6"},
    {"redis://[::1]:", "port"},
    {"redis://[::1]:0", "port"},
    {"redis://[::g]", "IPv6"},
    {"redis://[1.2.3.4]", "IPv6"},
    {"redis://[fe80::1%25eth0]", "IPv6"},
    {"redis://[0000:0000:0000:0000:0000:0000:0000:0000:0000]", "IPv6"},
    {"redis://256.1.1.1", "IPv4"},
    {"redis://1.2.3", "IPv4"},
    {"redis://1.2.3.4.5", "IPv4"},
    {"redis://h%41", "host"},
    {"redis://h!x", "host"},
    {"redis://h[x", "host"},
    {"redis://" SECRET "@h", "':'"},
    {"redis://:@h", "password"},
    {"redis://alice:@h", "password"},
    {"redis://@h", "':'"},
    {"redis://:s3c@ret@h", "%40"},
    {"redis://:" SECRET "/x@h", "%2F"},
    {"redis://:" SECRET "?x@h", "%3F"},
    {"redis://:" SECRET "#x@h", "%23"},
    {"redis://u:" SECRET "/x@h", "%2F"},
    {"redis://u:" SECRET "?x@h", "%2F"},
    {"redis://u:1234/" SECRET "@h", "%2F"},
    {"redis://u:1234?" SECRET "@h", "%2F"},
    {"redis://u:1234#" SECRET "@h", "%2F"},
    {"redis://:" SECRET "%@h", "percent"},
    {"redis://:" SECRET "%4@h", "percent"},
    {"redis://:" SECRET "%zz@h", "percent"},
    {"redis://:" SECRET "%0g@h", "percent"},
    {"redis://:" SECRET "%00@h", "%00"},
    {"redis://us%00er:" SECRET "@h", "%00"},
    {"redis://u%:" SECRET "@h", "percent"},
    {"redis://h/-1", "db"},
    {"redis://h/abc", "db"},
    {"redis://h/1/2", "db"},
    {"redis://h/2147483648", "db"},
    {"redis://h/99999999999999999999999", "db"},
    {"redis://h/+1", "db"},
    {"redis://h/1x", "db"},
    {"redis://h//", "db"},
    {"redis://h/0#frag", "fragment"},
    {"redis://h#", "fragment"},
    {"redis://h?connect_timeout=5#x", "fragment"},
    {"redis://h?foo=1", "'foo'"},
    {"redis://h?password=" SECRET, "'password'"},
    {"redis://h?db=1", "'db'"},
    {"rediss://h?CA_FILE=/x", "'CA_FILE'"},
    {"redis://h?connect_timeout", "'='"},
    {"redis://h?connect_timeout=", "value"},
    {"redis://h?=5", "''"},
    {"redis://h?connect_timeout=0", "connect_timeout"},
    {"redis://h?command_timeout=86400001", "command_timeout"},
    {"redis://h?watchdog_timeout=-5", "watchdog_timeout"},
    {"redis://h?connect_timeout=5ms", "connect_timeout"},
    {"redis://h?connect_timeout=1.5", "connect_timeout"},
    {"redis://h?connect_timeout=%2B5", "connect_timeout"},
    {"redis://h?connect_timeout=99999999999999999999999", "connect_timeout"},
    {"redis://h?connect_timeout=5&connect_timeout=6", "repeated"},
    {"rediss://h?verify=1&verify=1", "repeated"},
    {"redis://h?&connect_timeout=5", "empty"},
    {"redis://h?connect_timeout=5&", "empty"},
    {"redis://h?connect_timeout=5&&command_timeout=5", "empty"},
    {"redis://h?&", "empty"},
    {"redis://h?ca_file=/x", "rediss"},
    {"redis://h?verify=no", "rediss"},
    {"redis://h?sni=x", "rediss"},
    {"rediss://h?verify=maybe", "verify"},
    {"rediss://h?verify=", "verify"},
    {"rediss://h?verify=on", "verify"},
    {"rediss://h?ca_file=%00", "%00"},
    {"rediss://h?ca_file=%2", "percent"},
    {"rediss://h?ca_file=/x%", "percent"},
    {"rediss://h?sni=a#b", "fragment"},
    {"redis://h h", "0x20"},
    {"redis://h\tx", "0x09"},
    {"redis://h\x7f", "0x7f"},
    {"redis://h\xc3\xa9", "0xc3"},
    {"redis://:s3cr\xc3\xa9t@h", "0xc3"},
    {" redis://h", "0x20"},
    {"redis://h\n", "0x0a"},
    /* The last good part is applied before the bad one is found. */
    {"rediss://newhost:1/5?connect_timeout=9&verify=no&foo=1", "'foo'"},
    {"redis://alice:pw@newhost:1/5?connect_timeout=0", "connect_timeout"},
};

static void test_bad_urls(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++) {
        hilock_options *o = make_preset();
        expect_bad_url(o, bad_urls[i].url, bad_urls[i].url,
                       bad_urls[i].detail);
        hilock_options_free(o);
        /* Defaults too, since "unchanged" there is a different state. */
        o = make_defaults();
        expect_bad_url(o, bad_urls[i].url, bad_urls[i].url,
                       bad_urls[i].detail);
        hilock_options_free(o);
    }
}

/* ---- size limits and hostile input ----------------------------------- */

static char *url_of_length(const char *prefix, size_t len, char fill)
{
    char *u = malloc(len + 1);
    assert_non_null(u);
    size_t plen = strlen(prefix);
    assert_true(plen <= len);
    memcpy(u, prefix, plen);
    memset(u + plen, fill, len - plen);
    u[len] = '\0';
    return u;
}

static void test_length_limit(void **state)
{
    (void)state;
    hilock_options *o = make_preset();

    /* A password fills the URL to exactly the limit: accepted. */
    char *u = url_of_length("redis://:", URL_MAX, 'p');
    memcpy(u + URL_MAX - 2, "@h", 2);
    assert_int_equal(hilock_options_set_url(o, u), HILOCK_OK);
    assert_int_equal(strlen(o->password), URL_MAX - strlen("redis://:@h"));
    free(u);

    /* One byte more: refused, whatever the rest would have said. */
    u = url_of_length("redis://:", URL_MAX + 1, 'p');
    memcpy(u + URL_MAX - 1, "@h", 2);
    expect_bad_url(o, u, "limit + 1", "8192");
    free(u);

    /* A 1 MB URL. */
    u = url_of_length("redis://", 1024 * 1024, 'a');
    expect_bad_url(o, u, "1 MB", "8192");
    free(u);

    /* The length check must stop reading at the limit: this buffer has
     * no terminator at all, and the sanitizers watch the byte after it. */
    char *raw = malloc(URL_MAX + 1);
    assert_non_null(raw);
    memset(raw, 'a', URL_MAX + 1);
    expect_bad_url(o, raw, "unterminated", "8192");
    free(raw);

    /* A host of 255 characters is the longest allowed. */
    u = url_of_length("redis://", strlen("redis://") + 255, 'a');
    assert_int_equal(hilock_options_set_url(o, u), HILOCK_OK);
    assert_int_equal(strlen(o->host), 255);
    free(u);
    u = url_of_length("redis://", strlen("redis://") + 256, 'a');
    expect_bad_url(o, u, "host 256", "host");
    free(u);

    hilock_options_free(o);
}

static void test_every_byte(void **state)
{
    (void)state;
    hilock_options *o = make_preset();
    /* Each byte in each position class: scheme, user info, host, port,
     * db, query key and query value. */
    static const char *const templates[] = {
        "r^dis://h",         "redis://:p^w@h", "redis://h^st",
        "redis://h:63^9",    "redis://h/1^",   "redis://h?c^=1",
        "rediss://h?sni=a^b",
    };
    for (size_t t = 0; t < sizeof templates / sizeof templates[0]; t++) {
        for (int c = 1; c < 256; c++) {
            char url[64];
            snprintf(url, sizeof url, "%s", templates[t]);
            *strchr(url, '^') = (char)c;
            hilock_options *before = snapshot(o);
            int rc = hilock_options_set_url(o, url);
            if (rc != HILOCK_OK) {
                assert_int_equal(rc, HILOCK_EINVAL);
                assert_same_options(before, o, url);
            }
            hilock_options_free(before);
            /* Get back to the preset for the next byte. */
            hilock_options_free(o);
            o = make_preset();
        }
    }
    hilock_options_free(o);
}

/* Every prefix of every good URL, and every single-byte mutation of it,
 * must either parse or be refused cleanly. */
static void test_truncations_and_mutations(void **state)
{
    (void)state;
    static const char mutations[] = {'\x01', ' ', '%', '@', ':', '/', '?',
                                     '#',    '&', '=', '[', ']', '0', 'z',
                                     '\x80', '\xff'};
    hilock_options *o = make_preset();
    hilock_options *before = snapshot(o);
    for (size_t i = 0; i < sizeof good_urls / sizeof good_urls[0]; i++) {
        const char *url = good_urls[i].url;
        size_t len = strlen(url);
        for (size_t cut = 0; cut <= len; cut++) {
            /* An exact-size heap copy, so reading past the end is seen. */
            char *u = malloc(cut + 1);
            assert_non_null(u);
            memcpy(u, url, cut);
            u[cut] = '\0';
            int rc = hilock_options_set_url(o, u);
            if (rc != HILOCK_OK) {
                assert_int_equal(rc, HILOCK_EINVAL);
                assert_same_options(before, o, u);
            } else {
                hilock_options_free(o);
                o = make_preset();
            }
            for (size_t m = 0; cut < len && m < sizeof mutations; m++) {
                char *v = malloc(len + 1);
                assert_non_null(v);
                memcpy(v, url, len + 1);
                v[cut] = mutations[m];
                rc = hilock_options_set_url(o, v);
                if (rc != HILOCK_OK) {
                    assert_int_equal(rc, HILOCK_EINVAL);
                    assert_same_options(before, o, v);
                } else {
                    hilock_options_free(o);
                    o = make_preset();
                }
                free(v);
            }
            free(u);
        }
    }
    hilock_options_free(before);
    hilock_options_free(o);
}

/* Random bytes after a valid scheme, with a fixed seed so that a failure
 * reproduces. */
static void test_random_input(void **state)
{
    (void)state;
    static const char alphabet[] = "redis:/@[]?&=#%0123456789abcdefABCDEF"
                                   "._-~+!$:hxyz\x01\x7f\x80\xff ";
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    hilock_options *o = make_preset();
    hilock_options *before = snapshot(o);
    for (int iter = 0; iter < 20000; iter++) {
        char url[96];
        size_t prefix = 0;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        if (seed & (1ull << 40)) {
            const char *scheme = (seed >> 41) & 1 ? "rediss://" : "redis://";
            prefix = strlen(scheme);
            memcpy(url, scheme, prefix);
        }
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t len = prefix + (size_t)((seed >> 33) % 64);
        for (size_t i = prefix; i < len; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            url[i] = alphabet[(seed >> 33) % (sizeof alphabet - 1)];
        }
        url[len] = '\0';
        int rc = hilock_options_set_url(o, url);
        if (rc != HILOCK_OK) {
            assert_int_equal(rc, HILOCK_EINVAL);
            assert_same_options(before, o, "random");
        } else {
            hilock_options_free(o);
            o = make_preset();
        }
    }
    hilock_options_free(before);
    hilock_options_free(o);
}

/* ---- out of memory ------------------------------------------------------ */

static long allocations_left = -1;

static void *failing_malloc(size_t size)
{
    if (allocations_left == 0)
        return NULL;
    if (allocations_left > 0)
        allocations_left--;
    return malloc(size);
}

static void *failing_calloc(size_t count, size_t size)
{
    if (allocations_left == 0)
        return NULL;
    if (allocations_left > 0)
        allocations_left--;
    return calloc(count, size);
}

static void *failing_realloc(void *ptr, size_t size)
{
    if (allocations_left == 0)
        return NULL;
    if (allocations_left > 0)
        allocations_left--;
    return realloc(ptr, size);
}

static const hilock_allocators failing_allocators = {
    failing_malloc, failing_calloc, failing_realloc, free};

static int restore_allocators(void **state)
{
    (void)state;
    allocations_left = -1;
    hilock_set_allocators(NULL);
    return 0;
}

static void test_url_out_of_memory(void **state)
{
    (void)state;
    static const char url[] =
        "rediss://alice:p%40ss@[::1]:6390/3?connect_timeout=10&"
        "command_timeout=20&watchdog_timeout=30&ca_file=/ca&ca_dir=/cad&"
        "cert_file=/c&key_file=/k&sni=s.example&verify=no";
    assert_int_equal(hilock_set_allocators(&failing_allocators), 0);
    hilock_options *o = make_preset();
    hilock_options *before = snapshot(o);
    int rc = HILOCK_ENOMEM;
    long n;
    for (n = 0; n < 1000 && rc == HILOCK_ENOMEM; n++) {
        allocations_left = n;
        rc = hilock_options_set_url(o, url);
        allocations_left = -1;
        if (rc == HILOCK_ENOMEM)
            assert_same_options(before, o, "ENOMEM");
    }
    assert_int_equal(rc, HILOCK_OK);
    /* Failures were seen before success, or the test proves nothing. */
    assert_true(n > 5);
    assert_string_equal(o->host, "::1");
    assert_string_equal(o->user, "alice");
    assert_string_equal(o->password, "p@ss");
    assert_string_equal(o->tls_server_name, "s.example");
    assert_int_equal(o->tls_verify, 0);
    hilock_options_free(before);
    hilock_options_free(o);
}

static void test_options_out_of_memory(void **state)
{
    (void)state;
    assert_int_equal(hilock_set_allocators(&failing_allocators), 0);

    hilock_options *o = (hilock_options *)(uintptr_t)1;
    for (long n = 0; n < 2; n++) {
        allocations_left = n;
        assert_int_equal(hilock_options_create(&o), HILOCK_ENOMEM);
        assert_null(o);
    }
    allocations_left = -1;

    hilock_options *src = make_preset();
    int rc = HILOCK_ENOMEM;
    for (long n = 0; rc == HILOCK_ENOMEM; n++) {
        hilock_options *c = (hilock_options *)(uintptr_t)1;
        allocations_left = n;
        rc = hilock_options_copy(&c, src);
        allocations_left = -1;
        if (rc == HILOCK_ENOMEM) {
            assert_null(c);
        } else {
            assert_int_equal(rc, HILOCK_OK);
            assert_same_options(src, c, "copy after ENOMEM");
            hilock_options_free(c);
        }
    }

    hilock_options *before = snapshot(src);
    allocations_left = 0;
    assert_int_equal(hilock_options_set_host(src, "x"), HILOCK_ENOMEM);
    assert_int_equal(hilock_options_set_password(src, "x"), HILOCK_ENOMEM);
    assert_int_equal(hilock_options_set_tls_key_file(src, "x"),
                     HILOCK_ENOMEM);
    /* Clearing needs no memory. */
    allocations_left = -1;
    assert_same_options(before, src, "setter ENOMEM");
    allocations_left = 0;
    assert_int_equal(hilock_options_set_user(src, NULL), HILOCK_OK);
    allocations_left = -1;
    assert_null(src->user);
    hilock_options_free(before);
    hilock_options_free(src);
}

/* The connection count: a query key and a setter with a range. */
static void test_connections_option(void **state)
{
    (void)state;
    hilock_options *o = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_connections(o),
                     HILOCK_DEFAULT_CONNECTIONS);
    assert_int_equal(hilock_options_set_url(o, "redis://h?connections=3"),
                     HILOCK_OK);
    assert_int_equal(hilock_options_connections(o), 3);
    assert_int_equal(hilock_options_set_url(o, "redis://h?connections=0"),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_url(o, "redis://h?connections=17"),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_url(o, "redis://h?connections=x"),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_connections(o), 3);
    assert_int_equal(hilock_options_set_connections(o, 0), HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_connections(o, 16), HILOCK_OK);
    assert_int_equal(hilock_options_connections(o), 16);
    assert_int_equal(hilock_options_set_connections(NULL, 1), HILOCK_EINVAL);
    assert_int_equal(hilock_options_busy_poll_us(o), 0);
    assert_int_equal(hilock_options_set_busy_poll_us(o, -2), HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_busy_poll_us(o, -1), HILOCK_OK);
    assert_int_equal(hilock_options_busy_poll_us(o), -1);
    assert_int_equal(hilock_options_set_busy_poll_us(o, 1000001),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_busy_poll_us(o, 200), HILOCK_OK);
    assert_int_equal(hilock_options_busy_poll_us(o), 200);
    hilock_options_free(o);
}

/* The options of the fair queue and of RedLock: defaults, ranges, and
 * their URL keys, which leave the value alone when refused. */
/* Several hosts name a cluster's seed nodes: the first is the address,
 * the rest are kept in order, each with its own port; a bad one refuses
 * the whole URL and a later single-host URL drops them. */
static void test_seed_host_list(void **state)
{
    (void)state;
    hilock_options *o = make_defaults();
    assert_int_equal(hilock_options_set_url(
                         o, "redis://:pw@10.0.0.1:7000,node-b,[::1]:7002/2"),
                     HILOCK_OK);
    assert_string_equal(o->host, "10.0.0.1");
    assert_int_equal(o->port, 7000);
    assert_string_equal(o->password, "pw");
    assert_int_equal(o->db, 2);
    assert_non_null(o->seeds);
    assert_string_equal(o->seeds, "node-b:6379,[::1]:7002");

    hilock_options *copy = snapshot(o);
    assert_string_equal(copy->seeds, o->seeds);
    assert_ptr_not_equal(copy->seeds, o->seeds);
    hilock_options_free(copy);

    assert_int_equal(hilock_options_set_url(o, "redis://a:1,,b:2"),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_url(o, "redis://a:1,b:99999"),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_url(o, "redis://a:1,"),
                     HILOCK_EINVAL);
    assert_string_equal(o->host, "10.0.0.1");
    assert_string_equal(o->seeds, "node-b:6379,[::1]:7002");

    assert_int_equal(hilock_options_set_url(o, "redis://one:7001"),
                     HILOCK_OK);
    assert_null(o->seeds);
    assert_int_equal(hilock_options_set_url(o, "redis://one,two"), HILOCK_OK);
    assert_string_equal(o->seeds, "two:6379");
    assert_int_equal(hilock_options_set_host(o, "three"), HILOCK_OK);
    assert_null(o->seeds);
    hilock_options_free(o);
}

static void test_sentinel_urls(void **state)
{
    (void)state;
    hilock_options *o = make_defaults();
    assert_int_equal(hilock_options_set_url(
                         o, "redis-sentinel://:pw@s1,s2:26380/3#my%23master"),
                     HILOCK_OK);
    assert_string_equal(o->host, "s1");
    assert_int_equal(o->port, HILOCK_DEFAULT_SENTINEL_PORT);
    assert_string_equal(o->seeds, "s2:26380");
    assert_string_equal(o->password, "pw");
    assert_int_equal(o->db, 3);
    assert_int_equal(o->tls, 0);
    assert_string_equal(hilock_options_sentinel_master(o), "my#master");

    hilock_options *copy = snapshot(o);
    assert_string_equal(copy->sentinel_master, "my#master");
    assert_ptr_not_equal(copy->sentinel_master, o->sentinel_master);
    hilock_options_free(copy);

    assert_int_equal(hilock_options_set_url(
                         o, "RediSS-Sentinel://h:1?command_timeout=50#m"),
                     HILOCK_OK);
    assert_int_equal(o->tls, 1);
    assert_string_equal(o->sentinel_master, "m");

    /* The name is required, and nowhere else is a fragment allowed. */
    const char *bad[] = {"redis-sentinel://h", "redis-sentinel://h#",
                         "redis-sentinel://h/#", "redis://h#m",
                         "redis-sentinels://h#m"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(hilock_options_set_url(o, bad[i]), HILOCK_EINVAL);
        assert_string_equal(o->sentinel_master, "m");
    }
    /* Any other scheme turns Sentinel off. */
    assert_int_equal(hilock_options_set_url(o, "redis://h"), HILOCK_OK);
    assert_null(hilock_options_sentinel_master(o));

    assert_int_equal(hilock_options_set_sentinel_master(o, ""),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_sentinel_auth(o, "u", NULL),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_sentinel_auth(o, "u", "p"),
                     HILOCK_OK);
    assert_string_equal(o->sentinel_user, "u");
    assert_int_equal(hilock_options_set_sentinel_auth(o, NULL, NULL),
                     HILOCK_OK);
    assert_null(o->sentinel_user);
    assert_null(o->sentinel_password);
    hilock_options_free(o);
}

/* Valkey's schemes are the same four: TLS and Sentinel as their redis
 * forms say, case aside. */
static void test_valkey_schemes(void **state)
{
    (void)state;
    static const struct {
        const char *url;
        int tls;
        bool sentinel;
    } cases[] = {
        {"valkey://h:7000/2", 0, false},
        {"valkeys://h:7000/2", 1, false},
        {"VALKEY://h:7000/2", 0, false},
        {"valkey-sentinel://h:7000/2#m", 0, true},
        {"valkeys-sentinel://h:7000/2#m", 1, true},
        {"ValKeyS-Sentinel://h:7000/2#m", 1, true},
    };
    hilock_options *o = make_defaults();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_int_equal(hilock_options_set_url(o, cases[i].url), HILOCK_OK);
        assert_string_equal(o->host, "h");
        assert_int_equal(o->port, 7000);
        assert_int_equal(o->db, 2);
        assert_int_equal(o->tls, cases[i].tls);
        if (cases[i].sentinel)
            assert_string_equal(hilock_options_sentinel_master(o), "m");
        else
            assert_null(hilock_options_sentinel_master(o));
    }
    /* The sentinel forms default to the sentinel port, the others not. */
    assert_int_equal(hilock_options_set_url(o, "valkey-sentinel://h#m"),
                     HILOCK_OK);
    assert_int_equal(o->port, HILOCK_DEFAULT_SENTINEL_PORT);
    assert_int_equal(hilock_options_set_url(o, "valkeys://h"), HILOCK_OK);
    assert_int_equal(o->port, HILOCK_DEFAULT_PORT);
    /* A TLS setting needs a TLS scheme, whichever spelling. */
    assert_int_equal(hilock_options_set_url(o, "valkey://h?verify=no"),
                     HILOCK_EINVAL);
    assert_non_null(strstr(hilock_last_error(), "valkeys://"));
    assert_int_equal(hilock_options_set_url(o, "valkeys://h?verify=no"),
                     HILOCK_OK);
    assert_int_equal(o->tls_verify, 0);
    const char *bad[] = {"valkey+sentinel://h#m", "valkey-tls://h",
                         "valkeyss://h", "valkey://h#m"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(hilock_options_set_url(o, bad[i]), HILOCK_EINVAL);
    hilock_options_free(o);
}

/* Up to HILOCK_MAX_SENTINELS sentinels; one more is refused, and says
 * so, where a cluster URL takes as many seeds as fit. */
static void url_of_hosts(char *url, size_t cap, const char *scheme, int n)
{
    size_t at = (size_t)snprintf(url, cap, "%s://", scheme);
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(url + at, cap - at, "%ss%d:%d", i ? "," : "",
                               i, 26379 + i);
    snprintf(url + at, cap - at, "#m");
}

static void test_sentinel_limit(void **state)
{
    (void)state;
    hilock_options *o = make_defaults();
    char url[1024];
    url_of_hosts(url, sizeof url, "redis-sentinel", HILOCK_MAX_SENTINELS);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    assert_string_equal(o->host, "s0");
    url_of_hosts(url, sizeof url, "rediss-sentinel",
                 HILOCK_MAX_SENTINELS + 1);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_EINVAL);
    assert_non_null(strstr(hilock_last_error(), "17 sentinels; at most 16"));
    assert_int_equal(o->tls, 0);
    url_of_hosts(url, sizeof url, "redis", HILOCK_MAX_SENTINELS + 1);
    *strrchr(url, '#') = '\0';
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    assert_null(o->sentinel_master);
    hilock_options_free(o);
}

static void test_replica_ack_option(void **state)
{
    (void)state;
    hilock_options *o = make_defaults();
    assert_int_equal(hilock_options_replica_ack(o), HILOCK_ACK_MAJORITY);
    assert_int_equal(hilock_options_replica_ack_timeout_ms(o),
                     HILOCK_DEFAULT_REPLICA_ACK_TIMEOUT_MS);
    assert_int_equal(hilock_options_set_url(
                         o, "redis://h/?replicas=One&ack_timeout=250"),
                     HILOCK_OK);
    assert_int_equal(hilock_options_replica_ack(o), HILOCK_ACK_ONE);
    assert_int_equal(hilock_options_replica_ack_timeout_ms(o), 250);
    assert_int_equal(hilock_options_set_url(o, "redis://h/?replicas=two"),
                     HILOCK_EINVAL);
    assert_non_null(strstr(hilock_last_error(), "none, one, majority or all"));
    assert_int_equal(hilock_options_set_url(
                         o, "redis://h/?replicas=all&replicas=one"),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_replica_ack(o), HILOCK_ACK_ONE);
    assert_int_equal(hilock_options_set_url(o, "redis://h/?replicas=none"),
                     HILOCK_OK);
    assert_int_equal(hilock_options_replica_ack(o), HILOCK_ACK_NONE);
    assert_int_equal(hilock_options_set_replica_ack(o, (hilock_replica_ack)4),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_replica_ack(o, HILOCK_ACK_ALL),
                     HILOCK_OK);
    assert_int_equal(hilock_options_replica_ack(NULL), -1);
    hilock_options_free(o);
}

static void test_redisson_pubsub_option(void **state)
{
    (void)state;
    hilock_options *o = make_defaults();
    assert_int_equal(hilock_options_redisson_pubsub(o),
                     HILOCK_REDISSON_PUBSUB_SHARDED);
    assert_int_equal(hilock_options_set_url(
                         o, "redis://h:7000/?redisson_pubsub=plain"),
                     HILOCK_OK);
    assert_int_equal(hilock_options_redisson_pubsub(o),
                     HILOCK_REDISSON_PUBSUB_PLAIN);
    assert_int_equal(hilock_options_set_url(
                         o, "redis://h/?redisson_pubsub=BOTH&replicas=one"),
                     HILOCK_OK);
    assert_int_equal(hilock_options_redisson_pubsub(o),
                     HILOCK_REDISSON_PUBSUB_BOTH);
    assert_int_equal(hilock_options_replica_ack(o), HILOCK_ACK_ONE);
    /* A URL without the key keeps the mode, as with every option. */
    assert_int_equal(hilock_options_set_url(o, "redis://h/"), HILOCK_OK);
    assert_int_equal(hilock_options_redisson_pubsub(o),
                     HILOCK_REDISSON_PUBSUB_BOTH);

    /* Redisson's own word for its default is no mode of ours: the guide
     * says which mode goes with it. */
    assert_int_equal(hilock_options_set_url(
                         o, "redis://h/?redisson_pubsub=auto"),
                     HILOCK_EINVAL);
    assert_string_equal(hilock_last_error(),
                        "URL redisson_pubsub 'auto' is not sharded, plain "
                        "or both");
    assert_int_equal(hilock_options_set_url(
                         o, "redis://h/?redisson_pubsub=sharded,plain"),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_url(
                         o, "redis://h/?redisson_pubsub="),
                     HILOCK_EINVAL);
    assert_int_equal(
        hilock_options_set_url(
            o, "redis://h/?redisson_pubsub=plain&redisson_pubsub=both"),
        HILOCK_EINVAL);
    assert_non_null(strstr(hilock_last_error(), "repeated"));
    assert_int_equal(hilock_options_redisson_pubsub(o),
                     HILOCK_REDISSON_PUBSUB_BOTH);

    assert_int_equal(hilock_options_set_redisson_pubsub(
                         o, (hilock_redisson_pubsub)3),
                     HILOCK_EINVAL);
    assert_string_equal(hilock_last_error(),
                        "redisson pubsub 3 is not sharded, plain or both");
    assert_int_equal(hilock_options_set_redisson_pubsub(
                         NULL, HILOCK_REDISSON_PUBSUB_PLAIN),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_redisson_pubsub(
                         o, HILOCK_REDISSON_PUBSUB_SHARDED),
                     HILOCK_OK);
    assert_int_equal(hilock_options_redisson_pubsub(o),
                     HILOCK_REDISSON_PUBSUB_SHARDED);
    assert_int_equal(hilock_options_redisson_pubsub(NULL), -1);

    /* A copy, which each client makes, keeps the mode. */
    hilock_options *copy = NULL;
    assert_int_equal(hilock_options_set_redisson_pubsub(
                         o, HILOCK_REDISSON_PUBSUB_PLAIN),
                     HILOCK_OK);
    assert_int_equal(hilock_options_copy(&copy, o), HILOCK_OK);
    assert_int_equal(hilock_options_redisson_pubsub(copy),
                     HILOCK_REDISSON_PUBSUB_PLAIN);
    hilock_options_free(copy);
    hilock_options_free(o);
}

static void test_waiter_node_quarantine_options(void **state)
{
    (void)state;
    hilock_options *o = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_waiter_timeout_ms(o),
                     HILOCK_DEFAULT_WAITER_TIMEOUT_MS);
    assert_int_equal(hilock_options_node_timeout_ms(o),
                     HILOCK_DEFAULT_NODE_TIMEOUT_MS);
    assert_int_equal(hilock_options_quarantine_ms(o), 0);
    assert_int_equal(hilock_options_set_url(
                         o, "redis://h?waiter_timeout=1500&node_timeout=40"
                            "&quarantine=9000"),
                     HILOCK_OK);
    assert_int_equal(hilock_options_waiter_timeout_ms(o), 1500);
    assert_int_equal(hilock_options_node_timeout_ms(o), 40);
    assert_int_equal(hilock_options_quarantine_ms(o), 9000);
    assert_int_equal(hilock_options_set_url(o, "redis://h?waiter_timeout=99"),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_url(o, "redis://h?node_timeout=0"),
                     HILOCK_EINVAL);
    assert_int_equal(
        hilock_options_set_url(o, "redis://h?quarantine=86400001"),
        HILOCK_EINVAL);
    assert_int_equal(hilock_options_waiter_timeout_ms(o), 1500);
    assert_int_equal(hilock_options_node_timeout_ms(o), 40);
    assert_int_equal(hilock_options_quarantine_ms(o), 9000);
    assert_int_equal(hilock_options_set_waiter_timeout_ms(o, 100), HILOCK_OK);
    assert_int_equal(hilock_options_set_waiter_timeout_ms(o, 3600001),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_quarantine_ms(o, 0), HILOCK_OK);
    assert_int_equal(hilock_options_quarantine_ms(o), 0);
    assert_int_equal(hilock_options_set_node_timeout_ms(NULL, 5),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_node_timeout_ms(NULL), -1);
    hilock_options *copy = NULL;
    assert_int_equal(hilock_options_copy(&copy, o), HILOCK_OK);
    assert_int_equal(hilock_options_waiter_timeout_ms(copy), 100);
    assert_int_equal(hilock_options_node_timeout_ms(copy), 40);
    hilock_options_free(copy);
    hilock_options_free(o);
}

/* lock_delay: ms, 0 is off, at most an hour; a refusal names the option
 * and its range, and leaves the value alone. */
static void test_lock_delay_option(void **state)
{
    (void)state;
    hilock_options *o = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_lock_delay_ms(o), 0);
    assert_int_equal(hilock_options_set_url(o, "redis://h?lock_delay=1500"),
                     HILOCK_OK);
    assert_int_equal(hilock_options_lock_delay_ms(o), 1500);
    static const char *const bad[] = {
        "redis://h?lock_delay=-1",      "redis://h?lock_delay=3600001",
        "redis://h?lock_delay=1s",      "redis://h?lock_delay=",
        "redis://h?lock_delay=1.5",
        "redis://h?lock_delay=99999999999999999999",
        "redis://h?lock_delay=1&lock_delay=2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (hilock_options_set_url(o, bad[i]) != HILOCK_EINVAL)
            fail_msg("%s was taken", bad[i]);
        /* Every refusal names the key it refuses. */
        assert_non_null(strstr(hilock_last_error(), "lock_delay"));
        assert_int_equal(hilock_options_lock_delay_ms(o), 1500);
    }
    assert_int_equal(hilock_options_set_url(o, "redis://h?lock_delay=0"),
                     HILOCK_OK);
    assert_int_equal(hilock_options_lock_delay_ms(o), 0);
    assert_int_equal(hilock_options_set_lock_delay_ms(o, 3600000), HILOCK_OK);
    assert_int_equal(hilock_options_set_lock_delay_ms(o, 3600001),
                     HILOCK_EINVAL);
    assert_non_null(strstr(hilock_last_error(), "lock delay out of range"));
    assert_int_equal(hilock_options_set_lock_delay_ms(o, INT64_MIN),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_lock_delay_ms(o, -1), HILOCK_EINVAL);
    assert_int_equal(hilock_options_lock_delay_ms(o), 3600000);
    assert_int_equal(hilock_options_set_lock_delay_ms(NULL, 5), HILOCK_EINVAL);
    assert_int_equal(hilock_options_lock_delay_ms(NULL), -1);
    hilock_options *copy = NULL;
    assert_int_equal(hilock_options_copy(&copy, o), HILOCK_OK);
    assert_int_equal(hilock_options_lock_delay_ms(copy), 3600000);
    hilock_options_free(copy);
    hilock_options_free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_delay_option),
        cmocka_unit_test(test_connections_option),
        cmocka_unit_test(test_seed_host_list),
        cmocka_unit_test(test_sentinel_urls),
        cmocka_unit_test(test_valkey_schemes),
        cmocka_unit_test(test_sentinel_limit),
        cmocka_unit_test(test_replica_ack_option),
        cmocka_unit_test(test_redisson_pubsub_option),
        cmocka_unit_test(test_waiter_node_quarantine_options),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_copy_is_deep),
        cmocka_unit_test(test_setter_ranges),
        cmocka_unit_test(test_backoff_ranges),
        cmocka_unit_test(test_string_setters),
        cmocka_unit_test(test_good_urls),
        cmocka_unit_test(test_url_on_top),
        cmocka_unit_test(test_bad_urls),
        cmocka_unit_test(test_length_limit),
        cmocka_unit_test(test_every_byte),
        cmocka_unit_test(test_truncations_and_mutations),
        cmocka_unit_test(test_random_input),
        cmocka_unit_test_teardown(test_url_out_of_memory,
                                  restore_allocators),
        cmocka_unit_test_teardown(test_options_out_of_memory,
                                  restore_allocators),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
