/* What `hilock --help` and `hilock COMMAND --help` print: every command
 * and every option, each in one place.  docs/man/hilock.1 says the same at
 * length, and a test checks that every option named here is there. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct command_help {
    const char *name;
    const char *synopsis; /* one or more "usage:" lines, after "hilock " */
    const char *text;     /* what it does, and its options */
} command_help;

static const command_help commands[] = {
    {"run",
     "[--redis URL] run [OPTIONS] NAME -- CMD [ARG...]\n"
     "       hilock [--redis URL] run [OPTIONS] NAME -c 'SHELL COMMAND'\n"
     "       hilock --redlock URL1,...,URLn run [OPTIONS] NAME -- CMD "
     "[ARG...]",
     "Take the lock NAME, run CMD while holding it, and release it when\n"
     "CMD exits.  The watchdog keeps the lock unless --lease gives a\n"
     "fixed lease.  CMD runs in a process group of its own, with its\n"
     "children: TERM, INT and HUP are passed on to that group, which gets\n"
     "the terminal when hilock has it.  If hilock is killed (kill -9), CMD\n"
     "is killed too, but not its children.\n"
     "\n"
     "options:\n"
     "  -w, --wait DURATION  wait at most this long for the lock (default:\n"
     "                       forever; 0: one attempt)\n"
     "  -n, --nonblock       one attempt, no wait: the same as --wait 0\n"
     "  -E, --conflict-exit-code N\n"
     "                       exit N (1..255) when the lock was not\n"
     "                       acquired in time (default 75)\n"
     "  -c, --command 'SHELL COMMAND'\n"
     "                       run it with /bin/sh -c, in place of -- CMD\n"
     "  -k, --kind KIND      reentrant (the default), fair, read or write\n"
     "                       (the sides of a read-write lock)\n"
     "  -l, --lease DURATION a fixed lease, not renewed\n"
     "      --max-hold DURATION\n"
     "                       the watchdog renews the lock no longer: it\n"
     "                       runs out one watchdog time later, and CMD is\n"
     "                       stopped as for a lost lock (exit 76)\n"
     "      --lock-delay DURATION\n"
     "                       if the hold ends without a release (CMD\n"
     "                       killed, the lease lost, a forced unlock), no\n"
     "                       hilock client takes the lock for this long\n"
     "                       (reentrant and fair; 0: off; URL lock_delay)\n"
     "  -p, --permits N      take one permit of the expirable semaphore\n"
     "                       NAME, which has N permits (set when it has\n"
     "                       none yet)\n"
     "      --fence-env      pass the fencing token to CMD as HILOCK_FENCE\n"
     "      --describe TEXT  what CMD does, shown beside the hold by\n"
     "                       `hilock status` (at most 200 bytes)\n"
     "      --on-request SIG send SIG to CMD's group when somebody asks\n"
     "                       for the lock (`hilock revoke`): TERM (the\n"
     "                       default), INT, HUP, QUIT, USR1, USR2, KILL,\n"
     "                       a number, or none to ignore requests\n"
     "  -h, --help           print this and exit\n"
     "\n"
     "DURATION: a whole number with a unit, ms, s, m or h (10s, 500ms,\n"
     "2m); without one, milliseconds.  --redlock takes no --kind,\n"
     "--permits, --fence-env or --on-request.\n"
     "\n"
     "exit status: CMD's own (128+N if a signal N killed it); 75 (or -E's)\n"
     "not acquired in time; 76 the lock was lost while CMD ran (CMD's\n"
     "group then gets TERM, and KILL 5 s later); 126/127 CMD cannot be\n"
     "run; and those of hilock --help."},
    {"status",
     "[--redis URL] status [--kind KIND] NAME\n"
     "       hilock --redlock URL1,...,URLn status NAME",
     "Print the lock NAME as one JSON object: name, kind, locked, ttl_ms,\n"
     "holders, waiters, and by kind: subscribers (reentrant); queue, each\n"
     "waiter with expires_in_ms (fair); mode, readers, writer,\n"
     "waiting_writers (read-write); count and open (latch); permits\n"
     "(semaphore).  Bytes that are not valid UTF-8 appear as \\u00XX.\n"
     "Through Sentinel, or on a master with replicas or a replica (not a\n"
     "cluster), also replication: {master, replicas [{addr,state}],\n"
     "sentinel_master, ack, ack_timeout_ms}.  Over --redlock: {name, kind\n"
     "\"redlock\", masters [{url, locked, ttl_ms, holders}], quorum,\n"
     "locked_on}; it exits 69 when fewer than a quorum could be read.\n"
     "\n"
     "options:\n"
     "  -k, --kind KIND  read NAME as this kind: reentrant, fair, read,\n"
     "                   write, latch or semaphore (default: the kind the\n"
     "                   server shows; a free lock of any kind looks\n"
     "                   reentrant); a kind the data contradicts (a\n"
     "                   read-write lock's mode, a fair lock's line) is\n"
     "                   refused with exit 65\n"
     "  -h, --help       print this and exit"},
    {"ls",
     "[--redis URL] ls [--json] [PATTERN]",
     "List the locks, latches and semaphores whose names match PATTERN (a\n"
     "glob, as SCAN MATCH takes it; default *) on the server, or on every\n"
     "master of a cluster: name, kind, whether held, holders, waiters and\n"
     "the lease left in ms, sorted by name.  A count is a latch or a\n"
     "semaphore as the hilock client that set it said, else unknown (a\n"
     "latch or semaphore only Redisson set, or any other integer).  Keys\n"
     "kept beside a lock (redisson_*, hilock_*) are not listed.  At most\n"
     "10,000 names.\n"
     "\n"
     "options:\n"
     "      --json       an array of objects: name, kind, locked,\n"
     "                   holders, waiters, ttl_ms (count for a count)\n"
     "  -h, --help       print this and exit"},
    {"top",
     "[--redis URL] top [OPTIONS] [PATTERN]",
     "A live view of the locks, latches and semaphores whose names match\n"
     "PATTERN (as ls finds them; default *), refreshed every interval:\n"
     "kind, first holder (program[pid]@host from its client's card),\n"
     "holders, waiters, how long the holder has been seen holding (\">\"\n"
     "when it held already at the first look), holder changes seen per\n"
     "second (a lock handed on faster than the refresh shows fewer), and\n"
     "the leases the holder's client lost.  On a terminal the screen is\n"
     "redrawn in place; keys: q quit, h sort by time held, w by waiters,\n"
     "n by name.\n"
     "\n"
     "options:\n"
     "  -i, --interval DURATION  between refreshes (default 1s; 100ms..1h)\n"
     "  -s, --sort KEY           held (the default), waiters or name\n"
     "  -n, --iterations N       stop after N refreshes (default: never)\n"
     "  -b, --batch              print each refresh after the one before,\n"
     "                           with no screen control (the default when\n"
     "                           stdout is no terminal)\n"
     "  -h, --help               print this and exit\n"
     "\n"
     "exit status: 0 when quit (q, INT, TERM) or after --iterations; and\n"
     "those of hilock --help."},
    {"stats",
     "[--redis URL] stats [--client ID] [--pid PID] [--program NAME]",
     "Print what the running clients of this library count (acquires,\n"
     "waits, holds, leases, connections; hilock_client_stats_read) in the\n"
     "Prometheus text format, read from their cards on the server (on a\n"
     "cluster, from every master), each series labelled client=\"<id>\",\n"
     "with a comment naming the process behind each id.  The figures are\n"
     "as of each card's last writing, at most 5 s old; a card not written\n"
     "for 12 s is of a client gone, and left out.\n"
     "\n"
     "options:\n"
     "      --client ID      only the client with this id\n"
     "      --pid PID        only the clients of this process\n"
     "      --program NAME   only the clients of programs of this name\n"
     "                       (hilock-bench, say)\n"
     "  -h, --help           print this and exit\n"
     "\n"
     "exit status: 66 no running client matched; and those of hilock\n"
     "--help."},
    {"unlock",
     "[--redis URL] unlock --force [--kind KIND] NAME",
     "Delete the lock NAME whoever holds it, with its kind's own force\n"
     "release, so that none of its keys stay behind and its waiters wake.\n"
     "Prints \"deleted\" or \"not locked\".\n"
     "\n"
     "options:\n"
     "  -f, --force      required: the hold is taken from its owner\n"
     "  -k, --kind KIND  reentrant, fair, read or write (default: the kind\n"
     "                   the server shows)\n"
     "  -h, --help       print this and exit"},
    {"revoke",
     "[--redis URL] revoke [--reason TEXT] [--kind KIND] NAME",
     "Ask whoever holds the lock NAME to give it up.  Nothing is taken:\n"
     "the holder hears the request and decides (a `hilock run` sends its\n"
     "command the signal of --on-request, TERM by default).  A request\n"
     "is not kept: a holder that does not listen when it is sent never\n"
     "hears it.  Prints how many holders heard.\n"
     "\n"
     "options:\n"
     "  -r, --reason TEXT  why, for the holder (at most 256 bytes)\n"
     "  -k, --kind KIND    reentrant, fair, read or write (default: the\n"
     "                     kind the server shows; every kind asks the\n"
     "                     same holders)\n"
     "  -h, --help         print this and exit\n"
     "\n"
     "exit status: 0 a holder heard; 66 nobody holds NAME; 75 NAME is\n"
     "held, but no holder listens for requests; and those of hilock\n"
     "--help."},
    {"latch",
     "[--redis URL] latch set NAME COUNT\n"
     "       hilock [--redis URL] latch down [--missing-ok] [--foreign-ok]"
     " NAME\n"
     "       hilock [--redis URL] latch count NAME\n"
     "       hilock [--redis URL] latch wait [--timeout DURATION]\n"
     "              [--missing-ok] NAME",
     "A count-down latch (Redisson's RCountDownLatch): set the count when\n"
     "the latch is open (exit 1 when it had a count already, left alone);\n"
     "take it down by one and print what is left; print the count (0:\n"
     "open); or wait until it is zero.  COUNT: 1..9007199254740991.  wait\n"
     "refuses a latch that counts zero and that no hilock client set or\n"
     "opened within a day (a typo, most likely): exit 66.  down refuses\n"
     "that too, a semaphore, and an integer no hilock client set as a\n"
     "latch (another program's counter): exit 65.\n"
     "\n"
     "options:\n"
     "  -t, --timeout DURATION  wait's bound (default: forever); exit 75\n"
     "                          when the count was still above zero then\n"
     "      --missing-ok        take a latch nobody set for open, as\n"
     "                          Redisson does (one only Java set and\n"
     "                          opened looks so); down counts down\n"
     "                          nothing then\n"
     "      --foreign-ok        down: count down an integer no hilock\n"
     "                          client set as a latch (a latch only\n"
     "                          Redisson set looks so)\n"
     "  -h, --help              print this and exit\n"
     "\n"
     "exit status: 1 set found a count already; 65 NAME holds something\n"
     "that is not a latch count; 66 wait, down: no latch NAME was set; 75 wait\n"
     "timed out; and those of hilock --help."},
    {"demo",
     "[--redis URL] demo [--cluster | --replicas]",
     "Start a private redis-server on a free loopback port (unless --redis\n"
     "or $HILOCK_REDIS names a server) and show threads contending for one\n"
     "lock, with the watchdog renewing it, then the stock demo on\n"
     "segmented locks.\n"
     "\n"
     "options:\n"
     "  --cluster   on a Redis Cluster: a private one of 3 masters unless\n"
     "              the URL names one; shows the master of each segment\n"
     "  --replicas  on a private master with 2 replicas and 3 sentinels (or\n"
     "              the group of a redis-sentinel:// URL): worker 1 holds a\n"
     "              lock while others wait, the master is killed (kill -9;\n"
     "              on a URL's group, SENTINEL FAILOVER), and each worker\n"
     "              says what it was told after the failover\n"
     "  -h, --help  print this and exit"},
    {"version", "version", "Print the library version; the same as -V."},
};

static const command_help *find(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

void cli_help_overview(FILE *to)
{
    fprintf(to,
        "usage: hilock [OPTIONS] COMMAND [ARGS]\n"
        "\n"
        "commands:\n"
        "  run      take a lock, run a command while holding it, release it\n"
        "  status   print a lock, latch or semaphore as JSON\n"
        "  ls       list the locks, latches and semaphores by pattern\n"
        "  top      watch them live: holders, waiters, time held\n"
        "  stats    what running clients count, in Prometheus's format\n"
        "  unlock   delete a lock whoever holds it (--force)\n"
        "  revoke   ask whoever holds a lock to give it up\n"
        "  latch    set, count down, read or wait for a count-down latch\n"
        "  demo     show the locks at work on a private server\n"
        "  version  print the library version\n"
        "\n"
        "options:\n"
        "  --redis URL         redis://[user:password@]host[:port][/db],\n"
        "                      rediss://... for TLS, or the sentinels of a\n"
        "                      group: redis-sentinel://host:port[,...]#master\n"
        "                      (valkey://, valkeys://, valkey-sentinel://\n"
        "                      alike)\n"
        "                      (default $HILOCK_REDIS, else\n"
        "                      redis://127.0.0.1:6379)\n"
        "  --redlock URL1,...,URLn\n"
        "                      RedLock over n independent masters (n odd, 3\n"
        "                      or more; a comma inside a URL as %%2C), for\n"
        "                      run and status; a master votes once it has\n"
        "                      been up for its quarantine (URL key\n"
        "                      quarantine, default the watchdog time)\n"
        "  --watchdog DURATION the lease the watchdog keeps renewing\n"
        "  --describe TEXT     what this process does, shown beside its\n"
        "                      holds and waits by `hilock status`\n"
        "  -v, --verbose       print the clients' events on stderr as they\n"
        "                      happen: connections down and up, a master\n"
        "                      that changed, a lease lost and why\n"
        "  -V, --version       print the library version and exit\n"
        "  -h, --help          print this and exit\n"
        "\n"
        "'hilock COMMAND --help' lists the command's options; man hilock\n"
        "has them all, with examples.\n"
        "\n"
        "exit status: 0 success, 64 usage error, 65 NAME holds something\n"
        "that is not a lock, 69 Redis unreachable, a replica where a master\n"
        "is needed, a refusal of WAIT the replicas= policy needs, or of\n"
        "the credentials, TLS or the user's ACL\n"
        "(with --redlock: too few masters for a quorum), 70 internal error;\n"
        "and those of each command.\n");
}

int cli_help(const char *command)
{
    const command_help *c = find(command);
    if (c == NULL)
        return CLI_EXIT_SOFTWARE;
    printf("usage: hilock %s\n\n%s\n", c->synopsis, c->text);
    return fflush(stdout) == 0 ? 0 : CLI_EXIT_SOFTWARE;
}

int cli_usage_error(const char *command, const char *why, const char *what)
{
    const command_help *c = command ? find(command) : NULL;
    if (why != NULL)
        fprintf(stderr, "hilock%s%s: %s%s%s\n", c ? " " : "",
                c ? c->name : "", why, what ? " " : "", what ? what : "");
    if (c != NULL)
        fprintf(stderr, "usage: hilock %s\nTry 'hilock %s --help'.\n",
                c->synopsis, c->name);
    else
        fprintf(stderr, "usage: hilock [OPTIONS] COMMAND [ARGS]\n"
                        "Try 'hilock --help'.\n");
    return CLI_EXIT_USAGE;
}
