/* The options tables: every option reached through a URL query key and
 * through its setter ends in the same state, and both refuse the same
 * values, because both are driven by one description of the option. */
/* ctest-timeout: 60 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/config/option_table.h"
#include "hilock/error.h"
#include "hilock/options.h"

/* One value set both ways on fresh options; the statuses and the values
 * the getter reads afterwards must agree. */
static void same_both_ways(const hl_numeric_option *opt, int64_t value)
{
    hilock_options *by_setter = NULL;
    hilock_options *by_url = NULL;
    assert_int_equal(hilock_options_create(&by_setter), HILOCK_OK);
    assert_int_equal(hilock_options_create(&by_url), HILOCK_OK);

    int rc_setter = opt->set(by_setter, value);
    char url[128];
    /* A negative number has no URL form: the URL refuses its text, the
     * setter its range, and both leave the option alone. */
    snprintf(url, sizeof url, "redis://127.0.0.1/?%s=%lld", opt->url_key,
             (long long)value);
    int rc_url = hilock_options_set_url(by_url, url);
    if (rc_setter != rc_url)
        fail_msg("%s = %lld: setter %d, URL %d", opt->name, (long long)value,
                 rc_setter, rc_url);
    if (opt->get(by_setter) != opt->get(by_url))
        fail_msg("%s = %lld: setter gives %lld, URL gives %lld", opt->name,
                 (long long)value, (long long)opt->get(by_setter),
                 (long long)opt->get(by_url));
    bool in_range = (value >= opt->min && value <= opt->max) ||
                    (opt->zero_is_off && value == 0);
    if (in_range) {
        assert_int_equal(rc_setter, HILOCK_OK);
        assert_int_equal(opt->get(by_setter), value);
    } else {
        assert_int_equal(rc_setter, HILOCK_EINVAL);
        assert_int_equal(opt->get(by_setter), opt->def);
    }
    hilock_options_free(by_setter);
    hilock_options_free(by_url);
}

static void test_numeric_options_agree(void **state)
{
    (void)state;
    size_t with_key = 0;
    for (size_t i = 0; i < hl_numeric_option_count; i++) {
        const hl_numeric_option *opt = &hl_numeric_options[i];
        hilock_options *o = NULL;
        assert_int_equal(hilock_options_create(&o), HILOCK_OK);
        assert_int_equal(opt->get(o), opt->def);
        assert_int_equal(opt->get(NULL), -1);
        assert_int_equal(opt->set(NULL, opt->min), HILOCK_EINVAL);
        hilock_options_free(o);

        const int64_t values[] = {opt->min - 1, opt->min,
                                  opt->min + (opt->max - opt->min) / 2,
                                  opt->max, opt->max + 1, 0, INT32_MAX,
                                  (int64_t)INT32_MAX + 1};
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
            if (opt->url_key != NULL) {
                same_both_ways(opt, values[v]);
                continue;
            }
            hilock_options *only = NULL;
            assert_int_equal(hilock_options_create(&only), HILOCK_OK);
            bool in_range = (values[v] >= opt->min && values[v] <= opt->max) ||
                            (opt->zero_is_off && values[v] == 0);
            assert_int_equal(opt->set(only, values[v]),
                             in_range ? HILOCK_OK : HILOCK_EINVAL);
            assert_int_equal(opt->get(only), in_range ? values[v] : opt->def);
            hilock_options_free(only);
        }
        if (opt->url_key != NULL)
            with_key++;
    }
    /* The URL keys documented in hilock/options.h. */
    assert_int_equal(with_key, 11);
}

static void test_string_options_agree(void **state)
{
    (void)state;
    for (size_t i = 0; i < hl_string_option_count; i++) {
        const hl_string_option *opt = &hl_string_options[i];
        hilock_options *by_setter = NULL;
        hilock_options *by_url = NULL;
        assert_int_equal(hilock_options_create(&by_setter), HILOCK_OK);
        assert_int_equal(hilock_options_create(&by_url), HILOCK_OK);
        assert_null(opt->get(by_setter));

        assert_int_equal(opt->set(by_setter, "/a b/c"), HILOCK_OK);
        char url[128];
        snprintf(url, sizeof url, "rediss://127.0.0.1/?%s=%%2Fa%%20b%%2Fc",
                 opt->url_key);
        assert_int_equal(hilock_options_set_url(by_url, url), HILOCK_OK);
        assert_string_equal(opt->get(by_setter), "/a b/c");
        assert_string_equal(opt->get(by_url), "/a b/c");

        /* An empty value is refused both ways and changes nothing. */
        assert_int_equal(opt->set(by_setter, ""), HILOCK_EINVAL);
        snprintf(url, sizeof url, "rediss://127.0.0.1/?%s=", opt->url_key);
        assert_int_equal(hilock_options_set_url(by_url, url), HILOCK_EINVAL);
        assert_string_equal(opt->get(by_setter), "/a b/c");
        assert_string_equal(opt->get(by_url), "/a b/c");

        /* A TLS setting on a plain URL is refused (a forgotten 's');
         * any other is taken there too. */
        snprintf(url, sizeof url, "redis://127.0.0.1/?%s=x", opt->url_key);
        assert_int_equal(hilock_options_set_url(by_url, url),
                         opt->tls ? HILOCK_EINVAL : HILOCK_OK);
        hilock_options_free(by_setter);
        hilock_options_free(by_url);
    }
}

/* Each word set both ways, in any case, gives the same place; a word of
 * no option and a place past the list are refused both ways, and leave
 * the option as it was. */
static void test_word_options_agree(void **state)
{
    (void)state;
    for (size_t i = 0; i < hl_word_option_count; i++) {
        const hl_word_option *opt = &hl_word_options[i];
        hilock_options *by_setter = NULL;
        hilock_options *by_url = NULL;
        assert_int_equal(hilock_options_create(&by_setter), HILOCK_OK);
        assert_int_equal(hilock_options_create(&by_url), HILOCK_OK);
        assert_int_equal(opt->get(by_setter), opt->def);
        assert_int_equal(opt->get(NULL), -1);

        int place = 0;
        for (const char *w = opt->words;; place++) {
            const char *bar = strchr(w, '|');
            int len = bar ? (int)(bar - w) : (int)strlen(w);
            char url[128], upper[32];
            snprintf(upper, sizeof upper, "%.*s", len, w);
            upper[0] = (char)(upper[0] - 'a' + 'A');
            snprintf(url, sizeof url, "redis://127.0.0.1/?%s=%s",
                     opt->url_key, upper);
            assert_int_equal(opt->set(by_setter, place), HILOCK_OK);
            assert_int_equal(hilock_options_set_url(by_url, url), HILOCK_OK);
            if (opt->get(by_setter) != place || opt->get(by_url) != place)
                fail_msg("%s %s: setter gives %d, URL gives %d", opt->name,
                         upper, opt->get(by_setter), opt->get(by_url));
            if (bar == NULL)
                break;
            w = bar + 1;
        }

        char url[128];
        snprintf(url, sizeof url, "redis://127.0.0.1/?%s=nonesuch",
                 opt->url_key);
        assert_int_equal(hilock_options_set_url(by_url, url), HILOCK_EINVAL);
        assert_non_null(strstr(hilock_last_error(), "'nonesuch' is not "));
        assert_int_equal(opt->set(by_setter, place + 1), HILOCK_EINVAL);
        assert_int_equal(opt->set(by_setter, -1), HILOCK_EINVAL);
        assert_int_equal(opt->set(NULL, 0), HILOCK_EINVAL);
        assert_int_equal(opt->get(by_setter), place);
        assert_int_equal(opt->get(by_url), place);
        hilock_options_free(by_setter);
        hilock_options_free(by_url);
    }
}

/* The tables never describe the password, so nothing generated from them
 * can read it back. */
static void test_tables_leave_out_the_password(void **state)
{
    (void)state;
    for (size_t i = 0; i < hl_numeric_option_count; i++)
        assert_null(strstr(hl_numeric_options[i].name, "password"));
    for (size_t i = 0; i < hl_string_option_count; i++) {
        assert_null(strstr(hl_string_options[i].name, "password"));
        assert_null(strstr(hl_string_options[i].url_key, "password"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numeric_options_agree),
        cmocka_unit_test(test_string_options_agree),
        cmocka_unit_test(test_word_options_agree),
        cmocka_unit_test(test_tables_leave_out_the_password),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
