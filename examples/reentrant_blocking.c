/* A reentrant lock with the blocking API: take it (the watchdog keeps
 * it while this thread works), take it again, release both holds.
 *
 *   reentrant_blocking [redis://host:port]
 */
#include <stdio.h>
#include <string.h>

#include <hilock/hilock.h>

static int fail(const char *what, int rc)
{
    fprintf(stderr, "%s: %s: %s\n", what, hilock_strerror(rc),
            hilock_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    hilock_options *opts;
    hilock_client *client;
    hilock_lock *lock;
    const char *name = "example:reentrant";
    int rc;

    if ((rc = hilock_options_create(&opts)) != HILOCK_OK)
        return fail("options", rc);
    rc = hilock_options_set_url(opts, url);
    if (rc == HILOCK_OK)
        rc = hilock_client_create(&client, opts);
    hilock_options_free(opts);
    if (rc != HILOCK_OK)
        return fail("connect", rc);
    if ((rc = hilock_lock_create(&lock, client, name)) !=
        HILOCK_OK)
        return fail("lock", rc);

    rc = hilock_lock_acquire(lock);
    if (rc == HILOCK_OK)
        rc = hilock_lock_try_acquire(lock, 0, HILOCK_LEASE_WATCHDOG);
    if (rc != HILOCK_OK)
        return fail("acquire", rc);
    int64_t holds = 0;
    hilock_lock_hold_count(lock, &holds);
    printf("held %lld times\n", (long long)holds);
    /* ... the work the lock protects ... */
    if ((rc = hilock_lock_release(lock)) != HILOCK_OK ||
        (rc = hilock_lock_release(lock)) != HILOCK_OK)
        return fail("release", rc);
    printf("released\n");

    hilock_lock_destroy(lock);
    hilock_client_destroy(client);
    return 0;
}
