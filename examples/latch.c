/* A count-down latch: the coordinator sets the count to the number of
 * workers and waits; each worker counts down when its part is done.  In
 * a real service they are separate processes (`hilock latch` does the
 * same from the shell); here they are threads with clients of their own.
 *
 *   latch [redis://host:port]
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <hilock/hilock.h>

#define WORKERS 3

static const char *url = "redis://127.0.0.1:6379";
static const char *name = "example:batch";

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

static void *worker(void *arg)
{
    hilock_client *client;
    hilock_latch *done;
    int64_t left = 0;
    if (connect_to(&client) != HILOCK_OK)
        return NULL;
    if (hilock_latch_create(&done, client, name) ==
        HILOCK_OK) {
        /* ... this worker's part ... */
        hilock_latch_count_down(done, &left);
        printf("worker %d done, %lld to go\n", *(int *)arg, (long long)left);
        hilock_latch_destroy(done);
    }
    hilock_client_destroy(client);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        url = argv[1];
    hilock_client *client;
    hilock_latch *done;
    bool set = false, opened = false;
    int rc = connect_to(&client);
    if (rc == HILOCK_OK)
        rc = hilock_latch_create(&done, client, name);
    if (rc == HILOCK_OK)
        rc = hilock_latch_try_set_count(done, WORKERS, &set);
    if (rc != HILOCK_OK || !set) {
        fprintf(stderr, "set: %s %s\n", hilock_strerror(rc),
                set ? "" : "(a count was there already)");
        return 1;
    }
    pthread_t t[WORKERS];
    int ids[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        ids[i] = i + 1;
        pthread_create(&t[i], NULL, worker, &ids[i]);
    }
    rc = hilock_latch_await(done, 30000, &opened);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    printf("%s\n", opened ? "all done: open" : "still counting");
    hilock_latch_destroy(done);
    hilock_client_destroy(client);
    return rc == HILOCK_OK && opened ? 0 : 1;
}
