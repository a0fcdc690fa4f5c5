/* A MONITOR connection to a fixture server: every command the server runs
 * from then on, the commands Lua scripts run included, as argument
 * lists, for tests that check what a library call made the server do.
 *
 * The server queues the stream until it is read (a monitor has no output
 * limit by default); hl_monitor_drain reads it up to a marker the test
 * sends after its calls, so nothing the calls caused is left behind.
 * Functions fail the running cmocka test when they cannot do their job;
 * none is for forked children. */
#ifndef HL_MONITOR_H
#define HL_MONITOR_H

#include <stdbool.h>
#include <stddef.h>

#include "redis_server.h"

typedef struct hl_monitor hl_monitor;

/* One command: from a script (MONITOR's "[0 lua]") or from a client;
 * argv[0] as the caller spelled it.  The arguments are valid during the
 * call only. */
typedef void hl_monitor_fn(void *arg, bool from_lua, int argc,
                           char *const *argv, const size_t *lens);

/* Connects and sends MONITOR; returns once the server confirmed it. */
hl_monitor *hl_monitor_open(const hl_redis_server *s);

/* Sends a marker command to the server on a connection of its own and
 * hands fn every command recorded before it, in order. */
void hl_monitor_drain(hl_monitor *m, hl_monitor_fn *fn, void *arg);

void hl_monitor_close(hl_monitor *m);

#endif
