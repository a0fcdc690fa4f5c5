/* hilock top [PATTERN]: a live view of the locks and counts matching a
 * pattern, as `hilock ls` finds them (one server, or every master of a
 * cluster), refreshed every --interval: kind, first holder (its process,
 * from the holder's card), holders, waiters, how long the holder has been
 * seen holding, holder changes per second, and the leases the holder's
 * client lost.
 *
 * What the server does not keep is counted by watching it: a hold's start
 * is when this view first saw that holder ("> " before a time when the
 * hold was there at the first look), and the changes per second are the
 * changes of first holder seen from one refresh to the next, so that a
 * lock handed on faster than the refresh shows fewer than it has.  The
 * leases lost are the count the holder's client keeps on its card.
 *
 * On a terminal the screen is redrawn in place and keys steer it: q
 * quits, h sorts by time held, w by waiters, n by name.  Without one, or
 * with --batch, each refresh is printed after the one before. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

typedef enum top_sort { SORT_HELD, SORT_WAITERS, SORT_NAME } top_sort;

/* What the view remembers of a name from one refresh to the next. */
typedef struct top_seen {
    char *name;
    char holder[160];  /* the first holder's owner, "" when free */
    long long since;   /* when that holder was first seen, ms */
    bool at_first_look; /* held so when the view first looked */
    unsigned changes;  /* holder changes seen at the last refresh */
    bool present;      /* listed at the last refresh */
} top_seen;

/* One row of a refresh. */
typedef struct top_row {
    const cli_name *name;
    cli_name_info info;
    const top_seen *seen; /* set once every row has its memory */
    size_t seen_at;       /* its index in the view's memory; NO_SEEN */
} top_row;

#define NO_SEEN ((size_t)-1)

typedef struct top_view {
    top_seen *seen;
    size_t nseen;
    top_sort sort;
    long long interval_ms;
    bool screen; /* redraw in place */
} top_view;

static volatile sig_atomic_t top_stop;

static void on_stop_signal(int sig)
{
    (void)sig;
    top_stop = 1;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int top_usage(const char *why, const char *what)
{
    return cli_usage_error("top", why, what);
}

/* The index of what the view remembers of a name, made on its first
 * look; NO_SEEN when out of memory. */
static size_t seen_of(top_view *v, const cli_name *e)
{
    for (size_t i = 0; i < v->nseen; i++)
        if (strcmp(v->seen[i].name, e->name) == 0)
            return i;
    top_seen *grown = realloc(v->seen, (v->nseen + 1) * sizeof *grown);
    if (grown == NULL)
        return NO_SEEN;
    v->seen = grown;
    top_seen *s = &v->seen[v->nseen];
    *s = (top_seen){.name = strdup(e->name), .since = -1};
    if (s->name == NULL)
        return NO_SEEN;
    return v->nseen++;
}

/* Bring what the view remembers of a name up to what it holds now.  A
 * change counts when another holder is seen where one was seen before,
 * or was free. */
static void observe(top_seen *s, const cli_name_info *in, long long now)
{
    /* The holder's client lists when the hold began: exact, whenever the
     * view first looked. */
    bool recorded = in->held_ms >= 0;
    char holder[sizeof s->holder] = "";
    const hilock_lock_status *st = in->st;
    if (st != NULL && st->holders_len > 0)
        snprintf(holder, sizeof holder, "%.*s",
                 (int)st->holders[0].owner_len, st->holders[0].owner);
    bool first_look = s->since < 0;
    s->changes = 0;
    s->present = true;
    bool same = !first_look && strcmp(holder, s->holder) == 0;
    if (!same && !first_look && holder[0] != '\0')
        s->changes = 1;
    if (!same) {
        s->at_first_look = first_look && holder[0] != '\0';
        snprintf(s->holder, sizeof s->holder, "%s", holder);
        s->since = now;
    }
    if (recorded) {
        s->since = now - in->held_ms;
        s->at_first_look = false;
    }
}

/* Forget the names no longer listed, so that a long watch of names that
 * come and go keeps only those there now. */
static void forget_gone(top_view *v)
{
    size_t kept = 0;
    for (size_t i = 0; i < v->nseen; i++) {
        if (v->seen[i].present)
            v->seen[kept++] = v->seen[i];
        else
            free(v->seen[i].name);
    }
    v->nseen = kept;
}

static long long held_ms(const top_row *r, long long now)
{
    return r->seen && r->seen->holder[0] != '\0' ? now - r->seen->since : -1;
}

static size_t waiters_of(const top_row *r)
{
    return r->info.st ? r->info.st->waiters_len : 0;
}

static top_sort sort_now;
static long long sort_at;

static int by_sort(const void *a, const void *b)
{
    const top_row *x = a, *y = b;
    if (sort_now == SORT_HELD) {
        long long hx = held_ms(x, sort_at), hy = held_ms(y, sort_at);
        if (hx != hy)
            return hx < hy ? 1 : -1;
    } else if (sort_now == SORT_WAITERS) {
        size_t wx = waiters_of(x), wy = waiters_of(y);
        if (wx != wy)
            return wx < wy ? 1 : -1;
    }
    return strcmp(x->name->name, y->name->name);
}

/* The first holder as an operator knows it: program[pid]@host and the
 * description from its card, or "(no card)" and the owner itself (a
 * Redisson client's, or one gone), the mark first so that the column's
 * width cannot cut it off; and the leases its client lost, -1 when
 * unknown. */
static void holder_of(hilock_client *c, const top_row *r, char *out,
                      size_t cap, long long *lost)
{
    *lost = -1;
    const hilock_lock_status *st = r->info.st;
    if (st == NULL || st->holders_len == 0) {
        snprintf(out, cap, "-");
        return;
    }
    const hilock_lock_owner *o = &st->holders[0];
    char id[HILOCK_CLIENT_ID_LEN + 1];
    hilock_client_card *card = NULL;
    if (cli_owner_client_id(o, id))
        (void)hilock_client_card_get(c, id, &card);
    if (card != NULL) {
        snprintf(out, cap, "%s[%lld]@%s%s%s", card->program,
                 (long long)card->pid, card->host,
                 card->description[0] ? " " : "", card->description);
        *lost = (long long)card->leases_lost;
        hilock_client_card_free(card);
    } else {
        snprintf(out, cap, "(no card) %.*s", (int)o->owner_len, o->owner);
    }
}

static void print_rows(hilock_client *c, top_view *v, top_row *rows,
                       size_t n, size_t max_rows, long long now)
{
    printf("%-28s %-10s %-36s %4s %7s %9s %6s %5s\n", "NAME", "KIND",
           "HOLDER", "HOLD", "WAITERS", "HELD", "CHG/S", "LOST");
    for (size_t i = 0; i < n && i < max_rows; i++) {
        top_row *r = &rows[i];
        char holder[160], held[24], held_col[26], lost_col[24], rate[24];
        long long lost;
        holder_of(c, r, holder, sizeof holder, &lost);
        cli_format_span(held_ms(r, now), held, sizeof held);
        snprintf(held_col, sizeof held_col, "%s%s",
                 r->seen && r->seen->at_first_look ? ">" : "", held);
        if (lost >= 0)
            snprintf(lost_col, sizeof lost_col, "%lld", lost);
        else
            snprintf(lost_col, sizeof lost_col, "-");
        snprintf(rate, sizeof rate, "%.1f",
                 r->seen ? r->seen->changes * 1000.0 / (double)v->interval_ms
                         : 0.0);
        if (r->info.st == NULL) {
            printf("%-28.28s %-10s %-36s %4s %7s %9s %6s %5s  count %s\n",
                   r->name->name, r->info.kind, "-", "-", "-", "-", "-", "-",
                   r->info.count);
            continue;
        }
        printf("%-28.28s %-10s %-36.36s %4zu %7zu %9s %6s %5s\n",
               r->name->name, r->info.kind, holder,
               r->info.st->holders_len, r->info.st->waiters_len, held_col,
               rate, lost_col);
    }
    if (n > max_rows)
        printf("... %zu more (narrow the PATTERN)\n", n - max_rows);
}

static const char *sort_word(top_sort s)
{
    return s == SORT_HELD ? "time held" : s == SORT_WAITERS ? "waiters"
                                                            : "name";
}

/* One refresh: 0 or an exit status. */
static int refresh(hilock_client *c, const hilock_options *opts,
                   const char *pattern, top_view *v)
{
    cli_names names;
    int rc = cli_scan_names(c, opts, pattern, &names);
    if (rc != 0) {
        cli_names_free(&names);
        return rc;
    }
    long long now = now_ms();
    top_row *rows = calloc(names.n ? names.n : 1, sizeof *rows);
    if (rows == NULL) {
        cli_names_free(&names);
        fprintf(stderr, "hilock: top: out of memory\n");
        return CLI_EXIT_SOFTWARE;
    }
    for (size_t i = 0; i < v->nseen; i++)
        v->seen[i].present = false;
    size_t n = 0;
    for (size_t i = 0; i < names.n; i++) {
        top_row *r = &rows[n];
        r->name = &names.items[i];
        if (!cli_name_info_read(c, r->name, &r->info))
            continue;
        r->seen_at = seen_of(v, r->name);
        if (r->seen_at != NO_SEEN)
            observe(&v->seen[r->seen_at], &r->info, now);
        n++;
    }
    /* The memory moves while it grows: rows point into it only now. */
    for (size_t i = 0; i < n; i++)
        rows[i].seen = rows[i].seen_at == NO_SEEN ? NULL
                                                  : &v->seen[rows[i].seen_at];
    sort_now = v->sort;
    sort_at = now;
    if (n > 1)
        qsort(rows, n, sizeof *rows, by_sort);

    size_t max_rows = (size_t)-1;
    if (v->screen) {
        struct winsize ws;
        size_t lines = 24;
        if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0)
            lines = ws.ws_row;
        max_rows = lines > 4 ? lines - 4 : 1;
        fputs("\033[H\033[2J", stdout);
    }
    printf("hilock top  %s  %zu name%s  sorted by %s  every %lld ms%s\n",
           pattern, n, n == 1 ? "" : "s", sort_word(v->sort),
           v->interval_ms,
           v->screen ? "  (q quit, h held, w waiters, n name)" : "");
    print_rows(c, v, rows, n, max_rows, now);
    if (!v->screen)
        putchar('\n');
    fflush(stdout);
    for (size_t i = 0; i < n; i++)
        cli_name_info_done(&rows[i].info);
    free(rows);
    cli_names_free(&names);
    forget_gone(v);
    return 0;
}

/* Wait out the interval, taking keys from a terminal meanwhile: false
 * once asked to quit. */
static bool wait_keys(top_view *v, bool keys)
{
    long long until = now_ms() + v->interval_ms;
    for (;;) {
        if (top_stop)
            return false;
        long long left = until - now_ms();
        if (left <= 0)
            return true;
        struct pollfd p = {keys ? STDIN_FILENO : -1, POLLIN, 0};
        int ready = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
        if (ready <= 0 || !(p.revents & POLLIN))
            continue;
        char ch;
        if (read(STDIN_FILENO, &ch, 1) != 1)
            continue;
        if (ch == 'q' || ch == 'Q')
            return false;
        top_sort was = v->sort;
        if (ch == 'h')
            v->sort = SORT_HELD;
        else if (ch == 'w')
            v->sort = SORT_WAITERS;
        else if (ch == 'n')
            v->sort = SORT_NAME;
        if (v->sort != was)
            return true; /* redraw in the new order at once */
    }
}

static int parse_sort(const char *s, top_sort *out)
{
    if (strcmp(s, "held") == 0)
        *out = SORT_HELD;
    else if (strcmp(s, "waiters") == 0)
        *out = SORT_WAITERS;
    else if (strcmp(s, "name") == 0)
        *out = SORT_NAME;
    else
        return -1;
    return 0;
}

int cli_top(const cli_globals *g, int argc, char **argv)
{
    const char *pattern = NULL;
    top_view v = {.sort = SORT_HELD, .interval_ms = 1000};
    long long iterations = -1;
    bool batch = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val;
        bool missing = false;
        if (cli_wants_help(arg))
            return cli_help("top");
        if ((val = cli_option_value(argc, argv, &i, "--interval", "-i",
                                    &missing))) {
            if (!cli_parse_duration(val, false, 3600000, &v.interval_ms) ||
                v.interval_ms < 100)
                return top_usage("--interval takes a duration from 100ms "
                                 "to 1h, not",
                                 val);
        } else if ((val = cli_option_value(argc, argv, &i, "--sort", "-s",
                                           &missing))) {
            if (parse_sort(val, &v.sort) != 0)
                return top_usage("--sort takes held, waiters or name, not",
                                 val);
        } else if ((val = cli_option_value(argc, argv, &i, "--iterations",
                                           "-n", &missing))) {
            if (!cli_parse_ms(val, false, 1000000000, &iterations))
                return top_usage("--iterations takes a count from 1, not",
                                 val);
        } else if (strcmp(arg, "--batch") == 0 || strcmp(arg, "-b") == 0) {
            batch = true;
        } else if (missing || (arg[0] == '-' && arg[1] != '\0')) {
            return top_usage(missing ? "missing value after"
                                     : "unknown option",
                             arg);
        } else if (pattern != NULL) {
            return top_usage("one PATTERN at most, not also", arg);
        } else {
            pattern = arg;
        }
    }
    if (pattern == NULL)
        pattern = "*";
    v.screen = !batch && isatty(STDOUT_FILENO);
    bool keys = v.screen && isatty(STDIN_FILENO);

    hilock_options *opts;
    hilock_client *client;
    int rc = cli_open_with(g, &opts, &client);
    if (rc != 0)
        return rc;

    struct termios saved;
    if (keys && tcgetattr(STDIN_FILENO, &saved) == 0) {
        struct termios raw = saved;
        raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        keys = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    } else {
        keys = false;
    }
    struct sigaction sa = {.sa_handler = on_stop_signal};
    struct sigaction old_int, old_term, old_hup;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);
    if (v.screen)
        fputs("\033[?25l", stdout); /* no cursor while redrawing */

    for (long long done = 0; rc == 0 && !top_stop;) {
        rc = refresh(client, opts, pattern, &v);
        if (rc != 0 || (iterations > 0 && ++done >= iterations))
            break;
        if (!wait_keys(&v, keys))
            break;
    }

    if (v.screen)
        fputs("\033[?25h", stdout);
    fflush(stdout);
    if (keys)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    for (size_t i = 0; i < v.nseen; i++)
        free(v.seen[i].name);
    free(v.seen);
    hilock_client_destroy(client);
    hilock_options_free(opts);
    return rc;
}
