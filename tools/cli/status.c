/* hilock status: what Redis holds for one lock, as one JSON object.
 *
 * The library reads it (hilock_lock_status_get), each kind in one script,
 * so the object is a snapshot.  The data tells the kinds apart: a status
 * read as a read-write lock, then as a fair lock, says whether the server
 * holds what only that kind writes (kind_seen: a read-write lock's mode
 * or waiting writers, a fair lock's line or places, the latter only while
 * someone waits).  Where it cannot (a fair lock nobody waits for looks
 * reentrant; a latch's count, a semaphore's and any integer look alike),
 * hilock's word on the name does (hilock_client_name_kind), and a count
 * without it is "unknown".  Anything else is taken for a reentrant lock,
 * which a free lock of any kind looks like.  --kind says the kind
 * instead, and is refused (65) where the data or the word names another.
 *
 * Beyond the fields every kind has, a fair lock shows its queue with the
 * time each place has left on the server's clock, and a read-write lock
 * its mode, readers, writer and the writers waiting (a list of hilock's
 * own, as Redisson keeps none).
 *
 * JSON strings carry bytes: names and owner ids are binary in Redis, JSON
 * strings are Unicode.  Valid UTF-8 passes through; '"', '\' and control
 * characters (below 0x20, and 0x7f) are escaped, the latter as \u00XX; a
 * byte that is not part of valid UTF-8 becomes \u00XX of its value.  That
 * last rule is lossy, as \u00e9 then stands for the byte 0xe9 and for the
 * character U+00E9 alike, but it keeps the output valid JSON and every
 * ASCII or UTF-8 name exact. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* The length of the valid UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *s, size_t left)
{
    unsigned char b = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf; /* bounds of the second byte */
    if (b >= 0xc2 && b <= 0xdf) {
        n = 2;
    } else if (b >= 0xe0 && b <= 0xef) {
        n = 3;
        if (b == 0xe0)
            lo = 0xa0;
        else if (b == 0xed)
            hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
        n = 4;
        if (b == 0xf0)
            lo = 0x90;
        else if (b == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (left < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return n;
}

/* The inside of a JSON string: str's bytes, escaped. */
static void json_chars(FILE *out, const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < len;) {
        unsigned char b = s[i];
        if (b == '"' || b == '\\') {
            putc('\\', out);
            putc(b, out);
            i++;
        } else if (b < 0x20 || b == 0x7f) {
            fprintf(out, "\\u%04x", b);
            i++;
        } else if (b < 0x80) {
            putc(b, out);
            i++;
        } else {
            size_t n = utf8_len(s + i, len - i);
            if (n == 0) {
                fprintf(out, "\\u%04x", b);
                i++;
            } else {
                fwrite(s + i, 1, n, out);
                i += n;
            }
        }
    }
}

static void json_string(FILE *out, const char *str, size_t len)
{
    putc('"', out);
    json_chars(out, str, len);
    putc('"', out);
}

/* What the library says went wrong, and the exit status for it. */
static int status_failed(const char *name, int rc)
{
    char what[300];
    snprintf(what, sizeof what, "status of %s failed", name);
    return cli_failed(what, rc, NULL);
}

/* The status of name read as the lock kind called kind; 0 or an exit
 * status (after saying why, when say). */
static int read_as(hilock_client *client, const char *kind, const char *name,
                   hilock_lock_status **out, bool say)
{
    *out = NULL;
    const cli_kind *k = cli_kind_find(kind);
    hilock_lock *lock;
    int rc = k->create(&lock, client, name, strlen(name));
    if (rc != HILOCK_OK)
        return say ? status_failed(name, rc) : cli_exit_status(rc, NULL);
    rc = hilock_lock_status_get(lock, out);
    /* Said before the destroy, which clears the thread's detail. */
    int exit_rc = rc == HILOCK_OK ? 0
                  : say           ? status_failed(name, rc)
                                  : cli_exit_status(rc, NULL);
    hilock_lock_destroy(lock);
    return exit_rc;
}

/* The kinds --kind takes are those `hilock run` uses, read and write
 * included: both sides of a read-write lock share one name, so either
 * shows all of it. */
static bool kind_known(const char *s)
{
    return strcmp(s, "reentrant") == 0 || strcmp(s, "fair") == 0 ||
           strcmp(s, "read") == 0 || strcmp(s, "write") == 0 ||
           strcmp(s, "latch") == 0 || strcmp(s, "semaphore") == 0;
}

const char *cli_marked_kind(hilock_client *client, const char *name)
{
    const char *kind = NULL;
    if (hilock_client_name_kind_n(client, name, strlen(name), &kind) !=
        HILOCK_OK)
        return NULL;
    return kind;
}

/* The status of name: as the given kind, or as the kind the server's data
 * shows, or else hilock's word on it (see the top of this file). */
static int read_status(hilock_client *client, const char *name,
                       const char *kind, hilock_lock_status **out, bool say)
{
    if (kind != NULL)
        return read_as(client, kind, name, out, say);
    static const char *const evident[] = {"read", "fair"};
    for (size_t i = 0; i < sizeof evident / sizeof evident[0]; i++) {
        int rc = read_as(client, evident[i], name, out, say);
        if (rc != 0 || (*out)->kind_seen)
            return rc;
        hilock_lock_status_free(*out);
    }
    const char *marked = cli_marked_kind(client, name);
    if (marked != NULL && strcmp(marked, "fair") == 0)
        return read_as(client, "fair", name, out, say);
    if (marked != NULL && strcmp(marked, "read-write") == 0)
        return read_as(client, "read", name, out, say);
    return read_as(client, "reentrant", name, out, say);
}

bool cli_owner_client_id(const hilock_lock_owner *o,
                         char id[HILOCK_CLIENT_ID_LEN + 1])
{
    if (o->owner_len < HILOCK_CLIENT_ID_LEN ||
        (o->owner_len > HILOCK_CLIENT_ID_LEN &&
         o->owner[HILOCK_CLIENT_ID_LEN] != ':'))
        return false;
    for (int i = 0; i < HILOCK_CLIENT_ID_LEN; i++) {
        char ch = o->owner[i];
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? ch != '-' : !isxdigit((unsigned char)ch))
            return false;
    }
    memcpy(id, o->owner, HILOCK_CLIENT_ID_LEN);
    id[HILOCK_CLIENT_ID_LEN] = '\0';
    return true;
}

/* ,"client":{...}: the card of the client behind an owner or a client
 * id, or null for one without a card (another library's, such as
 * Redisson's, or one gone).  Nothing for an owner that names no client,
 * or when client is NULL. */
static void print_card(FILE *out, hilock_client *client,
                       const hilock_lock_owner *o)
{
    char id[HILOCK_CLIENT_ID_LEN + 1];
    if (client == NULL || !cli_owner_client_id(o, id))
        return;
    hilock_client_card *card = NULL;
    (void)hilock_client_card_get(client, id, &card);
    fputs(",\"client\":", out);
    if (card == NULL) {
        fputs("null", out);
        return;
    }
    fputs("{\"host\":", out);
    json_string(out, card->host, strlen(card->host));
    fprintf(out, ",\"pid\":%lld,\"program\":", (long long)card->pid);
    json_string(out, card->program, strlen(card->program));
    fputs(",\"description\":", out);
    json_string(out, card->description, strlen(card->description));
    fputs(",\"library\":", out);
    json_string(out, card->library, strlen(card->library));
    putc('}', out);
    hilock_client_card_free(card);
}

static void print_owner(FILE *out, const hilock_lock_owner *o,
                        const char *suffix)
{
    fputs("{\"owner\":\"", out);
    json_chars(out, o->owner, o->owner_len);
    json_chars(out, suffix, strlen(suffix));
    putc('"', out);
}

/* {"owner":...,"count":...,"held_ms":...}; a writer's owner as its
 * field in the hash, with the layout's suffix, when with_suffix.
 * held_ms is null when the holder's client lists no start for the hold
 * (cli_held_ms). */
static void print_owner_count(FILE *out, hilock_client *client,
                              const char *name, const hilock_lock_owner *o,
                              bool with_suffix)
{
    print_owner(out, o, with_suffix && o->writer ? ":write" : "");
    fprintf(out, ",\"count\":%lld", (long long)o->count);
    long long held = client ? cli_held_ms(client, name, strlen(name), o) : -1;
    if (held >= 0)
        fprintf(out, ",\"held_ms\":%lld", held);
    else
        fputs(",\"held_ms\":null", out);
    print_card(out, client, o);
    putc('}', out);
}

static void print_owners(FILE *out, hilock_client *client,
                         const hilock_lock_owner *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            putc(',', out);
        print_owner(out, &list[i], "");
        print_card(out, client, &list[i]);
        putc('}', out);
    }
}

static void print_holders(FILE *out, hilock_client *client,
                          const char *name, const hilock_lock_status *st)
{
    for (size_t i = 0; i < st->holders_len; i++) {
        if (i > 0)
            putc(',', out);
        print_owner_count(out, client, name, &st->holders[i], true);
    }
}

/* "queue": every waiter in line order, with how long its place lasts
 * unless renewed; null for a waiter without a place, and a negative
 * value for a place run out that the next attempt will drop. */
static void print_queue(FILE *out, hilock_client *client,
                        const hilock_lock_status *st)
{
    fputs(",\"queue\":[", out);
    for (size_t i = 0; i < st->waiters_len; i++) {
        const hilock_lock_owner *w = &st->waiters[i];
        if (i > 0)
            putc(',', out);
        print_owner(out, w, "");
        if (w->expires)
            fprintf(out, ",\"expires_in_ms\":%lld",
                    (long long)w->expires_in_ms);
        else
            fputs(",\"expires_in_ms\":null", out);
        print_card(out, client, w);
        putc('}', out);
    }
    putc(']', out);
}

static void print_read_write(FILE *out, hilock_client *client,
                             const char *name, const hilock_lock_status *st)
{
    fputs(",\"mode\":", out);
    if (st->mode != NULL)
        json_string(out, st->mode, strlen(st->mode));
    else
        fputs("null", out);
    fputs(",\"readers\":[", out);
    for (size_t i = 0; i < st->readers_len; i++) {
        if (i > 0)
            putc(',', out);
        print_owner_count(out, client, name, &st->readers[i], false);
    }
    fputs("],\"writer\":", out);
    if (st->writer != NULL)
        print_owner_count(out, client, name, st->writer, false);
    else
        fputs("null", out);
    fputs(",\"waiting_writers\":[", out);
    print_owners(out, client, st->waiters, st->waiters_len);
    putc(']', out);
}

static void print_status(hilock_client *client, const char *name,
                         const hilock_lock_status *st)
{
    FILE *out = stdout;
    fputs("{\"name\":", out);
    json_string(out, name, strlen(name));
    fprintf(out, ",\"kind\":\"%s\",\"locked\":%s,\"ttl_ms\":%lld",
            st->kind, st->locked ? "true" : "false", (long long)st->ttl_ms);
    fputs(",\"holders\":[", out);
    print_holders(out, client, name, st);
    /* "waiters" lists whoever the server keeps a line of, whatever the
     * kind, for scripts that need not know the kinds apart. */
    fputs("],\"waiters\":[", out);
    print_owners(out, client, st->waiters, st->waiters_len);
    putc(']', out);
    if (st->subscribers >= 0)
        fprintf(out, ",\"subscribers\":%lld", (long long)st->subscribers);
    /* Only while a delay key is there, so that a free lock reads "free"
     * at a glance: the time the lock stays closed for a holder that lost
     * it without a release (-1: a key without an expiry). */
    if (st->delay_ms != 0)
        fprintf(out, ",\"delay_ms\":%lld", (long long)st->delay_ms);
    if (strcmp(st->kind, "fair") == 0)
        print_queue(out, client, st);
    else if (strcmp(st->kind, "read-write") == 0)
        print_read_write(out, client, name, st);
}

/* ,"replication":{...} (see cli_replication_json) where replication is
 * part of the picture: through Sentinel, with an acknowledgement policy,
 * on a master that reports replicas, or on a replica named directly.  A lone server's object stays as
 * it was; so does a cluster node's, whose replicas are one shard's. */
static void print_replication(hilock_client *client,
                              const hilock_options *opts)
{
    cli_replication r;
    cli_replication_read(client, &r);
    /* A lone master shows none: its policy, whatever it is, has no
     * replica to wait for. */
    bool sentinel = hilock_options_sentinel_master(opts) != NULL;
    if (!sentinel) {
        bool cluster = true;
        if (!r.info_read ||
            (r.replicas == 0 && strcmp(r.role, "master") == 0))
            return;
        const char *argv[] = {"INFO", "cluster"};
        hilock_reply *reply = NULL;
        if (hilock_client_command(client, 2, argv, NULL, &reply) ==
                HILOCK_OK &&
            reply->type == HILOCK_REPLY_STRING)
            cluster = strstr(reply->str, "cluster_enabled:1") != NULL;
        hilock_reply_free(reply);
        if (cluster)
            return;
    }
    fputs(",\"replication\":", stdout);
    cli_replication_json(stdout, &r, opts);
}

int cli_read_status(hilock_client *client, const char *name,
                    hilock_lock_status **out)
{
    return read_status(client, name, NULL, out, false);
}

void cli_json_string(FILE *out, const char *s, size_t len)
{
    json_string(out, s, len);
}

int cli_status_reentrant(hilock_client *client, const char *name, FILE *out,
                         bool *locked)
{
    hilock_lock_status *st;
    int rc = read_as(client, "reentrant", name, &st, true);
    if (rc == 0) {
        *locked = st->locked;
        fprintf(out, "\"locked\":%s,\"ttl_ms\":%lld,\"holders\":[",
                st->locked ? "true" : "false", (long long)st->ttl_ms);
        print_holders(out, client, name, st);
        putc(']', out);
        if (st->delay_ms != 0)
            fprintf(out, ",\"delay_ms\":%lld", (long long)st->delay_ms);
    }
    hilock_lock_status_free(st);
    return rc;
}

const cli_kind *cli_detect_kind(hilock_client *client, const char *name,
                                int *rc)
{
    hilock_lock_status *st;
    *rc = read_status(client, name, NULL, &st, true);
    if (*rc != 0)
        return NULL;
    /* Both sides of a read-write lock force-release it alike. */
    const char *kind = strcmp(st->kind, "read-write") == 0 ? "write"
                                                             : st->kind;
    const cli_kind *found = cli_kind_find(kind);
    hilock_lock_status_free(st);
    return found;
}

/* The status kind name a --kind reads as: both sides of a read-write
 * lock are one. */
static const char *status_kind_of(const char *kind)
{
    return strcmp(kind, "read") == 0 || strcmp(kind, "write") == 0
               ? "read-write"
               : kind;
}

/* --kind names one kind, and the server shows data only another kind
 * writes (a read-write lock's mode, a fair lock's line): reading it as the
 * kind asked would mislead, so it is refused (65), naming what is there.
 * A lock whose data any kind's looks like (an idle fair lock, a reentrant
 * one) cannot be told apart, and passes.  0 or the exit status. */
static int refuse_other_kind(hilock_client *client, const char *name,
                             const char *kind)
{
    hilock_lock_status *seen = NULL;
    int rc = read_status(client, name, NULL, &seen, true);
    if (rc != 0)
        return rc;
    const char *want = status_kind_of(kind);
    if (seen->kind_seen && strcmp(seen->kind, want) != 0) {
        fprintf(stderr, "hilock: %s holds a %s lock, not a %s lock "
                        "(--kind %s): not read as one\n",
                name, seen->kind, want, kind);
        rc = CLI_EXIT_DATAERR;
    }
    hilock_lock_status_free(seen);
    return rc;
}

static int status_usage(const char *why, const char *what)
{
    return cli_usage_error("status", why, what);
}

int cli_status(const cli_globals *g, int argc, char **argv)
{
    const char *name = NULL, *kind = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v;
        bool missing = false;
        if (arg[0] != '-') {
            if (name != NULL)
                return status_usage("one NAME only, not also", arg);
            name = arg;
        } else if (cli_wants_help(arg)) {
            return cli_help("status");
        } else if ((v = cli_option_value(argc, argv, &i, "--kind", "-k",
                                         &missing))) {
            if (!kind_known(v))
                return status_usage("unknown lock kind", v);
            kind = v;
        } else {
            return status_usage(missing ? "missing value after"
                                        : "unknown option",
                                arg);
        }
    }
    if (name == NULL || name[0] == '\0')
        return status_usage("missing lock NAME", NULL);
    /* The same bound as run and unlock, where the library enforces it:
     * no lock can have such a name, so reading it would only mislead. */
    size_t name_len = strlen(name);
    if (name_len > HILOCK_MAX_NAME_LEN) {
        char why[96];
        snprintf(why, sizeof why, "the lock name is %zu bytes; at most %d "
                 "are allowed", name_len, HILOCK_MAX_NAME_LEN);
        return status_usage(why, NULL);
    }
    if (g->redlock != NULL) {
        if (kind != NULL)
            return status_usage("--kind does not go with --redlock, which "
                                "takes a reentrant lock on each master",
                                NULL);
        return cli_redlock_status(g, name);
    }
    hilock_options *opts;
    hilock_client *client;
    int rc = cli_open_with(g, &opts, &client);
    if (rc != 0)
        return rc;
    const char *marked = cli_marked_kind(client, name);
    if (kind != NULL && marked != NULL &&
        strcmp(status_kind_of(kind), marked) != 0) {
        fprintf(stderr, "hilock: %s is a %s, as the hilock client that "
                        "used it said, not a %s (--kind %s): not read as "
                        "one\n", name, marked, status_kind_of(kind), kind);
        hilock_client_destroy(client);
        hilock_options_free(opts);
        return CLI_EXIT_DATAERR;
    }
    /* No lock is a string; a latch's count and a semaphore's are, and
     * look alike: without --kind, permits held under the expirable
     * semaphore's zset or hilock's word make it a semaphore, the word a
     * latch, and any other count is unknown. */
    bool sem_kind = strcmp(kind ? kind : marked ? marked : "", "semaphore") ==
                    0;
    if (kind == NULL || sem_kind) {
        bool printed = false;
        rc = cli_semaphore_status(client, name, sem_kind, &printed);
        if (rc != 0 || printed) {
            hilock_client_destroy(client);
            hilock_options_free(opts);
            return cli_flush_stdout(rc);
        }
    }
    if (kind != NULL ? strcmp(kind, "latch") == 0
                     : cli_holds_string(client, name)) {
        rc = cli_latch_status(client, name,
                              kind != NULL ||
                                  (marked && strcmp(marked, "latch") == 0));
        hilock_client_destroy(client);
        hilock_options_free(opts);
        return rc;
    }
    hilock_lock_status *st;
    rc = kind != NULL ? refuse_other_kind(client, name, kind) : 0;
    if (rc == 0)
        rc = read_status(client, name, kind, &st, true);
    else
        st = NULL;
    if (rc == 0) {
        print_status(client, name, st);
        print_replication(client, opts);
        fputs("}\n", stdout);
    }
    hilock_lock_status_free(st);
    hilock_client_destroy(client);
    hilock_options_free(opts);
    return cli_flush_stdout(rc);
}
