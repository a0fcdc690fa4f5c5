/* hilock revoke: ask whoever holds a lock to give it up.  Nothing is
 * taken: the holder hears the request (a `hilock run` passes it to its
 * command as a signal) and decides. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* Held, but no holder listened: a request is not kept for later. */
#define REVOKE_EXIT_UNHEARD CLI_EXIT_NOT_ACQUIRED
/* Nobody holds the lock. */
#define REVOKE_EXIT_FREE 66

static int revoke_usage(const char *why, const char *what)
{
    return cli_usage_error("revoke", why, what);
}

int cli_revoke(const cli_globals *g, int argc, char **argv)
{
    const char *name = NULL;
    const char *reason = NULL;
    const cli_kind *kind = NULL;
    bool missing = false;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (cli_wants_help(argv[i])) {
            return cli_help("revoke");
        } else if ((v = cli_option_value(argc, argv, &i, "--reason", "-r",
                                         &missing)) != NULL) {
            reason = v;
        } else if ((v = cli_option_value(argc, argv, &i, "--kind", "-k",
                                         &missing)) != NULL) {
            if ((kind = cli_kind_find(v)) == NULL)
                return revoke_usage("unknown lock kind", v);
        } else if (missing) {
            return revoke_usage("missing value after", argv[i]);
        } else if (argv[i][0] == '-') {
            return revoke_usage("unknown option", argv[i]);
        } else if (name != NULL) {
            return revoke_usage("one NAME only, not also", argv[i]);
        } else {
            name = argv[i];
        }
    }
    int rc = cli_check_name("revoke", name);
    if (rc != 0)
        return rc;
    if (reason != NULL && strlen(reason) > HILOCK_REQUEST_REASON_MAX) {
        char why[96];
        snprintf(why, sizeof why, "--reason is %zu bytes; at most %d are "
                 "allowed", strlen(reason), HILOCK_REQUEST_REASON_MAX);
        return revoke_usage(why, NULL);
    }
    /* Any kind's handle asks the same holders. */
    hilock_client *client;
    hilock_lock *lock;
    rc = cli_open_lock(g, name, kind, &client, &lock);
    if (rc != 0)
        return rc;
    int64_t heard = 0;
    rc = hilock_lock_request_release(lock, reason, &heard);
    int status = 0;
    if (rc != HILOCK_OK) {
        status = cli_failed("revoke failed", rc, NULL);
    } else if (heard < 0) {
        fprintf(stderr, "hilock: %s is not held: nobody to ask\n", name);
        status = REVOKE_EXIT_FREE;
    } else if (heard == 0) {
        fprintf(stderr, "hilock: %s is held, but its holder does not listen "
                        "for requests (a Redisson client, a program that "
                        "set no callback, or `hilock run --on-request "
                        "none`); nothing was asked\n",
                name);
        status = REVOKE_EXIT_UNHEARD;
    } else {
        printf("asked: %lld holder%s heard\n", (long long)heard,
               heard == 1 ? "" : "s");
    }
    hilock_lock_destroy(lock);
    hilock_client_destroy(client);
    return cli_flush_stdout(status);
}
