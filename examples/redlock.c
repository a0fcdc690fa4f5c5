/* RedLock over independent masters: the lock is held when a quorum of
 * them granted it, for the validity the acquire reports.
 *
 *   redlock redis://host1:port redis://host2:port redis://host3:port ...
 */
#include <stdio.h>
#include <string.h>

#include <hilock/hilock.h>

int main(int argc, char **argv)
{
    hilock_redlock *rl;
    hilock_multilock *lock;
    const char *name = "example:redlock";
    int64_t validity_ms = 0;
    int rc;

    if (argc < 4) {
        fprintf(stderr, "usage: %s URL URL URL [URL...]  (an odd number)\n",
                argv[0]);
        return 64;
    }
    rc = hilock_redlock_create(&rl, (const char *const *)argv + 1,
                               (size_t)argc - 1, NULL);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "redlock: %s: %s\n", hilock_strerror(rc),
                hilock_last_error());
        return 1;
    }
    rc = hilock_redlock_multilock_create(&lock, rl, name);
    if (rc == HILOCK_OK)
        rc = hilock_multilock_try_acquire(lock, 2000, 10000, NULL, 0,
                                          &validity_ms);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "acquire: %s: %s\n", hilock_strerror(rc),
                hilock_last_error());
        return 1;
    }
    /* Work only within the validity: past it, another process may hold
     * the lock. */
    printf("held for at most %lld ms\n", (long long)validity_ms);
    if ((rc = hilock_multilock_release(lock)) != HILOCK_OK)
        fprintf(stderr, "release: %s: %s\n", hilock_strerror(rc),
                hilock_last_error());
    hilock_multilock_destroy(lock);
    hilock_redlock_destroy(rl);
    return rc == HILOCK_OK ? 0 : 1;
}
