/* hilock run: hold a lock while a command runs.
 *
 * One thread waits for everything with poll() on a self-pipe: the signal
 * handlers, the acquire callback and the lost callback (both on the
 * library's loop thread) set a flag and write a byte to it.  The flags
 * carry the news; the byte only wakes the poll, so a full pipe loses
 * nothing.
 *
 * The lock is reached through a cli_runlock (cli.h): below, a lock of
 * one of the kinds on one server; in redlock.c, RedLock over several
 * masters.  Everything else here is the same for both.
 *
 * CMD runs in a process group of its own, so that hilock can signal it
 * together with the children it starts: the signals hilock passes on, and
 * those it sends when the lease is lost, go to that whole group.  Should
 * hilock die without a chance to do so (SIGKILL), the kernel sends
 * SIGKILL to CMD itself, but not to CMD's own children, which a death
 * signal never reaches.
 *
 * When hilock runs in the foreground of a terminal, it hands the terminal
 * over to CMD's group, as a shell does for a job: CMD reads from it, and
 * ^C or ^\ reach CMD alone.  ^Z stops CMD; hilock then takes the terminal
 * back and stops its own group with the same signal, so that the shell
 * sees the job stopped, and on being continued continues CMD. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

/* How long CMD has between SIGTERM and SIGKILL once the lease is lost. */
#define RUN_GRACE_MS 5000
/* Bound on --wait and --lease: a year. */
#define RUN_MAX_MS (365LL * 24 * 3600 * 1000)

extern char **environ;

/* The signals passed on to CMD's group.  One that the terminal sent to
 * hilock's group is passed on as well: CMD's group is another one, which
 * the terminal did not reach. */
static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP};
#define N_FORWARDED (sizeof forwarded / sizeof forwarded[0])

/* Per signal number: whether it came and is not yet dealt with. */
static volatile sig_atomic_t pending_signal[NSIG];
static volatile sig_atomic_t child_changed;
static volatile sig_atomic_t continued;
static int wake_fds[2] = {-1, -1};
/* The controlling terminal, when hilock was in its foreground and handed
 * it to CMD's group; -1 otherwise. */
static int tty_fd = -1;

struct cli_run_state {
    atomic_bool acquire_done;
    int acquire_status;
    uint64_t token;
    char acquire_detail[1024]; /* room for a line per RedLock master */
    atomic_bool lost;
    char lost_why[256]; /* written before lost is set; may be "" */
    /* Requests to give the lock up: the signal they become (0: none is
     * listened for), how many came, and the last one's reason, under
     * asked_mutex, since requests come on the library's thread. */
    int request_sig;
    atomic_int asked;
    pthread_mutex_t asked_mutex;
    char asked_reason[HILOCK_REQUEST_REASON_MAX + 1];
};
typedef cli_run_state run_state;

static void wake(void)
{
    /* EAGAIN means bytes are waiting already: the wake-up is due. */
    ssize_t n = write(wake_fds[1], "", 1);
    (void)n;
}

static void on_signal(int sig)
{
    int saved = errno;
    if (sig == SIGCHLD)
        child_changed = 1;
    else if (sig == SIGCONT)
        continued = 1;
    else
        pending_signal[sig] = 1;
    wake();
    errno = saved;
}

void cli_run_acquired(cli_run_state *st, int status, uint64_t token,
                      const char *detail)
{
    st->acquire_status = status;
    st->token = token;
    snprintf(st->acquire_detail, sizeof st->acquire_detail, "%s",
             status == HILOCK_OK ? ""
             : detail != NULL    ? detail
                                 : hilock_last_error());
    atomic_store(&st->acquire_done, true);
    wake();
}

void cli_run_asked(cli_run_state *st, const char *reason, size_t len)
{
    /* Anyone may ask, so the reason reaches the terminal with no byte
     * that could drive it. */
    pthread_mutex_lock(&st->asked_mutex);
    size_t n = len < sizeof st->asked_reason ? len
                                             : sizeof st->asked_reason - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)reason[i];
        st->asked_reason[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    st->asked_reason[n] = '\0';
    pthread_mutex_unlock(&st->asked_mutex);
    atomic_fetch_add(&st->asked, 1);
    wake();
}

void cli_run_lost(cli_run_state *st, const char *why)
{
    if (!atomic_load(&st->lost))
        snprintf(st->lost_why, sizeof st->lost_why, "%s", why ? why : "");
    atomic_store(&st->lost, true);
    wake();
}

/* ---- a lock of one of the kinds, on one server ------------------------ */

typedef struct single_lock {
    hilock_client *client;
    hilock_lock *lock;
    hilock_client_stats seen; /* the ACL refusals already reported */
} single_lock;

/* Refusals by the server's ACL that cost no correctness, only speed, are
 * counted by the client rather than failing a call; each is told once. */
static bool single_refused(single_lock *s, bool subscribe)
{
    hilock_stats all = {.size = sizeof all};
    if (hilock_client_stats_read(s->client, &all) != HILOCK_OK)
        return false;
    hilock_client_stats now = all.counters;
    bool grew = subscribe
                    ? now.subscribes_refused > s->seen.subscribes_refused
                    : now.publishes_refused > s->seen.publishes_refused;
    s->seen = now;
    return grew;
}

static void single_acquire_ended(void *impl)
{
    single_lock *s = impl;
    if (single_refused(s, true))
        fprintf(stderr, "hilock: warning: the server's ACL refused this "
                        "user SUBSCRIBE on the lock's channel, so a release "
                        "could not wake this wait; it looked again only "
                        "when the holder's lease ran out\n");
}

static void single_acquired(hilock_lock *lock, int status,
                            const hilock_acquired *acquired, void *user_data)
{
    (void)lock;
    cli_run_acquired(user_data, status, acquired ? acquired->token : 0,
                     NULL);
}

static void single_lost(hilock_lock *lock, uint64_t owner, void *user_data)
{
    (void)lock;
    (void)owner;
    cli_run_lost(user_data, hilock_last_error());
}

static void single_asked(hilock_lock *lock, uint64_t owner,
                         const char *reason, size_t len, void *user_data)
{
    (void)lock;
    (void)owner;
    cli_run_asked(user_data, reason, len);
}

static bool single_reachable(void *impl)
{
    return hilock_client_is_connected(((single_lock *)impl)->client) == 1;
}

static int single_acquire(void *impl, uint64_t owner, int64_t wait_ms,
                          int64_t lease_ms, bool fenced, cli_run_state *st,
                          uint64_t *op)
{
    single_lock *s = impl;
    int rc = hilock_lock_set_lost_callback(s->lock, single_lost, st);
    if (rc == HILOCK_OK && st->request_sig != 0)
        rc = hilock_lock_set_release_request_callback(s->lock, single_asked,
                                                      st);
    if (rc != HILOCK_OK)
        return rc;
    return hilock_lock_acquire_async(s->lock, owner, wait_ms, lease_ms,
                                     fenced ? HILOCK_ACQUIRE_FENCED : 0,
                                     single_acquired, st, op);
}

static void single_cancel(void *impl, uint64_t op)
{
    single_lock *s = impl;
    hilock_lock_cancel(s->lock, op);
}

static int single_release(void *impl)
{
    single_lock *s = impl;
    int rc = hilock_lock_release(s->lock);
    if (rc == HILOCK_OK && single_refused(s, false))
        fprintf(stderr, "hilock: warning: released, but the server's ACL "
                        "refused this user the PUBLISH that wakes waiters; "
                        "they take the lock when they next look\n");
    return rc;
}

static void single_close(void *impl)
{
    single_lock *s = impl;
    hilock_lock_destroy(s->lock);
    hilock_client_destroy(s->client);
    free(s);
}

static int single_open(const cli_globals *g, const cli_kind *kind,
                       const char *name, cli_runlock *out)
{
    single_lock *s = calloc(1, sizeof *s);
    if (s == NULL) {
        fprintf(stderr, "hilock: out of memory\n");
        return CLI_EXIT_SOFTWARE;
    }
    int rc = cli_open(g, &s->client);
    if (rc != 0) {
        free(s);
        return rc;
    }
    rc = kind->create(&s->lock, s->client, name, strlen(name));
    if (rc != HILOCK_OK) {
        fprintf(stderr, "hilock: %s: %s\n", hilock_strerror(rc),
                hilock_last_error());
        hilock_client_destroy(s->client);
        free(s);
        return rc == HILOCK_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_SOFTWARE;
    }
    *out = (cli_runlock){.impl = s,
                         .acquire = single_acquire,
                         .cancel = single_cancel,
                         .release = single_release,
                         .acquire_ended = single_acquire_ended,
                         .reachable = single_reachable,
                         .close = single_close};
    return 0;
}

/* These signals, when ignored as hilock starts, stay ignored for hilock
 * and CMD alike: nohup and `cmd &` in a script ask that of the whole job.
 * Every other disposition CMD gets is the default one, since an ignored
 * SIGPIPE, say, is usually a leftover of the parent's own needs. */
static const int kept_if_ignored[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM};
static sigset_t ignored_at_start;

static int setup_signals(void)
{
    if (pipe2(wake_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        perror("hilock: pipe");
        return -1;
    }
    sigemptyset(&ignored_at_start);
    for (size_t i = 0; i < sizeof kept_if_ignored / sizeof(int); i++) {
        struct sigaction old;
        sigaction(kept_if_ignored[i], NULL, &old);
        if (old.sa_handler == SIG_IGN)
            sigaddset(&ignored_at_start, kept_if_ignored[i]);
    }
    sigset_t unblock;
    sigemptyset(&unblock);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigfillset(&sa.sa_mask);
    for (size_t i = 0; i < N_FORWARDED; i++) {
        if (sigismember(&ignored_at_start, forwarded[i]))
            continue;
        sigaction(forwarded[i], &sa, NULL);
        sigaddset(&unblock, forwarded[i]);
    }
    /* Stops of CMD wake hilock too: a stopped job has to be shown to
     * the shell (follow_stop). */
    sigaction(SIGCHLD, &sa, NULL);
    sigaddset(&unblock, SIGCHLD);
    sigaction(SIGCONT, &sa, NULL);
    sigaddset(&unblock, SIGCONT);
    /* The library's loop thread blocks every signal, so they all come to
     * this thread, which must therefore take them. */
    pthread_sigmask(SIG_UNBLOCK, &unblock, NULL);
    return 0;
}

static void drain_wake(void)
{
    char buf[64];
    while (read(wake_fds[0], buf, sizeof buf) > 0)
        ;
}

/* Wait for a wake-up, at most timeout_ms (-1: no bound). */
static void wait_wake(int timeout_ms)
{
    struct pollfd p = {.fd = wake_fds[0], .events = POLLIN};
    if (poll(&p, 1, timeout_ms) > 0)
        drain_wake();
}

/* The first pending signal that should end hilock, whatever its origin;
 * 0 if none.  Clears it. */
static int take_terminating_signal(void)
{
    for (size_t i = 0; i < N_FORWARDED; i++) {
        int sig = forwarded[i];
        if (pending_signal[sig]) {
            pending_signal[sig] = 0;
            return sig;
        }
    }
    return 0;
}

/* Die of sig, as if hilock had not caught it, so that a shell or
 * supervisor sees the reason it sent. */
static void die_of(int sig)
{
    fflush(NULL);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    _exit(128 + sig);
}

typedef struct run_args {
    const cli_kind *kind;
    long long wait_ms;  /* HILOCK_WAIT_FOREVER when not given */
    long long lease_ms; /* HILOCK_LEASE_WATCHDOG when not given */
    long long max_hold_ms; /* --max-hold; 0: renewed until CMD exits */
    long long lock_delay_ms; /* --lock-delay; -1: as the URL says */
    bool fence_env;
    long long permits; /* 0: a lock, not a semaphore's permit */
    int request_sig;   /* --on-request; 0: requests are not listened for */
    bool request_given;
    int conflict_exit; /* when not acquired in time */
    const char *name;
    const char *description; /* --describe */
    char **cmd;
    char *shell_cmd[4]; /* -c: /bin/sh -c COMMAND */
} run_args;

static int run_usage(const char *why, const char *what)
{
    return cli_usage_error("run", why, what);
}

static int parse_args(const cli_globals *g, int argc, char **argv,
                      run_args *a)
{
    a->kind = cli_kind_find("reentrant");
    a->wait_ms = HILOCK_WAIT_FOREVER;
    a->lease_ms = HILOCK_LEASE_WATCHDOG;
    a->conflict_exit = CLI_EXIT_NOT_ACQUIRED;
    a->lock_delay_ms = -1;
    a->request_sig = SIGTERM;
    bool kind_given = false, wait_given = false;
    const char *shell_cmd = NULL;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *arg = argv[i], *v;
        bool missing = false;
        long long n;
        if (arg[0] != '-') {
            if (a->name != NULL)
                return run_usage("expected -- before", arg);
            a->name = arg;
        } else if (cli_wants_help(arg)) {
            return -1;
        } else if (strcmp(arg, "--fence-env") == 0) {
            a->fence_env = true;
        } else if (cli_flag(arg, "--nonblock", "-n")) {
            if (wait_given && a->wait_ms != 0)
                return run_usage("--nonblock goes with no other --wait",
                                 NULL);
            a->wait_ms = 0;
            wait_given = true;
        } else if ((v = cli_option_value(argc, argv, &i, "--kind", "-k",
                                         &missing))) {
            a->kind = cli_kind_find(v);
            kind_given = true;
            if (a->kind == NULL)
                return run_usage("unknown lock kind", v);
        } else if ((v = cli_option_value(argc, argv, &i, "--wait", "-w",
                                         &missing))) {
            if (!cli_parse_duration(v, true, RUN_MAX_MS, &n))
                return run_usage("--wait takes a duration (10s, 500ms, "
                                 "2m; bare: milliseconds), not",
                                 v);
            if (wait_given && a->wait_ms != n)
                return run_usage("--wait given twice, or with --nonblock",
                                 NULL);
            a->wait_ms = n;
            wait_given = true;
        } else if ((v = cli_option_value(argc, argv, &i, "--lease", "-l",
                                         &missing))) {
            if (!cli_parse_duration(v, false, RUN_MAX_MS, &a->lease_ms))
                return run_usage("--lease takes a duration above zero "
                                 "(30s, 500ms; bare: milliseconds), not",
                                 v);
        } else if ((v = cli_option_value(argc, argv, &i, "--max-hold",
                                         NULL, &missing))) {
            if (!cli_parse_duration(v, false, RUN_MAX_MS, &a->max_hold_ms))
                return run_usage("--max-hold takes a duration above zero "
                                 "(10m, 90s; bare: milliseconds), not",
                                 v);
        } else if ((v = cli_option_value(argc, argv, &i, "--lock-delay",
                                         NULL, &missing))) {
            /* The library's range decides, and says so (main.c); 0 turns
             * off a delay the URL set. */
            if (!cli_parse_duration(v, true, RUN_MAX_MS, &a->lock_delay_ms))
                return run_usage("--lock-delay takes a duration (5s, "
                                 "1500ms; bare: milliseconds; 0: off), not",
                                 v);
        } else if ((v = cli_option_value(argc, argv, &i, "--permits", "-p",
                                         &missing))) {
            if (!cli_parse_ms(v, false, INT_MAX, &a->permits))
                return run_usage("--permits takes a count 1..2147483647, "
                                 "not",
                                 v);
        } else if ((v = cli_option_value(argc, argv, &i,
                                         "--conflict-exit-code", "-E",
                                         &missing))) {
            if (!cli_parse_ms(v, false, 255, &n))
                return run_usage("--conflict-exit-code takes 1..255, not",
                                 v);
            a->conflict_exit = (int)n;
        } else if ((v = cli_option_value(argc, argv, &i, "--describe", NULL,
                                         &missing))) {
            a->description = v;
        } else if ((v = cli_option_value(argc, argv, &i, "--on-request",
                                         NULL, &missing))) {
            if (!cli_parse_signal(v, &a->request_sig))
                return run_usage("--on-request takes a signal (TERM, INT, "
                                 "HUP, QUIT, USR1, USR2, KILL or a number) "
                                 "or none, not",
                                 v);
            a->request_given = true;
        } else if ((v = cli_option_value(argc, argv, &i, "--command", "-c",
                                         &missing))) {
            if (shell_cmd != NULL)
                return run_usage("--command given twice", NULL);
            shell_cmd = v;
        } else {
            return run_usage(missing ? "missing value after"
                                     : "unknown option",
                             arg);
        }
    }
    /* A RedLock is made of reentrant locks, and has no fencing token: no
     * counter kept apart on independent masters is safe to hand out. */
    if (g->redlock != NULL && kind_given)
        return run_usage("--kind does not go with --redlock, which takes "
                         "a reentrant lock on each master",
                         NULL);
    if (g->redlock != NULL && a->fence_env)
        return run_usage("--fence-env does not go with --redlock: RedLock "
                         "gives no fencing token",
                         NULL);
    if (a->permits > 0 && (kind_given || a->fence_env || g->redlock))
        return run_usage("--permits takes a permit of a semaphore: it does "
                         "not go with --kind, --fence-env or --redlock",
                         NULL);
    /* A RedLock's holds and a semaphore's permits have no one request
     * channel to listen on. */
    if (a->request_given && a->request_sig != 0 &&
        (g->redlock != NULL || a->permits > 0))
        return run_usage("--on-request goes with a lock on one server, not "
                         "with --redlock or --permits",
                         NULL);
    if (g->redlock != NULL || a->permits > 0)
        a->request_sig = 0;
    if (a->max_hold_ms > 0 && a->lease_ms != HILOCK_LEASE_WATCHDOG)
        return run_usage("--max-hold caps the watchdog's renewals: it does "
                         "not go with --lease, which has none",
                         NULL);
    if (a->lock_delay_ms > 0 &&
        (a->permits > 0 || strcmp(a->kind->name, "read") == 0 ||
         strcmp(a->kind->name, "write") == 0))
        return run_usage("--lock-delay covers reentrant and fair locks "
                         "(and --redlock): not a read-write lock's sides or "
                         "--permits",
                         NULL);
    if (a->name == NULL || a->name[0] == '\0')
        return run_usage("missing lock NAME", NULL);
    if (shell_cmd != NULL) {
        if (i < argc)
            return run_usage("--command takes the place of -- CMD: give "
                             "one of them",
                             NULL);
        a->shell_cmd[0] = "/bin/sh";
        a->shell_cmd[1] = "-c";
        a->shell_cmd[2] = (char *)shell_cmd;
        a->shell_cmd[3] = NULL;
        a->cmd = a->shell_cmd;
        return 0;
    }
    if (i >= argc)
        return run_usage("missing -- before the command", NULL);
    if (i + 1 >= argc)
        return run_usage("missing the command after --", NULL);
    a->cmd = argv + i + 1;
    return 0;
}

/* environ with HILOCK_FENCE=token in place of any HILOCK_FENCE it had.
 * The process environment itself stays untouched, as setenv() could race
 * with getenv() on the library's thread. */
static char **fence_environ(uint64_t token, char *entry, size_t cap)
{
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (env == NULL)
        return NULL;
    snprintf(entry, cap, "HILOCK_FENCE=%llu", (unsigned long long)token);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "HILOCK_FENCE=", 13) != 0)
            env[k++] = environ[i];
    env[k] = entry;
    return env;
}

/* The forked child, up to exec: async-signal-safe calls only, since the
 * library's thread may have held any lock at the fork.  Signals stay
 * blocked until every disposition is back to its default, so that none
 * runs hilock's handler in here; one that came meanwhile then acts as it
 * would on CMD.  Handlers need no reset, exec does that; what exec keeps
 * is an ignored disposition, and the mask.
 *
 * parent is hilock's pid as it was before the fork. */
static _Noreturn void exec_child(char **cmd, char **env, int err_fd,
                                 pid_t parent)
{
    /* The parent does both as well: whichever comes first, CMD is in its
     * group, with the terminal, before anyone signals it or it reads.
     * tcsetpgrp() from here, a background group, would raise SIGTTOU,
     * which is blocked. */
    setpgid(0, 0);
    if (tty_fd >= 0)
        tcsetpgrp(tty_fd, getpid());
    /* The death signal goes when the thread that forked ends, which is
     * hilock's main thread: it outlives CMD unless hilock dies.  It is
     * kept across exec, except into a set-user-ID or privileged program. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* hilock may have died before the prctl(): then no signal will come,
     * and nobody holds the lock for CMD. */
    if (getppid() != parent)
        _exit(CLI_EXIT_SOFTWARE);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction old;
        if (sigaction(sig, NULL, &old) != 0 || old.sa_handler != SIG_IGN)
            continue;
        if (!sigismember(&ignored_at_start, sig))
            sigaction(sig, &dfl, NULL);
    }
    /* glibc keeps the signals between 32 and SIGRTMIN for itself and
     * refuses to touch them through sigaction(); a parent that spawned
     * hilock with posix_spawn() left them ignored, so reset them with the
     * system call.  An all-zero kernel sigaction is SIG_DFL with no flags
     * on every architecture, whatever the order of its fields. */
    static const unsigned long zero_action[8];
    for (int sig = 32; sig < SIGRTMIN; sig++)
        syscall(SYS_rt_sigaction, sig, zero_action, NULL, (NSIG - 1) / 8);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvpe(cmd[0], cmd, env);
    int err = errno;
    ssize_t n = write(err_fd, &err, sizeof err);
    (void)n;
    _exit(CLI_EXIT_NOT_FOUND);
}

/* The controlling terminal, open, when hilock's group is in its
 * foreground; -1 when there is none or hilock runs in the background. */
static int foreground_tty(void)
{
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0 && tcgetpgrp(fd) != getpgrp()) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Hand the terminal to CMD's group, if hilock's group has it. */
static void give_terminal(pid_t pgid)
{
    if (tty_fd >= 0 && tcgetpgrp(tty_fd) == getpgrp())
        tcsetpgrp(tty_fd, pgid);
}

/* Take the terminal back from CMD's group, if that group still has it,
 * so that hilock's group (a shell script, say) can go on using it.
 * hilock is in the background then, where tcsetpgrp() would raise
 * SIGTTOU unless it is blocked. */
static void take_terminal(pid_t pgid)
{
    if (tty_fd < 0 || tcgetpgrp(tty_fd) != pgid)
        return;
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    pthread_sigmask(SIG_BLOCK, &ttou, &old);
    tcsetpgrp(tty_fd, getpgrp());
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* CMD stopped with sig while it had the terminal: do what the terminal
 * would have done to hilock's group had CMD been in it, and stop that
 * group, so that the shell sees the job stopped and gets the terminal
 * back.  SIGSTOP (a program's way to stop itself after its own ^Z
 * handling) becomes SIGTSTP, which the kernel discards in a group that
 * has no shell to continue it.  Once hilock runs again, CMD does too. */
static void follow_stop(pid_t pgid, int sig)
{
    if (tty_fd < 0)
        return;
    take_terminal(pgid);
    kill(0, sig == SIGSTOP ? SIGTSTP : sig);
    give_terminal(pgid);
    kill(-pgid, SIGCONT);
}

/* Start CMD; returns 0, or the exit status when it cannot be started.
 * posix_spawn would be simpler, but glibc's leaves the signals it keeps
 * for itself (32 and 33) ignored in the new program. */
static int spawn_cmd(char **cmd, char **env, pid_t *pid)
{
    int err_pipe[2];
    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
        perror("hilock: pipe");
        return CLI_EXIT_SOFTWARE;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t parent = getpid();
    pid_t p = fork();
    if (p == 0)
        exec_child(cmd, env, err_pipe[1], parent);
    int fork_errno = errno;
    if (p > 0) {
        /* After the exec, setpgid() fails: the child did it already. */
        setpgid(p, p);
        if (tty_fd >= 0)
            tcsetpgrp(tty_fd, p);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(err_pipe[1]);
    if (p < 0) {
        close(err_pipe[0]);
        fprintf(stderr, "hilock: fork: %s\n", strerror(fork_errno));
        return CLI_EXIT_SOFTWARE;
    }
    /* End of file: the exec closed the pipe, CMD runs. */
    int err = 0;
    ssize_t n;
    while ((n = read(err_pipe[0], &err, sizeof err)) < 0 && errno == EINTR)
        ;
    close(err_pipe[0]);
    if (n <= 0) {
        *pid = p;
        return 0;
    }
    while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
        ;
    take_terminal(p);
    fprintf(stderr, "hilock: %s: %s\n", cmd[0], strerror(err));
    return err == ENOENT || err == ENOTDIR ? CLI_EXIT_NOT_FOUND
                                           : CLI_EXIT_CANNOT_EXEC;
}

/* Wait for the acquire to complete, cancelling it if a signal asks hilock
 * to stop.  Returns that signal, or 0. */
/* How long a wait goes on with the server out of reach before hilock
 * says so, and how often it looks. */
#define RUN_UNREACHABLE_SAY_MS 2000
#define RUN_REACH_POLL_MS 500

/* Says, once, that the server has been out of reach for a while during
 * the wait, and again when it is back: a silent wait on a dead server
 * looks like a lock held by someone. */
static void tell_reach(const cli_runlock *lk, const char *name,
                       int64_t *unreachable_since, bool *told)
{
    if (lk->reachable == NULL)
        return;
    int64_t now = cli_now_ms();
    if (lk->reachable(lk->impl)) {
        if (*told)
            fprintf(stderr, "hilock: the server is reachable again (%s)\n",
                    name);
        *unreachable_since = 0;
        *told = false;
        return;
    }
    if (*unreachable_since == 0)
        *unreachable_since = now;
    if (!*told && now - *unreachable_since >= RUN_UNREACHABLE_SAY_MS) {
        *told = true;
        fprintf(stderr, "hilock: waiting for %s, but the server has been "
                        "out of reach for %lld ms; still trying\n",
                name, (long long)(now - *unreachable_since));
    }
}

static int wait_acquired(const cli_runlock *lk, uint64_t op, run_state *st,
                         const char *name)
{
    int stop_sig = 0;
    int64_t unreachable_since = 0;
    bool told = false;
    while (!atomic_load(&st->acquire_done)) {
        tell_reach(lk, name, &unreachable_since, &told);
        wait_wake(lk->reachable != NULL ? RUN_REACH_POLL_MS : -1);
        int sig = take_terminating_signal();
        if (sig != 0 && stop_sig == 0) {
            stop_sig = sig;
            /* The callback still comes, with ECANCELED, or with OK when
             * the grant won the race; the hold is then released below. */
            lk->cancel(lk->impl, op);
        }
    }
    /* Taken: the server answered, whether or not every connection is
     * back yet. */
    if (told && st->acquire_status == HILOCK_OK)
        fprintf(stderr, "hilock: the server is reachable again (%s)\n",
                name);
    return stop_sig;
}

static int acquire_failed(const run_args *a, const run_state *st)
{
    int rc = st->acquire_status;
    if (rc == HILOCK_EBUSY && a->permits > 0) {
        fprintf(stderr, "hilock: no permit of %s was free; not acquired "
                        "within %lld ms\n",
                a->name, a->wait_ms);
        return a->conflict_exit;
    }
    if (rc == HILOCK_EBUSY) {
        fprintf(stderr, "hilock: %s is held by another owner; not acquired "
                        "within %lld ms\n",
                a->name, a->wait_ms);
        return a->conflict_exit;
    }
    if (rc == HILOCK_EEXPIRED) {
        fprintf(stderr, "hilock: %s: the masters granted it, but the lease "
                        "had run out by the time a quorum had; not acquired "
                        "within %lld ms\n",
                a->name, a->wait_ms);
        return a->conflict_exit;
    }
    if (rc == HILOCK_ENOQUORUM) {
        fprintf(stderr, "hilock: cannot acquire %s: too few masters could "
                        "vote for a quorum: %s\n",
                a->name, st->acquire_detail);
        return CLI_EXIT_UNAVAILABLE;
    }
    char what[300];
    snprintf(what, sizeof what, "cannot acquire %s", a->name);
    return cli_failed(what, rc, st->acquire_detail);
}

/* Run CMD to its end, passing signals on, passing each request to give
 * the lock up on as st->request_sig (one that came before CMD started
 * too), and stopping it if the lease is lost (then *lost_seen is set).
 * Signals go to CMD's group, whose id is pid: until CMD is reaped, that
 * id cannot pass to another process, so the group is never signalled
 * after that.  Returns CMD's wait status. */
static int supervise(pid_t pid, run_state *st, const char *name,
                     bool *lost_seen)
{
    int asked_seen = 0;
    int64_t kill_at = 0; /* when SIGKILL is due; 0: not scheduled */
    for (;;) {
        if (child_changed) {
            child_changed = 0;
            int ws;
            pid_t r = waitpid(pid, &ws, WNOHANG | WUNTRACED);
            if (r == pid && !WIFSTOPPED(ws))
                return ws;
            if (r == pid)
                follow_stop(pid, WSTOPSIG(ws));
        }
        if (continued) {
            /* Continued by `fg`, after running in the background. */
            continued = 0;
            give_terminal(pid);
        }
        for (size_t i = 0; i < N_FORWARDED; i++) {
            int sig = forwarded[i];
            if (!pending_signal[sig])
                continue;
            pending_signal[sig] = 0;
            kill(-pid, sig);
        }
        int asked = atomic_load(&st->asked);
        if (asked != asked_seen && !*lost_seen) {
            asked_seen = asked;
            char reason[HILOCK_REQUEST_REASON_MAX + 1];
            pthread_mutex_lock(&st->asked_mutex);
            memcpy(reason, st->asked_reason, sizeof reason);
            pthread_mutex_unlock(&st->asked_mutex);
            fprintf(stderr, "hilock: asked to give up the lock %s%s%s%s; "
                            "sending SIG%s to %d and its process group\n",
                    name, reason[0] ? " (" : "", reason,
                    reason[0] ? ")" : "", sigabbrev_np(st->request_sig),
                    (int)pid);
            kill(-pid, st->request_sig);
        }
        if (atomic_load(&st->lost) && !*lost_seen) {
            *lost_seen = true;
            fprintf(stderr, "hilock: lost the lock %s%s%s%s; stopping %d "
                            "and its process group with SIGTERM\n",
                    name, st->lost_why[0] ? " (" : "", st->lost_why,
                    st->lost_why[0] ? ")" : "", (int)pid);
            kill(-pid, SIGTERM);
            kill_at = cli_now_ms() + RUN_GRACE_MS;
        }
        int timeout = -1;
        if (kill_at != 0) {
            int64_t left = kill_at - cli_now_ms();
            if (left <= 0) {
                fprintf(stderr, "hilock: %d still runs %d ms after SIGTERM; "
                                "sending SIGKILL to its group\n",
                        (int)pid, RUN_GRACE_MS);
                kill(-pid, SIGKILL);
                kill_at = 0;
            } else {
                timeout = (int)left;
            }
        }
        wait_wake(timeout);
    }
}

int cli_run(const cli_globals *given, int argc, char **argv)
{
    run_args a = {0};
    int rc = parse_args(given, argc, argv, &a);
    if (rc < 0)
        return cli_help("run");
    if (rc != 0)
        return rc;
    /* run's --describe, as the global one, goes on the clients' cards. */
    cli_globals gd = *given;
    if (a.description != NULL)
        gd.description = a.description;
    gd.max_hold_ms = a.max_hold_ms;
    gd.lock_delay_ms = a.lock_delay_ms;
    gd.lock_delay_set = a.lock_delay_ms >= 0;
    const cli_globals *g = &gd;
    if (setup_signals() != 0)
        return CLI_EXIT_SOFTWARE;
    cli_runlock lk;
    rc = a.permits > 0      ? cli_permits_open(g, a.name, (int)a.permits,
                                               &lk)
         : g->redlock != NULL ? cli_redlock_open(g, a.name, &lk)
                              : single_open(g, a.kind, a.name, &lk);
    if (rc != 0)
        return rc;
    int sig = take_terminating_signal();
    if (sig != 0) {
        lk.close(lk.impl);
        die_of(sig);
    }
    run_state st;
    memset(&st, 0, sizeof st);
    atomic_init(&st.acquire_done, false);
    atomic_init(&st.lost, false);
    atomic_init(&st.asked, 0);
    pthread_mutex_init(&st.asked_mutex, NULL);
    st.request_sig = a.request_sig;
    int status = CLI_EXIT_SOFTWARE;
    uint64_t op = 0;
    /* The sync release below acts for this thread's owner id, so the
     * async acquire (used for its cancel) takes the same one. */
    rc = lk.acquire(lk.impl, hilock_thread_owner(), a.wait_ms, a.lease_ms,
                    a.fence_env, &st, &op);
    if (rc != HILOCK_OK) {
        char what[300];
        snprintf(what, sizeof what, "cannot acquire %s", a.name);
        status = cli_failed(what, rc, NULL);
        goto out;
    }
    sig = wait_acquired(&lk, op, &st, a.name);
    if (lk.acquire_ended != NULL)
        lk.acquire_ended(lk.impl);
    if (st.acquire_status != HILOCK_OK) {
        if (sig != 0) {
            lk.close(lk.impl);
            die_of(sig);
        }
        status = acquire_failed(&a, &st);
        goto out;
    }

    pid_t pid = 0;
    bool lost_seen = false;
    char fence[48];
    char **env = environ;
    if (sig == 0 && a.fence_env) {
        env = fence_environ(st.token, fence, sizeof fence);
        if (env == NULL) {
            fprintf(stderr, "hilock: out of memory\n");
            status = CLI_EXIT_SOFTWARE;
        }
    }
    if (sig == 0 && env != NULL) {
        tty_fd = foreground_tty();
        status = spawn_cmd(a.cmd, env, &pid);
        if (status == 0) {
            int ws = supervise(pid, &st, a.name, &lost_seen);
            take_terminal(pid);
            status = WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : WEXITSTATUS(ws);
        }
    }
    if (env != environ)
        free(env);

    rc = lk.release(lk.impl);
    if (rc == HILOCK_ELEASELOST || atomic_load(&st.lost)) {
        /* Noticed only after CMD ended, but the loss itself may date from
         * while it ran: nobody can tell it kept the lock throughout. */
        if (!lost_seen)
            fprintf(stderr, "hilock: the lock %s was lost%s%s%s before %s "
                            "could release it\n",
                    a.name, st.lost_why[0] ? " (" : "", st.lost_why,
                    st.lost_why[0] ? ")" : "", pid != 0 ? a.cmd[0] : "hilock");
        status = CLI_EXIT_LEASE_LOST;
    } else if (rc != HILOCK_OK) {
        fprintf(stderr, "hilock: could not release %s: %s (%s); it expires "
                        "by itself\n",
                a.name, hilock_strerror(rc), hilock_last_error());
    }
    if (sig != 0) {
        lk.close(lk.impl);
        die_of(sig);
    }
out:
    lk.close(lk.impl);
    pthread_mutex_destroy(&st.asked_mutex);
    if (tty_fd >= 0)
        close(tty_fd);
    close(wake_fds[0]);
    close(wake_fds[1]);
    return status;
}
