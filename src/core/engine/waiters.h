/* The waiter registry: lock operations waiting for a lock to be released
 * listen on its channel through one shared subscription per channel per
 * client.  A "0" message wakes one listener (the oldest not already
 * trying), any other message wakes all; every (re)confirmed subscription
 * wakes all, since messages sent while unsubscribed are lost.  A channel
 * shared with Redisson on a cluster may be heard two ways, sharded and
 * plain (hilock_options_set_redisson_pubsub): each way's confirmation
 * wakes all, and a message heard both ways wakes twice.
 *
 * The waiters of one channel also form a line, oldest first, which kinds
 * whose waiters go in turn (hl_kind.in_line) walk.  Such a waiter joins
 * the line without listening, since its turn comes from the one before
 * it, and listens only once the server has told it the lock is held: a
 * line served from within the client then costs the server no message
 * to this client and the client no wake-up per release.  Loop thread
 * only. */
#ifndef HL_WAITERS_H
#define HL_WAITERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/transport/pubsub.h"

struct hilock_client;

/* The client's waiter registry, created on first use; NULL when memory
 * runs out or the client is closed.  Loop thread only. */
struct hl_waiters *hl_client_waiters(struct hilock_client *client);

struct hilock_client;
typedef struct hl_waiters hl_waiters;
typedef struct hl_waiter hl_waiter;
typedef struct hl_wait_channel hl_wait_channel;

typedef enum hl_wake_reason {
    HL_WAKE_MESSAGE, /* the lock was released */
    HL_WAKE_READY,   /* subscribed (again): try now */
    HL_WAKE_GRANT,   /* a release gave the lock to an attempt of this
                      * client outright (hl_waiter_take_grant) */
    HL_WAKE_CLOSED   /* the client is closing: give up */
} hl_wake_reason;

typedef void hl_wake_fn(hl_waiter *w, hl_wake_reason why);

struct hl_waiter {
    hl_waiter *prev;
    hl_waiter *next;
    hl_wait_channel *chan; /* NULL when not registered */
    hl_wake_fn *fn;
    void *data;
    bool trying;       /* an attempt is in flight: a wake is kept for later */
    bool wake_pending; /* woken while trying */
    bool listening;    /* hears the channel's messages */
};

hl_waiters *hl_waiters_create(struct hilock_client *client);
/* Every registered waiter gets HL_WAKE_CLOSED and is removed. */
void hl_waiters_free(hl_waiters *reg);

/* Register w on a channel.  With wake_all (fixed by the channel's first
 * waiter) every message wakes every waiter: for channels whose waiters
 * want different things (readers and writers), where the one a "0" would
 * wake may not be the one that can go.  Returns 1 when the subscription
 * is confirmed already (attempt now), 0 when HL_WAKE_READY will come, -1
 * on ENOMEM. */
int hl_waiter_add(hl_waiters *reg, hl_waiter *w, const char *channel,
                  size_t len, bool wake_all, hl_wake_fn *fn, void *data);
/* Join the channel's line without listening: no message wakes w, only
 * HL_WAKE_CLOSED.  Returns 0, or -1 on ENOMEM. */
int hl_waiter_join(hl_waiters *reg, hl_waiter *w, const char *channel,
                   size_t len, bool wake_all, hl_wake_fn *fn, void *data);
/* Let a waiter in line listen from now on (idempotent), subscribing the
 * channel if nobody does yet.  Returns as hl_waiter_add. */
int hl_waiter_listen(hl_waiters *reg, hl_waiter *w);
bool hl_waiter_listening(const hl_waiter *w);
/* Unregister (idempotent).  pass_on: the waiter leaves without the lock
 * (cancelled, timed out, failed), so the next in line is woken to look
 * again: a waiter that joined the queue without trying relies on it. */
void hl_waiter_remove(hl_waiters *reg, hl_waiter *w, bool pass_on);

/* A release that will free the lock has just been queued: wake the
 * oldest idle waiter now, so that its attempt leaves in the same write,
 * right behind the release, instead of a round trip later.  The release's
 * own "0" message is then not acted on when it comes.  Returns whether a
 * waiter was woken. */
bool hl_waiters_hand_on(hl_waiters *reg, const char *channel, size_t len);

/* The waiter hl_waiters_hand_on would wake, left as it is; NULL when
 * there is none, or the channel's subscription is not confirmed. */
hl_waiter *hl_waiters_next_idle(hl_waiters *reg, const char *channel,
                                size_t len);

/* The release behind a hand-on did not publish (it failed, or did not
 * free the lock): stop expecting its message, and wake the oldest idle
 * waiter so nobody waits for it. */
void hl_waiters_hand_on_undone(hl_waiters *reg, const char *channel,
                               size_t len);

/* The release behind a hand-on freed the lock but sent its wake-up to
 * another client, or to none: stop expecting its message; the woken
 * waiter's attempt is already on its way. */
void hl_waiters_hand_on_unheard(hl_waiters *reg, const char *channel,
                                size_t len);

/* The waiter's channel belongs to a client that waits in a line on the
 * server; channel (copied once) is where other libraries announce the
 * lock's releases: "0", or with any_message every message.  With first,
 * the client is first in that line, and hears that channel until its own
 * next "0" or until nobody listens; HL_WAKE_MSG_FIRST on its own channel
 * starts it again.  0, or -1 when memory runs out. */
int hl_waiter_foreign(hl_waiters *reg, hl_waiter *w, const char *channel,
                      size_t len, bool any_message, bool first);

/* This client freed the lock and no message will say so (line_per_client
 * kinds): count it as heard on the channel, so that an attempt in flight
 * looks again, and wake the oldest idle waiter. */
void hl_waiters_freed_here(hl_waiters *reg, const char *channel,
                           size_t len);

/* Whether the client has the channel: a waiter of its waits there, or
 * did lately (its subscription lingers). */
bool hl_waiters_known(hl_waiters *reg, const char *channel, size_t len);

/* Whether a waiter other than self (NULL: any) is on the channel. */
bool hl_waiters_others(hl_waiters *reg, const char *channel, size_t len,
                       const hl_waiter *self);

/* Whether waiters of this client already queue on a confirmed channel:
 * a newcomer then joins them instead of trying first, keeping the local
 * order first come, first served. */
bool hl_waiters_queued(hl_waiters *reg, const char *channel, size_t len);

/* The oldest waiter on w's channel (NULL when w is not registered); the
 * one after a waiter is its next.  Kinds whose waiters go in line
 * (hl_kind.in_line) read the line of a client's waiters on one name
 * here, whatever handle each waits through. */
hl_waiter *hl_waiter_line_head(const hl_waiter *w);

/* The oldest waiter on the channel, or NULL when it has none. */
hl_waiter *hl_waiters_head(hl_waiters *reg, const char *channel, size_t len);

/* Whether the server refused every subscription of w's channel (its
 * ACL does not allow SUBSCRIBE to it): no release will wake w, which
 * then waits by the holder's lease alone. */
bool hl_waiter_refused(const hl_waiter *w);

/* Whether the last direct grant heard on w's channel (HL_WAKE_GRANT)
 * names the attempt nonce; if so it is taken, and nobody else takes it.
 * hl_waiters_take_grant does the same by the channel's name, for an
 * acquire whose waiter is not registered yet. */
bool hl_waiter_take_grant(hl_waiter *w, const char *nonce, size_t len);
bool hl_waiters_take_grant(hl_waiters *reg, const char *channel, size_t len,
                           const char *nonce, size_t nonce_len);

/* Mark an attempt in flight (wakes are kept) or done.  Returns true when
 * a wake arrived meanwhile: the caller should attempt again at once. */
void hl_waiter_trying(hl_waiter *w);
bool hl_waiter_done_trying(hl_waiter *w);

/* A number that changes whenever the channel hears a message or is
 * (re)confirmed; HL_WAIT_SEQ_NONE while the channel is not confirmed.
 * An acquire compares it across its attempt: unchanged means no release
 * was announced meanwhile, so it can wait without trying again. */
#define HL_WAIT_SEQ_NONE UINT64_MAX
uint64_t hl_waiters_seq(hl_waiters *reg, const char *channel, size_t len);
/* The same for the channel w is registered on, without naming it. */
uint64_t hl_waiter_seq(const hl_waiter *w);

#endif
