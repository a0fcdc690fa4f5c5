/* The semaphore kinds' scripts: Redisson's RSemaphore and
 * RPermitExpirableSemaphore layout.
 *
 *   NAME               string: the count of free permits
 *   {NAME}:timeout     zset (expirable permits): permit id -> expiry, ms
 *                      since the epoch
 *   redisson_sc:{NAME} the new count, after every release and change
 *
 * KEYS of every script: NAME, {NAME}:timeout, the channel.  Scripts of an
 * expirable semaphore (ARGV[1] '1') first take back the permits whose
 * expiry passed, as Redisson's acquire does, on the server's clock. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/transport/resp.h"
#include "kindkit/kindkit.h"
#include "layout/layout.h"
#include "semaphore/semaphore_internal.h"

#define SEM_LUA_COMMON                                                      \
    HL_LUA_ANNOUNCE                                                         \
    HL_LUA_NOW                                                              \
    "local now = now_ms()\n"                                                \
    /* Expired permits come back, at most 1000 a call (unpack's limit). */ \
    "local function reclaim()\n"                                            \
    "  if ARGV[1] ~= '1' then return end\n"                                 \
    "  local gone = redis.call('zrangebyscore', KEYS[2], 0, now,\n"         \
    "                          'limit', 0, 1000)\n"                         \
    "  if #gone == 0 then return end\n"                                     \
    "  redis.call('zrem', KEYS[2], unpack(gone))\n"                         \
    "  local v = redis.call('incrby', KEYS[1], #gone)\n"                    \
    "  if v > 0 then announce(KEYS[3], v) end\n"                            \
    "end\n"                                                                 \
    "reclaim()\n"

/* ARGV: expirable, permits, lease ms, permit id ('' for none).
 * Replies {1, count left} when taken, else {0, ms until the first permit
 * expires, or -1}. */
static const char acquire_lua[] =
    SEM_LUA_COMMON
    "local n = tonumber(ARGV[2])\n"
    "local v = redis.call('get', KEYS[1])\n"
    "if v ~= false and tonumber(v) >= n then\n"
    "  local left = redis.call('decrby', KEYS[1], n)\n"
    "  if ARGV[4] ~= '' then\n"
    "    redis.call('zadd', KEYS[2], now + tonumber(ARGV[3]), ARGV[4])\n"
    "    local ttl = redis.call('pttl', KEYS[1])\n"
    "    if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end\n"
    "  end\n"
    "  return answer({1, left})\n"
    "end\n"
    "if ARGV[1] == '1' then\n"
    "  local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')\n"
    "  if first[2] and first[2] ~= '" HL_LAYOUT_PERMIT_NO_EXPIRY "' then\n"
    "    return answer({0, math.max(tonumber(first[2]) - now, 0)})\n"
    "  end\n"
    "end\n"
    "return answer({0, -1})\n";

/* ARGV: expirable, permits.  Replies the new count. */
static const char release_lua[] =
    SEM_LUA_COMMON
    "local v = redis.call('incrby', KEYS[1], ARGV[2])\n"
    "announce(KEYS[3], v)\n"
    "return answer(v)\n";

/* ARGV: expirable, permits (may be negative).  Replies the new count.  A
 * plain semaphore announces the new count, as RSemaphore's addPermits
 * does; an expirable one announces the amount added, and nothing when it
 * takes permits away, as RPermitExpirableSemaphore's does: its Java
 * listeners let that many waiters through, and a count of 0 or less
 * would have them release a negative number. */
static const char add_lua[] =
    SEM_LUA_COMMON
    "local v = redis.call('incrby', KEYS[1], ARGV[2])\n"
    "if ARGV[1] ~= '1' then\n"
    "  announce(KEYS[3], v)\n"
    "elseif tonumber(ARGV[2]) > 0 then\n"
    "  announce(KEYS[3], ARGV[2])\n"
    "end\n"
    "return answer(v)\n";

/* ARGV: expirable, permits.  Replies 1 when set, 0 when it existed. */
static const char try_set_lua[] =
    SEM_LUA_COMMON
    "if redis.call('exists', KEYS[1]) == 1 then return answer(0) end\n"
    "redis.call('set', KEYS[1], ARGV[2])\n"
    "announce(KEYS[3], ARGV[2])\n"
    "return answer(1)\n";

/* ARGV: expirable, permits.  Replies the count set.  On an expirable
 * semaphore the count set is the total, held permits included, as
 * RPermitExpirableSemaphore's setPermits does: with one permit held,
 * setting 5 leaves 4 free.  An unchanged total announces nothing. */
static const char set_lua[] =
    SEM_LUA_COMMON
    "local want = tonumber(ARGV[2])\n"
    "local free = redis.call('get', KEYS[1])\n"
    "if ARGV[1] ~= '1' or free == false then\n"
    "  redis.call('set', KEYS[1], ARGV[2])\n"
    "  announce(KEYS[3], ARGV[2])\n"
    "  return answer(want)\n"
    "end\n"
    "local total = tonumber(free) + redis.call('zcard', KEYS[2])\n"
    "if total ~= want then\n"
    "  redis.call('incrby', KEYS[1], want - total)\n"
    "  announce(KEYS[3], ARGV[2])\n"
    "end\n"
    "return answer(want)\n";

/* ARGV: expirable.  Replies the count before. */
static const char drain_lua[] =
    SEM_LUA_COMMON
    "local v = redis.call('get', KEYS[1])\n"
    "if v == false then return answer(0) end\n"
    "redis.call('set', KEYS[1], 0)\n"
    "return answer(tonumber(v))\n";

/* ARGV: expirable.  Replies the count. */
static const char available_lua[] =
    SEM_LUA_COMMON
    "return answer(tonumber(redis.call('get', KEYS[1]) or '0'))\n";

/* ARGV: expirable, permit id.  Replies 0 (no such permit), 1 (given
 * back), 2 (given back, but its lease had run out). */
static const char permit_release_lua[] =
    SEM_LUA_COMMON
    "local s = redis.call('zscore', KEYS[2], ARGV[2])\n"
    "if s == false then return answer(0) end\n"
    "redis.call('zrem', KEYS[2], ARGV[2])\n"
    "local v = redis.call('incrby', KEYS[1], 1)\n"
    "announce(KEYS[3], v)\n"
    "if tonumber(s) <= now then return answer(2) end\n"
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

static hl_script scripts[SEM_PERMIT_RELEASE + 1];
static hl_script renew;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_once(void)
{
    hl_script_init(&scripts[SEM_ACQUIRE], acquire_lua);
    scripts[SEM_PERMIT_ACQUIRE] = scripts[SEM_ACQUIRE];
    hl_script_init(&scripts[SEM_RELEASE], release_lua);
    hl_script_init(&scripts[SEM_ADD], add_lua);
    hl_script_init(&scripts[SEM_TRY_SET], try_set_lua);
    hl_script_init(&scripts[SEM_SET], set_lua);
    hl_script_init(&scripts[SEM_DRAIN], drain_lua);
    hl_script_init(&scripts[SEM_AVAILABLE], available_lua);
    hl_script_init(&scripts[SEM_PERMIT_RELEASE], permit_release_lua);
    hl_script_init(&renew, renew_lua);
}

void hl_sem_scripts_init(void)
{
    pthread_once(&once, init_once);
}

const hl_script *hl_sem_renew_script(void)
{
    return &renew;
}

static int sem_channel(const hilock_lock *lock, const char *field,
                       size_t field_len, hl_aux_name *out)
{
    return hl_channel_under(HL_LAYOUT_SEMAPHORE_CHANNEL, lock, field,
                            field_len, out);
}

const hl_kind hl_semaphore_kind = {
    .name = "semaphore",
    .channel = sem_channel,
    .wake_all = true,
    .renew = &renew,
    .lease_lost = hl_sem_permit_lost,
    .lease_released = hl_sem_permit_released,
};

int hl_sem_run(sem_op *op, hl_request_fn *fn)
{
    hilock_semaphore *sem = op->sem;
    hilock_lock *lock = sem->lock;
    hl_conn *conn = hl_lock_conn(lock);
    if (conn == NULL)
        return HILOCK_ECLOSED;
    hl_aux_name chan;
    if (hl_lock_channel(lock, &chan) != 0) {
        hl_aux_name_done(&chan);
        return HILOCK_ENOMEM;
    }
    char num[24], lease[24];
    const char *argv[7] = {lock->name, sem->zkey, chan.s,
                           sem->expirable ? "1" : "0", num, lease, op->id};
    size_t lens[7] = {lock->name_len, sem->zkey_len, chan.len, 1, 0, 0,
                      strlen(op->id)};
    lens[4] = (size_t)snprintf(num, sizeof num, "%lld", (long long)op->n);
    lens[5] = (size_t)snprintf(lease, sizeof lease, "%lld",
                               (long long)op->lease_ms);
    int argc = 7;
    switch (op->call) {
    case SEM_DRAIN:
    case SEM_AVAILABLE:
        argc = 4;
        break;
    case SEM_PERMIT_RELEASE:
        argv[4] = op->id;
        lens[4] = lens[6];
        argc = 5;
        break;
    case SEM_ACQUIRE:
    case SEM_PERMIT_ACQUIRE:
        break;
    default:
        argc = 5;
        break;
    }
    int rc = hl_script_run(conn, &scripts[op->call], 3, argc, argv, lens, fn,
                           op);
    hl_aux_name_done(&chan);
    return rc;
}
