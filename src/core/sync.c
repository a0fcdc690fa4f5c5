#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "alloc.h"
#include "client_internal.h"
#include "hilock/error.h"

struct hl_sync {
    pthread_mutex_t m;
    pthread_cond_t cv;
    atomic_int refs;
    bool posted;
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

static void sync_unref(hl_sync *s)
{
    if (atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    hilock_reply_free(s->reply);
    pthread_mutex_destroy(&s->m);
    pthread_cond_destroy(&s->cv);
    hl_free(s);
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
    sync_unref(s);
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
    s->posted = true;
    s->status = status;
    s->reply = reply;
    s->value = value;
    snprintf(s->detail, sizeof s->detail, "%s", detail ? detail : "");
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->m);
    sync_unref(s);
}
