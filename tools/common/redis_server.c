/* Private redis-server processes; see redis_server.h for the contract. */
#include "redis_server.h"
#include "redis_server_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define HL_RS_DEFAULT_START_MS 10000
#define HL_RS_DEFAULT_COMMAND_MS 5000
#define HL_RS_STOP_GRACE_MS 5000
#define HL_RS_POLL_MS 10
#define HL_RS_START_ATTEMPTS 5
#define HL_RS_MAX_ARGS 64
#define HL_RS_MAX_REPLY (64u << 20)
#define HL_RS_MAX_DEPTH 32
/* Ports are drawn from [HL_RS_PORT_BASE, start of the ephemeral range). */
#define HL_RS_PORT_BASE 10000



typedef struct hl_rs_conn {
    int fd;
    int port;
    SSL_CTX *ctx;
    SSL *ssl;
    /* OpenSSL writes with write(2), which raises SIGPIPE on a dead peer;
     * the signal is blocked for the connection's life and any instance
     * of it raised meanwhile is swallowed on close. */
    bool sigpipe_blocked;
    bool sigpipe_was_pending;
    sigset_t old_mask;
} hl_rs_conn;

typedef struct hl_rs_buf {
    char *data;
    size_t len;
    size_t cap;
} hl_rs_buf;

static pthread_mutex_t hl_rs_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static hl_redis_server *hl_rs_registry;
static pthread_once_t hl_rs_atexit_once = PTHREAD_ONCE_INIT;
static uint64_t hl_rs_port_seed;

void hl_rs_fail(int flags, const char *fmt, ...)
{
    va_list ap;

    if (flags & HL_RS_QUIET)
        return;
    va_start(ap, fmt);
    fputs("hilock redis_server: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int64_t hl_rs_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void hl_rs_sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static char *hl_rs_strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

__attribute__((format(printf, 1, 2)))
static char *hl_rs_format(const char *fmt, ...)
{
    va_list ap;
    char *out;
    int n;

    va_start(ap, fmt);
    n = vasprintf(&out, fmt, ap);
    va_end(ap);
    return n < 0 ? NULL : out;
}

/* redis.conf has quoting rules of its own; rather than escape, refuse the
 * few characters that would need it. */
static bool hl_rs_quotable(const char *s)
{
    return s == NULL || strpbrk(s, "\"\\\r\n") == NULL;
}

/* ---- process registry and cleanup at exit ---- */

static void hl_rs_atexit(void)
{
    hl_redis_server_stop_all();
}

static void hl_rs_install_atexit(void)
{
    atexit(hl_rs_atexit);
}

static void hl_rs_register(hl_redis_server *s)
{
    pthread_once(&hl_rs_atexit_once, hl_rs_install_atexit);
    pthread_mutex_lock(&hl_rs_registry_lock);
    s->prev = NULL;
    s->next = hl_rs_registry;
    if (hl_rs_registry)
        hl_rs_registry->prev = s;
    hl_rs_registry = s;
    pthread_mutex_unlock(&hl_rs_registry_lock);
}

static void hl_rs_unregister(hl_redis_server *s)
{
    pthread_mutex_lock(&hl_rs_registry_lock);
    if (s->prev)
        s->prev->next = s->next;
    else if (hl_rs_registry == s)
        hl_rs_registry = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
    pthread_mutex_unlock(&hl_rs_registry_lock);
}

void hl_redis_server_stop_all(void)
{
    pid_t self = getpid();
    hl_redis_server *s;

    for (;;) {
        pthread_mutex_lock(&hl_rs_registry_lock);
        for (s = hl_rs_registry; s != NULL; s = s->next)
            if (s->owner == self)
                break;
        pthread_mutex_unlock(&hl_rs_registry_lock);
        if (s == NULL)
            return;
        hl_redis_server_stop(s);
    }
}

/* ---- ports ---- */

static bool hl_rs_port_bindable(int port)
{
    struct sockaddr_in sa;
    bool ok;
    int fd;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/* The port of a killed server must stay reserved for its restart. */
static bool hl_rs_port_reserved_locked(const hl_redis_server *self,
                                       int port)
{
    const hl_redis_server *s;

    for (s = hl_rs_registry; s != NULL; s = s->next)
        if (s != self && s->port == port)
            return true;
    return false;
}

static int hl_rs_ephemeral_low(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    int low = 32768;

    if (f) {
        if (fscanf(f, "%d", &low) != 1)
            low = 32768;
        fclose(f);
    }
    return low;
}

static int hl_rs_kernel_port(void)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    int fd, port = -1;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0
        && getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/* A port from the ephemeral range could later be handed to an outgoing
 * connection, and a client that keeps reconnecting to a killed server on
 * such a port can connect to itself (TCP simultaneous open).  So draw from
 * below the range, and ask the kernel only when that space is too small.
 * Sets s->port under the registry lock so that concurrent starts in this
 * process never pick the same port. */
/* A cluster node also listens on its bus port, its port + 10000. */
#define HL_RS_BUS_OFFSET 10000

static bool hl_rs_cluster_node(const hl_redis_server *s)
{
    return s->extra_config != NULL
           && strstr(s->extra_config, "cluster-enabled yes") != NULL;
}

static int hl_rs_pick_port(hl_redis_server *s)
{
    /* A cluster node's bus port must be free too, and stay below the
     * ephemeral range, where any outgoing connection of the machine may
     * hold it: its own port is drawn 10000 lower. */
    bool bus = hl_rs_cluster_node(s);
    int low = hl_rs_ephemeral_low() - (bus ? HL_RS_BUS_OFFSET : 0);
    int attempt, port = -1;
    struct timespec ts;

    pthread_mutex_lock(&hl_rs_registry_lock);
    if (hl_rs_port_seed == 0) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        hl_rs_port_seed = ((uint64_t)getpid() << 32)
                          ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec;
        hl_rs_port_seed |= 1;
    }
    for (attempt = 0; low - HL_RS_PORT_BASE >= 1000 && attempt < 200;
         attempt++) {
        hl_rs_port_seed ^= hl_rs_port_seed << 13;
        hl_rs_port_seed ^= hl_rs_port_seed >> 7;
        hl_rs_port_seed ^= hl_rs_port_seed << 17;
        port = HL_RS_PORT_BASE
               + (int)(hl_rs_port_seed % (uint64_t)(low - HL_RS_PORT_BASE));
        if (!hl_rs_port_reserved_locked(s, port) && hl_rs_port_bindable(port)
            && (!bus
                || (!hl_rs_port_reserved_locked(s, port + HL_RS_BUS_OFFSET)
                    && hl_rs_port_bindable(port + HL_RS_BUS_OFFSET))))
            break;
        port = -1;
    }
    /* The kernel's ports lie in the ephemeral range: a bus port 10000
     * above one may lie past 65535. */
    for (attempt = 0; port < 0 && !bus && attempt < 20; attempt++) {
        port = hl_rs_kernel_port();
        if (port > 0 && hl_rs_port_reserved_locked(s, port))
            port = -1;
    }
    if (port > 0)
        s->port = port;
    pthread_mutex_unlock(&hl_rs_registry_lock);
    if (port < 0)
        hl_rs_fail(0, "no free loopback port");
    return port;
}

/* ---- files ---- */

static int hl_rs_write_config(const hl_redis_server *s)
{
    FILE *f = fopen(s->conf_path, "w");

    if (f == NULL) {
        hl_rs_fail(0, "%s: %s", s->conf_path, strerror(errno));
        return -1;
    }
    fprintf(f, "bind 127.0.0.1\n"
               "protected-mode no\n");
    if (s->tls) {
        fprintf(f, "port 0\n"
                   "tls-port %d\n"
                   "tls-cert-file \"%s\"\n"
                   "tls-key-file \"%s\"\n"
                   "tls-auth-clients %s\n",
                s->port, s->tls_cert, s->tls_key, s->tls_auth_clients);
        if (s->tls_ca)
            fprintf(f, "tls-ca-cert-file \"%s\"\n", s->tls_ca);
    } else {
        fprintf(f, "port %d\n", s->port);
    }
    fprintf(f, "daemonize no\n"
               "supervised no\n"
               "dir \"%s\"\n"
               "logfile \"%s\"\n"
               "loglevel notice\n",
            s->dir, s->log_path);
    /* Persistence is off so that a restart starts from an empty dataset,
     * which is what a crashed master without AOF looks like to a lock.  A
     * sentinel keeps no dataset. */
    if (!s->sentinel)
        fprintf(f, "save \"\"\n"
                   "appendonly no\n"
                   "enable-debug-command yes\n");
    if (s->password)
        fprintf(f, "requirepass \"%s\"\n", s->password);
    if (s->extra_config)
        fprintf(f, "%s\n", s->extra_config);
    if (fclose(f) != 0) {
        hl_rs_fail(0, "%s: %s", s->conf_path, strerror(errno));
        return -1;
    }
    return 0;
}

static off_t hl_rs_log_size(const hl_redis_server *s)
{
    struct stat st;

    return stat(s->log_path, &st) == 0 ? st.st_size : 0;
}

/* Returns at most the last `max` bytes of the log written since `from`,
 * NUL-terminated, or NULL. */
static char *hl_rs_read_log(const hl_redis_server *s, off_t from,
                            size_t max, size_t *len_out)
{
    off_t size = hl_rs_log_size(s);
    size_t want, got = 0;
    char *buf;
    ssize_t n;
    int fd;

    if (size < from)
        from = 0;
    if ((size_t)(size - from) > max)
        from = size - (off_t)max;
    want = (size_t)(size - from);
    buf = malloc(want + 1);
    if (buf == NULL)
        return NULL;
    fd = open(s->log_path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        while (got < want) {
            n = pread(fd, buf + got, want - got, from + (off_t)got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        close(fd);
    }
    buf[got] = '\0';
    *len_out = got;
    return buf;
}

static bool hl_rs_log_contains(const hl_redis_server *s, off_t from,
                               const char *needle)
{
    size_t len;
    char *log = hl_rs_read_log(s, from, 1u << 20, &len);
    bool found = log != NULL && strstr(log, needle) != NULL;

    free(log);
    return found;
}

bool hl_rs_log_says_port_busy(const hl_redis_server *s, off_t from)
{
    return hl_rs_log_contains(s, from, "Address already in use")
           || hl_rs_log_contains(s, from, "Failed listening on port");
}

void hl_rs_print_log_tail(const hl_redis_server *s, off_t from)
{
    size_t len, start;
    int lines = 0;
    char *log = hl_rs_read_log(s, from, 8192, &len);

    if (log == NULL)
        return;
    start = len;
    while (start > 0) {
        if (log[start - 1] == '\n' && start != len && ++lines == 15)
            break;
        start--;
    }
    fprintf(stderr, "hilock redis_server: last lines of %s:\n%s%s",
            s->log_path, log + start,
            len > 0 && log[len - 1] != '\n' ? "\n" : "");
    free(log);
}

static int hl_rs_remove_entry(const char *path, const struct stat *st,
                              int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    if (remove(path) != 0 && errno != ENOENT)
        hl_rs_fail(0, "remove %s: %s", path, strerror(errno));
    return 0;
}

static void hl_rs_remove_tree(const char *dir)
{
    if (dir)
        nftw(dir, hl_rs_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static char *hl_rs_find_exe(const char *env, const char *fallback)
{
    const char *name = getenv(env);
    const char *path;
    char *dirs, *dir, *save, *candidate;

    if (name == NULL || *name == '\0')
        name = fallback;
    if (strchr(name, '/')) {
        if (access(name, X_OK) == 0)
            return strdup(name);
        hl_rs_fail(0, "%s: %s", name, strerror(errno));
        return NULL;
    }
    path = getenv("PATH");
    dirs = strdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
    if (dirs == NULL)
        return NULL;
    for (dir = strtok_r(dirs, ":", &save); dir != NULL;
         dir = strtok_r(NULL, ":", &save)) {
        candidate = hl_rs_format("%s/%s", *dir ? dir : ".", name);
        if (candidate && access(candidate, X_OK) == 0) {
            free(dirs);
            return candidate;
        }
        free(candidate);
    }
    free(dirs);
    hl_rs_fail(0, "%s not found on PATH (set %s)", name, env);
    return NULL;
}

/* ---- processes ---- */

static void hl_rs_write_stderr(const char *msg)
{
    ssize_t n = write(2, msg, strlen(msg));

    (void)n;
}

/* Runs in the forked child, where another thread of the parent may have
 * held a lock at fork time: only async-signal-safe calls until exec. */
__attribute__((noreturn))
static void hl_rs_exec_child(const hl_redis_server *s, pid_t parent,
                             long max_fd, char *const argv[])
{
    static const int reset[] = { SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT,
                                 SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD };
    struct sigaction dfl;
    sigset_t none;
    size_t i;
    int in, log;
    long fd;

    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(127);
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (i = 0; i < sizeof reset / sizeof reset[0]; i++)
        sigaction(reset[i], &dfl, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    in = open("/dev/null", O_RDONLY);
    log = open(s->log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (in < 0 || log < 0 || dup2(in, 0) < 0 || dup2(log, 1) < 0
        || dup2(log, 2) < 0)
        _exit(127);
    /* An inherited socket would keep the test's connections to other
     * servers open after the test closes them. */
    if (close_range(3, ~0U, 0) != 0)
        for (fd = 3; fd < max_fd; fd++)
            close((int)fd);
    if (chdir(s->dir) != 0)
        _exit(127);
    execv(argv[0], argv);
    hl_rs_write_stderr("hilock redis_server: cannot execute ");
    hl_rs_write_stderr(argv[0]);
    hl_rs_write_stderr("\n");
    _exit(127);
}

int hl_rs_spawn(hl_redis_server *s, off_t *log_from)
{
    char *argv[] = { s->exe, s->conf_path, NULL };
    long max_fd = sysconf(_SC_OPEN_MAX);
    pid_t parent = getpid();
    pid_t pid;

    if (max_fd < 0 || max_fd > 65536)
        max_fd = 65536;
    *log_from = hl_rs_log_size(s);
    pid = fork();
    if (pid < 0) {
        hl_rs_fail(0, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0)
        hl_rs_exec_child(s, parent, max_fd, argv);
    s->pid = pid;
    s->paused = false;
    return 0;
}

void hl_rs_reap(hl_redis_server *s)
{
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    s->pid = 0;
    s->paused = false;
}

static int hl_rs_exchange(const hl_redis_server *s, int argc,
                          const char *const argv[], char *reply, size_t cap,
                          int timeout_ms, int flags);

/* Anything but -LOADING proves that the event loop runs, including the
 * -NOAUTH a password-protected server gives before AUTH. */
static bool hl_rs_answers(const hl_redis_server *s)
{
    static const char *const ping[] = { "PING" };
    char reply[128];
    int type = hl_rs_exchange(s, 1, ping, reply, sizeof reply, 1000,
                              HL_RS_QUIET | HL_RS_NO_AUTH);

    return type > 0 && strncmp(reply, "-LOADING", 8) != 0;
}

/* Returns 1 when ready, 0 when the process exited (s->pid is then 0), -1
 * on timeout (the process is then killed).  Redis logs "Ready to accept
 * connections" only after its listening sockets are bound, so the log,
 * unlike a connection attempt, cannot be fooled by some other process
 * holding the port. */
int hl_rs_wait_ready(hl_redis_server *s, off_t log_from,
                            int64_t deadline)
{
    for (;;) {
        pid_t r = waitpid(s->pid, NULL, WNOHANG);

        if (r == s->pid || (r < 0 && errno == ECHILD)) {
            s->pid = 0;
            return 0;
        }
        /* A sentinel logs its id once its configuration is loaded, and
         * never the server's line. */
        if (hl_rs_log_contains(s, log_from,
                               s->sentinel ? "Sentinel ID is"
                                           : "Ready to accept connections")
            && (s->tls || hl_rs_answers(s)))
            return 1;
        if (hl_rs_now_ms() >= deadline) {
            hl_rs_fail(0, "port %d: not ready within %d ms", s->port,
                       s->start_timeout_ms);
            hl_rs_print_log_tail(s, log_from);
            kill(s->pid, SIGKILL);
            hl_rs_reap(s);
            return -1;
        }
        hl_rs_sleep_ms(HL_RS_POLL_MS);
    }
}

static void hl_rs_free(hl_redis_server *s)
{
    free(s->exe);
    free(s->dir);
    free(s->conf_path);
    free(s->log_path);
    free(s->extra_config);
    free(s->password);
    free(s->auth_user);
    free(s->auth_password);
    free(s->tls_cert);
    free(s->tls_key);
    free(s->tls_ca);
    free(s->tls_auth_clients);
    free(s->tls_client_cert);
    free(s->tls_client_key);
    free(s);
}

static bool hl_rs_config_valid(const hl_redis_server_config *cfg)
{
    const char *ac = cfg->tls_auth_clients;

    if (!hl_rs_quotable(cfg->password) || !hl_rs_quotable(cfg->tls_cert_file)
        || !hl_rs_quotable(cfg->tls_key_file)
        || !hl_rs_quotable(cfg->tls_ca_cert_file)) {
        hl_rs_fail(0, "quotes, backslashes and newlines are not supported "
                      "in passwords and paths");
        return false;
    }
    if ((cfg->tls_cert_file && cfg->tls_key_file == NULL)
        || (cfg->tls_client_cert_file && cfg->tls_client_key_file == NULL)) {
        hl_rs_fail(0, "a certificate needs its key");
        return false;
    }
    if (ac && strcmp(ac, "yes") && strcmp(ac, "optional")
        && strcmp(ac, "no")) {
        hl_rs_fail(0, "tls_auth_clients must be yes, optional or no");
        return false;
    }
    return true;
}

static hl_redis_server *hl_rs_create(const hl_redis_server_config *cfg)
{
    hl_redis_server *s = calloc(1, sizeof *s);
    const char *tmp = getenv("TMPDIR");

    if (s == NULL)
        return NULL;
    s->owner = getpid();
    s->start_timeout_ms = cfg->start_timeout_ms > 0
                              ? cfg->start_timeout_ms
                              : HL_RS_DEFAULT_START_MS;
    s->tls = cfg->tls_cert_file != NULL;
    s->sentinel = cfg->sentinel;
    s->extra_config = hl_rs_strdup(cfg->extra_config);
    s->password = hl_rs_strdup(cfg->password);
    s->auth_password = hl_rs_strdup(cfg->password);
    s->tls_cert = hl_rs_strdup(cfg->tls_cert_file);
    s->tls_key = hl_rs_strdup(cfg->tls_key_file);
    s->tls_ca = hl_rs_strdup(cfg->tls_ca_cert_file);
    s->tls_auth_clients = strdup(cfg->tls_auth_clients
                                     ? cfg->tls_auth_clients
                                     : "optional");
    s->tls_client_cert = hl_rs_strdup(cfg->tls_client_cert_file
                                          ? cfg->tls_client_cert_file
                                          : cfg->tls_cert_file);
    s->tls_client_key = hl_rs_strdup(cfg->tls_client_cert_file
                                         ? cfg->tls_client_key_file
                                         : cfg->tls_key_file);
    s->dir = hl_rs_format("%s/hilock-redis-XXXXXX",
                          tmp && *tmp ? tmp : "/tmp");
    if ((cfg->extra_config && !s->extra_config)
        || (cfg->password && (!s->password || !s->auth_password))
        || (cfg->tls_cert_file && (!s->tls_cert || !s->tls_key))
        || (cfg->tls_ca_cert_file && !s->tls_ca) || !s->tls_auth_clients
        || (s->tls && (!s->tls_client_cert || !s->tls_client_key))
        || !s->dir) {
        hl_rs_fail(0, "out of memory");
        hl_rs_free(s);
        return NULL;
    }
    if (mkdtemp(s->dir) == NULL) {
        hl_rs_fail(0, "mkdtemp %s: %s", s->dir, strerror(errno));
        free(s->dir);
        s->dir = NULL;
        hl_rs_free(s);
        return NULL;
    }
    s->conf_path = hl_rs_format("%s/redis.conf", s->dir);
    s->log_path = hl_rs_format("%s/redis.log", s->dir);
    s->exe = s->sentinel
                 ? hl_rs_find_exe("HILOCK_REDIS_SENTINEL", "redis-sentinel")
                 : hl_rs_find_exe("HILOCK_REDIS_SERVER", "redis-server");
    if (!s->conf_path || !s->log_path || !s->exe) {
        hl_rs_remove_tree(s->dir);
        hl_rs_free(s);
        return NULL;
    }
    return s;
}

hl_redis_server *hl_redis_server_start(const hl_redis_server_config *cfg)
{
    static const hl_redis_server_config defaults;
    hl_redis_server *s;
    off_t log_from;
    int attempt, ready;

    if (cfg == NULL)
        cfg = &defaults;
    if (!hl_rs_config_valid(cfg))
        return NULL;
    s = hl_rs_create(cfg);
    if (s == NULL)
        return NULL;
    hl_rs_register(s);
    for (attempt = 1; attempt <= HL_RS_START_ATTEMPTS; attempt++) {
        if (hl_rs_pick_port(s) < 0 || hl_rs_write_config(s) != 0
            || hl_rs_spawn(s, &log_from) != 0)
            break;
        ready = hl_rs_wait_ready(s, log_from,
                                 hl_rs_now_ms() + s->start_timeout_ms);
        if (ready > 0)
            return s;
        if (ready < 0)
            break;
        /* Another process took the port between the probe and the bind. */
        if (attempt < HL_RS_START_ATTEMPTS
            && hl_rs_log_says_port_busy(s, log_from))
            continue;
        hl_rs_fail(0, "%s exited during start-up", s->exe);
        hl_rs_print_log_tail(s, log_from);
        break;
    }
    hl_redis_server_stop(s);
    return NULL;
}

void hl_redis_server_stop(hl_redis_server *s)
{
    int64_t deadline;
    pid_t r;

    if (s == NULL)
        return;
    hl_rs_unregister(s);
    if (s->owner == getpid()) {
        if (s->pid > 0) {
            kill(s->pid, SIGTERM);
            kill(s->pid, SIGCONT);
            deadline = hl_rs_now_ms() + HL_RS_STOP_GRACE_MS;
            for (;;) {
                r = waitpid(s->pid, NULL, WNOHANG);
                if (r == s->pid || (r < 0 && errno != EINTR)) {
                    s->pid = 0;
                    break;
                }
                if (hl_rs_now_ms() >= deadline) {
                    hl_rs_fail(0, "port %d: no exit on SIGTERM, killing",
                               s->port);
                    kill(s->pid, SIGKILL);
                    hl_rs_reap(s);
                    break;
                }
                hl_rs_sleep_ms(2);
            }
        }
        hl_rs_remove_tree(s->dir);
    }
    hl_rs_free(s);
}

int hl_redis_server_port(const hl_redis_server *s)
{
    return s->port;
}

pid_t hl_redis_server_pid(const hl_redis_server *s)
{
    return s->pid;
}

const char *hl_redis_server_dir(const hl_redis_server *s)
{
    return s->dir;
}

bool hl_redis_server_is_tls(const hl_redis_server *s)
{
    return s->tls;
}

bool hl_redis_server_is_running(hl_redis_server *s)
{
    pid_t r;

    if (s->pid <= 0)
        return false;
    r = waitpid(s->pid, NULL, WNOHANG);
    if (r == s->pid || (r < 0 && errno == ECHILD)) {
        s->pid = 0;
        s->paused = false;
    }
    return s->pid > 0;
}

void hl_redis_server_set_auth(hl_redis_server *s, const char *user,
                              const char *password)
{
    free(s->auth_user);
    free(s->auth_password);
    s->auth_user = hl_rs_strdup(user);
    s->auth_password = hl_rs_strdup(password);
}

/* ---- connections ---- */

/* Socket timeouts carry the deadline into blocking calls, OpenSSL's
 * included, without a poll loop around each of them. */
static bool hl_rs_arm_timeouts(int fd, int64_t deadline)
{
    int64_t left = deadline - hl_rs_now_ms();
    struct timeval tv;

    if (left <= 0)
        return false;
    tv.tv_sec = (time_t)(left / 1000);
    tv.tv_usec = (suseconds_t)(left % 1000) * 1000;
    return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0
           && setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0;
}

static void hl_rs_tls_error(int flags, int port, const char *what)
{
    char msg[256];
    unsigned long e = ERR_get_error();

    if (e)
        ERR_error_string_n(e, msg, sizeof msg);
    else
        snprintf(msg, sizeof msg, "%s", strerror(errno));
    ERR_clear_error();
    hl_rs_fail(flags, "port %d: %s: %s", port, what, msg);
}

static void hl_rs_conn_close(hl_rs_conn *c)
{
    static const struct timespec zero = { 0, 0 };
    char drain[4096];
    sigset_t pipe_set;

    if (c->ssl) {
        SSL_shutdown(c->ssl);
        SSL_free(c->ssl);
    }
    SSL_CTX_free(c->ctx);
    if (c->fd >= 0) {
        /* Unread bytes (TLS session tickets, typically) would make close()
         * send a reset, which can cost the server a command it has not
         * read yet; a nowait command depends on that command. */
        while (recv(c->fd, drain, sizeof drain, MSG_DONTWAIT) > 0)
            ;
        close(c->fd);
    }
    if (c->sigpipe_blocked) {
        if (!c->sigpipe_was_pending) {
            sigemptyset(&pipe_set);
            sigaddset(&pipe_set, SIGPIPE);
            while (sigtimedwait(&pipe_set, NULL, &zero) > 0)
                ;
        }
        pthread_sigmask(SIG_SETMASK, &c->old_mask, NULL);
    }
    ERR_clear_error();
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

static int hl_rs_tcp_connect(const hl_redis_server *s, int64_t deadline,
                             int flags)
{
    struct sockaddr_in sa;
    struct pollfd pfd;
    socklen_t len;
    int fd, err = 0, one = 1, left;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        hl_rs_fail(flags, "socket: %s", strerror(errno));
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)s->port);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        err = errno;
        while (err == EINPROGRESS) {
            left = (int)(deadline - hl_rs_now_ms());
            if (left <= 0) {
                err = ETIMEDOUT;
                break;
            }
            pfd.fd = fd;
            pfd.events = POLLOUT;
            if (poll(&pfd, 1, left) > 0) {
                len = sizeof err;
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
                    err = errno;
            }
        }
    }
    if (err) {
        hl_rs_fail(flags, "connect to port %d: %s", s->port, strerror(err));
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static int hl_rs_tls_setup(const hl_redis_server *s, hl_rs_conn *c,
                           int64_t deadline, int flags)
{
    sigset_t pipe_set, pending;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigpending(&pending);
    c->sigpipe_was_pending = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_set, &c->old_mask);
    c->sigpipe_blocked = true;

    c->ctx = SSL_CTX_new(TLS_client_method());
    if (c->ctx == NULL) {
        hl_rs_tls_error(flags, s->port, "SSL_CTX_new");
        return -1;
    }
    if (s->tls_ca) {
        if (SSL_CTX_load_verify_locations(c->ctx, s->tls_ca, NULL) != 1) {
            hl_rs_tls_error(flags, s->port, s->tls_ca);
            return -1;
        }
        SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
    }
    if (s->tls_client_cert
        && (SSL_CTX_use_certificate_chain_file(c->ctx, s->tls_client_cert)
                != 1
            || SSL_CTX_use_PrivateKey_file(c->ctx, s->tls_client_key,
                                           SSL_FILETYPE_PEM) != 1)) {
        hl_rs_tls_error(flags, s->port, s->tls_client_cert);
        return -1;
    }
    c->ssl = SSL_new(c->ctx);
    if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1) {
        hl_rs_tls_error(flags, s->port, "SSL_new");
        return -1;
    }
    if (!hl_rs_arm_timeouts(c->fd, deadline) || SSL_connect(c->ssl) != 1) {
        hl_rs_tls_error(flags, s->port, "TLS handshake");
        return -1;
    }
    return 0;
}

static int hl_rs_conn_open(const hl_redis_server *s, hl_rs_conn *c,
                           int64_t deadline, int flags)
{
    memset(c, 0, sizeof *c);
    c->port = s->port;
    c->fd = hl_rs_tcp_connect(s, deadline, flags);
    if (c->fd < 0)
        return -1;
    if (s->tls && hl_rs_tls_setup(s, c, deadline, flags) != 0) {
        hl_rs_conn_close(c);
        return -1;
    }
    return 0;
}

static int hl_rs_conn_write(hl_rs_conn *c, const char *p, size_t len,
                            int64_t deadline, int flags)
{
    ssize_t n;
    int r;

    while (len > 0) {
        if (!hl_rs_arm_timeouts(c->fd, deadline)) {
            hl_rs_fail(flags, "write: timed out");
            return -1;
        }
        if (c->ssl) {
            r = SSL_write(c->ssl, p, len > INT32_MAX ? INT32_MAX : (int)len);
            if (r <= 0) {
                hl_rs_tls_error(flags, c->port, "SSL_write");
                return -1;
            }
            n = r;
        } else {
            n = send(c->fd, p, len, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                hl_rs_fail(flags, "write: %s", strerror(errno));
                return -1;
            }
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Returns the count read, 0 at end of stream, -1 on error or timeout. */
static ssize_t hl_rs_conn_read(hl_rs_conn *c, char *p, size_t cap,
                               int64_t deadline, int flags)
{
    ssize_t n;
    int r;

    for (;;) {
        if (!hl_rs_arm_timeouts(c->fd, deadline)) {
            hl_rs_fail(flags, "read: timed out");
            return -1;
        }
        if (c->ssl) {
            r = SSL_read(c->ssl, p, cap > INT32_MAX ? INT32_MAX : (int)cap);
            if (r > 0)
                return r;
            if (SSL_get_error(c->ssl, r) == SSL_ERROR_ZERO_RETURN)
                return 0;
            hl_rs_tls_error(flags, c->port, "SSL_read");
            return -1;
        }
        n = recv(c->fd, p, cap, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            hl_rs_fail(flags, "read: %s",
                       errno == EAGAIN ? "timed out" : strerror(errno));
            return -1;
        }
        return n;
    }
}

/* ---- RESP ---- */

static int hl_rs_parse_len(const char *p, const char *end, long long *out)
{
    bool neg = false;
    long long v = 0;

    if (p < end && *p == '-') {
        neg = true;
        p++;
    }
    if (p == end)
        return -1;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9' || v > (long long)HL_RS_MAX_REPLY)
            return -1;
        v = v * 10 + (*p - '0');
    }
    *out = neg ? -v : v;
    return 0;
}

/* Length of the complete RESP2 reply at the start of p, 0 if more bytes
 * are needed, -1 if the bytes are not RESP2. */
static ssize_t hl_rs_resp_span(const char *p, size_t len, int depth)
{
    const char *eol;
    size_t line, off;
    long long n, i;
    ssize_t r;

    if (len == 0)
        return 0;
    if (depth > HL_RS_MAX_DEPTH)
        return -1;
    eol = memmem(p, len, "\r\n", 2);
    if (eol == NULL)
        return 0;
    line = (size_t)(eol - p) + 2;
    if (p[0] == '+' || p[0] == '-' || p[0] == ':')
        return (ssize_t)line;
    if ((p[0] != '$' && p[0] != '*') || hl_rs_parse_len(p + 1, eol, &n) != 0)
        return -1;
    if (n < 0)
        return (ssize_t)line;
    if (p[0] == '$') {
        if (len - line < (size_t)n + 2)
            return 0;
        if (p[line + (size_t)n] != '\r' || p[line + (size_t)n + 1] != '\n')
            return -1;
        return (ssize_t)(line + (size_t)n + 2);
    }
    off = line;
    for (i = 0; i < n; i++) {
        r = hl_rs_resp_span(p + off, len - off, depth + 1);
        if (r <= 0)
            return r;
        off += (size_t)r;
    }
    return (ssize_t)off;
}

static int hl_rs_send_argv(hl_rs_conn *c, int argc, const char *const argv[],
                           int64_t deadline, int flags)
{
    size_t size = 32, off;
    char *buf;
    int i, r;

    for (i = 0; i < argc; i++)
        size += strlen(argv[i]) + 32;
    buf = malloc(size);
    if (buf == NULL) {
        hl_rs_fail(flags, "out of memory");
        return -1;
    }
    off = (size_t)snprintf(buf, size, "*%d\r\n", argc);
    for (i = 0; i < argc; i++)
        off += (size_t)snprintf(buf + off, size - off, "$%zu\r\n%s\r\n",
                                strlen(argv[i]), argv[i]);
    r = hl_rs_conn_write(c, buf, off, deadline, flags);
    free(buf);
    return r;
}

/* Reads until in holds a complete reply; returns its length or -1. */
static ssize_t hl_rs_read_reply(hl_rs_conn *c, hl_rs_buf *in,
                                int64_t deadline, int flags)
{
    ssize_t span, n;
    size_t cap;
    char *grown;

    for (;;) {
        span = hl_rs_resp_span(in->data, in->len, 0);
        if (span > 0)
            return span;
        if (span < 0) {
            hl_rs_fail(flags, "malformed reply");
            return -1;
        }
        if (in->cap - in->len < 4096) {
            cap = in->cap ? in->cap * 2 : 16384;
            if (cap > HL_RS_MAX_REPLY) {
                hl_rs_fail(flags, "reply too large");
                return -1;
            }
            grown = realloc(in->data, cap);
            if (grown == NULL) {
                hl_rs_fail(flags, "out of memory");
                return -1;
            }
            in->data = grown;
            in->cap = cap;
        }
        n = hl_rs_conn_read(c, in->data + in->len, in->cap - in->len,
                            deadline, flags);
        if (n == 0)
            hl_rs_fail(flags, "connection closed by the server");
        if (n <= 0)
            return -1;
        in->len += (size_t)n;
    }
}

static void hl_rs_consume(hl_rs_buf *in, size_t n)
{
    memmove(in->data, in->data + n, in->len - n);
    in->len -= n;
}

static int hl_rs_auth(const hl_redis_server *s, hl_rs_conn *c, hl_rs_buf *in,
                      int64_t deadline, int flags)
{
    const char *argv[3];
    ssize_t span;
    int argc = 0;

    argv[argc++] = "AUTH";
    if (s->auth_user)
        argv[argc++] = s->auth_user;
    argv[argc++] = s->auth_password;
    if (hl_rs_send_argv(c, argc, argv, deadline, flags) != 0)
        return -1;
    span = hl_rs_read_reply(c, in, deadline, flags);
    if (span < 0)
        return -1;
    if (in->data[0] != '+') {
        hl_rs_fail(flags, "port %d: AUTH refused: %.*s", s->port,
                   (int)(span > 2 ? span - 2 : span), in->data);
        return -1;
    }
    hl_rs_consume(in, (size_t)span);
    return 0;
}

static int hl_rs_exchange(const hl_redis_server *s, int argc,
                          const char *const argv[], char *reply, size_t cap,
                          int timeout_ms, int flags)
{
    int64_t deadline = hl_rs_now_ms()
                       + (timeout_ms > 0 ? timeout_ms
                                         : HL_RS_DEFAULT_COMMAND_MS);
    hl_rs_buf in = { NULL, 0, 0 };
    hl_rs_conn c;
    ssize_t span;
    int type = -1;

    if (reply && cap)
        reply[0] = '\0';
    if (argc < 1 || argc > HL_RS_MAX_ARGS) {
        hl_rs_fail(flags, "bad argument count %d", argc);
        return -1;
    }
    if (hl_rs_conn_open(s, &c, deadline, flags) != 0)
        return -1;
    if (!(flags & HL_RS_NO_AUTH) && s->auth_password
        && hl_rs_auth(s, &c, &in, deadline, flags) != 0)
        goto out;
    if (hl_rs_send_argv(&c, argc, argv, deadline, flags) != 0)
        goto out;
    if (flags & HL_RS_NOWAIT) {
        type = 0;
        goto out;
    }
    span = hl_rs_read_reply(&c, &in, deadline, flags);
    if (span < 0)
        goto out;
    if (reply) {
        if ((size_t)span >= cap) {
            hl_rs_fail(flags, "%s reply of %zd bytes exceeds %zu", argv[0],
                       span, cap);
            goto out;
        }
        memcpy(reply, in.data, (size_t)span);
        reply[span] = '\0';
    }
    type = (unsigned char)in.data[0];
out:
    hl_rs_conn_close(&c);
    free(in.data);
    return type;
}

int hl_redis_server_command(const hl_redis_server *s, char *reply,
                            size_t cap, int timeout_ms, int argc,
                            const char *const argv[])
{
    return hl_rs_exchange(s, argc, argv, reply, cap, timeout_ms, 0);
}

int hl_redis_server_command_nowait(const hl_redis_server *s, int argc,
                                   const char *const argv[])
{
    return hl_rs_exchange(s, argc, argv, NULL, 0, 0, HL_RS_NOWAIT);
}

/* Collects a NULL-terminated list; returns the count or -1. */
static int hl_rs_collect(va_list ap, const char *argv[HL_RS_MAX_ARGS])
{
    const char *arg;
    int argc = 0;

    while ((arg = va_arg(ap, const char *)) != NULL) {
        if (argc == HL_RS_MAX_ARGS) {
            hl_rs_fail(0, "more than %d arguments", HL_RS_MAX_ARGS);
            return -1;
        }
        argv[argc++] = arg;
    }
    return argc;
}

int hl_redis_server_cmd(const hl_redis_server *s, char *reply, size_t cap,
                        ...)
{
    const char *argv[HL_RS_MAX_ARGS];
    va_list ap;
    int argc;

    va_start(ap, cap);
    argc = hl_rs_collect(ap, argv);
    va_end(ap);
    if (argc < 0)
        return -1;
    return hl_redis_server_command(s, reply, cap, 0, argc, argv);
}

int hl_redis_server_cmd_nowait(const hl_redis_server *s, ...)
{
    const char *argv[HL_RS_MAX_ARGS];
    va_list ap;
    int argc;

    va_start(ap, s);
    argc = hl_rs_collect(ap, argv);
    va_end(ap);
    if (argc < 0)
        return -1;
    return hl_redis_server_command_nowait(s, argc, argv);
}

bool hl_redis_server_ping(const hl_redis_server *s, int timeout_ms)
{
    static const char *const ping[] = { "PING" };
    char reply[64];

    return hl_rs_exchange(s, 1, ping, reply, sizeof reply,
                          timeout_ms > 0 ? timeout_ms : 1, HL_RS_QUIET) == '+'
           && strncmp(reply, "+PONG", 5) == 0;
}

char *hl_rs_ask_text(const hl_redis_server *s, const char *a, const char *b)
{
    size_t cap = 256u << 10;
    char *buf = malloc(cap), *nl;
    int type;

    if (buf == NULL)
        return NULL;
    type = hl_redis_server_cmd(s, buf, cap, a, b, (char *)NULL);
    if (type != '$' || (nl = strstr(buf, "\r\n")) == NULL) {
        free(buf);
        return NULL;
    }
    memmove(buf, nl + 2, strlen(nl + 2) + 1);
    return buf;
}
