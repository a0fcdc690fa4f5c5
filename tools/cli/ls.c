/* hilock ls [PATTERN]: the locks and counters (latches and semaphores)
 * on a server, or on every master of a cluster (SCAN on each), one line
 * each: kind, whether held, holders, waiters and the lease left (a count:
 * "latch" or "semaphore" as the hilock client that set it said, else
 * "unknown"); --json
 * prints them as an array of objects.  The keys the layouts keep beside a
 * lock (redisson_* and hilock_* keys, a semaphore's permits, a read-write
 * hold's timeouts) are parts of it, not locks, and are left out. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hilock/hilock.h"

/* At most this many names are listed; more are counted. */
#define LS_MAX 10000

typedef struct ls_entry {
    char *name;
    size_t len;
    bool counter; /* a string: a latch's or a semaphore's count */
} ls_entry;

typedef struct ls_list {
    ls_entry *items;
    size_t n;
    size_t more; /* names past LS_MAX */
} ls_list;

static int ls_usage(const char *why, const char *what)
{
    return cli_usage_error("ls", why, what);
}

static bool starts_with(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && memcmp(s, prefix, n) == 0;
}

static bool contains(const char *s, size_t len, const char *part)
{
    size_t n = strlen(part);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(s + i, part, n) == 0)
            return true;
    return false;
}

/* A key that is part of a lock rather than a lock, by its name alone. */
static bool is_part(const char *key, size_t len)
{
    return starts_with(key, len, "redisson_") ||
           starts_with(key, len, "hilock_") ||
           contains(key, len, ":rwlock_timeout:");
}

static int add(ls_list *l, const char *key, size_t len, bool counter)
{
    if (l->n == LS_MAX) {
        l->more++;
        return 0;
    }
    if (l->n % 256 == 0) {
        ls_entry *grown = realloc(l->items, (l->n + 256) * sizeof *grown);
        if (grown == NULL)
            return -1;
        l->items = grown;
    }
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, key, len);
    copy[len] = '\0';
    l->items[l->n++] = (ls_entry){copy, len, counter};
    return 0;
}

/* The type of key: "hash", "string", ... into out; false on failure. */
static bool type_of(hilock_client *c, const char *key, size_t len, char *out,
                    size_t cap)
{
    const char *argv[] = {"TYPE", key};
    size_t lens[] = {4, len};
    hilock_reply *r = NULL;
    bool ok = hilock_client_command(c, 2, argv, lens, &r) == HILOCK_OK &&
              r->type == HILOCK_REPLY_STATUS && r->len < cap;
    if (ok)
        snprintf(out, cap, "%.*s", (int)r->len, r->str);
    hilock_reply_free(r);
    return ok;
}

/* SCAN one server (scanner: a client whose first connection is that
 * server) for names matching pattern; types are asked through typer,
 * which reaches every key.  0 or an exit status. */
static int scan_server(hilock_client *scanner, hilock_client *typer,
                       const char *pattern, ls_list *out)
{
    char cursor[32] = "0";
    do {
        const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT",
                              "1000"};
        hilock_reply *r = NULL;
        int rc = hilock_client_command(scanner, 6, argv, NULL, &r);
        if (rc != HILOCK_OK) {
            hilock_reply_free(r);
            return cli_failed("SCAN", rc, NULL);
        }
        if (r->type != HILOCK_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != HILOCK_REPLY_STRING ||
            r->element[0]->len >= sizeof cursor ||
            r->element[1]->type != HILOCK_REPLY_ARRAY) {
            hilock_reply_free(r);
            fprintf(stderr, "hilock: ls: an odd SCAN reply\n");
            return CLI_EXIT_SOFTWARE;
        }
        snprintf(cursor, sizeof cursor, "%.*s", (int)r->element[0]->len,
                 r->element[0]->str);
        const hilock_reply *keys = r->element[1];
        for (size_t i = 0; i < keys->elements; i++) {
            const hilock_reply *k = keys->element[i];
            char type[16];
            if (k->type != HILOCK_REPLY_STRING || is_part(k->str, k->len) ||
                !type_of(typer, k->str, k->len, type, sizeof type))
                continue;
            /* A lock is a hash, a latch or semaphore a string; a permit
             * zset, a line or anything else is not listed. */
            bool counter = strcmp(type, "string") == 0;
            if ((counter || strcmp(type, "hash") == 0) &&
                add(out, k->str, k->len, counter) != 0) {
                hilock_reply_free(r);
                fprintf(stderr, "hilock: ls: out of memory\n");
                return CLI_EXIT_SOFTWARE;
            }
        }
        hilock_reply_free(r);
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

/* Every master of the cluster client reaches, each through a client of
 * its own made from opts. */
static int scan_cluster(hilock_client *client, const hilock_options *opts,
                        const char *pattern, ls_list *out)
{
    cli_slot_map map;
    int rc = cli_slot_map_read(client, &map);
    for (int m = 0; rc == 0 && m < map.masters; m++) {
        char host[64];
        snprintf(host, sizeof host, "%s", map.addr[m]);
        char *colon = strrchr(host, ':');
        if (colon == NULL)
            continue;
        *colon = '\0';
        hilock_options *o;
        if (hilock_options_copy(&o, opts) != HILOCK_OK)
            return CLI_EXIT_SOFTWARE;
        hilock_client *node = NULL;
        if (hilock_options_set_host(o, host) != HILOCK_OK ||
            hilock_options_set_port(o, atoi(colon + 1)) != HILOCK_OK) {
            hilock_options_free(o);
            fprintf(stderr, "hilock: ls: bad master address %s\n",
                    map.addr[m]);
            return CLI_EXIT_SOFTWARE;
        }
        rc = cli_connect(o, &node);
        hilock_options_free(o);
        if (rc == 0)
            rc = scan_server(node, client, pattern, out);
        if (node != NULL)
            hilock_client_destroy(node);
    }
    return rc;
}

static int by_name(const void *a, const void *b)
{
    const ls_entry *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->name, y->name, n);
    return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

/* A counter's value, for a latch or a semaphore: "" when not a number. */
static void counter_of(hilock_client *c, const ls_entry *e, char *out,
                       size_t cap)
{
    const char *argv[] = {"GET", e->name};
    size_t lens[] = {3, e->len};
    hilock_reply *r = NULL;
    out[0] = '\0';
    if (hilock_client_command(c, 2, argv, lens, &r) == HILOCK_OK &&
        r->type == HILOCK_REPLY_STRING && r->len < cap &&
        strspn(r->str, "-0123456789") == r->len)
        snprintf(out, cap, "%.*s", (int)r->len, r->str);
    hilock_reply_free(r);
}

/* What a count is: "latch" or "semaphore" as the hilock client that set
 * it said (hilock_client_name_kind), else "unknown": a latch or a
 * semaphore only Redisson set, and any other integer, look alike. */
static const char *counter_kind(hilock_client *c, const ls_entry *e)
{
    const char *kind = NULL;
    if (hilock_client_name_kind(c, e->name, e->len, &kind) != HILOCK_OK ||
        kind == NULL ||
        (strcmp(kind, "latch") != 0 && strcmp(kind, "semaphore") != 0))
        return "unknown";
    return kind;
}

/* One line, or one object after *printed others. */
static void print_one(hilock_client *c, const ls_entry *e, bool json,
                      size_t *printed)
{
    hilock_lock_status *st = NULL;
    char count[32] = "";
    bool counter = e->counter;
    if (counter)
        counter_of(c, e, count, sizeof count);
    /* A string that is no count, or a hash in no lock's layout, is no
     * lock of ours or Redisson's. */
    if (counter ? count[0] == '\0' : cli_read_status(c, e->name, &st) != 0) {
        hilock_lock_status_free(st);
        return;
    }
    bool first = (*printed)++ == 0;
    const char *kind = counter ? counter_kind(c, e) : st->kind;
    if (json) {
        fputs(first ? "\n" : ",\n", stdout);
        fputs("{\"name\":", stdout);
        cli_json_string(stdout, e->name, e->len);
        if (counter)
            printf(",\"kind\":\"%s\",\"count\":%s}", kind, count);
        else
            printf(",\"kind\":\"%s\",\"locked\":%s,\"holders\":%zu,"
                   "\"waiters\":%zu,\"ttl_ms\":%lld}",
                   kind, st->locked ? "true" : "false", st->holders_len,
                   st->waiters_len, (long long)st->ttl_ms);
    } else if (counter) {
        printf("%-32s %-10s %-6s %7s %7s %9s  count %s\n", e->name, kind,
               "-", "-", "-", "-", count);
    } else {
        printf("%-32s %-10s %-6s %7zu %7zu %9lld\n", e->name, kind,
               st->locked ? "yes" : "no", st->holders_len, st->waiters_len,
               (long long)st->ttl_ms);
    }
    hilock_lock_status_free(st);
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
    bool cluster = false;
    ls_list list = {0};
    rc = cli_is_cluster(client, &cluster);
    if (rc == 0)
        rc = cluster ? scan_cluster(client, opts, pattern, &list)
                     : scan_server(client, client, pattern, &list);
    if (rc == 0) {
        if (list.n > 1) /* qsort takes no NULL, even for nothing */
            qsort(list.items, list.n, sizeof *list.items, by_name);
        if (json)
            fputs("[", stdout);
        else
            printf("%-32s %-10s %-6s %7s %7s %9s\n", "NAME", "KIND", "HELD",
                   "HOLDERS", "WAITERS", "TTL_MS");
        size_t printed = 0;
        for (size_t i = 0; i < list.n; i++)
            print_one(client, &list.items[i], json, &printed);
        if (json)
            fputs(printed > 0 ? "\n]\n" : "]\n", stdout);
        if (list.more > 0)
            fprintf(stderr, "hilock: ls: %zu more names not listed (at "
                            "most %d; narrow the PATTERN)\n",
                    list.more, LS_MAX);
        if (fflush(stdout) != 0) {
            perror("hilock: stdout");
            rc = CLI_EXIT_SOFTWARE;
        }
    }
    for (size_t i = 0; i < list.n; i++)
        free(list.items[i].name);
    free(list.items);
    hilock_client_destroy(client);
    hilock_options_free(opts);
    return rc;
}
