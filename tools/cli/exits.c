/* What a failed library call means to a script: one exit status per
 * kind of failure, and a hint where the library's words alone leave the
 * user guessing. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* A cluster's refusal of keys in different slots: only a name whose
 * braces hold no hash tag of its own ({}x) makes the keys of a lock so. */
static bool is_crossslot(int rc, const char *detail)
{
    return rc == HILOCK_EREDIS && detail != NULL &&
           strstr(detail, "CROSSSLOT") != NULL;
}

int cli_exit_status(int rc, const char *detail)
{
    if (is_crossslot(rc, detail))
        return CLI_EXIT_USAGE;
    switch (rc) {
    case HILOCK_OK:
        return 0;
    case HILOCK_EINVAL: /* a name the deployment cannot take: {}x */
        return CLI_EXIT_USAGE;
    case HILOCK_EREDIS: /* e.g. WRONGTYPE: the name is no lock */
    case HILOCK_EPROTO: /* a count or token that no client writes */
        return CLI_EXIT_DATAERR;
    case HILOCK_EBUSY:
        return CLI_EXIT_NOT_ACQUIRED;
    case HILOCK_EIO:
    case HILOCK_ETIMEDOUT:
    case HILOCK_EAUTH:
    case HILOCK_EPERM:
    case HILOCK_ETLS:
    case HILOCK_ECLOSED:
    case HILOCK_ENOQUORUM:
    case HILOCK_EREADONLY:
    case HILOCK_EUNSUPPORTED:
    case HILOCK_ENOACK: /* the replicas cannot give what the policy asks */
        return CLI_EXIT_UNAVAILABLE;
    default:
        return CLI_EXIT_SOFTWARE;
    }
}

int cli_flush_stdout(int rc)
{
    if (fflush(stdout) == 0)
        return rc;
    perror("hilock: stdout");
    return rc == 0 ? CLI_EXIT_SOFTWARE : rc;
}

int cli_failed(const char *what, int rc, const char *detail)
{
    if (detail == NULL)
        detail = hilock_last_error();
    fprintf(stderr, "hilock: %s: %s (%s)\n", what, hilock_strerror(rc),
            detail);
    if (rc == HILOCK_EREADONLY)
        fprintf(stderr, "hilock: the server is a replica, which takes no "
                        "writes: give the master's URL, or the group's "
                        "sentinels (redis-sentinel://)\n");
    if (is_crossslot(rc, detail))
        fprintf(stderr, "hilock: on a Redis Cluster a name with braces "
                        "needs a hash tag of its own ({...} with something "
                        "between)\n");
    return cli_exit_status(rc, detail);
}
