/* hilock unlock --force: delete a lock whoever holds it. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static int unlock_usage(const char *why)
{
    if (why)
        fprintf(stderr, "hilock unlock: %s\n", why);
    fprintf(stderr, "usage: hilock [--redis URL] unlock --force "
                    "[--kind %s] NAME\n",
            cli_kind_names());
    return CLI_EXIT_USAGE;
}

int cli_unlock(const cli_globals *g, int argc, char **argv)
{
    bool force = false;
    const char *name = NULL;
    const cli_kind *kind = NULL;
    bool missing = false;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--force") == 0) {
            force = true;
        } else if ((v = cli_option_value(argc, argv, &i, "--kind",
                                         &missing)) != NULL) {
            if ((kind = cli_kind_find(v)) == NULL)
                return unlock_usage("unknown lock kind");
        } else if (missing) {
            return unlock_usage("--kind needs a value");
        } else if (argv[i][0] == '-' || name != NULL) {
            return unlock_usage(NULL);
        } else {
            name = argv[i];
        }
    }
    /* Without --force there is nothing to do: a hold belongs to the
     * process that took it, and only that process can give it back. */
    if (!force || name == NULL || name[0] == '\0')
        return unlock_usage(NULL);
    if (strlen(name) > HILOCK_MAX_NAME_LEN) {
        char why[96];
        snprintf(why, sizeof why, "the lock name is %zu bytes; at most %d "
                 "are allowed", strlen(name), HILOCK_MAX_NAME_LEN);
        return unlock_usage(why);
    }
    hilock_client *client;
    int rc = cli_open(g, &client);
    if (rc != 0)
        return rc;
    /* Reading the lock as status does refuses a name that holds some
     * other value (a typo must not cost someone their data), and tells
     * the kind, whose own force release leaves none of its keys behind
     * and wakes its waiters on its own channel.  A race with a writer
     * stays possible, but then the name was being used for two things
     * already. */
    const cli_kind *found = cli_detect_kind(client, name, &rc);
    if (found == NULL) {
        hilock_client_destroy(client);
        return rc;
    }
    if (kind == NULL)
        kind = found;
    hilock_lock *lock;
    rc = kind->create(&lock, client, name, strlen(name));
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
