/* What the tests of a failover held still share: one sentinel fails the
 * master over, but the only replica it may promote (the others have
 * priority 0) is stopped, so the failover waits in its promotion step,
 * and every sentinel still names the master.  The helpers fail the
 * calling test, as the fixture's do. */
#ifndef HL_HELD_FAILOVER_H
#define HL_HELD_FAILOVER_H

#include <stdatomic.h>
#include <stdbool.h>

#include "redis_replicated.h"
#include "hilock/hilock.h"

/* The command a b c d (d, or c and d, may be NULL) that s must answer
 * "+OK"-like (a status reply). */
void hl_command_ok(hl_redis_server *s, const char *a, const char *b,
                   const char *c, const char *d);

/* For hl_wait_until: whether sentinel, of group, has read priority 0 on
 * zeros of the master's replicas (it reads a replica's at its next INFO,
 * up to 10 s later); and whether it has chosen a replica to promote. */
typedef struct hl_failover_probe {
    hl_redis_replicated *group;
    hl_redis_server *sentinel;
    int zeros;
} hl_failover_probe;
bool hl_sentinel_knows_priorities(void *probe);
bool hl_sentinel_chose(void *probe);

/* A try_acquire (no wait, a lease of 10 s) on a thread of its own, for a
 * test that holds its answer back meanwhile: pthread_create with
 * hl_grant_main and the grant. */
typedef struct hl_grant {
    hilock_lock *lock;
    int rc;
    char detail[512];
    atomic_bool done;
} hl_grant;
void *hl_grant_main(void *grant);

#endif
