/* What the direct hand-off suites of the reentrant and fair locks share:
 * a Java-shaped hold, reads of the lock's hash, a waiter put in line, the
 * count of handed grants, and hand-offs under pub/sub connections
 * killed. */
#ifndef HL_TEST_HANDOFF_H
#define HL_TEST_HANDOFF_H

#include <stdbool.h>
#include <stdint.h>

#include "hilock/lock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/mutex_checker.h"

/* A Redisson client's field, "<uuid>:<thread id>". */
#define HL_JAVA_FIELD "0b7d1f52-5c3e-4a47-9d3c-2f1e6a7b8c9d:77"

/* The lock name held by HL_JAVA_FIELD for 30 s, as Redisson writes it. */
void hl_java_hold(hl_redis_server *server, const char *name);

/* field's hold count in the lock's hash; 0 for none. */
long long hl_hold_of(hl_redis_server *server, const char *name,
                     const char *field);

/* An async acquire of owner on lock, of client c, that waits as long as
 * it takes, recorded in rec (its id in *id unless NULL); returns once it
 * was refused and asks nothing more of the server: a wish, if it records
 * one, is there. */
void hl_wait_in_line(hilock_client *c, hilock_lock *lock, uint64_t owner,
                     hl_acquire_rec *rec, uint64_t *id);

/* The keys of a line of clients whose waiters record wishes, by prefix:
 * the wishes' hash, the line and the places. */
typedef struct hl_line_keys {
    const char *want;
    const char *line;
    const char *alive;
} hl_line_keys;

extern const hl_line_keys hl_lock_line_keys;   /* the reentrant lock's */
extern const hl_line_keys hl_rwlock_line_keys; /* the writers' */

/* A wish or a grant as the server keeps it under a client's id. */
typedef struct hl_wish {
    char kind;          /* 'w' wish, 'g' granted, 0 none */
    bool first;         /* a wish recorded when told it was first */
    char nonce[64];
    long long lease_ms; /* of a wish */
    char field[64];
} hl_wish;

/* The wish keys' hash of the lock name keeps under client_id; fails the
 * test on a value of neither shape. */
hl_wish hl_read_wish(hl_redis_server *server, const hl_line_keys *keys,
                     const char *name, const char *client_id);

/* The wish c recorded for owner; fails the test when there is none. */
hl_wish hl_expect_wish(hl_redis_server *server, const hl_line_keys *keys,
                       const char *name, hilock_client *c, uint64_t owner);

/* What a release does for client_id's wish w beside the hold, by hand and
 * without the message that would tell the client (lost): the grant in
 * the wishes' hash, the client out of the line and the places.  The
 * caller writes the hold. */
void hl_grant_wish_unheard(hl_redis_server *server, const hl_line_keys *keys,
                           const char *name, const char *client_id,
                           const hl_wish *w);

/* owner's release of one hold of lock, waited for: the value
 * hilock_lock_release_async reports (the holds left). */
int64_t hl_release_one(hilock_lock *lock, uint64_t owner);

/* The acquires of c that a release handed the lock to. */
uint64_t hl_handed_to(hilock_client *c);

/* Whether key's PTTL is above ms within timeout_ms. */
bool hl_wait_pttl_above(hl_redis_server *server, const char *key,
                        long long ms, int timeout_ms);

/* A thread that kills every pub/sub connection of server every 15 ms
 * until stopped; stopping it frees it and returns how many of its rounds
 * killed one. */
typedef struct hl_pubsub_killer hl_pubsub_killer;
hl_pubsub_killer *hl_pubsub_killer_start(hl_redis_server *server);
int hl_pubsub_killer_stop(hl_pubsub_killer *k);

/* What a run of hand-offs under pub/sub kills must show: no two held at
 * once, all holds happened, connections were killed, and some holds were
 * handed straight to a waiter. */
void hl_expect_handoffs(hl_mutex_checker *mc, int holds, int kills,
                        long long handed);

/* Four clients take turns on the lock name, 150 holds each, made by make
 * (hl_new_lock, hl_new_fair_lock), while a thread kills their pub/sub
 * connections every 15 ms: grants go out unheard and are claimed, or
 * given back by waiters that gave up.  Fails the test unless no two held
 * at once, every hold happened, connections were killed and some holds
 * were handed straight to a waiter. */
void hl_handoffs_under_pubsub_kills(hl_redis_server *server,
                                    hilock_lock *(*make)(hilock_client *,
                                                         const char *),
                                    const char *name);

#endif
