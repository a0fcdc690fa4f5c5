/* The hilock command: shared pieces of its subcommands. */
#ifndef HILOCK_CLI_H
#define HILOCK_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <hilock/hilock.h>

/* Exit statuses: sysexits where one fits, the shell's where a command is
 * run.  A command run by `hilock run` may exit with any of these numbers
 * itself; scripts that must tell them apart should keep CMD's statuses
 * clear of 64..76. */
enum {
    CLI_EXIT_USAGE = 64,       /* bad command line */
    CLI_EXIT_DATAERR = 65,     /* the name holds something that is no lock */
    CLI_EXIT_UNAVAILABLE = 69, /* Redis unreachable, auth, ACL or TLS
                                * failed */
    CLI_EXIT_SOFTWARE = 70,    /* an unexpected failure */
    CLI_EXIT_NOT_ACQUIRED = 75,
    CLI_EXIT_LEASE_LOST = 76,
    CLI_EXIT_CANNOT_EXEC = 126, /* found but not executable */
    CLI_EXIT_NOT_FOUND = 127
};

typedef struct cli_globals {
    const char *redis_url; /* NULL: $HILOCK_REDIS, else the default */
    bool redis_given;      /* --redis or $HILOCK_REDIS was set */
    long long watchdog_ms; /* 0: the library's default */
    const char *redlock;   /* --redlock: the masters' URLs, comma-separated;
                            * NULL without it */
    bool verbose;          /* --verbose: the clients' events on stderr */
    const char *description; /* --describe: on the clients' cards */
    long long max_hold_ms;   /* run --max-hold; 0: no cap */
    /* run --lock-delay, when lock_delay_set; else the URL's, if any */
    long long lock_delay_ms;
    bool lock_delay_set;
} cli_globals;

/* A lock kind that `hilock run` can take.  New kinds (fair, read, write)
 * are one more row in the table of kinds.c, as long as their handles are
 * hilock_lock handles made by a function of this shape. */
typedef struct cli_kind {
    const char *name;
    int (*create)(hilock_lock **out, hilock_client *client, const char *name,
                  size_t name_len);
} cli_kind;

/* The kind called name, or NULL. */
const cli_kind *cli_kind_find(const char *name);
/* 0 when name can be a lock's name, else the usage error of command. */
int cli_check_name(const char *command, const char *name);
/* Connect, and make a handle on the lock name of kind (NULL: the kind
 * the server shows, see cli_detect_kind, which refuses a name holding
 * something that is no lock): 0 with both set, or the exit status after
 * printing why. */
int cli_open_lock(const cli_globals *g, const char *name,
                  const cli_kind *kind, hilock_client **client,
                  hilock_lock **lock);
/* The names of every kind, separated by '|', for messages. */
const char *cli_kind_names(void);
/* The kind of the lock at name as the server shows it (as `status` tells
 * it: a free lock of any kind looks reentrant), or NULL with *rc set to
 * an exit status when the server could not be read. */
const cli_kind *cli_detect_kind(hilock_client *client, const char *name,
                                int *rc);

/* The lock `hilock run` holds, whatever stands behind it: a lock of one
 * of the kinds on one server, or a RedLock over several masters.  The
 * outcome of an acquire and the loss of a hold come back through
 * cli_run_acquired() and cli_run_lost(), from any thread. */
typedef struct cli_run_state cli_run_state;

typedef struct cli_runlock {
    void *impl;
    /* Start taking the lock for owner, reporting a loss of the hold from
     * then on; *op names the acquire for cancel.  A HILOCK_ status. */
    int (*acquire)(void *impl, uint64_t owner, int64_t wait_ms,
                   int64_t lease_ms, bool fenced, cli_run_state *st,
                   uint64_t *op);
    void (*cancel)(void *impl, uint64_t op);
    /* Give back the calling thread's hold: HILOCK_OK, HILOCK_ELEASELOST
     * when it had been lost, or another error. */
    int (*release)(void *impl);
    /* NULL, or called once the acquire has ended, whatever its outcome:
     * prints what the caller should know about how it went. */
    void (*acquire_ended)(void *impl);
    /* NULL, or whether the server can be reached now (never blocks). */
    bool (*reachable)(void *impl);
    /* Free the lock and its connections. */
    void (*close)(void *impl);
} cli_runlock;

/* detail: why it failed (NULL: hilock_last_error()); unused on success.
 * cli_run_lost's why: the reason the hold was lost (NULL or "": none
 * known). */
void cli_run_acquired(cli_run_state *st, int status, uint64_t token,
                      const char *detail);
void cli_run_lost(cli_run_state *st, const char *why);
/* Somebody asked the holder to give the lock up, with reason (len bytes,
 * not NUL-terminated). */
void cli_run_asked(cli_run_state *st, const char *reason, size_t len);

/* Connect to the masters of --redlock and make the RedLock lock `name`.
 * Returns 0, or the exit status after printing why. */
int cli_redlock_open(const cli_globals *g, const char *name,
                     cli_runlock *out);
/* One of `permits` permits of the expirable semaphore `name` (hilock run
 * --permits).  Returns 0, or the exit status after printing why. */
int cli_permits_open(const cli_globals *g, const char *name, int permits,
                     cli_runlock *out);
/* hilock status NAME for a semaphore: prints its JSON object and sets
 * *printed when NAME holds one (or, with force, whatever it holds: an
 * empty one when nothing).  Returns 0, or the exit status after printing
 * why. */
int cli_semaphore_status(hilock_client *client, const char *name, bool force,
                         bool *printed);
/* hilock --redlock ... status NAME. */
int cli_redlock_status(const cli_globals *g, const char *name);

/* s as a JSON string; see status.c for what happens to bytes that are
 * not UTF-8. */
void cli_json_string(FILE *out, const char *s, size_t len);
/* The reentrant lock `name` on one server as the members of a JSON
 * object: "locked":..,"ttl_ms":..,"holders":[...] (no braces).  Returns 0,
 * or the exit status after printing why on stderr (then nothing went to
 * out). */
int cli_status_reentrant(hilock_client *client, const char *name, FILE *out,
                         bool *locked);

/* Build client options from the globals (URL and watchdog).  On error,
 * prints the reason and returns the exit status to use. */
int cli_make_options(const cli_globals *g, const char *url,
                     hilock_options **out);
/* Connect; on error prints the reason and returns the exit status. */
int cli_connect(const hilock_options *opts, hilock_client **out);
/* Both of the above with the globals' URL; *out is the connected client. */
int cli_open(const cli_globals *g, hilock_client **out);
/* The same, keeping the options the client was made with in *opts (the
 * caller's to free; NULL on failure). */
int cli_open_with(const cli_globals *g, hilock_options **opts,
                  hilock_client **out);

/* Parse a decimal count (of milliseconds, say): digits only, no sign, at
 * most max.  A zero is accepted only with allow_zero. */
bool cli_parse_ms(const char *s, bool allow_zero, long long max,
                  long long *out);
/* Parse a duration into milliseconds: digits, then a unit: ms, s, m or h
 * (none: milliseconds); at most max_ms in all, zero only with
 * allow_zero. */
bool cli_parse_duration(const char *s, bool allow_zero, long long max_ms,
                        long long *out);

/* The value of option `opt` at argv[*i], given as "--opt VALUE",
 * "--opt=VALUE", or with short_opt (NULL: none) as "-o VALUE" or
 * "-oVALUE"; advances *i past a separate value.  NULL if argv[*i] is
 * another option, or when the value is absent: then it sets *missing,
 * which it never clears, so that one flag serves a chain of calls. */
const char *cli_option_value(int argc, char **argv, int *i, const char *opt,
                             const char *short_opt, bool *missing);
/* Whether arg is the flag opt, or short_opt (NULL: none). */
bool cli_flag(const char *arg, const char *opt, const char *short_opt);
/* Whether arg asks for help: --help or -h. */
bool cli_wants_help(const char *arg);
/* A signal by name, with or without SIG (TERM, INT, HUP, QUIT, USR1,
 * USR2, KILL; any case), or by number (1..NSIG-1); "none" gives 0. */
bool cli_parse_signal(const char *s, int *out);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t cli_now_ms(void);

/* Redis Cluster, as the servers describe it (placement.c). */
#define CLI_CLUSTER_SLOTS 16384
#define CLI_MAX_MASTERS 64
typedef struct cli_slot_map {
    int masters;
    char addr[CLI_MAX_MASTERS][64]; /* "host:port" of each master */
    int slots[CLI_MAX_MASTERS];     /* how many slots each serves */
    unsigned char owner[CLI_CLUSTER_SLOTS]; /* master index, 0xff none */
} cli_slot_map;
/* *cluster: whether the server the client reached is a cluster node
 * (INFO cluster).  0, or the exit status after printing why. */
int cli_is_cluster(hilock_client *client, bool *cluster);
/* Read the masters and their slots (CLUSTER SLOTS).  0, or the exit
 * status after printing why. */
int cli_slot_map_read(hilock_client *client, cli_slot_map *map);
/* The index in map of the master of key's slot, with the slot in *slot
 * (CLUSTER KEYSLOT); -1 when unknown. */
int cli_key_master(hilock_client *client, const cli_slot_map *map,
                   const char *key, size_t len, int *slot);

/* Replication as the master the client reached tells it
 * (replication.c). */
#define CLI_MAX_REPLICAS 16
typedef struct cli_replication {
    char master[80]; /* "host:port" of the client's connection; "" when
                      * CLIENT INFO could not be read */
    bool info_read;  /* INFO replication answered: the fields below */
    char role[16];   /* "master", or "slave" for a URL naming a replica */
    int replicas;
    char replica[CLI_MAX_REPLICAS][80]; /* "host:port" */
    char state[CLI_MAX_REPLICAS][16];   /* "online", "wait_bgsave", ... */
} cli_replication;
/* Fills r from CLIENT INFO and INFO replication; what cannot be read
 * (a user's ACL may refuse either) is left empty, never an error. */
void cli_replication_read(hilock_client *client, cli_replication *r);
/* r as a JSON object: {"master","replicas":[{"addr","state"}],
 * "sentinel_master","ack","ack_timeout_ms"}, with "role" when the node is
 * no master. */
void cli_replication_json(FILE *out, const cli_replication *r,
                          const hilock_options *opts);
/* "none", "one", "majority" or "all". */
const char *cli_ack_name(int ack);

/* exits.c: the exit status for a library failure rc with its detail
 * (NULL: none); and that with the failure printed as "hilock: WHAT:
 * error (detail)", plus a hint where one helps (detail NULL:
 * hilock_last_error()). */
int cli_exit_status(int rc, const char *detail);
int cli_failed(const char *what, int rc, const char *detail);
/* rc, after stdout is flushed; when it cannot be (a full disk, a closed
 * pipe), says so, and turns a success into CLI_EXIT_SOFTWARE: output a
 * command could not write is no success. */
int cli_flush_stdout(int rc);

/* help.c: the overview (hilock --help); a command's help on stdout, 0
 * or an exit status; and a usage error: why, what (each may be NULL),
 * the command's synopsis on stderr, returning CLI_EXIT_USAGE. */
void cli_help_overview(FILE *to);
int cli_help(const char *command);
int cli_usage_error(const char *command, const char *why, const char *what);

int cli_demo(const cli_globals *g, int argc, char **argv);
/* demo --replicas (failover.c): on a private master with replicas and
 * sentinels, or the Sentinel group of the URL. */
int cli_failover_demo(const cli_globals *g);
/* The stock part of the demo, on a connected client; keys start with
 * base.  With a map (a cluster), it shows the master of each segment and
 * the deductions each master served.  Returns 0 or an exit status. */
int cli_stock_demo(hilock_client *client, const char *base, int64_t t0,
                   const cli_slot_map *map);
int cli_run(const cli_globals *g, int argc, char **argv);
/* hilock ls (ls.c). */
int cli_ls(const cli_globals *g, int argc, char **argv);
/* hilock stats [OPTIONS] (stats.c): 0 or an exit status. */
int cli_stats(const cli_globals *g, int argc, char **argv);
/* hilock top [OPTIONS] [PATTERN]: 0 or an exit status. */
int cli_top(const cli_globals *g, int argc, char **argv);
/* The client id an owner starts with (a UUID, "8-4-4-4-12" hex digits,
 * followed by nothing or ':'), into id; false when it starts with none. */
bool cli_owner_client_id(const hilock_lock_owner *o,
                         char id[HILOCK_CLIENT_ID_LEN + 1]);
/* The status of the lock at name, of the kind the server shows (as
 * `status` reads it without --kind): 0 with *out set, or an exit status
 * (nothing printed) when name holds no lock of any kind. */
int cli_read_status(hilock_client *client, const char *name,
                    hilock_lock_status **out);
int cli_status(const cli_globals *g, int argc, char **argv);
int cli_unlock(const cli_globals *g, int argc, char **argv);
/* hilock revoke [OPTIONS] NAME (revoke.c): 0 or an exit status. */
int cli_revoke(const cli_globals *g, int argc, char **argv);
/* ---- the names on a server or cluster (scan.c) ----------------------- */

/* At most this many names are listed; more are counted. */
#define CLI_NAMES_MAX 10000

typedef struct cli_name {
    char *name;
    size_t len;
    bool counter; /* a string: a latch's, a semaphore's or any count */
} cli_name;

typedef struct cli_names {
    cli_name *items; /* sorted by name */
    size_t n;
    size_t more; /* names past CLI_NAMES_MAX */
} cli_names;

/* The names of locks and counts matching the SCAN pattern on the server
 * client reaches, or on every master of its cluster (each through a
 * client made from opts).  0 or an exit status (after saying why); free
 * *out with cli_names_free either way. */
int cli_scan_names(hilock_client *client, const hilock_options *opts,
                   const char *pattern, cli_names *out);
/* The keys of every client's card (hilock_client:{<id>}), as above. */
int cli_scan_cards(hilock_client *client, const hilock_options *opts,
                   cli_names *out);
void cli_names_free(cli_names *l);

/* What a name holds now: a lock's status (st), or a count (st NULL) as
 * text with its kind ("latch", "semaphore" or "unknown").  false for a
 * name that holds neither (gone meanwhile, or another program's data);
 * else release with cli_name_info_done. */
typedef struct cli_name_info {
    const char *kind;
    hilock_lock_status *st;
    char count[32];
    /* How long the first holder has held it, from its client's list of
     * holds (hilock_client_hold_since); -1 when free or unknown. */
    long long held_ms;
} cli_name_info;
/* A span of ms for people: "1h02m", "3m07s", "12.4s", "850ms", "-" for
 * a negative one. */
void cli_format_span(long long ms, char *out, size_t cap);
/* How long owner has held name, from its client's list of holds, on the
 * server's clock; -1 when unknown (a holder of another library, a hold
 * too young to be listed, a client gone). */
long long cli_held_ms(hilock_client *c, const char *name, size_t len,
                      const hilock_lock_owner *owner);
bool cli_name_info_read(hilock_client *c, const cli_name *e,
                        cli_name_info *out);
void cli_name_info_done(cli_name_info *in);

/* hilock latch ...; and the `status` of a count: {"name","kind":"latch",
 * "count","open"} when latch, else {"name","kind":"unknown","count"} (an
 * integer no client of ours marked); 0 or the exit status after printing
 * why. */
int cli_latch(const cli_globals *g, int argc, char **argv);
int cli_latch_status(hilock_client *client, const char *name, bool latch);
/* hilock's word on what name is (hilock_client_name_kind), or NULL: none,
 * or none that could be read (the reads that follow say why). */
const char *cli_marked_kind(hilock_client *client, const char *name);
/* Whether name holds a string (no lock does; a latch does). */
bool cli_holds_string(hilock_client *client, const char *name);

#endif
