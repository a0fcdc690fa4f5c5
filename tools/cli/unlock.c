/* hilock unlock --force: delete a lock whoever holds it. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static int unlock_usage(const char *why, const char *what)
{
    return cli_usage_error("unlock", why, what);
}

int cli_unlock(const cli_globals *g, int argc, char **argv)
{
    bool force = false;
    const char *name = NULL;
    const cli_kind *kind = NULL;
    bool missing = false;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (cli_wants_help(argv[i])) {
            return cli_help("unlock");
        } else if (cli_flag(argv[i], "--force", "-f")) {
            force = true;
        } else if ((v = cli_option_value(argc, argv, &i, "--kind", "-k",
                                         &missing)) != NULL) {
            if ((kind = cli_kind_find(v)) == NULL)
                return unlock_usage("unknown lock kind", v);
        } else if (missing) {
            return unlock_usage("missing value after", argv[i]);
        } else if (argv[i][0] == '-') {
            return unlock_usage("unknown option", argv[i]);
        } else if (name != NULL) {
            return unlock_usage("one NAME only, not also", argv[i]);
        } else {
            name = argv[i];
        }
    }
    /* Without --force there is nothing to do: a hold belongs to the
     * process that took it, and only that process can give it back. */
    if (!force)
        return unlock_usage("takes a lock from its holder only with "
                            "--force",
                            NULL);
    int rc = cli_check_name("unlock", name);
    if (rc != 0)
        return rc;
    /* The kind's own force release leaves none of its keys behind and
     * wakes its waiters on its own channel.  A race with a writer stays
     * possible, but then the name was being used for two things
     * already. */
    hilock_client *client;
    hilock_lock *lock;
    rc = cli_open_lock(g, name, kind, &client, &lock);
    if (rc != 0)
        return rc;
    bool deleted = false;
    rc = hilock_lock_force_release(lock, &deleted);
    int status = 0;
    if (rc == HILOCK_OK) {
        printf("%s\n", deleted ? "deleted" : "not locked");
    } else {
        status = cli_failed("unlock failed", rc, NULL);
    }
    hilock_lock_destroy(lock);
    hilock_client_destroy(client);
    return status;
}
