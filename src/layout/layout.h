/* Redisson's data layout, which Java services share with us: the names of
 * a lock's keys and channels, the braces rule that keeps them in the
 * lock's cluster slot, the fields and the messages a release publishes.
 * Every kind names its keys through this file, so that the layout can be
 * read (and checked against Redisson) in one place. */
#ifndef HL_LAYOUT_H
#define HL_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/base/auxname.h"

/* Key and channel prefixes: "<prefix>:{NAME}". */
#define HL_LAYOUT_LOCK_CHANNEL "redisson_lock__channel"
#define HL_LAYOUT_RWLOCK_CHANNEL "redisson_rwlock"
#define HL_LAYOUT_FAIR_QUEUE "redisson_lock_queue"
#define HL_LAYOUT_FAIR_TIMEOUT "redisson_lock_timeout"
#define HL_LAYOUT_TOKEN "redisson_lock_token"
/* Semaphores (RSemaphore, RPermitExpirableSemaphore): the count is a
 * string at NAME, releases and count changes publish the new count on
 * "redisson_sc:{NAME}", and expirable permits are the members of the zset
 * "{NAME}:timeout" (see hl_layout_suffixed), scored by expiry in ms. */
#define HL_LAYOUT_SEMAPHORE_CHANNEL "redisson_sc"
#define HL_LAYOUT_PERMIT_TIMEOUT "timeout"
/* The score Redisson gives a permit that never expires. */
#define HL_LAYOUT_PERMIT_NO_EXPIRY "922337203685477"
/* Ours, beyond Redisson: the places of the clients waiting to write a
 * read-write lock (see HL_LAYOUT_RWLOCK_LINE), the
 * attempts a reconcile voided, and when the places of our own waiters in
 * a fair line run out (Redisson's places are spaced for its grants, not
 * for telling a dead waiter from a live one). */
#define HL_LAYOUT_RWLOCK_WRITERS "hilock_rwlock_writers"
#define HL_LAYOUT_VOID "hilock_void"
/* Ours: what a plain semaphore's acquire attempt or release did, while
 * its client may not have the answer yet, one string each,
 * "hilock_sem_record:{NAME}:<id>" (see hl_layout_key), with a TTL of its
 * own.  An attempt's id is its nonce and its record holds the permits it
 * took, or "void" once a reconcile refused it; a release's id is
 * "<client id>:r<n>".  A plain semaphore's permits are nobody's, so
 * nothing else on the server tells what an unanswered call did. */
#define HL_LAYOUT_SEM_RECORD "hilock_sem_record"
#define HL_LAYOUT_SEM_RECORD_VOID "void"
#define HL_LAYOUT_FAIR_ALIVE "hilock_fair_alive"
/* Ours: the clients (processes) waiting for a reentrant lock, so that a
 * release wakes one of them, not all (Redisson's waiters all hear its
 * channel).  "hilock_lock_line:{NAME}" lists client ids in the order they
 * came; "hilock_lock_alive:{NAME}" scores each by the server time (ms) at
 * which it counts as gone unless one of its waiters tries again;
 * "hilock_lock_next:{NAME}" names the client a release promised the free
 * lock to, for as long as that client counts as alive; and a client's
 * waiters listen on "hilock_lock_wake:{NAME}:<client id>". */
#define HL_LAYOUT_LOCK_LINE "hilock_lock_line"
#define HL_LAYOUT_LOCK_ALIVE "hilock_lock_alive"
#define HL_LAYOUT_LOCK_NEXT "hilock_lock_next"
#define HL_LAYOUT_LOCK_WAKE "hilock_lock_wake"
/* Ours: what each waiting client's head waiter asks for, so that a
 * release can give it the lock outright (a direct hand-off): a hash,
 * client id -> "w <attempt nonce> <lease ms> <field>" while it waits ("W"
 * when the attempt was told it is first in line, and so listens on
 * Redisson's channel), and "g <attempt nonce> <field>" once a release
 * granted it, until that client claims, withdraws or registers again.
 * The grant is announced as "g<attempt nonce>" on the client's wake
 * channel. */
#define HL_LAYOUT_LOCK_WANT "hilock_lock_want"
/* Ours: the same for the fair lock, whose line is of waiters, not of
 * clients: a hash, field -> "w <attempt nonce> <lease ms>" while that
 * waiter waits, "g <attempt nonce>" once a release granted it.  The grant
 * is announced as "g<attempt nonce>" on the waiter's channel,
 * "redisson_lock__channel:{NAME}:<field>". */
#define HL_LAYOUT_FAIR_WANT "hilock_fair_want"
/* Ours: a reentrant or fair lock's lock delay, "hilock_lock_delay:{NAME}",
 * a string holding the delay in ms.  A holder whose client sets a delay
 * writes it at every grant and renewal to expire a delay after its lease;
 * a release that frees the lock deletes it, a forced one leaves it.
 * While it lives and the lock is free, our acquires refuse, so a holder
 * that lost the lock without releasing it (paused, cut off, killed) has
 * that long to stop before another starts.  Redisson never reads it. */
#define HL_LAYOUT_LOCK_DELAY "hilock_lock_delay"
/* Ours: the clients waiting to write a read-write lock, lined up as the
 * reentrant lock's are: "hilock_rwlock_line:{NAME}" lists them,
 * "hilock_rwlock_writers:{NAME}" scores each by when it counts as gone
 * (while it has a live member, new readers wait), "hilock_rwlock_next:
 * {NAME}" names the client a release promised the lock to, and a client's
 * writers listen on "hilock_rwlock_wake:{NAME}:<client id>". */
#define HL_LAYOUT_RWLOCK_LINE "hilock_rwlock_line"
#define HL_LAYOUT_RWLOCK_NEXT "hilock_rwlock_next"
#define HL_LAYOUT_RWLOCK_WAKE "hilock_rwlock_wake"
/* Ours: the wishes of the clients waiting to write, as the reentrant
 * lock's (HL_LAYOUT_LOCK_WANT), in "hilock_rwlock_want:{NAME}"; a grant
 * writes "mode" "write" and the field's write hold. */
#define HL_LAYOUT_RWLOCK_WANT "hilock_rwlock_want"
/* Ours: the clients with readers waiting for a read-write lock,
 * "hilock_rwlock_readers:{NAME}", a zset: client id -> server time (ms)
 * at which it counts as gone.  They listen on Redisson's channel, where
 * a release that would hand the lock to a writer's wish counts them as
 * ours, not as Java's waiters (HL_LUA_LINE_HAND_TO_WISH). */
#define HL_LAYOUT_RWLOCK_READERS "hilock_rwlock_readers"
/* Ours: the clients waiting for permits of either semaphore kind, lined
 * up as the reentrant lock's are, with the same four keys:
 * "hilock_sem_line:{NAME}", "hilock_sem_alive:{NAME}",
 * "hilock_sem_next:{NAME}" and "hilock_sem_wake:{NAME}:<client id>". */
#define HL_LAYOUT_SEM_LINE "hilock_sem_line"
#define HL_LAYOUT_SEM_ALIVE "hilock_sem_alive"
#define HL_LAYOUT_SEM_NEXT "hilock_sem_next"
#define HL_LAYOUT_SEM_WAKE "hilock_sem_wake"
/* Ours: the wishes of the clients waiting for a plain semaphore's
 * permits, "hilock_sem_want:{NAME}", a hash: client id -> "w <nonce>
 * <permits>" (or "W ..." from an attempt told it was first in line); and
 * the grants releases made for them, "hilock_sem_granted:{NAME}", a
 * hash: the wish's nonce -> the permits, kept as long as a record
 * (HL_LAYOUT_SEM_RECORD_TTL_MS) until a release or a reconcile of the
 * nonce consumes it. */
#define HL_LAYOUT_SEM_WANT "hilock_sem_want"
#define HL_LAYOUT_SEM_GRANTED "hilock_sem_granted"
/* A field's client id is its first HILOCK_CLIENT_ID_LEN characters, as
 * scripts count them. */
#define HL_LAYOUT_CLIENT_ID_LEN_TEXT "36"

/* Redisson's count-down latch: the count is a string at the name, and
 * its channel is this prefix followed by "{NAME}", with the braces always
 * (no braces rule).  A try-set and a delete publish "1" (a new count),
 * the count down that reaches zero publishes "0". */
#define HL_LAYOUT_LATCH_CHANNEL "redisson_countdownlatch__channel__"
#define HL_LAYOUT_MSG_LATCH_ZERO "0"
#define HL_LAYOUT_MSG_LATCH_NEW_COUNT "1"
/* Ours: "hilock_kind:{NAME}" (hl_layout_key) names the kind a client of
 * ours used NAME as, where the data alone cannot tell (docs/guide/operators.md,
 * "What a name is"): one of the HL_LAYOUT_KIND_* words.  A latch's and a
 * semaphore's stays while the count does, and a latch's a day after it
 * opened, so that a latch not there now is open, not a name nobody set;
 * a fair or read-write lock's a day after its last grant. */
#define HL_LAYOUT_KIND "hilock_kind"
#define HL_LAYOUT_KIND_FAIR "fair"
#define HL_LAYOUT_KIND_READ_WRITE "read-write"
#define HL_LAYOUT_KIND_SEMAPHORE "semaphore"
#define HL_LAYOUT_KIND_LATCH "latch"
#define HL_LAYOUT_KIND_AFTER_S "86400"
/* Ours: the channel "hilock_release_request:{NAME}", where a lock's
 * holders that take requests to give it up listen while they hold it. */
#define HL_LAYOUT_RELEASE_REQUEST "hilock_release_request"
/* Ours: a condition's keys and channels (kindkit/cond_lua.h), under the
 * name of the lock it is bound to, with the condition's name as tail. */
#define HL_LAYOUT_COND_LINE "hilock_cond_line"
#define HL_LAYOUT_COND_ALIVE "hilock_cond_alive"
#define HL_LAYOUT_COND_SIGNALED "hilock_cond_signaled"
#define HL_LAYOUT_COND_WAKE "hilock_cond_wake"

/* Redisson's default thread wait time: each place in its fair line is the
 * one before it plus this, and each grant takes this off every place. */
#define HL_LAYOUT_FAIR_REDISSON_WAIT_MS 300000

/* What a release publishes: Redisson's unlock message, and its read-write
 * lock's "readers may come" message. */
#define HL_LAYOUT_MSG_UNLOCK "0"
#define HL_LAYOUT_MSG_READ_UNLOCK "1"

/* The read-write lock's hash: its mode field and values, and the suffix of
 * the writer's field "<owner><suffix>". */
#define HL_LAYOUT_RWLOCK_MODE "mode"
#define HL_LAYOUT_RWLOCK_READ "read"
#define HL_LAYOUT_RWLOCK_WRITE "write"
#define HL_LAYOUT_RWLOCK_WRITE_SUFFIX ":write"

/* How long a voided attempt stays refused: longer than any delay a
 * request can plausibly spend in a paused server's socket buffer. */
#define HL_LAYOUT_VOID_TTL_MS 600000
/* How long a plain semaphore's record is kept: as long as an attempt
 * stays voidable, so a reconcile that may still meet the attempt finds
 * what it did. */
#define HL_LAYOUT_SEM_RECORD_TTL_MS HL_LAYOUT_VOID_TTL_MS

#define HL_LAYOUT_STR_(x) #x
#define HL_LAYOUT_STR(x) HL_LAYOUT_STR_(x)
#define HL_LAYOUT_VOID_TTL_MS_TEXT HL_LAYOUT_STR(HL_LAYOUT_VOID_TTL_MS)
#define HL_LAYOUT_SEM_RECORD_TTL_MS_TEXT HL_LAYOUT_VOID_TTL_MS_TEXT
#define HL_LAYOUT_FAIR_REDISSON_WAIT_MS_TEXT                               \
    HL_LAYOUT_STR(HL_LAYOUT_FAIR_REDISSON_WAIT_MS)

/* The braces rule in Lua, for keys a script names itself: a read hold's
 * timeout key "{NAME}:<field>:rwlock_timeout:<n>", without the braces
 * when NAME holds a '{' already.  The function's name is how the scripts'
 * check (tests/test_script_keys.c) tells these keys from others. */
#define HL_LAYOUT_LUA_RWLOCK_TIMEOUT_KEY_FN "tkey"
#define HL_LAYOUT_LUA_RWLOCK_TIMEOUT_KEY                                    \
    "local function " HL_LAYOUT_LUA_RWLOCK_TIMEOUT_KEY_FN "(name, f, i)\n"  \
    "  if string.find(name, '{', 1, true) then\n"                           \
    "    return name .. ':' .. f .. ':rwlock_timeout:' .. i\n"              \
    "  end\n"                                                               \
    "  return '{' .. name .. '}:' .. f .. ':rwlock_timeout:' .. i\n"        \
    "end\n"

/* Whether every key and channel the braces rule derives from NAME lies
 * in NAME's own cluster slot: when NAME has no braces at all, or has a
 * hash tag of its own (a '{', later a '}', something between).  Other
 * names with braces ("{}x", "{x", "x}y") count whole while their keys do
 * not, under Redisson's rule as under any. */
bool hl_layout_one_slot(const char *name, size_t name_len);

/* "prefix:{NAME}", or "prefix:NAME" when NAME holds a '{' already, then
 * ":<tail>" when tail is not NULL.  0 or -1 (out of memory); release with
 * hl_aux_name_done either way. */
int hl_layout_key(hl_aux_name *out, const char *prefix, const char *name,
                  size_t name_len, const char *tail, size_t tail_len);

/* A latch's channel, HL_LAYOUT_LATCH_CHANNEL "{NAME}".  0 or -1 (out of
 * memory); release with hl_aux_name_done either way. */
int hl_layout_latch_channel(hl_aux_name *out, const char *name,
                            size_t name_len);
/* "{NAME}:<tail>", or "NAME:<tail>" when NAME holds a '{' already
 * (Redisson's suffixName).  0 or -1 (out of memory); release with
 * hl_aux_name_done either way. */
int hl_layout_suffixed(hl_aux_name *out, const char *name, size_t name_len,
                       const char *tail);

#endif
