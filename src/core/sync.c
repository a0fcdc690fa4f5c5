#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "client_internal.h"
#include "hilock/error.h"
#include "monotime.h"
#include "options_internal.h"

/* A one-shot waiter on one futex word: the poster stores the result and
 * wakes the waiter only if it went to sleep, so a waiter that spins for
 * its answer costs the loop thread no system call, and one that sleeps
 * costs one on each side (a mutex and condition variable cost up to
 * twice that, and the woken thread then contends for the mutex). */
enum { SYNC_EMPTY, SYNC_POSTED, SYNC_SLEEPING };

struct hl_sync {
    _Atomic uint32_t state;
    atomic_int refs;
    int64_t spin_us;
    int status;
    hilock_reply *reply;
    int64_t value;
    char detail[256];
};

hl_sync *hl_sync_new(int64_t spin_us)
{
    hl_sync *s = hl_calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    atomic_init(&s->state, SYNC_EMPTY);
    atomic_init(&s->refs, 2);
    s->spin_us = spin_us;
    return s;
}

void hl_sync_ref(hl_sync *s) { atomic_fetch_add(&s->refs, 1); }

void hl_sync_unref(hl_sync *s)
{
    if (atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    hilock_reply_free(s->reply);
    hl_free(s);
}

/* Threads waiting in sync calls, process-wide. */
static atomic_int waiting;

int hl_sync_waiting(void) { return atomic_load_explicit(&waiting,
                                                        memory_order_relaxed); }

/* A lone caller whose answer is due within a short round trip waits for
 * it awake, as long as the spin bound its caller chose.  With more
 * callers waiting the cores are busy anyway, and spinning would only take
 * time from the loop thread and the server. */
static bool spin_for_post(hl_sync *s, int64_t timeout_us)
{
    if (s->spin_us <= 0 ||
        atomic_load_explicit(&waiting, memory_order_relaxed) > 1)
        return false;
    int64_t us = timeout_us < s->spin_us ? timeout_us : s->spin_us;
    hl_monotime end = hl_monotime_now() + us;
    do {
        if (atomic_load_explicit(&s->state, memory_order_acquire) ==
            SYNC_POSTED)
            return true;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    } while (hl_monotime_now() < end);
    return false;
}

static void futex_wait_until(_Atomic uint32_t *word, uint32_t expect,
                             const struct timespec *until)
{
    /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline. */
    syscall(SYS_futex, word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expect,
            until, NULL, FUTEX_BITSET_MATCH_ANY);
}

static void futex_wake_one(_Atomic uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL,
            0);
}

int hl_sync_wait(hl_sync *s, int64_t timeout_us, int *status,
                 hilock_reply **reply, int64_t *value, char *detail,
                 size_t detail_len)
{
    struct timespec until = hl_monotonic_deadline(timeout_us);
    atomic_fetch_add_explicit(&waiting, 1, memory_order_relaxed);
    bool posted = spin_for_post(s, timeout_us);
    while (!posted) {
        uint32_t seen = SYNC_EMPTY;
        if (atomic_compare_exchange_strong_explicit(
                &s->state, &seen, SYNC_SLEEPING, memory_order_acquire,
                memory_order_acquire) ||
            seen == SYNC_SLEEPING)
            futex_wait_until(&s->state, SYNC_SLEEPING, &until);
        else
            break; /* posted meanwhile */
        if (atomic_load_explicit(&s->state, memory_order_acquire) ==
            SYNC_POSTED)
            break;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > until.tv_sec ||
            (now.tv_sec == until.tv_sec && now.tv_nsec >= until.tv_nsec))
            break;
    }
    posted = atomic_load_explicit(&s->state, memory_order_acquire) ==
             SYNC_POSTED;
    if (posted) {
        *status = s->status;
        if (reply) {
            *reply = s->reply;
            s->reply = NULL;
        }
        if (value)
            *value = s->value;
        if (detail)
            snprintf(detail, detail_len, "%s", s->detail);
    } else {
        /* A second wait, after a cancel, may sleep again. */
        uint32_t sleeping = SYNC_SLEEPING;
        atomic_compare_exchange_strong(&s->state, &sleeping, SYNC_EMPTY);
    }
    atomic_fetch_sub_explicit(&waiting, 1, memory_order_relaxed);
    hl_sync_unref(s);
    return posted ? HILOCK_OK : HILOCK_ETIMEDOUT;
}

void hl_sync_post(hl_sync *s, int status, hilock_reply *reply,
                  const char *detail)
{
    hl_sync_post_value(s, status, reply, 0, detail);
}

void hl_sync_post_value(hl_sync *s, int status, hilock_reply *reply,
                        int64_t value, const char *detail)
{
    s->status = status;
    s->reply = reply;
    s->value = value;
    snprintf(s->detail, sizeof s->detail, "%s", detail ? detail : "");
    if (atomic_exchange_explicit(&s->state, SYNC_POSTED,
                                 memory_order_acq_rel) == SYNC_SLEEPING)
        futex_wake_one(&s->state);
    hl_sync_unref(s);
}

int64_t hl_sync_spin_for(int64_t rtt_us)
{
    if (rtt_us <= 0)
        return HL_SPIN_MAX_US / 2; /* nothing measured yet */
    if (rtt_us > HL_SPIN_MAX_US)
        return 0;
    int64_t us = 2 * rtt_us + HL_HANDOVER_US;
    return us < HL_SPIN_MAX_US ? us : HL_SPIN_MAX_US;
}

int64_t hl_client_sync_spin_us(hilock_client *c)
{
    /* A busy-polling loop thread takes a core already; a caller spinning
     * beside it would leave the server none on a two-core machine. */
    if (c->opts->busy_poll_us > 0)
        return 0;
    return hl_sync_spin_for(atomic_load(&c->rtt_us));
}

int64_t hl_sync_limit_us(const hilock_options *o, int64_t wait_ms)
{
    int64_t limit_ms =
        2 * o->command_timeout_ms + o->connect_timeout_ms + 1000;
    /* Waits too long to represent are waits forever. */
    if (wait_ms < 0 || wait_ms > INT64_MAX / 4 / 1000 - limit_ms)
        return INT64_MAX / 4;
    return HL_MS(wait_ms + limit_ms);
}
