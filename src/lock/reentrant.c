/* The reentrant lock kind: Redisson's RLock layout, with a line of the
 * waiting clients beside it.
 *
 *   NAME                               hash: "<client id>:<owner>" -> count
 *   redisson_lock__channel:{NAME}      a release publishes "0", for
 *                                      Redisson's waiters
 *   redisson_lock_token:{NAME}         fencing counter (INCR)
 *   hilock_void:{NAME}                 attempts voided by a reconcile (set;
 *                                      exists only after connection trouble)
 *   hilock_lock_line:{NAME}            waiting client ids, oldest first
 *   hilock_lock_alive:{NAME}           zset: client id -> server time (ms)
 *                                      at which it counts as gone
 *   hilock_lock_next:{NAME}            the client a release promised the
 *                                      lock to (string, expires with it)
 *   hilock_lock_wake:{NAME}:<client>   where that client is woken
 *   hilock_lock_want:{NAME}            hash: client id -> the wish of its
 *                                      head waiter, or the grant a
 *                                      release made for it
 *   hilock_lock_delay:{NAME}           the lock delay of a holder whose
 *                                      client sets one (string: ms), to
 *                                      expire that long after its lease
 *
 * Redisson's waiters all hear its channel, and each tries at every
 * release: the server's work per hand-off grows with the number of
 * waiting processes.  Ours listen on their client's own channel instead.
 * A release that frees the lock promises it to the first live client in
 * line and wakes that client only, whose waiters take turns locally; a
 * client comes to the end of the line when one of its waiters is refused,
 * and stays in it while its waiters wait.  The promise keeps other
 * clients of ours from taking the lock before the woken one, so no client
 * waits for ever; Redisson's clients do not know of it and may still
 * take the lock first, as they may from each other.  A client that dies
 * is passed over once its place runs out: its waiters renew the place at
 * every attempt, at least every third of the waiter timeout, and the
 * promise lasts no longer than the place.  Redisson's releases publish
 * on its channel only, where the client first in our line listens: it
 * learns it is first from the answer to its refused attempt, or, when the
 * one before it leaves the line, from a message on its own channel.
 *
 * A direct hand-off spares the woken client its attempt: a waiting
 * attempt records what it asks for (its field and lease, under its
 * nonce) as its client's wish, and a release that finds a wish for the
 * client it would promise the lock to grants the wish instead, and says
 * so on that client's channel ("g<nonce>").  The grant lasts no longer
 * than that client's place, so a client that died meanwhile holds up the
 * line no longer than a promise to it would.  A later attempt of the
 * same acquire that finds the grant takes it as its own (the message was
 * lost); an acquire that ends without the lock withdraws its wish and
 * gives back a grant made for it; a reconcile of the field drops it.
 * Only where no replica acknowledgement or topology must vouch for a
 * write (hl_lock_writes_plain): no WAIT of the woken client could cover
 * a grant another client's release wrote.  And only while no Redisson
 * waiter listens (HL_LUA_LINE_HAND_TO_WISH): grants would keep it out. */
#include <stdio.h>
#include <string.h>

#include "core/engine/lock_handle.h"
#include "core/engine/ride.h"
#include "core/transport/resp.h"
#include "kindkit/cond_lua.h"
#include "kindkit/kindkit.h"
#include "kindkit/line_lua.h"
#include "kindkit/script_registry.h"
#include "layout/layout.h"
#include "core/base/cname.h"

/* What our releases announce on Redisson's channel: "1", which its
 * waiters take as a release like "0" (each of a JVM's waiters then
 * tries), and which our client first in line, listening there for
 * Redisson's releases ("0"), tells from theirs and leaves alone, since
 * ours wake it on its own channel. */
#define MSG_OUR_RELEASE HL_LAYOUT_MSG_READ_UNLOCK

/* The acquire script, in two forms: an attempt that has nothing to do
 * with its client's wish (an uncontended one, the most common) passes
 * neither the wishes' key nor the last two arguments, since every key
 * and argument costs the server on every call.  The wish form's
 * drop_stale runs before every answer after wish_first.
 *
 * KEYS: name, token key, void set, line, alive, next, delay key, and for
 * acquire_wish_lua the wishes.  ARGV: lease ms, field, fenced (0/1),
 * known token, attempt nonce, waiter timeout ms (0: a single try, which
 * keeps no place), how long the client stays in line after a first hold
 * (0: it leaves; -1: it knows of no place there), and for
 * acquire_wish_lua what to do with the client's wish (hl_want: 1 record
 * one when refused, 2 only drop the field's) and the nonce of this
 * acquire's attempt whose wish the client knows was recorded ('' none),
 * and last, only from a client that sets one, its lock delay in ms.
 * A free lock whose delay key lives is refused as held, for the key's
 * time left: the holder before lost it without a release, and may not
 * know yet.
 * Replies {1, count, token} when held by field now (a grant a release made
 * for that wish included), {0, pttl, how} when held by another or
 * promised to another client (how: 1 when this client is first in line,
 * plus 2 when the lock is free but promised, pttl then being the
 * promise's, plus 4 when the wish was recorded), {2} when the attempt was
 * voided. */
#define ACQUIRE_LUA(delay_arg, probe, wish_first, wish_join, drop_stale)    \
    HL_LUA_FOREIGN HL_LUA_TOKEN HL_LUA_HOLD_CHECK                           \
    "if redis.call('sismember', KEYS[3], ARGV[5]) == 1 then return {2} end\n" \
    "local delay = " delay_arg "\n"                                          \
    probe                                                                   \
    "local held = false\n"                                                   \
    "for i = 1, #holds, 2 do\n"                                              \
    "  if holds[i] == ARGV[2] then held = holds[i + 1] break end\n"          \
    "end\n"                                                                  \
    "local me = string.sub(ARGV[2], 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n"  \
    wish_first                                                              \
    "local refused = hold_refused(KEYS[1], held) or token_refused(KEYS[2])\n" \
    "if refused then\n" drop_stale "  return refused\n"                      \
    "end\n"                                                                  \
    "local ttl, kept, wanted = false, 0, 0\n"                                \
    /* A delay outranks a promise to this client, which it keeps for when  \
     * the delay ends. */                                                  \
    "if not held and busy then\n"                                           \
    "  ttl = redis.call('pttl', KEYS[1])\n"                                  \
    "  if ttl == -2 then ttl = redis.call('pttl', KEYS[7]) end\n"            \
    "  if ttl == -2 then\n"                                                  \
    "    ttl = false\n"                                                      \
    "    if redis.call('get', KEYS[6]) ~= me then\n"                         \
    "      ttl, kept = redis.call('pttl', KEYS[6]), 2\n"                     \
    "    else\n"                                                             \
    "      redis.call('del', KEYS[6])\n"                                     \
    "    end\n"                                                              \
    "  end\n"                                                                \
    "end\n"                                                                  \
    "if ttl then\n"                                                          \
    /* Held by another owner of this client, whose release wakes this one  \
     * without the server: no place needed (see release_lua). */           \
    "  if kept == 0 and string.sub(holds[1] or '',\n"                       \
    "      1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ") == me then\n"                \
    drop_stale "    return {0, ttl, 0}\n"                                    \
    "  end\n"                                                                \
    "  local first\n"                                                       \
    "  if ARGV[6] ~= '0' then\n" HL_LUA_LINE_JOIN("ARGV[6]") "  end\n"     \
    HL_LUA_LINE_FIRST                                                       \
    "  if ARGV[6] ~= '0' then\n" wish_join "  end\n"                        \
    drop_stale "  return {0, ttl, (first and 1 or 0) + kept + wanted}\n"    \
    "end\n"                                                                  \
    /* A first hold of a client in line (see HL_LUA_LINE_ON_GRANT). */      \
    HL_LUA_LINE_ON_GRANT("not held", "ARGV[7]")                             \
    drop_stale                                                              \
    "local count = redis.call('hincrby', KEYS[1], ARGV[2], '1')\n"           \
    "redis.call('pexpire', KEYS[1], ARGV[1])\n"                              \
    KEEP_DELAY                                                              \
    "return {1, count, token(KEYS[2], count)}\n"

/* The probe of an attempt: busy, whether anything exists at the name, the
 * promise or the delay key, and holds, the hash at the name, read whole
 * (its one field tells a reentry and a refusal by another owner of this
 * client alike).  An attempt that makes no wish most often finds the
 * lock free, promised to nobody and in no delay, which one call tells;
 * the hash is read only where something exists. */
#define PROBE_FREE_FIRST                                                    \
    "local busy = redis.call('exists', KEYS[1], KEYS[6], KEYS[7]) > 0\n"     \
    "local holds = busy and redis.call('hgetall', KEYS[1]) or {}\n"

/* An attempt that makes a wish comes where the lock was contended lately,
 * and most often finds it held, which its holds tell without the call
 * above. */
#define PROBE_HELD_FIRST                                                    \
    "local holds = redis.call('hgetall', KEYS[1])\n"                         \
    "local busy = #holds > 0 or\n"                                           \
    "             redis.call('exists', KEYS[6], KEYS[7]) > 0\n"

/* A holder with a delay has its delay key expire that long after the
 * lease it just set.  Inline, not a function: a function would be made
 * on every call, by clients without a delay too. */
#define KEEP_DELAY                                                          \
    "if delay then\n"                                                       \
    "  redis.call('set', KEYS[7], delay, 'px',\n"                           \
    "             tonumber(ARGV[1]) + tonumber(delay))\n"                   \
    "end\n"

static const char acquire_lua[] =
    ACQUIRE_LUA("ARGV[8]", PROBE_FREE_FIRST, "", "", "");

/* The lean form (hl_attempt_args.lean): the grant of a first hold on a
 * lock nobody touches, the most common call by far, in the fewest keys,
 * arguments and calls, since each costs the server about as much as the
 * grant itself.  Anything at the name, a promise, a delay or a voided
 * attempt's record sends the attempt back for the full form, which
 * judges it, untouched: a late attempt a reconcile voided (by the nonce
 * the engine still gave it) finds that record.  The full form grants
 * the same free lock the same way, and leaves the line alone for a
 * client that knows of no place in it.
 *
 * KEYS: name, void set, next, delay key.  ARGV: lease ms, field.  Replies
 * the count (1) when held by field now, else 0. */
static const char acquire_lean_lua[] =
    "if redis.call('exists', KEYS[1], KEYS[2], KEYS[3], KEYS[4]) > 0 then\n"
    "  return 0\n"
    "end\n"
    "local count = redis.call('hincrby', KEYS[1], ARGV[2], '1')\n"
    "redis.call('pexpire', KEYS[1], ARGV[1])\n"
    "return count\n";

/* The grant a release made for this acquire's wish, its message lost, is
 * this attempt's, for the whole lease from now; any other wish or grant
 * of the field's is stale.  A refused attempt then records its wish. */
#define ACQUIRE_WISH_LUA(delay_arg)                                         \
    ACQUIRE_LUA(delay_arg, PROBE_HELD_FIRST,                                \
    "local w\n"                                                             \
    "if held and ARGV[9] ~= '' then\n"                                      \
    "  w = redis.call('hget', KEYS[8], me)\n"                               \
    "  if w == 'g ' .. ARGV[9] .. ' ' .. ARGV[2] then\n"                    \
    "    redis.call('hdel', KEYS[8], me)\n"                                 \
    "    redis.call('pexpire', KEYS[1], ARGV[1])\n"                         \
    KEEP_DELAY                                                              \
    "    return {1, tonumber(held), 0}\n"                                   \
    "  end\n"                                                               \
    "end\n"                                                                 \
    HL_LUA_WISH_STALE("w"),                                                 \
    /* The delay rides in the wish, after the lease, so that a release      \
     * that grants the wish keeps the new holder's delay (HAND_TO_WISH). */ \
    "    if ARGV[8] == '1' then\n" HL_LUA_KEEP                              \
    "      redis.call('hset', KEYS[8], me, " HL_LUA_WISH_LEAD " ..\n"       \
    "                 ARGV[5] .. ' ' ..\n"                                  \
    "                 ARGV[1] .. (delay and ',' .. delay or '') .. ' ' ..\n" \
    "                 ARGV[2])\n"                                           \
    "      keep_key(KEYS[8], ARGV[6])\n"                                    \
    "      stale, wanted = false, 4\n"                                      \
    "    end\n",                                                            \
    HL_LUA_WISH_DROP_STALE("KEYS[8]"))

static const char acquire_wish_lua[] = ACQUIRE_WISH_LUA("ARGV[10]");

/* In a release's promise_next (HL_LUA_LINE_PROMISE_HANDING), with
 * ARGV[5] "1": the first client's wish in KEYS[7] gets the lock outright
 * (HL_LUA_LINE_HAND_TO_WISH).  A wish with a lock delay
 * ("<lease>,<delay>") needs the new holder's delay key written as its own
 * grant would: match, the pattern, takes such wishes only where the
 * release has the key (delay_write, KEYS[8]); a release without it
 * leaves them to a promise, and their attempt. */
#define HAND_TO_WISH(pattern, delay_write)                                  \
    HL_LUA_LINE_HAND_TO_WISH("KEYS[7]", "ARGV[5]", "KEYS[2]", pattern,      \
                             "    redis.call('hset', KEYS[1], f, '1')\n"    \
                             "    redis.call('pexpire', KEYS[1], ms)\n"     \
                             delay_write)

/* KEYS: name, channel, line, alive, next, wake base, wishes, and for
 * release_delayed_lua the delay key.  ARGV: lease ms, field, "1" on a
 * cluster (sharded channels) or "0", the waiter timeout in ms when other
 * waiters of the field's client wait for the lock, else "0", "1" when a
 * wish may be granted outright (the releasing client's writes go out
 * alone, hl_lock_writes_plain), and for release_delayed_lua the lock
 * delay in ms.  Replies -1 when field holds nothing, the count left when
 * still held, -3 when freed and promised or granted to another client
 * (woken on its channel), -4 when freed and promised to nobody: the
 * field's client wakes its own waiters, as no message does.
 *
 * A client with a delay releases with release_delayed_lua, which keeps
 * its delay key beside the hold it leaves, and deletes the key with the
 * lock when it frees it: the holder knows it let go.  A client without
 * one has no delay key to mind, since no acquire of ours is granted while
 * one lives and only holders with a delay write it, so its release names
 * none, as before the delay was. */
#define RELEASE_LUA(on_still_held, del_freed, hand)                         \
    HL_LUA_ANNOUNCE HL_LUA_LINE_ANNOUNCE_OURS HL_LUA_NOW                    \
    HL_LUA_COUNT_DOWN                                                       \
    "if left > 0 then\n"                                                    \
    "  redis.call('pexpire', KEYS[1], ARGV[1])\n"                           \
    on_still_held                                                           \
    "  return left\n"                                                       \
    "end\n"                                                                 \
    del_freed                                                               \
    "local me = string.sub(ARGV[2], 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n" \
    "local handed = false\n"                                                \
    HL_LUA_LINE_PROMISE_FROM_HANDING(3, "me", hand)                         \
    RELEASE_LUA_TAIL

/* A release with no line announces to whoever listens; on a cluster it
 * counts them first, as if a client of nobody's ('-') were first in
 * line: every SPUBLISH goes to the shard's replicas as well, listened to
 * or not. */
#define RELEASE_LUA_TAIL                                                    \
    /* Held again, by our client: Redisson's waiters would find it so. */  \
    "if not handed then\n"                                                  \
    "  announce_ours(KEYS[2], first or (ARGV[3] == '1' and '-'), me,\n"     \
    "                ARGV[3], '" MSG_OUR_RELEASE "')\n"                      \
    "end\n"                                                                 \
    "if not first or first == me then return answer(-4) end\n"              \
    /* Promised to another client: this one's waiters, which took no       \
     * place while it held, queue behind. */                               \
    "if ARGV[4] ~= '0' and\n"                                              \
    "    redis.call('zadd', KEYS[4], 'nx', now_ms() + ARGV[4], me)\n"      \
    "        == 1 then\n"                                                   \
    "  redis.call('rpush', KEYS[3], me)\n"                                  \
    HL_LUA_LINE_KEEP("KEYS[3]", "KEYS[4]", "ARGV[4]")                       \
    "end\n"                                                                 \
    "return answer(-3)\n"

/* The lean release, of a holder whose client has no waiter on the lock,
 * nor had lately, no refusal lately and no delay: with nobody in line
 * it does what release_lua does then, in fewer than half the keys and
 * arguments; with clients in line it changes nothing and answers
 * HL_RELEASE_FULL_FORM, for release_lua, which serves them.
 *
 * KEYS: name, channel, line.  ARGV: lease ms, field.  Replies as
 * release_lua, or HL_RELEASE_FULL_FORM. */
#define RELEASE_LEAN_LUA(announce_freed)                                    \
    HL_LUA_ANNOUNCE HL_LUA_COUNT_DOWN                                       \
    "if left > 0 then\n"                                                    \
    "  redis.call('pexpire', KEYS[1], ARGV[1])\n"                           \
    "  return left\n"                                                       \
    "end\n"                                                                 \
    "if redis.call('exists', KEYS[3]) == 1 then\n"                          \
    "  return " HL_RELEASE_FULL_FORM_TEXT "\n"                              \
    "end\n"                                                                 \
    "redis.call('del', KEYS[1])\n"                                          \
    announce_freed                                                          \
    "return answer(-4)\n"

/* On a lone server a PUBLISH that nobody hears costs what counting the
 * listeners would. */
static const char release_lean_lua[] =
    RELEASE_LEAN_LUA("announce(KEYS[2], '" MSG_OUR_RELEASE "')\n");

/* On a cluster every SPUBLISH goes to the shard's replicas too, heard or
 * not: the lean release counts the listeners first.  A server that
 * cannot count them (before Redis 7) hears the message. */
static const char release_lean_cluster_lua[] = RELEASE_LEAN_LUA(
    "local n = redis.pcall('pubsub', 'shardnumsub', KEYS[2])\n"
    "if type(n) ~= 'table' or n.err or n[2] > 0 then\n"
    "  announce(KEYS[2], '" MSG_OUR_RELEASE "')\n"
    "end\n");

/* Wishes as every client records them, and also those with a delay. */
#define WISH_PLAIN HL_LUA_WISH_PLAIN
#define WISH_ANY "^[wW] (%S+) (%d+),?(%d*) (%S+)$"

static const char release_lua[] = RELEASE_LUA(
    "", "redis.call('del', KEYS[1])\n", HAND_TO_WISH(WISH_PLAIN, ""));

static const char release_delayed_lua[] = RELEASE_LUA(
    "  redis.call('set', KEYS[8], ARGV[6], 'px',\n"
    "             tonumber(ARGV[1]) + tonumber(ARGV[6]))\n",
    "redis.call('del', KEYS[1], KEYS[8])\n",
    HAND_TO_WISH(WISH_ANY,
                 "    if d ~= '' then\n"
                 "      redis.call('set', KEYS[8], d, 'px', ms + tonumber(d))\n"
                 "    end\n"));

/* A release that frees the lock, and the attempt of the client's next
 * local waiter riding on it (core/engine/ride.h), in one script: the
 * attempt runs as it would have, right after the release in the same
 * write, and needs no request of its own.  The release takes its keys from
 * the attempt's, the order its body reads them in.  Only a client without
 * a lock delay sends it.
 * KEYS: the acquire's with the wishes (acquire_wish_lua), then the channel
 * and the wake base.  ARGV: the release's five (release_lua), then the
 * attempt's seven, or nine with a wish (acquire_lua, acquire_wish_lua).
 * Replies {the release's reply, the attempt's}. */
static const char release_riding_lua[] =
    "local function release(KEYS, ARGV)\n"
    RELEASE_LUA("", "redis.call('del', KEYS[1])\n",
                HAND_TO_WISH(WISH_PLAIN, ""))
    "end\n"
    "local function attempt(ARGV)\n"
    ACQUIRE_LUA("nil", PROBE_FREE_FIRST, "", "", "")
    "end\n"
    "local function attempt_wish(ARGV)\n" ACQUIRE_WISH_LUA("nil") "end\n"
    "local a = {}\n"
    "for i = 6, #ARGV do a[#a + 1] = ARGV[i] end\n"
    "local freed = release({KEYS[1], KEYS[9], KEYS[4], KEYS[5], KEYS[6],\n"
    "                       KEYS[10], KEYS[8]},\n"
    "                      {ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]})\n"
    "return {freed, #a > 7 and attempt_wish(a) or attempt(a)}\n";

/* The releases into a condition's line: KEYS and ARGV of release_lua or
 * release_delayed_lua, then KEYS the condition's line and alive, ARGV the
 * waiter's id and waiter timeout (kindkit/cond_lua.h). */
static const char release_into_cond_lua[] =
    HL_LUA_COND_ENTER("8", "9", "6", "7") RELEASE_LUA(
        "", "redis.call('del', KEYS[1])\n", HAND_TO_WISH(WISH_PLAIN, ""));

static const char release_into_cond_delayed_lua[] =
    HL_LUA_COND_ENTER("9", "10", "7", "8") RELEASE_LUA(
        "  redis.call('set', KEYS[8], ARGV[6], 'px',\n"
        "             tonumber(ARGV[1]) + tonumber(ARGV[6]))\n",
        "redis.call('del', KEYS[1], KEYS[8])\n",
        HAND_TO_WISH(WISH_ANY,
                     "    if d ~= '' then\n"
                     "      redis.call('set', KEYS[8], d, 'px', ms + tonumber(d))\n"
                     "    end\n"));

/* KEYS: name, channel, line, alive, next, wake base.  ARGV: "1" on a
 * cluster or "0".  Replies 1 when deleted.  A lock delay stays: the
 * holder did not let go, and may still think it holds the lock. */
static const char force_lua[] =
    HL_LUA_ANNOUNCE HL_LUA_LINE_ANNOUNCE_OURS
    "if redis.call('del', KEYS[1]) == 0 then return 0 end\n"
    HL_LUA_LINE_PROMISE_FROM(3, "''")
    "announce_ours(KEYS[2], first, '', ARGV[1], '" MSG_OUR_RELEASE "')\n"
    "return answer(1)\n";

/* KEYS: name, line, alive, next, wake base.  ARGV: the field of the
 * client's last waiter.  The client leaves the line; a promise to it
 * passes on, and the next client, if it is first now, is told so. */
static const char leave_lua[] =
    HL_LUA_ANNOUNCE
    "local me = string.sub(ARGV[1], 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n"
    HL_LUA_LINE_LEAVE(2, "redis.call('exists', KEYS[1]) == 0")
    "return 0\n";

/* KEYS: name, channel, line, alive, next, wake base, wishes, delay key.
 * ARGV: the field of an acquire's last attempt, whose wish it had
 * recorded, and that attempt's nonce, "1" on a cluster or "0".  Drops the
 * wish; a grant a release made for it goes back, and the lock, freed so
 * and with no delay (its holder never ran), to the next client.  Replies
 * 1 when a wish was dropped, 2 when a grant went back, else 0. */
static const char withdraw_lua[] =
    HL_LUA_ANNOUNCE HL_LUA_LINE_ANNOUNCE_OURS
    "local me = string.sub(ARGV[1], 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n"
    HL_LUA_LINE_WITHDRAW("KEYS[7]", "ARGV[1]")
    "if redis.call('exists', KEYS[1]) == 0 then\n"
    "  redis.call('del', KEYS[8])\n"
    HL_LUA_LINE_PROMISE_FROM(3, "me")
    "  announce_ours(KEYS[2], first, me, ARGV[3], '" MSG_OUR_RELEASE "')\n"
    "end\n"
    "return answer(2)\n";

/* KEYS: name, channel, void set, line, alive, next, wake base, wishes,
 * delay key.  ARGV: field, expected count, nonce of the attempt to void
 * (or "").  Lowers the field's count to the expected one, and drops the
 * field's wish or the grant made for it, which the client has not taken;
 * replies the count left.  A lock freed so keeps no delay: nothing ran
 * under the grants taken back (an unknown outcome, a give-back), or
 * their holder released them after hearing they were lost. */
static const char reconcile_lua[] =
    HL_LUA_ANNOUNCE
    "if ARGV[3] ~= '' then\n"
    "  redis.call('sadd', KEYS[3], ARGV[3])\n"
    "  redis.call('pexpire', KEYS[3], " HL_LAYOUT_VOID_TTL_MS_TEXT ")\n"
    "end\n"
    "local me = string.sub(ARGV[1], 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n"
    "local w = redis.call('hget', KEYS[8], me)\n"
    "if w and string.sub(w, -#ARGV[1] - 1) == ' ' .. ARGV[1] then\n"
    "  redis.call('hdel', KEYS[8], me)\n"
    "end\n"
    "local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')\n"
    "local want = tonumber(ARGV[2])\n"
    "if n <= want then return n end\n"
    "if want > 0 then\n"
    "  redis.call('hset', KEYS[1], ARGV[1], want)\n"
    "  return want\n"
    "end\n"
    "redis.call('hdel', KEYS[1], ARGV[1])\n"
    "if redis.call('exists', KEYS[1]) == 0 then\n"
    "  redis.call('del', KEYS[9])\n"
    "  redis.call('publish', KEYS[2], '" MSG_OUR_RELEASE "')\n"
    HL_LUA_LINE_PROMISE_FROM(4, "''")
    "end\n"
    "return 0\n";

/* KEYS: name, channel, line, alive, next, delay key.  Replies the status
 * of a hash kind (kindkit.h), with the delay key's time left.  The
 * waiters are the clients in line, with the time their places have left;
 * Redisson keeps no list of its waiters, so the subscribers of its
 * channel are counted too.  On a cluster waiters subscribe to the
 * sharded channel, which servers before 7.0 do not know of. */
static const char status_lua[] =
    HL_LUA_NOW HL_LUA_MS_UNTIL
    "local all = redis.call('hgetall', KEYS[1])\n"
    "local n = redis.call('pubsub', 'numsub', KEYS[2])[2]\n"
    "local s = redis.pcall('pubsub', 'shardnumsub', KEYS[2])\n"
    "if type(s) == 'table' and not s.err then n = n + s[2] end\n"
    HL_LUA_LINE_STATUS(3)
    "local seen = (redis.call('exists', KEYS[3]) + redis.call('exists', KEYS[5]))\n"
    "return {redis.call('pttl', KEYS[1]), all, waiters, n,\n"
    "        seen > 0 and 1 or 0, redis.call('pttl', KEYS[6])}\n";

_Static_assert(HILOCK_CLIENT_ID_LEN == 36,
               "HL_LAYOUT_CLIENT_ID_LEN_TEXT counts client ids so");

static hl_script release_into_cond_script, release_into_cond_delayed_script;
static hl_script release_riding_script;
static hl_script acquire_script, acquire_wish_script, release_script,
    release_delayed_script, acquire_lean_script, release_lean_script,
    release_lean_cluster_script,
    force_script, leave_script, withdraw_script, reconcile_script,
    status_script;

/* The line's keys, in the order line_lua.h takes them. */
#define LINE_KEYS                                                           \
    HL_LAYOUT_LOCK_LINE, HL_LAYOUT_LOCK_ALIVE, HL_LAYOUT_LOCK_NEXT
#define LINE_WAKE_KEYS LINE_KEYS, HL_LAYOUT_LOCK_WAKE

static const hl_script_def acquire_def = {
    .what = "reentrant acquire",
    .body = acquire_lua,
    .script = &acquire_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_TOKEN, HL_LAYOUT_VOID, LINE_KEYS,
                HL_LAYOUT_LOCK_DELAY),
};

static const hl_script_def acquire_wish_def = {
    .what = "reentrant acquire with a wish",
    .body = acquire_wish_lua,
    .script = &acquire_wish_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_TOKEN, HL_LAYOUT_VOID, LINE_KEYS,
                HL_LAYOUT_LOCK_DELAY, HL_LAYOUT_LOCK_WANT),
};

static const hl_script_def acquire_lean_def = {
    .what = "reentrant lean acquire",
    .body = acquire_lean_lua,
    .script = &acquire_lean_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_VOID, HL_LAYOUT_LOCK_NEXT,
                HL_LAYOUT_LOCK_DELAY),
};

static const hl_script_def release_lean_def = {
    .what = "reentrant lean release",
    .body = release_lean_lua,
    .script = &release_lean_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_LOCK_CHANNEL, HL_LAYOUT_LOCK_LINE),
};

static const hl_script_def release_lean_cluster_def = {
    .what = "reentrant lean release on a cluster",
    .body = release_lean_cluster_lua,
    .script = &release_lean_cluster_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_LOCK_CHANNEL, HL_LAYOUT_LOCK_LINE),
};

static const hl_script_def release_def = {
    .what = "reentrant release",
    .body = release_lua,
    .script = &release_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_LOCK_CHANNEL, LINE_WAKE_KEYS,
                HL_LAYOUT_LOCK_WANT),
};

static const hl_script_def release_riding_def = {
    .what = "reentrant release carrying an attempt",
    .body = release_riding_lua,
    .script = &release_riding_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_TOKEN, HL_LAYOUT_VOID, LINE_KEYS,
                HL_LAYOUT_LOCK_DELAY, HL_LAYOUT_LOCK_WANT,
                HL_LAYOUT_LOCK_CHANNEL, HL_LAYOUT_LOCK_WAKE),
};

static const hl_script_def release_delayed_def = {
    .what = "reentrant release with a lock delay",
    .body = release_delayed_lua,
    .script = &release_delayed_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_LOCK_CHANNEL, LINE_WAKE_KEYS,
                HL_LAYOUT_LOCK_WANT, HL_LAYOUT_LOCK_DELAY),
};

static const hl_script_def release_into_cond_def = {
    .what = "reentrant release into a condition",
    .body = release_into_cond_lua,
    .script = &release_into_cond_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_LOCK_CHANNEL, LINE_WAKE_KEYS,
                HL_LAYOUT_LOCK_WANT, hl_key_given, hl_key_given),
};

static const hl_script_def release_into_cond_delayed_def = {
    .what = "reentrant release with a lock delay into a condition",
    .body = release_into_cond_delayed_lua,
    .script = &release_into_cond_delayed_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_LOCK_CHANNEL, LINE_WAKE_KEYS,
                HL_LAYOUT_LOCK_WANT, HL_LAYOUT_LOCK_DELAY, hl_key_given,
                hl_key_given),
};

static const hl_script_def force_def = {
    .what = "reentrant force release",
    .body = force_lua,
    .script = &force_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_LOCK_CHANNEL, LINE_WAKE_KEYS),
};

static const hl_script_def leave_def = {
    .what = "reentrant leave",
    .body = leave_lua,
    .script = &leave_script,
    HL_DEF_KEYS(hl_key_name, LINE_WAKE_KEYS),
};

static const hl_script_def withdraw_def = {
    .what = "reentrant withdraw",
    .body = withdraw_lua,
    .script = &withdraw_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_LOCK_CHANNEL, LINE_WAKE_KEYS,
                HL_LAYOUT_LOCK_WANT, HL_LAYOUT_LOCK_DELAY),
};

static const hl_script_def reconcile_def = {
    .what = "reentrant reconcile",
    .body = reconcile_lua,
    .script = &reconcile_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_LOCK_CHANNEL, HL_LAYOUT_VOID,
                LINE_WAKE_KEYS, HL_LAYOUT_LOCK_WANT, HL_LAYOUT_LOCK_DELAY),
};

static const hl_script_def status_def = {
    .what = "reentrant status",
    .body = status_lua,
    .script = &status_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_LOCK_CHANNEL, LINE_KEYS,
                HL_LAYOUT_LOCK_DELAY),
};

const hl_script_def *const hl_reentrant_script_defs[] = {
    &acquire_def,  &acquire_wish_def, &release_def, &release_delayed_def,
    &force_def,
    &leave_def,    &withdraw_def,     &reconcile_def, &status_def,
    &release_into_cond_def, &release_into_cond_delayed_def,
    &acquire_lean_def, &release_lean_def, &release_lean_cluster_def,
    &release_riding_def, NULL};

/* The kind's channel is the client's own: "hilock_lock_wake:{NAME}:<id>". */
static int client_channel(const hilock_lock *lock, const char *field,
                          size_t field_len, hl_aux_name *out)
{
    (void)field;
    (void)field_len;
    return hl_channel_under(HL_LAYOUT_LOCK_WAKE, lock,
                            hl_lock_client_id(lock), HILOCK_CLIENT_ID_LEN,
                            out);
}

static int attempt(hilock_lock *lock, const hl_attempt_args *a,
                   hl_request_fn *fn, void *data)
{
    if (hl_check_name_slot(lock) != HILOCK_OK)
        return HILOCK_EINVAL;
    int64_t delay_ms = hl_lock_delay_ms(lock);
    if (a->lean && !a->fenced && delay_ms <= 0) {
        char lease[24];
        const char *args[] = {lease, a->field};
        size_t lens[] = {hl_i64_dec(lease, a->lease_ms), a->field_len};
        return hl_run_lock_def(lock, &acquire_lean_def, 2, args, lens, fn,
                               data);
    }
    hl_attempt_text t;
    const char *args[HL_LOCK_SCRIPT_MAX_ARGS];
    size_t lens[HL_LOCK_SCRIPT_MAX_ARGS];
    int n = hl_attempt_argv(a, true, delay_ms, &t, args, lens);
    return hl_run_lock_def(lock,
                           a->want != HL_WANT_NONE ? &acquire_wish_def
                                                   : &acquire_def,
                           n, args, lens, fn, data);
}

static int release(hilock_lock *lock, const char *field, size_t field_len,
                   int64_t lease_ms, hl_request_fn *fn, void *data)
{
    char lease[24], wait[24], delay[24];
    bool known = false;
    bool others = hl_lock_others_wait(lock, NULL, &known);
    int64_t delay_ms = hl_lock_delay_ms(lock);
    if (!others && !known && delay_ms <= 0 &&
        !hl_lock_contended_lately(lock)) {
        const char *args[] = {lease, field};
        size_t lens[] = {hl_i64_dec(lease, lease_ms), field_len};
        return hl_run_lock_def(lock,
                               hl_lock_on_cluster(lock)
                                   ? &release_lean_cluster_def
                                   : &release_lean_def,
                               2, args, lens, fn, data);
    }
    const char *args[] = {lease, field, hl_lock_on_cluster(lock) ? "1" : "0",
                          wait, hl_lock_writes_plain(lock) ? "1" : "0",
                          delay};
    size_t lens[] = {hl_i64_dec(lease, lease_ms), field_len, 1,
                     hl_i64_dec(wait, others ? hl_lock_waiter_timeout_ms(lock)
                                             : 0),
                     1, 0};
    if (delay_ms > 0)
        lens[5] = hl_i64_dec(delay, delay_ms);
    return hl_run_lock_def(lock,
                           delay_ms > 0 ? &release_delayed_def : &release_def,
                           delay_ms > 0 ? 6 : 5, args,
                           lens, fn, data);
}

/* The release's words for a client whose other waiters wait: the
 * waiter timeout keeps their place when the lock goes to another client. */
static int release_riding(hilock_lock *lock, const char *field,
                          size_t field_len, int64_t lease_ms,
                          const hl_attempt_args *a, hl_request_fn *fn,
                          void *data)
{
    char lease[24], wait[24];
    hl_attempt_text t;
    const char *args[HL_LOCK_SCRIPT_MAX_ARGS] = {
        lease, field, hl_lock_on_cluster(lock) ? "1" : "0", wait,
        hl_lock_writes_plain(lock) ? "1" : "0"};
    size_t lens[HL_LOCK_SCRIPT_MAX_ARGS] = {
        hl_i64_dec(lease, lease_ms), field_len, 1,
        hl_i64_dec(wait, hl_lock_waiter_timeout_ms(lock)), 1};
    int n = 5 + hl_attempt_argv(a, true, 0, &t, args + 5, lens + 5);
    return hl_run_lock_def(lock, &release_riding_def, n, args, lens, fn,
                           data);
}

static int release_into_cond(hilock_lock *lock, const char *field,
                             size_t field_len, int64_t lease_ms,
                             const hl_cond_entry *e, hl_request_fn *fn,
                             void *data)
{
    char lease[24], wait[24];
    const char *args[HL_LOCK_SCRIPT_MAX_ARGS] = {
        lease, field, hl_lock_on_cluster(lock) ? "1" : "0", wait,
        hl_lock_writes_plain(lock) ? "1" : "0"};
    size_t lens[HL_LOCK_SCRIPT_MAX_ARGS] = {
        hl_i64_dec(lease, lease_ms), field_len, 1,
        hl_i64_dec(wait, hl_lock_others_wait(lock, NULL, NULL)
                             ? hl_lock_waiter_timeout_ms(lock)
                             : 0),
        1};
    return hl_run_release_into_cond(lock, &release_into_cond_def,
                                    &release_into_cond_delayed_def, 5, args,
                                    lens, e, fn, data);
}

static int force_release(hilock_lock *lock, hl_request_fn *fn, void *data)
{
    if (hl_check_name_slot(lock) != HILOCK_OK)
        return HILOCK_EINVAL;
    const char *sharded = hl_lock_on_cluster(lock) ? "1" : "0";
    size_t len = 1;
    return hl_run_lock_def(lock, &force_def, 1, &sharded, &len, fn, data);
}

static int leave(hilock_lock *lock, const char *field, size_t field_len)
{
    return hl_run_lock_def(lock, &leave_def, 1, &field, &field_len, NULL,
                           NULL);
}

static int withdraw(hilock_lock *lock, const char *field, size_t field_len,
                    const char *nonce, size_t nonce_len)
{
    const char *args[] = {field, nonce, hl_lock_on_cluster(lock) ? "1" : "0"};
    size_t lens[] = {field_len, nonce_len, 1};
    return hl_run_lock_def(lock, &withdraw_def, 3, args, lens, NULL, NULL);
}

static int reconcile(hilock_lock *lock, const char *field, size_t field_len,
                     int64_t expected, const char *nonce, size_t nonce_len,
                     hl_request_fn *fn, void *data)
{
    char want[24];
    const char *args[] = {field, want, nonce};
    size_t lens[] = {field_len, hl_i64_dec(want, expected), nonce_len};
    return hl_run_lock_def(lock, &reconcile_def, 3, args, lens, fn, data);
}

static int status(hilock_lock *lock, hl_request_fn *fn, void *data)
{
    if (hl_check_name_slot(lock) != HILOCK_OK)
        return HILOCK_EINVAL;
    return hl_run_lock_def(lock, &status_def, 0, NULL, NULL, fn, data);
}

/* The lean forms' answers besides the full forms'. */
static void parse_attempt(const hilock_reply *reply, hl_acquire_result *out)
{
    if (reply == NULL || reply->type != HILOCK_REPLY_INTEGER) {
        hl_parse_acquire_reply(reply, out);
        return;
    }
    *out = (hl_acquire_result){.outcome = HL_ACQ_BAD_REPLY};
    if (reply->integer == 0) {
        out->outcome = HL_ACQ_FULL_FORM;
    } else if (reply->integer > 0) {
        out->outcome = HL_ACQ_ACQUIRED;
        out->count = reply->integer;
    }
}

static hl_release_outcome parse_release(const hilock_reply *reply,
                                        int64_t *remaining)
{
    if (reply != NULL && reply->type == HILOCK_REPLY_INTEGER &&
        reply->integer == HL_RELEASE_FULL_FORM)
        return HL_REL_FULL_FORM;
    return hl_parse_release_reply(reply, remaining);
}

static int parse_status(hilock_reply *reply, hilock_lock_status **out)
{
    return hl_hash_parse_status(reply, "reentrant", false, out);
}

/* Where Redisson's clients announce their releases. */
static int redisson_channel(const hilock_lock *lock, hl_aux_name *out)
{
    return hl_lock_channel_of(lock, NULL, 0, out);
}

static const hl_kind reentrant_kind = {
    .name = "reentrant",
    .channel = client_channel,
    .foreign_channel = redisson_channel,
    .hand_on = true,
    .queue_locally = true,
    .line_per_client = true,
    .attempt = attempt,
    .parse_attempt = parse_attempt,
    .release = release,
    .parse_release = parse_release,
    .release_riding = release_riding,
    .force_release = force_release,
    .reconcile = reconcile,
    .leave = leave,
    .withdraw = withdraw,
    .renew = &hl_hash_renew,
    .renew_delayed = &hl_hash_renew_delayed,
    .delay_key = hl_lock_delay_key,
    .query = hl_hash_query,
    .parse_query = hl_hash_parse_query,
    .status = status,
    .parse_status = parse_status,
    .request_channel = hl_release_request_channel,
    .request_release = hl_release_request_send,
    .release_into_cond = release_into_cond,
};

static pthread_once_t scripts_once = PTHREAD_ONCE_INIT;

static void init_scripts(void)
{
    hl_script_defs_init(hl_reentrant_script_defs);
    hl_kindkit_scripts_init();
}

int hilock_lock_create_n(hilock_lock **out, hilock_client *client,
                         const char *name, size_t name_len)
{
    pthread_once(&scripts_once, init_scripts);
    return hl_lock_create(out, client, &reentrant_kind, name, name_len);
}

int hilock_lock_create(hilock_lock **out, hilock_client *client,
                       const char *name)
{
    return hilock_lock_create_n(out, client, name, hl_cname_len(name));
}
