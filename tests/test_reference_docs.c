/* The reference pages in docs/reference/ are made from the code: the
 * error codes from HILOCK_ERROR_TABLE, the options and their URL keys
 * from option_table.h, and the index of public functions with their
 * @return lines from the public headers.  This test makes them again and
 * fails when a committed page differs, so that none can drift; run it
 * with HILOCK_WRITE_REFERENCE=1 to write them. */
/* ctest-timeout: 60 */
#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/config/option_table.h"
#include "hilock/hilock.h"

#ifndef HILOCK_SOURCE_DIR
#error "HILOCK_SOURCE_DIR must name the source tree"
#endif

/* ---- a growing text ------------------------------------------------------ */

typedef struct text {
    char *s;
    size_t len, cap;
} text;

__attribute__((format(printf, 2, 3))) static void put(text *t,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    assert_true(n >= 0);
    if (t->len + (size_t)n + 1 > t->cap) {
        t->cap = (t->len + (size_t)n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        assert_non_null(t->s);
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    text t = {0};
    char buf[4096];
    size_t n;
    put(&t, "%s", "");
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        put(&t, "%.*s", (int)n, buf);
    fclose(f);
    return t.s;
}

/* The page at docs/reference/<leaf> is want, or is written so. */
static void check_page(const char *leaf, const text *want)
{
    char path[512];
    snprintf(path, sizeof path, "%s/docs/reference/%s", HILOCK_SOURCE_DIR,
             leaf);
    if (getenv("HILOCK_WRITE_REFERENCE") != NULL) {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(want->s, 1, want->len, f), want->len);
        assert_int_equal(fclose(f), 0);
        return;
    }
    char *have = read_file(path);
    if (have == NULL || strcmp(have, want->s) != 0)
        fail_msg("%s is not what the code says: run "
                 "HILOCK_WRITE_REFERENCE=1 build/tests/test_reference_docs "
                 "and commit it",
                 path);
    free(have);
}

#define GENERATED                                                           \
    "<!-- Made by tests/test_reference_docs.c from the code; do not edit. "  \
    "-->\n\n"

/* ---- errors -------------------------------------------------------------- */

static void test_errors_page(void **state)
{
    (void)state;
    text t = {0};
    put(&t, GENERATED "# Error codes\n\n"
            "Every call returns `HILOCK_OK` or one of these codes (the "
            "table in `hilock/error.h`, append-only: a code keeps its "
            "number).  `hilock_strerror()` gives the message below, "
            "`hilock_errname()` the name, and `hilock_last_error()` the "
            "detail of the calling thread's last failure.  Which calls "
            "return which codes is in [the function index](api.md).\n\n"
            "| code | number | message |\n| --- | ---: | --- |\n");
#define ROW_(name, num, msg) put(&t, "| `HILOCK_%s` | %d | %s |\n", #name, num, msg);
    HILOCK_ERROR_TABLE(ROW_)
#undef ROW_
    check_page("errors.md", &t);
    free(t.s);
}

/* ---- options ------------------------------------------------------------- */

static void range_of(const hl_numeric_option *o, char *out, size_t cap)
{
    if (o->min == -1)
        snprintf(out, cap, "-1 (off), 1..%lld", (long long)o->max);
    else
        snprintf(out, cap, "%lld..%lld%s", (long long)o->min,
                 (long long)o->max, o->zero_is_off ? ", 0: off" : "");
}

static void test_options_page(void **state)
{
    (void)state;
    text t = {0};
    put(&t, GENERATED "# Options and URL keys\n\n"
            "Each option has a setter, `hilock_options_set_<name>()`, a "
            "getter, `hilock_options_<name>()`, and most a key in the "
            "query of a URL (`redis://host:6379/0?<key>=<value>&...`), "
            "which takes the same values and is checked the same way.  "
            "The setters are documented in `hilock/options.h`, with the "
            "options this table does not hold: the URL's host, port, "
            "user, password and database, `tls_verify`, the Sentinel "
            "settings and the caller's loop.\n\n"
            "## Numbers\n\n"
            "| name | URL key | range | default |\n"
            "| --- | --- | --- | --- |\n");
    for (size_t i = 0; i < hl_numeric_option_count; i++) {
        const hl_numeric_option *o = &hl_numeric_options[i];
        char range[96];
        range_of(o, range, sizeof range);
        put(&t, "| `%s` | %s%s%s | %s | %lld |\n", o->name,
            o->url_key ? "`" : "", o->url_key ? o->url_key : "none",
            o->url_key ? "`" : "", range, (long long)o->def);
    }
    put(&t, "\n## Strings\n\n"
            "A TLS setting in the query of a `redis://` URL is refused: it "
            "almost always means a forgotten `s` (`rediss://`).\n\n"
            "| name | URL key | TLS |\n| --- | --- | --- |\n");
    for (size_t i = 0; i < hl_string_option_count; i++) {
        const hl_string_option *o = &hl_string_options[i];
        put(&t, "| `%s` | `%s` | %s |\n", o->name,
            o->url_key ? o->url_key : "none", o->tls ? "yes" : "no");
    }
    put(&t, "\n## Words\n\n"
            "The setter takes the enum of `hilock/options.h` whose values "
            "are the words in this order; the URL key takes the word, in "
            "any case.\n\n"
            "| name | URL key | words | default |\n"
            "| --- | --- | --- | --- |\n");
    for (size_t i = 0; i < hl_word_option_count; i++) {
        const hl_word_option *o = &hl_word_options[i];
        put(&t, "| `%s` | `%s` | ", o->name, o->url_key);
        const char *def = NULL;
        size_t def_len = 0;
        int place = 0;
        for (const char *w = o->words;; place++) {
            const char *bar = strchr(w, '|');
            size_t len = bar ? (size_t)(bar - w) : strlen(w);
            put(&t, "%s`%.*s`", place ? ", " : "", (int)len, w);
            if (place == o->def) {
                def = w;
                def_len = len;
            }
            if (bar == NULL)
                break;
            w = bar + 1;
        }
        assert_non_null(def);
        put(&t, " | `%.*s` |\n", (int)def_len, def);
    }
    check_page("options.md", &t);
    free(t.s);
}

/* ---- the index of public functions --------------------------------------- */

/* The @return codes and "and ..." lines of the comment block ending at
 * end (exclusive) of src, as one line of markdown. */
static void returns_of(const char *comment, size_t len, text *out)
{
    bool any = false;
    const char *p = comment, *end = comment + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL)
            eol = end;
        const char *r = strstr(p, "@return");
        const char *code = r ? strstr(r, "HILOCK_") : NULL;
        if (r != NULL && r < eol && (code == NULL || code >= eol)) {
            /* "@return the statuses of ...": said as it is. */
            const char *from = r + strlen("@return");
            while (from < eol && *from == ' ')
                from++;
            const char *stop = strstr(from, "*/");
            if (stop == NULL || stop > eol)
                stop = eol;
            while (stop > from && stop[-1] == ' ')
                stop--;
            put(out, "%s%.*s", any ? "; " : "", (int)(stop - from), from);
            any = true;
        } else if (r != NULL && r < eol) {
            for (const char *q = r; q < eol;) {
                const char *h = strstr(q, "HILOCK_");
                if (h == NULL || h >= eol)
                    break;
                size_t n = strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_");
                put(out, "%s`%.*s`", any ? ", " : "", (int)n, h);
                any = true;
                q = h + n;
            }
        } else if (any) {
            /* " * and the connection errors above": said once, after. */
            const char *a = strstr(p, "* and ");
            if (a != NULL && a < eol) {
                const char *from = a + 2;
                const char *stop = strstr(from, "*/");
                if (stop == NULL || stop > eol)
                    stop = eol;
                while (stop > from && stop[-1] == ' ')
                    stop--;
                put(out, " %.*s", (int)(stop - from), from);
            }
        }
        p = eol + 1;
    }
    if (!any)
        put(out, "see the header");
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void index_header(const char *leaf, text *t)
{
    char path[512];
    snprintf(path, sizeof path, "%s/include/hilock/%s", HILOCK_SOURCE_DIR,
             leaf);
    char *src = read_file(path);
    assert_non_null(src);
    bool titled = false;
    const char *comment = NULL;
    size_t comment_len = 0;
    for (const char *p = src; (p = strstr(p, "HILOCK_API ")) != NULL;) {
        /* The comment right above, if any; else the last one seen, which
         * a group of declarations shares. */
        const char *line = p;
        while (line > src && line[-1] != '\n')
            line--;
        const char *back = line;
        while (back > src && (back[-1] == '\n' || back[-1] == ' '))
            back--;
        if (back - src >= 2 && back[-1] == '/' && back[-2] == '*') {
            const char *open = back - 2;
            while (open > src && !(open[0] == '/' && open[1] == '*'))
                open--;
            comment = open;
            comment_len = (size_t)(back - open);
        }
        const char *paren = strchr(p, '(');
        const char *semi = strchr(p, ';');
        if (paren == NULL || semi == NULL || paren > semi) {
            p += 11;
            continue; /* not a function */
        }
        const char *name_end = paren;
        while (name_end > p && name_end[-1] == ' ')
            name_end--;
        const char *name = name_end;
        while (name > p && (name[-1] == '_' ||
                            (name[-1] >= 'a' && name[-1] <= 'z') ||
                            (name[-1] >= '0' && name[-1] <= '9')))
            name--;
        if (!titled) {
            put(t, "\n## `hilock/%s`\n\n", leaf);
            titled = true;
        }
        put(t, "- `%.*s`: ", (int)(name_end - name), name);
        if (comment != NULL)
            returns_of(comment, comment_len, t);
        else
            put(t, "see the header");
        put(t, "\n");
        p = semi;
    }
    free(src);
}

static void test_api_index(void **state)
{
    (void)state;
    char dir_path[512];
    snprintf(dir_path, sizeof dir_path, "%s/include/hilock",
             HILOCK_SOURCE_DIR);
    DIR *dir = opendir(dir_path);
    assert_non_null(dir);
    char *leaves[64];
    size_t n = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len > 2 && strcmp(e->d_name + len - 2, ".h") == 0 && n < 64)
            leaves[n++] = strdup(e->d_name);
    }
    closedir(dir);
    qsort(leaves, n, sizeof leaves[0], by_name);
    text t = {0};
    put(&t, GENERATED "# Public functions\n\n"
            "Every function of the public headers, with the codes it "
            "returns (its `@return` lines; [the codes](errors.md)).  The "
            "header says what each does, whether it blocks and which "
            "thread may call it.\n");
    for (size_t i = 0; i < n; i++) {
        index_header(leaves[i], &t);
        free(leaves[i]);
    }
    check_page("api.md", &t);
    free(t.s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors_page),
        cmocka_unit_test(test_options_page),
        cmocka_unit_test(test_api_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
