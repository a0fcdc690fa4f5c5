/* hilock run --permits N: the lock of `run` is one permit of the
 * expirable semaphore NAME, kept by the watchdog.  The semaphore gets N
 * permits when the first such run creates it (trySetPermits); later runs
 * with another N leave the count as it is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct permit_lock {
    hilock_client *client;
    hilock_permit_semaphore *sem; /* NULL once a cancel destroyed it */
    cli_run_state *st;
    char id[HILOCK_PERMIT_ID_MAX];
} permit_lock;

static void on_acquired(hilock_permit_semaphore *sem, int status,
                        const char *id, void *user_data)
{
    (void)sem;
    permit_lock *p = user_data;
    if (status == HILOCK_OK)
        snprintf(p->id, sizeof p->id, "%s", id);
    cli_run_acquired(p->st, status, 0, NULL);
}

static void on_lost(hilock_permit_semaphore *sem, const char *id,
                    void *user_data)
{
    (void)sem;
    (void)id;
    cli_run_lost(user_data, hilock_last_error());
}

static int permit_acquire(void *impl, uint64_t owner, int64_t wait_ms,
                          int64_t lease_ms, bool fenced, cli_run_state *st,
                          uint64_t *op)
{
    (void)owner;
    (void)fenced;
    (void)op;
    permit_lock *p = impl;
    int rc = hilock_permit_semaphore_set_lost_callback(p->sem, on_lost, st);
    if (rc != HILOCK_OK)
        return rc;
    p->st = st;
    return hilock_permit_acquire_async(p->sem, wait_ms, lease_ms,
                                       on_acquired, p, NULL);
}

/* Ending the wait: the handle goes, its acquire ends with ECANCELED, and
 * a permit granted meanwhile is given back. */
static void permit_cancel(void *impl, uint64_t op)
{
    (void)op;
    permit_lock *p = impl;
    if (p->sem != NULL) {
        hilock_permit_semaphore_destroy(p->sem);
        p->sem = NULL;
    }
}

static int permit_release(void *impl)
{
    permit_lock *p = impl;
    if (p->sem == NULL || p->id[0] == '\0')
        return HILOCK_ENOTOWNER;
    return hilock_permit_release(p->sem, p->id);
}

static void permit_close(void *impl)
{
    permit_lock *p = impl;
    if (p->sem != NULL)
        hilock_permit_semaphore_destroy(p->sem);
    hilock_client_destroy(p->client);
    free(p);
}

static bool permit_reachable(void *impl)
{
    return hilock_client_is_connected(((permit_lock *)impl)->client) == 1;
}

int cli_permits_open(const cli_globals *g, const char *name, int permits,
                     cli_runlock *out)
{
    permit_lock *p = calloc(1, sizeof *p);
    if (p == NULL) {
        fprintf(stderr, "hilock: out of memory\n");
        return CLI_EXIT_SOFTWARE;
    }
    int rc = cli_open(g, &p->client);
    if (rc != 0) {
        free(p);
        return rc;
    }
    rc = hilock_permit_semaphore_create(&p->sem, p->client, name);
    if (rc == HILOCK_OK)
        rc = hilock_semaphore_try_set(hilock_permit_semaphore_base(p->sem),
                                      permits, NULL);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "hilock: %s: %s\n", hilock_strerror(rc),
                hilock_last_error());
        if (p->sem != NULL)
            hilock_permit_semaphore_destroy(p->sem);
        hilock_client_destroy(p->client);
        free(p);
        if (rc == HILOCK_EREDIS || rc == HILOCK_EPROTO)
            return CLI_EXIT_DATAERR; /* the name holds no semaphore */
        return rc == HILOCK_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_SOFTWARE;
    }
    *out = (cli_runlock){.impl = p,
                         .acquire = permit_acquire,
                         .cancel = permit_cancel,
                         .release = permit_release,
                         .reachable = permit_reachable,
                         .close = permit_close};
    return 0;
}
