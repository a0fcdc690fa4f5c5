/* Where a command goes on a Redis Cluster: the slot of the first key it
 * names.  Pure functions; any thread. */
#ifndef HL_COMMAND_SLOT_H
#define HL_COMMAND_SLOT_H

#include <stddef.h>

/* The first slot a command touches, or -1 for a command without a key:
 * the first argument after the command name, and for EVAL, EVALSHA,
 * EVAL_RO, EVALSHA_RO, FCALL and FCALL_RO the first key after numkeys.
 * Server commands that take no key (WAIT, INFO, PING, CLUSTER, CONFIG,
 * CLIENT, SCRIPT, ...) are -1 whatever their arguments: a WAIT or an
 * INFO answers for the node it is sent to, and must stay there. */
int hl_command_slot(int argc, const char *const *argv,
                    const size_t *argvlen);

/* The same for a command formatted as RESP (hl_format_command), read
 * from its first four arguments; -1 for bytes that are not one. */
int hl_command_slot_resp(const char *cmd, size_t len);

#endif
