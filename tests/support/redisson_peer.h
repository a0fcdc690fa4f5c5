/* A peer that takes a fair lock the way Redisson's RFairLock does, for
 * tests of lines that mix Java and hilock waiters.  Written from
 * Redisson's published algorithm, not from its code: the line is
 * redisson_lock_queue:{NAME} with each waiter's place in
 * redisson_lock_timeout:{NAME}, scored on the peer's own clock (ms since
 * 1970) as the place before it (or the lock's ttl) plus the peer's thread
 * wait time; a grant takes the thread wait time off every place left; a
 * try that gives up takes its wait off the places behind it; stale places
 * are dropped only from the head; a release messages the head on its own
 * channel redisson_lock__channel:{NAME}:<field>.  Places are never
 * renewed, and the line's keys are never given an expiry.
 *
 * The steps run as scripts of the test's own through
 * hilock_client_command, on a client the test owns; a Java thread is a
 * "thread" number under the peer's id.  Every function fails the running
 * cmocka test when the server does not answer as expected. */
#ifndef HL_REDISSON_PEER_H
#define HL_REDISSON_PEER_H

#include <stddef.h>
#include <stdint.h>

#include "hilock/client.h"

/* Redisson's default thread wait time. */
#define HL_RPEER_DEFAULT_WAIT_MS 300000

typedef struct hl_rpeer {
    hilock_client *client; /* borrowed: commands go through it */
    char name[128];        /* the lock */
    char id[64];           /* stands for Redisson's connection manager id */
    int64_t wait_ms;       /* the thread wait time */
} hl_rpeer;

/* A peer on lock name with id and HL_RPEER_DEFAULT_WAIT_MS. */
void hl_rpeer_init(hl_rpeer *p, hilock_client *client, const char *name,
                   const char *id);

/* "<id>:<thread>": the thread's field, line entry and channel tail. */
void hl_rpeer_field(const hl_rpeer *p, long thread, char *out, size_t cap);

/* The thread's wake-up channel. */
void hl_rpeer_channel(const hl_rpeer *p, long thread, char *out, size_t cap);

/* One acquire attempt of a waiting lock(): -1 when granted (or reentered),
 * else the ttl Redisson would wait at most, the thread then being in
 * line. */
int64_t hl_rpeer_attempt(hl_rpeer *p, long thread, int64_t lease_ms);

/* unlock(): 1 when the lock was freed (or found free; the head is then
 * messaged), 0 when the thread still holds it, -1 when it held nothing. */
int hl_rpeer_unlock(hl_rpeer *p, long thread, int64_t lease_ms);

/* What a tryLock whose wait ran out does: leaves the line, taking its
 * wait off the places behind it. */
void hl_rpeer_give_up(hl_rpeer *p, long thread);

#endif
