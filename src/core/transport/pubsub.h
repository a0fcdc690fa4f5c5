/* The pub/sub connection: one SUBSCRIBE per channel however many
 * listeners share it, and every channel subscribed again after a
 * reconnect.  It has no request to time out, so it is kept alive instead
 * (see keepalive in conn.h): a server that stops answering it is left
 * for a new connection.  Loop thread only. */
#ifndef HL_PUBSUB_H
#define HL_PUBSUB_H

#include <stdbool.h>
#include <stddef.h>

#include <ev.h>
#include <openssl/ssl.h>

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

hl_pubsub *hl_pubsub_create(struct ev_loop *loop,
                            const struct hilock_options *opts,
                            SSL_CTX *ssl_ctx);
/* Every listener still attached gets HL_SUB_CLOSED; then all is freed. */
void hl_pubsub_free(hl_pubsub *ps);

/* Attach sub to a channel.  Returns 1 when the channel is confirmed
 * already (no HL_SUB_READY follows until a reconnect), 0 when HL_SUB_READY
 * will follow, or HILOCK_ENOMEM negated (-2).  sub must not be attached. */
int hl_pubsub_subscribe(hl_pubsub *ps, hl_sub *sub, const char *channel,
                        size_t len, hl_sub_fn *fn, void *data);
/* Detach sub; safe inside any callback, and for a detached sub. */
void hl_pubsub_unsubscribe(hl_pubsub *ps, hl_sub *sub);

bool hl_pubsub_is_up(const hl_pubsub *ps);
/* The number of channels with listeners (for tests). */
size_t hl_pubsub_channel_count(const hl_pubsub *ps);

#endif
