/* W7's floor: the least a hand-off between sleeping processes through
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
 * round in the processes' order, so the floor is also fair. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "w7_floor.h"

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

int w7_floor_open(w7_floor *f, const w7_request *rq, int me, char *error,
                  size_t cap)
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
    return 0;
}

int w7_floor_take(w7_floor *f)
{
    errno = 0;
    if (f->holding) {
        f->holding = false;
        return 0;
    }
    char got[sizeof f->message];
    if (bench_read_all(f->sub, got, f->message_len) != 1 ||
        memcmp(got, f->message, f->message_len) != 0)
        return -1;
    return 0;
}

int w7_floor_give(w7_floor *f)
{
    /* ":1\r\n", or ":0\r\n" once the next process has left the ring at
     * the window's end. */
    char answer[4];
    errno = 0;
    if (bench_write_all(f->out, f->pass, f->pass_len) != 0 ||
        bench_read_all(f->out, answer, sizeof answer) != 1 ||
        answer[0] != ':')
        return -1;
    return 0;
}

void w7_floor_close(w7_floor *f)
{
    if (f->sub >= 0)
        close(f->sub);
    if (f->out >= 0)
        close(f->out);
    f->sub = f->out = -1;
}
