/* Replica acknowledgement of lock writes (options replicas=, ack_timeout).
 *
 * A lock write (acquire, renewal, release script) is followed, in the
 * same pipeline and on the same connection, by WAIT n timeout, one for
 * all the writes that connection sends in one write, where n
 * follows the policy from the number of online replicas the master
 * itself reports (INFO replication): read before the first write on a
 * connection that came up, again when the last reading is older than
 * HL_ACK_RECOUNT_MS, and at once after a WAIT that came back short, whose
 * verdict then uses the fresh count.  Each connection has its own count,
 * so on a cluster each shard is judged by its own master's replicas.
 *
 * A count below the most the master had since the topology last vouched
 * for it does not lower the bar: a master loses its replicas first when
 * it is being replaced.  Its writes need as many acknowledgements as it
 * had, and count only once Sentinel or the cluster map confirms it
 * (hl_ack_topology); a master without either vouches for itself.
 *
 * With the policy none nothing here runs: hl_ack_begin hands back NULL
 * and the write goes out exactly as before.  Loop thread only. */
#ifndef HL_ACK_H
#define HL_ACK_H

#include <stdint.h>

#include "core/base/monotime.h"
#include "core/transport/conn.h"
#include "hilock/client.h"

/* How old a replica count may be when a write is sent. */
#define HL_ACK_RECOUNT_MS 1000
/* Under Sentinel or on a cluster, a write answered this long past the
 * ack timeout after it was queued counts only once the topology still
 * names the master that answered (see hl_ack_topology). */
#define HL_ACK_LATE_MS 500

typedef struct hl_ack hl_ack;

/* The policy's n for k online replicas (0: no WAIT). */
int hl_ack_needed(int policy, int k);

/* Begin a lock write to conn, whose answer goes to fn(data, ...).  With
 * the policy none on a master alone, or a master alone known (by a fresh
 * count) to have no replica: HILOCK_OK and *out NULL, send the write as
 * usual.  (Under none with Sentinel or a cluster, only a late answer is
 * checked, HL_ACK_LATE_MS.)
 * Otherwise *out is set: send the write with hl_ack_reply and *out as its
 * callback, then call hl_ack_sent (or hl_ack_unsent when it could not be
 * queued).  fn then gets the write's answer once, after its WAIT: as it
 * came, except that a write that ran (HILOCK_OK) whose acknowledgement
 * fell short, failed or is unknown comes with HILOCK_ENOACK, the reply
 * still attached (and the detail saying why).  A write a cluster
 * redirected is followed by a WAIT on the node that ran it.
 * HILOCK_ENOMEM: nothing started. */
int hl_ack_begin(hilock_client *c, hl_conn *conn, hl_request_fn *fn,
                 void *data, hl_ack **out);
/* Whether a lock write to conn now would go out alone: no WAIT after it
 * (the policy none, or a fresh count says the master has no replica and
 * never had one) and no topology that must vouch for its answer (no
 * Sentinel, no cluster). */
bool hl_ack_plain(hilock_client *c, hl_conn *conn);
void hl_ack_reply(void *ack, int status, hilock_reply *reply);
void hl_ack_sent(hl_ack *a);
/* fn is not called. */
void hl_ack_unsent(hl_ack *a);

/* The three steps above in one: send(ctx, f, d) queues the write with
 * the callback it is given, and fn(data, ...) gets the answer as
 * hl_ack_begin says.  Returns send's status, or HILOCK_ENOMEM. */
typedef int hl_ack_send_fn(void *ctx, hl_request_fn *fn, void *data);
int hl_ack_write(hilock_client *c, hl_conn *conn, hl_ack_send_fn *send,
                 void *ctx, hl_request_fn *fn, void *data);

/* What a topology read says of the master a connection leads to. */
typedef enum hl_ack_verdict {
    HL_ACK_MASTER_CONFIRMED, /* still the master */
    HL_ACK_MASTER_REPLACED,  /* another node is */
    HL_ACK_MASTER_UNKNOWN    /* the read failed */
} hl_ack_verdict;

/* A topology read (Sentinel's answer, a cluster map) has a verdict on
 * the master conn leads to, or, with conn NULL, every connection's.  A
 * master whose count fell below what it had is suspect: every write it
 * answers meanwhile, short or acknowledged, waits for this verdict (at
 * most the ack timeout plus the connect timeout), and is judged by the
 * master's count now when confirmed, or fails with HILOCK_ENOACK and why
 * otherwise.  A confirmed master's count is what it has from then on; a
 * replaced one's is read afresh.  begun: when the read that confirms
 * began; a master doubted since (its count fell lower, or an answer came
 * late) waits for the next read, asked when the doubt came. */
void hl_ack_topology(hilock_client *c, const hl_conn *conn,
                     hl_ack_verdict verdict, const char *why,
                     hl_monotime begun);

/* End the writes waiting for a verdict (client shutdown, after its
 * connections): HILOCK_ENOACK, their acknowledgement unknown. */
void hl_acks_close(hilock_client *c);

/* The replica count last read on conn, or -1 when unknown (tests). */
int hl_ack_replicas(hilock_client *c, hl_conn *conn);

/* Free the client's counts (client teardown). */
void hl_acks_free(hilock_client *c);

/* The number of online replicas in an INFO replication text. */
int hl_ack_parse_info(const char *text, size_t len);

#endif
