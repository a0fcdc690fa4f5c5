/* The hilock command: shared pieces of its subcommands. */
#ifndef HILOCK_CLI_H
#define HILOCK_CLI_H

#include <stdbool.h>

#include <hilock/hilock.h>

/* Exit statuses (sysexits where one fits). */
enum {
    CLI_EXIT_USAGE = 64,       /* bad command line */
    CLI_EXIT_UNAVAILABLE = 69, /* Redis unreachable, auth or TLS failed */
    CLI_EXIT_SOFTWARE = 70,    /* an unexpected failure */
    CLI_EXIT_NOT_ACQUIRED = 75,
    CLI_EXIT_LEASE_LOST = 76
};

typedef struct cli_globals {
    const char *redis_url; /* NULL: $HILOCK_REDIS, else the default */
    bool redis_given;      /* --redis or $HILOCK_REDIS was set */
    long long watchdog_ms; /* 0: the library's default */
} cli_globals;

/* Build client options from the globals (URL and watchdog).  On error,
 * prints the reason and returns the exit status to use. */
int cli_make_options(const cli_globals *g, const char *url,
                     hilock_options **out);
/* Connect; on error prints the reason and returns the exit status. */
int cli_connect(const hilock_options *opts, hilock_client **out);

int cli_demo(const cli_globals *g, int argc, char **argv);

#endif
