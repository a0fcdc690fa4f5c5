#include "support/processes.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/fixture.h"

extern char **environ;

pid_t hl_spawn_logged(const char *const *argv, const char *path)
{
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, path,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &actions, NULL, (char *const *)argv,
                         environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0)
        fail_msg("spawn %s: %s", argv[0], strerror(rc));
    return pid;
}

int hl_wait_exit(pid_t pid, int timeout_ms)
{
    int64_t deadline = hl_now_ms() + timeout_ms;
    int ws;
    for (;;) {
        pid_t r = waitpid(pid, &ws, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            fail_msg("waitpid: %s", strerror(errno));
        if (hl_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &ws, 0);
            return -1;
        }
        hl_sleep_ms(5);
    }
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

void hl_file_read(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
}

void hl_expect_file_has(const char *path, const char *text, int timeout_ms)
{
    static char seen[16384];
    int64_t deadline = hl_now_ms() + timeout_ms;
    for (;;) {
        hl_file_read(path, seen, sizeof seen);
        if (strstr(seen, text) != NULL)
            return;
        if (hl_now_ms() >= deadline)
            fail_msg("\"%s\" did not appear in %s within %d ms:\n%s", text,
                     path, timeout_ms, seen);
        hl_sleep_ms(10);
    }
}
