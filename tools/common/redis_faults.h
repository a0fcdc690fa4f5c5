/* Faults for the tests, on servers from redis_server.h: a library of its
 * own (hilock_server_faults), which the hilock command does not link. */
#ifndef HL_REDIS_FAULTS_H
#define HL_REDIS_FAULTS_H

#include "redis_server.h"

/* Faults.  kill9 sends SIGKILL and reaps the process; pause returns once
 * the process is stopped (SIGSTOP), resume once it runs again (SIGCONT).
 * restart kills the server if it runs, then starts it again on the same
 * port with the same configuration and an empty dataset, retrying while
 * the port is still held, and waits until it accepts commands.  All return
 * 0 or -1. */
int hl_redis_server_kill9(hl_redis_server *s);
int hl_redis_server_pause(hl_redis_server *s);
int hl_redis_server_resume(hl_redis_server *s);
int hl_redis_server_restart(hl_redis_server *s);

#endif
