/* Shared by the files of src/multi. */
#ifndef HL_MULTI_INTERNAL_H
#define HL_MULTI_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/engine/lock_handle.h"
#include "core/runtime/runtime.h"
#include "hilock/multi.h"

struct group_hold;
struct acquire_op;
struct release_call;

/* The group's teardown on the coordinator, made with the group so that
 * destroy needs no memory. */
typedef struct hl_multi_teardown {
    hl_op op; /* first */
    hilock_multilock *m;
} hl_multi_teardown;

struct hilock_multilock {
    hilock_client *coord;  /* its loop thread runs the group; its memory
                            * is kept for the group's life */
    hilock_redlock *rl;    /* owner of the members, or NULL */
    /* Among the RedLock's groups, under its mutex. */
    struct hilock_multilock *rl_prev, *rl_next;
    size_t n;
    size_t quorum;         /* n, or n/2+1 for RedLock */
    bool redlock;          /* quarantine applies */
    int64_t watchdog_ms;   /* the shortest watchdog lease of the members */
    atomic_int refs;       /* the user's, plus one per op naming it */
    atomic_bool destroyed;
    struct group_hold *holds; /* coordinator thread only */
    struct acquire_op *acquires; /* coordinator thread only */
    struct release_call *releases; /* coordinator thread only */
    hilock_multi_lost_cb *lost_cb; /* coordinator thread only */
    void *lost_data;
    hl_multi_teardown teardown;
    hl_hold_listener *watches; /* one per member, after members[] */
    hilock_lock *members[];
};

/* Make a group over n members (checked by the caller) with the quorum. */
int hl_multi_create(hilock_multilock **out, hilock_lock *const *locks,
                    size_t n, size_t quorum, hilock_redlock *rl);

void hl_multi_ref(hilock_multilock *m);
void hl_multi_unref(hilock_multilock *m);
/* The start of an op whose work is all in its complete hook, so that it
 * runs in one place both when the op starts and when its home's closing
 * drains it (then with status HILOCK_ECLOSED). */
void hl_multi_finish_at_start(hl_op *op);
/* The destroy of an op holding a reference to its group: frees the op's
 * memory (op first in it), then lets go of m. */
void hl_multi_op_free(hl_op *op, hilock_multilock *m);

/* A new acquire of m for owner, its arguments checked: for cb, or with
 * cb NULL for a blocking caller, who reads the members' answers with
 * hl_multi_acquire_results once it has finished (m->n entries). */
int hl_multi_acquire_new(hl_op **out, hilock_multilock *m, uint64_t owner,
                         int64_t wait_ms, int64_t lease_ms,
                         hilock_multi_acquire_cb *cb, void *user_data);
const hilock_member_result *hl_multi_acquire_results(const hl_op *op);
/* A new release of owner's hold of m, for cb, or with cb NULL for a
 * blocking caller. */
int hl_multi_release_new(hl_op **out, hilock_multilock *m, uint64_t owner,
                         hilock_multi_cb *cb, void *user_data);

/* A member handle's lease was lost, or with owner 0 its client is
 * closing: the hold listener the group puts on each member. */
void hl_multi_member_lost(hilock_lock *lock, uint64_t owner, void *data);
/* Coordinator thread: whether owner holds the group, and lost it. */
bool hl_multi_owner_lost(hilock_multilock *m, uint64_t owner, bool *held);
/* Coordinator thread: end every pending acquire with HILOCK_ECANCELED. */
void hl_multi_cancel_all(hilock_multilock *m);
/* Coordinator thread, as its client closes: end every pending acquire
 * and release with HILOCK_ECLOSED. */
void hl_multi_close_all(hilock_multilock *m);

/* Restart tracking of a RedLock master (restart_watch.c). */
typedef struct hl_restart_watch hl_restart_watch;
/* Install the watch as client's connect hook: on the client's loop
 * thread, or before that loop first runs.  quarantine_ms 0 means the
 * client's watchdog timeout.  HILOCK_OK or HILOCK_ENOMEM. */
int hl_restart_watch_attach(hl_restart_watch **out, hilock_client *client,
                            int64_t quarantine_ms);
/* Once the client is gone, or its loop stopped for good. */
void hl_restart_watch_free(hl_restart_watch *w);
/* Whether a first INFO has come back (or failed: the master then counts
 * as restarted) and none is out: every connection of the client asks its
 * own, and one still out keeps the master from voting.  Any thread. */
bool hl_restart_watch_settled(const hl_restart_watch *w);
/* Whether client's server must not vote: its INFO since it last
 * connected is not in yet, or it restarted, or came up, less than the
 * quarantine ago.  False for a client without a watch.  Any thread. */
bool hl_restart_quarantined(const hilock_client *client);

/* The RedLock's side of its locks. */
void hl_redlock_lock_gone(hilock_redlock *rl, hilock_multilock *m);

#endif
