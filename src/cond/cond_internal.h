/* What the files of a condition share: the handle, its scripts, and the
 * end of its waits (hilock/cond.h for the API, kindkit/cond_lua.h for
 * its keys). */
#ifndef HL_COND_INTERNAL_H
#define HL_COND_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/base/auxname.h"
#include "core/engine/lock_handle.h"
#include "core/runtime/runtime.h"
#include "hilock/cond.h"

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

void hl_cond_ref(hilock_cond *c);
void hl_cond_unref(hilock_cond *c);

/* The scripts (KEYS: the handle's keys), run on the lock's connection:
 * hl_run_def's statuses. */
typedef enum hl_cond_script {
    HL_COND_SIGNAL, /* ARGV: how many (0: all), the waiter timeout */
    HL_COND_POLL,   /* ARGV: the waiter's id, the waiter timeout */
    HL_COND_LEAVE   /* ARGV: the waiter's id, the waiter timeout */
} hl_cond_script;
int hl_cond_run(hilock_cond *c, hl_cond_script which, int nargs,
                const char *const *args, const size_t *lens,
                hl_request_fn *fn, void *data);
/* Make the scripts ready (any thread, any number of times). */
void hl_cond_scripts_init(void);

/* End every wait of c as a cancel does.  Loop thread. */
void hl_cond_cancel_waits(hilock_cond *c);

#endif
