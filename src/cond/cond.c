/* A condition variable bound to a lock (include/hilock/cond.h), for
 * reentrant and fair locks; its keys are in kindkit/cond_lua.h.
 *
 * A wait is three steps, each a request of its own: the kind's release
 * into the condition's line (one script: the waiter is in line before
 * the lock is free, so a signal sent after the release finds it), a
 * sleep until the waiter learns it was signalled, and an acquire of the
 * engine with what is left of the time.  The waiter learns of its signal
 * from its poll script, which is sent once the client's channel for the
 * condition is confirmed, at every message there naming it, and every
 * third of the waiter timeout (which renews its place); a message alone
 * may be lost, the record the signal left may not.  A signalled waiter
 * that does not take its signal in time (dead, or cut off) has it passed
 * on by the next poll or signal of anyone; so does a waiter that times
 * out, is cancelled, or fails to take the lock again. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/cname.h"
#include "core/base/error_detail.h"
#include "core/base/monotime.h"
#include "core/engine/compose.h"
#include "core/engine/lock_handle.h"
#include "core/transport/resp.h"
#include "hilock/cond.h"
#include "kindkit/kindkit.h"
#include "kindkit/script_registry.h"
#include "layout/layout.h"

/* KEYS of every script here: line, alive, signaled, wake base. */
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
    "redis.call('lrem', KEYS[1], 1, ARGV[1])\n"
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

/* ---- the handle ---------------------------------------------------------- */

typedef struct cond_wait cond_wait;

struct hilock_cond {
    hilock_lock *lock; /* referenced */
    /* line, alive, signaled, wake base: the scripts' KEYS. */
    hl_aux_name keys[4];
    char *channel; /* the wake base and ":<client id>": this client's */
    size_t channel_len;
    atomic_int refs;
    atomic_bool destroyed;
    /* Waits not ended, for cancel by id from any thread; the loop thread
     * alone adds and removes, under the mutex. */
    pthread_mutex_t mutex;
    cond_wait *waits;
    /* Loop thread: the channel, subscribed while any wait is in line. */
    hl_sub sub;
    bool ready;
    size_t name_len;
    char name[];
};

static void cond_ref(hilock_cond *c) { atomic_fetch_add(&c->refs, 1); }

static void cond_unref(hilock_cond *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    hl_aux_names_done(4, c->keys);
    hl_free(c->channel);
    pthread_mutex_destroy(&c->mutex);
    hl_lock_unref(c->lock);
    hl_free(c);
}

static int run_cond_def(hilock_cond *c, const hl_script_def *def, int nargs,
                        const char *const *args, const size_t *lens,
                        hl_request_fn *fn, void *data)
{
    const char *given[4];
    size_t given_lens[4];
    for (int i = 0; i < 4; i++) {
        given[i] = c->keys[i].s;
        given_lens[i] = c->keys[i].len;
    }
    return hl_run_def(c->lock, def, 4, given, given_lens, nargs, args, lens,
                      fn, data);
}

int hilock_cond_create_n(hilock_cond **out, hilock_lock *lock,
                         const char *name, size_t name_len)
{
    hl_clear_detail();
    if (out != NULL)
        *out = NULL;
    if (out == NULL || lock == NULL || name == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    if (name_len == 0 || name_len > HILOCK_COND_MAX_NAME_LEN)
        return hl_fail(HILOCK_EINVAL, "a condition's name is 1..%d bytes",
                       HILOCK_COND_MAX_NAME_LEN);
    if (lock->kind->release_into_cond == NULL)
        return hl_fail(HILOCK_EINVAL, "a condition cannot wait on a %s "
                                      "lock: only on a reentrant or a fair "
                                      "one",
                       lock->kind->name);
    hilock_client *client = hl_lock_client_get(lock);
    if (client == NULL)
        return hl_fail(HILOCK_ECLOSED, "the lock's client is closed");
    pthread_once(&scripts_once, init_scripts);
    hilock_cond *c = hl_calloc(1, sizeof *c + name_len + 1);
    if (c == NULL) {
        hl_client_unref(client);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    memcpy(c->name, name, name_len);
    c->name_len = name_len;
    static const char *const prefixes[4] = {
        HL_LAYOUT_COND_LINE, HL_LAYOUT_COND_ALIVE, HL_LAYOUT_COND_SIGNALED,
        HL_LAYOUT_COND_WAKE};
    int made = 0, rc = 0;
    for (; made < 4 && rc == 0; made++)
        rc = hl_layout_key(&c->keys[made], prefixes[made], lock->name,
                           lock->name_len, name, name_len);
    const char *id = rc == 0 ? hl_lock_client_id(lock) : NULL;
    if (rc == 0) {
        c->channel_len = c->keys[3].len + 1 + HILOCK_CLIENT_ID_LEN;
        c->channel = hl_malloc(c->channel_len + 1);
        if (c->channel != NULL)
            snprintf(c->channel, c->channel_len + 1, "%s:%.*s", c->keys[3].s,
                     HILOCK_CLIENT_ID_LEN, id);
    }
    hl_client_unref(client);
    if (rc != 0 || c->channel == NULL) {
        hl_aux_names_done(made, c->keys);
        hl_free(c->channel);
        hl_free(c);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    atomic_init(&c->refs, 1);
    atomic_init(&c->destroyed, false);
    pthread_mutex_init(&c->mutex, NULL);
    c->lock = lock;
    hl_lock_ref(lock);
    *out = c;
    return HILOCK_OK;
}

int hilock_cond_create(hilock_cond **out, hilock_lock *lock, const char *name)
{
    return hilock_cond_create_n(out, lock, name, hl_cname_len(name));
}

const char *hilock_cond_name(const hilock_cond *cond, size_t *name_len)
{
    if (cond == NULL)
        return NULL;
    if (name_len != NULL)
        *name_len = cond->name_len;
    return cond->name;
}

/* ---- a wait -------------------------------------------------------------- */

typedef enum wait_state {
    W_RELEASING, /* the release into the line is out */
    W_WAITING,   /* in line, between polls */
    W_POLLING,   /* a poll is out */
    W_ACQUIRING, /* signalled: taking the lock again */
    W_LEAVING,   /* the leave is out, then the end */
    W_DONE
} wait_state;

struct cond_wait {
    hl_op op; /* first */
    hilock_cond *cond;
    cond_wait *next; /* in cond->waits */
    uint64_t owner;
    hl_monotime deadline; /* INT64_MAX: none */
    int64_t lease_ms;     /* the hold's, for taking it again */
    bool fenced;
    hilock_cond_wait_cb *cb; /* NULL: a blocking caller waits */
    void *user_data;
    wait_state state;
    bool listed;
    bool poll_again;  /* woken while a poll was out */
    int end_status;   /* a cancel's, to end with once the leave is back */
    int requests;     /* requests out naming the op */
    bool finished;
    bool let_go; /* the home loop's reference is dropped */
    uint64_t acquire_id;
    uint64_t token;
    hl_timer timer;
    hl_cond_entry entry;
    char id[HILOCK_CLIENT_ID_LEN + 24];
};

static void wait_list(cond_wait *w)
{
    hilock_cond *c = w->cond;
    pthread_mutex_lock(&c->mutex);
    w->next = c->waits;
    c->waits = w;
    w->listed = true;
    pthread_mutex_unlock(&c->mutex);
}

static void wait_unlist(cond_wait *w)
{
    hilock_cond *c = w->cond;
    if (!w->listed)
        return;
    pthread_mutex_lock(&c->mutex);
    for (cond_wait **p = &c->waits; *p != NULL; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            break;
        }
    }
    w->listed = false;
    bool none = c->waits == NULL;
    pthread_mutex_unlock(&c->mutex);
    if (none) {
        hl_pubsub_unsubscribe(&c->sub);
        c->ready = false;
    }
}

/* The home loop lets go of the op once it finished and no request names
 * it any more. */
static void wait_release_if_idle(cond_wait *w)
{
    if (w->finished && w->requests == 0 && !w->let_go) {
        w->let_go = true;
        hl_op_unref(&w->op);
    }
}

static void wait_finish(cond_wait *w, int status, const char *detail)
{
    if (w->state == W_DONE)
        return;
    w->state = W_DONE;
    hl_timer_stop(&w->timer);
    wait_unlist(w);
    hl_op_park(&w->op, false);
    hl_op_finish(&w->op, status, (int64_t)w->token, NULL, detail);
    w->finished = true;
    wait_release_if_idle(w);
}

static int64_t waiter_timeout(const cond_wait *w)
{
    return hl_lock_waiter_timeout_ms(w->cond->lock);
}

static void on_left(void *data, int status, hilock_reply *reply)
{
    cond_wait *w = data;
    w->requests--;
    hilock_reply_free(reply);
    (void)status; /* unanswered, the place runs out by itself */
    if (w->state == W_DONE) {
        wait_release_if_idle(w);
        return;
    }
    wait_finish(w, w->end_status,
                w->end_status == HILOCK_ETIMEDOUT
                    ? "not signalled in time; the lock is not held"
                    : "the wait ended; the lock is not held");
}

/* Leave the line (a signal taken passes on), then end with status. */
static void wait_leave(cond_wait *w, int status)
{
    w->state = W_LEAVING;
    w->end_status = status;
    hl_timer_stop(&w->timer);
    char wt[24];
    const char *args[] = {w->id, wt};
    size_t lens[] = {strlen(w->id), hl_i64_dec(wt, waiter_timeout(w))};
    if (run_cond_def(w->cond, &leave_def, 2, args, lens, on_left, w) ==
        HILOCK_OK)
        w->requests++;
    else
        wait_finish(w, status, "the wait ended; the lock is not held (its "
                               "place in line runs out by itself)");
}

/* A signal taken but not used: the next waiter gets one, nobody waits
 * for the answer. */
static void pass_signal_on(cond_wait *w)
{
    char wt[24];
    const char *args[] = {"1", wt};
    size_t lens[] = {1, hl_i64_dec(wt, waiter_timeout(w))};
    (void)run_cond_def(w->cond, &signal_def, 2, args, lens, NULL, NULL);
}

static void on_given_back(hilock_lock *lock, int status, int64_t value,
                          void *user_data)
{
    (void)lock, (void)status, (void)value, (void)user_data;
}

/* A grant that won the race against a cancel is the caller's: the wait
 * ends with it held, as an acquire's cancel does. */
static void on_acquired(hilock_lock *lock, int status,
                        const hilock_acquired *got, void *user_data)
{
    cond_wait *w = user_data;
    w->requests--;
    if (w->state == W_DONE) {
        /* Ended meanwhile: nobody takes the hold. */
        if (status == HILOCK_OK)
            (void)hl_release_owner(lock, w->owner, on_given_back, NULL);
        wait_release_if_idle(w);
        return;
    }
    if (status == HILOCK_OK) {
        w->token = got ? got->token : 0;
        wait_finish(w, HILOCK_OK, NULL);
        return;
    }
    pass_signal_on(w);
    int end = w->end_status != 0      ? w->end_status
              : status == HILOCK_EBUSY ? HILOCK_ETIMEDOUT
                                       : status;
    wait_finish(w, end,
                end == HILOCK_ETIMEDOUT
                    ? "signalled, but the lock was not taken again in "
                      "time; the signal passed on, and the lock is not "
                      "held"
                    : hilock_last_error());
}

static int64_t wait_left_ms(const cond_wait *w)
{
    if (w->deadline == INT64_MAX)
        return HILOCK_WAIT_FOREVER;
    hl_monotime left = w->deadline - hl_monotime_now();
    return left <= 0 ? 0 : (left + 999) / 1000;
}

static void wait_reacquire(cond_wait *w)
{
    w->state = W_ACQUIRING;
    hl_timer_stop(&w->timer);
    hl_op_park(&w->op, false);
    int64_t lease = w->lease_ms > 0 ? w->lease_ms : HILOCK_LEASE_WATCHDOG;
    int rc = hl_acquire(w->cond->lock, w->owner, wait_left_ms(w), lease,
                        w->fenced ? HILOCK_ACQUIRE_FENCED : 0, on_acquired,
                        w, &w->acquire_id, NULL);
    if (rc == HILOCK_OK) {
        w->requests++;
        return;
    }
    pass_signal_on(w);
    wait_finish(w, rc, hilock_last_error());
}

static void wait_poll(cond_wait *w);

static void on_polled(void *data, int status, hilock_reply *reply)
{
    cond_wait *w = data;
    w->requests--;
    const hilock_reply *r =
        status == HILOCK_OK ? hl_script_answer(w->op.home, reply) : NULL;
    long long said = r && r->type == HILOCK_REPLY_INTEGER ? r->integer : -1;
    hilock_reply_free(reply);
    if (w->state == W_DONE) {
        if (said == 1)
            pass_signal_on(w); /* taken after the wait ended */
        wait_release_if_idle(w);
        return;
    }
    if (w->state == W_LEAVING) {
        if (said == 1)
            pass_signal_on(w); /* taken just before the leave */
        return;
    }
    w->state = W_WAITING;
    if (said == 1 || said == 2) {
        wait_reacquire(w);
        return;
    }
    if (w->poll_again) {
        w->poll_again = false;
        wait_poll(w);
    }
}

static void wait_poll(cond_wait *w)
{
    if (w->state == W_POLLING) {
        w->poll_again = true;
        return;
    }
    if (w->state != W_WAITING)
        return;
    char wt[24];
    const char *args[] = {w->id, wt};
    size_t lens[] = {strlen(w->id), hl_i64_dec(wt, waiter_timeout(w))};
    if (run_cond_def(w->cond, &poll_def, 2, args, lens, on_polled, w) ==
        HILOCK_OK) {
        w->requests++;
        w->state = W_POLLING;
    }
    /* Not sent (the client closing or out of memory): the timer tries
     * again. */
}

/* Every third of the waiter timeout a poll renews the place; the
 * deadline ends the wait. */
static void wait_arm(cond_wait *w)
{
    hl_monotime every = hl_after_ms(0, waiter_timeout(w) / 3);
    hl_monotime now = hl_monotime_now();
    hl_monotime to_deadline =
        w->deadline == INT64_MAX ? INT64_MAX : w->deadline - now;
    hl_timer_arm(&w->timer, to_deadline < every ? to_deadline : every);
}

static void on_timer(hl_timer *t)
{
    cond_wait *w = t->data;
    if (w->state != W_WAITING && w->state != W_POLLING)
        return;
    if (w->deadline != INT64_MAX && hl_monotime_now() >= w->deadline) {
        wait_leave(w, HILOCK_ETIMEDOUT);
        return;
    }
    wait_poll(w);
    wait_arm(w);
}

/* The condition's channel: a message names a signalled waiter of this
 * client; a confirmation (again after a reconnect) may follow messages
 * lost meanwhile, so every waiter looks. */
static void on_channel(hl_sub *sub, hl_sub_event ev, const char *msg,
                       size_t len)
{
    hilock_cond *c = sub->data;
    if (ev == HL_SUB_READY)
        c->ready = true;
    else if (ev == HL_SUB_CLOSED || ev == HL_SUB_REFUSED)
        c->ready = false;
    if (ev != HL_SUB_READY && ev != HL_SUB_MESSAGE)
        return;
    /* The list changes only on this thread; a poll ends nothing here. */
    for (cond_wait *w = c->waits; w != NULL; w = w->next)
        if (ev == HL_SUB_READY ||
            (strlen(w->id) == len && memcmp(w->id, msg, len) == 0))
            wait_poll(w);
}

static void on_released(hilock_lock *lock, int status, int64_t value,
                        void *user_data)
{
    (void)lock;
    (void)value;
    cond_wait *w = user_data;
    w->requests--;
    if (w->state == W_DONE) {
        wait_release_if_idle(w);
        return;
    }
    if (status != HILOCK_OK) {
        /* Not in line, or in doubt: the place, if any, runs out, and a
         * signal it takes passes on when it does. */
        wait_finish(w, status, hilock_last_error());
        return;
    }
    if (w->end_status != 0) {
        wait_leave(w, w->end_status); /* cancelled meanwhile */
        return;
    }
    w->state = W_WAITING;
    hl_op_park(&w->op, true);
    wait_arm(w);
    if (w->cond->ready)
        wait_poll(w);
}

static void wait_start(hl_op *op)
{
    cond_wait *w = (cond_wait *)op;
    hilock_cond *c = w->cond;
    hilock_lock *lock = c->lock;
    hl_client_timer_init(op->home, &w->timer, on_timer, w);
    if (atomic_load(&c->destroyed) || hl_lock_conn(lock) == NULL) {
        wait_finish(w, HILOCK_ECANCELED, "the condition or its lock is "
                                         "closed");
        return;
    }
    int rc = hl_lock_hold_once(lock, w->owner, &w->lease_ms, &w->fenced);
    if (rc != HILOCK_OK) {
        wait_finish(w, rc, hilock_last_error());
        return;
    }
    snprintf(w->id, sizeof w->id, "%.*s:%llu", HILOCK_CLIENT_ID_LEN,
             hl_lock_client_id(lock), (unsigned long long)op->id);
    w->entry = (hl_cond_entry){
        .line = c->keys[0].s,
        .line_len = c->keys[0].len,
        .alive = c->keys[1].s,
        .alive_len = c->keys[1].len,
        .id = w->id,
        .id_len = strlen(w->id),
        .waiter_timeout_ms = waiter_timeout(w)};
    wait_list(w);
    if (c->sub.channel == NULL &&
        hl_client_listen(op->home, &c->sub, c->channel, c->channel_len,
                         on_channel, c) < 0) {
        wait_finish(w, HILOCK_ENOMEM, "out of memory to listen for "
                                      "signals");
        return;
    }
    w->state = W_RELEASING;
    rc = hl_release_owner_into_cond(lock, w->owner, &w->entry, on_released,
                                    w);
    if (rc != HILOCK_OK) {
        wait_finish(w, rc, hilock_last_error());
        return;
    }
    w->requests++;
}

static void wait_cancel(hl_op *op, int status)
{
    cond_wait *w = (cond_wait *)op;
    switch (w->state) {
    case W_RELEASING:
        w->end_status = status; /* left once the release is back */
        break;
    case W_WAITING:
    case W_POLLING:
        wait_leave(w, status);
        break;
    case W_ACQUIRING:
        w->end_status = status;
        hilock_lock_cancel(w->cond->lock, w->acquire_id);
        break;
    case W_LEAVING:
    case W_DONE:
        break;
    }
}

static void wait_complete(hl_op *op)
{
    cond_wait *w = (cond_wait *)op;
    w->cb(w->cond, op->status, (uint64_t)op->value, w->user_data);
}

static void wait_destroy(hl_op *op)
{
    cond_wait *w = (cond_wait *)op;
    cond_unref(w->cond);
    hl_free(w);
}

static const hl_op_type wait_type = {
    .start = wait_start,
    .cancel = wait_cancel,
    .complete = wait_complete,
    .destroy = wait_destroy,
    .bounded = true,
};

static int wait_begin(hilock_cond *cond, uint64_t owner, int64_t timeout_ms,
                      hilock_cond_wait_cb *cb, void *user_data,
                      uint64_t *op_id, uint64_t *token)
{
    if (cond == NULL)
        return hl_fail(HILOCK_EINVAL, "cond is NULL");
    if (timeout_ms < 0 && timeout_ms != HILOCK_WAIT_FOREVER)
        return hl_fail(HILOCK_EINVAL, "a timeout is 0 or more, or "
                                      "HILOCK_WAIT_FOREVER");
    if (owner == 0)
        return hl_fail(HILOCK_EINVAL, "owner 0 is no owner");
    hilock_client *c = hl_lock_client_get(cond->lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "the lock's client is closed");
    cond_wait *w = hl_calloc(1, sizeof *w);
    if (w == NULL) {
        hl_client_unref(c);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    hl_op_init(&w->op, &wait_type);
    w->cond = cond;
    cond_ref(cond);
    w->owner = owner;
    w->deadline = timeout_ms == HILOCK_WAIT_FOREVER
                      ? INT64_MAX
                      : hl_after_ms(hl_monotime_now(), timeout_ms);
    w->cb = cb;
    w->user_data = user_data;
    if (op_id != NULL)
        *op_id = w->op.id;
    int rc;
    if (cb == NULL) {
        hl_op_ref(&w->op); /* the token is read after the wait */
        int64_t value = 0;
        rc = hl_op_run_blocking(c, &w->op,
                                hl_client_blocking_limit_us(
                                    c, timeout_ms == HILOCK_WAIT_FOREVER
                                           ? HILOCK_WAIT_FOREVER
                                           : timeout_ms),
                                &value, NULL);
        if (token != NULL)
            *token = rc == HILOCK_OK ? (uint64_t)value : 0;
        hl_op_unref(&w->op);
    } else {
        rc = hl_op_submit_or_drop(c, &w->op);
    }
    hl_client_unref(c);
    return rc;
}

int hilock_cond_wait(hilock_cond *cond, int64_t timeout_ms)
{
    return wait_begin(cond, hilock_thread_owner(), timeout_ms, NULL, NULL,
                      NULL, NULL);
}

int hilock_cond_wait_as(hilock_cond *cond, uint64_t owner, int64_t timeout_ms,
                        uint64_t *token)
{
    if (token != NULL)
        *token = 0;
    return wait_begin(cond, owner, timeout_ms, NULL, NULL, NULL, token);
}

int hilock_cond_wait_async(hilock_cond *cond, uint64_t owner,
                           int64_t timeout_ms, hilock_cond_wait_cb *cb,
                           void *user_data, uint64_t *op_id)
{
    if (cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL callback");
    return wait_begin(cond, owner, timeout_ms, cb, user_data, op_id, NULL);
}

int hilock_cond_cancel(hilock_cond *cond, uint64_t op_id)
{
    if (cond == NULL)
        return hl_fail(HILOCK_EINVAL, "cond is NULL");
    hl_op *found = NULL;
    pthread_mutex_lock(&cond->mutex);
    for (cond_wait *w = cond->waits; w != NULL; w = w->next)
        if (w->op.id == op_id && hl_op_ref_if_alive(&w->op)) {
            found = &w->op;
            break;
        }
    pthread_mutex_unlock(&cond->mutex);
    if (found == NULL)
        return hl_fail(HILOCK_ENOTFOUND, "no such wait of this condition "
                                         "(it ended already)");
    (void)hl_op_cancel(found, HILOCK_ECANCELED);
    hl_op_unref(found);
    return HILOCK_OK;
}

/* ---- signals ------------------------------------------------------------- */

typedef struct signal_call {
    hl_op op; /* first */
    hilock_cond *cond;
    bool all;
    hilock_cond_cb *cb;
    void *user_data;
} signal_call;

static void on_signalled(void *data, int status, hilock_reply *reply)
{
    signal_call *s = data;
    char why[256] = "";
    int64_t woken = 0;
    if (status == HILOCK_OK) {
        const hilock_reply *r = hl_script_answer(s->op.home, reply);
        if (r != reply) {
            /* The waiters were signalled; only the wake-up was refused. */
            snprintf(why, sizeof why, "the server refused the wake-up "
                                      "PUBLISH: %.*s; the waiters find "
                                      "their signal at their next look",
                     (int)(reply->element[1]->len < 200
                               ? reply->element[1]->len
                               : 200),
                     reply->element[1]->str);
            status = HILOCK_EPERM;
        }
        if (r->type == HILOCK_REPLY_INTEGER)
            woken = r->integer;
        else if (status == HILOCK_OK) {
            status = HILOCK_EPROTO;
            snprintf(why, sizeof why, "unexpected reply to a signal");
        }
    } else {
        snprintf(why, sizeof why, "%s",
                 reply && reply->str ? reply->str : hilock_last_error());
    }
    hilock_reply_free(reply);
    hl_op_done(&s->op, status, woken, NULL, why[0] ? why : NULL);
}

static void signal_start(hl_op *op)
{
    signal_call *s = (signal_call *)op;
    hilock_cond *c = s->cond;
    if (atomic_load(&c->destroyed) || hl_lock_conn(c->lock) == NULL) {
        hl_op_done(op, HILOCK_ECLOSED, 0, NULL, "the condition or its lock "
                                                "is closed");
        return;
    }
    char wt[24];
    const char *args[] = {s->all ? "0" : "1", wt};
    size_t lens[] = {1, hl_i64_dec(wt, hl_lock_waiter_timeout_ms(c->lock))};
    _Atomic int *gate = hl_op_gate_requests(op);
    int rc = run_cond_def(c, &signal_def, 2, args, lens, on_signalled, s);
    hl_conn_gate_requests(gate);
    if (rc != HILOCK_OK)
        hl_op_done(op, rc, 0, NULL, hl_send_failure(rc));
}

static void signal_complete(hl_op *op)
{
    signal_call *s = (signal_call *)op;
    s->cb(s->cond, op->status, op->value, s->user_data);
}

static void signal_destroy(hl_op *op)
{
    signal_call *s = (signal_call *)op;
    cond_unref(s->cond);
    hl_free(s);
}

static const hl_op_type signal_type = {
    .start = signal_start,
    .complete = signal_complete,
    .destroy = signal_destroy,
    .bounded = true,
    .withdrawable = true,
};

static int signal_begin(hilock_cond *cond, bool all, hilock_cond_cb *cb,
                        void *user_data, int64_t *woken)
{
    if (woken != NULL)
        *woken = 0;
    if (cond == NULL)
        return hl_fail(HILOCK_EINVAL, "cond is NULL");
    hilock_client *c = hl_lock_client_get(cond->lock);
    if (c == NULL)
        return hl_fail(HILOCK_ECLOSED, "the lock's client is closed");
    signal_call *s = hl_calloc(1, sizeof *s);
    if (s == NULL) {
        hl_client_unref(c);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    hl_op_init(&s->op, &signal_type);
    s->cond = cond;
    cond_ref(cond);
    s->all = all;
    s->cb = cb;
    s->user_data = user_data;
    int rc = cb == NULL
                 ? hl_op_run_blocking(c, &s->op,
                                      hl_client_blocking_limit_us(c, 0),
                                      woken, NULL)
                 : hl_op_submit_or_drop(c, &s->op);
    hl_client_unref(c);
    return rc;
}

int hilock_cond_signal(hilock_cond *cond, int64_t *woken)
{
    return signal_begin(cond, false, NULL, NULL, woken);
}

int hilock_cond_broadcast(hilock_cond *cond, int64_t *woken)
{
    return signal_begin(cond, true, NULL, NULL, woken);
}

int hilock_cond_signal_async(hilock_cond *cond, bool all, hilock_cond_cb *cb,
                             void *user_data)
{
    if (cb == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL callback");
    return signal_begin(cond, all, cb, user_data, NULL);
}

/* ---- teardown ------------------------------------------------------------ */

/* Every wait ends as a cancel ends it.  Loop thread. */
static void cancel_waits(hilock_cond *c)
{
    for (;;) {
        pthread_mutex_lock(&c->mutex);
        cond_wait *w = c->waits;
        while (w != NULL && (w->state == W_LEAVING || w->end_status != 0))
            w = w->next;
        pthread_mutex_unlock(&c->mutex);
        if (w == NULL)
            return;
        /* Each either leaves (W_LEAVING) or keeps the status for when its
         * request is back, so none is met twice. */
        if (w->state == W_RELEASING || w->state == W_ACQUIRING)
            w->end_status = HILOCK_ECANCELED;
        wait_cancel(&w->op, HILOCK_ECANCELED);
    }
}

typedef struct teardown_op {
    hl_op op; /* first */
    hilock_cond *cond;
} teardown_op;

static void teardown_start(hl_op *op)
{
    cancel_waits(((teardown_op *)op)->cond);
    hl_op_done(op, HILOCK_OK, 0, NULL, NULL);
}

static void on_stack(hl_op *op) { (void)op; }

static void teardown_handed_free(hl_op *op)
{
    teardown_op *t = (teardown_op *)op;
    cond_unref(t->cond);
    hl_free(t);
}

static const hl_op_type teardown_type = {.start = teardown_start,
                                         .destroy = on_stack};
static const hl_op_type teardown_handed_type = {
    .start = teardown_start, .destroy = teardown_handed_free};

void hilock_cond_destroy(hilock_cond *cond)
{
    if (cond == NULL || atomic_exchange(&cond->destroyed, true))
        return;
    hilock_client *c = hl_lock_client_get(cond->lock);
    if (c == NULL) {
        /* Closed: the client ended every wait. */
    } else if (hl_client_in_loop(c)) {
        cancel_waits(cond);
    } else if (hl_op_caller_may_wait()) {
        teardown_op t = {.cond = cond};
        hl_op_init(&t.op, &teardown_type);
        (void)hl_op_call_and_wait(c, &t.op);
    } else {
        /* The loop thread of another client: handed over, not waited. */
        teardown_op *t = hl_calloc(1, sizeof *t);
        if (t != NULL) {
            hl_op_init(&t->op, &teardown_handed_type);
            t->cond = cond;
            cond_ref(cond);
            (void)hl_op_submit_or_drop(c, &t->op);
        }
    }
    if (c != NULL)
        hl_client_unref(c);
    cond_unref(cond);
}
