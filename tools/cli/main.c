/* hilock: distributed locks from the shell. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static void usage(FILE *to)
{
    fprintf(to,
        "usage: hilock [--redis URL] [--watchdog MS] COMMAND [ARGS]\n"
        "       hilock --redlock URL1,...,URLn [--watchdog MS] run|status "
        "[ARGS]\n"
        "\n"
        "commands:\n"
        "  run [--kind KIND] [--wait MS] [--lease MS] [--fence-env] NAME\n"
        "      -- CMD [ARG...]\n"
        "             take lock NAME, run CMD while holding it, release it\n"
        "             when CMD exits.  The watchdog keeps the lock unless\n"
        "             --lease gives a fixed lease.  --wait bounds the wait\n"
        "             (default: forever; 0: one attempt).  --fence-env\n"
        "             passes the fencing token to CMD as HILOCK_FENCE.\n"
        "             KIND: reentrant (the default), fair, read or write\n"
        "             (the sides of a read-write lock).  CMD runs in a\n"
        "             process group of its own, with its children: TERM,\n"
        "             INT and HUP are passed on to that group, which gets\n"
        "             the terminal when hilock has it.  If hilock is killed\n"
        "             (kill -9), CMD is killed too, but not its children.\n"
        "             Exit status: CMD's own (128+N if a signal N killed\n"
        "             it), 75 not acquired within --wait, 76 the lock was\n"
        "             lost while CMD ran (CMD's group then gets TERM, and\n"
        "             KILL 5 s later), 126/127 CMD cannot be run\n"
        "  status [--kind KIND] NAME\n"
        "             print the lock as one JSON object: name, kind,\n"
        "             locked, ttl_ms, holders, waiters, and by kind:\n"
        "             subscribers (reentrant); queue, each waiter with\n"
        "             expires_in_ms (fair); mode, readers, writer,\n"
        "             waiting_writers (read-write).  The kind is read from\n"
        "             the server unless KIND (reentrant, fair, read or\n"
        "             write) says it; a fair lock nobody waits for looks\n"
        "             reentrant.  A name holding a string (or KIND latch)\n"
        "             is a latch: {\"name\",\"kind\":\"latch\",\"count\",\n"
        "             \"open\"}.  Bytes that are not valid UTF-8 appear as\n"
        "             \\u00XX.  Through Sentinel, or on a master with\n"
        "             replicas or a replica (not a cluster), also\n"
        "             replication: {master (host:port\n"
        "             reached), replicas [{addr,state}], sentinel_master,\n"
        "             ack, ack_timeout_ms}\n"
        "  unlock --force [--kind KIND] NAME\n"
        "             delete lock NAME whoever holds it, with its kind's own\n"
        "             force release (read from the server as status does,\n"
        "             unless KIND says it); prints \"deleted\" or\n"
        "             \"not locked\"\n"
        "  latch set NAME COUNT | latch down NAME | latch count NAME |\n"
        "  latch wait [--timeout MS] NAME\n"
        "             a count-down latch (Redisson's RCountDownLatch): set\n"
        "             the count when the latch is open (exit 1 when it\n"
        "             had a count already, left alone), take it down by\n"
        "             one and print what is left, print the count (0: open),\n"
        "             or wait until it is zero (default: forever; exit 75\n"
        "             when it was still above zero after --timeout MS).\n"
        "             COUNT: 1..9007199254740991.  Exit 65 when NAME holds\n"
        "             something that is not a latch count\n"
        "  demo [--cluster]\n"
        "             start a private redis-server (unless --redis or\n"
        "             $HILOCK_REDIS is given) and show threads contending\n"
        "             for one lock, with the watchdog renewing it, then\n"
        "             the stock demo on segmented locks.  --cluster: on a\n"
        "             Redis Cluster, a private one of 3 masters unless the\n"
        "             URL names one; shows the master of each segment\n"
        "  demo --replicas\n"
        "             on a private master with 2 replicas and 3 sentinels\n"
        "             (or the group of a redis-sentinel:// URL): worker 1\n"
        "             holds a lock while others wait, the master is killed\n"
        "             (kill -9; on a URL's group, SENTINEL FAILOVER), and\n"
        "             each worker says what it was told after the failover\n"
        "  version    print the library version\n"
        "\n"
        "options:\n"
        "  --redis URL     redis://[user:password@]host[:port][/db] or\n"
        "                  rediss://... for TLS, or the sentinels of a\n"
        "                  group: redis-sentinel://host:port[,...]#master;\n"
        "                  default $HILOCK_REDIS, else\n"
        "                  redis://127.0.0.1:6379\n"
        "  --redlock URL1,...,URLn\n"
        "                  RedLock over n independent masters (n odd, 3 or\n"
        "                  more; write a comma inside a URL as %%2C): run\n"
        "                  takes a reentrant lock NAME on each of them at\n"
        "                  once and holds it with a quorum of n/2+1; no\n"
        "                  --kind, no --fence-env (RedLock has no fencing\n"
        "                  token).  Not acquired because too few masters\n"
        "                  could vote exits 69.  A master votes once it\n"
        "                  has been up for its quarantine time (URL key\n"
        "                  quarantine, default the watchdog time): set it to\n"
        "                  at least the longest lease.  status prints\n"
        "                  {\"name\",\"kind\":\"redlock\",\"masters\":[{\"url\",\n"
        "                  \"locked\",\"ttl_ms\",\"holders\"}...],\"quorum\",\n"
        "                  \"locked_on\"}; a master that cannot be read shows\n"
        "                  \"error\" and nulls, and status exits 69 when fewer\n"
        "                  than a quorum could be read\n"
        "  --watchdog MS   lease time the watchdog keeps renewing\n"
        "\n"
        "exit status: 0 success, 64 usage error, 65 NAME holds something\n"
        "that is not a lock, 69 Redis unreachable or refused the\n"
        "credentials, TLS or a command the user's ACL does not allow\n"
        "(with --redlock: too few masters for a quorum), 70 internal\n"
        "error, and those of run above.\n");
}

bool cli_parse_ms(const char *s, bool allow_zero, long long max,
                  long long *out)
{
    /* strtoll alone would take signs and leading blanks. */
    if (s[0] < '0' || s[0] > '9')
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max || (v == 0 && !allow_zero))
        return false;
    *out = v;
    return true;
}

const char *cli_option_value(int argc, char **argv, int *i, const char *opt,
                             bool *missing)
{
    size_t n = strlen(opt);
    const char *a = argv[*i];
    if (strncmp(a, opt, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

int64_t cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

int cli_open(const cli_globals *g, hilock_client **out)
{
    hilock_options *opts;
    int rc = cli_make_options(g, g->redis_url, &opts);
    if (rc != 0)
        return rc;
    rc = cli_connect(opts, out);
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
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if ((v = cli_option_value(argc, argv, &i, "--redis", &missing))) {
            g.redis_url = v;
            g.redis_given = true;
            redis_flag = true;
        } else if ((v = cli_option_value(argc, argv, &i, "--redlock",
                                         &missing))) {
            g.redlock = v;
        } else if ((v = cli_option_value(argc, argv, &i, "--watchdog",
                                         &missing))) {
            if (!cli_parse_ms(v, false, 86400000, &g.watchdog_ms)) {
                fprintf(stderr, "hilock: --watchdog takes milliseconds, "
                                "1..86400000\n"
                                "usage: hilock [--redis URL] [--watchdog MS] "
                                "COMMAND [ARGS] (see --help)\n");
                return CLI_EXIT_USAGE;
            }
        } else {
            fprintf(stderr, "hilock: %s option %s\n",
                    missing ? "incomplete" : "unknown", a);
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
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
        if (why != NULL) {
            fprintf(stderr, "hilock: %s\n", why);
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
        g.redis_url = NULL;
        g.redis_given = false;
    }
    if (strcmp(cmd, "run") == 0)
        return cli_run(&g, argc - i, argv + i);
    if (strcmp(cmd, "status") == 0)
        return cli_status(&g, argc - i, argv + i);
    if (strcmp(cmd, "unlock") == 0)
        return cli_unlock(&g, argc - i, argv + i);
    if (strcmp(cmd, "demo") == 0)
        return cli_demo(&g, argc - i, argv + i);
    if (strcmp(cmd, "latch") == 0)
        return cli_latch(&g, argc - i, argv + i);
    if (strcmp(cmd, "version") == 0) {
        printf("hilock %s\n", hilock_version_string());
        return 0;
    }
    fprintf(stderr, "hilock: unknown command '%s'\n", cmd);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
