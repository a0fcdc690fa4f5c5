/* Redis Sentinel for a client: which master its connections go to.
 *
 * The sentinels of the options (host, then the seeds) are asked in turn
 * with SENTINEL get-master-addr-by-name: at the start, whenever the
 * client asks (a master connection went down, or found a server that is
 * no longer a master), and on every +switch-master they announce, which
 * a pub/sub connection to the sentinel in use listens to.  The answer is
 * reported to the client, which alone moves its connections.  A sentinel
 * that cannot be reached, refuses, or knows no such master is left for
 * the next; when a whole round of them fails, the client hears why, and
 * its connections stay where they were: a master no sentinel vouches for
 * is never taken on trust.  Loop thread only. */
#ifndef HL_SENTINEL_H
#define HL_SENTINEL_H

#include <stdbool.h>

#include <openssl/ssl.h>

struct hilock_client;
typedef struct hl_sentinel hl_sentinel;

/* status HILOCK_OK: the master is at host:port.  Otherwise a round of
 * sentinels failed: HILOCK_EINVAL when every sentinel that answered
 * knows no master of that name, else the last failure (HILOCK_EIO,
 * HILOCK_ETIMEDOUT, HILOCK_EAUTH, ...), with detail saying which. */
typedef void hl_sentinel_fn(struct hilock_client *client, int status,
                            const char *detail, const char *host, int port);

/* Start asking.  NULL when memory runs out or the sentinel list in the
 * options cannot be read. */
hl_sentinel *hl_sentinel_create(struct hilock_client *client,
                                SSL_CTX *ssl_ctx, hl_sentinel_fn *fn);
/* Ask the sentinels again (at most one question is in flight). */
void hl_sentinel_ask(hl_sentinel *s);
void hl_sentinel_free(hl_sentinel *s);

/* For tests and status: answers received, and switch announcements
 * heard. */
unsigned hl_sentinel_answers(const hl_sentinel *s);
unsigned hl_sentinel_switches(const hl_sentinel *s);

#endif
