/* A Redisson-behaving fair lock peer; see redisson_peer.h. */
#include "support/redisson_peer.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/error.h"
#include "hilock/reply.h"

/* Shared by the scripts: KEYS[1] the lock, KEYS[2] the line, KEYS[3] the
 * places; now is the peer's clock.  Stale places go from the head only:
 * a place further back is the one before it plus a wait, so it cannot
 * have run out first unless waits were taken off it. */
#define PEER_DROP_STALE_HEADS                                               \
    "local function drop_stale_heads(now)\n"                                \
    "  while true do\n"                                                     \
    "    local first = redis.call('lindex', KEYS[2], 0)\n"                  \
    "    if not first then return end\n"                                   \
    "    local at = redis.call('zscore', KEYS[3], first)\n"                 \
    "    if not at or tonumber(at) > now then return end\n"                 \
    "    redis.call('zrem', KEYS[3], first)\n"                              \
    "    redis.call('lpop', KEYS[2])\n"                                     \
    "  end\n"                                                               \
    "end\n"

/* ARGV: lease, field, wait, now.  -1 granted, else the ttl. */
static const char attempt_lua[] =
    PEER_DROP_STALE_HEADS
    "local lease, me = ARGV[1], ARGV[2]\n"
    "local wait, now = tonumber(ARGV[3]), tonumber(ARGV[4])\n"
    "drop_stale_heads(now)\n"
    "local first = redis.call('lindex', KEYS[2], 0)\n"
    "if redis.call('exists', KEYS[1]) == 0 and (not first or first == me)"
    " then\n"
    "  if first then redis.call('lpop', KEYS[2]) end\n"
    "  redis.call('zrem', KEYS[3], me)\n"
    /* Everyone behind moves one grant closer: each place loses a wait. */
    "  for _, w in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do\n"
    "    redis.call('zincrby', KEYS[3], -wait, w)\n"
    "  end\n"
    "  redis.call('hset', KEYS[1], me, 1)\n"
    "  redis.call('pexpire', KEYS[1], lease)\n"
    "  return -1\n"
    "end\n"
    "if redis.call('hexists', KEYS[1], me) == 1 then\n"
    "  redis.call('hincrby', KEYS[1], me, 1)\n"
    "  redis.call('pexpire', KEYS[1], lease)\n"
    "  return -1\n"
    "end\n"
    "if redis.call('zscore', KEYS[3], me) then\n"
    "  return math.max(0, redis.call('pttl', KEYS[1]))\n"
    "end\n"
    "local last = redis.call('lindex', KEYS[2], -1)\n"
    "local last_at = last and last ~= me and"
    " redis.call('zscore', KEYS[3], last)\n"
    "local ttl\n"
    "if last_at then ttl = tonumber(last_at) - now\n"
    "else ttl = redis.call('pttl', KEYS[1]) end\n"
    "if redis.call('zadd', KEYS[3], ttl + wait + now, me) == 1 then\n"
    "  redis.call('rpush', KEYS[2], me)\n"
    "end\n"
    "return ttl\n";

/* KEYS[4] the channel base.  ARGV: field, lease, now.  1 freed, 0 still
 * held, -1 not held. */
static const char unlock_lua[] =
    PEER_DROP_STALE_HEADS
    "local function tell_head()\n"
    "  local first = redis.call('lindex', KEYS[2], 0)\n"
    "  if first then redis.call('publish', KEYS[4] .. ':' .. first, '0') "
    "end\n"
    "end\n"
    "drop_stale_heads(tonumber(ARGV[3]))\n"
    "if redis.call('exists', KEYS[1]) == 0 then\n"
    "  tell_head()\n"
    "  return 1\n"
    "end\n"
    "if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return -1 end\n"
    "if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then\n"
    "  redis.call('pexpire', KEYS[1], ARGV[2])\n"
    "  return 0\n"
    "end\n"
    "redis.call('del', KEYS[1])\n"
    "tell_head()\n"
    "return 1\n";

/* KEYS[1] the line, KEYS[2] the places.  ARGV: field, wait. */
static const char give_up_lua[] =
    "local line = redis.call('lrange', KEYS[1], 0, -1)\n"
    "local behind = false\n"
    "for _, w in ipairs(line) do\n"
    "  if behind then\n"
    "    redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), w)\n"
    "  elseif w == ARGV[1] then\n"
    "    behind = true\n"
    "  end\n"
    "end\n"
    "redis.call('zrem', KEYS[2], ARGV[1])\n"
    "redis.call('lrem', KEYS[1], 0, ARGV[1])\n"
    "return 0\n";

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void hl_rpeer_init(hl_rpeer *p, hilock_client *client, const char *name,
                   const char *id)
{
    memset(p, 0, sizeof *p);
    p->client = client;
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->id, sizeof p->id, "%s", id);
    p->wait_ms = HL_RPEER_DEFAULT_WAIT_MS;
}

void hl_rpeer_field(const hl_rpeer *p, long thread, char *out, size_t cap)
{
    snprintf(out, cap, "%s:%ld", p->id, thread);
}

void hl_rpeer_channel(const hl_rpeer *p, long thread, char *out, size_t cap)
{
    snprintf(out, cap, "redisson_lock__channel:{%s}:%s:%ld", p->name, p->id,
             thread);
}

/* EVAL script with the lock's keys (the first nkeys of: the lock, the
 * line, the places, the channel base, or without the lock when
 * skip_name) and args; the integer reply. */
static long long eval(hl_rpeer *p, const char *script, bool skip_name,
                      int nkeys, int nargs, const char *const *args)
{
    char keys[4][200], nk[8];
    const char *argv[16];
    hilock_reply *r = NULL;
    long long v;
    int argc = 0, rc;

    snprintf(keys[0], sizeof keys[0], "%s", p->name);
    snprintf(keys[1], sizeof keys[1], "redisson_lock_queue:{%s}", p->name);
    snprintf(keys[2], sizeof keys[2], "redisson_lock_timeout:{%s}",
             p->name);
    snprintf(keys[3], sizeof keys[3], "redisson_lock__channel:{%s}",
             p->name);
    snprintf(nk, sizeof nk, "%d", nkeys);
    argv[argc++] = "EVAL";
    argv[argc++] = script;
    argv[argc++] = nk;
    for (int i = 0; i < nkeys; i++)
        argv[argc++] = keys[i + (skip_name ? 1 : 0)];
    for (int i = 0; i < nargs; i++)
        argv[argc++] = args[i];
    rc = hilock_client_command(p->client, argc, argv, NULL, &r);
    if (rc != HILOCK_OK || r == NULL || r->type != HILOCK_REPLY_INTEGER)
        fail_msg("the peer's script failed: %s (%s)", hilock_errname(rc),
                 r != NULL && r->str != NULL ? r->str : "no reply text");
    v = r->integer;
    hilock_reply_free(r);
    return v;
}

int64_t hl_rpeer_attempt(hl_rpeer *p, long thread, int64_t lease_ms)
{
    char field[128], lease[24], wait[24], now[24];
    const char *args[4] = { lease, field, wait, now };

    hl_rpeer_field(p, thread, field, sizeof field);
    snprintf(lease, sizeof lease, "%" PRId64, lease_ms);
    snprintf(wait, sizeof wait, "%" PRId64, p->wait_ms);
    snprintf(now, sizeof now, "%" PRId64, wall_ms());
    return eval(p, attempt_lua, false, 3, 4, args);
}

int hl_rpeer_unlock(hl_rpeer *p, long thread, int64_t lease_ms)
{
    char field[128], lease[24], now[24];
    const char *args[3] = { field, lease, now };

    hl_rpeer_field(p, thread, field, sizeof field);
    snprintf(lease, sizeof lease, "%" PRId64, lease_ms);
    snprintf(now, sizeof now, "%" PRId64, wall_ms());
    return (int)eval(p, unlock_lua, false, 4, 3, args);
}

void hl_rpeer_give_up(hl_rpeer *p, long thread)
{
    char field[128], wait[24];
    const char *args[2] = { field, wait };

    hl_rpeer_field(p, thread, field, sizeof field);
    snprintf(wait, sizeof wait, "%" PRId64, p->wait_ms);
    eval(p, give_up_lua, true, 2, 2, args);
}
