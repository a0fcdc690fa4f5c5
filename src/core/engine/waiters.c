#include "core/engine/waiters.h"

#include <stdio.h>
#include <string.h>

#include "core/engine/lock_handle.h"

#include "core/base/alloc.h"
#include "core/runtime/client_state.h"
#include "core/loop/io.h"
#include "core/base/map.h"

/* A channel nobody listens to stays subscribed this long: a lock
 * contended now is likely contended again soon, and subscribing anew
 * costs a round trip before the next waiter may try. */
#define HL_CHANNEL_LINGER_MS 5000

struct hl_wait_channel {
    /* The channel's subscriptions: one, or two where it is heard both
     * sharded and plain (hl_client_pubsubs_for), each with whether the
     * server confirmed or refused it. */
    hl_sub sub[HL_CLIENT_MAX_PUBSUBS];
    bool confirmed[HL_CLIENT_MAX_PUBSUBS];
    bool refused_by[HL_CLIENT_MAX_PUBSUBS];
    int nsubs;
    struct hl_waiters *reg;
    hl_map_entry *entry;
    hl_waiter *head; /* oldest first */
    hl_waiter *tail;
    hl_waiter *cursor; /* next waiter of a wake-all under way */
    int waking;        /* a wake-all is under way */
    uint64_t seq;      /* messages and confirmations heard */
    int handed_on;     /* our releases whose "0" already woke a waiter */
    hl_timer linger;   /* runs while nobody listens to a subscribed channel */
    int listeners;     /* waiters that asked to hear its messages */
    bool subscribed;   /* SUBSCRIBE sent (confirmed or not) */
    /* Every subscription confirmed or refused, and one confirmed: a
     * release announced from now on is heard. */
    bool ready;
    bool refused;      /* the server refused every SUBSCRIBE of it */
    bool wake_all;     /* every message wakes every waiter */
    /* Where other libraries announce the lock's releases, heard while
     * this client is first in the server's line (line_per_client kinds);
     * foreign[i].channel is NULL while not heard that way. */
    hl_sub foreign[HL_CLIENT_MAX_PUBSUBS];
    char *foreign_name; /* NULL: none given */
    size_t foreign_len;
    bool foreign_any; /* every message there is a release, not just "0" */
    /* The nonce of the last direct grant heard (HL_WAKE_MSG_GRANT) that
     * no acquire took yet: the attempt it names may still await its
     * answer. */
    char granted[HILOCK_CLIENT_ID_LEN + 22];
    size_t granted_len;
};

struct hl_waiters {
    struct hilock_client *client;
    hl_map channels;
    bool closing;
};

/* Heard only while a waiter of this client listens: every subscriber
 * there hears each of the lock's releases. */
static void foreign_stop(hl_wait_channel *ch)
{
    for (int i = 0; i < HL_CLIENT_MAX_PUBSUBS; i++)
        hl_pubsub_unsubscribe(&ch->foreign[i]);
}

static bool foreign_heard(const hl_wait_channel *ch)
{
    for (int i = 0; i < HL_CLIENT_MAX_PUBSUBS; i++)
        if (ch->foreign[i].channel != NULL)
            return true;
    return false;
}

static bool channel_ready(const hl_wait_channel *ch)
{
    bool any = false;
    for (int i = 0; i < ch->nsubs; i++) {
        if (!ch->confirmed[i] && !ch->refused_by[i])
            return false;
        any = any || ch->confirmed[i];
    }
    return any;
}

static bool channel_refused(const hl_wait_channel *ch)
{
    for (int i = 0; i < ch->nsubs; i++)
        if (!ch->refused_by[i])
            return false;
    return ch->nsubs > 0;
}

/* Drop the channel's subscriptions, confirmed or not. */
static void subs_drop(hl_wait_channel *ch)
{
    for (int i = 0; i < ch->nsubs; i++) {
        hl_pubsub_unsubscribe(&ch->sub[i]);
        ch->confirmed[i] = ch->refused_by[i] = false;
    }
    ch->nsubs = 0;
}

static void wake_first(hl_waiters *reg, hl_wait_channel *ch);

/* Another library released the lock ("0"); our releases say "1" there
 * and wake this client on its own channel when it is next.  Where the
 * other library says "1" too, every message counts, ours included: ours
 * go out there only when someone besides this client listens. */
static void on_foreign_event(hl_sub *sub, hl_sub_event ev, const char *msg,
                             size_t len)
{
    hl_wait_channel *ch = sub->data;
    if (ev != HL_SUB_MESSAGE || ch->reg->closing ||
        (!ch->foreign_any && (len != 1 || msg[0] != '0')))
        return;
    ch->seq++;
    wake_first(ch->reg, ch);
}

static void foreign_listen(hl_waiters *reg, hl_wait_channel *ch)
{
    if (foreign_heard(ch) || ch->foreign_name == NULL ||
        ch->listeners == 0 || reg->closing)
        return;
    hl_pubsub *ps[HL_CLIENT_MAX_PUBSUBS];
    int n = hl_client_pubsubs_for(reg->client, ch->foreign_name,
                                  ch->foreign_len, ps);
    /* Without it, the waiters' own attempts, at least every third of the
     * waiter timeout, find such a release. */
    for (int i = 0; i < n; i++)
        (void)hl_pubsub_subscribe(ps[i], &ch->foreign[i], ch->foreign_name,
                                  ch->foreign_len, on_foreign_event, ch);
}

static void channel_unsubscribe(hl_wait_channel *ch)
{
    foreign_stop(ch);
    hl_timer_stop(&ch->linger);
    subs_drop(ch);
    ch->subscribed = false;
    ch->ready = false;
    ch->refused = false;
}

static void channel_free(hl_waiters *reg, hl_wait_channel *ch)
{
    channel_unsubscribe(ch);
    hl_map_remove(&reg->channels, ch->entry);
    hl_free(ch->foreign_name);
    hl_free(ch);
}

/* Nobody listened for the linger: the line, if any, goes on unheard. */
static void on_linger_over(hl_timer *t)
{
    hl_wait_channel *ch = t->data;
    if (ch->listeners > 0 || ch->waking > 0 || ch->reg->closing)
        return;
    if (ch->head == NULL)
        channel_free(ch->reg, ch);
    else
        channel_unsubscribe(ch);
}

/* A channel with neither waiters nor a subscription goes at once; the
 * last listener leaving keeps the subscription a while. */
static void channel_maybe_free(hl_waiters *reg, hl_wait_channel *ch)
{
    if (ch->waking > 0 || reg->closing)
        return;
    if (ch->listeners == 0)
        foreign_stop(ch);
    if (ch->head == NULL && !ch->subscribed)
        channel_free(reg, ch);
    else if (ch->listeners == 0 && ch->subscribed && !ch->linger.armed)
        hl_timer_arm(&ch->linger, HL_MS(HL_CHANNEL_LINGER_MS));
}

static void wake(hl_waiter *w, hl_wake_reason why)
{
    if (w->trying && why == HL_WAKE_MESSAGE) {
        w->wake_pending = true;
        return;
    }
    w->fn(w, why);
}

/* Wake every listener (every waiter when the client closes); each may
 * remove itself or others meanwhile.  A waiter in line that does not
 * listen hears of its turn from the line, not from the channel. */
static void wake_all(hl_waiters *reg, hl_wait_channel *ch, hl_wake_reason why)
{
    ch->waking++;
    ch->cursor = ch->head;
    while (ch->cursor != NULL) {
        hl_waiter *w = ch->cursor;
        ch->cursor = w->next;
        if (w->listening || why == HL_WAKE_CLOSED)
            wake(w, why);
    }
    ch->waking--;
    channel_maybe_free(reg, ch);
}

/* The oldest listener not already trying: the one a release wakes. */
static hl_waiter *first_idle(const hl_wait_channel *ch)
{
    for (hl_waiter *w = ch->head; w != NULL; w = w->next)
        if (w->listening && !w->trying)
            return w;
    return NULL;
}

/* Wake first_idle; handed_on counts the wake as one a release's message
 * will not need to make.  Returns whether one was woken. */
static bool wake_idle(hl_waiters *reg, hl_wait_channel *ch, bool handed_on)
{
    hl_waiter *w = first_idle(ch);
    if (w == NULL)
        return false;
    if (handed_on)
        ch->handed_on++;
    ch->waking++;
    w->fn(w, HL_WAKE_MESSAGE);
    ch->waking--;
    channel_maybe_free(reg, ch);
    return true;
}

static void wake_first(hl_waiters *reg, hl_wait_channel *ch)
{
    if (wake_idle(reg, ch, false))
        return;
    for (hl_waiter *w = ch->head; w != NULL; w = w->next) {
        if (w->listening) {
            w->wake_pending = true;
            return;
        }
    }
}

static void on_sub_event(hl_sub *sub, hl_sub_event ev, const char *msg,
                         size_t len)
{
    hl_wait_channel *ch = sub->data;
    hl_waiters *reg = ch->reg;
    int i = (int)(sub - ch->sub);
    if (ev == HL_SUB_REFUSED) {
        /* Waiters here still retry at the lock's ttl, which is all the
         * design promises without a message, unless another subscription
         * of the channel hears it; the client counts the refusal so that
         * the reason for slow wake-ups can be found. */
        reg->client->subscribes_refused++;
        ch->refused_by[i] = true;
        ch->confirmed[i] = false;
        ch->refused = channel_refused(ch);
        ch->ready = channel_ready(ch);
        char why[256];
        snprintf(why, sizeof why, "%.*s", (int)(len < 255 ? len : 255),
                 msg ? msg : "");
        hl_client_event(reg->client, HILOCK_EVENT_SUBSCRIBE_REFUSED, NULL,
                        why, NULL, 0);
        return;
    }
    if (ev == HL_SUB_MESSAGE && len == sizeof HL_WAKE_MSG_FIRST - 1 &&
        memcmp(msg, HL_WAKE_MSG_FIRST, len) == 0) {
        /* First in the server's line now; nothing was released. */
        foreign_listen(reg, ch);
        return;
    }
    if (ev == HL_SUB_MESSAGE && len > 1 &&
        len - 1 <= sizeof ch->granted &&
        memcmp(msg, HL_WAKE_MSG_GRANT, sizeof HL_WAKE_MSG_GRANT - 1) == 0) {
        /* The lock is this client's now: nothing for the others to try,
         * and no more first in line.  The acquire whose attempt it names
         * takes it, now or when that attempt's answer comes. */
        foreign_stop(ch);
        memcpy(ch->granted, msg + 1, len - 1);
        ch->granted_len = len - 1;
        ch->waking++;
        ch->cursor = ch->head;
        while (ch->cursor != NULL && ch->granted_len > 0) {
            hl_waiter *w = ch->cursor;
            ch->cursor = w->next;
            w->fn(w, HL_WAKE_GRANT);
        }
        ch->waking--;
        channel_maybe_free(reg, ch);
        return;
    }
    ch->seq++;
    switch (ev) {
    case HL_SUB_READY:
        ch->confirmed[i] = true;
        ch->refused_by[i] = false;
        ch->ready = channel_ready(ch);
        ch->refused = false;
        /* Messages may have been lost meanwhile: count nothing as owed. */
        ch->handed_on = 0;
        wake_all(reg, ch, HL_WAKE_READY);
        break;
    case HL_SUB_MESSAGE:
        if (len == 1 && msg[0] == '0')
            foreign_stop(ch); /* next: it will hold, or hear "h" again */
        if (ch->wake_all)
            wake_all(reg, ch, HL_WAKE_MESSAGE);
        else if (len == 1 && msg[0] == '0' && ch->handed_on > 0)
            ch->handed_on--; /* its waiter was woken with the release */
        else if (len == 1 && msg[0] == '0')
            wake_first(reg, ch);
        else
            wake_all(reg, ch, HL_WAKE_MESSAGE);
        break;
    case HL_SUB_CLOSED:
        /* The client is closing: the channel's other subscription goes
         * too, so that nothing of it stays attached. */
        subs_drop(ch);
        ch->ready = false;
        ch->subscribed = false;
        wake_all(reg, ch, HL_WAKE_CLOSED);
        break;
    case HL_SUB_REFUSED:
        break;
    }
}

static bool take_grant(hl_wait_channel *ch, const char *nonce, size_t len)
{
    if (ch == NULL || len == 0 || ch->granted_len != len ||
        memcmp(ch->granted, nonce, len) != 0)
        return false;
    ch->granted_len = 0;
    return true;
}

bool hl_waiter_take_grant(hl_waiter *w, const char *nonce, size_t len)
{
    return take_grant(w->chan, nonce, len);
}

bool hl_waiters_take_grant(hl_waiters *reg, const char *channel, size_t len,
                           const char *nonce, size_t nonce_len)
{
    if (reg == NULL)
        return false;
    hl_map_entry *e = hl_map_find(&reg->channels, channel, len);
    return e != NULL && take_grant(e->value, nonce, nonce_len);
}

hl_waiters *hl_waiters_create(struct hilock_client *client)
{
    hl_waiters *reg = hl_calloc(1, sizeof *reg);
    if (reg != NULL)
        reg->client = client;
    return reg;
}

void hl_waiters_free(hl_waiters *reg)
{
    if (reg == NULL)
        return;
    /* Every waiter hears CLOSED and removes itself; channels stay put
     * until the end, so walking the map is safe. */
    reg->closing = true;
    size_t cur;
    for (hl_map_entry *e = hl_map_first(&reg->channels, &cur); e;
         e = hl_map_next(&reg->channels, e, &cur)) {
        hl_wait_channel *ch = e->value;
        wake_all(reg, ch, HL_WAKE_CLOSED);
    }
    for (hl_map_entry *e = hl_map_first(&reg->channels, &cur); e;
         e = hl_map_next(&reg->channels, e, &cur)) {
        hl_wait_channel *ch = e->value;
        /* Waiters added during the wake-up (none should be) lose their
         * channel here. */
        for (hl_waiter *w = ch->head; w; w = w->next) {
            w->chan = NULL;
            w->listening = false;
        }
        hl_timer_stop(&ch->linger);
        subs_drop(ch);
        foreign_stop(ch);
        hl_free(ch->foreign_name);
        hl_free(ch);
    }
    hl_map_clear(&reg->channels);
    hl_free(reg);
}

int hl_waiter_join(hl_waiters *reg, hl_waiter *w, const char *channel,
                   size_t len, bool wake_all, hl_wake_fn *fn, void *data)
{
    w->fn = fn;
    w->data = data;
    w->trying = false;
    w->wake_pending = false;
    w->listening = false;
    hl_map_entry *e = hl_map_find(&reg->channels, channel, len);
    hl_wait_channel *ch = e ? e->value : NULL;
    if (ch == NULL) {
        ch = hl_calloc(1, sizeof *ch);
        if (ch == NULL)
            return -1;
        ch->reg = reg;
        ch->wake_all = wake_all;
        hl_timer_init(&ch->linger, reg->client->loop, on_linger_over, ch);
        ch->entry = hl_map_insert(&reg->channels, channel, len, ch);
        if (ch->entry == NULL) {
            hl_free(ch);
            return -1;
        }
    }
    w->chan = ch;
    w->next = NULL;
    w->prev = ch->tail;
    if (ch->tail)
        ch->tail->next = w;
    else
        ch->head = w;
    ch->tail = w;
    return 0;
}

int hl_waiter_listen(hl_waiters *reg, hl_waiter *w)
{
    hl_wait_channel *ch = w->chan;
    if (ch == NULL)
        return -1;
    if (!ch->subscribed) {
        hl_pubsub *ps[HL_CLIENT_MAX_PUBSUBS];
        int n = hl_client_pubsubs_for(reg->client, ch->entry->key,
                                      ch->entry->keylen, ps);
        if (n == 0)
            return -1;
        for (int i = 0; i < n; i++) {
            int rc = hl_pubsub_subscribe(ps[i], &ch->sub[i], ch->entry->key,
                                         ch->entry->keylen, on_sub_event,
                                         ch);
            if (rc < 0) {
                subs_drop(ch);
                return -1;
            }
            ch->nsubs = i + 1;
            ch->confirmed[i] = rc == 1;
            ch->refused_by[i] = false;
        }
        ch->subscribed = true;
        ch->ready = channel_ready(ch);
    }
    if (!w->listening) {
        w->listening = true;
        ch->listeners++;
        hl_timer_stop(&ch->linger);
    }
    return ch->ready ? 1 : 0;
}

int hl_waiter_add(hl_waiters *reg, hl_waiter *w, const char *channel,
                  size_t len, bool wake_all, hl_wake_fn *fn, void *data)
{
    if (hl_waiter_join(reg, w, channel, len, wake_all, fn, data) != 0)
        return -1;
    int rc = hl_waiter_listen(reg, w);
    if (rc < 0)
        hl_waiter_remove(reg, w, false);
    return rc;
}

int hl_waiter_foreign(hl_waiters *reg, hl_waiter *w, const char *channel,
                      size_t len, bool any_message, bool first)
{
    hl_wait_channel *ch = w->chan;
    if (ch == NULL)
        return -1;
    if (ch->foreign_name == NULL) {
        ch->foreign_name = hl_malloc(len + 1);
        if (ch->foreign_name == NULL)
            return -1;
        memcpy(ch->foreign_name, channel, len);
        ch->foreign_name[len] = '\0';
        ch->foreign_len = len;
        ch->foreign_any = any_message;
    }
    if (first)
        foreign_listen(reg, ch);
    return 0;
}

bool hl_waiter_listening(const hl_waiter *w)
{
    return w->listening;
}

void hl_waiter_remove(hl_waiters *reg, hl_waiter *w, bool pass_on)
{
    hl_wait_channel *ch = w->chan;
    if (ch == NULL)
        return;
    if (ch->cursor == w)
        ch->cursor = w->next;
    if (w->prev)
        w->prev->next = w->next;
    else
        ch->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        ch->tail = w->prev;
    w->prev = w->next = NULL;
    w->chan = NULL;
    if (w->listening) {
        w->listening = false;
        ch->listeners--;
    }
    bool pass = pass_on && ch->head != NULL && !reg->closing;
    /* Frees only an empty channel, which has nobody to pass on to. */
    channel_maybe_free(reg, ch);
    if (pass)
        wake_first(reg, ch);
}

void hl_waiter_trying(hl_waiter *w)
{
    w->trying = true;
    w->wake_pending = false;
}

bool hl_waiter_done_trying(hl_waiter *w)
{
    w->trying = false;
    bool pending = w->wake_pending;
    w->wake_pending = false;
    return pending;
}

hl_waiter *hl_waiters_next_idle(hl_waiters *reg, const char *channel,
                                size_t len)
{
    hl_map_entry *e = reg ? hl_map_find(&reg->channels, channel, len) : NULL;
    hl_wait_channel *ch = e ? e->value : NULL;
    return ch != NULL && ch->ready ? first_idle(ch) : NULL;
}

bool hl_waiters_hand_on(hl_waiters *reg, const char *channel, size_t len)
{
    hl_map_entry *e = reg ? hl_map_find(&reg->channels, channel, len) : NULL;
    hl_wait_channel *ch = e ? e->value : NULL;
    return ch != NULL && ch->ready && wake_idle(reg, ch, true);
}

void hl_waiters_hand_on_undone(hl_waiters *reg, const char *channel,
                               size_t len)
{
    hl_map_entry *e = reg ? hl_map_find(&reg->channels, channel, len) : NULL;
    hl_wait_channel *ch = e ? e->value : NULL;
    if (ch == NULL)
        return;
    if (ch->handed_on > 0)
        ch->handed_on--;
    /* Whoever waits must not wait on a message that will not come. */
    wake_first(reg, ch);
}

bool hl_waiters_queued(hl_waiters *reg, const char *channel, size_t len)
{
    hl_map_entry *e = reg ? hl_map_find(&reg->channels, channel, len) : NULL;
    hl_wait_channel *ch = e ? e->value : NULL;
    return ch != NULL && ch->ready && ch->listeners > 0;
}

void hl_waiters_hand_on_unheard(hl_waiters *reg, const char *channel,
                                size_t len)
{
    hl_map_entry *e = reg ? hl_map_find(&reg->channels, channel, len) : NULL;
    hl_wait_channel *ch = e ? e->value : NULL;
    if (ch != NULL && ch->handed_on > 0)
        ch->handed_on--;
}

void hl_waiters_freed_here(hl_waiters *reg, const char *channel, size_t len)
{
    hl_map_entry *e = reg ? hl_map_find(&reg->channels, channel, len) : NULL;
    hl_wait_channel *ch = e ? e->value : NULL;
    if (ch == NULL || reg->closing)
        return;
    ch->seq++;
    wake_first(reg, ch);
}

bool hl_waiters_known(hl_waiters *reg, const char *channel, size_t len)
{
    return reg != NULL && hl_map_find(&reg->channels, channel, len) != NULL;
}

bool hl_waiters_others(hl_waiters *reg, const char *channel, size_t len,
                       const hl_waiter *self)
{
    hl_map_entry *e = reg ? hl_map_find(&reg->channels, channel, len) : NULL;
    hl_wait_channel *ch = e ? e->value : NULL;
    if (ch == NULL)
        return false;
    for (hl_waiter *w = ch->head; w != NULL; w = w->next)
        if (w != self)
            return true;
    return false;
}

uint64_t hl_waiters_seq(hl_waiters *reg, const char *channel, size_t len)
{
    hl_map_entry *e = reg ? hl_map_find(&reg->channels, channel, len) : NULL;
    hl_wait_channel *ch = e ? e->value : NULL;
    return ch && ch->ready ? ch->seq : HL_WAIT_SEQ_NONE;
}

uint64_t hl_waiter_seq(const hl_waiter *w)
{
    return w->chan && w->chan->ready ? w->chan->seq : HL_WAIT_SEQ_NONE;
}

bool hl_waiter_refused(const hl_waiter *w)
{
    return w->chan != NULL && w->chan->refused;
}

static void waiters_close(hilock_client *c)
{
    hl_waiters_free(c->waiters);
    c->waiters = NULL;
}

static const hl_client_part waiters_part = {.rank = 1,
                                            .close = waiters_close};

hl_waiters *hl_client_waiters(hilock_client *c)
{
    if (c->waiters != NULL || c->closed)
        return c->waiters;
    c->waiters = hl_waiters_create(c);
    if (c->waiters != NULL && hl_client_attach_part(c, &waiters_part) != 0) {
        hl_waiters_free(c->waiters);
        c->waiters = NULL;
    }
    return c->waiters;
}

hl_waiter *hl_waiter_line_head(const hl_waiter *w)
{
    return w->chan != NULL ? w->chan->head : NULL;
}

hl_waiter *hl_waiters_head(hl_waiters *reg, const char *channel, size_t len)
{
    hl_map_entry *e = reg ? hl_map_find(&reg->channels, channel, len) : NULL;
    hl_wait_channel *ch = e ? e->value : NULL;
    return ch != NULL ? ch->head : NULL;
}
