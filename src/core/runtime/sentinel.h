/* Redis Sentinel for a client: which master its connections go to.
 *
 * The sentinels of the options (host, then the seeds; at most
 * HILOCK_MAX_SENTINELS) are asked SENTINEL get-master-addr-by-name: at
 * the start, whenever the client asks (a master connection went down, or
 * found a server that is no longer a master), when the +switch-master
 * subscription is confirmed, and on an announcement that holds no
 * address.  Each question is a round: every sentinel is asked at once,
 * over a connection of its own.  Before the client follows a master a
 * majority of the sentinels naming one master ends the round (short of
 * one, when all have answered, the master every answer names, and none
 * when they differ); after, the first answer naming the master it
 * follows does.  An answer naming another master moves the
 * client only once a majority of the sentinels name that master and none
 * names another: a sentinel that lags, or is cut off together with the
 * old master, still names the master being replaced, which stays a
 * master until the sentinels reconfigure it.  A sentinel that cannot be
 * reached, refuses, answers anything but a host and a port, or knows no
 * such master fails for the round.  A round takes at most the connect
 * timeout, however many sentinels there are.  When all fail, the client
 * hears why, its connections stay where they were (a master no sentinel
 * vouches for is never taken on trust), and the next round waits a
 * backoff that grows with each round failed in a row (reconnect_min_ms
 * doubling up to reconnect_max_ms), whoever asks.  The sentinel that
 * answered last is the one a pub/sub connection listens to for
 * +switch-master, whose announcements are reported as they come: a
 * sentinel announces only a switch to a newer configuration.  Loop
 * thread only. */
#ifndef HL_SENTINEL_H
#define HL_SENTINEL_H

#include <stdbool.h>

#include <openssl/ssl.h>

#include "core/base/monotime.h"

struct hilock_client;
struct hilock_options;
typedef struct hl_sentinel hl_sentinel;

/* A master whose oldest request has gone unanswered this long may have
 * stopped (paused, cut off) with its link up: the sentinels are asked
 * where the master is, at most once per this time while it lasts. */
#define HL_SENTINEL_SILENT_MS 500

/* A round asked within this long of one that vouched for nobody starts
 * this long after it: while the sentinels disagree or doubt a master,
 * every write to it asks them, and each round opens a connection to
 * each sentinel. */
#define HL_SENTINEL_REASK_MS 100

/* status HILOCK_OK: the master is at host:port, vouched for when a
 * majority of the sentinels named it and none another (always so for a
 * master other than the one the client follows, unless announced by
 * +switch-master).  Otherwise a round of sentinels failed or vouched for
 * nobody: HILOCK_EINVAL when every sentinel knows no master of that
 * name, HILOCK_EIO when a round heard different masters named, another
 * master named by too few sentinels, or (a vouching round) a sentinel
 * whose flags show the master down or being failed over, else
 * the last other failure (HILOCK_EIO, HILOCK_ETIMEDOUT, HILOCK_EAUTH,
 * HILOCK_EPROTO for an answer that is not a host and a port, ...), with
 * detail saying which sentinel and what. */
typedef void hl_sentinel_fn(struct hilock_client *client, int status,
                            const char *detail, const char *host, int port,
                            bool vouched);

/* The sentinels the options name, readable or not. */
int hl_sentinel_count(const struct hilock_options *opts);

/* Start asking; the first round starts from the loop.  NULL when memory
 * runs out or the options name more than HILOCK_MAX_SENTINELS. */
hl_sentinel *hl_sentinel_create(struct hilock_client *client,
                                SSL_CTX *ssl_ctx, hl_sentinel_fn *fn);
/* Ask the sentinels again: a round at once, or after the one in flight,
 * or when the backoff after failed rounds ends. */
void hl_sentinel_ask(hl_sentinel *s);
/* Ask as hl_sentinel_ask, in a round that does not end at the first
 * answer but hears every sentinel out (at most the connect timeout), to
 * vouch for the master: one sentinel that has not heard of a failover
 * yet would name the master being replaced.  Each sentinel is also asked
 * SENTINEL MASTER: one whose flags for the master show it failing over
 * (failover_in_progress) or down (s_down, o_down) vouches for nobody,
 * since the sentinels still name a master while they replace it. */
void hl_sentinel_vouch(hl_sentinel *s);
void hl_sentinel_free(hl_sentinel *s);

/* For tests and status: answers received, switch announcements heard,
 * and rounds ended (however they ended). */
unsigned hl_sentinel_answers(const hl_sentinel *s);
unsigned hl_sentinel_switches(const hl_sentinel *s);
unsigned hl_sentinel_rounds(const hl_sentinel *s);
/* When the last round began (the one that just answered, inside fn). */
hl_monotime hl_sentinel_round_begun(const hl_sentinel *s);
/* The sentinels of the round under way that named a master and were
 * heard out (0 when no round is under way). */
int hl_sentinel_heard_out(const hl_sentinel *s);

#endif
