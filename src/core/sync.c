#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "alloc.h"
#include "client_internal.h"
#include "hilock/error.h"
#include "monotime.h"
#include "options_internal.h"

struct hl_sync {
    pthread_mutex_t m;
    pthread_cond_t cv;
    atomic_int refs;
    atomic_bool posted;
    int status;
    hilock_reply *reply;
    int64_t value;
    char detail[256];
};

hl_sync *hl_sync_new(void)
{
    hl_sync *s = hl_calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&s->m, NULL);
    atomic_init(&s->refs, 2);
    return s;
}

void hl_sync_ref(hl_sync *s) { atomic_fetch_add(&s->refs, 1); }

void hl_sync_unref(hl_sync *s)
{
    if (atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    hilock_reply_free(s->reply);
    pthread_mutex_destroy(&s->m);
    pthread_cond_destroy(&s->cv);
    hl_free(s);
}

/* Threads waiting in sync calls, process-wide. */
static atomic_int waiting;

int hl_sync_waiting(void) { return atomic_load_explicit(&waiting,
                                                        memory_order_relaxed); }

/* A lone caller's answer usually comes within a round trip: wait for it
 * awake.  With more callers waiting the loop thread is busy anyway, and
 * spinning would only take its time and the server's. */
static void spin_for_post(hl_sync *s, int64_t timeout_us)
{
    if (atomic_load_explicit(&waiting, memory_order_relaxed) > 1)
        return;
    int64_t us = timeout_us < HL_HANDOVER_SPIN_US ? timeout_us
                                                  : HL_HANDOVER_SPIN_US;
    hl_monotime end = hl_monotime_now() + us;
    while (!atomic_load_explicit(&s->posted, memory_order_acquire) &&
           hl_monotime_now() < end) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

int hl_sync_wait(hl_sync *s, int64_t timeout_us, int *status,
                 hilock_reply **reply, int64_t *value, char *detail,
                 size_t detail_len)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)(timeout_us / 1000000);
    until.tv_nsec += (long)(timeout_us % 1000000) * 1000;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    atomic_fetch_add_explicit(&waiting, 1, memory_order_relaxed);
    spin_for_post(s, timeout_us);
    pthread_mutex_lock(&s->m);
    while (!s->posted) {
        if (pthread_cond_timedwait(&s->cv, &s->m, &until) == ETIMEDOUT)
            break;
    }
    int rc = HILOCK_ETIMEDOUT;
    if (s->posted) {
        rc = HILOCK_OK;
        *status = s->status;
        if (reply) {
            *reply = s->reply;
            s->reply = NULL;
        }
        if (value)
            *value = s->value;
        if (detail)
            snprintf(detail, detail_len, "%s", s->detail);
    }
    pthread_mutex_unlock(&s->m);
    atomic_fetch_sub_explicit(&waiting, 1, memory_order_relaxed);
    hl_sync_unref(s);
    return rc;
}

void hl_sync_post(hl_sync *s, int status, hilock_reply *reply,
                  const char *detail)
{
    hl_sync_post_value(s, status, reply, 0, detail);
}

void hl_sync_post_value(hl_sync *s, int status, hilock_reply *reply,
                        int64_t value, const char *detail)
{
    pthread_mutex_lock(&s->m);
    atomic_store_explicit(&s->posted, true, memory_order_release);
    s->status = status;
    s->reply = reply;
    s->value = value;
    snprintf(s->detail, sizeof s->detail, "%s", detail ? detail : "");
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->m);
    hl_sync_unref(s);
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
