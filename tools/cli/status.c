/* hilock status: what Redis holds for one lock, as one JSON object.
 *
 * The object is read with plain commands, one after another, so it is not
 * a snapshot: a lock that changes meanwhile may show, say, holders with
 * the ttl of the next holder.  Redisson's layouts tell the kinds apart:
 * a read-write lock has a "mode" field in its hash, a fair lock has a
 * waiting queue and a zset of places next to its hash (only while someone
 * waits), and a reentrant lock is a hash without either (or nothing, when
 * free).  --kind says the kind instead, for the moments when the server
 * data cannot: a fair lock nobody waits for looks reentrant.
 *
 * Beyond the fields every kind has, a fair lock shows its queue with the
 * time each place has left on the server's clock, and a read-write lock
 * its mode, readers, writer and the writers waiting (a zset of hilock's
 * own, hilock_rwlock_writers:{NAME}, as Redisson keeps no such list).
 *
 * JSON strings carry bytes: names and owner ids are binary in Redis, JSON
 * strings are Unicode.  Valid UTF-8 passes through; '"', '\' and control
 * characters (below 0x20, and 0x7f) are escaped, the latter as \u00XX; a
 * byte that is not part of valid UTF-8 becomes \u00XX of its value.  That
 * last rule is lossy, as \u00e9 then stands for the byte 0xe9 and for the
 * character U+00E9 alike, but it keeps the output valid JSON and every
 * ASCII or UTF-8 name exact. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

static void json_string(FILE *out, const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    putc('"', out);
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
    putc('"', out);
}

/* Whether a reply string is a decimal integer, and its value. */
static bool reply_integer(const hilock_reply *r, long long *v)
{
    if (r->type == HILOCK_REPLY_INTEGER) {
        *v = r->integer;
        return true;
    }
    if (r->type != HILOCK_REPLY_STRING || r->len == 0 || r->len > 20)
        return false;
    char *end;
    *v = strtoll(r->str, &end, 10);
    return end == r->str + r->len;
}

static bool reply_is(const hilock_reply *r, const char *s)
{
    return (r->type == HILOCK_REPLY_STRING || r->type == HILOCK_REPLY_STATUS)
        && r->len == strlen(s) && memcmp(r->str, s, r->len) == 0;
}

/* Run one command; on failure print why and return the exit status. */
static int command(hilock_client *client, int argc, const char **argv,
                   hilock_reply **reply)
{
    int rc = hilock_client_command(client, argc, argv, NULL, reply);
    if (rc == HILOCK_OK)
        return 0;
    fprintf(stderr, "hilock: %s failed: %s (%s)\n", argv[0],
            hilock_strerror(rc), hilock_last_error());
    hilock_reply_free(*reply);
    *reply = NULL;
    return rc == HILOCK_EREDIS ? CLI_EXIT_DATAERR : CLI_EXIT_UNAVAILABLE;
}

/* What the server says a kind is; status shows the same lock differently
 * for each. */
typedef enum status_kind {
    KIND_UNKNOWN,
    KIND_REENTRANT,
    KIND_FAIR,
    KIND_READ_WRITE
} status_kind;

static const char *const kind_label[] = {
    [KIND_REENTRANT] = "reentrant",
    [KIND_FAIR] = "fair",
    [KIND_READ_WRITE] = "read-write",
};

/* --kind takes the names `hilock run` uses, read and write included: both
 * sides of a read-write lock share one name, so either shows all of it. */
static status_kind kind_named(const char *s)
{
    if (strcmp(s, "reentrant") == 0)
        return KIND_REENTRANT;
    if (strcmp(s, "fair") == 0)
        return KIND_FAIR;
    if (strcmp(s, "read") == 0 || strcmp(s, "write") == 0)
        return KIND_READ_WRITE;
    return KIND_UNKNOWN;
}

/* A waiter's place in the timeout zset of a fair lock, sorted by member so
 * that each entry of the queue finds its own score. */
typedef struct place {
    const char *member;
    size_t len;
    const hilock_reply *score;
} place;

static int place_cmp(const void *a, const void *b)
{
    const place *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->member, y->member, n);
    if (c != 0)
        return c;
    return (x->len > y->len) - (x->len < y->len);
}

typedef struct status {
    const char *name;
    status_kind kind;          /* from --kind, else found on the server */
    hilock_reply *fields;      /* HGETALL, or NULL */
    hilock_reply *queue;       /* fair: LRANGE of the queue */
    hilock_reply *timeouts;    /* fair: ZRANGE ... WITHSCORES */
    place *places;             /* fair: timeouts by member */
    size_t nplaces;
    long long now_ms;          /* fair: the server's TIME */
    hilock_reply *writers;     /* read-write: ZRANGE of waiting writers */
    const hilock_reply *mode;  /* inside fields */
    long long ttl_ms;
    long long subscribers;     /* -1: not shown */
    int holders;
} status;

static void json_reply(FILE *out, const hilock_reply *r)
{
    json_string(out, r->str ? r->str : "", r->str ? r->len : 0);
}

/* {"owner":...,"count":...} of one hash field. */
static void print_owner_count(FILE *out, const char *owner, size_t len,
                              const hilock_reply *value)
{
    fputs("{\"owner\":", out);
    json_string(out, owner, len);
    long long count;
    if (reply_integer(value, &count)) {
        fprintf(out, ",\"count\":%lld}", count);
    } else {
        /* Not written by a lock; show it rather than guess. */
        fputs(",\"count\":", out);
        json_reply(out, value);
        putc('}', out);
    }
}

static void print_owners(FILE *out, const hilock_reply *list)
{
    for (size_t i = 0; list != NULL && i < list->elements; i++) {
        fputs(i ? ",{\"owner\":" : "{\"owner\":", out);
        json_reply(out, list->element[i]);
        putc('}', out);
    }
}

#define WRITE_SUFFIX ":write"
#define WRITE_SUFFIX_LEN (sizeof WRITE_SUFFIX - 1)

static bool is_writer_field(const hilock_reply *k)
{
    return k->str != NULL && k->len >= WRITE_SUFFIX_LEN &&
           memcmp(k->str + k->len - WRITE_SUFFIX_LEN, WRITE_SUFFIX,
                  WRITE_SUFFIX_LEN) == 0;
}

/* A score of the timeout zset as milliseconds from the server's now;
 * false when it is no finite number. */
static bool expires_in(const hilock_reply *score, long long now_ms,
                       long long *ms)
{
    if (score->type != HILOCK_REPLY_STRING || score->len == 0)
        return false;
    char *end;
    double v = strtod(score->str, &end);
    if (end != score->str + score->len || !isfinite(v))
        return false;
    double d = v - (double)now_ms;
    if (d > 9e15 || d < -9e15)
        return false;
    *ms = (long long)d;
    return true;
}

/* "queue": every waiter in line order, with how long its place lasts
 * unless renewed.  The list alone decides who comes next, so it gives the
 * order; a waiter missing from the zset shows null, and a negative value
 * is a place run out that the next attempt will drop. */
static void print_queue(FILE *out, const status *st)
{
    fputs(",\"queue\":[", out);
    const hilock_reply *q = st->queue;
    for (size_t i = 0; q != NULL && i < q->elements; i++) {
        const hilock_reply *w = q->element[i];
        fputs(i ? ",{\"owner\":" : "{\"owner\":", out);
        json_reply(out, w);
        fputs(",\"expires_in_ms\":", out);
        place key = {w->str ? w->str : "", w->str ? w->len : 0, NULL};
        const place *found =
            st->nplaces > 0 ? bsearch(&key, st->places, st->nplaces,
                                      sizeof *st->places, place_cmp)
                            : NULL;
        long long ms;
        if (found != NULL && expires_in(found->score, st->now_ms, &ms))
            fprintf(out, "%lld}", ms);
        else
            fputs("null}", out);
    }
    putc(']', out);
}

/* Redisson's read-write layout: "mode", then one field per reading owner
 * and, for the writer, its owner with ":write" appended. */
static void print_read_write(FILE *out, const status *st)
{
    const hilock_reply *f = st->fields;
    fputs(",\"mode\":", out);
    if (st->mode != NULL)
        json_reply(out, st->mode);
    else
        fputs("null", out);
    fputs(",\"readers\":[", out);
    int shown = 0;
    const hilock_reply *writer = NULL, *writer_count = NULL;
    for (size_t i = 0; f != NULL && i + 1 < f->elements; i += 2) {
        const hilock_reply *k = f->element[i], *v = f->element[i + 1];
        if (reply_is(k, "mode"))
            continue;
        if (is_writer_field(k)) {
            if (writer == NULL) {
                writer = k;
                writer_count = v;
            }
            continue;
        }
        if (shown++)
            putc(',', out);
        print_owner_count(out, k->str, k->len, v);
    }
    fputs("],\"writer\":", out);
    if (writer != NULL)
        print_owner_count(out, writer->str, writer->len - WRITE_SUFFIX_LEN,
                          writer_count);
    else
        fputs("null", out);
    fputs(",\"waiting_writers\":[", out);
    print_owners(out, st->writers);
    putc(']', out);
}

static void print_holders(FILE *out, const status *st)
{
    const hilock_reply *f = st->fields;
    int shown = 0;
    for (size_t i = 0; f != NULL && i + 1 < f->elements; i += 2) {
        const hilock_reply *k = f->element[i];
        if (reply_is(k, "mode"))
            continue;
        if (shown++)
            putc(',', out);
        print_owner_count(out, k->str, k->len, f->element[i + 1]);
    }
}

static void print_status(const status *st)
{
    FILE *out = stdout;
    fputs("{\"name\":", out);
    json_string(out, st->name, strlen(st->name));
    fprintf(out, ",\"kind\":\"%s\",\"locked\":%s,\"ttl_ms\":%lld",
            kind_label[st->kind], st->holders > 0 ? "true" : "false",
            st->holders > 0 ? st->ttl_ms : -1);
    fputs(",\"holders\":[", out);
    print_holders(out, st);
    /* "waiters" lists whoever the server keeps a line of, whatever the
     * kind, for scripts that need not know the kinds apart. */
    fputs("],\"waiters\":[", out);
    print_owners(out, st->kind == KIND_FAIR ? st->queue : st->writers);
    putc(']', out);
    if (st->subscribers >= 0)
        fprintf(out, ",\"subscribers\":%lld", st->subscribers);
    if (st->kind == KIND_FAIR)
        print_queue(out, st);
    else if (st->kind == KIND_READ_WRITE)
        print_read_write(out, st);
    fputs("}\n", out);
}

/* The keys that go with the lock, by Redisson's naming. */
enum { KEY_QUEUE, KEY_TIMEOUT, KEY_WRITERS, KEY_CHANNEL, N_KEYS };
static const char *const key_prefix[N_KEYS] = {
    [KEY_QUEUE] = "redisson_lock_queue",
    [KEY_TIMEOUT] = "redisson_lock_timeout",
    [KEY_WRITERS] = "hilock_rwlock_writers",
    [KEY_CHANNEL] = "redisson_lock__channel",
};

/* EXISTS of the given keys: how many of them exist, or -1 after printing
 * why not (with the exit status in *rc). */
static long long count_existing(hilock_client *client, int n,
                                const char *const *keys, int *rc)
{
    const char *argv[3] = {"EXISTS"};
    for (int i = 0; i < n; i++)
        argv[1 + i] = keys[i];
    hilock_reply *r = NULL;
    if ((*rc = command(client, 1 + n, argv, &r)) != 0)
        return -1;
    long long v = r->type == HILOCK_REPLY_INTEGER ? r->integer : 0;
    hilock_reply_free(r);
    return v;
}

/* Tell the kind from what the server holds.  The hash's mode field is
 * proof of a read-write lock; a fair lock shows only while someone waits
 * (its queue keys), and a read-write lock without holders only while a
 * writer waits.  Anything else is taken for a reentrant lock, which a free
 * lock of any kind looks like. */
static int detect_kind(hilock_client *client, status *st, char *const *keys)
{
    if (st->mode != NULL &&
        (reply_is(st->mode, "read") || reply_is(st->mode, "write"))) {
        st->kind = KIND_READ_WRITE;
        return 0;
    }
    int rc;
    const char *fair_keys[] = {keys[KEY_QUEUE], keys[KEY_TIMEOUT]};
    long long n = count_existing(client, 2, fair_keys, &rc);
    if (n < 0)
        return rc;
    if (n > 0) {
        st->kind = KIND_FAIR;
        return 0;
    }
    const char *rw_keys[] = {keys[KEY_WRITERS]};
    if ((n = count_existing(client, 1, rw_keys, &rc)) < 0)
        return rc;
    st->kind = n > 0 ? KIND_READ_WRITE : KIND_REENTRANT;
    return 0;
}

/* The server's clock in milliseconds, the one fair places are kept on. */
static int server_time(hilock_client *client, long long *now_ms)
{
    const char *argv[] = {"TIME"};
    hilock_reply *r = NULL;
    int rc = command(client, 1, argv, &r);
    if (rc != 0)
        return rc;
    long long s, us;
    if (r->type != HILOCK_REPLY_ARRAY || r->elements != 2 ||
        !reply_integer(r->element[0], &s) ||
        !reply_integer(r->element[1], &us)) {
        fprintf(stderr, "hilock: TIME gave an unexpected reply\n");
        hilock_reply_free(r);
        return CLI_EXIT_SOFTWARE;
    }
    *now_ms = s * 1000 + us / 1000;
    hilock_reply_free(r);
    return 0;
}

static int read_fair(hilock_client *client, status *st, char *const *keys)
{
    int rc;
    const char *range_argv[] = {"LRANGE", keys[KEY_QUEUE], "0", "-1"};
    if ((rc = command(client, 4, range_argv, &st->queue)) != 0)
        return rc;
    const char *zrange_argv[] = {"ZRANGE", keys[KEY_TIMEOUT], "0", "-1",
                                 "WITHSCORES"};
    if ((rc = command(client, 5, zrange_argv, &st->timeouts)) != 0)
        return rc;
    if ((rc = server_time(client, &st->now_ms)) != 0)
        return rc;
    const hilock_reply *z = st->timeouts;
    size_t n = z->type == HILOCK_REPLY_ARRAY ? z->elements / 2 : 0;
    if (n == 0)
        return 0;
    st->places = malloc(n * sizeof *st->places);
    if (st->places == NULL) {
        fprintf(stderr, "hilock: out of memory\n");
        return CLI_EXIT_SOFTWARE;
    }
    for (size_t i = 0; i < n; i++) {
        const hilock_reply *m = z->element[2 * i];
        if (m->type == HILOCK_REPLY_STRING)
            st->places[st->nplaces++] =
                (place){m->str, m->len, z->element[2 * i + 1]};
    }
    if (st->nplaces > 0)
        qsort(st->places, st->nplaces, sizeof *st->places, place_cmp);
    return 0;
}

/* Fill st from the server; returns 0 or an exit status. */
static int read_status(hilock_client *client, status *st)
{
    const char *name = st->name;
    char *keys[N_KEYS] = {0};
    hilock_reply *r = NULL;
    int rc = CLI_EXIT_SOFTWARE;
    for (int i = 0; i < N_KEYS; i++) {
        if ((keys[i] = cli_aux_name(key_prefix[i], name)) == NULL) {
            fprintf(stderr, "hilock: out of memory\n");
            goto out;
        }
    }
    const char *type_argv[] = {"TYPE", name};
    if ((rc = command(client, 2, type_argv, &r)) != 0)
        goto out;
    bool hash = reply_is(r, "hash");
    if (!hash && !reply_is(r, "none")) {
        fprintf(stderr, "hilock: %s holds a %.*s, not a lock\n", name,
                (int)r->len, r->str ? r->str : "");
        rc = CLI_EXIT_DATAERR;
        goto out;
    }
    hilock_reply_free(r);
    r = NULL;
    if (hash) {
        const char *all_argv[] = {"HGETALL", name};
        if ((rc = command(client, 2, all_argv, &st->fields)) != 0)
            goto out;
        for (size_t i = 0; i + 1 < st->fields->elements; i += 2) {
            if (reply_is(st->fields->element[i], "mode"))
                st->mode = st->fields->element[i + 1];
            else
                st->holders++;
        }
        const char *pttl_argv[] = {"PTTL", name};
        if ((rc = command(client, 2, pttl_argv, &r)) != 0)
            goto out;
        st->ttl_ms = r->type == HILOCK_REPLY_INTEGER ? r->integer : -1;
        /* Gone between HGETALL and PTTL: it was released meanwhile. */
        if (st->ttl_ms == -2)
            st->holders = 0;
        hilock_reply_free(r);
        r = NULL;
    }
    if (st->kind == KIND_UNKNOWN &&
        (rc = detect_kind(client, st, keys)) != 0)
        goto out;
    if (st->kind == KIND_FAIR) {
        rc = read_fair(client, st, keys);
    } else if (st->kind == KIND_READ_WRITE) {
        const char *writers_argv[] = {"ZRANGE", keys[KEY_WRITERS], "0",
                                      "-1"};
        rc = command(client, 4, writers_argv, &st->writers);
    } else {
        /* Redisson keeps no list of who waits for a reentrant lock; the
         * subscribers of its release channel are the nearest thing, one
         * per waiting client (not per waiting thread). */
        const char *numsub_argv[] = {"PUBSUB", "NUMSUB", keys[KEY_CHANNEL]};
        if ((rc = command(client, 3, numsub_argv, &r)) != 0)
            goto out;
        if (r->type == HILOCK_REPLY_ARRAY && r->elements == 2 &&
            r->element[1]->type == HILOCK_REPLY_INTEGER)
            st->subscribers = r->element[1]->integer;
    }
out:
    hilock_reply_free(r);
    for (int i = 0; i < N_KEYS; i++)
        free(keys[i]);
    return rc;
}

void cli_json_string(FILE *out, const char *s, size_t len)
{
    json_string(out, s, len);
}

int cli_status_reentrant(hilock_client *client, const char *name, FILE *out,
                         bool *locked)
{
    status st = {.name = name, .kind = KIND_REENTRANT, .ttl_ms = -1,
                 .subscribers = -1};
    int rc = read_status(client, &st);
    if (rc == 0) {
        *locked = st.holders > 0;
        fprintf(out, "\"locked\":%s,\"ttl_ms\":%lld,\"holders\":[",
                *locked ? "true" : "false", *locked ? st.ttl_ms : -1);
        print_holders(out, &st);
        putc(']', out);
    }
    hilock_reply_free(st.fields);
    return rc;
}

const cli_kind *cli_detect_kind(hilock_client *client, const char *name,
                                int *rc)
{
    status st = {.name = name, .kind = KIND_UNKNOWN, .ttl_ms = -1,
                 .subscribers = -1};
    *rc = read_status(client, &st);
    status_kind kind = st.kind;
    hilock_reply_free(st.fields);
    hilock_reply_free(st.queue);
    hilock_reply_free(st.timeouts);
    hilock_reply_free(st.writers);
    free(st.places);
    if (*rc != 0)
        return NULL;
    /* Both sides of a read-write lock force-release it alike. */
    return cli_kind_find(kind == KIND_FAIR         ? "fair"
                         : kind == KIND_READ_WRITE ? "write"
                                                   : "reentrant");
}

static int status_usage(const char *why, const char *what)
{
    fprintf(stderr, "hilock status: %s%s%s\n", why, what ? " " : "",
            what ? what : "");
    fprintf(stderr, "usage: hilock [--redis URL] status "
                    "[--kind reentrant|fair|read|write] NAME\n"
                    "       hilock --redlock URL1,...,URLn status NAME\n");
    return CLI_EXIT_USAGE;
}

int cli_status(const cli_globals *g, int argc, char **argv)
{
    status st = {.ttl_ms = -1, .subscribers = -1};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v;
        bool missing = false;
        if (arg[0] != '-') {
            if (st.name != NULL)
                return status_usage("one NAME only, not also", arg);
            st.name = arg;
        } else if ((v = cli_option_value(argc, argv, &i, "--kind",
                                         &missing))) {
            if ((st.kind = kind_named(v)) == KIND_UNKNOWN)
                return status_usage("unknown lock kind", v);
        } else {
            return status_usage(missing ? "missing value after"
                                        : "unknown option",
                                arg);
        }
    }
    if (st.name == NULL || st.name[0] == '\0')
        return status_usage("missing lock NAME", NULL);
    /* The same bound as run and unlock, where the library enforces it:
     * no lock can have such a name, so reading it would only mislead. */
    size_t name_len = strlen(st.name);
    if (name_len > HILOCK_MAX_NAME_LEN) {
        char why[96];
        snprintf(why, sizeof why, "the lock name is %zu bytes; at most %d "
                 "are allowed", name_len, HILOCK_MAX_NAME_LEN);
        return status_usage(why, NULL);
    }
    if (g->redlock != NULL) {
        if (st.kind != KIND_UNKNOWN)
            return status_usage("--kind does not go with --redlock, which "
                                "takes a reentrant lock on each master",
                                NULL);
        return cli_redlock_status(g, st.name);
    }
    hilock_client *client;
    int rc = cli_open(g, &client);
    if (rc != 0)
        return rc;
    rc = read_status(client, &st);
    if (rc == 0)
        print_status(&st);
    hilock_reply_free(st.fields);
    hilock_reply_free(st.queue);
    hilock_reply_free(st.timeouts);
    hilock_reply_free(st.writers);
    free(st.places);
    hilock_client_destroy(client);
    if (rc == 0 && fflush(stdout) != 0) {
        perror("hilock: stdout");
        rc = CLI_EXIT_SOFTWARE;
    }
    return rc;
}
