/* The semaphore kinds inside src/semaphore: the handle, its calls, and
 * the scripts that run them. */
#ifndef HL_SEMAPHORE_INTERNAL_H
#define HL_SEMAPHORE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/engine/lock_handle.h"
#include "core/engine/waiters.h"
#include "core/loop/io.h"
#include "hilock/semaphore.h"

typedef enum sem_call {
    SEM_ACQUIRE,
    SEM_RELEASE,
    SEM_TRY_SET,
    SEM_SET,
    SEM_ADD,
    SEM_DRAIN,
    SEM_AVAILABLE,
    SEM_PERMIT_ACQUIRE,
    SEM_PERMIT_RELEASE
} sem_call;

typedef struct sem_op sem_op;
typedef struct sem_line sem_line;

/* A permit this handle holds, with its lease (the engine renews the
 * permit's score in "{NAME}:timeout" under the id "<client id>:<owner>"). */
typedef struct sem_permit {
    hl_lease lease; /* first */
    hilock_semaphore *sem;
    struct sem_permit *next;
    uint64_t owner;
    bool leased;     /* the lease runs */
    bool lease_busy; /* the engine still names the lease */
    bool lost;
    bool releasing;
    bool dropped;
    char id[HILOCK_PERMIT_ID_MAX];
} sem_permit;

struct hilock_semaphore {
    hilock_lock *lock; /* the name, the client and its connection */
    bool expirable;
    atomic_int refs;
    atomic_bool destroyed;
    char *zkey; /* "{NAME}:timeout" */
    size_t zkey_len;
    /* Loop thread: */
    sem_permit *permits;
    sem_op *ops; /* calls started and not finished */
    hilock_permit_lost_cb *lost_cb;
    void *lost_data;
};

struct sem_op {
    hl_op op; /* first */
    hilock_semaphore *sem;
    sem_call call;
    int64_t n;
    int64_t wait_ms;
    int64_t lease_ms; /* the script's: the watchdog's when watchdog */
    bool watchdog;
    hl_monotime deadline;
    hl_monotime sent_at;
    hilock_semaphore_cb *cb; /* NULL: a blocking caller waits */
    void *user_data;
    char id[HILOCK_PERMIT_ID_MAX];
    sem_op *prev_in_sem;
    sem_op *next_in_sem;
    /* Waiting: */
    sem_line *line;
    sem_op *line_prev;
    sem_op *line_next;
    hl_waiter waiter;
    hl_waiters *reg; /* where the waiter is registered */
    bool registered;
    hl_timer timer;
    bool timer_ready;
    bool trying;
    bool ended;
    int cancel_status; /* a cancel that came while trying */
};

/* Scripts: run call's script for op with KEYS name, "{NAME}:timeout" and
 * the channel.  HILOCK_OK or an error (fn not called). */
int hl_sem_run(sem_op *op, hl_request_fn *fn);

/* The kind under the handle's inner lock: its channel, and for permits
 * the renew script and the lease reports (semaphore.c). */
extern const hl_kind hl_semaphore_kind;
void hl_sem_scripts_init(void);
void hl_sem_permit_lost(hl_lease *lease);
void hl_sem_permit_released(hl_lease *lease);
const hl_script *hl_sem_renew_script(void);

/* The handle's references (ops and permits hold one each). */
void hl_sem_ref(hilock_semaphore *sem);
void hl_sem_unref(hilock_semaphore *sem);

/* Start a call: validated arguments in op; sync when op->cb is NULL
 * (value and id receive the results).  Takes op. */
int hl_sem_submit(sem_op *op, int64_t *value, char *id);

/* The local line of a client's waiters on one semaphore (line.c). */
sem_line *hl_sem_line_join(sem_op *op);
void hl_sem_line_leave(sem_op *op);
bool hl_sem_line_head(const sem_op *op);
sem_op *hl_sem_line_first(const sem_op *op);
sem_op *hl_sem_line_next(const sem_op *op);

#endif
