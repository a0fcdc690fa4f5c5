/* The lock handle shared by every lock kind, the kind vtable, and the
 * generic operations that drive a kind's scripts: acquire with waiting,
 * release, force release, queries.  A kind is its scripts plus the small
 * vtable below; it never touches sockets, timers or threads. */
#ifndef HL_LOCK_HANDLE_H
#define HL_LOCK_HANDLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/runtime/runtime.h"
#include "core/transport/conn.h"
#include "core/runtime/op.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "core/engine/lease.h"
#include "core/base/auxname.h"
#include "core/base/map.h"
#include "core/transport/pubsub.h"
#include "core/transport/script.h"

typedef struct hl_hold hl_hold;
typedef struct hl_acquire_op hl_acquire_op;
typedef struct hl_turn hl_turn;

/* What an acquire attempt came back with. */
typedef enum hl_acquire_outcome {
    HL_ACQ_ACQUIRED, /* count, token set */
    HL_ACQ_HELD,     /* ttl_ms set: remaining lease of the holder, -1 none */
    HL_ACQ_VOID,     /* the attempt had been voided by a reconcile */
    HL_ACQ_SELF_WAIT, /* would wait for another hold of the same owner */
    /* A lean attempt (hl_attempt_args.lean) found something only the full
     * form judges; it took nothing. */
    HL_ACQ_FULL_FORM,
    HL_ACQ_BAD_REPLY
} hl_acquire_outcome;

typedef struct hl_acquire_result {
    hl_acquire_outcome outcome;
    int64_t count;   /* the owner's holds after the grant */
    uint64_t token;
    int64_t ttl_ms;
    int64_t free;    /* a semaphore's free permits after the grant */
    bool first_in_line; /* held: the client is first in the server's line
                         * (line_per_client kinds) */
    bool promised;      /* held: free, but promised to another client */
    bool unset;         /* held: the name holds nothing (a semaphore that
                         * was never set) */
    bool wanted;        /* held: the attempt's wish was recorded */
} hl_acquire_result;

/* What a release came back with. */
typedef enum hl_release_outcome {
    HL_REL_NOT_OWNER,
    HL_REL_STILL_HELD, /* remaining count set */
    HL_REL_FREED,
    /* line_per_client kinds: freed and promised to another client, which
     * its message wakes; or freed and promised to nobody, and no message
     * wakes this client's own waiters. */
    HL_REL_FREED_ELSEWHERE,
    HL_REL_FREED_OPEN,
    HL_REL_OWNER_DONE, /* the owner holds nothing more; others still do */
    /* A lean release found clients in line, which only the full form
     * serves; it changed nothing. */
    HL_REL_FULL_FORM,
    HL_REL_BAD_REPLY
} hl_release_outcome;

/* What an attempt does with its client's wish for the lock, which lets
 * a release give the lock to that client outright (hl_kind.withdraw). */
typedef enum hl_want {
    HL_WANT_NONE,     /* leaves it alone */
    HL_WANT_REGISTER, /* refused: records one under the attempt's nonce;
                       * granted: drops the field's */
    HL_WANT_DROP      /* drops the field's, whatever the outcome */
} hl_want;

/* hl_kind.reconcile's expected count of a withdraw. */
#define HL_RECONCILE_WITHDRAW (-1)

/* What a plain release by id gives back (hl_kind.unheld_grants). */
typedef enum hl_consume {
    HL_CONSUME_NONE,   /* permits of its own: it writes a record of its
                        * own under its id */
    HL_CONSUME_RECORD, /* a kept grant's: it consumes the record of the
                        * attempt that took them */
    HL_CONSUME_HANDED  /* a kept grant a release made for a wish: it
                        * consumes that grant (reconcile_withdraws) */
} hl_consume;

/* Arguments a kind's scripts receive from the engine. */
typedef struct hl_attempt_args {
    const char *field; /* "<client id>:<owner>" */
    size_t field_len;
    int64_t lease_ms;     /* the PEXPIRE to set */
    bool fenced;
    uint64_t known_token; /* the token of the hold it joins, or 0 */
    const char *nonce;    /* names this attempt, for a later reconcile */
    size_t nonce_len;
    int64_t waiter_timeout_ms; /* how long a place stays reserved; 0 for
                                * a single try, which keeps none */
    int64_t amount; /* what the attempt asks for: a semaphore's permits */
    /* line_per_client kinds: how long the client stays in the server's
     * line after a first hold is granted, because others of its waiters
     * still wait for the lock (it goes to the end); 0: it leaves; -1: it
     * has no place there as far as it knows, and leaves the line alone. */
    int64_t keep_in_line_ms;
    /* Kinds with withdraw (direct hand-offs): what the attempt does with
     * the client's wish on the server. */
    hl_want want;
    /* The attempt of this acquire whose wish the server confirmed (empty:
     * none): a grant a release made for that wish is this attempt's. */
    const char *claim;
    size_t claim_len;
    /* The engine knows of no reason for more than a first hold's grant
     * on a lock nobody touches: no hold of the owner's to join, no place
     * or wish of the client's on the server, no refusal lately.  A kind
     * may then send a lean form, with only the keys and arguments such a
     * grant reads, which answers HL_ACQ_FULL_FORM for anything else. */
    bool lean;
} hl_attempt_args;

/* The read-only questions of the query calls in hilock/lock.h. */
typedef enum hl_query {
    HL_QUERY_LOCKED,     /* value: 1 when anyone holds the lock, else 0 */
    HL_QUERY_HOLD_COUNT, /* value: the owner's holds, 0 for none */
    HL_QUERY_TTL         /* value: the lock's remaining lease in ms, or -1 */
} hl_query;

/* Sent on a line_per_client kind's client channel: the client is now
 * first in the server's line. */
#define HL_WAKE_MSG_FIRST "h"
/* Sent on a client's channel by a release that gave the lock outright to
 * the wish the attempt named by the nonce that follows recorded. */
#define HL_WAKE_MSG_GRANT "g"

/* Where a release that waits on a condition (hilock_cond) puts its
 * waiter, in the same script as the release: the condition's line and
 * the deadlines of its waiters, the waiter's id, and how long its place
 * lasts unrenewed. */
typedef struct hl_cond_entry {
    const char *line;
    size_t line_len;
    const char *alive;
    size_t alive_len;
    const char *id;
    size_t id_len;
    int64_t waiter_timeout_ms;
} hl_cond_entry;

/* What a release into a condition answers, besides a release's answers,
 * when the server counts the owner's hold more than once: nothing was
 * changed. */
#define HL_COND_HELD_TWICE (-5)

/* What a lean release answers when clients wait in line (HL_REL_FULL_FORM). */
#define HL_RELEASE_FULL_FORM (-6)
#define HL_RELEASE_FULL_FORM_TEXT "-6"

typedef struct hl_kind {
    const char *name; /* for messages */
    /* Waiters listen on a channel of their own (channel with an owner's
     * field), where a release wakes exactly the next in line. */
    bool channel_per_owner;
    /* The lock's wake-up channel (field NULL), or the channel an owner's
     * waiters listen on with channel_per_owner.  0 or HILOCK_ENOMEM;
     * release with hl_aux_name_done. */
    int (*channel)(const hilock_lock *lock, const char *field,
                   size_t field_len, hl_aux_name *out);
    /* The detail of HILOCK_EBUSY when the wait ends with the lock held,
     * and when it ends with the lock free but promised to another
     * client; NULL: a lock's. */
    const char *busy_detail;
    const char *promised_detail;
    /* ... and when the last attempt found nothing at the name. */
    const char *unset_detail;
    /* An attempt replying HL_ACQ_SELF_WAIT is refused with HILOCK_EUPGRADE
     * and this detail, which says what the owner must give up first. */
    const char *self_wait_detail;
    /* A release that frees the lock may wake the next local waiter at
     * once, so that its attempt leaves in the same write. */
    bool hand_on;
    /* A new waiter may queue behind this client's waiters without asking
     * the server (only where nothing but the server's order is lost, and
     * no owner can hold the lock through another handle). */
    bool queue_locally;
    /* Every message on the channel wakes every waiter (hl_waiter_add). */
    bool wake_all;
    /* The attempt only reads (a latch's count): it changes nothing on
     * the server, so it takes no owner turn, needs no reconcile after an
     * unknown outcome and no replica acknowledgement, and its grant keeps
     * no hold: the wait is over, with the grant's count as its value. */
    bool reads_only;
    /* The detail of HILOCK_EPROTO for a reply that answers no attempt;
     * NULL: a generic one. */
    const char *bad_reply_detail;
    /* Waiters of one handle go in line, oldest first (a semaphore's,
     * whose requests differ in size): only the head attempts by itself,
     * so a waiter for many is never passed by later waiters for fewer; a
     * grant that leaves free (hl_acquire_result.free) enough for the next
     * ones lets them attempt at once, and a head that leaves lets the
     * next one attempt. */
    bool in_line;
    /* A grant is nobody's hold (a plain semaphore's permits): the client
     * keeps nothing of it.  The attempt leaves a record of the grant on
     * the server under its nonce, which a reconcile of that attempt reads
     * to give the grant back, and which forget drops, without waiting,
     * once the grant is answered.  The server keeps a record record_ms,
     * and a reconcile of such a grant tries that long. */
    bool unheld_grants;
    /* The server lines up waiting clients, not owners: the lock's channel
     * (field NULL) is the client's own, where a release wakes the first
     * client in line, whose waiters then take turns locally as with any
     * channel; leave is sent when the client's last waiter for the lock
     * stops waiting without it, with that waiter's field. */
    bool line_per_client;
    /* line_per_client kinds: the channel where other libraries announce
     * the lock's releases ("0"), which the client first in the server's
     * line listens to (the attempt's reply says it is first, or "h" on
     * its own channel does).  0 or HILOCK_ENOMEM. */
    int (*foreign_channel)(const hilock_lock *lock, hl_aux_name *out);
    /* Other libraries release with "1" there too (Redisson's read-write
     * lock): every message on the foreign channel counts as a release. */
    bool foreign_any_message;
    /* Drop the record of the attempt or release nonce, or with handed
     * the grant a release made for the wish nonce (HL_CONSUME_HANDED),
     * without waiting for the answer. */
    int (*forget)(hilock_lock *lock, const char *nonce, size_t nonce_len,
                  bool handed);
    int64_t record_ms;
    /* Make a release by id (unheld_grants kinds) again on the master
     * there now, after one the replicas did not acknowledge was perhaps
     * lost in a failover (unacked.h): it consumes what consume says of
     * the grant id, or writes its own record under id, and either way
     * gives amount back only if the server has not seen it.  Nobody
     * waits for the answer.  NULL: no release by id. */
    int (*release_again)(hilock_lock *lock, const char *id, size_t id_len,
                         int64_t amount, hl_consume consume);
    /* The key the lease engine renews a hold's lease on, when it is not
     * the name (an expirable permit's zset); NULL: the name.  Made once,
     * when the handle is. */
    int (*lease_key)(const char *name, size_t name_len, hl_aux_name *out);
    int (*attempt)(hilock_lock *lock, const hl_attempt_args *args,
                   hl_request_fn *fn, void *data);
    void (*parse_attempt)(const hilock_reply *reply, hl_acquire_result *out);
    /* Give back one hold; remaining holds keep lease_ms.  The reply of
     * release and force_release may also come as {reply, refusal}: the
     * server's ACL refused the wake-up PUBLISH after the lock changed,
     * and refusal is the server's words. */
    int (*release)(hilock_lock *lock, const char *field, size_t field_len,
                   int64_t lease_ms, hl_request_fn *fn, void *data);
    hl_release_outcome (*parse_release)(const hilock_reply *reply,
                                        int64_t *remaining);
    /* Kinds whose waiters ride on a release that frees the lock (ride.h)
     * set it: release as release does, and run the attempt a in the same
     * script, which replies {the release's reply, the attempt's}.  The
     * engine does not ask it of a holder with a lock delay. */
    int (*release_riding)(hilock_lock *lock, const char *field,
                          size_t field_len, int64_t lease_ms,
                          const hl_attempt_args *a, hl_request_fn *fn,
                          void *data);
    /* Delete the lock whoever holds it; reply 1/0 for deleted. */
    int (*force_release)(hilock_lock *lock, hl_request_fn *fn, void *data);
    /* After an acquire whose outcome is unknown: void the attempt named
     * by nonce (empty: none), so that it refuses to run if it reaches the
     * server later, and bring owner's count on the server down to
     * expected (the holds the client knows of).  Replies the count.
     * expected HL_RECONCILE_WITHDRAW (reconcile_withdraws kinds only):
     * the attempt was answered, and only its wish, and a grant a release
     * made for it, go; nothing is voided. */
    int (*reconcile)(hilock_lock *lock, const char *field, size_t field_len,
                     int64_t expected, const char *nonce, size_t nonce_len,
                     hl_request_fn *fn, void *data);
    /* Kinds whose waiters reserve a place on the server (a queue slot, a
     * waiting writer's claim) set leave.  Their waiters attempt again at
     * least every third of the waiter timeout (the attempt renews the
     * place), and call leave, without waiting for its reply, when they
     * stop waiting without the lock. */
    int (*leave)(hilock_lock *lock, const char *field, size_t field_len);
    /* Kinds whose releases may give the lock outright to the first client
     * in line that recorded a wish (a direct hand-off: the woken client
     * sends no attempt; docs/internals/locks.md) set withdraw.  An acquire whose
     * last attempt, named by nonce, recorded a wish calls it when it ends
     * without the lock, without waiting for the reply: it drops the wish,
     * and gives back a grant a release made for it. */
    int (*withdraw)(hilock_lock *lock, const char *field, size_t field_len,
                    const char *nonce, size_t nonce_len);
    /* An unheld_grants kind whose releases grant wishes as withdraw's
     * do, and whose reconcile of an attempt withdraws the wish it
     * recorded and gives back a grant made for it: an acquire that ends
     * without its permits reconciles the attempts of its wishes, retried
     * as any reconcile, since a grant of permits is nobody's hold and
     * nothing else would give it back. */
    bool reconcile_withdraws;
    /* Called on the loop thread on each grant of a hold, for kinds whose
     * data shows what they are only while somebody waits: they leave
     * word of it for operators (kindkit/kind_mark.h).  NULL: none. */
    void (*mark_grant)(hilock_lock *lock);
    /* Renew a batch: KEYS are lock names, ARGV[1] the lease in ms, then
     * one field per key; replies an array of 1 (renewed) or 0 (not held). */
    const hl_script *renew;
    /* Kinds that keep a lock delay: the renewal the lease engine runs
     * instead of renew when the client sets a delay (KEYS in pairs, a
     * name and its delay_key; ARGV: lease ms, delay ms, then the fields),
     * and the lock's delay key.  NULL: the kind keeps none. */
    const hl_script *renew_delayed;
    int (*delay_key)(const char *name, size_t name_len, hl_aux_name *out);
    /* Ask one question (field: the owner's, for HL_QUERY_HOLD_COUNT) and
     * read its reply; parse_query returns false on a reply it does not
     * expect. */
    int (*query)(hilock_lock *lock, hl_query q, const char *field,
                 size_t field_len, hl_request_fn *fn, void *data);
    bool (*parse_query)(hl_query q, const hilock_reply *reply,
                        int64_t *value);
    /* Read everything the server keeps of the lock, and turn the reply
     * into a status for hilock_lock_status_free; parse_status takes the
     * reply, which the status may point into, whatever it returns
     * (HILOCK_OK, HILOCK_EPROTO or HILOCK_ENOMEM). */
    int (*status)(hilock_lock *lock, hl_request_fn *fn, void *data);
    int (*parse_status)(hilock_reply *reply, hilock_lock_status **out);
    /* Kinds whose holders may be asked to give the lock up
     * (hilock_lock_request_release) set both; NULL: none may.  The
     * channel holders listen on for requests (0 or HILOCK_ENOMEM), and
     * the request: it publishes reason there when anyone holds the lock
     * and replies {held 1/0, listeners}, or {1, 0, refusal} when the
     * server's ACL refused the PUBLISH. */
    int (*request_channel)(const hilock_lock *lock, hl_aux_name *out);
    int (*request_release)(hilock_lock *lock, const char *reason,
                           size_t reason_len, hl_request_fn *fn, void *data);
    /* Kinds a condition can wait on set it: release as release does, in
     * one script with the waiter's entry into the condition's line
     * (only when the field holds exactly once; HL_COND_HELD_TWICE when
     * it holds more). */
    int (*release_into_cond)(hilock_lock *lock, const char *field,
                             size_t field_len, int64_t lease_ms,
                             const hl_cond_entry *entry, hl_request_fn *fn,
                             void *data);
} hl_kind;

/* One owner's holds of a lock, with their lease in the same allocation. */
struct hl_hold {
    hilock_lock *lock;
    hl_hold *next;       /* in lock->holds */
    uint64_t owner;
    int64_t count;       /* holds the client knows of */
    uint64_t token;
    hl_monotime since;   /* when the client first counted it held */
    int32_t lease_ms;    /* of the hold's lease: 0 for the watchdog */
    int32_t releases_in_flight;
    bool lost;
    /* An acquire found holds older than its grant gone on the server and
     * reported them lost; the release that comes once the holds counted
     * above are released is theirs, and says so. */
    bool older_lost;
    bool leased;         /* the lease below runs for this hold */
    bool lease_busy;     /* the engine still names the lease below */
    bool dropped;        /* off the lock's list; freed when not busy */
    hl_lease lease_mem;
};

/* The hold's running lease, or NULL. */
static inline hl_lease *hl_hold_lease(hl_hold *h)
{
    return h->leased ? &h->lease_mem : NULL;
}

/* The engine's callbacks for leases living in holds. */
hl_lease_subject hl_hold_lease_subject(const hl_lease *lease);
void hl_hold_lease_lost(hl_lease *lease, const char *why);
void hl_hold_lease_released(hl_lease *lease);

/* A listener to a handle's holds, for a layer that builds on handles
 * (compose.h); its storage is the listener's own. */
typedef struct hl_hold_listener hl_hold_listener;
struct hl_hold_listener {
    hilock_lost_cb *cb;
    void *data;
    hl_hold_listener *next; /* in the handle's list: the engine's */
};

/* The parts of a handle that few handles use, allocated with the first
 * use of any and freed with the handle (hl_lock_rare_get): every handle
 * is a watchdog lease's memory, and a client may hold a hundred thousand.
 * Loop thread, but for the allocation. */
typedef struct hl_lock_rare {
    /* Once a second owner's line of turns needs a bucket, the lines'
     * heads hashed by owner into turn_mask + 1 buckets, turn_lines of
     * them (turns.c). */
    hl_turn **turn_table;
    uint32_t turn_mask;
    uint32_t turn_lines;
    hl_hold_listener *listeners; /* told before the user's lost callback */
    /* The user's callback for requests to give the lock up, or NULL, and
     * its subscription, attached while the callback is set and the handle
     * holds the lock (release_request.c), allocated with the first. */
    hilock_release_request_cb *request_cb;
    void *request_data;
    hl_sub *request_sub;
    /* Answered unheld grants whose records stay for a release to
     * consume (kept_grants.h). */
    struct hl_kept_grant *kept;
    size_t kept_n;
    /* Releases the replicas did not acknowledge (unacked.h), from the
     * first. */
    struct hl_unacked_set *unacked;
} hl_lock_rare;

struct hilock_lock {
    /* NULL once the client is gone.  Written under the link mutex (any
     * thread reads it through hl_lock_client_get), read freely on the
     * loop thread, which alone detaches it. */
    hilock_client *client;
    hl_conn *conn;         /* the client's connection for this name */
    const hl_kind *kind;
    hilock_lock *prev_in_client;
    hilock_lock *next_in_client;
    hl_hold *holds;
    hl_acquire_op *ops; /* pending acquires, oldest first */
    hl_acquire_op *ops_tail;
    /* Requests taking turns: one line per owner (engine_internal.h).
     * Until a second line needs a bucket of its own (hl_lock_rare's
     * turn_table), every line's head is in this one. */
    hl_turn *turns;
    /* The user's lost callback, or NULL; in the handle, so that setting
     * or clearing it never allocates.  Loop thread. */
    hilock_lost_cb *lost_cb;
    void *lost_data;
    /* Pending async acquires, for a cancel by op id (acquire_ids.h);
     * under the link mutex. */
    hl_acquire_op *acquires_by_id;
    _Atomic(hl_lock_rare *) rare; /* NULL until first needed */
    atomic_int refs; /* the user's, plus one per operation in flight */
    /* When an attempt of this handle last found the lock taken by
     * another, in ms of the monotonic clock modulo 2^32; 0: never.
     * Written on the loop thread, read by blocking callers
     * (hl_lock_taking_turns). */
    _Atomic uint32_t others_seen_ms;
    uint32_t name_len;      /* at most HILOCK_MAX_NAME_LEN */
    /* The kind's lease key, after the name in this allocation; 0: the
     * lease key is the name (hl_lock_lease_key). */
    uint32_t lease_key_len;
    /* When mark_grant last wrote the kind's marker, in ms of the
     * monotonic clock modulo 2^32; 0: never.  Loop thread. */
    uint32_t kind_marked_ms;
    atomic_bool destroyed;
    /* Destroyed on another client's loop thread while this one's client
     * was closing: the closing loop drops the user's reference once it
     * has detached the handle.  Under the client's lock. */
    bool unref_when_detached;
    char name[]; /* name_len bytes and a NUL */
};

/* The handle's rare parts, or NULL while none was ever needed.  Any
 * thread: they are published once and stay until the handle goes. */
static inline hl_lock_rare *hl_lock_rare_peek(const hilock_lock *lock)
{
    return atomic_load_explicit(&((hilock_lock *)lock)->rare,
                                memory_order_acquire);
}

/* The handle's rare parts, allocated if none are yet; NULL when memory
 * runs out.  Any thread. */
hl_lock_rare *hl_lock_rare_get(hilock_lock *lock);

/* The key the lock's leases renew, and its length. */
static inline const char *hl_lock_lease_key(const hilock_lock *lock,
                                            size_t *len)
{
    if (lock->lease_key_len == 0) {
        *len = lock->name_len;
        return lock->name;
    }
    *len = lock->lease_key_len;
    return lock->name + lock->name_len + 1;
}


/* The lock's wake-up channel, from its kind.  0 or HILOCK_ENOMEM;
 * release with hl_aux_name_done. */
int hl_lock_channel(const hilock_lock *lock, hl_aux_name *out);
/* The channel owner's waiters listen on: the lock's channel, or with
 * channel_per_owner, the kind's channel for the owner's field. */
int hl_owner_channel(const hilock_lock *lock, uint64_t owner,
                     hl_aux_name *out);

/* Create a handle of a kind; the kind module calls this. */
int hl_lock_create(hilock_lock **out, hilock_client *client,
                   const hl_kind *kind, const char *name, size_t name_len);

/* The client tells its locks that it is going away. */
void hl_locks_client_closed(hilock_client *client);

/* The lock's client with a reference on its memory (hl_client_unref when
 * done), or NULL once the lock is destroyed or detached.  Any thread: the
 * entry points use it, since a client closed from another thread detaches
 * the lock meanwhile. */
hilock_client *hl_lock_client_get(hilock_lock *lock);

/* The mutex that guards the lock's link to its client, shared by a few
 * handles; it also guards acquires_by_id. */
pthread_mutex_t *hl_lock_link_mutex(const hilock_lock *lock);

/* The connection a lock's scripts run on, or NULL when closed. */
hl_conn *hl_lock_conn(const hilock_lock *lock);

/* Send a write of a kind's that changes what the server holds:
 * send(ctx, f, d) queues it on the lock's connection with the callback
 * it is given, and fn(data, ...) gets the answer once the replicas the
 * client's policy names have acknowledged it, or with HILOCK_ENOACK (the
 * write ran; its reply attached, the detail saying why) when they did
 * not.  Returns send's status, HILOCK_ECLOSED or HILOCK_ENOMEM.  Loop
 * thread. */
typedef int hl_write_send_fn(void *ctx, hl_request_fn *fn, void *data);
int hl_lock_write(hilock_lock *lock, hl_write_send_fn *send, void *ctx,
                  hl_request_fn *fn, void *data);

/* The lock was freed by this client and promised to nobody, and no
 * message says so (line_per_client kinds): its own waiters hear it here,
 * one refused just before the release and not listening yet included.
 * Loop thread. */
void hl_lock_freed_here(hilock_lock *lock);
/* Whether the client still has the channel owner's waiters listen on
 * (channel_per_owner kinds): one of them waited for the lock lately. */
bool hl_lock_owner_listened(const hilock_lock *lock, uint64_t owner);

/* Whether waiters of the lock's client other than self (NULL: any) wait
 * for it on its channel; with known, also whether the client has that
 * channel at all (false too when memory runs out).  And the client's
 * waiter timeout.  Loop thread. */
struct hl_waiter;
bool hl_lock_others_wait(const hilock_lock *lock, const struct hl_waiter *self,
                         bool *known);
int64_t hl_lock_waiter_timeout_ms(const hilock_lock *lock);
/* The client's lock delay in ms, 0 when off (hilock/options.h). */
int64_t hl_lock_delay_ms(const hilock_lock *lock);

/* The client's id, HILOCK_CLIENT_ID_LEN characters.  The lock must have
 * a client (loop thread, or a handle not yet closed). */
const char *hl_lock_client_id(const hilock_lock *lock);

/* Format "<client id>:<owner>" into buf; returns its length. */
size_t hl_owner_field(const hilock_lock *lock, uint64_t owner, char *buf,
                      size_t cap);

/* Whether the lock's client talks to a Redis Cluster, as far as it knows
 * yet.  Loop thread. */
bool hl_lock_on_cluster(const hilock_lock *lock);

/* Whether the lock's writes go out alone, with no replica acknowledgement
 * and no topology to vouch for their answers (hl_ack_plain): only then
 * may another client's release write a grant for this client, since no
 * WAIT of this client's could cover it.  Loop thread. */
bool hl_lock_writes_plain(const hilock_lock *lock);
/* Whether an attempt of this handle found the lock taken by another, or
 * a lean form of its calls was sent back for the full form
 * (hl_attempt_args.lean), within the last HL_TURNS_LATELY_MS: the lock
 * is passed between processes, whose threads need the cores when it is.
 * hl_lock_saw_others marks either.  Any thread. */
#define HL_TURNS_LATELY_MS 500
bool hl_lock_taking_turns(hilock_lock *lock);
/* The same within the last HL_CONTENDED_LATELY_MS: the handle's calls go
 * in full for as long as a lock contended now is likely to be again.
 * Any thread. */
#define HL_CONTENDED_LATELY_MS 5000
bool hl_lock_contended_lately(hilock_lock *lock);
/* Why an operation of the lock cannot start: HILOCK_ECANCELED when the
 * handle was destroyed, else HILOCK_ECLOSED (its client closed), with
 * the detail in *why.  Loop thread. */
int hl_lock_gone(const hilock_lock *lock, const char **why);
void hl_lock_saw_others(hilock_lock *lock);

#endif
