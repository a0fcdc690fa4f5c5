/* The semaphore kinds: Redisson's RSemaphore and RPermitExpirableSemaphore
 * layout, their scripts, and the kind tables through which their acquires
 * wait on the engine's acquire state machine.
 *
 *   NAME                    string: the count of free permits
 *   {NAME}:timeout          zset (expirable permits): permit id -> expiry,
 *                           ms since the epoch, on the server's clock
 *   redisson_sc:{NAME}      the new count, after every release and change
 *   hilock_sem_record:{NAME}:<id>
 *                           string (plain): what the attempt or release
 *                           <id> did, until its client has the answer
 *                           (see layout.h)
 *   hilock_void:{NAME}      set (expirable): attempts a reconcile voided
 *   hilock_sem_line:{NAME}, hilock_sem_alive:{NAME}, hilock_sem_next:{NAME}
 *                           the clients waiting for permits, their places
 *                           and the client a release promised them to
 *   hilock_sem_wake:{NAME}:<client id>
 *                           where that client's waiters are woken
 *   hilock_sem_want:{NAME}, hilock_sem_granted:{NAME}
 *                           hashes (plain): the wish of a waiting client,
 *                           and the grants releases made for wishes, by
 *                           the wish's nonce (see layout.h)
 *
 * Waiting clients line up as the reentrant lock's do (kindkit/line_lua.h),
 * so that permits coming back wake one waiting process, not every one:
 * whatever gives permits back (a release, a reconcile, an add, a set, an
 * expired permit taken back) promises them to the first live client in
 * line and wakes it on its own channel, and a grant that leaves permits
 * free passes them on to the next client in line the same way.  While a
 * promise stands, other clients of ours are refused and line up; the
 * promised client's attempt spends the promise, and when it finds too
 * few permits for itself, passes them by to the next live client in line
 * and keeps its place (a waiter for many holds up nobody, and is
 * promised the next permits first).  Redisson's waiters, and our client first in
 * line, hear Redisson's channel, where our scripts announce as before
 * when someone besides our first client listens.  A release by the
 * client first and alone in line promises nothing and says so (open):
 * that client wakes its own waiters, with no message.
 *
 * A plain semaphore's hand-off spares the woken client its attempt, as
 * the locks' direct hand-off does (src/lock/reentrant.c): a waiting
 * attempt records its client's wish, and a plain release that would
 * promise the permits to that client grants them outright
 * (SEM_LUA_HAND_TO_WISH), and says "g<nonce>" on its channel.  The grant
 * is kept under the wish's nonce as the record of an attempt would be:
 * the grantee's release consumes it, a later attempt of the same acquire
 * that finds it (the message was lost) makes it its own record, and a
 * reconcile of the wish's attempt gives it back.  It is made only to a
 * client that listens on its channel: plain permits never run out, and a
 * grant to a client whose connection is gone would keep them for good.
 *
 * A plain attempt records the permits it took under its nonce; the
 * record is also what voids it, since a reconcile overwrites it with
 * "void" and an attempt that finds its record there refuses to run.  One
 * key, written once with its TTL, keeps the hand-off as cheap as it can
 * be: a hash of records needs its TTL written on every grant, and a
 * record whose drop was lost would live as long as anyone writes to it.
 * Every expirable acquire is an owner of its own (hl_fresh_owner), and
 * its permit is "<client id>:<owner>".  Either way a reconcile can tell,
 * after an attempt whose answer was lost, whether it took anything, and
 * give it back.
 *
 * Every script names KEYS NAME, then a plain semaphore's record of the
 * call or an expirable one's {NAME}:timeout, Redisson's channel, and the
 * line's four keys (line, places, promise, wake base) at KEYS[4..7].  The
 * one-request scripts take ARGV[1] '1' on an expirable semaphore, which
 * first takes back the permits whose expiry passed, as Redisson's acquire
 * does.
 *
 * Counts are 64-bit integers in Redis, and Lua's numbers are doubles,
 * exact only below 2^53: so a script reads a count as text, leaves the
 * arithmetic to INCRBY and DECRBY, and answers a count as the number
 * they answer while it is below 2^53, else as the text GET gives, which
 * the client reads exactly (hl_i64_parse).  A count that is
 * no such integer ("5.5", or beyond 64 bits) was written by neither
 * hilock nor Redisson: the script answers foreign() before it changes
 * anything, and the call fails with HILOCK_EPROTO. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/engine/compose.h"
#include "core/transport/resp.h"
#include "kindkit/kindkit.h"
#include "kindkit/line_lua.h"
#include "kindkit/script_registry.h"
#include "layout/layout.h"
#include "semaphore/semaphore_internal.h"

/* What a foreign count is taken for, in the detail of its refusal. */
#define SEM_WHAT "a count of permits"

/* The count at the name, as text, in stored (false: none); a count that
 * no client of the layout writes ends the script. */
#define SEM_LUA_CHECK                                                       \
    "local stored = redis.call('get', KEYS[1])\n"                           \
    "if stored and not is_int(stored) then\n"                               \
    "  return foreign(KEYS[1], stored, '" SEM_WHAT "')\n"                   \
    "end\n"

/* listeners_above(ch, limit): whether ch has more than limit
 * subscribers, sharded ones included; the sharded ones are counted only
 * when the others do not tell already, a call saved on every grant. */
#define SEM_LUA_LISTENERS                                                   \
    "local function listeners_above(ch, limit)\n"                           \
    "  local n = redis.call('pubsub', 'numsub', ch)[2]\n"                   \
    "  if n > limit then return true end\n"                                 \
    "  local s = redis.pcall('pubsub', 'shardnumsub', ch)\n"                \
    "  if type(s) == 'table' and not s.err then n = n + s[2] end\n"         \
    "  return n > limit\n"                                                  \
    "end\n"

/* released(me, v, msg): permits came back, v free now.  The first live
 * client in line is promised them and woken (HL_LUA_LINE_PROMISE; me,
 * the releasing client or '', goes to the end of the line if it is first
 * and others wait), and Redisson's waiters hear msg (false: nothing)
 * unless a line exists and nobody but our client first in it may listen.
 * Sets open when no other client was promised them or waits: me's own
 * waiters are woken by me, not by a message.  Needs HL_LUA_ANNOUNCE. */
#define SEM_LUA_RELEASED SEM_LUA_RELEASED_HANDING("")

/* The same, with hand a block run on the first live client c before it
 * is promised the permits (see HL_LUA_LINE_PROMISE_HANDING): a block
 * that grants c what it wished for spends hand_free (the permits still
 * free, as a number), counts the grant in hands and returns c, and
 * released then goes on to the next client in line while permits are
 * left.  Redisson's waiters hear nothing after a grant: one is made only
 * while none listens. */
#define SEM_LUA_RELEASED_HANDING(hand)                                      \
    SEM_LUA_LISTENERS                                                       \
    "local hand_free, hands, hand_left = 0, 0, false\n"                     \
    HL_LUA_LINE_PROMISE_HANDING(hand)                                       \
    "local open = false\n"                                                  \
    "local function released(me, v, msg)\n"                                 \
    "  hand_free = tonumber(v)\n"                                           \
    "  local first = redis.call('lindex', KEYS[4], '0')\n"                  \
    "  while first and hand_free > 0 do\n"                                  \
    "    local before = hands\n"                                            \
    "    first = promise_next(KEYS[4], KEYS[5], KEYS[6], KEYS[7], me,\n"    \
    "                         first)\n"                                     \
    "    if hands == before or hand_free <= 0 then break end\n"             \
    "    first = redis.call('lindex', KEYS[4], '0')\n"                      \
    "  end\n"                                                               \
    "  open = not first or first == me\n"                                   \
    "  if msg and hands == 0 and (not first or\n"                           \
    "              listeners_above(KEYS[3], first == me and 1 or 0)) then\n" \
    "    announce(KEYS[3], msg)\n"                                          \
    "  end\n"                                                               \
    "end\n"

/* The hand block of a plain release (SEM_LUA_RELEASED_HANDING), with the
 * script's local hand_may, false where the release may grant no wish,
 * the hash wishes and the hash grants of grants made: the first client
 * c's wish for no more permits than are free gets them outright.  The
 * release takes them off the count, writes the grant under the wish's
 * nonce (as a record, HL_LAYOUT_SEM_RECORD, would hold what an attempt
 * took, for a reconcile to give back), takes c out of the line and says
 * "g<nonce>" on c's channel.
 *
 * Only while c listens on its channel: plain permits are nobody's hold
 * and never run out, so a grant to a client whose connection is gone
 * would take them for good, where a promise to it runs out with its
 * place.  A client that dies after the grant loses the permits as it
 * would after its own attempt took them.  And not while anyone else
 * listens on Redisson's channel (HL_LUA_LINE_HAND_TO_WISH says why). */
#define SEM_LUA_HAND_TO_WISH(wishes, grants)                                \
    "  local w = hand_may and redis.call('hget', " wishes ", c)\n"         \
    "  local n, a\n"                                                        \
    "  if w then n, a = string.match(w, '^[wW] (%S+) (%d+)$') end\n"        \
    "  if a and tonumber(a) <= hand_free and\n"                             \
    "      not listeners_above(KEYS[3], string.sub(w, 1, 1) == 'W' and 1 or\n" \
    "                          0) and listeners_above(wake .. ':' .. c, 0)\n" \
    "      then\n"                                                          \
    "    hand_left = redis.call('decrby', KEYS[1], a)\n"                    \
    "    hand_free = hand_free - tonumber(a)\n"                             \
    "    redis.call('hdel', " wishes ", c)\n"                               \
    "    redis.call('hset', " grants ", n, a)\n"                            \
    /* Every grant sets the one record TTL, so a plain PEXPIRE never       \
     * shortens the hash's: no PTTL needed. */                             \
    "    redis.call('pexpire', " grants ", " HL_LAYOUT_SEM_RECORD_TTL_MS_TEXT ")\n" \
    "    redis.call('lrem', line, '1', c)\n"                                \
    "    redis.call('zrem', alive, c)\n"                                    \
    "    announce(wake .. ':' .. c, '" HL_WAKE_MSG_GRANT "' .. n)\n"        \
    "    hands = hands + 1\n"                                               \
    "    return c\n"                                                        \
    "  end\n"

/* After a grant that left free permits (left, as text): the next client
 * in line is promised them (me, the client granted, passes on its turn
 * if it is first).  Needs HL_LUA_ANNOUNCE. */
#define SEM_LUA_PASS_ON(left)                                               \
    "if lined and tonumber(" left ") > 0 then\n"                           \
    "  local first = redis.call('lindex', KEYS[4], '0')\n"                  \
    "  if first then\n" HL_LUA_LINE_PROMISE                                 \
    "    promise_next(KEYS[4], KEYS[5], KEYS[6], KEYS[7], me, first)\n"     \
    "  end\n"                                                               \
    "end\n"

/* A client promised permits too few for its attempt (n) passes them by:
 * the first live client behind it in line is promised them instead, and
 * it keeps its place, to be promised the next ones.  Needs
 * HL_LUA_ANNOUNCE. */
#define SEM_LUA_PASS_BY                                                     \
    HL_LUA_NOW                                                              \
    "if stored and tonumber(stored) > 0 then\n"                             \
    "  local now = now_ms()\n"                                              \
    "  for _, c in ipairs(redis.call('lrange', KEYS[4], '0', '-1')) do\n"   \
    "    local at = (redis.call('zscore', KEYS[5], c) or 0) + 0\n"          \
    "    if c ~= me and at > now then\n"                                    \
    "      redis.call('set', KEYS[6], c, 'px',\n"                           \
    "                 math.ceil(math.min(at - now, 86400000)))\n"           \
    "      announce(KEYS[7] .. ':' .. c, '" HL_LAYOUT_MSG_UNLOCK "')\n"      \
    "      break\n"                                                         \
    "    end\n"                                                             \
    "  end\n"                                                               \
    "end\n"

/* A refused attempt of the client me that waits (wait, its waiter
 * timeout, not '0') joins the line or renews its place; how is as the
 * reentrant lock's (1: first in line, plus kept, 2 when the permits are
 * promised to another client). */
#define SEM_LUA_REFUSED(wait)                                               \
    "  local first\n"                                                       \
    "  if " wait " ~= '0' then\n" HL_LUA_LINE_JOIN(wait) "  end\n"          \
    HL_LUA_LINE_FIRST                                                       \
    "  local how = (first and 1 or 0) +\n"                                  \
    "              kept\n"

/* Whether the permits are promised to a client other than me (kept 2);
 * a promise to me is spent by this attempt, whatever it finds.  A
 * promise is made only to a client in line, and a client has a place
 * only while it is in line (HL_LUA_LINE_JOIN counts on it too), so an
 * empty line (lined false) means no promise and no place of me's: the
 * common uncontended attempt reads the line once and nothing more of
 * it. */
#define SEM_LUA_PROMISE_CHECK                                               \
    "local lined = redis.call('lindex', KEYS[4], '0') ~= false\n"           \
    "local kept = 0\n"                                                      \
    "local promised = lined and redis.call('get', KEYS[6])\n"               \
    "if promised == me then redis.call('del', KEYS[6])\n"                   \
    "elseif promised then kept = 2 end\n"

/* exact(v): the count v that INCRBY or DECRBY answered at KEYS[1], as a
 * reply or a message carries it exactly: the number itself below 2^53
 * (Lua's numbers are doubles, and Redis writes a whole one in plain
 * digits), else the text at the name. */
#define SEM_LUA_EXACT                                                       \
    "local function exact(v)\n"                                             \
    "  if v < 2^53 and v > -2^53 then return v end\n"                       \
    "  return redis.call('get', KEYS[1])\n"                                 \
    "end\n"

#define SEM_LUA_COMMON                                                      \
    HL_LUA_ANNOUNCE                                                         \
    HL_LUA_NOW                                                              \
    HL_LUA_FOREIGN                                                          \
    SEM_LUA_RELEASED                                                        \
    "local now = now_ms()\n"                                                \
    SEM_LUA_CHECK                                                           \
    /* Expired permits come back, at most 1000 a call (unpack's limit). */ \
    /* A score is an expiry: one before the epoch (-inf too), which no   */ \
    /* client of the layout writes, has passed like any other.  Redisson */ \
    /* looks from 0 only, and would leave such a permit held for ever.   */ \
    "local function reclaim()\n"                                            \
    "  if ARGV[1] ~= '1' then return end\n"                                 \
    "  local gone = redis.call('zrangebyscore', KEYS[2], '-inf', now,\n"    \
    "                          'limit', 0, 1000)\n"                         \
    "  if #gone == 0 then return end\n"                                     \
    "  redis.call('zrem', KEYS[2], unpack(gone))\n"                         \
    "  redis.call('incrby', KEYS[1], #gone)\n"                              \
    "  local v = redis.call('get', KEYS[1])\n"                              \
    "  if tonumber(v) > 0 then released('', v, v) end\n"                    \
    "end\n"                                                                 \
    "reclaim()\n"

/* Void the attempt named by ARGV[nonce] ('' for none) in the set
 * KEYS[void], so that it refuses to run should it still arrive. */
#define SEM_LUA_VOID(void_key, nonce_arg)                                   \
    "if ARGV[" nonce_arg "] ~= '' then\n"                                   \
    "  redis.call('sadd', KEYS[" void_key "], ARGV[" nonce_arg "])\n"       \
    "  redis.call('pexpire', KEYS[" void_key "], "                          \
    HL_LAYOUT_VOID_TTL_MS_TEXT ")\n"                                        \
    "end\n"

/* ---- plain: acquire, reconcile, forget ---------------------------------- */

/* try_take(rec, amount, nonce, wait, keep): a plain attempt of nonce
 * ("<client id>:<n>") for amount permits, recorded at rec; wait is its
 * waiter timeout ms (0: a single try, which keeps no place), keep how
 * long the client stays in line after a grant
 * (hl_attempt_args.keep_in_line_ms).  Answers {1, free left (exact())}
 * when taken (and records how many), {0, -1, how} when too few are free,
 * {0, the promise's ms, how} when they are promised to another client,
 * {2} when a reconcile voided the attempt before it ran.  The count is
 * compared as a double: exact below 2^53, and above it greater than any
 * number of permits asked for.  Needs HL_LUA_FOREIGN, HL_LUA_ANNOUNCE
 * and SEM_LUA_EXACT. */
#define SEM_LUA_TRY_TAKE SEM_LUA_TRY_TAKE_WISHING("")

/* The same, with wish a block run in a refused attempt that waits, after
 * it joined the line (how says whether it is first). */
#define SEM_LUA_TRY_TAKE_WISHING(wish)                                      \
    "local function try_take(rec, amount, nonce, wait, keep)\n"            \
    SEM_LUA_CHECK                                                           \
    "local n = tonumber(amount)\n"                                         \
    "local me = string.sub(nonce, 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n"  \
    SEM_LUA_PROMISE_CHECK                                                   \
    "if kept == 2 or stored == false or tonumber(stored) < n then\n"       \
    "  if promised == me then\n" SEM_LUA_PASS_BY "  end\n"                \
    SEM_LUA_REFUSED("wait")                                                 \
    "  if wait ~= '0' then\n" wish "  end\n"                                \
    "  if stored == false then how = how + 4 end\n"                         \
    "  if kept == 2 then return {0, redis.call('pttl', KEYS[6]), how} end\n" \
    "  return {0, -1, how}\n"                                              \
    "end\n"                                                                \
    "if not redis.call('set', rec, amount, 'px', "                          \
    HL_LAYOUT_SEM_RECORD_TTL_MS_TEXT ", 'nx') then\n"                      \
    "  return {2}\n"                                                       \
    "end\n"                                                                \
    HL_LUA_LINE_ON_GRANT("lined", "keep")                                   \
    "local left = exact(redis.call('decrby', KEYS[1], amount))\n"          \
    SEM_LUA_PASS_ON("left")                                                 \
    "return {1, left}\n"                                                   \
    "end\n"

/* KEYS: name, the attempt's record, channel, line, places, promise, wake
 * base.  ARGV: permits, the attempt's nonce, waiter timeout ms, how long
 * the client stays in line after a grant.  Replies as try_take. */
static const char plain_acquire_lua[] =
    HL_LUA_FOREIGN HL_LUA_ANNOUNCE SEM_LUA_EXACT SEM_LUA_TRY_TAKE
    "return try_take(KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4])\n";

/* wishing_take(rec, amount, nonce, wait, keep, want, claim): try_take
 * for an attempt that minds its client's wish in the hash wishes (want,
 * hl_attempt_args.want: '0' none, '1' record one when refused, '2' only
 * drop the client's), the grants made for wishes being in grants.  claim
 * names the attempt of the same acquire whose wish the client knows was
 * recorded ('' none): a grant a release made for that wish, its message
 * lost, is this attempt's, and becomes its record, as if it had taken
 * the permits itself.  Any other wish of the client's is stale.  A
 * refused attempt then records its wish, and answers how plus 8.  A
 * voided attempt records nothing: no answer of it is read, so a grant
 * for it would be nobody's.  Needs what try_take does, and
 * HL_LUA_KEEP. */
#define SEM_LUA_WISHING_TAKE(wishes, grants)                                \
    "local wish_want = '0'\n"                                               \
    SEM_LUA_TRY_TAKE_WISHING(                                               \
        "    if wish_want == '1' then\n"                                    \
        "      redis.call('hset', " wishes ", me,\n"                        \
        "                 (how % 2 == 1 and 'W ' or 'w ') .. nonce ..\n"    \
        "                 ' ' .. amount)\n"                                 \
        "      keep_key(" wishes ", wait)\n"                                \
        "      how = how + 8\n"                                             \
        "    end\n")                                                        \
    "local function wishing_take(rec, amount, nonce, wait, keep, want,\n"   \
    "                            claim)\n"                                  \
    "  if want == '0' then return try_take(rec, amount, nonce, wait, keep)\n" \
    "  end\n"                                                               \
    "  if redis.call('exists', rec) == 1 then return {2} end\n"             \
    "  local me = string.sub(nonce, 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n" \
    "  redis.call('hdel', " wishes ", me)\n"                                \
    "  local g = claim ~= '' and redis.call('hget', " grants ", claim)\n"   \
    "  if g then\n"                                                         \
    "    redis.call('hdel', " grants ", claim)\n"                           \
    "    redis.call('set', rec, g, 'px', "                                  \
    HL_LAYOUT_SEM_RECORD_TTL_MS_TEXT ")\n"                                  \
    "    return {1, exact(tonumber(redis.call('get', KEYS[1]) or '0'))}\n"  \
    "  end\n"                                                               \
    "  wish_want = want\n"                                                  \
    "  return try_take(rec, amount, nonce, wait, keep)\n"                   \
    "end\n"

/* The plain attempt of a waiter that minds a wish.  KEYS: those of
 * plain_acquire_lua, then the wishes and the grants.  ARGV: those of
 * plain_acquire_lua, then want and claim (SEM_LUA_WISHING_TAKE).
 * Replies as wishing_take. */
static const char plain_acquire_wish_lua[] =
    HL_LUA_FOREIGN HL_LUA_ANNOUNCE HL_LUA_KEEP SEM_LUA_EXACT
    SEM_LUA_WISHING_TAKE("KEYS[8]", "KEYS[9]")
    "return wishing_take(KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4],\n"
    "                    ARGV[5], ARGV[6])\n";

/* KEYS: name, the attempt's record, channel, line, places, promise, wake
 * base, wishes, grants.  ARGV: the attempt's nonce, '1' to void it ('0':
 * it was answered, and only its wish and the grant made for it go).
 * Voids the attempt, drops the wish it recorded, and gives back what it
 * took, if it ran, or what a release granted its wish.  Replies 0: the
 * owner holds nothing after it. */
static const char plain_reconcile_lua[] =
    HL_LUA_ANNOUNCE SEM_LUA_RELEASED
    "local n = ARGV[2] == '1' and\n"
    "          redis.call('set', KEYS[2], '" HL_LAYOUT_SEM_RECORD_VOID "',\n"
    "                     'px', " HL_LAYOUT_SEM_RECORD_TTL_MS_TEXT ", 'get')\n"
    "local me = string.sub(ARGV[1], 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n"
    "local w = redis.call('hget', KEYS[8], me)\n"
    "if w and string.match(w, '^[wW] (%S+) ') == ARGV[1] then\n"
    "  redis.call('hdel', KEYS[8], me)\n"
    "end\n"
    "local took = tonumber(redis.call('hget', KEYS[9], ARGV[1]) or '0')\n"
    "if took > 0 then redis.call('hdel', KEYS[9], ARGV[1]) end\n"
    "if n and n ~= '" HL_LAYOUT_SEM_RECORD_VOID "' then\n"
    "  took = took + tonumber(n)\n"
    "end\n"
    "if took == 0 then return 0 end\n"
    "redis.call('incrby', KEYS[1], took)\n"
    "local v = redis.call('get', KEYS[1])\n"
    "released('', v, v)\n"
    "return answer(0)\n";

/* ---- expirable: acquire, reconcile, release, renew ---------------------- */

/* KEYS: name, {name}:timeout, channel, line, places, promise, wake base,
 * void set.  ARGV: '1', lease ms, permit id (the owner's field), nonce,
 * waiter timeout ms (0: a single try), how long the client stays in line
 * after a grant.  Replies {1, free left (exact())} when taken, {0, ms until
 * the first permit expires, or -1, how} when none is free, {0, the
 * promise's ms, how} when the free ones are promised to another client,
 * {2} when the attempt was voided.  The ms are whole, at least 0 (more
 * than 1000 expired permits leave some for the next call, which the
 * engine's retry floor spaces out), and below 2^53: an expiry that far
 * away, +inf included, is none any wait reaches, and a reply could not
 * carry it (Redis casts a Lua number to an integer, and +inf to -2^63),
 * so the acquire waits for a release as for a permit that never
 * expires. */
static const char permit_acquire_lua[] =
    SEM_LUA_COMMON SEM_LUA_EXACT
    "if redis.call('sismember', KEYS[8], ARGV[4]) == 1 then return {2} end\n"
    "local me = string.sub(ARGV[3], 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n"
    SEM_LUA_PROMISE_CHECK
    "local v = redis.call('get', KEYS[1])\n"
    "if kept == 0 and v ~= false and tonumber(v) >= 1 then\n"
    HL_LUA_LINE_ON_GRANT("lined", "ARGV[6]")
    "  local left = exact(redis.call('decrby', KEYS[1], '1'))\n"
    "  redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])\n"
    "  local ttl = redis.call('pttl', KEYS[1])\n"
    "  if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end\n"
    SEM_LUA_PASS_ON("left")
    "  return answer({1, left})\n"
    "end\n"
    SEM_LUA_REFUSED("ARGV[5]")
    "if v == false then how = how + 4 end\n"
    "if kept == 2 then\n"
    "  return answer({0, redis.call('pttl', KEYS[6]), how})\n"
    "end\n"
    "local first = redis.call('zrange', KEYS[2], '0', '0', 'withscores')\n"
    "if first[2] and first[2] ~= '" HL_LAYOUT_PERMIT_NO_EXPIRY "' then\n"
    "  local ms = math.ceil(tonumber(first[2]) - now)\n"
    "  if ms < 2^53 then return answer({0, math.max(ms, 0), how}) end\n"
    "end\n"
    "return answer({0, -1, how})\n";

/* KEYS: name, {name}:timeout, channel, line, places, promise, wake base,
 * void set.  ARGV: '1', permit id,
 * holds the client knows of (0 or 1), nonce.  Voids the attempt and, when
 * the client holds no such permit, gives it back.  Replies the permits
 * the owner holds after it.  The attempt is voided first, so that it
 * stays void when the count is refused. */
static const char permit_reconcile_lua[] =
    SEM_LUA_VOID("8", "4")
    SEM_LUA_COMMON
    "if tonumber(ARGV[3]) > 0 then return answer(1) end\n"
    "if redis.call('zrem', KEYS[2], ARGV[2]) == 0 then\n"
    "  return answer(0)\n"
    "end\n"
    "redis.call('incrby', KEYS[1], '1')\n"
    "local v = redis.call('get', KEYS[1])\n"
    "released('', v, v)\n"
    "return answer(0)\n";

/* ARGV: expirable, permit id, the releasing client's id when the permit
 * is its own, else ''.  Replies 0 (no such permit), 1 (given back), 2
 * (given back, but its lease had run out), 3 (given back, and open: the
 * releasing client wakes its own waiters). */
static const char permit_release_lua[] =
    SEM_LUA_COMMON
    "local s = redis.call('zscore', KEYS[2], ARGV[2])\n"
    "if s == false then return answer(0) end\n"
    "redis.call('zrem', KEYS[2], ARGV[2])\n"
    "redis.call('incrby', KEYS[1], '1')\n"
    "local v = redis.call('get', KEYS[1])\n"
    "released(ARGV[3], v, v)\n"
    "if tonumber(s) <= now then return answer(2) end\n"
    "if open and ARGV[3] ~= '' then return answer(3) end\n"
    "return answer(1)\n";

/* The lease engine's renewal: KEYS zsets, ARGV[1] lease ms, then one
 * permit id per key.  A permit still there and not expired gets a new
 * expiry; an expired one is left for the next acquire to take back. */
static const char renew_lua[] =
    HL_LUA_NOW
    "local now = now_ms()\n"
    "local out = {}\n"
    "for i = 1, #KEYS do\n"
    "  local s = redis.call('zscore', KEYS[i], ARGV[i + 1])\n"
    "  if s ~= false and tonumber(s) > now then\n"
    "    redis.call('zadd', KEYS[i], 'xx', now + tonumber(ARGV[1]),\n"
    "               ARGV[i + 1])\n"
    "    out[i] = 1\n"
    "  else\n"
    "    out[i] = 0\n"
    "  end\n"
    "end\n"
    "return out\n";

/* ---- the one-request calls ---------------------------------------------- */

/* give_back(rec, amount, resent, me, consume, id): a plain release of
 * amount permits by the client me, recorded at rec, so that sent again
 * after an answer was lost (resent '1') it gives nothing back twice.
 * With consume '1', rec is the record of the grant whose permits come
 * back, and the release consumes it: sent again, it finds the record
 * gone; with '2' the same of the grant a release made for the wish id,
 * in the hash grants.  Sent the first time it gives back in any
 * case.  With '0', it writes rec until the client has its answer.  The
 * permits are promised and announced (released), or granted to a wish
 * where the script sets hand_may; answers the count then (exact()), as
 * {count, 1} when open, or the count now as text when it ran before.
 * Needs SEM_LUA_GIVE_BACK_ALL's parts. */
#define SEM_LUA_GIVE_BACK(grants)                                           \
    "local function give_back(rec, amount, resent, me, consume, id)\n"     \
    SEM_LUA_CHECK                                                           \
    "if consume ~= '0' then\n"                                             \
    "  local gone = consume == '2' and\n"                                  \
    "               redis.call('hdel', " grants ", id) or\n"                \
    "               redis.call('del', rec)\n"                               \
    "  if gone == 0 and resent == '1' then return stored or '0' end\n"     \
    "elseif not redis.call('set', rec, amount, 'px', "                      \
    HL_LAYOUT_SEM_RECORD_TTL_MS_TEXT ", 'nx') then\n"                      \
    "  return stored or '0'\n"                                             \
    "end\n"                                                                \
    "local v = exact(redis.call('incrby', KEYS[1], amount))\n"             \
    "released(me, v, v)\n"                                                 \
    "if hands > 0 then v = exact(hand_left) end\n"                         \
    "if open then return answer({v, 1}) end\n"                             \
    "return answer(v)\n"                                                   \
    "end\n"

#define SEM_LUA_GIVE_BACK_ALL(wishes, grants)                               \
    HL_LUA_ANNOUNCE                                                         \
    SEM_LUA_RELEASED_HANDING(SEM_LUA_HAND_TO_WISH(wishes, grants))          \
    HL_LUA_FOREIGN SEM_LUA_EXACT SEM_LUA_GIVE_BACK(grants)

/* KEYS: name, the release's record (or, with consume '1', its grant's),
 * channel, line, places, promise, wake base, wishes, grants.  ARGV:
 * permits, '1' when sent again, the releasing client's id, '1' when a
 * wish may be granted outright (the releasing client's writes go out
 * alone, hl_lock_writes_plain), what to consume ('0' none, '1' the
 * record, '2' the grant of a wish), the wish's nonce with '2'.  Replies
 * as give_back. */
static const char plain_release_lua[] =
    "local hand_may = ARGV[4] == '1'\n"
    SEM_LUA_GIVE_BACK_ALL("KEYS[8]", "KEYS[9]")
    "return give_back(KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[5],\n"
    "                 ARGV[6])\n";

/* A plain release and the attempt of the releasing client's next waiter,
 * in one request: the permits go back, are promised as any release's
 * are, and the waiter asks for them right after, where it would else ask
 * a round trip later when the release's answer woke it.  KEYS: those of
 * plain_release_lua, with the attempt's record between the wake base
 * and the wishes.  ARGV: permits, '1' when sent again, the releasing
 * client's id, what to consume, then the attempt's permits, nonce,
 * waiter timeout ms and how long the client stays in line, then '1' when
 * a wish may be granted, the nonce of a wish's grant consumed, and the
 * attempt's want and claim (SEM_LUA_WISHING_TAKE).  Replies
 * {give_back's answer, wishing_take's}. */
static const char plain_release_to_waiter_lua[] =
    "local hand_may = ARGV[9] == '1'\n"
    SEM_LUA_GIVE_BACK_ALL("KEYS[9]", "KEYS[10]") HL_LUA_KEEP
    SEM_LUA_WISHING_TAKE("KEYS[9]", "KEYS[10]")
    "local given = give_back(KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4],\n"
    "                        ARGV[10])\n"
    "return {given, wishing_take(KEYS[8], ARGV[5], ARGV[6], ARGV[7],\n"
    "                            ARGV[8], ARGV[11], ARGV[12])}\n";

/* ARGV: expirable, permits (may be negative).  Replies the new count, as
 * text.  A plain semaphore announces the new count, as RSemaphore's
 * addPermits does; an expirable one announces the amount added, and
 * nothing when it takes permits away, as RPermitExpirableSemaphore's
 * does: its Java listeners let that many waiters through, and a count of
 * 0 or less would have them release a negative number. */
static const char add_lua[] =
    SEM_LUA_COMMON
    "redis.call('incrby', KEYS[1], ARGV[2])\n"
    "local v = redis.call('get', KEYS[1])\n"
    "if ARGV[1] ~= '1' then\n"
    "  released('', v, v)\n"
    "else\n"
    "  released('', v, tonumber(ARGV[2]) > 0 and ARGV[2])\n"
    "end\n"
    "return answer(v)\n";

/* ARGV: expirable, permits.  Replies 1 when set, 0 when it existed. */
static const char try_set_lua[] =
    SEM_LUA_COMMON
    "if redis.call('exists', KEYS[1]) == 1 then return answer(0) end\n"
    "redis.call('set', KEYS[1], ARGV[2])\n"
    "released('', ARGV[2], ARGV[2])\n"
    "return answer(1)\n";

/* ARGV: expirable, permits.  Replies the count set.  On an expirable
 * semaphore the count set is the total, held permits included, as
 * RPermitExpirableSemaphore's setPermits does: with one permit held,
 * setting 5 leaves 4 free.  An unchanged total announces nothing.  The
 * free count may lie beyond 2^53, where a double is not exact (the sum
 * then differs from any count set, rightly): it goes down to 0 by its
 * own digits and up to what the total asks, in Redis's integers, and
 * keeps its TTL as an INCRBY does. */
static const char set_lua[] =
    SEM_LUA_COMMON
    "local want = tonumber(ARGV[2])\n"
    "local free = redis.call('get', KEYS[1])\n"
    "if ARGV[1] ~= '1' or free == false then\n"
    "  redis.call('set', KEYS[1], ARGV[2])\n"
    "  released('', ARGV[2], ARGV[2])\n"
    "  return answer(want)\n"
    "end\n"
    "local held = redis.call('zcard', KEYS[2])\n"
    "if tonumber(free) + held ~= want then\n"
    "  redis.call('decrby', KEYS[1], free)\n"
    "  redis.call('incrby', KEYS[1], want - held)\n"
    "  released('', redis.call('get', KEYS[1]), ARGV[2])\n"
    "end\n"
    "return answer(want)\n";

/* ARGV: expirable.  Replies the count before, as text. */
static const char drain_lua[] =
    SEM_LUA_COMMON
    "local v = redis.call('get', KEYS[1])\n"
    "if v == false then return answer(0) end\n"
    "redis.call('set', KEYS[1], '0')\n"
    "return answer(v)\n";

/* ARGV: expirable.  Replies the count, as text. */
static const char available_lua[] =
    SEM_LUA_COMMON
    "return answer(redis.call('get', KEYS[1]) or '0')\n";

static hl_script plain_acquire, plain_acquire_wish, plain_reconcile,
    plain_release, plain_release_to_waiter, permit_acquire,
    permit_reconcile, renew, add_script, try_set_script, set_script,
    drain_script, available_script, permit_release_script, leave_script;

/* Redisson's channel, then the line's four keys, as every script takes
 * them after its first two (see the top of this file). */
#define SEM_LINE_KEYS                                                       \
    HL_LAYOUT_SEMAPHORE_CHANNEL, HL_LAYOUT_SEM_LINE, HL_LAYOUT_SEM_ALIVE,   \
        HL_LAYOUT_SEM_NEXT, HL_LAYOUT_SEM_WAKE
/* The name and the record of a plain call (record_key), or the name and
 * an expirable semaphore's permits (its lease key), then the rest. */
#define SEM_KEYS hl_key_name, hl_key_given, SEM_LINE_KEYS

static const hl_script_def plain_acquire_def = {
    .what = "semaphore acquire",
    .body = plain_acquire_lua,
    .script = &plain_acquire,
    HL_DEF_KEYS(SEM_KEYS),
    /* Redisson's channel: a plain attempt announces nothing, and the
     * line's keys are KEYS[4..7] wherever try_take runs. */
    .spare_keys = 1u << 2,
};

/* The wishes and the grants made for them, after a plain call's keys. */
#define SEM_WISH_KEYS HL_LAYOUT_SEM_WANT, HL_LAYOUT_SEM_GRANTED

static const hl_script_def plain_acquire_wish_def = {
    .what = "semaphore acquire with a wish",
    .body = plain_acquire_wish_lua,
    .script = &plain_acquire_wish,
    HL_DEF_KEYS(SEM_KEYS, SEM_WISH_KEYS),
    .spare_keys = 1u << 2,
};

static const hl_script_def plain_reconcile_def = {
    .what = "semaphore reconcile",
    .body = plain_reconcile_lua,
    .script = &plain_reconcile,
    HL_DEF_KEYS(SEM_KEYS, SEM_WISH_KEYS),
};

static const hl_script_def plain_release_def = {
    .what = "semaphore release",
    .body = plain_release_lua,
    .script = &plain_release,
    HL_DEF_KEYS(SEM_KEYS, SEM_WISH_KEYS),
};

/* The key after the wake base is the record of the waiter's attempt. */
static const hl_script_def plain_release_to_waiter_def = {
    .what = "semaphore release to a waiter",
    .body = plain_release_to_waiter_lua,
    .script = &plain_release_to_waiter,
    HL_DEF_KEYS(SEM_KEYS, hl_key_given, SEM_WISH_KEYS),
};

static const hl_script_def permit_acquire_def = {
    .what = "permit acquire",
    .body = permit_acquire_lua,
    .script = &permit_acquire,
    HL_DEF_KEYS(SEM_KEYS, HL_LAYOUT_VOID),
};

static const hl_script_def permit_reconcile_def = {
    .what = "permit reconcile",
    .body = permit_reconcile_lua,
    .script = &permit_reconcile,
    HL_DEF_KEYS(SEM_KEYS, HL_LAYOUT_VOID),
};

/* Each key is an expirable semaphore's permits (its lease key). */
static const hl_script_def renew_def = {
    .what = "permit renew",
    .body = renew_lua,
    .script = &renew,
    HL_DEF_KEYS(hl_key_given),
    .batch = true,
};

static const hl_script_def add_def = {
    .what = "semaphore add",
    .body = add_lua,
    .script = &add_script,
    HL_DEF_KEYS(SEM_KEYS),
};

static const hl_script_def try_set_def = {
    .what = "semaphore try-set",
    .body = try_set_lua,
    .script = &try_set_script,
    HL_DEF_KEYS(SEM_KEYS),
};

static const hl_script_def set_def = {
    .what = "semaphore set",
    .body = set_lua,
    .script = &set_script,
    HL_DEF_KEYS(SEM_KEYS),
};

static const hl_script_def drain_def = {
    .what = "semaphore drain",
    .body = drain_lua,
    .script = &drain_script,
    HL_DEF_KEYS(SEM_KEYS),
};

static const hl_script_def available_def = {
    .what = "semaphore available",
    .body = available_lua,
    .script = &available_script,
    HL_DEF_KEYS(SEM_KEYS),
};

static const hl_script_def permit_release_def = {
    .what = "permit release",
    .body = permit_release_lua,
    .script = &permit_release_script,
    HL_DEF_KEYS(SEM_KEYS),
};

/* The one-request calls hl_sem_run makes. */
static const hl_script_def *const call_defs[SEM_PERMIT_RELEASE + 1] = {
    [SEM_ADD] = &add_def,
    [SEM_TRY_SET] = &try_set_def,
    [SEM_SET] = &set_def,
    [SEM_DRAIN] = &drain_def,
    [SEM_AVAILABLE] = &available_def,
    [SEM_PERMIT_RELEASE] = &permit_release_def,
};

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_once(void) { hl_script_defs_init(hl_semaphore_script_defs); }

void hl_sem_scripts_init(void)
{
    pthread_once(&once, init_once);
}

/* ---- the kinds ---------------------------------------------------------- */

/* KEYS: name, line, places, promise, wake base.  ARGV: the field of the
 * client's last waiter.  The client leaves the line (HL_LUA_LINE_LEAVE);
 * free permits promised to it pass on. */
static const char leave_lua[] =
    HL_LUA_ANNOUNCE
    "local me = string.sub(ARGV[1], 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n"
    HL_LUA_LINE_LEAVE(2, "(tonumber(redis.call('get', KEYS[1]) or '0') "
                         "or 0) > 0")
    "return 0\n";

/* Why a try finds free permits it may not take. */
#define PROMISED_DETAIL                                                     \
    "the free permits are promised to a process that was waiting for "    \
    "them already, until that one takes them or stops waiting"
#define UNSET_DETAIL                                                        \
    "the semaphore has no permits: it was never set (hilock_semaphore_"    \
    "try_set or hilock_semaphore_set gives it its permits)"

static const hl_script_def leave_def = {
    .what = "semaphore leave",
    .body = leave_lua,
    .script = &leave_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_SEM_LINE, HL_LAYOUT_SEM_ALIVE,
                HL_LAYOUT_SEM_NEXT, HL_LAYOUT_SEM_WAKE),
};

const hl_script_def *const hl_semaphore_script_defs[] = {
    &plain_acquire_def,
    &plain_acquire_wish_def,
    &plain_reconcile_def,
    &plain_release_def,
    &plain_release_to_waiter_def,
    &permit_acquire_def,
    &permit_reconcile_def,
    &renew_def,
    &add_def,
    &try_set_def,
    &set_def,
    &drain_def,
    &available_def,
    &permit_release_def,
    &leave_def,
    NULL};

/* A client's waiters listen on its own channel,
 * "hilock_sem_wake:{NAME}:<client id>". */
static int client_channel(const hilock_lock *lock, const char *field,
                          size_t field_len, hl_aux_name *out)
{
    (void)field;
    (void)field_len;
    return hl_channel_under(HL_LAYOUT_SEM_WAKE, lock,
                            hl_lock_client_id(lock), HILOCK_CLIENT_ID_LEN,
                            out);
}

/* Where Redisson's clients announce permits coming back. */
static int redisson_channel(const hilock_lock *lock, hl_aux_name *out)
{
    return hl_channel_under(HL_LAYOUT_SEMAPHORE_CHANNEL, lock, NULL, 0, out);
}

static int permit_key(const char *name, size_t name_len, hl_aux_name *out)
{
    return hl_layout_suffixed(out, name, name_len, HL_LAYOUT_PERMIT_TIMEOUT);
}

/* An acquire's answer: the reply itself, or the first of {answer,
 * refusal} when the reclaim's PUBLISH was refused, which changes nothing
 * here.  Not hl_script_answer's reading: {1, free as text} is no pair. */
static const hilock_reply *attempt_answer(const hilock_reply *r)
{
    if (r != NULL && r->type == HILOCK_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == HILOCK_REPLY_ARRAY)
        return r->element[0];
    return r;
}

/* {1, free} taken, {0, ms, how} refused (how: bit 1 first in line, bit 2
 * promised to another client, bit 3 nothing at the name, bit 4 its wish
 * recorded), {2} voided.
 * Anything else, a refused count among it, is a bad reply, whose detail
 * the engine finds. */
static void parse_attempt(const hilock_reply *reply, hl_acquire_result *out)
{
    const hilock_reply *r = attempt_answer(reply);
    out->outcome = HL_ACQ_BAD_REPLY;
    if (r == NULL || r->type != HILOCK_REPLY_ARRAY || r->elements < 1 ||
        r->elements > 3 || r->element[0]->type != HILOCK_REPLY_INTEGER)
        return;
    long long what = r->element[0]->integer;
    int64_t v = 0;
    if (r->elements >= 2 && !hl_reply_i64(r->element[1], &v))
        return;
    if (what == 1 && r->elements == 2) {
        out->outcome = HL_ACQ_ACQUIRED;
        out->count = 1; /* a permit is one hold of its own owner */
        out->free = v;
    } else if (what == 0 && r->elements == 3) {
        const hilock_reply *how = r->element[2];
        if (how->type != HILOCK_REPLY_INTEGER || how->integer < 0 ||
            how->integer > 15)
            return;
        out->outcome = HL_ACQ_HELD;
        out->ttl_ms = v;
        out->first_in_line = (how->integer & 1) != 0;
        out->promised = (how->integer & 2) != 0;
        out->unset = (how->integer & 4) != 0;
        out->wanted = (how->integer & 8) != 0;
    } else if (what == 2 && r->elements == 1) {
        out->outcome = HL_ACQ_VOID;
    }
}

/* "hilock_sem_record:{NAME}:<id>", the record of the attempt or release
 * id.  0, or HILOCK_ENOMEM with out released already. */
static int record_key(const hilock_lock *lock, const char *id, size_t id_len,
                      hl_aux_name *out)
{
    if (hl_layout_key(out, HL_LAYOUT_SEM_RECORD, lock->name, lock->name_len,
                      id, id_len) == 0)
        return 0;
    hl_aux_name_done(out);
    return HILOCK_ENOMEM;
}

/* A plain call under the record of id. */
static int record_script(hilock_lock *lock, const hl_script_def *def,
                         const char *id, size_t id_len, int nargs,
                         const char *const *args, const size_t *arg_lens,
                         hl_request_fn *fn, void *data)
{
    hl_aux_name rec;
    if (record_key(lock, id, id_len, &rec) != 0)
        return HILOCK_ENOMEM;
    const char *key = rec.s;
    int rc = hl_run_def(lock, def, 1, &key, &rec.len, nargs, args, arg_lens,
                        fn, data);
    hl_aux_name_done(&rec);
    return rc;
}

/* An attempt's hl_want, as its script takes it. */
static const char *const want_arg[] = {"0", "1", "2"};

static int plain_attempt(hilock_lock *lock, const hl_attempt_args *a,
                         hl_request_fn *fn, void *data)
{
    if (hl_check_name_slot(lock) != HILOCK_OK)
        return HILOCK_EINVAL;
    char n[24], wait[24], keep[24];
    const char *args[] = {n,    a->nonce,          wait,
                          keep, want_arg[a->want], a->claim ? a->claim : ""};
    size_t lens[] = {hl_i64_dec(n, a->amount),
                     a->nonce_len,
                     hl_i64_dec(wait, a->waiter_timeout_ms),
                     hl_i64_dec(keep, a->keep_in_line_ms),
                     1,
                     a->claim ? a->claim_len : 0};
    /* An attempt with nothing to do with a wish, the uncontended one
     * among them, names neither the wishes nor the grants. */
    bool wish = a->want != HL_WANT_NONE;
    return record_script(lock, wish ? &plain_acquire_wish_def
                                    : &plain_acquire_def,
                         a->nonce, a->nonce_len, wish ? 6 : 4, args, lens,
                         fn, data);
}

static int plain_reconcile_run(hilock_lock *lock, const char *field,
                               size_t field_len, int64_t expected,
                               const char *nonce, size_t nonce_len,
                               hl_request_fn *fn, void *data)
{
    /* A plain grant is never a hold the client keeps, and the record of
     * the attempt, or the grant made for its wish, is all there is to
     * find: without a nonce there is nothing to reconcile. */
    (void)field;
    (void)field_len;
    if (nonce == NULL || nonce_len == 0)
        return HILOCK_EINVAL;
    /* A withdraw's attempt was answered: nothing to void. */
    const char *args[] = {nonce,
                          expected == HL_RECONCILE_WITHDRAW ? "0" : "1"};
    size_t lens[] = {nonce_len, 1};
    return record_script(lock, &plain_reconcile_def, nonce, nonce_len, 2,
                         args, lens, fn, data);
}

/* The key of a plain semaphore's grants, for a one-command HDEL. */
static int grants_key(const hilock_lock *lock, hl_aux_name *out)
{
    if (hl_layout_key(out, HL_LAYOUT_SEM_GRANTED, lock->name, lock->name_len,
                      NULL, 0) == 0)
        return 0;
    hl_aux_name_done(out);
    return HILOCK_ENOMEM;
}

int hl_sem_forget(hilock_lock *lock, const char *id, size_t id_len,
                  bool handed)
{
    hl_conn *conn = hl_lock_conn(lock);
    if (conn == NULL)
        return HILOCK_ECLOSED;
    hl_aux_name key;
    if ((handed ? grants_key(lock, &key)
                : record_key(lock, id, id_len, &key)) != 0)
        return HILOCK_ENOMEM;
    const char *argv[] = {handed ? "HDEL" : "DEL", key.s, id};
    size_t lens[] = {handed ? 4u : 3u, key.len, id_len};
    int rc = hl_conn_command(conn, handed ? 3 : 2, argv, lens, NULL, NULL);
    hl_aux_name_done(&key);
    return rc;
}

/* What a release by id consumes, as its script takes it. */
static const char *const consume_arg[] = {"0", "1", "2"};

int hl_sem_plain_release(sem_op *op, hl_request_fn *fn, void *data)
{
    hilock_lock *lock = op->sem->lock;
    char n[24];
    size_t id_len = strlen(op->id);
    const char *args[] = {n,
                          op->resent ? "1" : "0",
                          hl_lock_client_id(lock),
                          hl_lock_writes_plain(lock) ? "1" : "0",
                          consume_arg[op->consume],
                          op->id};
    size_t lens[] = {hl_i64_dec(n, op->n), 1, HILOCK_CLIENT_ID_LEN, 1, 1,
                     id_len};
    return record_script(lock, &plain_release_def, op->id, id_len, 6, args,
                         lens, fn, data);
}

int hl_sem_plain_release_to_waiter(sem_op *op, const hl_attempt_args *a,
                                   hl_request_fn *fn, void *data)
{
    hilock_lock *lock = op->sem->lock;
    hl_aux_name rec, taken;
    size_t id_len = strlen(op->id);
    if (record_key(lock, op->id, id_len, &rec) != 0)
        return HILOCK_ENOMEM;
    if (record_key(lock, a->nonce, a->nonce_len, &taken) != 0) {
        hl_aux_name_done(&rec);
        return HILOCK_ENOMEM;
    }
    char n[24], amount[24], wait[24], keep[24];
    const char *args[] = {n,
                          op->resent ? "1" : "0",
                          hl_lock_client_id(lock),
                          consume_arg[op->consume],
                          amount,
                          a->nonce,
                          wait,
                          keep,
                          hl_lock_writes_plain(lock) ? "1" : "0",
                          op->id,
                          want_arg[a->want],
                          a->claim ? a->claim : ""};
    size_t lens[] = {hl_i64_dec(n, op->n),
                     1,
                     HILOCK_CLIENT_ID_LEN,
                     1,
                     hl_i64_dec(amount, a->amount),
                     a->nonce_len,
                     hl_i64_dec(wait, a->waiter_timeout_ms),
                     hl_i64_dec(keep, a->keep_in_line_ms),
                     1,
                     id_len,
                     1,
                     a->claim ? a->claim_len : 0};
    const char *keys[] = {rec.s, taken.s};
    size_t key_lens[] = {rec.len, taken.len};
    int rc = hl_run_def(lock, &plain_release_to_waiter_def, 2, keys, key_lens,
                        12, args, lens, fn, data);
    hl_aux_name_done(&taken);
    hl_aux_name_done(&rec);
    return rc;
}

/* The answer of a release made again: as a plain release's, {count, 1}
 * when it freed permits for this client's own waiters, which no message
 * wakes. */
static void on_released_again(void *data, int status, hilock_reply *reply)
{
    hilock_lock *lock = data;
    const hilock_reply *answer =
        status == HILOCK_OK && lock->client != NULL
            ? hl_script_answer(lock->client, reply)
            : NULL;
    if (answer != NULL && answer->type == HILOCK_REPLY_ARRAY &&
        answer->elements == 2 &&
        answer->element[1]->type == HILOCK_REPLY_INTEGER &&
        answer->element[1]->integer == 1)
        hl_lock_freed_here(lock);
    hilock_reply_free(reply);
    hl_lock_unref(lock);
}

/* Sent as again after a lost answer ('1'): a kept grant's record, or
 * the grant of a wish, that is gone means the release ran, and a
 * release's own record that is there means the same.  A release made
 * again grants no wish: it runs where a failover may have left the line
 * behind. */
static int plain_release_again(hilock_lock *lock, const char *id,
                               size_t id_len, int64_t amount,
                               hl_consume consume)
{
    char n[24];
    const char *args[] = {n, "1", hl_lock_client_id(lock), "0",
                          consume_arg[consume], id};
    size_t lens[] = {hl_i64_dec(n, amount), 1, HILOCK_CLIENT_ID_LEN, 1, 1,
                     id_len};
    hl_lock_ref(lock);
    int rc = record_script(lock, &plain_release_def, id, id_len, 6, args,
                           lens, on_released_again, lock);
    if (rc != HILOCK_OK)
        hl_lock_unref(lock);
    return rc;
}

static int sem_leave(hilock_lock *lock, const char *field, size_t field_len)
{
    return hl_run_lock_def(lock, &leave_def, 1, &field, &field_len, NULL,
                           NULL);
}

const hl_kind hl_semaphore_kind = {
    .name = "semaphore",
    .channel = client_channel,
    .foreign_channel = redisson_channel,
    .foreign_any_message = true,
    .line_per_client = true,
    .wake_all = true,
    .in_line = true,
    .unheld_grants = true,
    .forget = hl_sem_forget,
    .release_again = plain_release_again,
    .reconcile_withdraws = true,
    .record_ms = HL_LAYOUT_SEM_RECORD_TTL_MS,
    .busy_detail = "not enough permits were free",
    .unset_detail = UNSET_DETAIL,
    .promised_detail = PROMISED_DETAIL,
    .bad_reply_detail = "unexpected reply to a semaphore acquire",
    .attempt = plain_attempt,
    .parse_attempt = parse_attempt,
    .reconcile = plain_reconcile_run,
    .leave = sem_leave,
};

/* A script whose second key is the lease key: an expirable semaphore's
 * {NAME}:timeout, a plain one's name (the one-request calls, which look
 * there only on an expirable semaphore). */
static int permit_script(hilock_lock *lock, const hl_script_def *def,
                         int nargs, const char *const *args,
                         const size_t *arg_lens, hl_request_fn *fn,
                         void *data)
{
    size_t key_len;
    const char *key = hl_lock_lease_key(lock, &key_len);
    return hl_run_def(lock, def, 1, &key, &key_len, nargs, args,
                      arg_lens, fn, data);
}

static int permit_attempt(hilock_lock *lock, const hl_attempt_args *a,
                          hl_request_fn *fn, void *data)
{
    if (hl_check_name_slot(lock) != HILOCK_OK)
        return HILOCK_EINVAL;
    char lease[24], wait[24], keep[24];
    const char *args[] = {"1", lease, a->field, a->nonce, wait, keep};
    size_t lens[] = {1,
                     hl_i64_dec(lease, a->lease_ms),
                     a->field_len,
                     a->nonce_len,
                     hl_i64_dec(wait, a->waiter_timeout_ms),
                     hl_i64_dec(keep, a->keep_in_line_ms)};
    return permit_script(lock, &permit_acquire_def, 6, args, lens, fn, data);
}

static int permit_reconcile_run(hilock_lock *lock, const char *field,
                                size_t field_len, int64_t expected,
                                const char *nonce, size_t nonce_len,
                                hl_request_fn *fn, void *data)
{
    char want[24];
    const char *args[] = {"1", field, want, nonce};
    size_t lens[] = {1, field_len, hl_i64_dec(want, expected), nonce_len};
    return permit_script(lock, &permit_reconcile_def, 4, args, lens, fn,
                         data);
}

/* This client's own permit goes back: the script tells it when its own
 * waiters are to be woken without a message. */
static int permit_release(hilock_lock *lock, const char *field,
                          size_t field_len, int64_t lease_ms,
                          hl_request_fn *fn, void *data)
{
    (void)lease_ms;
    const char *args[] = {"1", field, hl_lock_client_id(lock)};
    size_t lens[] = {1, field_len, HILOCK_CLIENT_ID_LEN};
    return permit_script(lock, &permit_release_def, 3, args, lens, fn, data);
}

/* 1: given back; 3: given back, and this client wakes its own waiters;
 * 0: no such permit; 2: given back after its lease ran out, which is no
 * release of a hold the client still had. */
static hl_release_outcome permit_parse_release(const hilock_reply *r,
                                               int64_t *remaining)
{
    *remaining = 0;
    if (r == NULL || r->type != HILOCK_REPLY_INTEGER)
        return HL_REL_BAD_REPLY;
    if (r->integer == 1)
        return HL_REL_OWNER_DONE;
    if (r->integer == 3)
        return HL_REL_FREED_OPEN;
    if (r->integer == 0 || r->integer == 2)
        return HL_REL_NOT_OWNER;
    return HL_REL_BAD_REPLY;
}

const hl_kind hl_permit_kind = {
    .name = "permit semaphore",
    .channel = client_channel,
    .foreign_channel = redisson_channel,
    .foreign_any_message = true,
    .line_per_client = true,
    .wake_all = true,
    .in_line = true,
    .busy_detail = "no permit was free",
    .unset_detail = UNSET_DETAIL,
    .promised_detail = PROMISED_DETAIL,
    .bad_reply_detail = "unexpected reply to a permit acquire",
    .attempt = permit_attempt,
    .parse_attempt = parse_attempt,
    .release = permit_release,
    .parse_release = permit_parse_release,
    .reconcile = permit_reconcile_run,
    .leave = sem_leave,
    .renew = &renew,
    .lease_key = permit_key,
};

int hl_sem_run(sem_op *op, hl_request_fn *fn, void *data)
{
    hilock_semaphore *sem = op->sem;
    char num[24];
    /* Another client's permit: its releaser wakes no waiters of its own
     * (third argument ''). */
    const char *args[] = {sem->expirable ? "1" : "0", num, ""};
    size_t lens[] = {1, 0, 0};
    int nargs = 2;
    if (op->call == SEM_PERMIT_RELEASE) {
        args[1] = op->id;
        lens[1] = strlen(op->id);
        nargs = 3;
    } else {
        lens[1] = hl_i64_dec(num, op->n);
    }
    if (op->call == SEM_DRAIN || op->call == SEM_AVAILABLE)
        nargs = 1;
    return permit_script(sem->lock, call_defs[op->call], nargs, args, lens,
                         fn, data);
}
