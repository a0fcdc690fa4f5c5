/* Forked children of a test; see children.h. */
#include "support/children.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "support/fixture.h"

pid_t hl_children_fork(hl_children *ch, int i)
{
    pid_t pid;

    if (i < 0 || i >= HL_CHILDREN_MAX)
        fail_msg("no slot %d for a child (%d slots)", i, HL_CHILDREN_MAX);
    pid = fork();
    if (pid < 0)
        fail_msg("fork: %s", strerror(errno));
    if (pid > 0) {
        ch->pid[i] = pid;
        ch->status[i] = 0;
    }
    return pid;
}

static bool children_reaped(void *arg)
{
    hl_children *ch = arg;
    bool all = true;

    for (int i = 0; i < HL_CHILDREN_MAX; i++) {
        if (ch->pid[i] <= 0)
            continue;
        if (waitpid(ch->pid[i], &ch->status[i], WNOHANG) == ch->pid[i])
            ch->pid[i] = 0;
        else
            all = false;
    }
    return all;
}

bool hl_children_wait(hl_children *ch, int timeout_ms)
{
    return hl_wait_until(children_reaped, ch, timeout_ms);
}

int hl_children_kill(hl_children *ch, int i)
{
    int rc;

    /* kill(0) would signal the whole process group, the test included. */
    if (ch->pid[i] <= 0) {
        errno = ESRCH;
        return -1;
    }
    rc = kill(ch->pid[i], SIGKILL);
    waitpid(ch->pid[i], NULL, 0);
    ch->pid[i] = 0;
    return rc;
}

void hl_children_kill_all(hl_children *ch)
{
    for (int i = 0; i < HL_CHILDREN_MAX; i++)
        if (ch->pid[i] > 0)
            hl_children_kill(ch, i);
}

bool hl_read_exact(int fd, void *buf, size_t len, int timeout_ms)
{
    int64_t deadline = hl_now_ms() + timeout_ms;
    char *p = buf;

    while (len > 0) {
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        int left = (int)(deadline - hl_now_ms());
        ssize_t n;

        if (left <= 0)
            return false;
        if (poll(&pf, 1, left) <= 0)
            continue;
        n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

bool hl_read_line(int fd, char *out, size_t cap, int timeout_ms)
{
    int64_t deadline = hl_now_ms() + timeout_ms;
    size_t n = 0;

    while (n + 1 < cap) {
        char ch;

        if (!hl_read_exact(fd, &ch, 1, (int)(deadline - hl_now_ms())))
            return false;
        if (ch == '\n') {
            out[n] = '\0';
            return true;
        }
        out[n++] = ch;
    }
    return false;
}
