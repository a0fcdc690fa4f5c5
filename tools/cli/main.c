/* hilock: distributed locks from the shell. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: hilock [--redis URL] [--watchdog MS] COMMAND [ARGS]\n"
            "\n"
            "commands:\n"
            "  demo       start a private redis-server (unless --redis or\n"
            "             $HILOCK_REDIS is given), connect and show it works\n"
            "  version    print the library version\n"
            "\n"
            "  --redis URL     redis://[user:password@]host[:port][/db] or\n"
            "                  rediss://... for TLS; default $HILOCK_REDIS,\n"
            "                  else redis://127.0.0.1:6379\n"
            "  --watchdog MS   lease time the watchdog keeps renewing\n");
}

static bool parse_ms(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v <= 0)
        return false;
    *out = v;
    return true;
}

int cli_make_options(const cli_globals *g, const char *url,
                     hilock_options **out)
{
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
    *out = o;
    return 0;
}

int cli_connect(const hilock_options *opts, hilock_client **out)
{
    int rc = hilock_client_create(out, opts);
    if (rc == HILOCK_OK)
        return 0;
    fprintf(stderr, "hilock: cannot connect to %s:%d: %s (%s)\n",
            hilock_options_host(opts), hilock_options_port(opts),
            hilock_strerror(rc), hilock_last_error());
    return rc == HILOCK_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_UNAVAILABLE;
}

int main(int argc, char **argv)
{
    cli_globals g = {0};
    g.redis_url = getenv("HILOCK_REDIS");
    if (g.redis_url && g.redis_url[0] == '\0')
        g.redis_url = NULL;
    g.redis_given = g.redis_url != NULL;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--redis") == 0 && i + 1 < argc) {
            g.redis_url = argv[++i];
            g.redis_given = true;
        } else if (strcmp(a, "--watchdog") == 0 && i + 1 < argc) {
            if (!parse_ms(argv[++i], &g.watchdog_ms)) {
                fprintf(stderr, "hilock: --watchdog takes milliseconds > 0\n");
                return CLI_EXIT_USAGE;
            }
        } else {
            fprintf(stderr, "hilock: unknown or incomplete option %s\n", a);
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[i];
    if (strcmp(cmd, "demo") == 0)
        return cli_demo(&g, argc - i, argv + i);
    if (strcmp(cmd, "version") == 0) {
        printf("hilock %s\n", hilock_version_string());
        return 0;
    }
    fprintf(stderr, "hilock: unknown command '%s'\n", cmd);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
