/* Reading the command line: options in their long and short forms,
 * numbers and durations. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

typedef struct unit {
    const char *name;
    long long scale;
} unit;

/* Digits (no sign, no blank), then one of units' names; the number times
 * its scale in *out, at most max, zero only with allow_zero. */
static bool parse_scaled(const char *s, bool allow_zero, long long max,
                         const unit *units, size_t n, long long *out)
{
    /* strtoll alone would take signs and leading blanks. */
    if (s[0] < '0' || s[0] > '9')
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || (v == 0 && !allow_zero))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(end, units[i].name) != 0)
            continue;
        if (v > max / units[i].scale)
            return false;
        *out = v * units[i].scale;
        return true;
    }
    return false;
}

bool cli_parse_ms(const char *s, bool allow_zero, long long max,
                  long long *out)
{
    static const unit bare[] = {{"", 1}};
    return parse_scaled(s, allow_zero, max, bare, 1, out);
}

bool cli_parse_duration(const char *s, bool allow_zero, long long max_ms,
                        long long *out)
{
    static const unit units[] = {{"", 1},
                                 {"ms", 1},
                                 {"s", 1000},
                                 {"m", 60000},
                                 {"h", 3600000}};
    return parse_scaled(s, allow_zero, max_ms, units,
                        sizeof units / sizeof units[0], out);
}

const char *cli_option_value(int argc, char **argv, int *i, const char *opt,
                             const char *short_opt, bool *missing)
{
    const char *a = argv[*i];
    size_t n = strlen(opt);
    if (strncmp(a, opt, n) == 0 && a[n] == '=')
        return a + n + 1;
    bool named = strcmp(a, opt) == 0;
    if (!named && short_opt != NULL && strncmp(a, short_opt, 2) == 0) {
        if (a[2] != '\0')
            return a + 2; /* -w10s */
        named = true;
    }
    if (!named)
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

bool cli_flag(const char *arg, const char *opt, const char *short_opt)
{
    return strcmp(arg, opt) == 0 ||
           (short_opt != NULL && strcmp(arg, short_opt) == 0);
}

bool cli_wants_help(const char *arg)
{
    return cli_flag(arg, "--help", "-h");
}

bool cli_parse_signal(const char *s, int *out)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {{"none", 0},       {"TERM", SIGTERM}, {"INT", SIGINT},
                 {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
                 {"USR2", SIGUSR2}, {"KILL", SIGKILL}};
    const char *bare = strncasecmp(s, "SIG", 3) == 0 ? s + 3 : s;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcasecmp(bare, names[i].name) == 0 &&
            (names[i].sig != 0 || bare == s)) {
            *out = names[i].sig;
            return true;
        }
    }
    long long n;
    if (!cli_parse_ms(s, false, NSIG - 1, &n))
        return false;
    *out = (int)n;
    return true;
}
