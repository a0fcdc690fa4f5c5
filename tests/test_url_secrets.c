/* No error message of the URL parser may quote a password, however the
 * URL around it is broken: hand-picked breakages, then every single-byte
 * deletion and every insertion of a delimiter into URLs that hold one. */
/* ctest-timeout: 60 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hilock/hilock.h"

/* No 4-byte piece of it is English or a number the parser could name. */
#define SECRET "Qx7vKz9W"

static int checked;

/* Whether any 4 bytes in a row of SECRET appear in text. */
static const char *leaked_piece(const char *text)
{
    static char piece[5];
    size_t n = strlen(SECRET);
    for (size_t i = 0; i + 4 <= n; i++) {
        memcpy(piece, SECRET + i, 4);
        piece[4] = '\0';
        if (strstr(text, piece) != NULL)
            return piece;
    }
    return NULL;
}

static void check_url(const char *url)
{
    hilock_options *o;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    int rc = hilock_options_set_url(o, url);
    const char *why = hilock_last_error();
    const char *piece = rc == HILOCK_OK ? NULL : leaked_piece(why);
    if (piece != NULL)
        fail_msg("the error for '%s' quotes '%s' of the password: %s", url,
                 piece, why);
    hilock_options_free(o);
    checked++;
}

static void test_hand_picked(void **state)
{
    static const char *const urls[] = {
        /* The user info without its "@host". */
        "redis://default:" SECRET,
        "redis://:" SECRET,
        "redis://user:" SECRET "/0",
        "redis://user:" SECRET "?connect_timeout=5",
        "rediss://user:" SECRET,
        /* Raw delimiters inside the password. */
        "redis://user:Qx7v/Kz9W@host",
        "redis://user:Qx7v?Kz9W@host",
        "redis://user:Qx7v#Kz9W@host",
        "redis://user:Qx7v:Kz9W@host",
        "redis://user:Qx7v@Kz9W@host",
        "redis://user:Qx7v[Kz9W@host",
        "redis://user:Qx7v]Kz9W@host",
        "redis://user:Qx7v%Kz9W@host",
        "redis://user:Qx7v%zzKz9W@host",
        "redis://us@er:Qx7v/Kz9W@host",
        "redis://user:12/Qx7vKz9W@host",
        "redis://user:12?Qx7vKz9W@host",
        "redis://user:12?a=Qx7vKz9W@host",
        "redis://user:12?connect_timeout=Qx7vKz9W@host",
        /* Broken elsewhere, with the password in place. */
        "redis://user:" SECRET "@",
        "redis://user:" SECRET "@:6379",
        "redis://user:" SECRET "@host:port",
        "redis://user:" SECRET "@host:99999",
        "redis://user:" SECRET "@ho!st",
        "redis://user:" SECRET "@[::1",
        "redis://user:" SECRET "@[::1]x",
        "redis://user:" SECRET "@host/db",
        "redis://user:" SECRET "@host?bogus=1",
        "redis://user:" SECRET "@host?ca_file=x",
        "redis://user:" SECRET "@host#frag",
        "redis://user:" SECRET "@host:6379/0?connect_timeout=x",
        "redis:/user:" SECRET "@host",
        "redis//user:" SECRET "@host",
        "http://user:" SECRET "@host",
        "user:" SECRET "@host",
        "redis://user:" SECRET " @host",
        "redis://[user:" SECRET "@host",
        "redis://user:" SECRET "@host:6379:1",
    };
    (void)state;
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++)
        check_url(urls[i]);
}

/* Every deletion of one byte, and every insertion of a byte that means
 * something in a URL, at every position. */
static void test_mutations(void **state)
{
    static const char *const bases[] = {
        "redis://alice:" SECRET "@cache.example:6380/2?connect_timeout=100",
        "rediss://:" SECRET "@10.0.0.1:6379?ca_file=/etc/ca.pem&verify=no",
        "redis://alice:" SECRET "@[::1]:7000",
        "redis://alice:1" SECRET "@h",
    };
    static const char inserts[] = ":@/?#[]%&= x0";
    char url[256];
    (void)state;
    for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
        const char *base = bases[b];
        size_t n = strlen(base);
        for (size_t i = 0; i < n; i++) {
            snprintf(url, sizeof url, "%.*s%s", (int)i, base, base + i + 1);
            check_url(url);
            for (size_t k = 0; inserts[k] != '\0'; k++) {
                snprintf(url, sizeof url, "%.*s%c%s", (int)i, base,
                         inserts[k], base + i);
                check_url(url);
            }
        }
    }
    assert_true(checked > 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_picked),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
