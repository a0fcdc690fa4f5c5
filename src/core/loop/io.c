#include "core/loop/io.h"

#include <stddef.h>

#define HL_CONTAINER(ptr, type, member)                                      \
    ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* Every callback of the library's watchers runs between these two, so a
 * thread knows whether it is running one of the library's loops right
 * now, whoever owns the loop: a call that would wait for a loop must not
 * wait there, since the loop it waits for may be waiting for this one. */
static _Thread_local int callback_depth;

bool hl_thread_runs_loop(void) { return callback_depth > 0; }

#define IN_CALLBACK(call)                                                    \
    do {                                                                     \
        callback_depth++;                                                    \
        call;                                                                \
        callback_depth--;                                                    \
    } while (0)

static void io_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    hl_io *io = HL_CONTAINER(w, hl_io, read_watcher);
    IN_CALLBACK(io->on_event(io, revents & (EV_READ | EV_ERROR)));
}

static void io_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    hl_io *io = HL_CONTAINER(w, hl_io, write_watcher);
    IN_CALLBACK(io->on_event(io, revents & (EV_WRITE | EV_ERROR)));
}

void hl_io_init(hl_io *io, struct ev_loop *loop, hl_io_fn *on_event,
                void *data)
{
    io->loop = loop;
    io->on_event = on_event;
    io->data = data;
    io->fd = -1;
    io->want_read = io->want_write = false;
    ev_init(&io->read_watcher, io_read_cb);
    ev_init(&io->write_watcher, io_write_cb);
    /* A loop that wakes late (its process stopped or starved, a caller's
     * loop not run) finds an answer that came meanwhile and a deadline
     * that passed meanwhile ready together, and libev runs the timer
     * first.  The deadline would then judge a request, a lease or a
     * Sentinel round without an answer that is already there: a reply
     * turned into a timeout and a reset connection, a renewed lease
     * reported lost, a sentinel's doubt left unheard.  Sockets first. */
    ev_set_priority(&io->read_watcher, EV_MAXPRI);
    ev_set_priority(&io->write_watcher, EV_MAXPRI);
}

void hl_io_set_fd(hl_io *io, int fd)
{
    hl_io_clear(io);
    io->fd = fd;
    ev_io_set(&io->read_watcher, fd, EV_READ);
    ev_io_set(&io->write_watcher, fd, EV_WRITE);
}

void hl_io_want_read(hl_io *io, bool on)
{
    if (io->fd < 0 || io->want_read == on)
        return;
    io->want_read = on;
    if (on)
        ev_io_start(io->loop, &io->read_watcher);
    else
        ev_io_stop(io->loop, &io->read_watcher);
}

void hl_io_want_write(hl_io *io, bool on)
{
    if (io->fd < 0 || io->want_write == on)
        return;
    io->want_write = on;
    if (on)
        ev_io_start(io->loop, &io->write_watcher);
    else
        ev_io_stop(io->loop, &io->write_watcher);
}

void hl_io_clear(hl_io *io)
{
    hl_io_want_read(io, false);
    hl_io_want_write(io, false);
    io->fd = -1;
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    hl_timer *t = HL_CONTAINER(w, hl_timer, watcher);
    t->armed = false;
    IN_CALLBACK(t->on_fire(t));
}

void hl_timer_init(hl_timer *t, struct ev_loop *loop, hl_timer_fn *on_fire,
                   void *data)
{
    t->loop = loop;
    t->on_fire = on_fire;
    t->data = data;
    t->armed = false;
    ev_init(&t->watcher, timer_cb);
}

void hl_timer_arm(hl_timer *t, hl_monotime delay)
{
    if (t->armed)
        ev_timer_stop(t->loop, &t->watcher);
    /* libev measures from the loop's cached time; refresh it so a long
     * callback before this point does not shorten the delay. */
    ev_now_update(t->loop);
    ev_timer_set(&t->watcher, delay > 0 ? (double)delay / 1e6 : 0.0, 0.0);
    ev_timer_start(t->loop, &t->watcher);
    t->armed = true;
}

void hl_timer_stop(hl_timer *t)
{
    if (!t->armed)
        return;
    ev_timer_stop(t->loop, &t->watcher);
    t->armed = false;
}

static void prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)loop;
    (void)revents;
    hl_prepare *p = HL_CONTAINER(w, hl_prepare, watcher);
    IN_CALLBACK(p->on_prepare(p));
}

void hl_prepare_init(hl_prepare *p, struct ev_loop *loop,
                     hl_prepare_fn *on_prepare, void *data)
{
    p->loop = loop;
    p->on_prepare = on_prepare;
    p->data = data;
    p->active = false;
    ev_prepare_init(&p->watcher, prepare_cb);
}

void hl_prepare_start(hl_prepare *p)
{
    if (p->active)
        return;
    ev_prepare_start(p->loop, &p->watcher);
    p->active = true;
}

void hl_prepare_stop(hl_prepare *p)
{
    if (!p->active)
        return;
    ev_prepare_stop(p->loop, &p->watcher);
    p->active = false;
}

static void idle_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
    (void)loop;
    (void)revents;
    hl_idle *i = HL_CONTAINER(w, hl_idle, watcher);
    IN_CALLBACK(i->on_idle(i));
}

void hl_idle_init(hl_idle *i, struct ev_loop *loop, hl_idle_fn *on_idle,
                  void *data)
{
    i->loop = loop;
    i->on_idle = on_idle;
    i->data = data;
    i->active = false;
    ev_idle_init(&i->watcher, idle_cb);
}

void hl_idle_start(hl_idle *i)
{
    if (i->active)
        return;
    ev_idle_start(i->loop, &i->watcher);
    i->active = true;
}

void hl_idle_stop(hl_idle *i)
{
    if (!i->active)
        return;
    ev_idle_stop(i->loop, &i->watcher);
    i->active = false;
}

static void async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    (void)loop;
    (void)revents;
    hl_async *a = HL_CONTAINER(w, hl_async, watcher);
    IN_CALLBACK(a->on_wake(a));
}

void hl_async_init(hl_async *a, struct ev_loop *loop, hl_async_fn *on_wake,
                   void *data)
{
    a->loop = loop;
    a->on_wake = on_wake;
    a->data = data;
    a->active = false;
    ev_async_init(&a->watcher, async_cb);
}

void hl_async_start(hl_async *a)
{
    if (a->active)
        return;
    ev_async_start(a->loop, &a->watcher);
    a->active = true;
}

void hl_async_stop(hl_async *a)
{
    if (!a->active)
        return;
    ev_async_stop(a->loop, &a->watcher);
    a->active = false;
}

void hl_async_send(hl_async *a)
{
    ev_async_send(a->loop, &a->watcher);
}

struct ev_loop *hl_loop_new(void)
{
    return ev_loop_new(EVFLAG_AUTO);
}

void hl_loop_destroy(struct ev_loop *loop)
{
    ev_loop_destroy(loop);
}

void hl_loop_run(struct ev_loop *loop)
{
    /* Between callbacks too: the thread serves nothing else. */
    IN_CALLBACK(ev_run(loop, 0));
}

void hl_loop_break(struct ev_loop *loop)
{
    ev_break(loop, EVBREAK_ALL);
}
