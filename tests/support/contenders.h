/* Holders contending for one lock through a topology change, for the
 * mutual-exclusion tests that fail a deployment over under load.
 *
 * Each holder is a thread with a lock handle of its own (so that the
 * lost callback of a handle speaks of that holder alone) on one of the
 * given clients.  In a loop it tries the lock with the watchdog lease,
 * records a critical section in the checker that lasts 1 to 5 ms (so
 * that grants are live whenever the topology changes), and releases.  A
 * holder told of a loss during its section leaves it at once, and the
 * checker counts the section as ended then.  After its section a holder
 * waits (at most 50 ms) for a holder of another client to have one, so
 * that the lock goes from client to client instead of staying with the
 * client that hands it to its own waiters first.
 *
 * The holders report problems through hl_mutex_checker_fail (never
 * through cmocka); hl_contenders_start fails the running test when it
 * cannot start them. */
#ifndef HL_CONTENDERS_H
#define HL_CONTENDERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hilock/hilock.h"
#include "support/mutex_checker.h"

typedef struct hl_contenders hl_contenders;

/* per_client holders on each of clients[0..nclients-1], on the lock
 * name, recording into mc, started at once. */
hl_contenders *hl_contenders_start(hilock_client *const *clients,
                                   int nclients, int per_client,
                                   const char *name, hl_mutex_checker *mc);

/* The moment (hl_now_ns) the failover was asked for: the delays of the
 * notices are measured from it. */
void hl_contenders_mark_asked(hl_contenders *g, int64_t ns);

/* The moment the switch to the new master was seen (by the test's own
 * measure): the first section entered after it is timed. */
void hl_contenders_mark_switched(hl_contenders *g, int64_t ns);

/* Stops the holders and waits for them; their handles stay until
 * hl_contenders_free. */
void hl_contenders_stop(hl_contenders *g);

/* After hl_contenders_stop: prints what the holders saw, as "# " lines
 * headed by what. */
void hl_contenders_report(const hl_contenders *g, const char *what);

/* Set the replica acknowledgement policy of a holders' client to o: the
 * default (replicas=majority, which it asserts), unless the environment
 * names another in HL_FAILOVER_POLICY (none, one, majority or all) to
 * measure a failover under it (bench/failover-policies.sh). */
void hl_contenders_policy(hilock_options *o);

/* After hl_contenders_stop: whether the checker found the sections
 * clean (why says what it found otherwise).  When a policy is being
 * measured, it prints the policy, the overlapping sections and what the
 * checker found, and answers true: a policy other than the default may
 * promise no exclusion through a failover, so the run reports instead. */
bool hl_contenders_verdict(const hl_contenders *g, const char *what,
                           char *why, size_t cap);

/* After hl_contenders_stop: destroys the handles and frees g.  NULL is
 * ignored. */
void hl_contenders_free(hl_contenders *g);

#endif
