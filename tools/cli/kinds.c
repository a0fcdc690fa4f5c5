/* The lock kinds the command line can name. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const cli_kind kinds[] = {
    {"reentrant", hilock_lock_create_n},
    {"fair", hilock_fair_lock_create_n},
    {"read", hilock_read_lock_create_n},
    {"write", hilock_write_lock_create_n},
};

const cli_kind *cli_kind_find(const char *name)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kinds[i].name, name) == 0)
            return &kinds[i];
    return NULL;
}

const char *cli_kind_names(void)
{
    /* Kept by hand next to the table: a static string needs no memory
     * management in the error paths that print it. */
    return "reentrant, fair, read, write";
}

int cli_check_name(const char *command, const char *name)
{
    if (name == NULL || name[0] == '\0')
        return cli_usage_error(command, "missing lock NAME", NULL);
    if (strlen(name) > HILOCK_MAX_NAME_LEN) {
        char why[96];
        snprintf(why, sizeof why, "the lock name is %zu bytes; at most %d "
                 "are allowed", strlen(name), HILOCK_MAX_NAME_LEN);
        return cli_usage_error(command, why, NULL);
    }
    return 0;
}

int cli_open_lock(const cli_globals *g, const char *name,
                  const cli_kind *kind, hilock_client **client,
                  hilock_lock **lock)
{
    int rc = cli_open(g, client);
    if (rc != 0)
        return rc;
    /* Reading the lock as status does refuses a name that holds some
     * other value (a typo must not cost someone their data), and tells
     * the kind. */
    const cli_kind *found = cli_detect_kind(*client, name, &rc);
    if (found == NULL) {
        hilock_client_destroy(*client);
        return rc;
    }
    if (kind == NULL)
        kind = found;
    rc = kind->create(lock, *client, name, strlen(name));
    if (rc != HILOCK_OK) {
        rc = cli_failed(name, rc, NULL);
        hilock_client_destroy(*client);
        return rc;
    }
    return 0;
}
