/* The only door to libev for the transport and the runtime: a socket's
 * read/write interest, one-shot timers, prepare and idle watchers, the
 * cross-thread wake-up and the loop itself, each start/stop guarded by
 * its state so that asking twice costs nothing. */
#ifndef HL_IO_H
#define HL_IO_H

#include <stdbool.h>

#include <ev.h>

#include "core/base/monotime.h"

typedef struct hl_io hl_io;
typedef void hl_io_fn(hl_io *io, int revents);

struct hl_io {
    struct ev_loop *loop;
    ev_io read_watcher;
    ev_io write_watcher;
    hl_io_fn *on_event; /* EV_READ and/or EV_WRITE */
    void *data;
    int fd;
    bool want_read;
    bool want_write;
};

void hl_io_init(hl_io *io, struct ev_loop *loop, hl_io_fn *on_event,
                void *data);
/* Attach a socket; interest starts empty. */
void hl_io_set_fd(hl_io *io, int fd);
void hl_io_want_read(hl_io *io, bool on);
void hl_io_want_write(hl_io *io, bool on);
/* Drop all interest and forget the socket (the caller closes it). */
void hl_io_clear(hl_io *io);

typedef struct hl_timer hl_timer;
typedef void hl_timer_fn(hl_timer *timer);

struct hl_timer {
    struct ev_loop *loop;
    ev_timer watcher;
    hl_timer_fn *on_fire;
    void *data;
    bool armed;
};

void hl_timer_init(hl_timer *t, struct ev_loop *loop, hl_timer_fn *on_fire,
                   void *data);
/* Fire once after delay (µs, clamped at 0); re-arming replaces the old
 * expiry.  Stopping a timer from inside its own callback is safe. */
void hl_timer_arm(hl_timer *t, hl_monotime delay);
void hl_timer_stop(hl_timer *t);

/* Runs a callback just before the loop blocks for I/O: the moment to flush
 * everything queued during this loop iteration in one write. */
typedef struct hl_prepare hl_prepare;
typedef void hl_prepare_fn(hl_prepare *p);

struct hl_prepare {
    struct ev_loop *loop;
    ev_prepare watcher;
    hl_prepare_fn *on_prepare;
    void *data;
    bool active;
};

void hl_prepare_init(hl_prepare *p, struct ev_loop *loop,
                     hl_prepare_fn *on_prepare, void *data);
void hl_prepare_start(hl_prepare *p);
void hl_prepare_stop(hl_prepare *p);

/* Runs a callback on every loop iteration while active, and keeps the
 * loop from blocking meanwhile: busy polling. */
typedef struct hl_idle hl_idle;
typedef void hl_idle_fn(hl_idle *idle);

struct hl_idle {
    struct ev_loop *loop;
    ev_idle watcher;
    hl_idle_fn *on_idle;
    void *data;
    bool active;
};

void hl_idle_init(hl_idle *i, struct ev_loop *loop, hl_idle_fn *on_idle,
                  void *data);
void hl_idle_start(hl_idle *i);
void hl_idle_stop(hl_idle *i);

/* Wakes the loop from another thread; the callback runs on the loop.
 * Start and stop belong to the loop thread; send to any thread. */
typedef struct hl_async hl_async;
typedef void hl_async_fn(hl_async *async);

struct hl_async {
    struct ev_loop *loop;
    ev_async watcher;
    hl_async_fn *on_wake;
    void *data;
    bool active;
};

void hl_async_init(hl_async *a, struct ev_loop *loop, hl_async_fn *on_wake,
                   void *data);
void hl_async_start(hl_async *a);
void hl_async_stop(hl_async *a);
void hl_async_send(hl_async *a);

/* A loop of the library's own: NULL when it cannot be made. */
struct ev_loop *hl_loop_new(void);
void hl_loop_destroy(struct ev_loop *loop);
/* Run until nothing is active or hl_loop_break is called from inside. */
void hl_loop_run(struct ev_loop *loop);
void hl_loop_break(struct ev_loop *loop);

/* Whether the calling thread is running one of the library's loops now:
 * inside a callback of any watcher above, on a loop of the library's own
 * or on a caller's loop, or inside hl_loop_run.  Nothing may wait for a
 * loop thread there (docs/internals/threads.md). */
bool hl_thread_runs_loop(void);

#endif
