/* W7's floors (bench/w7_floor.c): processes that pass a token round a
 * ring through the server with bare sockets, as W7's kinds pass a lock;
 * in the looped floor a thread of each process owns its sockets, as a
 * client's loop thread does. */
#ifndef HILOCK_BENCH_W7_FLOOR_H
#define HILOCK_BENCH_W7_FLOOR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "procs.h"

typedef struct w7_floor {
    int sub;      /* subscribed to this process's channel */
    int out;      /* passes the token on */
    bool holding; /* process 0 starts with the token */
    char message[192];
    size_t message_len;
    char pass[192];
    size_t pass_len;
    /* The looped floor: the loop thread takes and gives; the caller asks
     * it to give through wake_fd, and sleeps on events, which the loop
     * thread counts up at each token taken and each answer read. */
    bool looped;
    int wake_fd;
    pthread_t loop;
    atomic_uint events;
    unsigned seen;
    atomic_int failed; /* the loop thread's errno when it stopped */
} w7_floor;

/* Process me's place in the ring of rq->procs, looped or not: 0, or -1
 * with error set. */
int w7_floor_open(w7_floor *f, const w7_request *rq, int me, bool looped,
                  char *error, size_t cap);
/* Wait, asleep, for the token: 0, or -1 when the ring stalled 5 s or the
 * server failed. */
int w7_floor_take(w7_floor *f);
/* Pass it to the next process: 0, or -1. */
int w7_floor_give(w7_floor *f);
void w7_floor_close(w7_floor *f);

#endif
