/* What the latch's two files share: the handle (a lock handle of the
 * latch kind, which gives it the client's link, its connection for the
 * name and teardown), its channel, the checks every call makes, and the
 * await operation's entry point. */
#ifndef HL_LATCH_KIND_H
#define HL_LATCH_KIND_H

#include "core/engine/lock_handle.h"
#include "hilock/latch.h"

/* A latch handle is a lock handle whose kind is hl_latch_kind: its
 * attempt reads the count, so awaits wait on the engine's acquire state
 * machine (await.c). */
extern const hl_kind hl_latch_kind;

static inline hilock_lock *hl_latch_lock(const hilock_latch *latch)
{
    return (hilock_lock *)latch;
}

/* The latch's channel: 0 or HILOCK_ENOMEM; release with
 * hl_aux_name_done. */
int hl_latch_channel(const hilock_lock *lock, hl_aux_name *out);

/* Loop thread, before a call that names the channel: HILOCK_OK, or
 * HILOCK_EINVAL with the detail set on a cluster for a name whose channel
 * lies in another slot. */
int hl_latch_check_slot(const hilock_lock *lock);

/* Read the count with a script that refuses a count no client of the
 * layout writes (see latch.c); fn gets the reply, to be read with
 * hl_latch_parse_count, or with hl_foreign_detail for the refusal. */
int hl_latch_read(hilock_lock *lock, hl_request_fn *fn, void *data);
/* HILOCK_OK with *count set, or HILOCK_EPROTO. */
int hl_latch_parse_count(const hilock_reply *reply, int64_t *count);

/* Start an await (cb NULL: a blocking caller waits and gets the outcome
 * in *opened; otherwise its op id goes to *op_id, which may be NULL).
 * The statuses of hilock_latch_await(_async). */
int hl_latch_await_start(hilock_latch *latch, int64_t wait_ms,
                         hilock_latch_cb *cb, void *user_data, bool *opened,
                         uint64_t *op_id);

#endif
