/* A lost lease: the holder hears of it and stops.  The lock is taken
 * with the watchdog; then, standing in for a server that lost it (a
 * failover, an operator's `hilock unlock --force`), the example deletes
 * the lock behind the holder's back.  The next renewal finds it gone:
 * the lost callback runs, the worker stops, and the release says
 * HILOCK_ELEASELOST.
 *
 *   lost_lease [redis://host:port]
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <hilock/hilock.h>

static atomic_bool lost;

/* On the client's loop thread: note it, and let the worker act. */
static void on_lost(hilock_lock *lock, uint64_t owner, void *data)
{
    (void)lock, (void)owner, (void)data;
    atomic_store(&lost, true);
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "%s: %s: %s\n", what, hilock_strerror(rc),
            hilock_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    const char *name = "example:lost-lease";
    hilock_options *opts;
    hilock_client *client;
    hilock_lock *lock;
    int rc;

    if ((rc = hilock_options_create(&opts)) != HILOCK_OK)
        return fail("options", rc);
    /* A short watchdog, so that the renewal that finds out comes soon:
     * every third of it. */
    rc = hilock_options_set_url(opts, url);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_watchdog_timeout_ms(opts, 1500);
    if (rc == HILOCK_OK)
        rc = hilock_client_create(&client, opts);
    hilock_options_free(opts);
    if (rc != HILOCK_OK)
        return fail("connect", rc);
    if ((rc = hilock_lock_create(&lock, client, name)) !=
        HILOCK_OK)
        return fail("lock", rc);
    hilock_lock_set_lost_callback(lock, on_lost, NULL);

    if ((rc = hilock_lock_acquire(lock)) != HILOCK_OK)
        return fail("acquire", rc);
    printf("holding %s\n", name);
    const char *del[] = {"DEL", name};
    hilock_reply *reply = NULL;
    hilock_client_command(client, 2, del, NULL, &reply);
    hilock_reply_free(reply);

    /* The work, a step at a time, each only while the lease stands. */
    int steps = 0;
    while (!atomic_load(&lost) && steps < 200) {
        struct timespec step = {0, 50 * 1000000L};
        nanosleep(&step, NULL);
        steps++;
    }
    if (!atomic_load(&lost)) {
        fprintf(stderr, "the loss was never reported\n");
        return 1;
    }
    printf("lease lost after %d steps: stopped\n", steps);
    rc = hilock_lock_release(lock);
    printf("release: %s\n", hilock_errname(rc));
    hilock_lock_destroy(lock);
    hilock_client_destroy(client);
    return rc == HILOCK_ELEASELOST ? 0 : 1;
}
