/* The Lua of a line of waiting clients beside a lock, which the reentrant
 * lock and the read-write lock's writers share: the server lines up
 * clients (processes), not owners, and a release that frees the lock
 * promises it to the first live client in line and wakes that client
 * alone, on its own channel.  See src/lock/reentrant.c for the whole
 * design; the kinds differ in their keys' prefixes and in what frees the
 * lock, not in the line.
 *
 * Every script that uses a line passes its keys in the same order: an
 * attempt's KEYS[4] is the line (a list of client ids, oldest first) and
 * KEYS[5] the places (a zset: client id -> server time in ms at which it
 * counts as gone), and one of its arguments says how long the client
 * stays in line after a first hold (see hl_attempt_args.keep_in_line_ms);
 * a release names line, places, promise and wake base at KEYS[L..L+3]. */
#ifndef HL_KINDKIT_LINE_LUA_H
#define HL_KINDKIT_LINE_LUA_H

#include "kindkit/kindkit.h"
#include "layout/layout.h"

/* head(line, alive, now, c) is the first client in line still alive, and
 * when its place runs out; it drops the gone ones before it.  c is the
 * line's first entry where the caller read it already, else nil.
 * promise_next(line, alive, next, wake, me, c), c being the line's first
 * entry, promises a free lock to the first live client and wakes it; it
 * returns that client, if any.  When me, the releasing client, is first,
 * it goes to the end of the line if others wait behind it, and is
 * promised nothing: its own waiters hear of the release from it, not
 * from the server (HL_REL_FREED_OPEN), and a promise would only keep
 * others out.  A client's place is at most a day away, whatever a
 * foreign score says, so that a promise's expiry is one SET accepts.
 * Scripts define these only where a line exists: every function a script
 * defines costs it on every call.  Needs HL_LUA_ANNOUNCE. */
#define HL_LUA_LINE_PROMISE HL_LUA_LINE_PROMISE_HANDING("")

/* The same, with hand a Lua block that promise_next runs on the first
 * live client c (not the releasing one) before promising it the lock, s
 * being when c's place runs out and now the server's clock: a block that
 * gives c the lock outright returns c, and no promise is made. */
#define HL_LUA_LINE_PROMISE_HANDING(hand)                                   \
    HL_LUA_NOW                                                              \
    "local function head(line, alive, now, c)\n"                            \
    "  while true do\n"                                                     \
    "    c = c or redis.call('lindex', line, '0')\n"                        \
    "    if not c then return false end\n"                                  \
    "    local s = (redis.call('zscore', alive, c) or 0) + 0\n"             \
    "    if s > now then return c, math.min(s, now + 86400000) end\n"       \
    "    redis.call('lpop', line)\n"                                        \
    "    redis.call('zrem', alive, c)\n"                                    \
    "    c = nil\n"                                                         \
    "  end\n"                                                               \
    "end\n"                                                                 \
    "local function promise_next(line, alive, next, wake, me, c)\n"         \
    "  if c == me then\n"                                                   \
    "    c = redis.call('lindex', line, '1')\n"                             \
    "    if not c then return me end\n"                                     \
    "    redis.call('lpop', line)\n"                                        \
    "    redis.call('rpush', line, me)\n"                                   \
    "  end\n"                                                               \
    "  local now = now_ms()\n"                                              \
    "  local s\n"                                                           \
    "  c, s = head(line, alive, now, c)\n"                                  \
    "  if not c or c == me then return c end\n"                             \
    hand                                                                    \
    "  redis.call('set', next, c, 'px', math.ceil(s - now))\n"              \
    "  announce(wake .. ':' .. c, '" HL_LAYOUT_MSG_UNLOCK "')\n"            \
    "  return c\n"                                                          \
    "end\n"

/* Promise a lock just freed to the first client in line (promise_next):
 * KEYS line, places, promise and wake base at indexes L..L+3, me the
 * releasing client as a Lua expression (''  for none); sets the local
 * first to the client promised, or false. */
#define HL_LUA_LINE_PROMISE_FROM(L, me)                                     \
    HL_LUA_LINE_PROMISE_FROM_HANDING(L, me, "")
/* The same, with a hand block as in HL_LUA_LINE_PROMISE_HANDING. */
#define HL_LUA_LINE_PROMISE_FROM_HANDING(L, me, hand)                       \
    "local first = redis.call('lindex', KEYS[" #L "], '0')\n"               \
    "if first then\n" HL_LUA_LINE_PROMISE_HANDING(hand)                     \
    "  first = promise_next(KEYS[" #L "], KEYS[" #L " + 1], KEYS[" #L       \
    " + 2], KEYS[" #L " + 3], " me ", first)\n"                             \
    "end\n"

/* The hand block of a line whose clients may record a wish (a direct
 * hand-off, src/lock/reentrant.c): with the Lua expression may "1", the
 * first client c's wish in the hash wishes gets the lock outright, for
 * its lease but no longer than c's place lasts (s); c leaves the line,
 * and hears "g<nonce>".  pattern reads a wish into its nonce n, lease l,
 * what follows the lease d and field f; hold is the Lua that writes f's
 * first hold to last ms.  The script declares handed, which this sets.
 *
 * Not while anyone else listens on the other libraries' channel foreign
 * (a Java waiter, or our own readers): those wait for a release they can
 * take, and grant after grant would keep the lock held before them for
 * as long as our clients keep wishing.  The release then promises, and
 * announces, so that they may take the lock first, as before hand-offs
 * were.  c itself listens there when its attempt was told it was first
 * in line, which its wish says by its letter, "W" (HL_LUA_WISH_LEAD),
 * while it lives: a client whose own channel has no subscriber died, and
 * the one subscriber there is someone else's waiter, which must hear of
 * the release rather than wait out the ttl it last read.  One NUMSUB
 * counts both channels: c's is read even where the other count alone
 * decides, which costs less than a second call where it does not.
 * With _BESIDE, ours is a Lua expression, with c and listens (whether
 * c's wish says c listens there) in scope: how many of the other
 * subscribers there are clients of ours that wait for nothing a grant
 * takes from them (a read-write lock's readers, who wait behind the
 * writers anyway). */
#define HL_LUA_LINE_HAND_TO_WISH(wishes, may, foreign, pattern, hold)       \
    HL_LUA_LINE_HAND_TO_WISH_BESIDE(wishes, may, foreign, pattern, hold, "0")
#define HL_LUA_LINE_HAND_TO_WISH_BESIDE(wishes, may, foreign, pattern, hold, \
                                        ours)                              \
    "  local w = " may " == '1' and redis.call('hget', " wishes ", c)\n"    \
    "  local listens = w and string.sub(w, 1, 1) == 'W'\n"                 \
    "  if w then\n"                                                         \
    "    local subs = redis.call('pubsub', 'numsub', " foreign ",\n"        \
    "                            wake .. ':' .. c)\n"                       \
    "    local n = subs[2] - (" ours ")\n"                                  \
    "    if n > 1 or (n == 1 and not (listens and subs[4] > 0)) then\n"     \
    "      w = false\n"                                                     \
    "    end\n"                                                             \
    "  end\n"                                                               \
    "  local n, l, d, f\n"                                                  \
    "  if w then n, l, d, f = string.match(w, '" pattern "') end\n"         \
    "  if f and string.sub(f, 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ") == c\n"  \
    "      then\n"                                                          \
    "    local ms = math.min(l + 0, math.ceil(s - now))\n"                  \
    hold                                                                    \
    "    redis.call('hset', " wishes ", c, 'g ' .. n .. ' ' .. f)\n"        \
    "    redis.call('lrem', line, '1', c)\n"                                \
    "    redis.call('zrem', alive, c)\n"                                    \
    "    announce(wake .. ':' .. c, '" HL_WAKE_MSG_GRANT "' .. n)\n"        \
    "    handed = true\n"                                                   \
    "    return c\n"                                                        \
    "  end\n"

/* A wish as every client records it, "w <nonce> <lease> <field>", or
 * "W ..." from an attempt told it was first in line, for
 * HL_LUA_LINE_HAND_TO_WISH; the empty capture stands for what a wish
 * with more after its lease carries. */
#define HL_LUA_WISH_PLAIN "^[wW] (%S+) (%d+)() (%S+)$"

/* In a refused attempt of me that records its wish, the script's local
 * first being whether me is first in line: the wish's letter and the
 * space after it, "W " when the attempt's answer tells me it is first in
 * line, so that it listens on the other libraries' channel, else "w ". */
#define HL_LUA_WISH_LEAD "(first and 'W ' or 'w ')"

/* A wish-form attempt's stale entry, the older wish or grant of its field
 * ARGV[2] in the hash of its client me: the attempt reads the entry up
 * front only where it may claim a grant (its acquire knows of a recorded
 * wish), and sets the local stale from what it read, nil where it read
 * nothing.  A refused attempt that records its wish overwrites the entry
 * and sets stale false, so the contended attempt, the common one, reads
 * it no more; HL_LUA_WISH_DROP_STALE, before every other answer, reads
 * it if still unknown and deletes it when it is the field's. */
#define HL_LUA_WISH_STALE(w)                                                \
    "local stale = " w " and string.sub(" w ", -#ARGV[2] - 1) == ' ' ..\n"  \
    "              ARGV[2]\n"
#define HL_LUA_WISH_DROP_STALE(wishes)                                      \
    "if stale == nil then\n"                                                \
    "  local v = redis.call('hget', " wishes ", me)\n"                      \
    "  stale = v and string.sub(v, -#ARGV[2] - 1) == ' ' .. ARGV[2]\n"      \
    "end\n"                                                                 \
    "if stale then redis.call('hdel', " wishes ", me) end\n"

/* Whether the wish w was recorded by the attempt named by nonce. */
#define HL_LUA_WISH_OF(w, nonce)                                            \
    "string.match(" w ", '^[wW] (%S+) ') == " nonce

/* The start of a withdraw (ARGV: the field of an acquire's last attempt,
 * that attempt's nonce; me the field's client): the wish in the hash
 * wishes that attempt recorded goes, replying 1; a grant a release made
 * for it goes too, and with it one of the holds in KEYS[1] of hold (a Lua
 * expression, the field's hold there), replying 2 while others remain.
 * What follows runs when the grant's hold was the last: hold is gone,
 * and the script frees the lock as its release would. */
#define HL_LUA_LINE_WITHDRAW(wishes, hold)                                  \
    "local w = redis.call('hget', " wishes ", me)\n"                        \
    "if not w then return 0 end\n"                                         \
    "if " HL_LUA_WISH_OF("w", "ARGV[2]") " then\n"                          \
    "  redis.call('hdel', " wishes ", me)\n"                                \
    "  return 1\n"                                                          \
    "end\n"                                                                 \
    "if w ~= 'g ' .. ARGV[2] .. ' ' .. ARGV[1] then return 0 end\n"         \
    "redis.call('hdel', " wishes ", me)\n"                                  \
    "local n = tonumber(redis.call('hget', KEYS[1], " hold ") or '0')\n"    \
    "if n > 1 then\n"                                                       \
    "  redis.call('hset', KEYS[1], " hold ", n - 1)\n"                      \
    "  return 2\n"                                                          \
    "end\n"                                                                 \
    "if n < 1 then return 0 end\n"                                          \
    "redis.call('hdel', KEYS[1], " hold ")\n"

/* announce_ours(ch, first, me, sharded, msg, ours) tells other
 * libraries' waiters of our release with msg on their channel ch.  With
 * a line (first its first client), our client first in it listens there
 * too, and would only hear news it has or needs not: the message goes
 * out then only if someone else listens (sharded "1": counted among
 * sharded subscribers).  ours, when given, counts the other subscribers
 * there that are clients of ours the release does not concern (a
 * read-write lock's readers, who wait behind the line whatever it says).
 * A server that cannot count (sharded subscribers before Redis 7) hears
 * the message.  Needs HL_LUA_ANNOUNCE. */
#define HL_LUA_LINE_ANNOUNCE_OURS                                           \
    "local function announce_ours(ch, first, me, sharded, msg, ours)\n"     \
    "  if first then\n"                                                     \
    "    local n = redis.pcall('pubsub', sharded == '1' and\n"              \
    "                          'shardnumsub' or 'numsub', ch)\n"            \
    "    if type(n) == 'table' and not n.err and\n"                         \
    "        n[2] - (ours or 0) <= (first == me and 1 or 0) then\n"         \
    "      return\n"                                                        \
    "    end\n"                                                             \
    "  end\n"                                                               \
    "  announce(ch, msg)\n"                                                 \
    "end\n"

/* Keep a line (the Lua expression line) and its places (alive) for at
 * least ms, as HL_LUA_KEEP keeps a key: every script that extends one
 * extends the other to the same expiry, so the line's time left stands
 * for both, and one call reads it where two did.  Were the places to
 * run out first all the same, their clients would count as gone and
 * join again at their next attempt, as after any lost place. */
#define HL_LUA_LINE_KEEP(line, alive, ms)                                   \
    "    if redis.call('pttl', " line ") < " ms " + 0 then\n"               \
    "      redis.call('pexpire', " line ", 2 * " ms ")\n"                   \
    "      redis.call('pexpire', " alive ", 2 * " ms ")\n"                  \
    "    end\n"

/* In an attempt: set the client's (me's) place to run out in ms, and
 * keep the line's keys that long.  Defines what it needs in the block it
 * is in, so that attempts that keep no place pay nothing for it. */
#define HL_LUA_LINE_PLACE(ms)                                               \
    HL_LUA_NOW                                                              \
    "    redis.call('zadd', KEYS[5], now_ms() + " ms ", me)\n"              \
    HL_LUA_LINE_KEEP("KEYS[4]", "KEYS[5]", ms)

/* In a refused attempt: join the line at its end, or renew the place.
 * The script declares the local first before, nil.  A client whose place
 * is new had none, so it had no entry in the line either (every script
 * that takes a client out of one takes it out of the other), and it is
 * first only in a line of one, which this sets: the line need not be
 * read again (HL_LUA_LINE_FIRST).  A line of one was made just now, and
 * the places hold no live place besides: their expiries are set without
 * asking what they were, which spares the common line of two processes
 * two calls a hand-off. */
#define HL_LUA_LINE_JOIN(ms)                                                \
    HL_LUA_NOW                                                              \
    "    if redis.call('zadd', KEYS[5], now_ms() + " ms ", me) == 1 then\n" \
    "      first = redis.call('rpush', KEYS[4], me) == 1\n"                 \
    "    end\n"                                                             \
    "    if first then\n"                                                   \
    "      redis.call('pexpire', KEYS[4], 2 * " ms ")\n"                    \
    "      redis.call('pexpire', KEYS[5], 2 * " ms ")\n"                    \
    "    else\n"                                                            \
    HL_LUA_LINE_KEEP("KEYS[4]", "KEYS[5]", ms)                              \
    "    end\n"

/* After HL_LUA_LINE_JOIN, or where the attempt kept no place: the local
 * first becomes whether me is first in line. */
#define HL_LUA_LINE_FIRST                                                   \
    "if first == nil then\n"                                                \
    "  first = redis.call('lindex', KEYS[4], '0') == me\n"                  \
    "end\n"

/* In an attempt about to grant a first hold (when the Lua condition
 * cond holds), keep being the argument that says how long the client
 * stays in line: a client in line whose other waiters still wait stays
 * in it, at the end (already last, it stays: its waiters' attempts renew
 * its place); else it leaves.  A client out of line stays out. */
#define HL_LUA_LINE_ON_GRANT(cond, keep)                                    \
    "if " cond " and " keep " ~= '-1' and\n"                                \
    "    redis.call('zscore', KEYS[5], me) then\n"                          \
    "  if " keep " == '0' then\n"                                           \
    "    redis.call('zrem', KEYS[5], me)\n"                                 \
    "    redis.call('lrem', KEYS[4], '1', me)\n"                            \
    "  elseif redis.call('lindex', KEYS[4], '-1') ~= me then\n"             \
    "    redis.call('lrem', KEYS[4], '1', me)\n"                            \
    "    redis.call('rpush', KEYS[4], me)\n"                                \
    HL_LUA_LINE_PLACE(keep)                                                 \
    "  end\n"                                                               \
    "end\n"

/* A client leaves the line (KEYS line, places, promise and wake base at
 * L..L+3, me the client).  When the lock is free (the Lua condition
 * free) and the client was promised it or was first, the next client is
 * promised it and woken: it may have been freed by another library's
 * release, which only the first client hears.  When the lock is held and
 * the client was first, the next client, now first, is told so ("h" on
 * its channel: it listens to other libraries' releases from then on).
 * Needs HL_LUA_ANNOUNCE. */
#define HL_LUA_LINE_LEAVE(L, free)                                          \
    "local was_first = redis.call('lindex', KEYS[" #L "], '0') == me\n"     \
    "redis.call('lrem', KEYS[" #L "], '1', me)\n"                           \
    "redis.call('zrem', KEYS[" #L " + 1], me)\n"                            \
    "local promised = redis.call('get', KEYS[" #L " + 2]) == me\n"          \
    "if promised then redis.call('del', KEYS[" #L " + 2]) end\n"            \
    "if " free " then\n"                                                    \
    "  if promised or was_first then\n"                                     \
    HL_LUA_LINE_PROMISE_FROM(L, "me") "  end\n"                              \
    "elseif was_first then\n"                                               \
    "  local first = redis.call('lindex', KEYS[" #L "], '0')\n"             \
    "  if first then\n"                                                     \
    "    announce(KEYS[" #L " + 3] .. ':' .. first, '" HL_WAKE_MSG_FIRST    \
    "')\n"                                                                  \
    "  end\n"                                                               \
    "end\n"

/* The status of a line: waiters as hl_hash_parse_status reads them, each
 * client in line with the ms its place has left; KEYS line and places at
 * L and L+1.  Needs HL_LUA_NOW and HL_LUA_MS_UNTIL; sets waiters. */
#define HL_LUA_LINE_STATUS(L)                                               \
    "local waiters = {}\n"                                                  \
    "local now = now_ms()\n"                                                \
    "for _, c in ipairs(redis.call('lrange', KEYS[" #L "], '0', '-1')) do\n" \
    "  local at = redis.call('zscore', KEYS[" #L " + 1], c)\n"              \
    "  local ms = at and ms_until(at, now)\n"                               \
    "  waiters[#waiters + 1] = c\n"                                         \
    "  waiters[#waiters + 1] = ms and math.max(ms, 0) or false\n"           \
    "end\n"

#endif
