/* hilock top on a real redis-server, in a real terminal (a pseudo
 * terminal the test owns): the screen redrawn in place with the locks of
 * a pattern, the holder's process from its card, keys that sort and
 * quit, the terminal given back; the holder changes seen; the leases the
 * holder's client lost, from its card; --batch without a terminal; and
 * bad options refused. */
/* ctest-timeout: 120 */
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/cli_run.h"
#include "support/handoff.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

#ifndef HILOCK_TOOL_PATH
#error "HILOCK_TOOL_PATH must name the hilock executable"
#endif

#define OUT_CAP 16384
#define SCREEN_CLEAR "\033[H\033[2J"

/* hilock --redis URL ARGS... (NULL-terminated); output into out. */
#define tool(out, ...) hl_cli_run((out), OUT_CAP, __VA_ARGS__)

/* ---- a terminal --------------------------------------------------------- */

typedef struct term {
    int fd; /* the terminal's master side */
    pid_t pid;
    char out[1 << 16]; /* everything the tool wrote, NUL-terminated */
    size_t len;
} term;

/* hilock top ARGS... on a terminal of 40 rows by 160 columns. */
static void term_start(term *t, const char *pattern)
{
    struct winsize ws = {.ws_row = 40, .ws_col = 160};
    t->len = 0;
    t->out[0] = '\0';
    t->pid = forkpty(&t->fd, NULL, NULL, &ws);
    assert_true(t->pid >= 0);
    if (t->pid == 0) {
        execl(HILOCK_TOOL_PATH, HILOCK_TOOL_PATH, "--redis", hl_cli_url, "top",
              "--interval", "200ms", pattern, (char *)NULL);
        _exit(127);
    }
}

/* Read what the tool wrote for up to ms. */
static void term_read(term *t, int ms)
{
    int64_t until = hl_now_ms() + ms;
    for (int64_t left = ms; left > 0; left = until - hl_now_ms()) {
        struct pollfd p = {t->fd, POLLIN, 0};
        if (poll(&p, 1, (int)left) <= 0)
            return;
        ssize_t n = read(t->fd, t->out + t->len, sizeof t->out - 1 - t->len);
        if (n <= 0)
            return; /* EIO: the tool has gone */
        t->len += (size_t)n;
        t->out[t->len] = '\0';
        if (t->len == sizeof t->out - 1) {
            /* Keep the newer half: the screens that matter are last. */
            size_t half = t->len / 2;
            memmove(t->out, t->out + half, t->len - half + 1);
            t->len -= half;
        }
    }
}

/* The last whole screen: from the last clear that a later one follows,
 * or, with no later clear, from the last one, once the tool waits for
 * its next refresh.  Into screen. */
static bool last_screen(const term *t, char *screen, size_t cap)
{
    const char *last = NULL, *prev = NULL;
    for (const char *p = strstr(t->out, SCREEN_CLEAR); p != NULL;
         p = strstr(p + 1, SCREEN_CLEAR)) {
        prev = last;
        last = p;
    }
    const char *from = prev ? prev : last;
    if (from == NULL)
        return false;
    from += strlen(SCREEN_CLEAR);
    const char *end = prev ? last : t->out + t->len;
    snprintf(screen, cap, "%.*s", (int)(end - from), from);
    return true;
}

/* Read until the last whole screen holds every one of the strings
 * (NULL-terminated), for up to hl_widen(10000) ms. */
static void term_wait_screen(term *t, char *screen, size_t cap, ...)
{
    int64_t until = hl_now_ms() + hl_widen(10000);
    for (;;) {
        term_read(t, 100);
        bool all = last_screen(t, screen, cap);
        va_list ap;
        va_start(ap, cap);
        for (const char *s; all && (s = va_arg(ap, const char *)) != NULL;)
            all = strstr(screen, s) != NULL;
        va_end(ap);
        if (all)
            return;
        if (hl_now_ms() >= until)
            fail_msg("no screen as expected; the last:\n%s", screen);
    }
}

static void term_key(term *t, char key)
{
    assert_int_equal(write(t->fd, &key, 1), 1);
}

/* The tool's exit status once it has gone, within hl_widen(10000) ms. */
static int term_wait_exit(term *t)
{
    int64_t until = hl_now_ms() + hl_widen(10000);
    int status = 0;
    for (;;) {
        term_read(t, 50);
        pid_t r = waitpid(t->pid, &status, WNOHANG);
        if (r == t->pid)
            break;
        if (hl_now_ms() >= until) {
            kill(t->pid, SIGKILL);
            waitpid(t->pid, &status, 0);
            fail_msg("top did not quit; it wrote:\n%s", t->out);
        }
    }
    term_read(t, 50);
    close(t->fd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The row of name in screen, into row. */
static bool row_of(const char *screen, const char *name, char *row,
                   size_t cap)
{
    char key[64];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(screen, key);
    if (p == NULL)
        return false;
    p++;
    const char *end = strchr(p, '\n');
    snprintf(row, cap, "%.*s", (int)(end ? end - p : (long)strlen(p)), p);
    return true;
}

/* ---- the tests ---------------------------------------------------------- */

/* The screen lists the pattern's locks with the holder's process, keys
 * sort and quit, and the terminal gets its cursor back.  A hold whose
 * start nobody lists (Redisson's) was held before the first look, and its
 * time held is a lower bound; ours is listed a quarter of a second after
 * it began, which may come before or after top's first look, and either
 * way names the holder's process. */
static void test_top_on_a_terminal(void **state)
{
    (void)state;
    static term t;
    static char screen[OUT_CAP], row[512], want[512], host[256];
    hilock_client *c = hl_new_client(hl_cli_server, NULL);
    hilock_lock *held, *fair;
    assert_int_equal(hilock_lock_create(&held, c, "tp-held"), HILOCK_OK);
    assert_int_equal(hilock_fair_lock_create(&fair, c, "tp-fair"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_acquire(held), HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(fair, 0, 60000), HILOCK_OK);
    hl_card_wait card = {c, hilock_client_id(c)};
    assert_true(hl_wait_until(hl_card_is_there, &card, hl_widen(5000)));
    char out[OUT_CAP];
    assert_int_equal(tool(out, "latch", "set", "tp-latch", "3", NULL), 0);
    hl_java_hold(hl_cli_server, "tp-java");

    assert_int_equal(gethostname(host, sizeof host), 0);
    snprintf(want, sizeof want, "%s[%ld]@%s", program_invocation_short_name,
             (long)getpid(), host);
    term_start(&t, "tp-*");
    term_wait_screen(&t, screen, sizeof screen, "sorted by time held",
                     "\ntp-held ", "\ntp-fair ", "\ntp-latch ",
                     "\ntp-java ", NULL);
    assert_non_null(strstr(t.out, "\033[?25l")); /* the cursor hidden */
    assert_true(row_of(screen, "tp-held", row, sizeof row));
    assert_non_null(strstr(row, "reentrant"));
    assert_non_null(strstr(row, want));
    assert_true(row_of(screen, "tp-java", row, sizeof row));
    assert_non_null(strstr(row, "(no card)"));
    /* Held before the first look, since when no client says: its time
     * held is a lower bound. */
    assert_non_null(strstr(row, " >"));
    assert_true(row_of(screen, "tp-fair", row, sizeof row));
    assert_non_null(strstr(row, "fair"));
    assert_true(row_of(screen, "tp-latch", row, sizeof row));
    assert_non_null(strstr(row, "latch"));
    assert_non_null(strstr(row, "count 3"));
    assert_null(strstr(screen, "hilock_"));

    /* Keys sort. */
    term_key(&t, 'n');
    term_wait_screen(&t, screen, sizeof screen, "sorted by name", NULL);
    assert_true(strstr(screen, "\ntp-fair ") < strstr(screen, "\ntp-held "));
    assert_true(strstr(screen, "\ntp-held ") < strstr(screen, "\ntp-latch "));
    term_key(&t, 'w');
    term_wait_screen(&t, screen, sizeof screen, "sorted by waiters", NULL);

    /* Another holder: seen as a change, held from when it was seen. */
    hilock_client *c2 = hl_new_client(hl_cli_server, NULL);
    hilock_lock *held2;
    assert_int_equal(hilock_lock_create(&held2, c2, "tp-held"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_release(held), HILOCK_OK);
    assert_int_equal(hilock_lock_acquire(held2), HILOCK_OK);
    hl_card_wait card2 = {c2, hilock_client_id(c2)};
    assert_true(hl_wait_until(hl_card_is_there, &card2, hl_widen(5000)));
    for (int64_t until = hl_now_ms() + hl_widen(10000);;) {
        term_wait_screen(&t, screen, sizeof screen, "\ntp-held ", NULL);
        if (row_of(screen, "tp-held", row, sizeof row) &&
            strstr(row, " >") == NULL)
            break;
        if (hl_now_ms() >= until)
            fail_msg("the new holder was never seen:\n%s", screen);
    }
    assert_non_null(strstr(row, want));

    term_key(&t, 'q');
    assert_int_equal(term_wait_exit(&t), 0);
    /* The cursor given back last. */
    const char *shown = strstr(t.out, "\033[?25h");
    assert_non_null(shown);
    assert_null(strstr(shown + 1, SCREEN_CLEAR));

    assert_int_equal(hilock_lock_release(held2), HILOCK_OK);
    assert_int_equal(hilock_lock_release(fair), HILOCK_OK);
    assert_int_equal(hl_raw_int(hl_cli_server, "DEL", "tp-java",
                                (char *)NULL),
                     1);
    hilock_lock_destroy(held2);
    hilock_lock_destroy(held);
    hilock_lock_destroy(fair);
    hl_free_client(c2);
    hl_free_client(c);
}

/* A change of holder between two refreshes counts one; the count is per
 * second of the refresh interval. */
static void test_top_counts_holder_changes(void **state)
{
    (void)state;
    static term t;
    static char screen[OUT_CAP], row[512];
    hilock_client *c = hl_new_client(hl_cli_server, NULL);
    hilock_client *c2 = hl_new_client(hl_cli_server, NULL);
    hilock_lock *lock, *lock2;
    assert_int_equal(hilock_lock_create(&lock, c, "tc-lock"), HILOCK_OK);
    assert_int_equal(hilock_lock_create(&lock2, c2, "tc-lock"),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_acquire(lock), HILOCK_OK);
    term_start(&t, "tc-*");
    term_wait_screen(&t, screen, sizeof screen, "\ntc-lock ", NULL);
    assert_true(row_of(screen, "tc-lock", row, sizeof row));
    assert_non_null(strstr(row, " 0.0 "));
    /* One change in a 200 ms refresh: 5 a second, for one screen. */
    size_t before = t.len;
    assert_int_equal(hilock_lock_release(lock), HILOCK_OK);
    assert_int_equal(hilock_lock_acquire(lock2), HILOCK_OK);
    bool seen = false;
    for (int64_t until = hl_now_ms() + hl_widen(10000);
         !seen && hl_now_ms() < until;) {
        term_read(&t, 100);
        seen = strstr(t.out + before, " 5.0 ") != NULL;
    }
    if (!seen)
        fail_msg("no screen showed the change:\n%s", t.out + before);
    term_key(&t, 'q');
    assert_int_equal(term_wait_exit(&t), 0);
    assert_int_equal(hilock_lock_release(lock2), HILOCK_OK);
    hilock_lock_destroy(lock2);
    hilock_lock_destroy(lock);
    hl_free_client(c2);
    hl_free_client(c);
}

typedef struct lost_probe {
    char out[OUT_CAP];
} lost_probe;

/* Whether top's row of tl-held shows 1 lease lost. */
static bool one_lost_shown(void *arg)
{
    lost_probe *p = arg;
    char row[512];
    if (tool(p->out, "top", "--batch", "-n", "1", "tl-held", NULL) != 0 ||
        !row_of(p->out, "tl-held", row, sizeof row))
        return false;
    size_t len = strlen(row);
    return len >= 2 && strcmp(row + len - 2, " 1") == 0;
}

/* A lease the holder's client lost is counted on its card, and top shows
 * it beside what that client still holds. */
static void test_top_shows_leases_lost(void **state)
{
    (void)state;
    static lost_probe probe;
    hl_client_opts o = {.watchdog_ms = 900};
    hilock_client *c = hl_new_client(hl_cli_server, &o);
    hilock_lock *held, *lost;
    static hl_lost_rec rec;
    hl_lost_rec_init(&rec, NULL);
    assert_int_equal(hilock_lock_create(&held, c, "tl-held"), HILOCK_OK);
    assert_int_equal(hilock_lock_create(&lost, c, "tl-lost"), HILOCK_OK);
    assert_int_equal(hilock_lock_set_lost_callback(lost, hl_record_lost,
                                                   &rec),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_acquire(held), HILOCK_OK);
    assert_int_equal(hilock_lock_acquire(lost), HILOCK_OK);
    hl_card_wait card = {c, hilock_client_id(c)};
    assert_true(hl_wait_until(hl_card_is_there, &card, hl_widen(5000)));
    assert_int_equal(tool(probe.out, "top", "--batch", "-n", "1", "tl-held",
                          NULL),
                     0);
    char row[512];
    assert_true(row_of(probe.out, "tl-held", row, sizeof row));
    assert_true(strlen(row) >= 2 && strcmp(row + strlen(row) - 2, " 0") == 0);

    /* Deleted behind the holder's back: its next renewal finds out. */
    assert_int_equal(
        hl_raw_int(hl_cli_server, "DEL", "tl-lost", (char *)NULL), 1);
    assert_true(hl_wait_until(hl_lost_seen, &rec, hl_widen(10000)));
    if (!hl_wait_until(one_lost_shown, &probe, hl_widen(10000)))
        fail_msg("top never showed the lost lease:\n%s", probe.out);

    assert_int_equal(hilock_lock_release(held), HILOCK_OK);
    hilock_lock_destroy(held);
    hilock_lock_destroy(lost);
    hl_free_client(c);
}

/* Without a terminal, or with --batch, each refresh follows the one
 * before, with no screen control; bad options are refused. */
static void test_top_batch_and_errors(void **state)
{
    (void)state;
    static char out[OUT_CAP];
    char reply[64];
    hl_redis_server_cmd(hl_cli_server, reply, sizeof reply, "SET", "tb-count",
                        "9",
                        (char *)NULL);
    assert_int_equal(tool(out, "top", "-n", "2", "-i", "100ms", "tb-*",
                          NULL),
                     0);
    assert_null(strstr(out, "\033["));
    const char *first = strstr(out, "hilock top  tb-*  1 name");
    assert_non_null(first);
    assert_non_null(strstr(first + 1, "hilock top  tb-*  1 name"));
    assert_non_null(strstr(out, "unknown"));
    assert_non_null(strstr(out, "count 9"));

    assert_int_equal(tool(out, "top", "-i", "5ms", NULL), 64);
    assert_int_equal(tool(out, "top", "--sort", "size", NULL), 64);
    assert_int_equal(tool(out, "top", "a", "b", NULL), 64);
    assert_int_equal(tool(out, "top", "-n", "0", NULL), 64);
    assert_int_equal(tool(out, "top", "--bogus", NULL), 64);
    assert_int_equal(tool(out, "top", "--help", NULL), 0);
    assert_non_null(strstr(out, "--iterations"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_top_on_a_terminal),
        cmocka_unit_test(test_top_counts_holder_changes),
        cmocka_unit_test(test_top_shows_leases_lost),
        cmocka_unit_test(test_top_batch_and_errors),
    };
    return cmocka_run_group_tests(tests, hl_cli_group_setup,
                                  hl_cli_group_teardown);
}
