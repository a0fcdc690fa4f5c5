/* The reentrant lock kind: Redisson's RLock layout.
 *
 *   NAME                               hash: "<client id>:<owner>" -> count
 *   redisson_lock__channel:{NAME}      release publishes "0"
 *   redisson_lock_token:{NAME}         fencing counter (INCR)
 *   hilock_void:{NAME}                 attempts voided by a reconcile (set;
 *                                      exists only after connection trouble)
 */
#include <stdio.h>
#include <string.h>

#include "core/engine/lock_handle.h"
#include "core/transport/resp.h"
#include "kindkit/kindkit.h"
#include "layout/layout.h"


/* KEYS: name, token key, void set.  ARGV: lease ms, field, fenced (0/1),
 * known token, attempt nonce.  Replies {1, count, token} when held by
 * field now, {0, pttl} when held by another, {2} when the attempt was
 * voided. */
static const char acquire_lua[] =
    HL_LUA_FOREIGN HL_LUA_TOKEN HL_LUA_HOLD_CHECK
    "if redis.call('sismember', KEYS[3], ARGV[5]) == 1 then return {2} end\n"
    "local held = redis.call('hget', KEYS[1], ARGV[2])\n"
    "local refused = hold_refused(KEYS[1], held) or token_refused(KEYS[2])\n"
    "if refused then return refused end\n"
    "if not held and redis.call('exists', KEYS[1]) == 1 then\n"
    "  return {0, redis.call('pttl', KEYS[1])}\n"
    "end\n"
    "local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)\n"
    "redis.call('pexpire', KEYS[1], ARGV[1])\n"
    "return {1, count, token(KEYS[2], count)}\n";

/* KEYS: name, channel.  ARGV: message, lease ms, field.  Replies -1 when
 * field holds nothing, the count left when still held, 0 when freed. */
static const char release_lua[] =
    HL_LUA_ANNOUNCE
    "if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return -1 end\n"
    "local left = redis.call('hincrby', KEYS[1], ARGV[3], -1)\n"
    "if left > 0 then\n"
    "  redis.call('pexpire', KEYS[1], ARGV[2])\n"
    "  return left\n"
    "end\n"
    "redis.call('del', KEYS[1])\n"
    "announce(KEYS[2], ARGV[1])\n"
    "return answer(0)\n";

/* KEYS: name, channel.  ARGV: message.  Replies 1 when deleted. */
static const char force_lua[] =
    HL_LUA_ANNOUNCE
    "if redis.call('del', KEYS[1]) == 1 then\n"
    "  announce(KEYS[2], ARGV[1])\n"
    "  return answer(1)\n"
    "end\n"
    "return 0\n";

/* KEYS: name, channel, void set.  ARGV: field, expected count, message,
 * nonce of the attempt to void (or "").  Lowers the field's count to the
 * expected one; replies the count left. */
static const char reconcile_lua[] =
    "if ARGV[4] ~= '' then\n"
    "  redis.call('sadd', KEYS[3], ARGV[4])\n"
    "  redis.call('pexpire', KEYS[3], " HL_LAYOUT_VOID_TTL_MS_TEXT ")\n"
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
    "  redis.call('publish', KEYS[2], ARGV[3])\n"
    "end\n"
    "return 0\n";

/* KEYS: name, channel.  Replies the status of a hash kind (kindkit.h):
 * Redisson keeps no list of who waits for this lock; the subscribers of
 * its channel are the nearest thing.  On a cluster waiters subscribe to
 * the sharded channel, which servers before 7.0 do not know of. */
static const char status_lua[] =
    "local all = redis.call('hgetall', KEYS[1])\n"
    "local n = redis.call('pubsub', 'numsub', KEYS[2])[2]\n"
    "local s = redis.pcall('pubsub', 'shardnumsub', KEYS[2])\n"
    "if type(s) == 'table' and not s.err then n = n + s[2] end\n"
    "return {redis.call('pttl', KEYS[1]), all, {}, n, 0}\n";

static hl_script acquire_script, release_script, force_script,
    reconcile_script, status_script;

static int attempt(hilock_lock *lock, const hl_attempt_args *a,
                   hl_request_fn *fn, void *data)
{
    hl_conn *conn = hl_lock_conn(lock);
    if (conn == NULL)
        return HILOCK_ECLOSED;
    if (hl_check_name_slot(lock) != HILOCK_OK)
        return HILOCK_EINVAL;
    static const char *const prefixes[] = {HL_LAYOUT_TOKEN, HL_LAYOUT_VOID};
    hl_aux_name k[2]; /* fencing counter, void set */
    if (hl_lock_keys(lock, 2, prefixes, k) != 0)
        return HILOCK_ENOMEM;
    char lease[24], token[24];
    size_t lease_len = hl_i64_dec(lease, a->lease_ms);
    size_t token_len = hl_u64_dec(token, a->known_token);
    const char *argv[] = {lock->name, k[0].s,   k[1].s,
                          lease,      a->field, a->fenced ? "1" : "0",
                          token,      a->nonce};
    size_t lens[] = {lock->name_len, k[0].len,     k[1].len,
                     lease_len,      a->field_len, 1,
                     token_len,      a->nonce_len};
    int rc = hl_script_run(conn, &acquire_script, 3, 8, argv, lens, fn, data);
    hl_aux_names_done(2, k);
    return rc;
}

/* Run a script with KEYS name and channel and ARGV the release message
 * followed by extra arguments. */
static int run_with_channel(hilock_lock *lock, const hl_script *script,
                            int nextra, const char *const *extra,
                            const size_t *extra_lens, hl_request_fn *fn,
                            void *data)
{
    hl_conn *conn = hl_lock_conn(lock);
    if (conn == NULL)
        return HILOCK_ECLOSED;
    hl_aux_name ch;
    if (hl_lock_channel(lock, &ch) != 0)
        return HILOCK_ENOMEM;
    const char *argv[3 + 2] = {lock->name, ch.s, HL_LAYOUT_MSG_UNLOCK};
    size_t lens[3 + 2] = {lock->name_len, ch.len,
                          sizeof HL_LAYOUT_MSG_UNLOCK - 1};
    for (int i = 0; i < nextra; i++) {
        argv[3 + i] = extra[i];
        lens[3 + i] = extra_lens[i];
    }
    int rc = hl_script_run(conn, script, 2, 3 + nextra, argv, lens, fn,
                           data);
    hl_aux_name_done(&ch);
    return rc;
}

static int release(hilock_lock *lock, const char *field, size_t field_len,
                   int64_t lease_ms, hl_request_fn *fn, void *data)
{
    char lease[24];
    const char *extra[] = {lease, field};
    size_t lens[] = {hl_i64_dec(lease, lease_ms), field_len};
    return run_with_channel(lock, &release_script, 2, extra, lens, fn, data);
}

static int force_release(hilock_lock *lock, hl_request_fn *fn, void *data)
{
    return run_with_channel(lock, &force_script, 0, NULL, NULL, fn, data);
}

static int reconcile(hilock_lock *lock, const char *field, size_t field_len,
                     int64_t expected, const char *nonce, size_t nonce_len,
                     hl_request_fn *fn, void *data)
{
    hl_conn *conn = hl_lock_conn(lock);
    if (conn == NULL)
        return HILOCK_ECLOSED;
    static const char *const prefixes[] = {NULL, HL_LAYOUT_VOID};
    hl_aux_name k[2]; /* channel, void set */
    if (hl_lock_keys(lock, 2, prefixes, k) != 0)
        return HILOCK_ENOMEM;
    char want[24];
    size_t want_len = hl_i64_dec(want, expected);
    const char *argv[] = {lock->name, k[0].s, k[1].s, field,
                          want,       HL_LAYOUT_MSG_UNLOCK, nonce};
    size_t lens[] = {lock->name_len, k[0].len, k[1].len, field_len,
                     want_len, sizeof HL_LAYOUT_MSG_UNLOCK - 1, nonce_len};
    int rc = hl_script_run(conn, &reconcile_script, 3, 7, argv, lens, fn,
                           data);
    hl_aux_names_done(2, k);
    return rc;
}

static int status(hilock_lock *lock, hl_request_fn *fn, void *data)
{
    static const char *const keys[] = {NULL};
    return hl_run_lock_script(lock, &status_script, 1, keys, 0, NULL, NULL,
                              fn, data);
}

static int parse_status(hilock_reply *reply, hilock_lock_status **out)
{
    return hl_hash_parse_status(reply, "reentrant", false, out);
}

static const hl_kind reentrant_kind = {
    .name = "reentrant",
    .channel = hl_lock_channel_of,
    .hand_on = true,
    .queue_locally = true,
    .attempt = attempt,
    .parse_attempt = hl_parse_acquire_reply,
    .release = release,
    .parse_release = hl_parse_release_reply,
    .force_release = force_release,
    .reconcile = reconcile,
    .renew = &hl_hash_renew,
    .query = hl_hash_query,
    .parse_query = hl_hash_parse_query,
    .status = status,
    .parse_status = parse_status,
};

static pthread_once_t scripts_once = PTHREAD_ONCE_INIT;

static void init_scripts(void)
{
    hl_script_init(&acquire_script, acquire_lua);
    hl_script_init(&release_script, release_lua);
    hl_script_init(&force_script, force_lua);
    hl_hash_renew_init();
    hl_script_init(&reconcile_script, reconcile_lua);
    hl_script_init(&status_script, status_lua);
}

int hilock_lock_create(hilock_lock **out, hilock_client *client,
                       const char *name, size_t name_len)
{
    pthread_once(&scripts_once, init_scripts);
    return hl_lock_create(out, client, &reentrant_kind, name, name_len);
}
