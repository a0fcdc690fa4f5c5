/* A condition's scripts besides the release into its line (which each
 * lock kind makes from its own release, kindkit/cond_lua.h): signal, a
 * waiter's poll, and its leave. */
#include <pthread.h>

#include "cond/cond_internal.h"
#include "kindkit/kindkit.h"
#include "kindkit/script_registry.h"
#include "layout/layout.h"

#define COND_LUA_COMMON                                                     \
    HL_LUA_ANNOUNCE HL_LUA_NOW                                              \
    "local function keep(key, ms)\n"                                          \
    "  if redis.call('pttl', key) < ms then\n"                          \
    "    redis.call('pexpire', key, ms)\n"                              \
    "  end\n"                                                               \
    "end\n"                                                                 \
    /* Signal up to want waiters (0: all), passing over those whose place  \
     * ran out; each gets until now + wt to take its signal. */            \
    "local function wake(want, now, wt)\n"                                  \
    "  local n = 0\n"                                                       \
    "  while want == 0 or n < want do\n"                                    \
    "    local id = redis.call('lpop', KEYS[1])\n"                          \
    "    if not id then break end\n"                                        \
    "    local til = redis.call('zscore', KEYS[2], id)\n"                   \
    "    redis.call('zrem', KEYS[2], id)\n"                                 \
    "    if til and tonumber(til) >= now then\n"                            \
    "      redis.call('hset', KEYS[3], id, now + wt)\n"                     \
    "      announce(KEYS[4] .. ':' .. string.sub(id, 1, "                   \
    HL_LAYOUT_CLIENT_ID_LEN_TEXT "), id)\n"                                 \
    "      n = n + 1\n"                                                     \
    "    end\n"                                                             \
    "  end\n"                                                               \
    "  if n > 0 then keep(KEYS[3], 3 * wt) end\n"                                 \
    "  return n\n"                                                          \
    "end\n"                                                                 \
    /* Signals nobody took in time go to the next waiter, one each. */     \
    "local function pass_stale(now, wt)\n"                                  \
    "  local all = redis.call('hgetall', KEYS[3])\n"                        \
    "  for i = 1, #all, 2 do\n"                                             \
    "    if tonumber(all[i + 1]) < now then\n"                              \
    "      redis.call('hdel', KEYS[3], all[i])\n"                           \
    "      wake(1, now, wt)\n"                                              \
    "    end\n"                                                             \
    "  end\n"                                                               \
    "end\n"

/* ARGV: how many to wake (0: all), the waiter timeout.  Replies how many
 * were woken. */
static const char signal_lua[] =
    COND_LUA_COMMON
    "local now, wt = now_ms(), tonumber(ARGV[2])\n"
    "pass_stale(now, wt)\n"
    "return answer(wake(tonumber(ARGV[1]), now, wt))\n";

/* ARGV: the waiter's id, the waiter timeout.  Replies 1 when signalled
 * (the signal is taken), 0 when still in line (its place renewed), 2
 * when neither: passed over as gone, which the waiter takes as a wake-up
 * without a signal. */
static const char poll_lua[] =
    COND_LUA_COMMON
    "local now, wt = now_ms(), tonumber(ARGV[2])\n"
    "pass_stale(now, wt)\n"
    "if redis.call('hdel', KEYS[3], ARGV[1]) == 1 then return answer(1) end\n"
    "if redis.call('zscore', KEYS[2], ARGV[1]) then\n"
    "  redis.call('zadd', KEYS[2], now + wt, ARGV[1])\n"
    "  keep(KEYS[1], 3 * wt)\n"
    "  keep(KEYS[2], 3 * wt)\n"
    "  return answer(0)\n"
    "end\n"
    "return answer(2)\n";

/* ARGV: the waiter's id, the waiter timeout.  The waiter leaves the line;
 * a signal it had taken passes on.  Replies 1 when one did, else 0. */
static const char leave_lua[] =
    COND_LUA_COMMON
    "local now, wt = now_ms(), tonumber(ARGV[2])\n"
    "if redis.call('hdel', KEYS[3], ARGV[1]) == 1 then\n"
    "  wake(1, now, wt)\n"
    "  return answer(1)\n"
    "end\n"
    "redis.call('lrem', KEYS[1], '1', ARGV[1])\n"
    "redis.call('zrem', KEYS[2], ARGV[1])\n"
    "return answer(0)\n";

static hl_script signal_script, poll_script, leave_script;

#define COND_KEYS hl_key_given, hl_key_given, hl_key_given, hl_key_given

static const hl_script_def signal_def = {
    .what = "condition signal",
    .body = signal_lua,
    .script = &signal_script,
    HL_DEF_KEYS(COND_KEYS),
};

static const hl_script_def poll_def = {
    .what = "condition poll",
    .body = poll_lua,
    .script = &poll_script,
    HL_DEF_KEYS(COND_KEYS),
};

static const hl_script_def leave_def = {
    .what = "condition leave",
    .body = leave_lua,
    .script = &leave_script,
    HL_DEF_KEYS(COND_KEYS),
};

const hl_script_def *const hl_cond_script_defs[] = {&signal_def, &poll_def,
                                                    &leave_def, NULL};

static pthread_once_t scripts_once = PTHREAD_ONCE_INIT;

static void init_scripts(void) { hl_script_defs_init(hl_cond_script_defs); }

void hl_cond_scripts_init(void) { pthread_once(&scripts_once, init_scripts); }


int hl_cond_run(hilock_cond *c, hl_cond_script which, int nargs,
                const char *const *args, const size_t *lens,
                hl_request_fn *fn, void *data)
{
    static const hl_script_def *const defs[] = {&signal_def, &poll_def,
                                                &leave_def};
    const hl_script_def *def = defs[which];
    const char *given[4];
    size_t given_lens[4];
    for (int i = 0; i < 4; i++) {
        given[i] = c->keys[i].s;
        given_lens[i] = c->keys[i].len;
    }
    return hl_run_def(c->lock, def, 4, given, given_lens, nargs, args, lens,
                      fn, data);
}

