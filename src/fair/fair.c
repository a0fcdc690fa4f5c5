/* The fair lock kind: Redisson's RFairLock layout, first come first
 * served across every client.
 *
 *   NAME                                  hash: "<client id>:<owner>" -> count
 *   redisson_lock_queue:{NAME}            list of waiting fields, oldest first
 *   redisson_lock_timeout:{NAME}          zset: field -> the time its place
 *                                         runs out, as Redisson reads it
 *   hilock_fair_alive:{NAME}              zset: our waiters' fields -> server
 *                                         time (ms) at which they count as
 *                                         dead unless they try again
 *   redisson_lock__channel:{NAME}:<field> a release publishes "0" here for the
 *                                         waiter at the head
 *   redisson_lock_token:{NAME}            fencing counter
 *   hilock_void:{NAME}                    voided attempts (see reentrant.c)
 *   hilock_lock_delay:{NAME}              the lock delay (see reentrant.c)
 *   hilock_fair_want:{NAME}               hash: field -> the wish of a
 *                                         waiter of ours, or the grant a
 *                                         release made for it
 *
 * Unlike Redisson, a place is reserved for the waiter timeout from its
 * last attempt on the server's clock, and waiting attempts renew it: a live
 * waiter keeps its place however long it waits, a dead one is passed over
 * within the waiter timeout.  That reckoning lives in hilock_fair_alive,
 * because Java waiters share the line: Redisson spaces the places in
 * redisson_lock_timeout one thread wait time apart and takes that much
 * off every place at each grant, and drops a head whose place it finds in
 * the past.  Our places there stay a thread wait time behind a Java
 * place before them, so such a grant leaves them in the future; and the
 * line's keys never expire, as Redisson never renews a Java waiter's
 * place and an expiry would take it.
 *
 * A direct hand-off, as the reentrant lock's (see reentrant.c), spares
 * the head of the line its attempt after a release: a waiting attempt of
 * ours records its wish (nonce and lease) under its field, and a release
 * that frees the lock with such a head grants it the lock outright for
 * its lease, no longer than its place lasts, and says so on its channel
 * ("g<nonce>").  Java waiters record no wish and are woken as before. */
#include <pthread.h>
#include <string.h>

#include "core/engine/lock_handle.h"
#include "core/engine/ride.h"
#include "core/transport/resp.h"
#include "hilock/fair.h"
#include "kindkit/cond_lua.h"
#include "kindkit/kind_mark.h"
#include "kindkit/kindkit.h"
#include "kindkit/script_registry.h"
#include "layout/layout.h"
#include "core/base/cname.h"


/* purge drops waiters whose place ran out (only dead ones: live ones
 * renew it): ours by hilock_fair_alive, Java's by Redisson's place, which
 * for ours may lie in the past after Redisson's grants while the waiter
 * lives.  wake_head tells the head of the line, when the lock is free,
 * that it is its turn.  place_end is when the waiter w counts as dead.
 * q the line, tq Redisson's places, aq ours, ch the channel base. */
#define FAIR_LUA_COMMON                                                     \
    HL_LUA_NOW HL_LUA_ANNOUNCE HL_LUA_MS_UNTIL                              \
    "local function purge(q, tq, aq, now)\n"                                \
    "  local dead = redis.call('zrangebyscore', aq, '-inf', now)\n"         \
    "  for _, w in ipairs(redis.call('zrangebyscore', tq, '-inf', now)) do\n" \
    "    if not redis.call('zscore', aq, w) then dead[#dead + 1] = w end\n" \
    "  end\n"                                                               \
    "  for _, w in ipairs(dead) do\n"                                       \
    "    redis.call('lrem', q, '0', w)\n"                                   \
    "    redis.call('zrem', tq, w)\n"                                       \
    "    redis.call('zrem', aq, w)\n"                                       \
    "  end\n"                                                               \
    "  return dead\n"                                                       \
    "end\n"                                                                 \
    "local function place_end(tq, aq, w)\n"                                 \
    "  local s = redis.call('zscore', aq, w) or redis.call('zscore', tq, w)\n" \
    "  return s and s + 0\n"                                                \
    "end\n"                                                                 \
    "local function wake_head(q, ch)\n"                                     \
    "  local head = redis.call('lindex', q, '0')\n"                         \
    "  if head then\n"                                                      \
    "    announce(ch .. ':' .. head, '" HL_LAYOUT_MSG_UNLOCK "')\n"         \
    "  end\n"                                                               \
    "end\n"

/* A holder with a delay has its delay key expire that long after the
 * lease it just set (inline: see reentrant.c). */
#define KEEP_DELAY                                                          \
    "  if delay then\n"                                                     \
    "    redis.call('set', KEYS[8], delay, 'px',\n"                         \
    "               tonumber(ARGV[1]) + tonumber(delay))\n"                 \
    "  end\n"

/* The acquire script, in two forms, as the reentrant lock's: an attempt
 * that has nothing to do with a wish passes neither the wishes' key nor
 * the two arguments about it.
 * KEYS: name, queue, timeouts, channel base, our places, void set, token
 * key, delay key, and for acquire_wish_lua the wishes.
 * ARGV: lease ms, field, fenced, known token, nonce, waiter timeout ms
 * (0: a single try, which does not join the line), for acquire_wish_lua
 * what to do with the field's wish (hl_want: 1 record one when refused,
 * 2 only drop it) and the nonce of this acquire's attempt whose wish the
 * client knows was recorded ('' none), and last, only from a client that
 * sets one, its lock delay in ms.  A free lock whose delay key lives is
 * held for the key's time left, by the holder that lost it without a
 * release; waiters line up behind it as behind a holder.
 * Replies {1, count, token} when held by field now (a grant a release
 * made for its wish included); {0, ms, how} when it waits in line, ms
 * being how long until the lock's lease, or the head's place, runs out
 * (-1: no lease, or a place that never runs out, scored 2^53 ms or more
 * ahead), how 4 when its wish was recorded, else 0; {2} when the attempt
 * was voided.
 * Every call here is on the hand-over's critical path, so the common
 * cases (the head taking a free lock, a newcomer joining behind a held
 * one) ask Redis as little as they can. */
#define ACQUIRE_LUA(delay_arg, wish_first, wish_join)                       \
    FAIR_LUA_COMMON HL_LUA_FOREIGN HL_LUA_TOKEN HL_LUA_HOLD_CHECK           \
    "if redis.call('sismember', KEYS[6], ARGV[5]) == 1 then return {2} end\n" \
    "local delay = " delay_arg "\n"                                          \
    /* Nobody holds, waits, or keeps a place or a delay, the common case:  \
     * one call tells, and the grant needs nothing more of the line. */    \
    "local busy = redis.call('exists', KEYS[1], KEYS[8], KEYS[2], KEYS[3],\n" \
    "                        KEYS[5]) > 0\n"                                 \
    "local held = busy and redis.call('hget', KEYS[1], ARGV[2])\n"           \
    wish_first                                                              \
    "local refused = hold_refused(KEYS[1], held) or token_refused(KEYS[7])\n" \
    "if refused then return refused end\n"                                   \
    "if held then\n"                                                         \
    "  local n = redis.call('hincrby', KEYS[1], ARGV[2], '1')\n"             \
    "  redis.call('pexpire', KEYS[1], ARGV[1])\n"                            \
    KEEP_DELAY                                                              \
    "  return {1, n, token(KEYS[7], n)}\n"                                   \
    "end\n"                                                                  \
    "if not busy then\n"                                                     \
    "  redis.call('hset', KEYS[1], ARGV[2], '1')\n"                          \
    "  redis.call('pexpire', KEYS[1], ARGV[1])\n"                            \
    KEEP_DELAY                                                              \
    "  return {1, 1, token(KEYS[7], 1)}\n"                                   \
    "end\n"                                                                  \
    "local ttl = redis.call('pttl', KEYS[1])\n"                              \
    "if ttl == -2 then ttl = redis.call('pttl', KEYS[8]) end\n"              \
    "local head = redis.call('lindex', KEYS[2], '0')\n"                      \
    "local now = nil\n"                                                      \
    "if ttl == -2 and head and head ~= ARGV[2] then\n"                       \
    /* Free, yet someone else is first: unless it died. */                  \
    "  now = now_ms()\n"                                                     \
    "  purge(KEYS[2], KEYS[3], KEYS[5], now)\n"                              \
    "  head = redis.call('lindex', KEYS[2], '0')\n"                          \
    "end\n"                                                                  \
    "if ttl == -2 and (not head or head == ARGV[2]) then\n"                  \
    "  if head then redis.call('lpop', KEYS[2]) end\n"                       \
    "  redis.call('zrem', KEYS[3], ARGV[2])\n"                               \
    "  redis.call('zrem', KEYS[5], ARGV[2])\n"                               \
    "  redis.call('hset', KEYS[1], ARGV[2], '1')\n"                          \
    "  redis.call('pexpire', KEYS[1], ARGV[1])\n"                            \
    KEEP_DELAY                                                              \
    "  return {1, 1, token(KEYS[7], 1)}\n"                                   \
    "end\n"                                                                  \
    /* A waiter joins the line at its tail, or renews its place; a single  \
     * try (waiter timeout 0) does neither. */                             \
    "local wt = ARGV[6] + 0\n"                                               \
    "local wanted = 0\n"                                                     \
    "if wt > 0 then\n"                                                       \
    "  now = now or now_ms()\n"                                              \
    /* Ours in line have a place in KEYS[5]: a newcomer, the common      \
     * case, whose place ZADD adds, is not searched for along the line. */ \
    "  local pos = redis.call('zadd', KEYS[5], now + wt, ARGV[2]) == 0 and\n" \
    "              redis.call('lpos', KEYS[2], ARGV[2])\n"                   \
    "  local before\n"                                                       \
    "  if not pos then before = redis.call('lindex', KEYS[2], '-1')\n"       \
    "  elseif pos > 0 then\n"                                                \
    "    before = redis.call('lindex', KEYS[2], pos - 1)\n"                  \
    "  end\n"                                                                \
    /* Redisson's grant of a Java waiter before us takes its thread wait   \
     * time off our place, and its release then drops us if that put our   \
     * place in the past: stay that far behind a Java place before us,     \
     * and never ahead of one of ours, which may itself stand behind a     \
     * Java place.  Only behind Java places, so that a Java waiter         \
     * behind our dead waiters is held up by the waiter timeout, not by    \
     * Redisson's thread wait time. */                                     \
    "  local at = now + wt\n"                                                \
    "  local b = before and redis.call('zscore', KEYS[3], before)\n"         \
    "  if b then\n"                                                          \
    "    b = b + 0\n"                                                        \
    "    if not redis.call('zscore', KEYS[5], before) then\n"                \
    "      b = b + " HL_LAYOUT_FAIR_REDISSON_WAIT_MS_TEXT "\n"               \
    "    end\n"                                                              \
    "    if b > at then at = b end\n"                                        \
    "  end\n"                                                                \
    "  redis.call('zadd', KEYS[3], at, ARGV[2])\n"                           \
    "  if not pos then\n"                                                    \
    "    redis.call('rpush', KEYS[2], ARGV[2])\n"                            \
    "    head = head or ARGV[2]\n"                                           \
    "  end\n"                                                                \
    wish_join                                                               \
    "end\n"                                                                  \
    "if ttl == -2 and head then\n"                                           \
    /* Free, and another waiter's turn: it may not know yet, and if it     \
     * died its place runs out. */                                         \
    "  wake_head(KEYS[2], KEYS[4])\n"                                        \
    "  now = now or now_ms()\n"                                              \
    "  local s = place_end(KEYS[3], KEYS[5], head)\n"                        \
    "  local ms = s and ms_until(s, now)\n"                                  \
    "  ttl = not s and 1 or ms and math.max(ms, 1) or -1\n"                  \
    "end\n"                                                                  \
    "return {0, ttl, wanted}\n"

static const char acquire_lua[] = ACQUIRE_LUA("ARGV[7]", "", "");

/* The grant a release made for this acquire's wish, its message lost, is
 * this attempt's, for the whole lease from now; any other wish or grant
 * of the field's is stale.  A refused attempt that keeps a place then
 * records its wish, with its lock delay after the lease, so that a
 * release that grants it keeps the new holder's delay (HAND_TO_WISH). */
#define ACQUIRE_WISH_LUA(delay_arg)                                         \
    ACQUIRE_LUA(                                                            \
        delay_arg,                                                          \
        "local w = redis.call('hget', KEYS[9], ARGV[2])\n"                  \
        "if w then\n"                                                       \
        "  redis.call('hdel', KEYS[9], ARGV[2])\n"                          \
        "  if held and ARGV[8] ~= '' and w == 'g ' .. ARGV[8] then\n"       \
        "    redis.call('pexpire', KEYS[1], ARGV[1])\n"                     \
        KEEP_DELAY                                                          \
        "    return {1, tonumber(held), 0}\n"                               \
        "  end\n"                                                           \
        "end\n",                                                            \
        "  if ARGV[7] == '1' then\n" HL_LUA_KEEP                            \
        "    redis.call('hset', KEYS[9], ARGV[2], 'w ' .. ARGV[5] .. ' ' ..\n" \
        "               ARGV[1] .. (delay and ',' .. delay or ''))\n"       \
        "    keep_key(KEYS[9], wt)\n"                                       \
        "    wanted = 4\n"                                                  \
        "  end\n")

static const char acquire_wish_lua[] = ACQUIRE_WISH_LUA("ARGV[9]");

/* After a release frees the lock (the local now set), with ARGV[3] "1"
 * (the releasing client's writes go out alone, hl_lock_writes_plain):
 * the head of the line, if it recorded a wish (KEYS[want]), gets the lock
 * outright for its lease, no longer than its place lasts; it leaves the
 * line and hears "g<nonce>" on its channel.  Else the head is woken, as
 * without wishes.  The grant the releasing field may have held by goes,
 * and so do the wishes of the dead waiters dropped before the head.  A wish
 * with a lock delay ("<lease>,<delay>") needs the new holder's delay key
 * written as its own grant would: match, the pattern, takes such wishes
 * only where the release has the key (delay_write); a release without it
 * leaves them to the head's attempt.  told, a Lua condition, says whether
 * the head is to be told at all (release_riding_lua's rider is not). */
#define HAND_TO_WISH(want, pattern, delay_write, told)                      \
    "redis.call('hdel', KEYS[" want "], ARGV[2])\n"                         \
    "for _, w in ipairs(dead) do redis.call('hdel', KEYS[" want "], w) end\n" \
    "local w = ours and ARGV[3] == '1' and " told " and\n"                   \
    "          redis.call('hget', KEYS[" want "], head)\n"                   \
    "local n, l, d\n"                                                       \
    "if w then n, l, d = string.match(w, '" pattern "') end\n"              \
    "if n then\n"                                                           \
    "  local ms = math.min(l + 0, math.ceil(s - now))\n"                    \
    "  redis.call('hset', KEYS[1], head, '1')\n"                            \
    "  redis.call('pexpire', KEYS[1], ms)\n"                                \
    delay_write                                                             \
    "  redis.call('hset', KEYS[" want "], head, 'g ' .. n)\n"               \
    "  redis.call('lpop', KEYS[2])\n"                                       \
    "  redis.call('zrem', KEYS[3], head)\n"                                 \
    "  redis.call('zrem', KEYS[5], head)\n"                                 \
    "  announce(KEYS[4] .. ':' .. head, '" HL_WAKE_MSG_GRANT "' .. n)\n"    \
    "elseif head and " told " then\n"                                       \
    "  announce(KEYS[4] .. ':' .. head, '" HL_LAYOUT_MSG_UNLOCK "')\n"      \
    "end\n"

/* A free lock's head is woken, to make its own attempt. */
#define WAKE_HEAD                                                           \
    "if head then\n"                                                        \
    "  announce(KEYS[4] .. ':' .. head, '" HL_LAYOUT_MSG_UNLOCK "')\n"      \
    "end\n"

/* Wishes as every client records them, and also those with a delay; the
 * empty capture of the first keeps the place of the capture after it. */
#define WISH_PLAIN "^w (%S+) (%d+)()$"
#define WISH_ANY "^w (%S+) (%d+),?(%d*)$"

/* live_head(q, tq, aq, now), in a release that freed the lock: the head
 * of the line q, once the dead waiters before it are dropped; whether it
 * is ours; s, when its place runs out; and the dead, a list.  Dead as
 * purge tells them, but only up to the first live waiter, as Redisson's
 * scripts drop them: a dead waiter further back is dropped when it comes
 * first, which holds up nobody, and sparing the search for it takes two
 * calls, and scans of places that grow with the line, off every
 * hand-over.  An entry with no place at all is left to wake, as purge
 * leaves it. */
#define FAIR_LUA_LIVE_HEAD                                                  \
    "local function live_head(q, tq, aq, now)\n"                            \
    "  local dead = {}\n"                                                   \
    "  while true do\n"                                                     \
    "    local c = redis.call('lindex', q, '0')\n"                          \
    "    if not c then return false, false, nil, dead end\n"                \
    "    local s = redis.call('zscore', aq, c)\n"                           \
    "    local ours = s ~= false\n"                                         \
    "    s = s or redis.call('zscore', tq, c)\n"                            \
    "    s = s and s + 0\n"                                                 \
    "    if not s or s > now then return c, ours, s, dead end\n"            \
    "    redis.call('lpop', q)\n"                                           \
    "    redis.call('zrem', tq, c)\n"                                       \
    "    redis.call('zrem', aq, c)\n"                                       \
    "    dead[#dead + 1] = c\n"                                             \
    "  end\n"                                                               \
    "end\n"

/* KEYS: name, queue, timeouts, channel base, our places, then for
 * release_delayed_lua the delay key, then the wishes.  ARGV: lease ms,
 * field, "1" when a wish may be granted outright, and for
 * release_delayed_lua the lock delay.  Replies -1 when field holds
 * nothing, the count left when still held, 0 when freed (and the head
 * woken or granted the lock).  A client with a delay keeps its delay key
 * beside the hold it leaves, and deletes it with the lock it frees; one
 * without a delay has none to mind (see the reentrant kind's release).
 * alone names, after a comma, the keys besides the line's whose absence
 * says nobody waits (the wishes), or is empty. */
#define RELEASE_LUA(on_still_held, del_freed, on_freed, alone)              \
    FAIR_LUA_COMMON FAIR_LUA_LIVE_HEAD                                      \
    HL_LUA_COUNT_DOWN                                                       \
    "if left > 0 then\n"                                                    \
    "  redis.call('pexpire', KEYS[1], ARGV[1])\n"                           \
    on_still_held                                                           \
    "  return left\n"                                                       \
    "end\n"                                                                 \
    del_freed                                                               \
    /* Nobody in line, no place kept, no wish: nobody to purge or wake. */ \
    "if redis.call('exists', KEYS[2], KEYS[3], KEYS[5]" alone ") == 0 then\n" \
    "  return answer(0)\n"                                                  \
    "end\n"                                                                 \
    "local now = now_ms()\n"                                                \
    "local head, ours, s, dead = live_head(KEYS[2], KEYS[3], KEYS[5], now)\n" \
    on_freed                                                                \
    "return answer(0)\n"

static const char release_lua[] =
    RELEASE_LUA("", "redis.call('del', KEYS[1])\n",
                HAND_TO_WISH("6", WISH_PLAIN, "", "true"), ", KEYS[6]");

static const char release_delayed_lua[] = RELEASE_LUA(
    "  redis.call('set', KEYS[6], ARGV[4], 'px',\n"
    "             tonumber(ARGV[1]) + tonumber(ARGV[4]))\n",
    "redis.call('del', KEYS[1], KEYS[6])\n",
    HAND_TO_WISH("7", WISH_ANY,
                 "  if d ~= '' then\n"
                 "    redis.call('set', KEYS[6], d, 'px', ms + tonumber(d))\n"
                 "  end\n",
                 "true"),
    ", KEYS[7]");

/* A release that frees the lock, and the attempt of the releasing
 * client's oldest waiter on the handle riding on it (core/engine/ride.h),
 * in one script: the attempt runs as it would have, right after the
 * release, and needs no request of its own.  A head of the line that is
 * the rider is neither woken nor granted its wish: its attempt, which
 * follows at once, takes the free lock as the head, and drops its wish.
 * Only a client without a lock delay sends it.
 * KEYS: the acquire's with the wishes (acquire_wish_lua), the release
 * taking the wishes from the ninth.  ARGV: the release's three
 * (release_lua), then the attempt's six, or eight with a wish
 * (acquire_lua, acquire_wish_lua).  Replies {the release's reply,
 * the attempt's}. */
static const char release_riding_lua[] =
    "local function release(ARGV)\n"
    RELEASE_LUA("", "redis.call('del', KEYS[1])\n",
                HAND_TO_WISH("9", WISH_PLAIN, "", "head ~= ARGV[4]"),
                ", KEYS[9]")
    "end\n"
    "local function attempt(ARGV)\n" ACQUIRE_LUA("nil", "", "") "end\n"
    "local function attempt_wish(ARGV)\n" ACQUIRE_WISH_LUA("nil") "end\n"
    "local a = {}\n"
    "for i = 4, #ARGV do a[#a + 1] = ARGV[i] end\n"
    "local freed = release({ARGV[1], ARGV[2], ARGV[3], a[2]})\n"
    "return {freed, #a > 6 and attempt_wish(a) or attempt(a)}\n";

/* The releases into a condition's line: KEYS name, queue, timeouts,
 * channel base, our places, for the delayed one the delay key, then the
 * condition's line and alive; ARGV lease ms, field, for the delayed one
 * the lock delay, then the waiter's id and waiter timeout
 * (kindkit/cond_lua.h).  They wake the head rather than grant it: a
 * waiter on a condition gives the lock up for a while, which is no
 * hand-off between processes taking turns. */
static const char release_into_cond_lua[] =
    HL_LUA_COND_ENTER("6", "7", "3", "4")
        RELEASE_LUA("", "redis.call('del', KEYS[1])\n", WAKE_HEAD, "");

static const char release_into_cond_delayed_lua[] =
    HL_LUA_COND_ENTER("7", "8", "4", "5") RELEASE_LUA(
        "  redis.call('set', KEYS[6], ARGV[3], 'px',\n"
        "             tonumber(ARGV[1]) + tonumber(ARGV[3]))\n",
        "redis.call('del', KEYS[1], KEYS[6])\n", WAKE_HEAD, "");

/* KEYS: name, queue, timeouts, channel base, our places.  ARGV: field.  A
 * waiter gives its place up; if it was next, the one behind it is woken.
 * The places behind keep their time, unlike in Redisson's give-up: a
 * place later than Redisson would have it only delays when Redisson
 * counts that waiter dead, an earlier one could drop a live waiter. */
static const char leave_lua[] =
    FAIR_LUA_COMMON
    "redis.call('lrem', KEYS[2], '0', ARGV[1])\n"
    "redis.call('zrem', KEYS[3], ARGV[1])\n"
    "redis.call('zrem', KEYS[5], ARGV[1])\n"
    "if redis.call('exists', KEYS[1]) == 0 then\n"
    "  purge(KEYS[2], KEYS[3], KEYS[5], now_ms())\n"
    "  wake_head(KEYS[2], KEYS[4])\n"
    "end\n"
    "return 0\n";

/* KEYS: name, queue, timeouts, channel base, our places.  Replies 1 when
 * deleted.  A lock delay stays (see reentrant.c's force release). */
static const char force_lua[] =
    FAIR_LUA_COMMON
    "if redis.call('del', KEYS[1]) == 0 then return 0 end\n"
    "purge(KEYS[2], KEYS[3], KEYS[5], now_ms())\n"
    "wake_head(KEYS[2], KEYS[4])\n"
    "return answer(1)\n";

/* The field ARGV[1] gives up its last hold, which nothing ran under (a
 * grant given back, or taken back after connection trouble): a lock freed
 * so keeps no delay (KEYS[7]), and its head is woken. */
#define TAKEN_BACK                                                          \
    "redis.call('hdel', KEYS[1], ARGV[1])\n"                                \
    "if redis.call('exists', KEYS[1]) == 0 then\n"                          \
    "  redis.call('del', KEYS[7])\n"                                        \
    "  purge(KEYS[2], KEYS[3], KEYS[5], now_ms())\n"                        \
    "  wake_head(KEYS[2], KEYS[4])\n"                                       \
    "end\n"

/* KEYS: name, queue, timeouts, channel base, our places, wishes, delay
 * key.  ARGV: the field of an acquire's last attempt, whose wish it had
 * recorded, and that attempt's nonce.  Drops the wish; a grant a release
 * made for it goes back, and the lock, freed so and with no delay (its
 * holder never ran), to the head of the line, which is woken.  Replies 1
 * when a wish was dropped, 2 when a grant went back, else 0. */
static const char withdraw_lua[] =
    FAIR_LUA_COMMON
    "local w = redis.call('hget', KEYS[6], ARGV[1])\n"
    "if not w then return 0 end\n"
    "if string.sub(w, 1, #ARGV[2] + 3) == 'w ' .. ARGV[2] .. ' ' then\n"
    "  redis.call('hdel', KEYS[6], ARGV[1])\n"
    "  return 1\n"
    "end\n"
    "if w ~= 'g ' .. ARGV[2] then return 0 end\n"
    "redis.call('hdel', KEYS[6], ARGV[1])\n"
    "local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')\n"
    "if n > 1 then\n"
    "  redis.call('hset', KEYS[1], ARGV[1], n - 1)\n"
    "  return 2\n"
    "end\n"
    "if n < 1 then return 0 end\n"
    TAKEN_BACK
    "return answer(2)\n";

/* KEYS: name, queue, timeouts, channel base, our places, void set, delay
 * key, wishes.  ARGV: field, expected count, nonce to void (or "").  As
 * the reentrant kind's reconcile, which drops the field's wish or the
 * grant made for it; a freed lock wakes the head, with no delay. */
static const char reconcile_lua[] =
    FAIR_LUA_COMMON
    "if ARGV[3] ~= '' then\n"
    "  redis.call('sadd', KEYS[6], ARGV[3])\n"
    "  redis.call('pexpire', KEYS[6], " HL_LAYOUT_VOID_TTL_MS_TEXT ")\n"
    "end\n"
    "redis.call('hdel', KEYS[8], ARGV[1])\n"
    "local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')\n"
    "local want = tonumber(ARGV[2])\n"
    "if n <= want then return n end\n"
    "if want > 0 then\n"
    "  redis.call('hset', KEYS[1], ARGV[1], want)\n"
    "  return want\n"
    "end\n"
    TAKEN_BACK
    "return 0\n";

/* KEYS: name, queue, timeouts, our places, delay key.  Replies the status
 * of a hash kind (kindkit.h), with the delay key's time left: the line in
 * order, with the time each place
 * has left on the server's clock (ours by when they count as dead,
 * Java's by Redisson's place); a place that never runs out (scored 2^53
 * ms or more ahead, +inf too) has no time. */
static const char status_lua[] =
    HL_LUA_NOW HL_LUA_MS_UNTIL
    "local all = redis.call('hgetall', KEYS[1])\n"
    "local line = redis.call('lrange', KEYS[2], '0', '-1')\n"
    "local now = now_ms()\n"
    "local w = {}\n"
    "for _, m in ipairs(line) do\n"
    "  local s = redis.call('zscore', KEYS[4], m) or\n"
    "            redis.call('zscore', KEYS[3], m)\n"
    "  w[#w + 1] = m\n"
    "  w[#w + 1] = s and ms_until(s, now) or false\n"
    "end\n"
    "local seen = redis.call('exists', KEYS[2], KEYS[3], KEYS[4])\n"
    "return {redis.call('pttl', KEYS[1]), all, w, -1, seen,\n"
    "        redis.call('pttl', KEYS[5])}\n";

static hl_script release_into_cond_script, release_into_cond_delayed_script;
static hl_script release_riding_script;
static hl_script acquire_script, acquire_wish_script, release_script,
    release_delayed_script, leave_script, force_script, withdraw_script,
    reconcile_script, status_script;

/* The keys every script but the status takes after the name, in this
 * order: line, Redisson's places, the channel base, our places; a script
 * takes as many more as it needs. */
#define FAIR_KEYS                                                           \
    hl_key_name, HL_LAYOUT_FAIR_QUEUE, HL_LAYOUT_FAIR_TIMEOUT,              \
        hl_key_channel, HL_LAYOUT_FAIR_ALIVE

static const hl_script_def acquire_def = {
    .what = "fair acquire",
    .body = acquire_lua,
    .script = &acquire_script,
    HL_DEF_KEYS(FAIR_KEYS, HL_LAYOUT_VOID, HL_LAYOUT_TOKEN,
                HL_LAYOUT_LOCK_DELAY),
};

static const hl_script_def acquire_wish_def = {
    .what = "fair acquire with a wish",
    .body = acquire_wish_lua,
    .script = &acquire_wish_script,
    HL_DEF_KEYS(FAIR_KEYS, HL_LAYOUT_VOID, HL_LAYOUT_TOKEN,
                HL_LAYOUT_LOCK_DELAY, HL_LAYOUT_FAIR_WANT),
};

static const hl_script_def release_def = {
    .what = "fair release",
    .body = release_lua,
    .script = &release_script,
    HL_DEF_KEYS(FAIR_KEYS, HL_LAYOUT_FAIR_WANT),
};

static const hl_script_def release_riding_def = {
    .what = "fair release with a waiter's attempt",
    .body = release_riding_lua,
    .script = &release_riding_script,
    HL_DEF_KEYS(FAIR_KEYS, HL_LAYOUT_VOID, HL_LAYOUT_TOKEN,
                HL_LAYOUT_LOCK_DELAY, HL_LAYOUT_FAIR_WANT),
};

static const hl_script_def release_delayed_def = {
    .what = "fair release with a lock delay",
    .body = release_delayed_lua,
    .script = &release_delayed_script,
    HL_DEF_KEYS(FAIR_KEYS, HL_LAYOUT_LOCK_DELAY, HL_LAYOUT_FAIR_WANT),
};

static const hl_script_def release_into_cond_def = {
    .what = "fair release into a condition",
    .body = release_into_cond_lua,
    .script = &release_into_cond_script,
    HL_DEF_KEYS(FAIR_KEYS, hl_key_given, hl_key_given),
};

static const hl_script_def release_into_cond_delayed_def = {
    .what = "fair release with a lock delay into a condition",
    .body = release_into_cond_delayed_lua,
    .script = &release_into_cond_delayed_script,
    HL_DEF_KEYS(FAIR_KEYS, HL_LAYOUT_LOCK_DELAY, hl_key_given, hl_key_given),
};

static const hl_script_def leave_def = {
    .what = "fair leave",
    .body = leave_lua,
    .script = &leave_script,
    HL_DEF_KEYS(FAIR_KEYS),
};

static const hl_script_def force_def = {
    .what = "fair force release",
    .body = force_lua,
    .script = &force_script,
    HL_DEF_KEYS(FAIR_KEYS),
};

static const hl_script_def withdraw_def = {
    .what = "fair withdraw",
    .body = withdraw_lua,
    .script = &withdraw_script,
    HL_DEF_KEYS(FAIR_KEYS, HL_LAYOUT_FAIR_WANT, HL_LAYOUT_LOCK_DELAY),
};

static const hl_script_def reconcile_def = {
    .what = "fair reconcile",
    .body = reconcile_lua,
    .script = &reconcile_script,
    HL_DEF_KEYS(FAIR_KEYS, HL_LAYOUT_VOID, HL_LAYOUT_LOCK_DELAY,
                HL_LAYOUT_FAIR_WANT),
};

static const hl_script_def status_def = {
    .what = "fair status",
    .body = status_lua,
    .script = &status_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_FAIR_QUEUE, HL_LAYOUT_FAIR_TIMEOUT,
                HL_LAYOUT_FAIR_ALIVE, HL_LAYOUT_LOCK_DELAY),
};

const hl_script_def *const hl_fair_script_defs[] = {
    &acquire_def,   &acquire_wish_def, &release_def, &release_delayed_def,
    &release_riding_def,
    &leave_def,     &force_def,     &withdraw_def, &reconcile_def,
    &status_def,    &release_into_cond_def,
    &release_into_cond_delayed_def, NULL};

static int attempt(hilock_lock *lock, const hl_attempt_args *a,
                   hl_request_fn *fn, void *data)
{
    if (hl_check_name_slot(lock) != HILOCK_OK)
        return HILOCK_EINVAL;
    hl_attempt_text t;
    const char *args[HL_LOCK_SCRIPT_MAX_ARGS];
    size_t lens[HL_LOCK_SCRIPT_MAX_ARGS];
    int n = hl_attempt_argv(a, false, hl_lock_delay_ms(lock), &t, args, lens);
    return hl_run_lock_def(lock,
                           a->want != HL_WANT_NONE ? &acquire_wish_def
                                                   : &acquire_def,
                           n, args, lens, fn, data);
}

static int release(hilock_lock *lock, const char *field, size_t field_len,
                   int64_t lease_ms, hl_request_fn *fn, void *data)
{
    char lease[24], delay[24];
    const char *args[] = {lease, field, hl_lock_writes_plain(lock) ? "1" : "0",
                          delay};
    size_t lens[] = {hl_i64_dec(lease, lease_ms), field_len, 1, 0};
    int64_t delay_ms = hl_lock_delay_ms(lock);
    if (delay_ms > 0)
        lens[3] = hl_i64_dec(delay, delay_ms);
    return hl_run_lock_def(lock,
                           delay_ms > 0 ? &release_delayed_def : &release_def,
                           delay_ms > 0 ? 4 : 3, args, lens, fn, data);
}

static int release_riding(hilock_lock *lock, const char *field,
                          size_t field_len, int64_t lease_ms,
                          const hl_attempt_args *a, hl_request_fn *fn,
                          void *data)
{
    char lease[24];
    hl_attempt_text t;
    const char *args[HL_LOCK_SCRIPT_MAX_ARGS] = {
        lease, field, hl_lock_writes_plain(lock) ? "1" : "0"};
    size_t lens[HL_LOCK_SCRIPT_MAX_ARGS] = {hl_i64_dec(lease, lease_ms),
                                            field_len, 1};
    int n = 3 + hl_attempt_argv(a, false, 0, &t, args + 3, lens + 3);
    return hl_run_lock_def(lock, &release_riding_def, n, args, lens, fn,
                           data);
}

static int release_into_cond(hilock_lock *lock, const char *field,
                             size_t field_len, int64_t lease_ms,
                             const hl_cond_entry *e, hl_request_fn *fn,
                             void *data)
{
    char lease[24];
    const char *args[HL_LOCK_SCRIPT_MAX_ARGS] = {lease, field};
    size_t lens[HL_LOCK_SCRIPT_MAX_ARGS] = {hl_i64_dec(lease, lease_ms),
                                            field_len};
    return hl_run_release_into_cond(lock, &release_into_cond_def,
                                    &release_into_cond_delayed_def, 2, args,
                                    lens, e, fn, data);
}

static int leave(hilock_lock *lock, const char *field, size_t field_len)
{
    return hl_run_lock_def(lock, &leave_def, 1, &field, &field_len, NULL,
                           NULL);
}

static int force_release(hilock_lock *lock, hl_request_fn *fn, void *data)
{
    if (hl_check_name_slot(lock) != HILOCK_OK)
        return HILOCK_EINVAL;
    return hl_run_lock_def(lock, &force_def, 0, NULL, NULL, fn, data);
}

static int withdraw(hilock_lock *lock, const char *field, size_t field_len,
                    const char *nonce, size_t nonce_len)
{
    const char *args[] = {field, nonce};
    size_t lens[] = {field_len, nonce_len};
    return hl_run_lock_def(lock, &withdraw_def, 2, args, lens, NULL, NULL);
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

static int parse_status(hilock_reply *reply, hilock_lock_status **out)
{
    return hl_hash_parse_status(reply, "fair", false, out);
}

static const hl_kind fair_kind = {
    .name = "fair",
    /* Waiters listen each on the channel with its own field, so that a
     * release wakes the head of the line alone. */
    .channel = hl_lock_channel_of,
    .channel_per_owner = true,
    .hand_on = true,
    .attempt = attempt,
    .parse_attempt = hl_parse_acquire_reply,
    .release = release,
    .parse_release = hl_parse_release_reply,
    .release_riding = release_riding,
    .force_release = force_release,
    .reconcile = reconcile,
    .leave = leave,
    .withdraw = withdraw,
    .mark_grant = hl_kind_mark_fair_grant,
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
    hl_script_defs_init(hl_fair_script_defs);
    hl_kindkit_scripts_init();
}

int hilock_fair_lock_create_n(hilock_lock **out, hilock_client *client,
                              const char *name, size_t name_len)
{
    pthread_once(&scripts_once, init_scripts);
    return hl_lock_create(out, client, &fair_kind, name, name_len);
}

int hilock_fair_lock_create(hilock_lock **out, hilock_client *client,
                            const char *name)
{
    return hilock_fair_lock_create_n(out, client, name, hl_cname_len(name));
}
