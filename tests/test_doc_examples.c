/* Every C block of the README and of docs/guide/ is compiled with the C
 * compiler against the built library, warnings as errors, so that no
 * example drifts from the API; a block that is a whole program (it has a
 * main) is run against a private redis-server, and must exit 0 within
 * its time.  So is every program of examples/ that takes one server's
 * URL (all but redlock.c, which takes several masters).  A block that is a fragment is compiled inside a function,
 * after declarations of the names fragments use without making them
 * (client, lock, the work they stand for), which fragments may shadow. */
/* ctest-timeout: 300 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"

#ifndef HILOCK_SOURCE_DIR
#error "HILOCK_SOURCE_DIR must name the source tree"
#endif
#ifndef HILOCK_LIBRARY_DIR
#error "HILOCK_LIBRARY_DIR must name the directory of libhilock.so"
#endif

#define OUT_CAP 16384

static hl_redis_server *server;
static char url[64];
static char work[] = "/tmp/hilock-doc-examples-XXXXXX";

static int setup(void **state)
{
    (void)state;
    server = hl_fixture_plain();
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(server));
    return mkdtemp(work) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_server_stop(server);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    return system(cmd) == 0 ? 0 : -1;
}

/* What a fragment may use without making it. */
static const char fragment_prelude[] =
    "#include <stdbool.h>\n"
    "#include <stdint.h>\n"
    "#include <stdio.h>\n"
    "#include <string.h>\n"
    "#include <hilock/hilock.h>\n"
    "static void do_work(void) {}\n"
    "static void serve_from(void *c) { (void)c; }\n"
    "static void rebuild(void *c) { (void)c; }\n"
    "static void publish(void *c) { (void)c; }\n"
    "static void write_with_fence(uint64_t t) { (void)t; }\n"
    "static void merge_results(void) {}\n"
    "static void move_stock(void) {}\n"
    "static void pay(void) {}\n"
    "static void decrement(const char *k) { (void)k; }\n"
    "static void call_backend(void) {}\n"
    "static void run_job(void) {}\n";

static const char fragment_locals[] =
    "    hilock_client *client = NULL;\n"
    "    hilock_options *opts = NULL;\n"
    "    hilock_lock *lock = NULL, *order_lock = NULL, *stock_lock = NULL,\n"
    "                *ledger_lock = NULL;\n"
    "    const char *key = \"sku:1\";\n"
    "    size_t key_len = 5;\n"
    "    void *catalog = NULL;\n";

typedef struct block {
    char where[256]; /* file:line */
    char *code;
} block;

/* The C blocks of the markdown file at path, appended to blocks. */
static void blocks_of(const char *path, const char *shown, block *blocks,
                      size_t *n, size_t cap)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    int lineno = 0;
    block *open = NULL;
    size_t len = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        lineno++;
        if (open == NULL && strcmp(line, "```c\n") == 0) {
            assert_true(*n < cap);
            open = &blocks[(*n)++];
            snprintf(open->where, sizeof open->where, "%s:%d", shown,
                     lineno);
            open->code = calloc(1, 1);
            len = 0;
        } else if (open != NULL && strcmp(line, "```\n") == 0) {
            open = NULL;
        } else if (open != NULL) {
            size_t add = strlen(line);
            open->code = realloc(open->code, len + add + 1);
            assert_non_null(open->code);
            memcpy(open->code + len, line, add + 1);
            len += add;
        }
    }
    fclose(f);
}

/* The program a block makes, into path. */
static void write_program(const block *b, const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    if (strstr(b->code, "int main(") != NULL) {
        fputs(b->code, f);
    } else {
        fputs(fragment_prelude, f);
        /* A fragment's own #include lines go to the top. */
        const char *p = b->code;
        while (*p == '#') {
            const char *eol = strchr(p, '\n');
            fprintf(f, "%.*s\n", (int)(eol - p), p);
            p = eol + 1;
        }
        fprintf(f, "int fragment(void);\nint fragment(void)\n{\n%s    {\n%s"
                   "    }\n    return 0;\n}\nint main(void) { return 0; }\n",
                fragment_locals, p);
    }
    assert_int_equal(fclose(f), 0);
}

#ifndef HILOCK_CC
#define HILOCK_CC "cc"
#endif
#ifndef HILOCK_EXAMPLE_FLAGS
#define HILOCK_EXAMPLE_FLAGS ""
#endif

static bool compiles(const block *b, const char *source, const char *exe,
                     char *out)
{
    /* The build's compiler, and its sanitizers: a program linked against
     * an instrumented library must be instrumented too. */
    static char flags[] = HILOCK_EXAMPLE_FLAGS;
    const char *argv[64] = {HILOCK_CC,
                            "-std=c11",
                            "-Wall",
                            "-Wextra",
                            "-Werror",
                            "-Wno-unused-variable",
                            "-Wno-unused-function",
                            "-Wno-unused-but-set-variable",
                            "-I" HILOCK_SOURCE_DIR "/include",
                            "-o",
                            exe,
                            source,
                            "-L" HILOCK_LIBRARY_DIR,
                            "-Wl,-rpath," HILOCK_LIBRARY_DIR,
                            "-lhilock",
                            "-lev",
                            "-lpthread"};
    int argc = 17;
    static char copy[sizeof flags];
    memcpy(copy, flags, sizeof flags);
    for (char *save = NULL, *w = strtok_r(copy, " ", &save);
         w != NULL && argc < 63; w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    argv[argc] = NULL;
    int rc = hl_run(argv, out, OUT_CAP, hl_widen(60000));
    if (rc != 0)
        print_error("%s does not compile:\n%s\n", b->where, out);
    return rc == 0;
}

static void test_every_block_compiles_and_runs(void **state)
{
    (void)state;
    static block blocks[128];
    static char out[OUT_CAP];
    size_t n = 0;
    blocks_of(HILOCK_SOURCE_DIR "/README.md", "README.md", blocks, &n, 128);
    DIR *dir = opendir(HILOCK_SOURCE_DIR "/docs/guide");
    assert_non_null(dir);
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".md") != 0)
            continue;
        char path[512], shown[300];
        snprintf(path, sizeof path, "%s/docs/guide/%s", HILOCK_SOURCE_DIR,
                 e->d_name);
        snprintf(shown, sizeof shown, "docs/guide/%s", e->d_name);
        blocks_of(path, shown, blocks, &n, 128);
    }
    closedir(dir);
    assert_true(n >= 10);

    setenv("HILOCK_REDIS", url, 1);
    int failed = 0, ran = 0;
    for (size_t i = 0; i < n; i++) {
        char source[512], exe[512];
        snprintf(source, sizeof source, "%s/block%zu.c", work, i);
        snprintf(exe, sizeof exe, "%s/block%zu", work, i);
        write_program(&blocks[i], source);
        if (!compiles(&blocks[i], source, exe, out)) {
            failed++;
            continue;
        }
        if (strstr(blocks[i].code, "int main(") == NULL)
            continue;
        const char *argv[] = {exe, NULL};
        int rc = hl_run(argv, out, OUT_CAP, hl_widen(30000));
        ran++;
        if (rc != 0) {
            print_error("%s exited %d:\n%s\n", blocks[i].where, rc, out);
            failed++;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(blocks[i].code);
    if (failed > 0)
        fail_msg("%d of %zu blocks failed", failed, n);
    assert_true(ran >= 1);
}

static void test_examples_run(void **state)
{
    (void)state;
    static const char *const programs[] = {
        "reentrant_blocking", "async_own_loop", "segmented_stock",
        "lost_lease",         "permits",        "latch",
        "fair_lock"};
    static char out[OUT_CAP];
    int failed = 0;
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) {
        block b = {.code = NULL};
        char source[512], exe[512];
        snprintf(b.where, sizeof b.where, "examples/%s.c", programs[i]);
        snprintf(source, sizeof source, "%s/examples/%s.c",
                 HILOCK_SOURCE_DIR, programs[i]);
        snprintf(exe, sizeof exe, "%s/%s", work, programs[i]);
        if (!compiles(&b, source, exe, out)) {
            failed++;
            continue;
        }
        const char *argv[] = {exe, url, NULL};
        int rc = hl_run(argv, out, OUT_CAP, hl_widen(30000));
        if (rc != 0) {
            print_error("%s exited %d:\n%s\n", b.where, rc, out);
            failed++;
        }
    }
    if (failed > 0)
        fail_msg("%d examples failed", failed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_block_compiles_and_runs),
        cmocka_unit_test(test_examples_run),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
