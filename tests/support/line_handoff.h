/* The direct hand-off cases that the kinds lining up waiting clients share
 * (the reentrant lock, and the read-write lock's writers): each kind
 * differs only in its keys, in how its hash writes a hold, and in what
 * Redisson's releases say, which hl_line_kind holds.  Each case is a
 * whole test against the server given: it fails the running test when
 * the hand-off went wrong. */
#ifndef HL_TEST_LINE_HANDOFF_H
#define HL_TEST_LINE_HANDOFF_H

#include "support/handoff.h"

typedef struct hl_line_kind {
    const hl_line_keys *keys;
    hilock_lock *(*make)(hilock_client *c, const char *name);
    const char *channel;     /* Redisson's channel's prefix */
    const char *next;        /* the promise key's prefix */
    const char *hold_suffix; /* what follows an owner's field in the hash */
    const char *mode;        /* the hash's "mode" beside a hold, or NULL */
    const char *java_says;   /* what Redisson's release publishes */
    /* A holder that knows of no contention releases in a lean form
     * first, which a line of clients sends back for the full one: one
     * script more for the first hand-off (hl_attempt_args.lean). */
    bool lean_release;
} hl_line_kind;

extern const hl_line_kind hl_reentrant_line; /* hl_new_lock */
extern const hl_line_kind hl_writers_line;   /* hl_new_write_lock */

/* The release is the one script between the holder letting go and the
 * waiter holding (after a lean form's, see lean_release), for no longer
 * than the waiter's place on the server, and the waiter's lease is
 * renewed past that. */
void hl_case_release_hands_over(hl_redis_server *s, const hl_line_kind *k,
                                const char *name);

/* The grant a release records for a waiter goes with that client's next
 * hold of the free lock. */
void hl_case_grant_record_goes_with_next_hold(hl_redis_server *s,
                                              const hl_line_kind *k,
                                              const char *name);

/* A line and its places are kept alive together by the attempts that
 * renew places. */
void hl_case_line_keys_kept_together(hl_redis_server *s,
                                     const hl_line_kind *k, const char *name);

/* A grant whose message is lost is claimed by the waiter's next attempt,
 * counted once and for the whole lease. */
void hl_case_lost_grant_claimed(hl_redis_server *s, const hl_line_kind *k,
                                const char *name);

/* A waiter cancelled before it heard of its grant gives the grant back,
 * and the next client gets the lock at once. */
void hl_case_gone_waiter_gives_back(hl_redis_server *s, const hl_line_kind *k,
                                    const char *name);

/* A dead client's grant lasts no longer than its place. */
void hl_case_dead_client_grant(hl_redis_server *s, const hl_line_kind *k,
                               const char *name);

/* Java's waiters and ours wake each other, and a hand-off made while no
 * Java waiter listens is not heard by one that comes after it. */
void hl_case_wake_ups_beside_java(hl_redis_server *s, const hl_line_kind *k,
                                  const char *name);

/* While a Java waiter listens, a release promises and tells it instead of
 * granting a wish. */
void hl_case_java_waiter_told(hl_redis_server *s, const hl_line_kind *k,
                              const char *name);

/* The same when the waiting client, now dead, had been told it was first
 * in line: it is not counted as listening there. */
void hl_case_java_waiter_told_beside_dead_first(hl_redis_server *s,
                                                const hl_line_kind *k,
                                                const char *name);

#endif
