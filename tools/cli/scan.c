/* The names of the locks, latches and semaphores on a server, or on
 * every master of a cluster (SCAN on each), for `hilock ls` and `hilock
 * top`.  The keys the layouts keep beside a lock (redisson_* and hilock_*
 * keys, a semaphore's permits, a read-write hold's timeouts) are parts of
 * it, not locks, and are left out; so is anything that is neither a hash
 * (a lock) nor a string (a count).  A lock freed without a release whose
 * lock delay still runs has no hash, only its delay key, and is listed by
 * that key: acquires of ours are refused on it. */
#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

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

static int add(cli_names *l, const char *key, size_t len, bool counter)
{
    if (l->n == CLI_NAMES_MAX) {
        l->more++;
        return 0;
    }
    if (l->n % 256 == 0) {
        cli_name *grown = realloc(l->items, (l->n + 256) * sizeof *grown);
        if (grown == NULL)
            return -1;
        l->items = grown;
    }
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, key, len);
    copy[len] = '\0';
    l->items[l->n++] = (cli_name){copy, len, counter};
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

/* What a scan looks for: the locks and counts, the free names in a lock
 * delay, or the clients' cards. */
typedef enum scan_for { SCAN_NAMES, SCAN_DELAYS, SCAN_CARDS } scan_for;

#define DELAY_PREFIX "hilock_lock_delay:"

/* The lock name of the delay key key ("hilock_lock_delay:{NAME}", or
 * "hilock_lock_delay:NAME" when NAME holds a hash tag), into *name and
 * *len; false for another key. */
static bool delay_name(const char *key, size_t len, const char **name,
                       size_t *name_len)
{
    size_t n = sizeof DELAY_PREFIX - 1;
    if (!starts_with(key, len, DELAY_PREFIX) || len == n)
        return false;
    const char *rest = key + n;
    size_t rest_len = len - n;
    if (rest_len > 2 && rest[0] == '{' && rest[rest_len - 1] == '}' &&
        memchr(rest + 1, '{', rest_len - 2) == NULL) {
        rest++;
        rest_len -= 2;
    }
    *name = rest;
    *name_len = rest_len;
    return true;
}

/* A free name in its lock delay: its delay key's name matches pattern,
 * and nothing is at the name (a lock there is listed by itself). */
static bool delayed_free_name(hilock_client *typer, const char *key,
                              size_t len, const char *pattern,
                              const char **name, size_t *name_len)
{
    char copy[1024], type[16];
    if (!delay_name(key, len, name, name_len) || *name_len >= sizeof copy)
        return false;
    memcpy(copy, *name, *name_len);
    copy[*name_len] = '\0';
    return fnmatch(pattern, copy, 0) == 0 &&
           type_of(typer, *name, *name_len, type, sizeof type) &&
           strcmp(type, "none") == 0;
}

#define CARD_PREFIX "hilock_client:{"

/* SCAN one server (scanner: a client whose first connection is that
 * server) for names matching pattern; types are asked through typer,
 * which reaches every key.  0 or an exit status. */
static int scan_server(hilock_client *scanner, hilock_client *typer,
                       const char *pattern, scan_for what, cli_names *out)
{
    char cursor[32] = "0";
    const char *match = what == SCAN_DELAYS ? DELAY_PREFIX "*" : pattern;
    do {
        const char *argv[] = {"SCAN", cursor, "MATCH", match, "COUNT",
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
            fprintf(stderr, "hilock: an odd SCAN reply\n");
            return CLI_EXIT_SOFTWARE;
        }
        snprintf(cursor, sizeof cursor, "%.*s", (int)r->element[0]->len,
                 r->element[0]->str);
        const hilock_reply *keys = r->element[1];
        for (size_t i = 0; i < keys->elements; i++) {
            const hilock_reply *k = keys->element[i];
            char type[16];
            if (what == SCAN_DELAYS) {
                const char *name;
                size_t name_len;
                if (k->type == HILOCK_REPLY_STRING &&
                    delayed_free_name(typer, k->str, k->len, pattern, &name,
                                      &name_len) &&
                    add(out, name, name_len, false) != 0) {
                    hilock_reply_free(r);
                    fprintf(stderr, "hilock: out of memory\n");
                    return CLI_EXIT_SOFTWARE;
                }
                continue;
            }
            if (what == SCAN_CARDS) {
                /* A card is a hash; a reader of one that is not says so. */
                if (k->type == HILOCK_REPLY_STRING &&
                    starts_with(k->str, k->len, CARD_PREFIX) &&
                    add(out, k->str, k->len, false) != 0) {
                    hilock_reply_free(r);
                    fprintf(stderr, "hilock: out of memory\n");
                    return CLI_EXIT_SOFTWARE;
                }
                continue;
            }
            if (k->type != HILOCK_REPLY_STRING || is_part(k->str, k->len) ||
                !type_of(typer, k->str, k->len, type, sizeof type))
                continue;
            /* A lock is a hash, a latch or semaphore a string; a permit
             * zset, a line or anything else is not listed. */
            bool counter = strcmp(type, "string") == 0;
            if ((counter || strcmp(type, "hash") == 0) &&
                add(out, k->str, k->len, counter) != 0) {
                hilock_reply_free(r);
                fprintf(stderr, "hilock: out of memory\n");
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
                        const char *pattern, scan_for what, cli_names *out)
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
            fprintf(stderr, "hilock: bad master address %s\n",
                    map.addr[m]);
            return CLI_EXIT_SOFTWARE;
        }
        rc = cli_connect(o, &node);
        hilock_options_free(o);
        if (rc == 0)
            rc = scan_server(node, client, pattern, what, out);
        if (node != NULL)
            hilock_client_destroy(node);
    }
    return rc;
}

static int by_name(const void *a, const void *b)
{
    const cli_name *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->name, y->name, n);
    return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

static int scan(hilock_client *client, const hilock_options *opts,
                const char *pattern, scan_for what, cli_names *out)
{
    *out = (cli_names){0};
    bool cluster = false;
    int rc = cli_is_cluster(client, &cluster);
    /* The names, then the free ones in a lock delay. */
    for (int pass = 0; rc == 0 && pass < (what == SCAN_NAMES ? 2 : 1);
         pass++) {
        scan_for w = pass == 0 ? what : SCAN_DELAYS;
        rc = cluster ? scan_cluster(client, opts, pattern, w, out)
                     : scan_server(client, client, pattern, w, out);
    }
    if (rc == 0 && out->n > 1) /* qsort takes no NULL, even for nothing */
        qsort(out->items, out->n, sizeof *out->items, by_name);
    return rc;
}

int cli_scan_names(hilock_client *client, const hilock_options *opts,
                   const char *pattern, cli_names *out)
{
    return scan(client, opts, pattern, SCAN_NAMES, out);
}

int cli_scan_cards(hilock_client *client, const hilock_options *opts,
                   cli_names *out)
{
    return scan(client, opts, CARD_PREFIX "*", SCAN_CARDS, out);
}

void cli_names_free(cli_names *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i].name);
    free(l->items);
    *l = (cli_names){0};
}

/* A counter's value, for a latch or a semaphore: "" when not a number. */
static void count_of(hilock_client *c, const cli_name *e, char *out,
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
static const char *count_kind(hilock_client *c, const cli_name *e)
{
    const char *kind = NULL;
    if (hilock_client_name_kind_n(c, e->name, e->len, &kind) != HILOCK_OK ||
        kind == NULL ||
        (strcmp(kind, "latch") != 0 && strcmp(kind, "semaphore") != 0))
        return "unknown";
    return kind;
}

void cli_format_span(long long ms, char *out, size_t cap)
{
    if (ms < 0)
        snprintf(out, cap, "-");
    else if (ms < 1000)
        snprintf(out, cap, "%lldms", ms);
    else if (ms < 60000)
        snprintf(out, cap, "%lld.%llds", ms / 1000, ms % 1000 / 100);
    else if (ms < 3600000)
        snprintf(out, cap, "%lldm%02llds", ms / 60000, ms % 60000 / 1000);
    else
        snprintf(out, cap, "%lldh%02lldm", ms / 3600000,
                 ms % 3600000 / 60000);
}

long long cli_held_ms(hilock_client *c, const char *name, size_t len,
                      const hilock_lock_owner *owner)
{
    int64_t held = -1;
    if (hilock_client_hold_since(c, name, len, owner->owner,
                                 owner->owner_len, NULL, &held) != HILOCK_OK)
        return -1;
    return held;
}

bool cli_name_info_read(hilock_client *c, const cli_name *e,
                        cli_name_info *out)
{
    *out = (cli_name_info){.held_ms = -1};
    if (e->counter) {
        count_of(c, e, out->count, sizeof out->count);
        /* A string that is no count is no lock of ours or Redisson's. */
        if (out->count[0] == '\0')
            return false;
        out->kind = count_kind(c, e);
        return true;
    }
    /* Nor is a hash in no lock's layout. */
    if (cli_read_status(c, e->name, &out->st) != 0) {
        hilock_lock_status_free(out->st);
        out->st = NULL;
        return false;
    }
    out->kind = out->st->kind;
    if (out->st->holders_len > 0)
        out->held_ms = cli_held_ms(c, e->name, e->len, &out->st->holders[0]);
    return true;
}

void cli_name_info_done(cli_name_info *in)
{
    hilock_lock_status_free(in->st);
    in->st = NULL;
}
