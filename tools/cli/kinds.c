/* The lock kinds the command line can name. */
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
