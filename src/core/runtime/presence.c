/* The client's card on the server: who it is, for an operator asking who
 * holds a lock or waits for it (hilock status, docs/guide/operators.md).
 *
 *   hilock_client:{<client id>}   hash: host, pid, program, description,
 *                                 library, stats (the client's
 *                                 hilock_stats, stats_wire.h); it expires
 *                                 HL_CARD_TTL_MS after it was last
 *                                 written
 *   hilock_holds:{<client id>}    hash: "<owner id>:<lock name>" -> how
 *                                 long that hold had been held, in ms,
 *                                 when the list was written; the oldest
 *                                 HL_HOLDS_MAX holds of the client's
 *                                 handles, rewritten with the card and
 *                                 expiring as it does
 *
 * Every hold's field and every place in a line starts with the client's
 * id, so a holder's card is one read away, for any kind, without a byte
 * more on the path of an acquire or a release.  The card is written when
 * the command connection for its key comes up (on a cluster, the one to
 * the master of its slot) and again every HL_CARD_EVERY_MS, with plain
 * commands: no script and no WAIT; and HL_CARD_SOON_MS after a lease was
 * lost, so that an operator's view counts the loss at once.  The list of
 * holds goes with it, and HL_CARD_SOON_MS after a hold begins: a hold
 * younger than that may not be listed yet, which costs the acquire
 * nothing.  A hold's age plus the time since the writing, which the
 * list's expiry tells, is how long it has been held: no clock but the
 * client's monotonic one and the server's expiry plays a part.  A refusal
 * (an ACL that does not cover the key, a read-only replica) leaves the
 * card out and nothing else; a
 * Redisson client writes none, so a holder without a card is another
 * library's, or a client of ours gone for a minute.  Loop thread only,
 * but for hilock_client_card_get. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/base/monotime.h"
#include "core/config/option_values.h"
#include "core/loop/io.h"
#include "core/runtime/client_state.h"
#include "core/runtime/presence.h"
#include "core/runtime/stats_wire.h"
#include "core/transport/conn.h"
#include "hilock/hilock.h"

#define HL_CARD_PREFIX "hilock_client:{"
#define HL_CARD_TTL_MS 60000
#define HL_CARD_EVERY_MS 5000
#define HL_CARD_SOON_MS 250
#define HL_HOLDS_PREFIX "hilock_holds:{"
#define HL_HOLDS_MAX 1000
/* Room for the key: the prefix, the id and the closing brace. */
#define HL_CARD_KEY_MAX (sizeof HL_CARD_PREFIX + HILOCK_CLIENT_ID_LEN + 1)

struct hl_presence {
    hilock_client *client;
    hl_timer timer;
    char key[HL_CARD_KEY_MAX];
    size_t key_len;
    char holds_key[sizeof HL_HOLDS_PREFIX + HILOCK_CLIENT_ID_LEN + 1];
    size_t holds_key_len;
    size_t listed; /* holds in the list last written */
    char host[256];
    char pid[24];
    char program[64];
    bool soon; /* the timer is armed for HL_CARD_SOON_MS */
};

static size_t id_key(const char *prefix, const char *id, size_t id_len,
                     char *out)
{
    size_t n = strlen(prefix);
    memcpy(out, prefix, n);
    memcpy(out + n, id, id_len);
    out[n + id_len] = '}';
    out[n + id_len + 1] = '\0';
    return n + id_len + 1;
}

static size_t card_key(const char *id, size_t id_len, char *out)
{
    return id_key(HL_CARD_PREFIX, id, id_len, out);
}

/* ---- the list of holds --------------------------------------------------- */

typedef struct listed_hold {
    const char *name;
    size_t name_len;
    uint64_t owner;
    int64_t since;
} listed_hold;

typedef struct held_list {
    listed_hold *at;
    size_t len, cap;
    bool short_of_memory;
} held_list;

static void collect(void *ctx, const char *name, size_t name_len,
                    uint64_t owner, int64_t since)
{
    held_list *l = ctx;
    if (l->len == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        listed_hold *at = hl_realloc(l->at, cap * sizeof *at);
        if (at == NULL) {
            l->short_of_memory = true;
            return;
        }
        l->at = at;
        l->cap = cap;
    }
    l->at[l->len++] = (listed_hold){name, name_len, owner, since};
}

static int oldest_first(const void *a, const void *b)
{
    int64_t x = ((const listed_hold *)a)->since;
    int64_t y = ((const listed_hold *)b)->since;
    return x < y ? -1 : x > y;
}

/* The names point into the handles, which the loop thread keeps until it
 * returns: the fields are made and sent before. */
static void write_holds(hl_presence *p, hl_conn *conn)
{
    hilock_client *c = p->client;
    /* Set under the client's mutex by the first handle, on any thread. */
    pthread_mutex_lock(&c->lock);
    void (*each_hold)(hilock_client *, hl_hold_visit *, void *) =
        c->each_hold;
    pthread_mutex_unlock(&c->lock);
    if (each_hold == NULL)
        return; /* no handle ever made: nothing to list */
    held_list l = {0};
    each_hold(c, collect, &l);
    if (l.short_of_memory || (l.len == 0 && p->listed == 0)) {
        hl_free(l.at);
        return;
    }
    size_t n = l.len < HL_HOLDS_MAX ? l.len : HL_HOLDS_MAX;
    if (l.len > 0) /* an empty list has no array to sort */
        qsort(l.at, l.len, sizeof *l.at, oldest_first);
    int argc = 2 + 2 * (int)n; /* HSET, the key, then the pairs */
    const char **argv = hl_calloc((size_t)argc, sizeof *argv);
    size_t *lens = hl_calloc((size_t)argc, sizeof *lens);
    char *text = NULL;
    size_t need = 0;
    for (size_t i = 0; i < n; i++)
        need += 21 + 1 + l.at[i].name_len + 21;
    text = hl_malloc(need + 1);
    if (argv == NULL || lens == NULL || text == NULL)
        goto done;
    argv[0] = "HSET";
    lens[0] = 4;
    argv[1] = p->holds_key;
    lens[1] = p->holds_key_len;
    hl_monotime now = hl_monotime_now();
    char *at = text;
    for (size_t i = 0; i < n; i++) {
        const listed_hold *h = &l.at[i];
        int len = snprintf(at, 22, "%" PRIu64 ":", h->owner);
        memcpy(at + len, h->name, h->name_len);
        argv[2 + 2 * i] = at;
        lens[2 + 2 * i] = (size_t)len + h->name_len;
        at += (size_t)len + h->name_len;
        int64_t age_ms = hl_sat_sub(now, h->since) / 1000;
        len = snprintf(at, 21, "%" PRId64, age_ms < 0 ? 0 : age_ms);
        argv[3 + 2 * i] = at;
        lens[3 + 2 * i] = (size_t)len;
        at += len;
    }
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%d", HL_CARD_TTL_MS);
    const char *del[] = {"DEL", p->holds_key};
    const char *expire[] = {"PEXPIRE", p->holds_key, ttl};
    size_t del_lens[] = {3, p->holds_key_len};
    size_t expire_lens[] = {7, p->holds_key_len, strlen(ttl)};
    /* Plain commands, written back to back: a reader sees the list
     * before or after, as Redis runs one connection's commands in order
     * but may interleave another's read between them (an empty list for
     * a moment, which reads as a hold not yet listed).  Not sent: the
     * next round writes it. */
    if (hl_conn_command(conn, 2, del, del_lens, NULL, NULL) == HILOCK_OK &&
        (n == 0 ||
         (hl_conn_command(conn, argc, argv, lens, NULL, NULL) == HILOCK_OK &&
          hl_conn_command(conn, 3, expire, expire_lens, NULL, NULL) ==
              HILOCK_OK)))
        p->listed = n;
done:
    hl_free(text);
    hl_free(lens);
    hl_free(argv);
    hl_free(l.at);
}

static void write_card(hl_presence *p, hl_conn *conn)
{
    hilock_client *c = p->client;
    const char *desc = c->opts->description ? c->opts->description : "";
    char library[64];
    snprintf(library, sizeof library, "hilock %s", hilock_version_string());
    hilock_stats stats;
    hl_client_read_stats(c, &stats);
    char wire[HL_STATS_WIRE_MAX];
    hl_stats_encode(&stats, wire);
    const char *set[] = {"HSET",     p->key,      "host",        p->host,
                         "pid",      p->pid,      "program",     p->program,
                         "description", desc,     "library",     library,
                         "stats",    wire};
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%d", HL_CARD_TTL_MS);
    const char *expire[] = {"PEXPIRE", p->key, ttl};
    size_t set_lens[14], expire_lens[3];
    for (int i = 0; i < 14; i++)
        set_lens[i] = strlen(set[i]);
    for (int i = 0; i < 3; i++)
        expire_lens[i] = strlen(expire[i]);
    /* Not sent: the next round, or the next connection, writes it. */
    if (hl_conn_command(conn, 14, set, set_lens, NULL, NULL) == HILOCK_OK)
        (void)hl_conn_command(conn, 3, expire, expire_lens, NULL, NULL);
    write_holds(p, conn);
}

static void on_timer(hl_timer *t)
{
    hl_presence *p = t->data;
    hl_conn *conn = hl_client_conn_for(p->client, p->key, p->key_len);
    if (conn != NULL)
        write_card(p, conn);
    p->soon = false;
    hl_timer_arm(&p->timer, HL_MS(HL_CARD_EVERY_MS));
}

/* A burst of news is one writing; a card not made yet is written with
 * it when its connection comes up. */
static void write_soon(hilock_client *c)
{
    hl_presence *p = c->presence;
    if (p == NULL || p->soon)
        return;
    p->soon = true;
    hl_timer_arm(&p->timer, HL_MS(HL_CARD_SOON_MS));
}

void hl_presence_lease_lost(hilock_client *c)
{
    write_soon(c);
}

void hl_presence_hold_started(hilock_client *c)
{
    write_soon(c);
}

static void presence_close(hilock_client *c)
{
    hl_presence *p = c->presence;
    if (p == NULL)
        return;
    hl_timer_stop(&p->timer);
    c->presence = NULL;
    hl_free(p);
}

static const hl_client_part presence_part = {.rank = 0,
                                             .close = presence_close};

/* What names this process: its program's short name, as the kernel
 * keeps it. */
static void program_name(char *out, size_t cap)
{
    snprintf(out, cap, "%s",
             program_invocation_short_name ? program_invocation_short_name
                                           : "");
}

static hl_presence *presence_create(hilock_client *c)
{
    hl_presence *p = hl_calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    if (hl_client_attach_part(c, &presence_part) != 0) {
        hl_free(p);
        return NULL;
    }
    p->client = c;
    p->key_len = card_key(c->id, HILOCK_CLIENT_ID_LEN, p->key);
    p->holds_key_len = id_key(HL_HOLDS_PREFIX, c->id, HILOCK_CLIENT_ID_LEN,
                              p->holds_key);
    if (gethostname(p->host, sizeof p->host) != 0)
        p->host[0] = '\0';
    p->host[sizeof p->host - 1] = '\0';
    snprintf(p->pid, sizeof p->pid, "%ld", (long)getpid());
    program_name(p->program, sizeof p->program);
    hl_timer_init(&p->timer, c->loop, on_timer, p);
    hl_timer_arm(&p->timer, HL_MS(HL_CARD_EVERY_MS));
    c->presence = p;
    return p;
}

/* Without memory the client goes on without a card. */
static hl_presence *presence_of(hilock_client *c)
{
    return c->presence ? c->presence : presence_create(c);
}

void hl_presence_conn_up(hilock_client *c, hl_conn *conn)
{
    hl_presence *p = presence_of(c);
    /* Before the client knows whether it talks to a cluster, where the
     * card goes is unknown: hl_presence_routed writes it then. */
    if (p != NULL && c->mode_known &&
        hl_client_conn_for(c, p->key, p->key_len) == conn)
        write_card(p, conn);
}

void hl_presence_routed(hilock_client *c)
{
    hl_presence *p = presence_of(c);
    hl_conn *conn = p ? hl_client_conn_for(c, p->key, p->key_len) : NULL;
    if (conn != NULL)
        write_card(p, conn);
}

/* ---- reading a card ----------------------------------------------------- */

typedef struct card_mem {
    hilock_client_card card;
    hilock_stats stats;
    char id[HILOCK_CLIENT_ID_LEN + 1];
    char text[]; /* the strings, one after another */
} card_mem;

/* The value of field in an HGETALL reply, or NULL. */
static const hilock_reply *field_of(const hilock_reply *r, const char *field)
{
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const hilock_reply *k = r->element[i];
        if (k->type == HILOCK_REPLY_STRING && k->len == strlen(field) &&
            memcmp(k->str, field, k->len) == 0 &&
            r->element[i + 1]->type == HILOCK_REPLY_STRING)
            return r->element[i + 1];
    }
    return NULL;
}

static const char *copy_field(const hilock_reply *r, const char *field,
                              char **at)
{
    const hilock_reply *v = field_of(r, field);
    const char *s = *at;
    if (v != NULL)
        memcpy(*at, v->str, v->len);
    *at += v != NULL ? v->len : 0;
    *(*at)++ = '\0';
    return s;
}

static const char *const card_fields[] = {"host", "program", "description",
                                          "library", "pid"};

static int card_from_reply(const char *id, const hilock_reply *r,
                           hilock_client_card **out)
{
    if (r->type != HILOCK_REPLY_ARRAY)
        return hl_fail(HILOCK_EPROTO, "a client card is not a hash");
    if (r->elements == 0)
        return hl_fail(HILOCK_ENOTFOUND,
                       "no client card for %s: not a client of this "
                       "library (Redisson, or another), or one gone for "
                       "a minute",
                       id);
    size_t need = 0;
    for (size_t i = 0; i < sizeof card_fields / sizeof card_fields[0]; i++) {
        const hilock_reply *v = field_of(r, card_fields[i]);
        need += (v ? v->len : 0) + 1;
    }
    card_mem *m = hl_calloc(1, sizeof *m + need);
    if (m == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory for a client card");
    snprintf(m->id, sizeof m->id, "%s", id);
    char *at = m->text;
    m->card.client_id = m->id;
    m->card.host = copy_field(r, "host", &at);
    m->card.program = copy_field(r, "program", &at);
    m->card.description = copy_field(r, "description", &at);
    m->card.library = copy_field(r, "library", &at);
    const char *pid = copy_field(r, "pid", &at);
    char *end;
    errno = 0;
    long long v = strtoll(pid, &end, 10);
    m->card.pid = errno == 0 && end != pid && *end == '\0' && v > 0 ? v : -1;
    /* The count of lost leases is one of the stats, given apart too. */
    m->card.leases_lost = -1;
    const hilock_reply *wire = field_of(r, "stats");
    if (wire != NULL && wire->type == HILOCK_REPLY_STRING &&
        hl_stats_decode(wire->str, wire->len, &m->stats)) {
        m->card.stats = &m->stats;
        uint64_t lost = m->stats.counters.leases_lost;
        m->card.leases_lost = lost > INT64_MAX ? INT64_MAX : (int64_t)lost;
    }
    *out = &m->card;
    return HILOCK_OK;
}

int hilock_client_card_get(hilock_client *client, const char *client_id,
                           hilock_client_card **out)
{
    if (out != NULL)
        *out = NULL;
    if (client == NULL || client_id == NULL || out == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL client, client id or out");
    if (strlen(client_id) != HILOCK_CLIENT_ID_LEN)
        return hl_fail(HILOCK_EINVAL,
                       "a client id has %d characters, not %zu",
                       HILOCK_CLIENT_ID_LEN, strlen(client_id));
    char key[HL_CARD_KEY_MAX];
    card_key(client_id, HILOCK_CLIENT_ID_LEN, key);
    const char *argv[] = {"HGETALL", key};
    hilock_reply *reply = NULL;
    int rc = hilock_client_command(client, 2, argv, NULL, &reply);
    if (rc == HILOCK_OK)
        rc = card_from_reply(client_id, reply, out);
    hilock_reply_free(reply);
    if (rc != HILOCK_OK)
        return rc;
    /* Its age, from the expiry each writing sets back to the full TTL;
     * unknown when that cannot be read, which costs the card nothing. */
    const char *pttl[] = {"PTTL", key};
    reply = NULL;
    (*out)->written_ms_ago = -1;
    if (hilock_client_command(client, 2, pttl, NULL, &reply) == HILOCK_OK &&
        reply->type == HILOCK_REPLY_INTEGER && reply->integer >= 0)
        (*out)->written_ms_ago = reply->integer >= HL_CARD_TTL_MS
                                     ? 0
                                     : HL_CARD_TTL_MS - reply->integer;
    hilock_reply_free(reply);
    return HILOCK_OK;
}

void hilock_client_card_free(hilock_client_card *card)
{
    hl_free(card);
}

/* KEYS: a client's list of holds.  ARGV: a field.  Replies false when
 * the hold is not listed, else {its age at the writing, the list's pttl,
 * the server's TIME}. */
static const char since_lua[] =
    "local age = redis.call('hget', KEYS[1], ARGV[1])\n"
    "if not age then return false end\n"
    "return {age, redis.call('pttl', KEYS[1]), redis.call('time')}\n";

const hl_script_def hl_presence_since_def = {
    .what = "hold since",
    .body = since_lua,
    HL_DEF_KEYS(hl_key_given),
};

/* A decimal from a reply's string or integer; false for anything else. */
static bool reply_ll(const hilock_reply *r, long long *out)
{
    if (r->type == HILOCK_REPLY_INTEGER) {
        *out = r->integer;
        return true;
    }
    if (r->type != HILOCK_REPLY_STRING)
        return false;
    char *end = NULL;
    errno = 0;
    *out = strtoll(r->str, &end, 10);
    return errno == 0 && end != r->str && *end == '\0';
}

/* held and the server's now, in ms, from since_lua's answer. */
static bool since_from(const hilock_reply *r, int64_t *held, int64_t *now)
{
    long long age, pttl, s, us;
    if (r->type != HILOCK_REPLY_ARRAY || r->elements != 3 ||
        r->element[2]->type != HILOCK_REPLY_ARRAY ||
        r->element[2]->elements != 2 || !reply_ll(r->element[0], &age) ||
        !reply_ll(r->element[1], &pttl) ||
        !reply_ll(r->element[2]->element[0], &s) ||
        !reply_ll(r->element[2]->element[1], &us) || age < 0 || s < 0 ||
        us < 0 || s > INT64_MAX / 2000)
        return false;
    /* The time since the writing, from the expiry it set: none left or
     * none set reads as a writing just now. */
    long long since_write = pttl >= 0 && pttl < HL_CARD_TTL_MS
                                ? HL_CARD_TTL_MS - pttl
                                : 0;
    *held = age > INT64_MAX - since_write ? INT64_MAX : age + since_write;
    *now = s * 1000 + us / 1000;
    return true;
}

int hilock_client_hold_since(hilock_client *client, const char *name,
                             size_t name_len, const char *owner,
                             size_t owner_len, int64_t *since_ms,
                             int64_t *held_ms)
{
    if (since_ms != NULL)
        *since_ms = -1;
    if (held_ms != NULL)
        *held_ms = -1;
    if (client == NULL || name == NULL || owner == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    if (name_len == 0 || name_len > HILOCK_MAX_NAME_LEN)
        return hl_fail(HILOCK_EINVAL, "a name has 1..%d bytes",
                       HILOCK_MAX_NAME_LEN);
    /* "<client id>:<owner id>", the owner id in decimal digits, perhaps
     * with a suffix of the kind's (a read-write lock's). */
    size_t digits = 0;
    while (HILOCK_CLIENT_ID_LEN + 1 + digits < owner_len &&
           owner[HILOCK_CLIENT_ID_LEN + 1 + digits] >= '0' &&
           owner[HILOCK_CLIENT_ID_LEN + 1 + digits] <= '9')
        digits++;
    if (owner_len <= HILOCK_CLIENT_ID_LEN + 1 ||
        owner[HILOCK_CLIENT_ID_LEN] != ':' || digits == 0 || digits > 20)
        return hl_fail(HILOCK_ENOTFOUND,
                       "the owner is not one of this library's clients");
    char key[sizeof HL_HOLDS_PREFIX + HILOCK_CLIENT_ID_LEN + 1];
    id_key(HL_HOLDS_PREFIX, owner, HILOCK_CLIENT_ID_LEN, key);
    char *field = hl_malloc(digits + 1 + name_len);
    if (field == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    memcpy(field, owner + HILOCK_CLIENT_ID_LEN + 1, digits);
    field[digits] = ':';
    memcpy(field + digits + 1, name, name_len);
    char nkeys[12];
    size_t nkeys_len = (size_t)snprintf(nkeys, sizeof nkeys, "%d",
                                        hl_presence_since_def.nkeys);
    const char *argv[] = {"EVAL", since_lua, nkeys, key, field};
    size_t lens[] = {4, strlen(since_lua), nkeys_len, strlen(key),
                     digits + 1 + name_len};
    hilock_reply *reply = NULL;
    int rc = hilock_client_command(client, 5, argv, lens, &reply);
    hl_free(field);
    int64_t held = 0, now = 0;
    if (rc == HILOCK_OK && reply->type == HILOCK_REPLY_NIL)
        rc = hl_fail(HILOCK_ENOTFOUND,
                     "no start listed for this hold: a holder of another "
                     "library, a hold younger than its client's last "
                     "listing, or a client gone");
    else if (rc == HILOCK_OK && !since_from(reply, &held, &now))
        rc = hl_fail(HILOCK_EPROTO, "a list of holds holds no ages");
    else if (rc == HILOCK_OK) {
        if (since_ms != NULL)
            *since_ms = now - held;
        if (held_ms != NULL)
            *held_ms = held;
    }
    hilock_reply_free(reply);
    return rc;
}
