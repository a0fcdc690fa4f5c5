/* Direct hand-offs under pub/sub connections killed, for any kind whose
 * releases grant the lock to a waiter's wish: the test both kinds'
 * hand-off suites share. */
#ifndef HL_TEST_HANDOFF_FAULTS_H
#define HL_TEST_HANDOFF_FAULTS_H

#include "hilock/lock.h"
#include "support/fixture.h"

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
