/* Faults injected into private servers, for the tests; see
 * redis_faults.h. */
#include "redis_faults.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_server_internal.h"

int hl_redis_server_kill9(hl_redis_server *s)
{
    if (s->pid <= 0) {
        hl_rs_fail(0, "port %d: kill9 of a server that is not running",
                   s->port);
        return -1;
    }
    kill(s->pid, SIGKILL);
    hl_rs_reap(s);
    return 0;
}

/* Waits for the stop or continue to be reported so that the caller knows
 * the server's state, instead of racing the signal's delivery. */
static int hl_rs_signal_and_wait(hl_redis_server *s, int sig, int option)
{
    int status;
    pid_t r;

    if (s->pid <= 0) {
        hl_rs_fail(0, "port %d: server not running", s->port);
        return -1;
    }
    if (kill(s->pid, sig) != 0) {
        hl_rs_fail(0, "kill %d: %s", (int)s->pid, strerror(errno));
        return -1;
    }
    for (;;) {
        r = waitpid(s->pid, &status, option);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            hl_rs_fail(0, "waitpid %d: %s", (int)s->pid, strerror(errno));
            return -1;
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            hl_rs_fail(0, "port %d: server died", s->port);
            s->pid = 0;
            s->paused = false;
            return -1;
        }
        return 0;
    }
}

int hl_redis_server_pause(hl_redis_server *s)
{
    if (s->paused)
        return 0;
    if (hl_rs_signal_and_wait(s, SIGSTOP, WUNTRACED) != 0)
        return -1;
    s->paused = true;
    return 0;
}

int hl_redis_server_resume(hl_redis_server *s)
{
    if (!s->paused)
        return 0;
    if (hl_rs_signal_and_wait(s, SIGCONT, WCONTINUED) != 0)
        return -1;
    s->paused = false;
    return 0;
}

int hl_redis_server_restart(hl_redis_server *s)
{
    int64_t deadline;
    off_t log_from;
    int ready;

    if (s->pid > 0)
        hl_redis_server_kill9(s);
    deadline = hl_rs_now_ms() + s->start_timeout_ms;
    for (;;) {
        if (hl_rs_spawn(s, &log_from) != 0)
            return -1;
        ready = hl_rs_wait_ready(s, log_from, deadline);
        if (ready > 0)
            return 0;
        if (ready < 0)
            return -1;
        /* The port may still be held, by a client that bound it as its
         * local port or by another process: wait for it, never move. */
        if (!hl_rs_log_says_port_busy(s, log_from)
            || hl_rs_now_ms() >= deadline) {
            hl_rs_fail(0, "restart on port %d failed", s->port);
            hl_rs_print_log_tail(s, log_from);
            return -1;
        }
        hl_rs_sleep_ms(50);
    }
}
