/* hilock: distributed locks from the shell. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

int64_t cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --verbose: what happens to the connections and leases, as it
 * happens, one line each on stderr. */
static void print_event(hilock_client *client, const hilock_event *e,
                        void *data)
{
    (void)client;
    (void)data;
    fprintf(stderr, "hilock: [%s]%s%s%s%s\n", hilock_event_name(e->type),
            e->server ? " " : "", e->server ? e->server : "",
            e->detail ? ": " : "", e->detail ? e->detail : "");
}

int cli_make_options(const cli_globals *g, const char *url,
                     hilock_options **out)
{
    *out = NULL; /* callers free it whatever the outcome */
    hilock_options *o;
    if (hilock_options_create(&o) != HILOCK_OK) {
        fprintf(stderr, "hilock: out of memory\n");
        return CLI_EXIT_SOFTWARE;
    }
    if (url && hilock_options_set_url(o, url) != HILOCK_OK) {
        fprintf(stderr, "hilock: bad Redis URL: %s\n", hilock_last_error());
        hilock_options_free(o);
        return CLI_EXIT_USAGE;
    }
    if (g->watchdog_ms > 0 &&
        hilock_options_set_watchdog_timeout_ms(o, g->watchdog_ms) !=
            HILOCK_OK) {
        fprintf(stderr, "hilock: bad --watchdog: %s\n", hilock_last_error());
        hilock_options_free(o);
        return CLI_EXIT_USAGE;
    }
    if (g->max_hold_ms > 0 &&
        hilock_options_set_max_hold_ms(o, g->max_hold_ms) != HILOCK_OK) {
        fprintf(stderr, "hilock: bad --max-hold: %s\n", hilock_last_error());
        hilock_options_free(o);
        return CLI_EXIT_USAGE;
    }
    if (g->lock_delay_set &&
        hilock_options_set_lock_delay_ms(o, g->lock_delay_ms) != HILOCK_OK) {
        fprintf(stderr, "hilock: bad --lock-delay: %s\n",
                hilock_last_error());
        hilock_options_free(o);
        return CLI_EXIT_USAGE;
    }
    if (g->description != NULL &&
        hilock_options_set_description(o, g->description) != HILOCK_OK) {
        fprintf(stderr, "hilock: bad --describe: %s\n", hilock_last_error());
        hilock_options_free(o);
        return CLI_EXIT_USAGE;
    }
    if (g->verbose)
        hilock_options_set_event_callback(o, print_event, NULL);
    *out = o;
    return 0;
}

int cli_connect(const hilock_options *opts, hilock_client **out)
{
    int rc = hilock_client_create(out, opts);
    if (rc == HILOCK_OK)
        return 0;
    const char *master = hilock_options_sentinel_master(opts);
    if (master != NULL)
        fprintf(stderr, "hilock: cannot reach master '%s' through the "
                        "sentinels (first %s:%d): %s (%s)\n",
                master, hilock_options_host(opts), hilock_options_port(opts),
                hilock_strerror(rc), hilock_last_error());
    else
        fprintf(stderr, "hilock: cannot connect to %s:%d: %s (%s)\n",
                hilock_options_host(opts), hilock_options_port(opts),
                hilock_strerror(rc), hilock_last_error());
    return rc == HILOCK_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_UNAVAILABLE;
}

int cli_open_with(const cli_globals *g, hilock_options **opts,
                  hilock_client **out)
{
    int rc = cli_make_options(g, g->redis_url, opts);
    if (rc != 0)
        return rc;
    rc = cli_connect(*opts, out);
    if (rc != 0) {
        hilock_options_free(*opts);
        *opts = NULL;
    }
    return rc;
}

int cli_open(const cli_globals *g, hilock_client **out)
{
    hilock_options *opts = NULL;
    int rc = cli_open_with(g, &opts, out);
    hilock_options_free(opts);
    return rc;
}

/* SIGPIPE keeps the disposition hilock was started with.  The library's
 * sockets never raise it, so ignoring it would only change what happens
 * when hilock's own reader goes away (`hilock status | head`), where
 * ending quietly, as any filter does, is right; and `hilock run` hands
 * CMD the default disposition whatever hilock had (see run.c). */
int main(int argc, char **argv)
{
    cli_globals g = {0};
    g.redis_url = getenv("HILOCK_REDIS");
    if (g.redis_url && g.redis_url[0] == '\0')
        g.redis_url = NULL;
    g.redis_given = g.redis_url != NULL;
    bool redis_flag = false;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        const char *v;
        bool missing = false;
        if (cli_wants_help(a)) {
            cli_help_overview(stdout);
            return fflush(stdout) == 0 ? 0 : CLI_EXIT_SOFTWARE;
        }
        if (cli_flag(a, "--verbose", "-v")) {
            g.verbose = true;
            continue;
        }
        if (cli_flag(a, "--version", "-V")) {
            printf("hilock %s\n", hilock_version_string());
            return fflush(stdout) == 0 ? 0 : CLI_EXIT_SOFTWARE;
        }
        if ((v = cli_option_value(argc, argv, &i, "--redis", NULL,
                                  &missing))) {
            g.redis_url = v;
            g.redis_given = true;
            redis_flag = true;
        } else if ((v = cli_option_value(argc, argv, &i, "--redlock", NULL,
                                         &missing))) {
            g.redlock = v;
        } else if ((v = cli_option_value(argc, argv, &i, "--describe", NULL,
                                         &missing))) {
            g.description = v;
        } else if ((v = cli_option_value(argc, argv, &i, "--watchdog", NULL,
                                         &missing))) {
            if (!cli_parse_duration(v, false, 86400000, &g.watchdog_ms))
                return cli_usage_error(NULL,
                                       "--watchdog takes a duration up to "
                                       "24h (30s, 500ms; bare: "
                                       "milliseconds), not",
                                       v);
        } else {
            return cli_usage_error(NULL,
                                   missing ? "missing value after"
                                           : "unknown option",
                                   a);
        }
    }
    if (i >= argc)
        return cli_usage_error(NULL, "missing COMMAND", NULL);
    const char *cmd = argv[i];
    if (g.redlock != NULL) {
        /* $HILOCK_REDIS is a default for one server; --redlock names its
         * own, so only an explicit --redis beside it is a contradiction. */
        const char *why =
            redis_flag ? "--redis and --redlock name different servers; "
                         "give one of them"
            : strcmp(cmd, "run") != 0 && strcmp(cmd, "status") != 0 &&
                    strcmp(cmd, "version") != 0
                ? "--redlock goes with run and status only"
                : NULL;
        if (why != NULL)
            return cli_usage_error(NULL, why, NULL);
        g.redis_url = NULL;
        g.redis_given = false;
    }
    if (strcmp(cmd, "run") == 0)
        return cli_run(&g, argc - i, argv + i);
    if (strcmp(cmd, "status") == 0)
        return cli_status(&g, argc - i, argv + i);
    if (strcmp(cmd, "ls") == 0)
        return cli_ls(&g, argc - i, argv + i);
    if (strcmp(cmd, "top") == 0)
        return cli_top(&g, argc - i, argv + i);
    if (strcmp(cmd, "stats") == 0)
        return cli_stats(&g, argc - i, argv + i);
    if (strcmp(cmd, "unlock") == 0)
        return cli_unlock(&g, argc - i, argv + i);
    if (strcmp(cmd, "revoke") == 0)
        return cli_revoke(&g, argc - i, argv + i);
    if (strcmp(cmd, "demo") == 0)
        return cli_demo(&g, argc - i, argv + i);
    if (strcmp(cmd, "latch") == 0)
        return cli_latch(&g, argc - i, argv + i);
    if (strcmp(cmd, "version") == 0) {
        if (i + 1 < argc && cli_wants_help(argv[i + 1]))
            return cli_help("version");
        printf("hilock %s\n", hilock_version_string());
        return fflush(stdout) == 0 ? 0 : CLI_EXIT_SOFTWARE;
    }
    return cli_usage_error(NULL, "unknown command", cmd);
}
