/* The pub/sub connection: one SUBSCRIBE per channel however many
 * listeners share it, and every channel subscribed again after a
 * reconnect.  It has no request to time out, so it is kept alive instead
 * (see keepalive in conn.h): a server that stops answering it is left
 * for a new connection.  Loop thread only.
 *
 * A sharded connection (one per cluster master) speaks SSUBSCRIBE and
 * hears SMESSAGE.  The server drops such a subscription by itself when
 * the channel's slot leaves the node, and refuses it with MOVED when the
 * slot is elsewhere: the channel then waits, still listened to, until its
 * owner moves it to the right node (hl_pubsub_move) or subscribes it again
 * (hl_pubsub_resubscribe). */
#ifndef HL_PUBSUB_H
#define HL_PUBSUB_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <ev.h>
#include <openssl/ssl.h>

/* hilock's own channels, where only its clients listen (each client's
 * wake-up channel of a lock), are the ones whose names begin with this.
 * Every other channel a lock names is part of the layout it shares with
 * Redisson, whose clients on a cluster may use plain or sharded pub/sub
 * there (hilock_options_set_redisson_pubsub). */
#define HL_OWN_CHANNEL_PREFIX "hilock_"

static inline bool hl_channel_is_own(const char *name, size_t len)
{
    size_t n = sizeof HL_OWN_CHANNEL_PREFIX - 1;
    return len >= n && memcmp(name, HL_OWN_CHANNEL_PREFIX, n) == 0;
}

struct hilock_options;
typedef struct hl_pubsub hl_pubsub;
typedef struct hl_sub hl_sub;
typedef struct hl_channel hl_channel;

typedef enum hl_sub_event {
    /* The server confirmed the subscription; after a reconnect it comes
     * again, and messages sent while disconnected are lost. */
    HL_SUB_READY,
    HL_SUB_MESSAGE, /* msg, len hold the payload */
    /* The server refused the SUBSCRIBE (its ACL does not give the user
     * the channel); msg, len hold its words.  No HL_SUB_READY follows
     * until a reconnect subscribes again. */
    HL_SUB_REFUSED,
    HL_SUB_CLOSED   /* the pub/sub connection was freed; sub is detached */
} hl_sub_event;

typedef void hl_sub_fn(hl_sub *sub, hl_sub_event event, const char *msg,
                       size_t len);

/* A listener, embedded in its owner's structure. */
struct hl_sub {
    hl_sub *prev;
    hl_sub *next;
    hl_channel *channel; /* NULL when not subscribed */
    hl_sub_fn *fn;
    void *data;
};

typedef struct hl_pubsub_config {
    struct ev_loop *loop;
    const struct hilock_options *opts; /* must outlive the connection */
    SSL_CTX *ssl_ctx;                  /* NULL: plain TCP */
    bool sharded;
    /* Called when a subscription may now be on the wrong node: the
     * connection went down, or the server dropped or redirected a
     * channel.  May be NULL. */
    void (*on_misplaced)(void *data);
    void *data;
} hl_pubsub_config;

hl_pubsub *hl_pubsub_create(const hl_pubsub_config *cfg);
/* Every listener still attached gets HL_SUB_CLOSED; then all is freed. */
void hl_pubsub_free(hl_pubsub *ps);

/* Attach sub to a channel.  Returns 1 when the channel is confirmed
 * already (no HL_SUB_READY follows until a reconnect), 0 when HL_SUB_READY
 * will follow, or HILOCK_ENOMEM negated (-2).  sub must not be attached. */
int hl_pubsub_subscribe(hl_pubsub *ps, hl_sub *sub, const char *channel,
                        size_t len, hl_sub_fn *fn, void *data);
/* Detach sub; safe inside any callback, and for a detached sub. */
void hl_pubsub_unsubscribe(hl_sub *sub);

/* Move every channel for which dest names another connection over to
 * it, listeners and all; dest returns NULL (or ps) to keep a channel.
 * A moved listener hears HL_SUB_READY once its new node confirms, as
 * after a reconnect.  Not inside a callback of ps. */
typedef hl_pubsub *hl_pubsub_dest_fn(void *data, const char *channel,
                                     size_t len);
void hl_pubsub_move(hl_pubsub *ps, hl_pubsub_dest_fn *dest, void *data);
/* Subscribe again every listened channel that the server dropped or
 * redirected, when up. */
void hl_pubsub_resubscribe(hl_pubsub *ps);

bool hl_pubsub_is_up(const hl_pubsub *ps);
/* Drop the connection and connect again (to the address its options
 * name now); every channel is subscribed again, as after any loss. */
void hl_pubsub_reconnect(hl_pubsub *ps, const char *why);
/* The number of channels with listeners (for tests). */
size_t hl_pubsub_channel_count(const hl_pubsub *ps);

#endif
