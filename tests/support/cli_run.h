/* The hilock command in tests: one plain redis-server for a test file's
 * group, and runs of the command against it, without a terminal. */
#ifndef HL_CLI_RUN_H
#define HL_CLI_RUN_H

#include <stddef.h>

#include "redis_server.h"

/* The group's server and its URL, made by hl_cli_group_setup (which
 * unsets HILOCK_REDIS, so that only --redis names a server) and stopped
 * by hl_cli_group_teardown: cmocka group setup and teardown. */
extern hl_redis_server *hl_cli_server;
extern char hl_cli_url[64];
int hl_cli_group_setup(void **state);
int hl_cli_group_teardown(void **state);

/* hilock --redis hl_cli_url ARGS... (NULL-terminated, at most 12), its
 * output (stdout and stderr) into out, cap bytes (out NULL: dropped);
 * the exit status, within hl_widen(20000) ms. */
int hl_cli_run(char *out, size_t cap, ...);

#endif
