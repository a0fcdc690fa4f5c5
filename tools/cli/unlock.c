/* hilock unlock --force: delete a lock whoever holds it. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cli_unlock(const cli_globals *g, int argc, char **argv)
{
    bool force = false;
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--force") == 0) {
            force = true;
        } else if (argv[i][0] == '-' || name != NULL) {
            name = NULL;
            break;
        } else {
            name = argv[i];
        }
    }
    /* Without --force there is nothing to do: a hold belongs to the
     * process that took it, and only that process can give it back. */
    if (!force || name == NULL || name[0] == '\0') {
        fprintf(stderr, "usage: hilock [--redis URL] unlock --force NAME\n");
        return CLI_EXIT_USAGE;
    }
    hilock_client *client;
    int rc = cli_open(g, &client);
    if (rc != 0)
        return rc;
    /* The delete would take any value at that name; a typo must not cost
     * someone their data.  A race with a writer stays possible, but then
     * the name was being used for two things already. */
    const char *type_argv[] = {"TYPE", name};
    hilock_reply *reply = NULL;
    rc = hilock_client_command(client, 2, type_argv, NULL, &reply);
    if (rc != HILOCK_OK) {
        fprintf(stderr, "hilock: TYPE failed: %s (%s)\n", hilock_strerror(rc),
                hilock_last_error());
        hilock_reply_free(reply);
        hilock_client_destroy(client);
        return CLI_EXIT_UNAVAILABLE;
    }
    bool lockish = reply->str != NULL && (strcmp(reply->str, "hash") == 0 ||
                                          strcmp(reply->str, "none") == 0);
    if (!lockish)
        fprintf(stderr, "hilock: %s holds a %s, not a lock; left alone\n",
                name, reply->str ? reply->str : "value of unknown type");
    hilock_reply_free(reply);
    if (!lockish) {
        hilock_client_destroy(client);
        return CLI_EXIT_DATAERR;
    }
    hilock_lock *lock;
    rc = hilock_lock_create(&lock, client, name, strlen(name));
    if (rc != HILOCK_OK) {
        fprintf(stderr, "hilock: %s: %s\n", hilock_strerror(rc),
                hilock_last_error());
        hilock_client_destroy(client);
        return rc == HILOCK_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_SOFTWARE;
    }
    bool deleted = false;
    rc = hilock_lock_force_release(lock, &deleted);
    int status = 0;
    if (rc == HILOCK_OK) {
        printf("%s\n", deleted ? "deleted" : "not locked");
    } else {
        fprintf(stderr, "hilock: unlock failed: %s (%s)\n",
                hilock_strerror(rc), hilock_last_error());
        status = rc == HILOCK_EREDIS ? CLI_EXIT_DATAERR : CLI_EXIT_UNAVAILABLE;
    }
    hilock_lock_destroy(lock);
    hilock_client_destroy(client);
    return status;
}
