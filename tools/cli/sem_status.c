/* hilock status for a semaphore: the count of free permits at NAME and
 * the expirable permits held in "{NAME}:timeout", each with its id and
 * the time it has left on the server's clock, read in one script so that
 * the object is a snapshot.  A name holding an integer string, or none
 * but with permits held, is taken for a semaphore.
 *
 * The values are what some program wrote, and are read as strictly as
 * the library reads them: a count is a decimal 64-bit integer, printed as
 * it is, and a string at NAME that is none is bad data (exit 65, with the
 * string quoted).  A permit's time left is its score less the server's
 * time, worked out in doubles, as scores are: 0 once it is past (a score
 * before the epoch, -inf too), -1 for no expiry (Redisson's score for
 * that, or one 2^53 ms or more ahead, +inf too), so that no score makes
 * an integer overflow. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sem_status_lua.h"

/* Redisson's score of a permit that never expires. */
#define NO_EXPIRY "922337203685477"

static const char status_lua[] = CLI_SEM_STATUS_LUA;

/* "{NAME}:timeout", or "NAME:timeout" when NAME holds a '{' (the braces
 * rule).  Returns a malloc'd string or NULL. */
static char *timeout_key(const char *name)
{
    size_t n = strlen(name);
    char *k = malloc(n + 12);
    if (k == NULL)
        return NULL;
    if (strchr(name, '{') != NULL)
        snprintf(k, n + 12, "%s:timeout", name);
    else
        snprintf(k, n + 12, "{%s}:timeout", name);
    return k;
}

static bool is_str(const hilock_reply *r)
{
    return r->type == HILOCK_REPLY_STRING || r->type == HILOCK_REPLY_STATUS;
}

/* A count as Redis's INCR keeps one: decimal, '-' before a negative, no
 * leading zero, within 64 bits; false for anything else. */
static bool parse_count(const hilock_reply *r, long long *out)
{
    const char *s = r->str;
    const char *digits = s[0] == '-' ? s + 1 : s;
    if (r->len == 0 || digits[0] < '0' || digits[0] > '9' ||
        (digits[0] == '0' && (digits != s || digits[1] != '\0')))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end != s + r->len)
        return false;
    *out = v;
    return true;
}

/* The ms a permit scored score has left at now_ms: 0 when it is past,
 * -1 when it never comes (see the top of this file). */
static long long time_left(const char *score, long long now_ms)
{
    if (strcmp(score, NO_EXPIRY) == 0)
        return -1;
    double left = strtod(score, NULL) - (double)now_ms;
    if (!(left < 9007199254740992.0)) /* 2^53, +inf; NaN too */
        return -1;
    if (left <= 0)
        return 0;
    long long ms = (long long)left;
    return ms < left ? ms + 1 : ms;
}

/* The server's TIME, in ms. */
static long long server_ms(const hilock_reply *sec, const hilock_reply *usec)
{
    return strtoll(sec->str, NULL, 10) * 1000 +
           strtoll(usec->str, NULL, 10) / 1000;
}

int cli_semaphore_status(hilock_client *client, const char *name, bool force,
                         bool *printed)
{
    *printed = false;
    char *zkey = timeout_key(name);
    if (zkey == NULL) {
        fprintf(stderr, "hilock: out of memory\n");
        return CLI_EXIT_SOFTWARE;
    }
    char nkeys[12];
    size_t nkeys_len = (size_t)snprintf(nkeys, sizeof nkeys, "%d",
                                        CLI_SEM_STATUS_KEYS);
    const char *argv[] = {"EVAL", status_lua, nkeys, name, zkey};
    size_t lens[] = {4, strlen(status_lua), nkeys_len, strlen(name),
                     strlen(zkey)};
    hilock_reply *r = NULL;
    int rc = hilock_client_command(client, 5, argv, lens, &r);
    free(zkey);
    if (rc != HILOCK_OK) {
        char what[300];
        snprintf(what, sizeof what, "status of %s failed", name);
        hilock_reply_free(r);
        return cli_failed(what, rc, NULL);
    }
    if (r->type != HILOCK_REPLY_ARRAY || r->elements != 5 ||
        !is_str(r->element[0]) ||
        r->element[2]->type != HILOCK_REPLY_ARRAY ||
        !is_str(r->element[3]) || !is_str(r->element[4])) {
        fprintf(stderr, "hilock: status of %s: unexpected reply\n", name);
        hilock_reply_free(r);
        return CLI_EXIT_SOFTWARE;
    }
    const char *type = r->element[0]->str;
    const hilock_reply *z = r->element[2];
    const hilock_reply *v = r->element[1];
    long long available = 0;
    bool count = is_str(v) && parse_count(v, &available);
    /* A count alone is a latch's as much as a semaphore's: unless asked
     * for a semaphore, only held permits tell. */
    bool semaphore = force ? count || (strcmp(type, "none") == 0 &&
                                       z->elements > 0)
                           : z->elements > 0;
    if (!semaphore && !force) {
        hilock_reply_free(r);
        return 0;
    }
    if (is_str(v) && !count) {
        /* A string, but no count: not one hilock or Redisson wrote. */
        fprintf(stderr, "hilock: %s holds ", name);
        cli_json_string(stderr, v->str, v->len < 64 ? v->len : 64);
        fprintf(stderr, "%s, which is not a count of permits (a decimal "
                        "64-bit integer)\n",
                v->len < 64 ? "" : "...");
        hilock_reply_free(r);
        return CLI_EXIT_DATAERR;
    }
    if (!semaphore && strcmp(type, "none") != 0) {
        fprintf(stderr, "hilock: %s holds a %s, not a semaphore's count\n",
                name, type);
        hilock_reply_free(r);
        return CLI_EXIT_DATAERR;
    }
    long long now_ms = server_ms(r->element[3], r->element[4]);
    printf("{\"name\":");
    cli_json_string(stdout, name, strlen(name));
    printf(",\"kind\":\"semaphore\",\"available\":");
    if (count)
        printf("%lld", available);
    else
        printf("null");
    printf(",\"permits\":[");
    for (size_t i = 0; i + 1 < z->elements; i += 2) {
        const hilock_reply *id = z->element[i], *score = z->element[i + 1];
        printf("%s{\"id\":", i ? "," : "");
        cli_json_string(stdout, id->str, id->len);
        printf(",\"ttl_ms\":%lld}", time_left(score->str, now_ms));
    }
    printf("]}\n");
    hilock_reply_free(r);
    *printed = true;
    return 0;
}
