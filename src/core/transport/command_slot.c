/* Where a command goes on a cluster: the slot of the key it names. */
#include "core/transport/command_slot.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "core/transport/keyslot.h"

static bool is_named(const char *name, const char *arg, size_t len)
{
    return strlen(name) == len && strncasecmp(arg, name, len) == 0;
}

int hl_command_slot(int argc, const char *const *argv, const size_t *argvlen)
{
    if (argc < 2)
        return -1;
    static const char *const keyless[] = {
        "WAIT",   "WAITAOF", "INFO",   "PING",    "ECHO",
        "ROLE",   "TIME",    "DBSIZE", "CLUSTER", "CLIENT",
        "CONFIG", "SCRIPT",  "ACL",    "COMMAND", "FUNCTION", "SCAN"};
    for (size_t i = 0; i < sizeof keyless / sizeof *keyless; i++)
        if (is_named(keyless[i], argv[0], argvlen[0]))
            return -1;
    static const char *const scripts[] = {"EVAL", "EVALSHA", "EVAL_RO",
                                          "EVALSHA_RO", "FCALL", "FCALL_RO"};
    for (size_t i = 0; i < sizeof scripts / sizeof *scripts; i++) {
        if (!is_named(scripts[i], argv[0], argvlen[0]))
            continue;
        if (argc < 4 || argvlen[2] == 0 || argvlen[2] > 10 ||
            argv[2][0] == '0' || argv[2][0] == '-')
            return -1; /* no key: any node will do */
        return (int)hl_keyslot(argv[3], argvlen[3]);
    }
    return (int)hl_keyslot(argv[1], argvlen[1]);
}

/* "$<n>\r\n" or "*<n>\r\n" at *p, for a RESP command we formatted. */
static bool resp_count(const char **p, const char *end, char mark,
                       size_t *out)
{
    const char *q = *p;
    if (q >= end || *q++ != mark)
        return false;
    size_t n = 0;
    const char *digits = q;
    while (q < end && *q >= '0' && *q <= '9' && q - digits < 12)
        n = n * 10 + (size_t)(*q++ - '0');
    if (q == digits || end - q < 2 || q[0] != '\r' || q[1] != '\n')
        return false;
    *p = q + 2;
    *out = n;
    return true;
}

int hl_command_slot_resp(const char *cmd, size_t len)
{
    const char *p = cmd, *end = cmd + len;
    const char *argv[4];
    size_t lens[4], n;
    if (!resp_count(&p, end, '*', &n))
        return -1;
    int argc = n < 4 ? (int)n : 4;
    for (int i = 0; i < argc; i++) {
        if (!resp_count(&p, end, '$', &lens[i]) ||
            (size_t)(end - p) < lens[i] + 2)
            return -1;
        argv[i] = p;
        p += lens[i] + 2;
    }
    return hl_command_slot(argc, argv, lens);
}
