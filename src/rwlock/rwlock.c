/* The read and write kinds: Redisson's RReadWriteLock layout.
 *
 *   NAME                        hash: "mode" -> "read" | "write",
 *                               "<client id>:<owner>" -> read holds,
 *                               "<client id>:<owner>:write" -> write holds
 *   {NAME}:<field>:rwlock_timeout:<n>
 *                               one key per read hold n = 1..count, with
 *                               that hold's lease; NAME lives as long as
 *                               the longest of them
 *   redisson_rwlock:{NAME}      "0" when a read release frees the lock,
 *                               "1" when a write release frees it or lets
 *                               readers in
 *   hilock_rwlock_line:{NAME}   clients waiting to write, oldest first
 *   hilock_rwlock_writers:{NAME}
 *                               zset: client id -> server time (ms) at
 *                               which its place runs out; while it has a
 *                               live member, new readers wait
 *   hilock_rwlock_next:{NAME}   the client a release promised the lock to
 *   hilock_rwlock_wake:{NAME}:<client>
 *                               where that client's writers are woken
 *   hilock_rwlock_want:{NAME}   hash: client id -> its waiting writer's
 *                               wish, or the grant a release made for it
 *   hilock_rwlock_readers:{NAME}
 *                               zset: client id -> server time (ms) at
 *                               which its waiting readers count as gone
 *   redisson_lock_token:{NAME}  fencing counter
 *   hilock_void:{NAME}          voided attempts (see reentrant.c)
 *
 * Beyond Redisson: waiting writers hold new readers back, a reader whose
 * holds all ran out (its process died) is dropped when a writer looks,
 * read-to-write upgrade is refused instead of waiting forever, and every
 * release that lets someone in says so.
 *
 * Writers line up by client as the reentrant lock's waiters do
 * (src/lock/reentrant.c, kindkit/line_lua.h): a release that frees the
 * lock promises it to the first live client in the writers' line and
 * wakes that client alone, so a hand-off between writers of many
 * processes costs the same whatever their number.  Readers listen on
 * Redisson's channel, as Java's readers and writers do, and are told
 * there when they may come: on a release while no writer waits, and when
 * the last writer leaves the line.  A release that frees the lock gives
 * it outright to a waiting writer's wish, as the reentrant lock's does
 * (HL_LUA_LINE_HAND_TO_WISH): the write hold, in the hash it emptied.
 * Our waiting readers listen on Redisson's channel too, where the server
 * cannot tell them from Java's waiters, so they keep their client's
 * place among the readers, and a release counts those as ours: readers
 * wait behind a waiting writer whatever happens, and neither a grant to
 * it nor a promise takes anything from them.  Our releases announce
 * themselves there only when someone besides our readers and our first
 * writer client may listen; that client listens there for the releases
 * of Java's clients, which say "0" or "1" like ours. */
#include <pthread.h>
#include <string.h>

#include "core/engine/lock_handle.h"
#include "core/transport/resp.h"
#include "hilock/rwlock.h"
#include "kindkit/kind_mark.h"
#include "kindkit/kindkit.h"
#include "kindkit/line_lua.h"
#include "kindkit/script_registry.h"
#include "layout/layout.h"
#include "core/base/cname.h"

#define MSG_UNLOCK "'" HL_LAYOUT_MSG_UNLOCK "'"
#define MSG_READ_UNLOCK "'" HL_LAYOUT_MSG_READ_UNLOCK "'"
#define WRITE_SUFFIX "'" HL_LAYOUT_RWLOCK_WRITE_SUFFIX "'"
#define MODE "'" HL_LAYOUT_RWLOCK_MODE "'"
#define READ "'" HL_LAYOUT_RWLOCK_READ "'"
#define WRITE "'" HL_LAYOUT_RWLOCK_WRITE "'"


/* Per-hold timeout keys, and what the read holds say about the lock.
 * holds(v) is the read holds a reader's field v counts: v when it is a
 * hold count (an integer from 1 to 2^53 - 2), else 0, since a value no
 * client of the layout writes names no hold's key.  Every script that
 * starts with this names hold keys it is not given (read_hold_keys), and
 * so starts with the line that tells Dragonfly it may. */
#define RW_LUA_COMMON                                                       \
    HL_LUA_UNDECLARED_KEYS                                                  \
    HL_LUA_NOW HL_LUA_EXTEND HL_LUA_ANNOUNCE HL_LUA_MS_UNTIL                \
    HL_LUA_FOREIGN                                                          \
    HL_LAYOUT_LUA_RWLOCK_TIMEOUT_KEY                                        \
    "local function is_reader(f)\n"                                         \
    "  return f ~= " MODE " and\n"                                          \
    "         string.sub(f, -#" WRITE_SUFFIX ") ~= " WRITE_SUFFIX "\n"       \
    "end\n"                                                                 \
    "local function holds(v)\n"                                             \
    "  local n = is_int(v) and tonumber(v) or 0\n"                          \
    "  if n >= 1 and n < 2^53 - 1 then return n end\n"                      \
    "  return 0\n"                                                          \
    "end\n"                                                                 \
    /* The longest lease left among the read holds, or -1.  It runs after */ \
    /* a release changed the hash, so a reader's count no client writes   */ \
    /* counts no hold rather than fail the release half done.             */ \
    "local function readers_pttl(name)\n"                                   \
    "  local best = -1\n"                                                   \
    "  local all = redis.call('hgetall', name)\n"                           \
    "  for i = 1, #all, 2 do\n"                                             \
    "    if is_reader(all[i]) then\n"                                       \
    "      for j = 1, holds(all[i + 1]) do\n"                               \
    "        local t = redis.call('pttl', tkey(name, all[i], j))\n"         \
    "        if t > best then best = t end\n"                               \
    "      end\n"                                                           \
    "    end\n"                                                             \
    "  end\n"                                                               \
    "  return best\n"                                                       \
    "end\n"

/* KEYS: name, token key, void set, writers' places, readers' places.
 * ARGV: lease ms, field, fenced, known token, nonce, waiter timeout ms
 * (0: a single try), how long the client stays in the writers' line
 * after a first hold (hl_attempt_args.keep_in_line_ms), which a reader,
 * taking no place in that line, does not read.  Replies {1, count,
 * token}, {0, ms to wait at most}, or {2} (voided).  A refused reader
 * that waits keeps its client's place among the readers for the waiter
 * timeout (HL_LAYOUT_RWLOCK_READERS); a granted one gives it up, and the
 * client's other waiting readers take it again at their next attempt. */
static const char read_acquire_lua[] =
    RW_LUA_COMMON HL_LUA_TOKEN HL_LUA_HOLD_CHECK
    "if redis.call('sismember', KEYS[3], ARGV[5]) == 1 then return {2} end\n"
    "local me = string.sub(ARGV[2], 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n"
    "local function refuse(ms)\n"
    "  if ARGV[6] ~= '0' then\n"
    "    redis.call('zadd', KEYS[5], now_ms() + ARGV[6], me)\n"
    HL_LUA_KEEP
    "    keep_key(KEYS[5], ARGV[6])\n"
    "  end\n"
    "  return {0, ms}\n"
    "end\n"
    "local refused = hold_refused(KEYS[1],\n"
    "                             redis.call('hget', KEYS[1], ARGV[2])) or\n"
    "                token_refused(KEYS[2])\n"
    "if refused then return refused end\n"
    "local function grant()\n"
    "  if ARGV[6] ~= '0' then redis.call('zrem', KEYS[5], me) end\n"
    "  local n = redis.call('hincrby', KEYS[1], ARGV[2], '1')\n"
    "  redis.call('set', tkey(KEYS[1], ARGV[2], n), '1', 'px', ARGV[1])\n"
    "  extend(KEYS[1], ARGV[1])\n"
    "  return {1, n, token(KEYS[2], n)}\n"
    "end\n"
    "local mode = redis.call('hget', KEYS[1], " MODE ")\n"
    "if mode == " WRITE " then\n"
    /* The writer may read too (downgrade); nobody else may. */
    "  local wf = ARGV[2] .. " WRITE_SUFFIX "\n"
    "  if redis.call('hexists', KEYS[1], wf) == 1 then\n"
    "    return grant()\n"
    "  end\n"
    "  return refuse(redis.call('pttl', KEYS[1]))\n"
    "end\n"
    /* A reader reading again must not wait for a writer that waits for
     * it. */
    "if mode == " READ " and\n"
    "   redis.call('hexists', KEYS[1], ARGV[2]) == 1 then\n"
    "  return grant()\n"
    "end\n"
    "local now = now_ms()\n"
    /* The places are the line's: a place that ran out goes with its
     * client's entry in the line, which the writers' scripts drop. */
    "local first = redis.call('zrangebyscore', KEYS[4], '(' .. now, '+inf',\n"
    "                         'withscores', 'limit', 0, 1)\n"
    "if #first > 0 then\n"
    /* Look again when the lock's lease or the first writer's place runs
     * out, whichever is first: a writer that died sends no message.  A
     * place scored 2^53 ms or more ahead never runs out (ttl false). */
    "  local ttl = ms_until(first[2], now)\n"
    "  local held = redis.call('pttl', KEYS[1])\n"
    "  if held > 0 and (not ttl or held < ttl) then ttl = held end\n"
    "  if not ttl then ttl = -1 elseif ttl < 1 then ttl = 1 end\n"
    "  return refuse(ttl)\n"
    "end\n"
    "if not mode then redis.call('hset', KEYS[1], " MODE ", " READ ") end\n"
    "return grant()\n";

/* KEYS: name, token key, void set, writers' line, writers' places,
 * promise, and for write_acquire_wish_lua the wishes.  ARGV and replies
 * as read_acquire_lua's, and for write_acquire_wish_lua what to do with
 * the client's wish (hl_want) and the nonce of this acquire's attempt
 * whose wish the client knows was recorded ('' none), as the reentrant
 * lock's attempt takes them; but {0, ms to wait at most, how} as the
 * reentrant lock's attempt replies (how: 1 when this client is first in
 * the writers' line, plus 2 when the lock is free but promised to
 * another client, plus 4 when the wish was recorded), and {3} when the
 * owner holds the read lock (an upgrade, which would wait for itself).
 * A refused writer that waits joins the line or renews its client's
 * place there; a single try keeps none. */
#define WRITE_ACQUIRE_LUA(wish_first, wish_join, drop_stale)                \
    RW_LUA_COMMON HL_LUA_TOKEN HL_LUA_HOLD_CHECK                            \
    "if redis.call('sismember', KEYS[3], ARGV[5]) == 1 then return {2} end\n" \
    "local wf = ARGV[2] .. " WRITE_SUFFIX "\n"                              \
    "local me = string.sub(ARGV[2], 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n"  \
    wish_first                                                              \
    "local mine = redis.call('hget', KEYS[1], wf)\n"                        \
    "local refused = hold_refused(KEYS[1], mine) or token_refused(KEYS[2])\n" \
    "if refused then\n" drop_stale "  return refused\n"                     \
    "end\n"                                                                 \
    "local mode = redis.call('hget', KEYS[1], " MODE ")\n"                  \
    "if mode == " WRITE " and mine then\n"                                  \
    "  local n = redis.call('hincrby', KEYS[1], wf, '1')\n"                 \
    "  extend(KEYS[1], ARGV[1])\n"                                          \
    drop_stale "  return {1, n, token(KEYS[2], n)}\n"                       \
    "end\n"                                                                 \
    "if mode == " READ " then\n"                                            \
    "  if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then\n"              \
    drop_stale "    return {3}\n"                                            \
    "  end\n"                                                               \
    "  local all = redis.call('hgetall', KEYS[1])\n"                        \
    /* A reader's count no client of the layout writes: whether it lives   \
     * cannot be told, so the acquire is refused before anything goes. */  \
    "  for i = 1, #all, 2 do\n"                                             \
    "    if is_reader(all[i]) and holds(all[i + 1]) == 0 then\n"            \
    drop_stale                                                              \
    "      return foreign(KEYS[1], all[i + 1], 'a read hold count')\n"      \
    "    end\n"                                                             \
    "  end\n"                                                               \
    /* Readers whose every hold ran out are dead: drop them. */            \
    "  local live = false\n"                                                \
    "  for i = 1, #all, 2 do\n"                                             \
    "    if is_reader(all[i]) then\n"                                       \
    "      local alive = false\n"                                           \
    "      for j = 1, holds(all[i + 1]) do\n"                               \
    "        if redis.call('exists', tkey(KEYS[1], all[i], j)) == 1 then\n" \
    "          alive = true\n"                                              \
    "          break\n"                                                     \
    "        end\n"                                                         \
    "      end\n"                                                           \
    "      if alive then live = true\n"                                     \
    "      else redis.call('hdel', KEYS[1], all[i]) end\n"                  \
    "    end\n"                                                             \
    "  end\n"                                                               \
    "  if not live then\n"                                                  \
    "    redis.call('del', KEYS[1])\n"                                      \
    "    mode = false\n"                                                    \
    "  end\n"                                                               \
    "end\n"                                                                 \
    "local kept, wanted = 0, 0\n"                                           \
    "if not mode then\n"                                                    \
    "  local promised = redis.call('get', KEYS[6])\n"                       \
    "  if promised and promised ~= me then\n"                               \
    "    kept = 2\n"                                                        \
    "  else\n"                                                              \
    "    if promised then redis.call('del', KEYS[6]) end\n"                 \
    HL_LUA_LINE_ON_GRANT("true", "ARGV[7]")                                 \
    "    redis.call('hset', KEYS[1], " MODE ", " WRITE ", wf, '1')\n"        \
    "    redis.call('pexpire', KEYS[1], ARGV[1])\n"                         \
    drop_stale "    return {1, 1, token(KEYS[2], 1)}\n"                     \
    "  end\n"                                                               \
    "end\n"                                                                 \
    "local ttl = redis.call('pttl', kept == 2 and KEYS[6] or KEYS[1])\n"    \
    "local first\n"                                                         \
    "if ARGV[6] ~= '0' then\n" HL_LUA_LINE_JOIN("ARGV[6]") "end\n"         \
    HL_LUA_LINE_FIRST                                                       \
    "if ARGV[6] ~= '0' then\n" wish_join "end\n"                            \
    drop_stale "return {0, ttl, (first and 1 or 0) + kept + wanted}\n"

static const char write_acquire_lua[] = WRITE_ACQUIRE_LUA("", "", "");

/* The grant a release made for this acquire's wish, its message lost, is
 * this attempt's, for the whole lease from now; any other wish or grant
 * of the field's is stale, and drop_stale deletes it before every answer
 * but the one whose new wish overwrites it.  A refused attempt then
 * records its wish, "w <nonce> <lease> <field>" (HL_LUA_WISH_LEAD), which
 * a release that frees the lock grants (HAND_TO_WISH). */
static const char write_acquire_wish_lua[] = WRITE_ACQUIRE_LUA(
    "local w\n"
    "if ARGV[9] ~= '' then\n"
    "  w = redis.call('hget', KEYS[7], me)\n"
    "  if w == 'g ' .. ARGV[9] .. ' ' .. ARGV[2] and\n"
    "      redis.call('hexists', KEYS[1], wf) == 1 then\n"
    "    redis.call('hdel', KEYS[7], me)\n"
    "    extend(KEYS[1], ARGV[1])\n"
    "    return {1, tonumber(redis.call('hget', KEYS[1], wf)), 0}\n"
    "  end\n"
    "end\n"
    HL_LUA_WISH_STALE("w"),
    "    if ARGV[8] == '1' then\n" HL_LUA_KEEP
    "      redis.call('hset', KEYS[7], me, " HL_LUA_WISH_LEAD " ..\n"
    "                 ARGV[5] .. ' ' .. ARGV[1] .. ' ' .. ARGV[2])\n"
    "      keep_key(KEYS[7], ARGV[6])\n"
    "      stale, wanted = false, 4\n"
    "    end\n",
    HL_LUA_WISH_DROP_STALE("KEYS[7]"));

/* In a release's promise_next, with ARGV[4] "1": the first writer client's
 * wish in KEYS[7] gets the write lock outright (HL_LUA_LINE_HAND_TO_WISH),
 * in the hash the release just emptied. */
#define HAND_TO_WISH                                                        \
    HL_LUA_LINE_HAND_TO_WISH_BESIDE(                                        \
        "KEYS[7]", "ARGV[4]", "KEYS[2]", HL_LUA_WISH_PLAIN,                 \
        "    redis.call('hset', KEYS[1], " MODE ", " WRITE ",\n"             \
        "               f .. " WRITE_SUFFIX ", 1)\n"                        \
        "    redis.call('pexpire', KEYS[1], ms)\n",                         \
        "our_readers(c, listens, now)")

/* our_readers(c, listens, now): the clients of ours with readers waiting
 * (KEYS[8]), each listening on Redisson's channel once, not counting c
 * when c listens there as the first writer client (listens) and is one
 * of them: its one subscription is counted there.  Readers wait behind
 * a waiting writer whatever a release does, so a grant to the writer
 * takes nothing from them, and they are woken when the writers are
 * gone; a Java waiter is not of them. */
#define RW_LUA_OUR_READERS                                                  \
    "local function our_readers(c, listens, now)\n"                         \
    "  local n = redis.call('zcount', KEYS[8], '(' .. now, '+inf')\n"       \
    "  if n > 0 and listens then\n"                                         \
    "    local s = redis.call('zscore', KEYS[8], c)\n"                      \
    "    if s and tonumber(s) > now then n = n - 1 end\n"                   \
    "  end\n"                                                               \
    "  return n\n"                                                          \
    "end\n"

/* What a release by me (a Lua expression: a client id, or '') that
 * freed the lock without handing it over and promised it to first (me
 * when me was first in line itself) gives announce_ours as ours: our
 * readers listening on Redisson's channel, who wait behind the writers
 * in line whatever the release says; me, first, listens there once as
 * the first writer client.  Whether a promised client listens there too
 * (when it was told it was first) the server cannot know, so one
 * subscriber more than our readers hears the release: that one may be a
 * Java waiter.  Without this, every hand-off that promises would wake
 * every process with a reader waiting, only for each to be refused. */
#define RW_READERS_BESIDE(me)                                               \
    "first and our_readers(first, first == " me ", now_ms())"

/* KEYS: name, channel, writers' line, places, promise, wake base,
 * wishes, readers' places.  ARGV: lease ms, field, "1" on a cluster
 * (sharded channels) or "0", "1" when a writer's wish may be granted
 * outright (the releasing client's writes go out alone,
 * hl_lock_writes_plain).  Replies
 * -1 when the field holds nothing, the count left, 0 when the lock was
 * freed (also when the only other readers are ones whose holds all ran
 * out), -2 when the owner's last read hold went and others still hold
 * the lock.  A lock freed goes to the first writer in line, if any. */
static const char read_release_lua[] =
    RW_LUA_COMMON HL_LUA_LINE_ANNOUNCE_OURS RW_LUA_OUR_READERS
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return -1 end\n"
    "local n = redis.call('hincrby', KEYS[1], ARGV[2], '-1')\n"
    "redis.call('del', tkey(KEYS[1], ARGV[2], n + 1))\n"
    "if n > 0 then return n end\n"
    "redis.call('hdel', KEYS[1], ARGV[2])\n"
    "if redis.call('hlen', KEYS[1]) > 1 then\n"
    "  if redis.call('hget', KEYS[1], " MODE ") ~= " READ " then\n"
    "    return -2\n"
    "  end\n"
    "  local t = readers_pttl(KEYS[1])\n"
    "  if t > 0 then\n"
    "    redis.call('pexpire', KEYS[1], t)\n"
    "    return -2\n"
    "  end\n"
    /* The other readers' holds all ran out: their processes died.  The
     * lock is free, and Redisson's release frees it here too; a Java
     * writer waits for this message, not for a reader's lease. */
    "end\n"
    "redis.call('del', KEYS[1])\n"
    "local handed = false\n"
    HL_LUA_LINE_PROMISE_FROM_HANDING(3, "''", HAND_TO_WISH)
    /* Held again, by a writer: Java's clients would find it so. */
    "if not handed then\n"
    "  announce_ours(KEYS[2], first, '', ARGV[3], " MSG_UNLOCK ",\n"
    "                " RW_READERS_BESIDE("''") ")\n"
    "end\n"
    "return answer(0)\n";

/* After the owner's last write hold went: while the owner still reads (a
 * downgrade), the lock stays read-held, other readers may join, and
 * they hear so; the script ends then, replying reply. */
#define RW_LUA_DOWNGRADED(reply)                                            \
    "if redis.call('hlen', KEYS[1]) > 1 then\n" RW_LUA_DOWNGRADE(reply)     \
    "end\n"
#define RW_LUA_DOWNGRADE(reply)                                             \
    "  redis.call('hset', KEYS[1], " MODE ", " READ ")\n"                   \
    "  local t = readers_pttl(KEYS[1])\n"                                   \
    "  if t > 0 then redis.call('pexpire', KEYS[1], t) end\n"               \
    "  announce(KEYS[2], " MSG_READ_UNLOCK ")\n"                            \
    "  return answer(" reply ")\n"

/* As read_release_lua, for the write holds.  A release
 * that frees the lock replies -3 when it promised it to another client,
 * -4 when to none (as the reentrant lock's). */
static const char write_release_lua[] =
    RW_LUA_COMMON HL_LUA_LINE_ANNOUNCE_OURS RW_LUA_OUR_READERS
    "local wf = ARGV[2] .. " WRITE_SUFFIX "\n"
    HL_LUA_COUNT_DOWN_FIELD("wf")
    "if left > 0 then\n"
    "  extend(KEYS[1], ARGV[1])\n"
    "  return left\n"
    "end\n"
    /* The hash, with nothing in it but the mode and this last hold, goes
     * whole. */
    "if redis.call('hlen', KEYS[1]) > 2 then\n"
    "  redis.call('hdel', KEYS[1], wf)\n"
    RW_LUA_DOWNGRADE("-2")
    "end\n"
    "redis.call('del', KEYS[1])\n"
    "local me = string.sub(ARGV[2], 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n"
    "local handed = false\n"
    HL_LUA_LINE_PROMISE_FROM_HANDING(3, "me", HAND_TO_WISH)
    "if not handed then\n"
    "  announce_ours(KEYS[2], first, me, ARGV[3], " MSG_READ_UNLOCK ",\n"
    "                " RW_READERS_BESIDE("me") ")\n"
    "end\n"
    "if not first or first == me then return answer(-4) end\n"
    "return answer(-3)\n";

/* KEYS: name, writers' line, places, promise, wake base, channel.  ARGV:
 * the field of the client's last waiting writer.  The client leaves the
 * line (HL_LUA_LINE_LEAVE); without other waiting writers, readers may
 * go. */
static const char write_leave_lua[] =
    HL_LUA_ANNOUNCE
    "local me = string.sub(ARGV[1], 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n"
    HL_LUA_LINE_LEAVE(2, "redis.call('exists', KEYS[1]) == 0")
    "if redis.call('exists', KEYS[3]) == 0 then\n"
    "  announce(KEYS[6], " MSG_READ_UNLOCK ")\n"
    "end\n"
    "return 0\n";

/* KEYS: readers' places.  ARGV: the field of the client's last waiting
 * reader.  The client's place among the readers goes. */
static const char read_leave_lua[] =
    "redis.call('zrem', KEYS[1], string.sub(ARGV[1], 1, "
    HL_LAYOUT_CLIENT_ID_LEN_TEXT "))\n"
    "return 0\n";

/* KEYS: name, channel, writers' line, places, promise, wake base.  ARGV:
 * "1" on a cluster or "0".  Replies 1 when deleted.  The read holds' own
 * keys go with the hash, so that nothing of the lock is left. */
static const char force_lua[] =
    RW_LUA_COMMON HL_LUA_LINE_ANNOUNCE_OURS
    "local all = redis.call('hgetall', KEYS[1])\n"
    "for i = 1, #all, 2 do\n"
    "  if is_reader(all[i]) then\n"
    "    for j = 1, holds(all[i + 1]) do\n"
    "      redis.call('del', tkey(KEYS[1], all[i], j))\n"
    "    end\n"
    "  end\n"
    "end\n"
    "if redis.call('del', KEYS[1]) == 0 then return 0 end\n"
    HL_LUA_LINE_PROMISE_FROM(3, "''")
    "announce_ours(KEYS[2], first, '', ARGV[1], " MSG_READ_UNLOCK ")\n"
    "return answer(1)\n";

/* KEYS: name, channel, void set, writers' line, places, promise, wake
 * base, wishes.  ARGV: field, expected count, nonce to void (or ""),
 * ":write" for the write side or "" for the read side.  Lowers the side's
 * count to the expected one, and on the write side drops the field's
 * wish or the grant made for it, which the client has not taken; replies
 * the count left.  A lock freed goes to the first writer in line, if
 * any, and readers hear of it. */
static const char reconcile_lua[] =
    RW_LUA_COMMON
    "if ARGV[3] ~= '' then\n"
    "  redis.call('sadd', KEYS[3], ARGV[3])\n"
    "  redis.call('pexpire', KEYS[3], " HL_LAYOUT_VOID_TTL_MS_TEXT ")\n"
    "end\n"
    "if ARGV[4] ~= '' then\n"
    "  local me = string.sub(ARGV[1], 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n"
    "  local w = redis.call('hget', KEYS[8], me)\n"
    "  if w and string.sub(w, -#ARGV[1] - 1) == ' ' .. ARGV[1] then\n"
    "    redis.call('hdel', KEYS[8], me)\n"
    "  end\n"
    "end\n"
    "local f = ARGV[1] .. ARGV[4]\n"
    "local n = tonumber(redis.call('hget', KEYS[1], f) or '0')\n"
    "local want = tonumber(ARGV[2])\n"
    "if n <= want then return n end\n"
    "if ARGV[4] == '' then\n"
    "  for i = want + 1, n do redis.call('del', tkey(KEYS[1], f, i)) end\n"
    "end\n"
    "if want > 0 then\n"
    "  redis.call('hset', KEYS[1], f, want)\n"
    "  return want\n"
    "end\n"
    "redis.call('hdel', KEYS[1], f)\n"
    "if redis.call('hlen', KEYS[1]) <= 1 then\n"
    "  redis.call('del', KEYS[1])\n"
    HL_LUA_LINE_PROMISE_FROM(4, "''")
    "elseif ARGV[4] ~= '' then\n"
    "  redis.call('hset', KEYS[1], " MODE ", " READ ")\n"
    "else\n"
    "  return 0\n"
    "end\n"
    "redis.call('publish', KEYS[2], " MSG_READ_UNLOCK ")\n"
    "return 0\n";

/* KEYS: name, channel, writers' line, places, promise, wake base,
 * wishes, readers' places.  ARGV: the field of an acquire's last
 * attempt, whose wish it had recorded, that attempt's nonce, and "1" on
 * a cluster or "0".  Drops
 * the wish; a grant a release made for it goes back, and the lock, freed
 * so, to the next writer client, or to readers when the owner still
 * reads.  Replies 1 when a wish was dropped, 2 when a grant went back,
 * else 0. */
static const char write_withdraw_lua[] =
    RW_LUA_COMMON HL_LUA_LINE_ANNOUNCE_OURS RW_LUA_OUR_READERS
    "local me = string.sub(ARGV[1], 1, " HL_LAYOUT_CLIENT_ID_LEN_TEXT ")\n"
    "local wf = ARGV[1] .. " WRITE_SUFFIX "\n"
    HL_LUA_LINE_WITHDRAW("KEYS[7]", "wf")
    RW_LUA_DOWNGRADED("2")
    "redis.call('del', KEYS[1])\n"
    HL_LUA_LINE_PROMISE_FROM(3, "me")
    "announce_ours(KEYS[2], first, me, ARGV[3], " MSG_READ_UNLOCK ",\n"
    "              " RW_READERS_BESIDE("me") ")\n"
    "return answer(2)\n";

/* KEYS: names.  ARGV: lease ms, then one field per name.  Renews every
 * read hold of the field and the lock; a field whose holds all ran out
 * has lost its lease.  Replies 1/0 per lock. */
static const char read_renew_lua[] =
    RW_LUA_COMMON
    "local out = {}\n"
    "for i = 1, #KEYS do\n"
    "  local n = holds(redis.call('hget', KEYS[i], ARGV[i + 1]) or '0')\n"
    "  local alive = 0\n"
    "  for j = 1, n do\n"
    "    alive = alive + redis.call('pexpire', tkey(KEYS[i], ARGV[i + 1], j),"
    " ARGV[1])\n"
    "  end\n"
    "  if alive > 0 then\n"
    /* A hold that ran out beside live ones comes back with them. */
    "    for j = 1, n do\n"
    "      redis.call('set', tkey(KEYS[i], ARGV[i + 1], j), 1, 'px', ARGV[1],"
    " 'nx')\n"
    "    end\n"
    "    extend(KEYS[i], ARGV[1])\n"
    "    out[i] = 1\n"
    "  else\n"
    "    out[i] = 0\n"
    "  end\n"
    "end\n"
    "return out\n";

/* KEYS: names.  ARGV: lease ms, then one field per name. */
static const char write_renew_lua[] =
    HL_LUA_EXTEND
    "local out = {}\n"
    "for i = 1, #KEYS do\n"
    "  local wf = ARGV[i + 1] .. " WRITE_SUFFIX "\n"
    "  if redis.call('hexists', KEYS[i], wf) == 1 then\n"
    "    extend(KEYS[i], ARGV[1])\n"
    "    out[i] = 1\n"
    "  else\n"
    "    out[i] = 0\n"
    "  end\n"
    "end\n"
    "return out\n";

static hl_script read_acquire_script, write_acquire_script,
    write_acquire_wish_script, read_release_script, write_release_script,
    write_leave_script, read_leave_script, write_withdraw_script, force_script,
    reconcile_script, read_renew_script, write_renew_script, status_script;

/* Redisson's layout gives every read hold a key of its own,
 * "{NAME}:<field>:rwlock_timeout:<n>" for the field's n-th hold, which
 * the scripts name through tkey() (HL_LAYOUT_LUA_RWLOCK_TIMEOUT_KEY). */
static const hl_undeclared_keys read_hold_keys = {
    .maker = HL_LAYOUT_LUA_RWLOCK_TIMEOUT_KEY_FN,
    .why = "a read hold's key is named by its holder's field and by the "
           "number of that field's holds on the server: a writer's attempt, "
           "the releases and a force release read or delete the keys of "
           "holders they find in the hash, and an acquire, release, "
           "reconcile or renewal names the owner's own at counts only the "
           "server knows (two handles of one owner share its field), so no "
           "caller can pass them",
};

/* The writers' line, in the order line_lua.h takes it. */
#define LINE_KEYS                                                           \
    HL_LAYOUT_RWLOCK_LINE, HL_LAYOUT_RWLOCK_WRITERS, HL_LAYOUT_RWLOCK_NEXT
#define ACQUIRE_KEYS hl_key_name, HL_LAYOUT_TOKEN, HL_LAYOUT_VOID
#define RELEASE_KEYS                                                        \
    hl_key_name, HL_LAYOUT_RWLOCK_CHANNEL, LINE_KEYS, HL_LAYOUT_RWLOCK_WAKE

static const hl_script_def read_acquire_def = {
    .what = "read acquire",
    .body = read_acquire_lua,
    .script = &read_acquire_script,
    HL_DEF_KEYS(ACQUIRE_KEYS, HL_LAYOUT_RWLOCK_WRITERS,
                HL_LAYOUT_RWLOCK_READERS),
    .undeclared = &read_hold_keys,
};

static const hl_script_def write_acquire_def = {
    .what = "write acquire",
    .body = write_acquire_lua,
    .script = &write_acquire_script,
    HL_DEF_KEYS(ACQUIRE_KEYS, LINE_KEYS),
    .undeclared = &read_hold_keys,
};

static const hl_script_def write_acquire_wish_def = {
    .what = "write acquire with a wish",
    .body = write_acquire_wish_lua,
    .script = &write_acquire_wish_script,
    HL_DEF_KEYS(ACQUIRE_KEYS, LINE_KEYS, HL_LAYOUT_RWLOCK_WANT),
    .undeclared = &read_hold_keys,
};

static const hl_script_def read_release_def = {
    .what = "read release",
    .body = read_release_lua,
    .script = &read_release_script,
    HL_DEF_KEYS(RELEASE_KEYS, HL_LAYOUT_RWLOCK_WANT, HL_LAYOUT_RWLOCK_READERS),
    .undeclared = &read_hold_keys,
};

static const hl_script_def write_release_def = {
    .what = "write release",
    .body = write_release_lua,
    .script = &write_release_script,
    HL_DEF_KEYS(RELEASE_KEYS, HL_LAYOUT_RWLOCK_WANT,
                HL_LAYOUT_RWLOCK_READERS),
    .undeclared = &read_hold_keys,
};

static const hl_script_def write_withdraw_def = {
    .what = "write withdraw",
    .body = write_withdraw_lua,
    .script = &write_withdraw_script,
    HL_DEF_KEYS(RELEASE_KEYS, HL_LAYOUT_RWLOCK_WANT,
                HL_LAYOUT_RWLOCK_READERS),
    .undeclared = &read_hold_keys,
};

static const hl_script_def write_leave_def = {
    .what = "write leave",
    .body = write_leave_lua,
    .script = &write_leave_script,
    HL_DEF_KEYS(hl_key_name, LINE_KEYS, HL_LAYOUT_RWLOCK_WAKE,
                HL_LAYOUT_RWLOCK_CHANNEL),
};

static const hl_script_def read_leave_def = {
    .what = "read leave",
    .body = read_leave_lua,
    .script = &read_leave_script,
    HL_DEF_KEYS(HL_LAYOUT_RWLOCK_READERS),
};

static const hl_script_def force_def = {
    .what = "read-write force release",
    .body = force_lua,
    .script = &force_script,
    HL_DEF_KEYS(RELEASE_KEYS),
    .undeclared = &read_hold_keys,
};

static const hl_script_def reconcile_def = {
    .what = "read-write reconcile",
    .body = reconcile_lua,
    .script = &reconcile_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_RWLOCK_CHANNEL, HL_LAYOUT_VOID,
                LINE_KEYS, HL_LAYOUT_RWLOCK_WAKE, HL_LAYOUT_RWLOCK_WANT),
    .undeclared = &read_hold_keys,
};

static const hl_script_def read_renew_def = {
    .what = "read renew",
    .body = read_renew_lua,
    .script = &read_renew_script,
    HL_DEF_KEYS(hl_key_name),
    .batch = true,
    .undeclared = &read_hold_keys,
};

static const hl_script_def write_renew_def = {
    .what = "write renew",
    .body = write_renew_lua,
    .script = &write_renew_script,
    HL_DEF_KEYS(hl_key_name),
    .batch = true,
};

/* Readers, ours and Java's, and Java's writers hear Redisson's channel. */
static int shared_channel(const hilock_lock *lock, const char *field,
                          size_t field_len, hl_aux_name *out)
{
    return hl_channel_under(HL_LAYOUT_RWLOCK_CHANNEL, lock, field,
                            field_len, out);
}

static int redisson_channel(const hilock_lock *lock, hl_aux_name *out)
{
    return shared_channel(lock, NULL, 0, out);
}

/* Our writers listen on their client's own channel,
 * "hilock_rwlock_wake:{NAME}:<client id>". */
static int writer_channel(const hilock_lock *lock, const char *field,
                          size_t field_len, hl_aux_name *out)
{
    (void)field;
    (void)field_len;
    return hl_channel_under(HL_LAYOUT_RWLOCK_WAKE, lock,
                            hl_lock_client_id(lock), HILOCK_CLIENT_ID_LEN,
                            out);
}

static int write_query(hilock_lock *lock, hl_query q, const char *field,
                       size_t field_len, hl_request_fn *fn, void *data)
{
    return hl_hash_query_suffixed(lock, q, field, field_len,
                                  HL_LAYOUT_RWLOCK_WRITE_SUFFIX, fn, data);
}

/* KEYS: name, writers' line, places.  Replies the status of a hash kind
 * (kindkit.h), the clients waiting to write in the line's order with the
 * time their places have left. */
static const char status_lua[] =
    HL_LUA_NOW HL_LUA_MS_UNTIL
    "local all = redis.call('hgetall', KEYS[1])\n"
    HL_LUA_LINE_STATUS(2)
    "local seen = #waiters > 0 or\n"
    "             redis.call('hexists', KEYS[1], " MODE ") == 1\n"
    "return {redis.call('pttl', KEYS[1]), all, waiters, -1,\n"
    "        seen and 1 or 0}\n";

static const hl_script_def status_def = {
    .what = "read-write status",
    .body = status_lua,
    .script = &status_script,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_RWLOCK_LINE, HL_LAYOUT_RWLOCK_WRITERS),
};

const hl_script_def *const hl_rwlock_script_defs[] = {
    &read_acquire_def, &write_acquire_def, &write_acquire_wish_def,
    &read_release_def, &write_release_def, &write_leave_def, &read_leave_def,
    &write_withdraw_def, &force_def,
    &reconcile_def, &read_renew_def, &write_renew_def,
    &status_def, NULL};

static int status(hilock_lock *lock, hl_request_fn *fn, void *data)
{
    if (hl_check_name_slot(lock) != HILOCK_OK)
        return HILOCK_EINVAL;
    return hl_run_lock_def(lock, &status_def, 0, NULL, NULL, fn, data);
}

static int parse_status(hilock_reply *reply, hilock_lock_status **out)
{
    return hl_hash_parse_status(reply, "read-write", true, out);
}

/* A writer's attempt that has nothing to do with its client's wish (an
 * uncontended one, the most common) passes neither the wishes' key nor
 * the last two arguments (see the reentrant lock's attempt). */
static int attempt_with(const hl_script_def *def, hilock_lock *lock,
                        const hl_attempt_args *a, hl_request_fn *fn,
                        void *data)
{
    if (hl_check_name_slot(lock) != HILOCK_OK)
        return HILOCK_EINVAL;
    hl_attempt_text t;
    const char *args[HL_LOCK_SCRIPT_MAX_ARGS];
    size_t lens[HL_LOCK_SCRIPT_MAX_ARGS];
    int n = hl_attempt_argv(a, true, 0, &t, args, lens);
    /* The readers' script takes no wish. */
    return hl_run_lock_def(lock, def, def == &write_acquire_wish_def ? n : 7,
                           args, lens, fn, data);
}

static int read_attempt(hilock_lock *lock, const hl_attempt_args *a,
                        hl_request_fn *fn, void *data)
{
    return attempt_with(&read_acquire_def, lock, a, fn, data);
}

static int write_attempt(hilock_lock *lock, const hl_attempt_args *a,
                         hl_request_fn *fn, void *data)
{
    return attempt_with(a->want != HL_WANT_NONE ? &write_acquire_wish_def
                                                : &write_acquire_def,
                        lock, a, fn, data);
}

static int release_with(const hl_script_def *def, hilock_lock *lock,
                        const char *field, size_t field_len, int64_t lease_ms,
                        hl_request_fn *fn, void *data)
{
    char lease[24];
    const char *args[] = {lease, field, hl_lock_on_cluster(lock) ? "1" : "0",
                          hl_lock_writes_plain(lock) ? "1" : "0"};
    size_t lens[] = {hl_i64_dec(lease, lease_ms), field_len, 1, 1};
    return hl_run_lock_def(lock, def, 4, args, lens, fn, data);
}

static int read_release(hilock_lock *lock, const char *field,
                        size_t field_len, int64_t lease_ms, hl_request_fn *fn,
                        void *data)
{
    return release_with(&read_release_def, lock, field, field_len,
                        lease_ms, fn, data);
}

static int write_release(hilock_lock *lock, const char *field,
                         size_t field_len, int64_t lease_ms,
                         hl_request_fn *fn, void *data)
{
    return release_with(&write_release_def, lock, field, field_len,
                        lease_ms, fn, data);
}

static int read_leave(hilock_lock *lock, const char *field, size_t field_len)
{
    return hl_run_lock_def(lock, &read_leave_def, 1, &field, &field_len,
                           NULL, NULL);
}

static int write_leave(hilock_lock *lock, const char *field, size_t field_len)
{
    return hl_run_lock_def(lock, &write_leave_def, 1, &field, &field_len,
                           NULL, NULL);
}

static int write_withdraw(hilock_lock *lock, const char *field,
                          size_t field_len, const char *nonce,
                          size_t nonce_len)
{
    const char *args[] = {field, nonce, hl_lock_on_cluster(lock) ? "1" : "0"};
    size_t lens[] = {field_len, nonce_len, 1};
    return hl_run_lock_def(lock, &write_withdraw_def, 3, args, lens, NULL,
                           NULL);
}

static int force_release(hilock_lock *lock, hl_request_fn *fn, void *data)
{
    if (hl_check_name_slot(lock) != HILOCK_OK)
        return HILOCK_EINVAL;
    const char *sharded = hl_lock_on_cluster(lock) ? "1" : "0";
    size_t len = 1;
    return hl_run_lock_def(lock, &force_def, 1, &sharded, &len, fn, data);
}

static int reconcile_with(const char *side, hilock_lock *lock,
                          const char *field, size_t field_len,
                          int64_t expected, const char *nonce,
                          size_t nonce_len, hl_request_fn *fn, void *data)
{
    char want[24];
    const char *args[] = {field, want, nonce, side};
    size_t lens[] = {field_len, hl_i64_dec(want, expected), nonce_len,
                     strlen(side)};
    return hl_run_lock_def(lock, &reconcile_def, 4, args, lens, fn, data);
}

static int read_reconcile(hilock_lock *lock, const char *field,
                          size_t field_len, int64_t expected,
                          const char *nonce, size_t nonce_len,
                          hl_request_fn *fn, void *data)
{
    return reconcile_with("", lock, field, field_len, expected, nonce,
                          nonce_len, fn, data);
}

static int write_reconcile(hilock_lock *lock, const char *field,
                           size_t field_len, int64_t expected,
                           const char *nonce, size_t nonce_len,
                           hl_request_fn *fn, void *data)
{
    return reconcile_with(":write", lock, field, field_len, expected, nonce,
                          nonce_len, fn, data);
}

static const hl_kind read_kind = {
    .name = "read",
    .channel = shared_channel,
    .wake_all = true,
    .attempt = read_attempt,
    .parse_attempt = hl_parse_acquire_reply,
    .release = read_release,
    .parse_release = hl_parse_release_reply,
    .force_release = force_release,
    .reconcile = read_reconcile,
    .leave = read_leave,
    .mark_grant = hl_kind_mark_read_write_grant,
    .renew = &read_renew_script,
    .query = hl_hash_query,
    .parse_query = hl_hash_parse_query,
    .status = status,
    .parse_status = parse_status,
    .request_channel = hl_release_request_channel,
    .request_release = hl_release_request_send,
};

/* Not queue_locally: an owner may hold the lock through a read handle,
 * and its write attempt must be refused at once (an upgrade), not after
 * this client's other writers. */
static const hl_kind write_kind = {
    .name = "write",
    .channel = writer_channel,
    .foreign_channel = redisson_channel,
    .foreign_any_message = true,
    .line_per_client = true,
    .self_wait_detail = "this owner holds the read lock: taking the write "
                        "lock would wait for itself; release the read "
                        "holds first",
    .attempt = write_attempt,
    .parse_attempt = hl_parse_acquire_reply,
    .release = write_release,
    .parse_release = hl_parse_release_reply,
    .force_release = force_release,
    .reconcile = write_reconcile,
    .leave = write_leave,
    .withdraw = write_withdraw,
    .mark_grant = hl_kind_mark_read_write_grant,
    .renew = &write_renew_script,
    .query = write_query,
    .parse_query = hl_hash_parse_query,
    .status = status,
    .parse_status = parse_status,
    .request_channel = hl_release_request_channel,
    .request_release = hl_release_request_send,
};

static pthread_once_t scripts_once = PTHREAD_ONCE_INIT;

static void init_scripts(void)
{
    hl_script_defs_init(hl_rwlock_script_defs);
    hl_kindkit_scripts_init();
}

int hilock_read_lock_create_n(hilock_lock **out, hilock_client *client,
                              const char *name, size_t name_len)
{
    pthread_once(&scripts_once, init_scripts);
    return hl_lock_create(out, client, &read_kind, name, name_len);
}

int hilock_write_lock_create_n(hilock_lock **out, hilock_client *client,
                               const char *name, size_t name_len)
{
    pthread_once(&scripts_once, init_scripts);
    return hl_lock_create(out, client, &write_kind, name, name_len);
}

int hilock_read_lock_create(hilock_lock **out, hilock_client *client,
                            const char *name)
{
    return hilock_read_lock_create_n(out, client, name, hl_cname_len(name));
}

int hilock_write_lock_create(hilock_lock **out, hilock_client *client,
                             const char *name)
{
    return hilock_write_lock_create_n(out, client, name, hl_cname_len(name));
}
