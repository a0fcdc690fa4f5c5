/* The async API on the application's own libev loop: no thread of the
 * library's, every callback on this loop.  Acquire, release, stop.
 *
 *   async_own_loop [redis://host:port]
 */
#include <stdio.h>
#include <string.h>

#include <ev.h>
#include <hilock/hilock.h>

struct app {
    struct ev_loop *loop;
    int status;
};

static void released(hilock_lock *lock, int status, int64_t left,
                     void *user_data)
{
    struct app *app = user_data;

    (void)lock;
    (void)left;
    app->status = status;
    if (status != HILOCK_OK)
        fprintf(stderr, "release: %s: %s\n", hilock_strerror(status),
                hilock_last_error());
    else
        printf("released\n");
    ev_break(app->loop, EVBREAK_ALL);
}

static void acquired(hilock_lock *lock, int status,
                     const hilock_acquired *got, void *user_data)
{
    struct app *app = user_data;

    if (status != HILOCK_OK) {
        fprintf(stderr, "acquire: %s: %s\n", hilock_strerror(status),
                hilock_last_error());
        app->status = status;
        ev_break(app->loop, EVBREAK_ALL);
        return;
    }
    printf("acquired by owner %llu\n", (unsigned long long)got->owner);
    /* ... the work the lock protects, without blocking the loop ... */
    status = hilock_lock_release_async(lock, got->owner, released, app);
    if (status != HILOCK_OK) {
        app->status = status;
        ev_break(app->loop, EVBREAK_ALL);
    }
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    struct app app = {ev_default_loop(0), HILOCK_OK};
    hilock_options *opts;
    hilock_client *client;
    hilock_lock *lock;
    const char *name = "example:async";
    int rc;

    if ((rc = hilock_options_create(&opts)) != HILOCK_OK)
        return 1;
    rc = hilock_options_set_url(opts, url);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_loop(opts, app.loop);
    if (rc == HILOCK_OK)
        rc = hilock_client_create(&client, opts);
    hilock_options_free(opts);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "client: %s: %s\n", hilock_strerror(rc),
                hilock_last_error());
        return 1;
    }
    rc = hilock_lock_create(&lock, client, name);
    if (rc == HILOCK_OK)
        rc = hilock_lock_acquire_async(lock, 1, 5000, 10000, 0, acquired,
                                       &app, NULL);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "acquire: %s: %s\n", hilock_strerror(rc),
                hilock_last_error());
        return 1;
    }
    ev_run(app.loop, 0);
    hilock_lock_destroy(lock);
    hilock_client_destroy(client);
    return app.status == HILOCK_OK ? 0 : 1;
}
