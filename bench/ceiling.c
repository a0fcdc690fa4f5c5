/* The machine's ceiling: redis-benchmark against the same server, plain
 * SET and EVALSHA of a script doing what a reentrant acquire does. */
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

extern char **environ;

/* The reference acquire of WORKLOADS.md: exists or hexists, then hincrby
 * and pexpire, else pttl. */
static const char acquire_ref_lua[] =
    "if redis.call('exists', KEYS[1]) == 0 or "
    "redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil end; "
    "return redis.call('pttl', KEYS[1])";

/* Run a program and capture its stdout; -1 on failure. */
static int capture(char *const argv[], char *out, size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", 0, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return -1;
    }
    size_t n = 0;
    ssize_t r;
    while ((r = read(fds[0], out + n, cap - 1 - n)) > 0 && n < cap - 1)
        n += (size_t)r;
    out[n] = '\0';
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* The rps of the last CSV line: "name","rps",... */
static double parse_rps(const char *csv)
{
    const char *line = NULL;
    for (const char *p = csv; (p = strstr(p, "\n\"")) != NULL; p++)
        line = p + 1;
    if (line == NULL)
        line = csv[0] == '"' ? csv : NULL;
    if (line == NULL)
        return -1;
    const char *q = strstr(line + 1, "\",\"");
    return q ? strtod(q + 3, NULL) : -1;
}

static long requests_for(int clients, int pipeline)
{
    /* About a second or two each on a small machine. */
    long n = 20000L * (clients < 8 ? clients : 8) * pipeline;
    return n > 2000000 ? 2000000 : n;
}

static void one(const bench_args *a, const char *host, int port,
                const char *what, int clients, int pipeline,
                const char *sha)
{
    char c[16], p[16], n[24], portbuf[16], key[160];
    long requests = requests_for(clients, pipeline);
    snprintf(c, sizeof c, "%d", clients);
    snprintf(p, sizeof p, "%d", pipeline);
    snprintf(n, sizeof n, "%ld", requests);
    snprintf(portbuf, sizeof portbuf, "%d", port);
    snprintf(key, sizeof key, "bench:%s:ceiling:__rand_int__", a->run_id);
    char *set_argv[] = {"redis-benchmark", "-h", (char *)host, "-p",
                        portbuf, "-c", c, "-P", p, "-n", n, "-r", "100000",
                        "--csv", "-t", "set", NULL};
    char *eval_argv[] = {"redis-benchmark", "-h", (char *)host, "-p",
                         portbuf, "-c", c, "-P", p, "-n", n, "-r", "100000",
                         "--csv", "EVALSHA", (char *)sha, "1", key, "10000",
                         "bench-owner", NULL};
    char out[8192];
    bool set = strcmp(what, "SET") == 0;
    if (capture(set ? set_argv : eval_argv, out, sizeof out) != 0) {
        bench_print_ceiling(a, what, clients, pipeline, requests, 0,
                            "redis-benchmark failed");
        return;
    }
    double rps = parse_rps(out);
    bench_print_ceiling(a, what, clients, pipeline, requests, rps,
                        rps < 0 ? "cannot read redis-benchmark output"
                                : NULL);
}

void bench_run_ceiling(const bench_args *a, const char *host, int port)
{
    char portbuf[16], out[256];
    snprintf(portbuf, sizeof portbuf, "%d", port);
    char *load[] = {"redis-cli", "-h", (char *)host, "-p", portbuf,
                    "SCRIPT", "LOAD", (char *)acquire_ref_lua, NULL};
    if (capture(load, out, sizeof out) != 0 || strlen(out) < 40) {
        bench_print_ceiling(a, "EVALSHA-acquire", 0, 0, 0, 0,
                            "SCRIPT LOAD failed");
        return;
    }
    out[40] = '\0';
    static const int clients[] = {1, 8, 50, 64};
    static const int pipelines[] = {1, 16};
    for (size_t i = 0; i < sizeof clients / sizeof clients[0]; i++)
        for (size_t j = 0; j < sizeof pipelines / sizeof pipelines[0]; j++) {
            one(a, host, port, "SET", clients[i], pipelines[j], NULL);
            one(a, host, port, "EVALSHA-acquire", clients[i], pipelines[j],
                out);
        }
}
