/* A semaphore of expirable permits: at most 4 of the 6 workers run at
 * once.  The count is set once, by whoever comes first (a try-set leaves
 * a count that is there alone); each worker takes a permit, which the
 * watchdog keeps while it lives, and gives it back by its id.
 *
 *   permits [redis://host:port]
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <hilock/hilock.h>

#define WORKERS 6
#define PERMITS 4

static hilock_permit_semaphore *jobs;
static atomic_int running, most, failures;

static void *worker(void *arg)
{
    (void)arg;
    char id[HILOCK_PERMIT_ID_MAX];
    int rc = hilock_permit_acquire(jobs, 30000, HILOCK_LEASE_WATCHDOG, id);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "acquire: %s: %s\n", hilock_strerror(rc),
                hilock_last_error());
        atomic_fetch_add(&failures, 1);
        return NULL;
    }
    int now = atomic_fetch_add(&running, 1) + 1;
    for (int seen = atomic_load(&most);
         now > seen && !atomic_compare_exchange_weak(&most, &seen, now);)
        ;
    struct timespec work = {0, 100 * 1000000L};
    nanosleep(&work, NULL);
    atomic_fetch_sub(&running, 1);
    if ((rc = hilock_permit_release(jobs, id)) != HILOCK_OK) {
        fprintf(stderr, "release: %s\n", hilock_strerror(rc));
        atomic_fetch_add(&failures, 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    const char *name = "example:jobs";
    hilock_options *opts;
    hilock_client *client;
    int rc = hilock_options_create(&opts);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_url(opts, url);
    if (rc == HILOCK_OK)
        rc = hilock_client_create(&client, opts);
    hilock_options_free(opts);
    if (rc == HILOCK_OK)
        rc = hilock_permit_semaphore_create(&jobs, client, name);
    if (rc == HILOCK_OK)
        rc = hilock_semaphore_try_set(hilock_permit_semaphore_base(jobs),
                                      PERMITS, NULL);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "%s: %s\n", hilock_strerror(rc),
                hilock_last_error());
        return 1;
    }
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    printf("%d workers, at most %d at once (%d permits)\n", WORKERS,
           atomic_load(&most), PERMITS);
    hilock_permit_semaphore_destroy(jobs);
    hilock_client_destroy(client);
    return atomic_load(&failures) == 0 && atomic_load(&most) <= PERMITS ? 0
                                                                         : 1;
}
