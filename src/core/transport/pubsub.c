#include "core/transport/pubsub.h"

#include <string.h>

#include "core/base/alloc.h"
#include "core/transport/conn.h"
#include "hilock/error.h"
#include "core/base/map.h"

struct hl_channel {
    hl_pubsub *ps;
    hl_map_entry *entry; /* key = channel name */
    hl_sub *subs;
    hl_sub *cursor;     /* next listener of the delivery under way */
    int delivering;     /* a delivery is under way */
    hl_channel *next_idle; /* link while forgetting or moving */
    hl_pubsub *move_to;    /* while moving */
    int awaiting_subscribe;
    int awaiting_unsubscribe;
    bool confirmed;
    /* The server dropped or redirected it (sharded): listened to, not
     * subscribed, until moved or subscribed again. */
    bool misplaced;
};

/* A SUBSCRIBE or UNSUBSCRIBE sent and not yet answered.  An error reply
 * names no channel, so the order they left in is the only way to tell
 * whose it is. */
typedef struct sent_verb {
    hl_channel *ch;
    bool subscribe;
} sent_verb;

struct hl_pubsub {
    hl_conn *conn;
    bool sharded;
    void (*on_misplaced)(void *data);
    void *data;
    hl_map channels;
    sent_verb *sent; /* ring, oldest at sent_head */
    size_t sent_head, sent_len, sent_cap;
    int busy;          /* connection events being handled */
    bool closing;      /* freed: no channel is forgotten until the end */
    bool free_pending; /* freed inside an event: finish on the way out */
    bool up;
};

static int sent_push(hl_pubsub *ps, hl_channel *ch, bool subscribe)
{
    if (ps->sent_len == ps->sent_cap) {
        size_t cap = ps->sent_cap ? 2 * ps->sent_cap : 8;
        sent_verb *n = hl_malloc(cap * sizeof *n);
        if (n == NULL)
            return -1;
        for (size_t i = 0; i < ps->sent_len; i++)
            n[i] = ps->sent[(ps->sent_head + i) % ps->sent_cap];
        hl_free(ps->sent);
        ps->sent = n;
        ps->sent_cap = cap;
        ps->sent_head = 0;
    }
    ps->sent[(ps->sent_head + ps->sent_len) % ps->sent_cap] =
        (sent_verb){ch, subscribe};
    ps->sent_len++;
    return 0;
}

static bool sent_pop(hl_pubsub *ps, sent_verb *out)
{
    if (ps->sent_len == 0)
        return false;
    *out = ps->sent[ps->sent_head];
    ps->sent_head = (ps->sent_head + 1) % ps->sent_cap;
    ps->sent_len--;
    return true;
}

static int send_one(hl_pubsub *ps, bool subscribe, hl_channel *ch)
{
    static const char *const verbs[2][2] = {
        {"UNSUBSCRIBE", "SUBSCRIBE"}, {"SUNSUBSCRIBE", "SSUBSCRIBE"}};
    const char *verb = verbs[ps->sharded][subscribe];
    const char *argv[] = {verb, ch->entry->key};
    size_t lens[] = {strlen(verb), ch->entry->keylen};
    /* Room first: a command whose answer could not be matched is not
     * sent at all (a SUBSCRIBE goes out again on reconnect). */
    if (sent_push(ps, ch, subscribe) != 0)
        return -1;
    int rc = hl_conn_send(ps->conn, 2, argv, lens);
    if (rc != 0)
        ps->sent_len--;
    return rc;
}

static void channel_forget(hl_pubsub *ps, hl_channel *ch)
{
    hl_map_remove(&ps->channels, ch->entry);
    hl_free(ch);
}

static void tell_misplaced(hl_pubsub *ps)
{
    if (ps->on_misplaced && !ps->closing)
        ps->on_misplaced(ps->data);
}

static void channel_maybe_forget(hl_pubsub *ps, hl_channel *ch)
{
    if (!ps->closing && ch->subs == NULL && ch->awaiting_subscribe == 0 &&
        ch->awaiting_unsubscribe == 0 && ch->delivering == 0)
        channel_forget(ps, ch);
}

/* Call fn for every listener; listeners may detach themselves or others
 * meanwhile, which moves the cursor past them.  Deliveries never nest:
 * they come from the read path, which no callback can enter. */
static void deliver(hl_pubsub *ps, hl_channel *ch, hl_sub_event ev,
                    const char *msg, size_t len)
{
    ch->delivering++;
    ch->cursor = ch->subs;
    while (ch->cursor != NULL) {
        hl_sub *s = ch->cursor;
        ch->cursor = s->next;
        s->fn(s, ev, msg, len);
    }
    ch->delivering--;
    channel_maybe_forget(ps, ch);
}

static hl_channel *channel_of(hl_pubsub *ps, const hilock_reply *name)
{
    if (name == NULL || name->type != HILOCK_REPLY_STRING)
        return NULL;
    hl_map_entry *e = hl_map_find(&ps->channels, name->str, name->len);
    return e ? e->value : NULL;
}

static bool redirected(const char *error)
{
    static const char *const prefixes[] = {"MOVED ", "ASK ", "TRYAGAIN",
                                           "CLUSTERDOWN"};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (strncmp(error, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

/* An error reply answers the oldest command still unanswered.  For a
 * SUBSCRIBE that is a refusal, nearly always by the server's ACL: its
 * listeners hear of it, or they would wait for a confirmation that never
 * comes. */
static void on_error_reply(hl_pubsub *ps, const hilock_reply *r)
{
    sent_verb v;
    if (!sent_pop(ps, &v))
        return;
    hl_channel *ch = v.ch;
    if (!v.subscribe) {
        if (ch->awaiting_unsubscribe > 0)
            ch->awaiting_unsubscribe--;
        channel_maybe_forget(ps, ch);
        return;
    }
    if (ch->awaiting_subscribe > 0)
        ch->awaiting_subscribe--;
    if (ps->sharded && r->str && redirected(r->str)) {
        /* The slot is served elsewhere, or not at the moment: not the
         * ACL's refusal, and the listeners still want their messages. */
        ch->misplaced = ch->subs != NULL && !ch->confirmed;
        channel_maybe_forget(ps, ch);
        tell_misplaced(ps);
    } else if (ch->subs && !ch->confirmed)
        deliver(ps, ch, HL_SUB_REFUSED, r->str ? r->str : "",
                r->str ? r->len : 0);
    else
        channel_maybe_forget(ps, ch);
}

static void on_push(hl_pubsub *ps, hilock_reply *r)
{
    if (r->type == HILOCK_REPLY_ERROR) {
        on_error_reply(ps, r);
        return;
    }
    if (r->type != HILOCK_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != HILOCK_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str;
    /* A sharded connection hears the same words with an "s" before. */
    if (ps->sharded) {
        if (kind[0] != 's')
            return;
        kind++;
    }
    hl_channel *ch = channel_of(ps, r->element[1]);
    /* Each SUBSCRIBE and UNSUBSCRIBE names one channel, so it gets exactly
     * one answer: this one, or an error.  An unsubscribe nobody asked
     * for is the server dropping a sharded channel whose slot left it. */
    sent_verb answered;
    if (strcmp(kind, "unsubscribe") == 0 &&
        (ch == NULL || ch->awaiting_unsubscribe == 0)) {
        if (ch != NULL && ps->sharded) {
            ch->confirmed = false;
            ch->misplaced = ch->subs != NULL;
            channel_maybe_forget(ps, ch);
            tell_misplaced(ps);
        }
        return;
    }
    if (strcmp(kind, "subscribe") == 0 || strcmp(kind, "unsubscribe") == 0)
        sent_pop(ps, &answered);
    if (ch == NULL)
        return;
    if (strcmp(kind, "message") == 0) {
        const hilock_reply *payload = r->element[2];
        if (ch->subs && payload->type == HILOCK_REPLY_STRING)
            deliver(ps, ch, HL_SUB_MESSAGE, payload->str, payload->len);
    } else if (strcmp(kind, "subscribe") == 0) {
        if (ch->awaiting_subscribe > 0)
            ch->awaiting_subscribe--;
        if (ch->awaiting_subscribe == 0 && ch->subs && !ch->confirmed) {
            ch->confirmed = true;
            deliver(ps, ch, HL_SUB_READY, NULL, 0);
        } else {
            channel_maybe_forget(ps, ch);
        }
    } else if (strcmp(kind, "unsubscribe") == 0) {
        if (ch->awaiting_unsubscribe > 0)
            ch->awaiting_unsubscribe--;
        channel_maybe_forget(ps, ch);
    }
}

static void on_up(hl_pubsub *ps)
{
    ps->up = true;
    size_t cur;
    for (hl_map_entry *e = hl_map_first(&ps->channels, &cur); e;
         e = hl_map_next(&ps->channels, e, &cur)) {
        hl_channel *ch = e->value;
        ch->misplaced = false;
        if (ch->subs && send_one(ps, true, ch) == 0)
            ch->awaiting_subscribe = 1;
    }
}

static void on_down(hl_pubsub *ps)
{
    ps->up = false;
    ps->sent_len = 0; /* unanswered now for good */
    /* Collect first: forgetting entries while walking the map is not
     * allowed. */
    hl_channel *idle = NULL;
    size_t cur;
    for (hl_map_entry *e = hl_map_first(&ps->channels, &cur); e;
         e = hl_map_next(&ps->channels, e, &cur)) {
        hl_channel *ch = e->value;
        ch->awaiting_subscribe = ch->awaiting_unsubscribe = 0;
        ch->confirmed = false;
        if (ch->subs == NULL && ch->delivering == 0) {
            ch->next_idle = idle;
            idle = ch;
        }
    }
    while (idle) {
        hl_channel *next = idle->next_idle;
        channel_forget(ps, idle);
        idle = next;
    }
    /* A cluster node that went away may have failed over; its plain
     * channels too are better heard on the node that replaced it. */
    tell_misplaced(ps);
}

static void pubsub_release(hl_pubsub *ps);

static void on_conn_event(hl_conn *conn, hl_conn_event ev, int status,
                          const char *detail, hilock_reply *reply, void *data)
{
    hl_pubsub *ps = data;
    (void)conn;
    (void)status;
    (void)detail;
    ps->busy++;
    switch (ev) {
    case HL_CONN_UP:
        on_up(ps);
        break;
    case HL_CONN_DOWN:
        on_down(ps);
        break;
    case HL_CONN_PUSH:
        on_push(ps, reply);
        hilock_reply_free(reply);
        break;
    }
    if (--ps->busy == 0 && ps->free_pending)
        pubsub_release(ps);
}

hl_pubsub *hl_pubsub_create(const hl_pubsub_config *pc)
{
    hl_pubsub *ps = hl_calloc(1, sizeof *ps);
    if (ps == NULL)
        return NULL;
    ps->sharded = pc->sharded;
    ps->on_misplaced = pc->on_misplaced;
    ps->data = pc->data;
    hl_conn_config cfg = {.loop = pc->loop,
                          .opts = pc->opts,
                          .ssl_ctx = pc->ssl_ctx,
                          .push_mode = true,
                          .keepalive = true,
                          .on_event = on_conn_event,
                          .data = ps};
    ps->conn = hl_conn_create(&cfg);
    if (ps->conn == NULL) {
        hl_free(ps);
        return NULL;
    }
    return ps;
}

static void detach(hl_channel *ch, hl_sub *sub)
{
    if (ch->cursor == sub)
        ch->cursor = sub->next;
    if (sub->prev)
        sub->prev->next = sub->next;
    else
        ch->subs = sub->next;
    if (sub->next)
        sub->next->prev = sub->prev;
    sub->channel = NULL;
    sub->next = sub->prev = NULL;
}

static void pubsub_release(hl_pubsub *ps)
{
    size_t cur;
    for (hl_map_entry *e = hl_map_first(&ps->channels, &cur); e;
         e = hl_map_next(&ps->channels, e, &cur))
        hl_free(e->value);
    hl_map_clear(&ps->channels);
    hl_free(ps->sent);
    hl_free(ps);
}

void hl_pubsub_free(hl_pubsub *ps)
{
    if (ps == NULL || ps->closing)
        return;
    ps->closing = true;
    hl_conn_free(ps->conn);
    /* Detach every listener, telling each; a listener may detach others.
     * Channels stay until the end, so walking the map is safe. */
    size_t cur;
    for (hl_map_entry *e = hl_map_first(&ps->channels, &cur); e;
         e = hl_map_next(&ps->channels, e, &cur)) {
        hl_channel *ch = e->value;
        while (ch->subs != NULL) {
            hl_sub *s = ch->subs;
            detach(ch, s);
            s->fn(s, HL_SUB_CLOSED, NULL, 0);
        }
    }
    if (ps->busy > 0)
        ps->free_pending = true; /* inside a delivery: finish on unwind */
    else
        pubsub_release(ps);
}

static void attach(hl_channel *ch, hl_sub *sub, hl_sub_fn *fn, void *data)
{
    sub->fn = fn;
    sub->data = data;
    sub->channel = ch;
    sub->prev = NULL;
    sub->next = ch->subs;
    if (ch->subs)
        ch->subs->prev = sub;
    ch->subs = sub;
}

int hl_pubsub_subscribe(hl_pubsub *ps, hl_sub *sub, const char *name,
                        size_t len, hl_sub_fn *fn, void *data)
{
    hl_map_entry *e = hl_map_find(&ps->channels, name, len);
    hl_channel *ch = e ? e->value : NULL;
    if (ch == NULL) {
        ch = hl_calloc(1, sizeof *ch);
        if (ch == NULL)
            return -HILOCK_ENOMEM;
        ch->ps = ps;
        ch->entry = hl_map_insert(&ps->channels, name, len, ch);
        if (ch->entry == NULL) {
            hl_free(ch);
            return -HILOCK_ENOMEM;
        }
    }
    bool first = ch->subs == NULL;
    attach(ch, sub, fn, data);
    if (first && ps->up) {
        /* A SUBSCRIBE that fails to go out is sent again on reconnect. */
        if (send_one(ps, true, ch) == 0)
            ch->awaiting_subscribe++;
        ch->confirmed = false;
        ch->misplaced = false;
    }
    return ch->confirmed ? 1 : 0;
}

/* The last listener left ch. */
static void channel_unlistened(hl_pubsub *ps, hl_channel *ch)
{
    bool subscribed = !ch->misplaced;
    ch->confirmed = false;
    ch->misplaced = false;
    if (subscribed && ps->up && send_one(ps, false, ch) == 0)
        ch->awaiting_unsubscribe++;
    channel_maybe_forget(ps, ch);
}

void hl_pubsub_unsubscribe(hl_sub *sub)
{
    hl_channel *ch = sub->channel;
    if (ch == NULL)
        return;
    hl_pubsub *ps = ch->ps;
    detach(ch, sub);
    if (ch->subs != NULL || ps->closing)
        return;
    channel_unlistened(ps, ch);
}

/* Hand every listener of ch to the same channel on to.  ch is pinned
 * (delivering) by the caller: a listener told READY may detach others. */
static void channel_move(hl_channel *ch, hl_pubsub *to)
{
    const char *name = ch->entry->key;
    size_t len = ch->entry->keylen;
    while (ch->subs != NULL) {
        hl_sub *s = ch->subs;
        hl_sub_fn *fn = s->fn;
        void *data = s->data;
        detach(ch, s);
        int rc = hl_pubsub_subscribe(to, s, name, len, fn, data);
        if (rc < 0) {
            /* Out of memory: it stays here, to be moved by a later
             * call, rather than listen nowhere. */
            attach(ch, s, fn, data);
            ch->misplaced = true;
            return;
        }
        /* Its new node confirmed the channel before: no HL_SUB_READY
         * would come, yet the listener may have missed messages. */
        if (rc == 1)
            fn(s, HL_SUB_READY, NULL, 0);
    }
}

void hl_pubsub_move(hl_pubsub *ps, hl_pubsub_dest_fn *dest, void *data)
{
    /* Collect first: moving forgets channels, which walking the map does
     * not allow; the mark keeps each collected one alive meanwhile. */
    hl_channel *moving = NULL;
    size_t cur;
    for (hl_map_entry *e = hl_map_first(&ps->channels, &cur); e;
         e = hl_map_next(&ps->channels, e, &cur)) {
        hl_channel *ch = e->value;
        if (ch->subs == NULL || ch->delivering > 0)
            continue;
        hl_pubsub *to = dest(data, e->key, e->keylen);
        if (to == NULL || to == ps)
            continue;
        ch->delivering++;
        ch->next_idle = moving;
        ch->move_to = to;
        moving = ch;
    }
    while (moving != NULL) {
        hl_channel *ch = moving;
        moving = ch->next_idle;
        channel_move(ch, ch->move_to);
        ch->delivering--;
        if (ch->subs == NULL)
            channel_unlistened(ps, ch);
    }
}

void hl_pubsub_resubscribe(hl_pubsub *ps)
{
    if (!ps->up)
        return;
    size_t cur;
    for (hl_map_entry *e = hl_map_first(&ps->channels, &cur); e;
         e = hl_map_next(&ps->channels, e, &cur)) {
        hl_channel *ch = e->value;
        if (!ch->misplaced || ch->subs == NULL)
            continue;
        ch->misplaced = false;
        if (send_one(ps, true, ch) == 0)
            ch->awaiting_subscribe++;
    }
}

bool hl_pubsub_is_up(const hl_pubsub *ps) { return ps->up; }

void hl_pubsub_reconnect(hl_pubsub *ps, const char *why)
{
    hl_conn_retarget(ps->conn, HILOCK_EIO, why);
}

size_t hl_pubsub_channel_count(const hl_pubsub *ps)
{
    size_t n = 0, cur;
    for (hl_map_entry *e = hl_map_first(&ps->channels, &cur); e;
         e = hl_map_next(&ps->channels, e, &cur))
        if (((hl_channel *)e->value)->subs)
            n++;
    return n;
}
