/* hilock ls [PATTERN]: the locks and counters (latches and semaphores)
 * on a server, or on every master of a cluster (SCAN on each), one line
 * each: kind, whether held, holders, waiters and the lease left (a count:
 * "latch" or "semaphore" as the hilock client that set it said, else
 * "unknown"); --json
 * prints them as an array of objects.  The keys the layouts keep beside a
 * lock (redisson_* and hilock_* keys, a semaphore's permits, a read-write
 * hold's timeouts) are parts of it, not locks, and are left out; a free
 * lock still in its lock delay is listed, with the delay left. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hilock/hilock.h"

static int ls_usage(const char *why, const char *what)
{
    return cli_usage_error("ls", why, what);
}

/* One line, or one object after *printed others. */
static void print_one(hilock_client *c, const cli_name *e, bool json,
                      size_t *printed)
{
    cli_name_info in;
    if (!cli_name_info_read(c, e, &in))
        return;
    bool first = (*printed)++ == 0;
    const hilock_lock_status *st = in.st;
    char held[24] = "null", span[24] = "-";
    if (in.held_ms >= 0) {
        snprintf(held, sizeof held, "%lld", in.held_ms);
        cli_format_span(in.held_ms, span, sizeof span);
    }
    if (json) {
        fputs(first ? "\n" : ",\n", stdout);
        fputs("{\"name\":", stdout);
        cli_json_string(stdout, e->name, e->len);
        if (st == NULL) {
            printf(",\"kind\":\"%s\",\"count\":%s}", in.kind, in.count);
        } else {
            printf(",\"kind\":\"%s\",\"locked\":%s,\"holders\":%zu,"
                   "\"waiters\":%zu,\"ttl_ms\":%lld,\"held_ms\":%s",
                   in.kind, st->locked ? "true" : "false", st->holders_len,
                   st->waiters_len, (long long)st->ttl_ms, held);
            /* A free lock in its lock delay refuses acquires of ours. */
            if (st->delay_ms != 0)
                printf(",\"delay_ms\":%lld", (long long)st->delay_ms);
            putchar('}');
        }
    } else if (st == NULL) {
        printf("%-32s %-10s %-6s %7s %7s %9s %9s  count %s\n", e->name,
               in.kind, "-", "-", "-", "-", "-", in.count);
    } else {
        printf("%-32s %-10s %-6s %7zu %7zu %9lld %9s", e->name, in.kind,
               st->locked ? "yes" : "no", st->holders_len, st->waiters_len,
               (long long)st->ttl_ms, span);
        if (st->delay_ms > 0) {
            char delay[24];
            cli_format_span(st->delay_ms, delay, sizeof delay);
            printf("  delay %s", delay);
        }
        putchar('\n');
    }
    cli_name_info_done(&in);
}

int cli_ls(const cli_globals *g, int argc, char **argv)
{
    const char *pattern = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (cli_wants_help(argv[i]))
            return cli_help("ls");
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (argv[i][0] == '-' && argv[i][1] != '\0')
            return ls_usage("unknown option", argv[i]);
        else if (pattern != NULL)
            return ls_usage("one PATTERN at most, not also", argv[i]);
        else
            pattern = argv[i];
    }
    if (pattern == NULL)
        pattern = "*";
    hilock_options *opts;
    hilock_client *client;
    int rc = cli_open_with(g, &opts, &client);
    if (rc != 0)
        return rc;
    cli_names list;
    rc = cli_scan_names(client, opts, pattern, &list);
    if (rc == 0) {
        if (json)
            fputs("[", stdout);
        else
            printf("%-32s %-10s %-6s %7s %7s %9s %9s\n", "NAME", "KIND",
                   "HELD", "HOLDERS", "WAITERS", "TTL_MS", "HELD_FOR");
        size_t printed = 0;
        for (size_t i = 0; i < list.n; i++)
            print_one(client, &list.items[i], json, &printed);
        if (json)
            fputs(printed > 0 ? "\n]\n" : "]\n", stdout);
        if (list.more > 0)
            fprintf(stderr, "hilock: ls: %zu more names not listed (at "
                            "most %d; narrow the PATTERN)\n",
                    list.more, CLI_NAMES_MAX);
        rc = cli_flush_stdout(rc);
    }
    cli_names_free(&list);
    hilock_client_destroy(client);
    hilock_options_free(opts);
    return rc;
}
