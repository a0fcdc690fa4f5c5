/* A condition variable bound to a lock (include/hilock/cond.h), for
 * reentrant and fair locks; its keys are in kindkit/cond_lua.h.  This
 * file: the handle; cond_wait.c its waits, cond_signal.c its signals,
 * cond_scripts.c their scripts.
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
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/cname.h"
#include "core/base/error_detail.h"
#include "core/engine/compose.h"
#include "cond/cond_internal.h"
#include "layout/layout.h"

void hl_cond_ref(hilock_cond *c) { atomic_fetch_add(&c->refs, 1); }

void hl_cond_unref(hilock_cond *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    hl_aux_names_done(4, c->keys);
    hl_free(c->channel);
    pthread_mutex_destroy(&c->mutex);
    hl_lock_unref(c->lock);
    hl_free(c);
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
    hl_cond_scripts_init();
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

/* ---- teardown ------------------------------------------------------------ */

typedef struct teardown_op {
    hl_op op; /* first */
    hilock_cond *cond;
} teardown_op;

static void teardown_start(hl_op *op)
{
    hl_cond_cancel_waits(((teardown_op *)op)->cond);
    hl_op_done(op, HILOCK_OK, 0, NULL, NULL);
}

static void on_stack(hl_op *op) { (void)op; }

static void teardown_handed_free(hl_op *op)
{
    teardown_op *t = (teardown_op *)op;
    hl_cond_unref(t->cond);
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
        hl_cond_cancel_waits(cond);
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
            hl_cond_ref(cond);
            (void)hl_op_submit_or_drop(c, &t->op);
        }
    }
    if (c != NULL)
        hl_client_unref(c);
    hl_cond_unref(cond);
}
