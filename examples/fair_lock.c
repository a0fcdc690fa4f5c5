/* A fair lock: waiters get it in the order they came, across processes
 * (the line is kept on the server).  The main thread holds the lock
 * while three threads, each with a client of its own as separate
 * processes would have, line up one after another; then it lets go, and
 * they take it in the order they lined up.
 *
 *   fair_lock [redis://host:port]
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <hilock/hilock.h>

#define WAITERS 3

static const char *url = "redis://127.0.0.1:6379";
static const char *name = "example:fair";
static atomic_int order[WAITERS], served;

static int connect_to(hilock_client **out)
{
    hilock_options *opts;
    int rc = hilock_options_create(&opts);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_url(opts, url);
    if (rc == HILOCK_OK)
        rc = hilock_client_create(out, opts);
    hilock_options_free(opts);
    return rc;
}

static void *waiter(void *arg)
{
    int me = *(int *)arg;
    hilock_client *client;
    hilock_lock *lock;
    if (connect_to(&client) != HILOCK_OK)
        return NULL;
    if (hilock_fair_lock_create(&lock, client, name) ==
        HILOCK_OK) {
        if (hilock_lock_try_acquire(lock, 30000, HILOCK_LEASE_WATCHDOG) ==
            HILOCK_OK) {
            order[atomic_fetch_add(&served, 1)] = me;
            hilock_lock_release(lock);
        }
        hilock_lock_destroy(lock);
    }
    hilock_client_destroy(client);
    return NULL;
}

/* The number of places in the lock's line on the server. */
static long long line_length(hilock_client *client)
{
    char key[64];
    snprintf(key, sizeof key, "redisson_lock_queue:{%s}", name);
    const char *argv[] = {"LLEN", key};
    hilock_reply *r = NULL;
    long long n = -1;
    if (hilock_client_command(client, 2, argv, NULL, &r) == HILOCK_OK &&
        r->type == HILOCK_REPLY_INTEGER)
        n = r->integer;
    hilock_reply_free(r);
    return n;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        url = argv[1];
    hilock_client *client;
    hilock_lock *lock;
    int rc = connect_to(&client);
    if (rc == HILOCK_OK)
        rc = hilock_fair_lock_create(&lock, client, name);
    if (rc == HILOCK_OK)
        rc = hilock_lock_acquire(lock);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "%s: %s\n", hilock_strerror(rc),
                hilock_last_error());
        return 1;
    }
    pthread_t t[WAITERS];
    int ids[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        ids[i] = i + 1;
        pthread_create(&t[i], NULL, waiter, &ids[i]);
        /* Into line one at a time, so that the order is known. */
        for (int tries = 0; line_length(client) < i + 1 && tries < 1000;
             tries++) {
            struct timespec pause = {0, 10 * 1000000L};
            nanosleep(&pause, NULL);
        }
    }
    hilock_lock_release(lock);
    for (int i = 0; i < WAITERS; i++)
        pthread_join(t[i], NULL);
    int in_order = atomic_load(&served) == WAITERS;
    printf("served:");
    for (int i = 0; i < atomic_load(&served); i++) {
        printf(" %d", order[i]);
        in_order &= order[i] == i + 1;
    }
    printf("%s\n", in_order ? " (the order they came in)" : "");
    hilock_lock_destroy(lock);
    hilock_client_destroy(client);
    return in_order ? 0 : 1;
}
