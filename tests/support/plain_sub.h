/* A subscriber that knows nothing of the library: one TCP connection to
 * a fixture server (a cluster node too), subscribed to one channel, from
 * which a test reads what was published there with a deadline.  It
 * stands for a peer that listens on a lock's channel (a Java client), so
 * that a test can tell whether a release told that peer anything.
 *
 * Functions fail the running cmocka test when they cannot do their job,
 * except hl_plain_sub_next, which only reports whether a message came. */
#ifndef HL_PLAIN_SUB_H
#define HL_PLAIN_SUB_H

#include <stdbool.h>
#include <stddef.h>

#include "redis_server.h"

typedef struct hl_plain_sub hl_plain_sub;

/* Connects and subscribes to channel; returns once the server has
 * confirmed the subscription, so nothing published afterwards is
 * missed. */
hl_plain_sub *hl_plain_sub_open(const hl_redis_server *s,
                                const char *channel);

/* The same with SSUBSCRIBE: it hears SPUBLISH, on a node that serves
 * the channel's slot (or any server outside a cluster). */
hl_plain_sub *hl_plain_sub_open_sharded(const hl_redis_server *s,
                                        const char *channel);

/* Whether nothing came that was not read yet: sends PING and reads up to
 * its answer, which the server sends after every message it had sent
 * before.  A message found on the way is consumed.  Fails the test when
 * no answer comes. */
bool hl_plain_sub_quiet(hl_plain_sub *sub);

/* The next message on the channel into out (NUL-terminated, cut at
 * cap - 1 bytes): true if one came within timeout_ms. */
bool hl_plain_sub_next(hl_plain_sub *sub, char *out, size_t cap,
                       int timeout_ms);

void hl_plain_sub_close(hl_plain_sub *sub);

#endif
