/* hilock status for a semaphore: the count of free permits at NAME and
 * the expirable permits held in "{NAME}:timeout", each with its id and
 * the time it has left on the server's clock, read in one script so that
 * the object is a snapshot.  A name holding an integer string, or none
 * but with permits held, is taken for a semaphore. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Redisson's score of a permit that never expires. */
#define NO_EXPIRY "922337203685477"

static const char status_lua[] =
    "local t = redis.call('type', KEYS[1])['ok']\n"
    "local v = false\n"
    "if t == 'string' then v = redis.call('get', KEYS[1]) end\n"
    "local z = {}\n"
    "if redis.call('type', KEYS[2])['ok'] == 'zset' then\n"
    "  z = redis.call('zrange', KEYS[2], 0, -1, 'withscores')\n"
    "end\n"
    "local now = redis.call('time')\n"
    "return {t, v, z, now[1], now[2]}\n";

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

/* A decimal integer, as a count is stored. */
static bool is_count(const char *s)
{
    char *end;
    if (*s == '\0')
        return false;
    (void)strtoll(s, &end, 10);
    return *end == '\0';
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
    const char *argv[] = {"EVAL", status_lua, "2", name, zkey};
    size_t lens[] = {4, strlen(status_lua), 1, strlen(name), strlen(zkey)};
    hilock_reply *r = NULL;
    int rc = hilock_client_command(client, 5, argv, lens, &r);
    free(zkey);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "hilock: status of %s failed: %s (%s)\n", name,
                hilock_strerror(rc), hilock_last_error());
        hilock_reply_free(r);
        return rc == HILOCK_EREDIS ? CLI_EXIT_DATAERR : CLI_EXIT_UNAVAILABLE;
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
    bool count = is_str(v) && is_count(v->str);
    /* A count alone is a latch's as much as a semaphore's: unless asked
     * for a semaphore, only held permits tell. */
    bool semaphore = force ? count || (strcmp(type, "none") == 0 &&
                                       z->elements > 0)
                           : z->elements > 0;
    if (!semaphore && !force) {
        hilock_reply_free(r);
        return 0;
    }
    if (!semaphore && strcmp(type, "none") != 0) {
        fprintf(stderr, "hilock: %s holds a %s, not a semaphore's count\n",
                name, type);
        hilock_reply_free(r);
        return CLI_EXIT_DATAERR;
    }
    long long now_ms = atoll(r->element[3]->str) * 1000 +
                       atoll(r->element[4]->str) / 1000;
    printf("{\"name\":");
    cli_json_string(stdout, name, strlen(name));
    printf(",\"kind\":\"semaphore\",\"available\":");
    if (count)
        printf("%lld", atoll(v->str));
    else
        printf("null");
    printf(",\"permits\":[");
    for (size_t i = 0; i + 1 < z->elements; i += 2) {
        const hilock_reply *id = z->element[i], *score = z->element[i + 1];
        printf("%s{\"id\":", i ? "," : "");
        cli_json_string(stdout, id->str, id->len);
        long long ttl = strcmp(score->str, NO_EXPIRY) == 0
                            ? -1
                            : (long long)atof(score->str) - now_ms;
        printf(",\"ttl_ms\":%lld}", ttl < -1 ? 0 : ttl);
    }
    printf("]}\n");
    hilock_reply_free(r);
    *printed = true;
    return 0;
}
