/* Host name resolution off the loop: getaddrinfo blocks, so a name (not a
 * numeric address) is resolved in a short-lived thread that signals the
 * loop through an eventfd. */
#ifndef HL_RESOLVE_H
#define HL_RESOLVE_H

#include <netdb.h>

typedef struct hl_resolve hl_resolve;

/* Start resolving host:port (TCP).  Returns NULL when memory or threads
 * run out.  *fd_out receives a descriptor that becomes readable when the
 * answer is there. */
hl_resolve *hl_resolve_start(const char *host, int port, int *fd_out);
/* Collect the answer after the descriptor became readable: 0 with *out
 * (free with freeaddrinfo) or a getaddrinfo error code. */
int hl_resolve_finish(hl_resolve *r, struct addrinfo **out);
/* Drop a pending or finished resolution; safe while the thread runs. */
void hl_resolve_cancel(hl_resolve *r);

/* Numeric addresses need no thread: 0 with *out on success, else -1. */
int hl_resolve_numeric(const char *host, int port, struct addrinfo **out);

#endif
