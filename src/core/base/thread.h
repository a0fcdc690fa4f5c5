/* Threads the library starts for itself: the loop threads of clients and
 * RedLock groups, and name lookups. */
#ifndef HL_THREAD_H
#define HL_THREAD_H

#include <pthread.h>
#include <stdbool.h>

/* pthread_create with every signal blocked in the new thread.  Signals
 * belong to the application: a handler that runs on one of our threads
 * races with the application's own threads on whatever flags it sets,
 * and SIGPIPE from a TLS write must not kill the process.  A detached
 * thread is not joined; tid may then be NULL.  Returns 0 or the error
 * pthread_create gave. */
int hl_thread_start(pthread_t *tid, bool detached, void *(*fn)(void *),
                    void *arg);

#endif
