/* hilock status: what Redis holds for one lock, as one JSON object.
 *
 * The object is read with plain commands, one after another, so it is not
 * a snapshot: a lock that changes meanwhile may show, say, holders with
 * the ttl of the next holder.  Redisson's layouts tell the kinds apart:
 * a fair lock has a waiting queue next to its hash (only while someone
 * waits), a read-write lock has a "mode" field in its hash, and a
 * reentrant lock is a hash without either (or nothing, when free).
 *
 * JSON strings carry bytes: names and owner ids are binary in Redis, JSON
 * strings are Unicode.  Valid UTF-8 passes through; '"', '\' and control
 * characters (below 0x20, and 0x7f) are escaped, the latter as \u00XX; a
 * byte that is not part of valid UTF-8 becomes \u00XX of its value.  That
 * last rule is lossy, as \u00e9 then stands for the byte 0xe9 and for the
 * character U+00E9 alike, but it keeps the output valid JSON and every
 * ASCII or UTF-8 name exact. */
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

typedef struct status {
    const char *name;
    const char *kind;
    hilock_reply *fields;  /* HGETALL, or NULL */
    hilock_reply *queue;   /* LRANGE of a fair lock's queue, or NULL */
    const hilock_reply *mode; /* inside fields */
    long long ttl_ms;
    long long subscribers; /* -1: not shown */
    int holders;
} status;

static void print_status(const status *st)
{
    FILE *out = stdout;
    fputs("{\"name\":", out);
    json_string(out, st->name, strlen(st->name));
    fprintf(out, ",\"kind\":\"%s\",\"locked\":%s,\"ttl_ms\":%lld", st->kind,
            st->holders > 0 ? "true" : "false",
            st->holders > 0 ? st->ttl_ms : -1);
    fputs(",\"holders\":[", out);
    const hilock_reply *f = st->fields;
    int shown = 0;
    for (size_t i = 0; f != NULL && i + 1 < f->elements; i += 2) {
        const hilock_reply *k = f->element[i], *v = f->element[i + 1];
        if (reply_is(k, "mode"))
            continue;
        fputs(shown++ ? ",{\"owner\":" : "{\"owner\":", out);
        json_string(out, k->str, k->len);
        long long count;
        if (reply_integer(v, &count)) {
            fprintf(out, ",\"count\":%lld}", count);
        } else {
            /* Not written by a lock; show it rather than guess. */
            fputs(",\"count\":", out);
            json_string(out, v->str ? v->str : "", v->str ? v->len : 0);
            putc('}', out);
        }
    }
    fputs("],\"waiters\":[", out);
    const hilock_reply *q = st->queue;
    for (size_t i = 0; q != NULL && i < q->elements; i++) {
        const hilock_reply *w = q->element[i];
        fputs(i ? ",{\"owner\":" : "{\"owner\":", out);
        json_string(out, w->str ? w->str : "", w->str ? w->len : 0);
        putc('}', out);
    }
    putc(']', out);
    if (st->subscribers >= 0)
        fprintf(out, ",\"subscribers\":%lld", st->subscribers);
    if (st->mode != NULL) {
        fputs(",\"mode\":", out);
        json_string(out, st->mode->str, st->mode->len);
    }
    fputs("}\n", out);
}

/* Fill st from the server; returns 0 or an exit status. */
static int read_status(hilock_client *client, status *st)
{
    const char *name = st->name;
    char *queue_key = cli_aux_name("redisson_lock_queue", name);
    char *channel = cli_aux_name("redisson_lock__channel", name);
    hilock_reply *r = NULL;
    int rc = CLI_EXIT_SOFTWARE;
    if (queue_key == NULL || channel == NULL) {
        fprintf(stderr, "hilock: out of memory\n");
        goto out;
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
    const char *qtype_argv[] = {"TYPE", queue_key};
    if ((rc = command(client, 2, qtype_argv, &r)) != 0)
        goto out;
    bool fair = reply_is(r, "list");
    hilock_reply_free(r);
    r = NULL;
    if (fair) {
        st->kind = "fair";
        const char *range_argv[] = {"LRANGE", queue_key, "0", "-1"};
        if ((rc = command(client, 4, range_argv, &st->queue)) != 0)
            goto out;
    } else if (st->mode != NULL) {
        st->kind = "read-write";
    } else {
        /* Redisson keeps no list of who waits for a reentrant lock; the
         * subscribers of its release channel are the nearest thing, one
         * per waiting client (not per waiting thread). */
        st->kind = "reentrant";
        const char *numsub_argv[] = {"PUBSUB", "NUMSUB", channel};
        if ((rc = command(client, 3, numsub_argv, &r)) != 0)
            goto out;
        if (r->type == HILOCK_REPLY_ARRAY && r->elements == 2 &&
            r->element[1]->type == HILOCK_REPLY_INTEGER)
            st->subscribers = r->element[1]->integer;
    }
    rc = 0;
out:
    hilock_reply_free(r);
    free(queue_key);
    free(channel);
    return rc;
}

int cli_status(const cli_globals *g, int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-' || argv[1][0] == '\0') {
        fprintf(stderr, "usage: hilock [--redis URL] status NAME\n");
        return CLI_EXIT_USAGE;
    }
    hilock_client *client;
    int rc = cli_open(g, &client);
    if (rc != 0)
        return rc;
    status st = {.name = argv[1], .ttl_ms = -1, .subscribers = -1};
    rc = read_status(client, &st);
    if (rc == 0)
        print_status(&st);
    hilock_reply_free(st.fields);
    hilock_reply_free(st.queue);
    hilock_client_destroy(client);
    if (rc == 0 && fflush(stdout) != 0) {
        perror("hilock: stdout");
        rc = CLI_EXIT_SOFTWARE;
    }
    return rc;
}
