/* W7's floors: the least a hand-off between sleeping processes through
 * the server can cost on this machine, what the kinds' W7 rows are held
 * against, as hilock-rtt-floor is what an acquire's latency is.
 *
 * The processes pass a token round a ring, with no library, script or
 * lock in the way.  Each has one thread and two plain blocking sockets:
 * it sleeps in read() on its subscription until its channel hears the
 * token ("taking" it), and passes it on with a PUBLISH to the next
 * process's channel, whose answer it reads ("giving" it).  A hand-off is
 * then one request, the server's wake-up and the next process's: no lock
 * of any library hands over between processes for less.  The token goes
 * round in the processes' order, so the floor is also fair.
 *
 * The looped floor (--kind floor-loop) adds what a blocking caller of a
 * client with a loop thread adds: in each process a loop thread owns the
 * two sockets, hears the token and wakes the process's other thread,
 * asleep on a futex; that thread passes the token by waking the loop
 * thread (an eventfd), which sends the PUBLISH, and sleeps until the loop
 * thread has read the answer.  Set against the floor, it shows what the
 * thread hand-overs cost; set against a kind, what the library does
 * beyond them. */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "w7_floor.h"

static void *loop_main(void *arg);

static int channel(char *out, size_t cap, const w7_request *rq, int i)
{
    return snprintf(out, cap, "bench:%s:floor:%d", rq->run_id, i);
}

static int fail(w7_floor *f, char *error, size_t cap, const char *what)
{
    snprintf(error, cap, "floor: %s: %s", what,
             errno ? strerror(errno) : "unexpected answer");
    w7_floor_close(f);
    return -1;
}

int w7_floor_open(w7_floor *f, const w7_request *rq, int me, bool looped,
                  char *error, size_t cap)
{
    char ch[128], next[128], expect[256], got[256];
    *f = (w7_floor){.sub = -1, .out = -1, .holding = me == 0};
    int chlen = channel(ch, sizeof ch, rq, me);
    int nextlen = channel(next, sizeof next, rq, (me + 1) % rq->procs);
    f->sub = bench_procs_connect(rq->host, rq->port, "floor", error, cap);
    if (f->sub < 0)
        return -1;
    f->out = bench_procs_connect(rq->host, rq->port, "floor", error, cap);
    if (f->out < 0) {
        w7_floor_close(f);
        return -1;
    }
    char cmd[256];
    int n = snprintf(cmd, sizeof cmd, "*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n",
                     chlen, ch);
    int want = snprintf(expect, sizeof expect,
                        "*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n",
                        chlen, ch);
    errno = 0;
    if (bench_write_all(f->sub, cmd, (size_t)n) != 0 ||
        bench_read_all(f->sub, got, (size_t)want) != 1 ||
        memcmp(got, expect, (size_t)want) != 0)
        return fail(f, error, cap, "SUBSCRIBE");
    /* Every message is the same: its length is all a take reads. */
    f->message_len = (size_t)snprintf(
        f->message, sizeof f->message,
        "*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$1\r\nt\r\n", chlen, ch);
    f->pass_len = (size_t)snprintf(
        f->pass, sizeof f->pass,
        "*3\r\n$7\r\nPUBLISH\r\n$%d\r\n%s\r\n$1\r\nt\r\n", nextlen, next);
    if (!looped)
        return 0;
    f->wake_fd = eventfd(0, EFD_CLOEXEC);
    if (f->wake_fd < 0)
        return fail(f, error, cap, "eventfd");
    int rc = pthread_create(&f->loop, NULL, loop_main, f);
    if (rc != 0) {
        close(f->wake_fd);
        errno = rc;
        return fail(f, error, cap, "loop thread");
    }
    f->looped = true;
    return 0;
}

/* Read the token off the subscription, asleep in read(). */
static int ring_take(w7_floor *f)
{
    char got[sizeof f->message];
    if (bench_read_all(f->sub, got, f->message_len) != 1 ||
        memcmp(got, f->message, f->message_len) != 0)
        return -1;
    return 0;
}

/* PUBLISH the token to the next process and read the answer. */
static int ring_give(w7_floor *f)
{
    /* ":1\r\n", or ":0\r\n" once the next process has left the ring at
     * the window's end. */
    char answer[4];
    if (bench_write_all(f->out, f->pass, f->pass_len) != 0 ||
        bench_read_all(f->out, answer, sizeof answer) != 1 ||
        answer[0] != ':')
        return -1;
    return 0;
}

/* The loop thread tells the caller: one more event. */
static void post(w7_floor *f)
{
    atomic_fetch_add(&f->events, 1);
    syscall(SYS_futex, &f->events, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* The caller sleeps until its next event: 0, or -1 when the loop thread
 * stopped (errno its reason) or 5 s passed without one (EAGAIN), as the
 * plain floor's sockets give up. */
static int await_event(w7_floor *f)
{
    unsigned want = ++f->seen;
    for (;;) {
        unsigned now = atomic_load(&f->events);
        if ((int)(now - want) >= 0)
            return 0;
        if (atomic_load(&f->failed) != 0) {
            errno = atomic_load(&f->failed);
            return -1;
        }
        struct timespec limit = {5, 0};
        if (syscall(SYS_futex, &f->events, FUTEX_WAIT_PRIVATE, now, &limit,
                    NULL, 0) != 0 &&
            errno == ETIMEDOUT) {
            errno = EAGAIN;
            return -1;
        }
    }
}

/* The looped floor's loop thread, until a socket fails or is shut. */
static void *loop_main(void *arg)
{
    w7_floor *f = arg;
    struct pollfd p[2] = {{.fd = f->sub, .events = POLLIN},
                          {.fd = f->wake_fd, .events = POLLIN}};
    uint64_t n;
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        errno = 0;
        if (p[0].revents != 0) {
            if (ring_take(f) != 0)
                break;
            post(f);
        }
        if (p[1].revents != 0) {
            if (read(f->wake_fd, &n, sizeof n) != (ssize_t)sizeof n ||
                ring_give(f) != 0)
                break;
            post(f);
        }
    }
    atomic_store(&f->failed, errno != 0 ? errno : EPIPE);
    post(f);
    return NULL;
}

int w7_floor_take(w7_floor *f)
{
    errno = 0;
    if (f->holding) {
        f->holding = false;
        return 0;
    }
    return f->looped ? await_event(f) : ring_take(f);
}

int w7_floor_give(w7_floor *f)
{
    errno = 0;
    if (!f->looped)
        return ring_give(f);
    uint64_t one = 1;
    if (write(f->wake_fd, &one, sizeof one) != (ssize_t)sizeof one)
        return -1;
    return await_event(f);
}

void w7_floor_close(w7_floor *f)
{
    if (f->looped) {
        /* A shut socket ends the loop thread's poll or read. */
        shutdown(f->sub, SHUT_RDWR);
        shutdown(f->out, SHUT_RDWR);
        pthread_join(f->loop, NULL);
        close(f->wake_fd);
        f->looped = false;
    }
    if (f->sub >= 0)
        close(f->sub);
    if (f->out >= 0)
        close(f->out);
    f->sub = f->out = -1;
}
