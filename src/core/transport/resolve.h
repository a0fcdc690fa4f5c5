/* Host name resolution off the loop: getaddrinfo blocks, so a name is
 * resolved in a thread that signals the loop through an eventfd.
 *
 * The bound: at most one resolver thread runs per distinct host:port at a
 * time, process-wide.  A start for a host:port whose lookup is still
 * running joins that lookup instead of starting a thread, so during a
 * name-service outage, where getaddrinfo may hang for a long time, a
 * connection that times out and retries again and again still costs one
 * stuck thread per name it connects to, not one per attempt.  Callers
 * waiting on the same host:port are answered one lookup each, in turn.
 * A numeric address never starts a thread. */
#ifndef HL_RESOLVE_H
#define HL_RESOLVE_H

#include <netdb.h>

typedef struct hl_resolve hl_resolve;

/* Start resolving host:port (TCP).  Returns NULL when memory or threads
 * run out.  *fd_out receives a descriptor that becomes readable when the
 * answer is there (at once for a numeric address). */
hl_resolve *hl_resolve_start(const char *host, int port, int *fd_out);
/* Collect the answer after the descriptor became readable: 0 with *out
 * (free with freeaddrinfo) or a getaddrinfo error code. */
int hl_resolve_finish(hl_resolve *r, struct addrinfo **out);
/* Drop a pending or finished resolution; safe while the thread runs. */
void hl_resolve_cancel(hl_resolve *r);

/* Numeric addresses need no thread: 0 with *out on success, else -1. */
int hl_resolve_numeric(const char *host, int port, struct addrinfo **out);

/* How many resolver threads run now (for tests). */
int hl_resolve_threads(void);

#ifdef HILOCK_TEST_HOOKS
/* For tests only, in the hilock_testing library alone: what a resolver
 * thread calls, getaddrinfo unless a test swaps it for one that hangs.
 * Numeric addresses never go through it. */
extern int (*hilock__getaddrinfo)(const char *node, const char *service,
                                  const struct addrinfo *hints,
                                  struct addrinfo **res);
#endif

#endif
