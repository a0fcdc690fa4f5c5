/* The Lua a condition (src/cond) shares with the kinds it waits on: a
 * waiter's entry into the condition's line, put in front of a kind's
 * release body so that the lock is freed and the waiter is in line in
 * one script, and no signal sent after the release can miss it.
 *
 *   hilock_cond_line:{LOCK}:<cond>      waiter ids, oldest first
 *   hilock_cond_alive:{LOCK}:<cond>     zset: waiter id -> server time
 *                                       (ms) its place lasts to unrenewed
 *   hilock_cond_signaled:{LOCK}:<cond>  hash: waiter id -> server time
 *                                       (ms) by which it must take its
 *                                       signal, else the signal passes on
 *   hilock_cond_wake:{LOCK}:<cond>:<client id>
 *                                       channel: a signaled waiter's id
 *
 * The keys carry the lock's name, so they lie in its cluster slot. */
#ifndef HL_COND_LUA_H
#define HL_COND_LUA_H

#include "layout/layout.h"

/* KEYS[line], KEYS[alive]: the condition's; ARGV[id], ARGV[wt]: the
 * waiter's id and how long its place lasts; KEYS[1] the lock's hash,
 * ARGV[2] the owner's field.  Replies HL_COND_HELD_TWICE (-5) before
 * anything when the field holds more than once; joins the line when it
 * holds once; does nothing when it holds nothing, which the release
 * after it answers (-1).  Each index is given as Lua text. */
#define HL_LUA_COND_ENTER(line, alive, id, wt)                              \
    "local cond_held = redis.call('hget', KEYS[1], ARGV[2])\n"              \
    "if cond_held and cond_held ~= '1' then return -5 end\n"                \
    "if cond_held then\n"                                                   \
    "  local t = redis.call('time')\n"                                      \
    "  local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"                 \
    "  local wt = tonumber(ARGV[" wt "])\n"                                 \
    "  redis.call('rpush', KEYS[" line "], ARGV[" id "])\n"                 \
    "  redis.call('zadd', KEYS[" alive "], now + wt, ARGV[" id "])\n"       \
    "  if redis.call('pttl', KEYS[" line "]) < 3 * wt then\n"              \
    "    redis.call('pexpire', KEYS[" line "], 3 * wt)\n"                   \
    "  end\n"                                                               \
    "  if redis.call('pttl', KEYS[" alive "]) < 3 * wt then\n"             \
    "    redis.call('pexpire', KEYS[" alive "], 3 * wt)\n"                  \
    "  end\n"                                                               \
    "end\n"

#endif
