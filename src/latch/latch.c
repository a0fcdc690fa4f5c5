/* The count-down latch: its handle, its scripts, and the calls that are
 * one request each (try-set, count down, count, delete).  Await, which
 * waits, is in await.c. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/base/handle.h"
#include "core/engine/again.h"
#include "core/engine/compose.h"
#include "kindkit/kind_mark.h"
#include "kindkit/kindkit.h"
#include "kindkit/script_registry.h"
#include "latch/latch_kind.h"
#include "layout/layout.h"
#include "core/base/cname.h"

/* Each script is Redisson's latch step, with the wake-up published
 * through announce(), so that a PUBLISH the server's ACL refuses does not
 * turn a done step into an error.  KEYS: the name, the channel.
 *
 * A count is a 64-bit integer in Redis, and Lua's numbers are doubles,
 * exact only below 2^53: a script answers a count as text, which the
 * client reads exactly (hl_i64_parse).  A count that is no decimal
 * integer of 64 bits, or is negative (Redisson's count down deletes the
 * latch at zero), was written by neither hilock nor Redisson: the script
 * answers foreign() before it changes anything, and the call fails with
 * HILOCK_EPROTO. */
#define LATCH_WHAT "a latch count"

/* The count at the name, as text, in stored (false: none); a count that
 * no client of the layout writes ends the script. */
#define LATCH_LUA_CHECK                                                     \
    HL_LUA_FOREIGN                                                          \
    "local stored = redis.call('get', KEYS[1])\n"                           \
    "if stored and (not is_int(stored) or\n"                                \
    "               string.sub(stored, 1, 1) == '-') then\n"                \
    "  return foreign(KEYS[1], stored, '" LATCH_WHAT "')\n"                 \
    "end\n"

/* Replies the count, as text, or 0 when there is no latch. */
static const char count_lua[] =
    LATCH_LUA_CHECK
    "return stored or 0\n";

static const char set_lua[] =
    HL_LUA_ANNOUNCE
    "if redis.call('exists', KEYS[1]) == 1 then return 0 end\n"
    "redis.call('set', KEYS[1], ARGV[1])\n"
    "announce(KEYS[2], '" HL_LAYOUT_MSG_LATCH_NEW_COUNT "')\n"
    "return answer(1)\n";

/* A count down below zero (no latch) deletes what DECR made of nothing,
 * as Redisson's does, and replies -1, which the caller reads as 0; only
 * the step that reaches zero wakes waiters.  Replies the count left: DECR's own answer below 2^53, where a Lua
 * number is exact, else the text at the name.  DECR reads the count as
 * LATCH_LUA_CHECK would, and refuses what is no 64-bit integer; a
 * negative count, which it takes one lower, it gets back at once, and
 * the script refuses it, so that a count down costs the one command. */
static const char down_lua[] =
    HL_LUA_ANNOUNCE HL_LUA_FOREIGN
    "local function refuse()\n"
    "  return foreign(KEYS[1], redis.call('get', KEYS[1]), '" LATCH_WHAT
    "')\n"
    "end\n"
    "local v = redis.pcall('decr', KEYS[1])\n"
    /* Only a value that is no count is foreign; a refusal of the write
     * itself (a replica's READONLY, OOM, an ACL) goes back as it came. */
    "if type(v) == 'table' then\n"
    "  local e = v.err or ''\n"
    "  if not (string.find(e, 'WRONGTYPE', 1, true) or\n"
    "          string.find(e, 'integer', 1, true) or\n"
    "          string.find(e, 'overflow', 1, true)) then return v end\n"
    "  return refuse()\n"
    "end\n"
    "if v < -1 then\n"
    "  redis.call('incr', KEYS[1])\n"
    "  return refuse()\n"
    "end\n"
    "if v > 0 then\n"
    "  if v < 2^53 then return v end\n"
    "  return redis.call('get', KEYS[1])\n"
    "end\n"
    "redis.call('del', KEYS[1])\n"
    "if v < 0 then return -1 end\n"
    "announce(KEYS[2], '" HL_LAYOUT_MSG_LATCH_ZERO "')\n"
    "return answer(0)\n";

static const char delete_lua[] =
    HL_LUA_ANNOUNCE
    "if redis.call('del', KEYS[1]) == 0 then return 0 end\n"
    "announce(KEYS[2], '" HL_LAYOUT_MSG_LATCH_NEW_COUNT "')\n"
    "return answer(1)\n";

static hl_script set_script, down_script, delete_script, count_script;

static const hl_script_def count_def = {
    .what = "latch count",
    .body = count_lua,
    .script = &count_script,
    HL_DEF_KEYS(hl_key_name),
};

static const hl_script_def set_def = {
    .what = "latch try-set",
    .body = set_lua,
    .script = &set_script,
    HL_DEF_KEYS(hl_key_name, hl_key_channel),
};

static const hl_script_def down_def = {
    .what = "latch count down",
    .body = down_lua,
    .script = &down_script,
    HL_DEF_KEYS(hl_key_name, hl_key_channel),
};

static const hl_script_def delete_def = {
    .what = "latch delete",
    .body = delete_lua,
    .script = &delete_script,
    HL_DEF_KEYS(hl_key_name, hl_key_channel),
};

const hl_script_def *const hl_latch_script_defs[] = {
    &count_def, &set_def, &down_def, &delete_def, NULL};

static pthread_once_t scripts_once = PTHREAD_ONCE_INIT;

static void init_scripts(void) { hl_script_defs_init(hl_latch_script_defs); }

int hl_latch_channel(const hilock_lock *lock, hl_aux_name *out)
{
    return hl_layout_latch_channel(out, lock->name, lock->name_len) == 0
               ? 0
               : HILOCK_ENOMEM;
}

int hl_latch_check_slot(const hilock_lock *lock)
{
    /* The channel's hash tag is NAME up to its first '}': NAME's own
     * slot exactly when NAME holds no '}' (a '{' alone gives the key no
     * tag either).  A script naming both would fail with CROSSSLOT. */
    if (!hl_lock_on_cluster(lock) ||
        memchr(lock->name, '}', lock->name_len) == NULL)
        return HILOCK_OK;
    return hl_fail(HILOCK_EINVAL,
                   "on a Redis Cluster a latch name must not hold '}': "
                   "Redisson's latch channel for it would lie in another "
                   "slot than the latch");
}

int hl_latch_read(hilock_lock *lock, hl_request_fn *fn, void *data)
{
    return hl_run_lock_def(lock, &count_def, 0, NULL, NULL, fn, data);
}

int hl_latch_parse_count(const hilock_reply *r, int64_t *count)
{
    int64_t v;
    if (!hl_reply_i64(r, &v) || v < 0)
        return HILOCK_EPROTO;
    *count = v;
    return HILOCK_OK;
}

/* ---- handle ------------------------------------------------------------ */

int hilock_latch_create_n(hilock_latch **out, hilock_client *client,
                          const char *name, size_t name_len)
{
    if (out == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    pthread_once(&scripts_once, init_scripts);
    hilock_lock *lock = NULL;
    int rc = hl_lock_create(&lock, client, &hl_latch_kind, name, name_len);
    *out = (hilock_latch *)lock;
    return rc;
}

int hilock_latch_create(hilock_latch **out, hilock_client *client,
                        const char *name)
{
    return hilock_latch_create_n(out, client, name, hl_cname_len(name));
}

int hilock_latch_destroy(hilock_latch *latch)
{
    /* Pending awaits are the handle's acquires: they end with
     * HILOCK_ECANCELED as it goes. */
    return hilock_lock_destroy(hl_latch_lock(latch));
}

int hilock_latch_cancel(hilock_latch *latch, uint64_t op_id)
{
    return hilock_lock_cancel(hl_latch_lock(latch), op_id);
}

const char *hilock_latch_name(const hilock_latch *latch, size_t *name_len)
{
    return hilock_lock_name(hl_latch_lock(latch), name_len);
}

/* ---- one-request calls ------------------------------------------------- */

typedef enum call_what { CALL_SET, CALL_DOWN, CALL_COUNT, CALL_DELETE } call_what;

typedef struct latch_call {
    hl_op op; /* first */
    hilock_lock *lock;
    call_what what;
    /* A write a demoted master refused, made again on the next. */
    hl_again again;
    char count[24];
    size_t count_len;
    hilock_latch_cb *cb; /* NULL: a blocking caller waits */
    void *user_data;
} latch_call;

/* A script's reply is v, or {v, refusal} when the server's ACL refused
 * its PUBLISH after the step was done: the step stands. */
static bool script_value(hilock_client *client, const hilock_reply *r,
                         int64_t *v)
{
    return hl_reply_i64(hl_script_answer(client, r), v);
}

static void on_reply(void *data, int status, hilock_reply *reply)
{
    latch_call *call = data;
    /* Refused by a demoted master, it did not run: made again there, as
     * a lock's release is; a count down lost would keep the latch shut. */
    if (call->what != CALL_COUNT && status == HILOCK_EREDIS &&
        hl_again_after_refusal(&call->again, call->lock,
                               reply ? reply->str : NULL)) {
        hilock_reply_free(reply);
        return;
    }
    if (status != HILOCK_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s",
                 reply && reply->str ? reply->str : hilock_last_error());
        hilock_reply_free(reply);
        hl_op_done(&call->op, status, 0, NULL, why);
        return;
    }
    /* A count no client of the layout writes, refused by the script, as
     * its words. */
    char foreign[HL_FOREIGN_DETAIL_MAX];
    bool refused = hl_foreign_detail(reply, foreign, sizeof foreign);
    int64_t v = 0;
    int rc = refused ? HILOCK_EPROTO
             : call->what == CALL_COUNT ? hl_latch_parse_count(reply, &v)
             : script_value(call->lock->client, reply, &v) ? HILOCK_OK
                                                          : HILOCK_EPROTO;
    hilock_reply_free(reply);
    /* A count down of nothing opened nothing: no word that it did. */
    bool nothing = rc == HILOCK_OK && call->what == CALL_DOWN && v < 0;
    if (nothing)
        v = 0;
    /* Word that the latch was set here, for as long as it counts, or
     * opened here, for a day (HL_LAYOUT_KIND): should it be lost, an
     * await that asks whether the latch was ever set takes it for a name
     * never set, which waits rather than runs early. */
    if (rc == HILOCK_OK && call->what == CALL_SET && v == 1)
        hl_kind_mark(call->lock, HL_LAYOUT_KIND_LATCH, NULL);
    else if (rc == HILOCK_OK &&
             ((call->what == CALL_DOWN && !nothing && v == 0) ||
              (call->what == CALL_DELETE && v == 1)))
        hl_kind_mark(call->lock, HL_LAYOUT_KIND_LATCH,
                     HL_LAYOUT_KIND_AFTER_S);
    hl_op_done(&call->op, rc, rc == HILOCK_OK ? v : 0, NULL,
               rc == HILOCK_OK ? NULL
               : refused       ? foreign
                               : "unexpected reply from a latch script");
}

static int send_script(void *ctx, hl_request_fn *fn, void *data)
{
    latch_call *call = ctx;
    const hl_script_def *def = call->what == CALL_SET    ? &set_def
                               : call->what == CALL_DOWN ? &down_def
                                                         : &delete_def;
    const char *args[1] = {call->count};
    size_t lens[1] = {call->count_len};
    return hl_run_lock_def(call->lock, def, call->what == CALL_SET ? 1 : 0,
                           args, lens, fn, data);
}

static void call_start(hl_op *op)
{
    latch_call *call = (latch_call *)op;
    hilock_lock *lock = call->lock;
    if (hl_lock_conn(lock) == NULL || lock->destroyed) {
        hl_op_done(op, lock->destroyed ? HILOCK_ECANCELED : HILOCK_ECLOSED,
                   0, NULL,
                   lock->destroyed ? "latch handle destroyed"
                                   : "client closed");
        return;
    }
    int rc;
    _Atomic int *gate = hl_op_gate_requests(op);
    if (call->what == CALL_COUNT) {
        rc = hl_latch_read(lock, on_reply, call);
    } else {
        rc = hl_latch_check_slot(lock);
        if (rc != HILOCK_OK) {
            hl_conn_gate_requests(gate);
            hl_op_done(op, rc, 0, NULL, hilock_last_error());
            return;
        }
        /* With the WAIT the replica policy asks for: a count down a
         * failover loses would keep the latch shut for good. */
        rc = hl_lock_write(lock, send_script, call, on_reply, call);
    }
    hl_conn_gate_requests(gate);
    if (rc != HILOCK_OK)
        hl_op_done(op, rc, 0, NULL, hl_send_failure(rc));
}

static void call_again(void *data)
{
    call_start(&((latch_call *)data)->op);
}

/* Only at the client's close: a write waiting to be made again ends; a
 * request in flight ends by itself. */
static void call_cancel(hl_op *op, int status)
{
    latch_call *call = (latch_call *)op;
    if (hl_again_stop(&call->again))
        hl_op_done(op, status, 0, NULL, HL_AGAIN_CLOSED("write"));
}

static void call_complete(hl_op *op)
{
    latch_call *call = (latch_call *)op;
    call->cb((hilock_latch *)call->lock, op->status, op->value,
             call->user_data);
}

static void call_destroy(hl_op *op)
{
    latch_call *call = (latch_call *)op;
    hl_lock_unref(call->lock);
    hl_free(call);
}

static const hl_op_type latch_call_type = {
    .start = call_start,
    .cancel = call_cancel,
    .complete = call_complete,
    .destroy = call_destroy,
    .bounded = true,
    .withdrawable = true,
};

static int check_count(int64_t count)
{
    if (count < 1)
        return hl_fail(HILOCK_EINVAL,
                       "a latch counts from 1: count %lld refused",
                       (long long)count);
    if (count > HILOCK_LATCH_MAX_COUNT)
        return hl_fail(HILOCK_EINVAL,
                       "count %lld is too large: at most %lld",
                       (long long)count, (long long)HILOCK_LATCH_MAX_COUNT);
    return HILOCK_OK;
}

static int call_run(hilock_latch *latch, call_what what, int64_t count,
                    hilock_latch_cb *cb, void *user_data, int64_t *value)
{
    hl_clear_detail();
    hilock_lock *lock = hl_latch_lock(latch);
    hilock_client *c = hl_lock_client_get(lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "client closed");
    latch_call *call = hl_calloc(1, sizeof *call);
    if (call == NULL) {
        hl_client_unref(c);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    hl_op_init(&call->op, &latch_call_type);
    hl_again_init(&call->again, lock, call_again, call);
    call->lock = lock;
    call->what = what;
    call->count_len = (size_t)snprintf(call->count, sizeof call->count,
                                       "%lld", (long long)count);
    call->cb = cb;
    call->user_data = user_data;
    hl_lock_ref(lock);
    int rc;
    if (cb == NULL)
        rc = hl_op_run_blocking(c, &call->op, hl_client_blocking_limit_us(c, 0),
                                value, NULL);
    else
        rc = hl_op_submit_or_drop(c, &call->op);
    hl_client_unref(c);
    return rc;
}

int hilock_latch_was_set(hilock_latch *latch, bool *seen)
{
    if (latch == NULL || seen == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    *seen = false;
    hilock_lock *lock = hl_latch_lock(latch);
    hilock_client *c = hl_lock_client_get(lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "client closed");
    const char *kind = NULL;
    int rc = hilock_client_name_kind_n(c, lock->name, lock->name_len, &kind);
    hl_client_unref(c);
    *seen = kind != NULL && strcmp(kind, HL_LAYOUT_KIND_LATCH) == 0;
    return rc;
}

int hilock_latch_try_set_count(hilock_latch *latch, int64_t count, bool *set)
{
    if (set != NULL)
        *set = false;
    if (latch == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL latch");
    int rc = check_count(count);
    int64_t v = 0;
    if (rc == HILOCK_OK)
        rc = call_run(latch, CALL_SET, count, NULL, NULL, &v);
    if (rc == HILOCK_OK && set != NULL)
        *set = v == 1;
    return rc;
}

int hilock_latch_count_down(hilock_latch *latch, int64_t *left)
{
    if (left != NULL)
        *left = 0;
    if (latch == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL latch");
    int64_t v = 0;
    int rc = call_run(latch, CALL_DOWN, 0, NULL, NULL, &v);
    if (rc == HILOCK_OK && left != NULL)
        *left = v;
    return rc;
}

int hilock_latch_count(hilock_latch *latch, int64_t *count)
{
    if (count != NULL)
        *count = 0;
    if (latch == NULL || count == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    return call_run(latch, CALL_COUNT, 0, NULL, NULL, count);
}

int hilock_latch_delete(hilock_latch *latch, bool *deleted)
{
    if (deleted != NULL)
        *deleted = false;
    if (latch == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL latch");
    int64_t v = 0;
    int rc = call_run(latch, CALL_DELETE, 0, NULL, NULL, &v);
    if (rc == HILOCK_OK && deleted != NULL)
        *deleted = v == 1;
    return rc;
}

int hilock_latch_try_set_count_async(hilock_latch *latch, int64_t count,
                                     hilock_latch_cb *cb, void *user_data)
{
    if (latch == NULL || cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    int rc = check_count(count);
    return rc != HILOCK_OK ? rc
                           : call_run(latch, CALL_SET, count, cb, user_data,
                                      NULL);
}

int hilock_latch_count_down_async(hilock_latch *latch, hilock_latch_cb *cb,
                                  void *user_data)
{
    if (latch == NULL || cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    return call_run(latch, CALL_DOWN, 0, cb, user_data, NULL);
}

int hilock_latch_count_async(hilock_latch *latch, hilock_latch_cb *cb,
                             void *user_data)
{
    if (latch == NULL || cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    return call_run(latch, CALL_COUNT, 0, cb, user_data, NULL);
}

int hilock_latch_delete_async(hilock_latch *latch, hilock_latch_cb *cb,
                              void *user_data)
{
    if (latch == NULL || cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    return call_run(latch, CALL_DELETE, 0, cb, user_data, NULL);
}

int hilock_latch_await(hilock_latch *latch, int64_t wait_ms, bool *opened)
{
    if (opened != NULL)
        *opened = false;
    if (latch == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL latch");
    return hl_latch_await_start(latch, wait_ms, NULL, NULL, opened, NULL);
}

int hilock_latch_await_async(hilock_latch *latch, int64_t wait_ms,
                             hilock_latch_cb *cb, void *user_data,
                             uint64_t *op_id)
{
    if (latch == NULL || cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    return hl_latch_await_start(latch, wait_ms, cb, user_data, NULL, op_id);
}
