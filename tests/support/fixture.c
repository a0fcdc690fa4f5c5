/* The real-Redis test fixture; see fixture.h. */
#include "support/fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <setjmp.h>
#include <cmocka.h>

#define HL_FX_OPENSSL_MS 30000
#define HL_FX_PROBE_MS 30
#define HL_FX_REPLY 4096

/* ---- time ---- */

int64_t hl_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t hl_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void hl_sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

bool hl_under_valgrind(void)
{
    return getenv("HILOCK_TEST_UNDER_VALGRIND") != NULL;
}

int hl_widen(int ms)
{
    return hl_under_valgrind() ? ms * 10 : ms;
}

int hl_scaled(int normal, int small)
{
    return hl_under_valgrind() ? small : normal;
}

bool hl_wait_until(bool (*pred)(void *), void *arg, int timeout_ms)
{
    int64_t deadline = hl_now_ms() + timeout_ms;

    for (;;) {
        if (pred(arg))
            return true;
        if (hl_now_ms() >= deadline)
            return false;
        hl_sleep_ms(5);
    }
}

static bool flag_is_set(void *arg) { return atomic_load((atomic_bool *)arg); }

bool hl_wait_flag(atomic_bool *flag, int timeout_ms)
{
    return hl_wait_until(flag_is_set, flag, timeout_ms);
}

struct count_wait {
    atomic_int *value;
    int want;
};

static bool count_reached(void *arg)
{
    struct count_wait *w = arg;
    return atomic_load(w->value) >= w->want;
}

bool hl_wait_count(atomic_int *value, int want, int timeout_ms)
{
    struct count_wait w = {value, want};
    return hl_wait_until(count_reached, &w, timeout_ms);
}

void hl_expect_count(atomic_int *value, int want, int timeout_ms)
{
    if (!hl_wait_count(value, want, timeout_ms))
        fail_msg("only %d of %d callbacks within %d ms", atomic_load(value),
                 want, timeout_ms);
}

/* ---- child processes ---- */

static int hl_fx_collect(pid_t pid, int fd, char *out, size_t cap,
                         int timeout_ms)
{
    int64_t deadline = hl_now_ms() + timeout_ms;
    bool timed_out = false;
    size_t len = 0;
    char scratch[4096];
    struct pollfd pfd;
    int status, left, r;
    ssize_t n;

    for (;;) {
        left = (int)(deadline - hl_now_ms());
        pfd.fd = fd;
        pfd.events = POLLIN;
        r = left > 0 ? poll(&pfd, 1, left) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            timed_out = true;
            break;
        }
        if (r < 0)
            break;
        /* Output past cap is read and dropped so that the child never
         * blocks on a full pipe. */
        if (len + 1 < cap)
            n = read(fd, out + len, cap - 1 - len);
        else
            n = read(fd, scratch, sizeof scratch);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (len + 1 < cap)
            len += (size_t)n;
    }
    if (cap)
        out[len] = '\0';
    if (timed_out) {
        fprintf(stderr, "hl_run: killing pid %d after %d ms\n", (int)pid,
                timeout_ms);
        kill(pid, SIGKILL);
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (timed_out)
        return -1;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

void hl_fail_run(const char *what, int rc, const char *out)
{
    printf("# %s exited %d; its output:\n", what, rc);
    for (const char *p = out; p != NULL && *p != '\0';) {
        const char *nl = strchr(p, '\n');
        int n = nl ? (int)(nl - p) : (int)strlen(p);
        printf("#   %.*s\n", n, p);
        p = nl ? nl + 1 : NULL;
    }
    fflush(stdout);
    fail_msg("%s exited %d (its output is above)", what, rc);
}

int hl_run(const char *const argv[], char *out, size_t cap, int timeout_ms)
{
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    sigset_t none, dfl;
    int fds[2], rc;
    pid_t pid;

    if (cap)
        out[0] = '\0';
    if (pipe2(fds, O_CLOEXEC) != 0) {
        fprintf(stderr, "hl_run: pipe: %s\n", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    /* The test's sockets must not outlive their close() in a child. */
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    posix_spawnattr_init(&attr);
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    sigaddset(&dfl, SIGINT);
    sigaddset(&dfl, SIGTERM);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &dfl);
    posix_spawnattr_setflags(&attr,
                             POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    rc = posix_spawnp(&pid, argv[0], &actions, &attr, (char *const *)argv,
                      environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    close(fds[1]);
    if (rc != 0) {
        fprintf(stderr, "hl_run: %s: %s\n", argv[0], strerror(rc));
        close(fds[0]);
        return -1;
    }
    rc = hl_fx_collect(pid, fds[0], out, cap, timeout_ms);
    close(fds[0]);
    return rc;
}

/* ---- certificates ---- */

/* Our own openssl.cnf keeps the extensions independent of the system's
 * defaults, which differ between distributions. */
static const char hl_fx_openssl_cnf[] =
    "[req]\n"
    "distinguished_name = dn\n"
    "prompt = no\n"
    "[dn]\n"
    "CN = hilock\n"
    "[ca_ext]\n"
    "basicConstraints = critical, CA:TRUE\n"
    "keyUsage = critical, keyCertSign, cRLSign\n"
    "subjectKeyIdentifier = hash\n"
    "[server_ext]\n"
    "basicConstraints = CA:FALSE\n"
    "keyUsage = critical, digitalSignature, keyAgreement\n"
    "extendedKeyUsage = serverAuth, clientAuth\n"
    "subjectAltName = DNS:localhost, IP:127.0.0.1\n"
    "authorityKeyIdentifier = keyid\n"
    "[client_ext]\n"
    "basicConstraints = CA:FALSE\n"
    "keyUsage = critical, digitalSignature, keyAgreement\n"
    "extendedKeyUsage = clientAuth\n"
    "authorityKeyIdentifier = keyid\n";

enum {
    HL_FX_CA_CERT,
    HL_FX_CA_KEY,
    HL_FX_SERVER_CERT,
    HL_FX_SERVER_KEY,
    HL_FX_CLIENT_CERT,
    HL_FX_CLIENT_KEY,
    HL_FX_WRONG_CA_CERT,
    HL_FX_WRONG_CA_KEY,
    HL_FX_WRONG_CLIENT_CERT,
    HL_FX_WRONG_CLIENT_KEY,
    HL_FX_CNF,
    HL_FX_NFILES
};

static const char *const hl_fx_file_names[HL_FX_NFILES] = {
    "ca.crt",         "ca.key",         "server.crt",    "server.key",
    "client.crt",     "client.key",     "wrong-ca.crt",  "wrong-ca.key",
    "wrong-client.crt", "wrong-client.key", "openssl.cnf",
};

static pthread_mutex_t hl_fx_tls_lock = PTHREAD_MUTEX_INITIALIZER;
static hl_tls_files hl_fx_tls;
static char *hl_fx_tls_paths[HL_FX_NFILES];
static char *hl_fx_tls_dir;
static pid_t hl_fx_tls_owner;
static bool hl_fx_tls_ready;
static bool hl_fx_tls_failed;

static int hl_fx_remove_entry(const char *path, const struct stat *st,
                              int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    remove(path);
    return 0;
}

static void hl_fx_tls_cleanup(void)
{
    int i;

    if (hl_fx_tls_dir && hl_fx_tls_owner == getpid())
        nftw(hl_fx_tls_dir, hl_fx_remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    for (i = 0; i < HL_FX_NFILES; i++) {
        free(hl_fx_tls_paths[i]);
        hl_fx_tls_paths[i] = NULL;
    }
    free(hl_fx_tls_dir);
    hl_fx_tls_dir = NULL;
    hl_fx_tls_ready = false;
}

static int hl_fx_openssl(const char *const argv[])
{
    const char *exe = getenv("HILOCK_OPENSSL");
    const char *args[32];
    char out[4096];
    int i, rc;

    args[0] = exe && *exe ? exe : "openssl";
    for (i = 1; argv[i - 1] != NULL && i < 31; i++)
        args[i] = argv[i - 1];
    args[i] = NULL;
    rc = hl_run(args, out, sizeof out, HL_FX_OPENSSL_MS);
    if (rc != 0) {
        fprintf(stderr, "fixture: openssl %s %s exited with %d:\n%s\n",
                argv[0], argv[1] ? argv[1] : "", rc, out);
        return -1;
    }
    return 0;
}

static int hl_fx_genkey(int key)
{
    const char *argv[] = { "genpkey", "-algorithm", "EC", "-pkeyopt",
                           "ec_paramgen_curve:prime256v1", "-out",
                           hl_fx_tls_paths[key], NULL };

    return hl_fx_openssl(argv);
}

static int hl_fx_make_ca(int cert, int key, const char *subject)
{
    const char *argv[] = { "req", "-config", hl_fx_tls_paths[HL_FX_CNF],
                           "-new", "-x509", "-days", "7", "-key",
                           hl_fx_tls_paths[key], "-subj", subject,
                           "-extensions", "ca_ext", "-out",
                           hl_fx_tls_paths[cert], NULL };

    if (hl_fx_genkey(key) != 0)
        return -1;
    return hl_fx_openssl(argv);
}

static int hl_fx_make_leaf(int cert, int key, int ca_cert, int ca_key,
                           const char *subject, const char *extensions,
                           const char *serial)
{
    char *csr = NULL;
    int rc = -1;

    if (asprintf(&csr, "%s.csr", hl_fx_tls_paths[cert]) < 0)
        return -1;
    {
        const char *req[] = { "req", "-config", hl_fx_tls_paths[HL_FX_CNF],
                              "-new", "-key", hl_fx_tls_paths[key],
                              "-subj", subject, "-out", csr, NULL };
        const char *sign[] = { "x509", "-req", "-in", csr, "-CA",
                               hl_fx_tls_paths[ca_cert], "-CAkey",
                               hl_fx_tls_paths[ca_key], "-set_serial",
                               serial, "-days", "7", "-extfile",
                               hl_fx_tls_paths[HL_FX_CNF], "-extensions",
                               extensions, "-out", hl_fx_tls_paths[cert],
                               NULL };

        if (hl_fx_genkey(key) == 0 && hl_fx_openssl(req) == 0
            && hl_fx_openssl(sign) == 0)
            rc = 0;
    }
    unlink(csr);
    free(csr);
    return rc;
}

static int hl_fx_generate(void)
{
    const char *tmp = getenv("TMPDIR");
    FILE *f;
    int i;

    if (asprintf(&hl_fx_tls_dir, "%s/hilock-tls-XXXXXX",
                 tmp && *tmp ? tmp : "/tmp") < 0) {
        hl_fx_tls_dir = NULL;
        return -1;
    }
    if (mkdtemp(hl_fx_tls_dir) == NULL) {
        fprintf(stderr, "fixture: mkdtemp: %s\n", strerror(errno));
        free(hl_fx_tls_dir);
        hl_fx_tls_dir = NULL;
        return -1;
    }
    hl_fx_tls_owner = getpid();
    for (i = 0; i < HL_FX_NFILES; i++)
        if (asprintf(&hl_fx_tls_paths[i], "%s/%s", hl_fx_tls_dir,
                     hl_fx_file_names[i]) < 0) {
            hl_fx_tls_paths[i] = NULL;
            return -1;
        }
    f = fopen(hl_fx_tls_paths[HL_FX_CNF], "w");
    if (f == NULL)
        return -1;
    fputs(hl_fx_openssl_cnf, f);
    if (fclose(f) != 0)
        return -1;

    if (hl_fx_make_ca(HL_FX_CA_CERT, HL_FX_CA_KEY, "/CN=hilock test CA") != 0
        || hl_fx_make_leaf(HL_FX_SERVER_CERT, HL_FX_SERVER_KEY,
                           HL_FX_CA_CERT, HL_FX_CA_KEY, "/CN=localhost",
                           "server_ext", "1001") != 0
        || hl_fx_make_leaf(HL_FX_CLIENT_CERT, HL_FX_CLIENT_KEY,
                           HL_FX_CA_CERT, HL_FX_CA_KEY,
                           "/CN=hilock test client", "client_ext",
                           "1002") != 0
        || hl_fx_make_ca(HL_FX_WRONG_CA_CERT, HL_FX_WRONG_CA_KEY,
                         "/CN=hilock unrelated CA") != 0
        || hl_fx_make_leaf(HL_FX_WRONG_CLIENT_CERT, HL_FX_WRONG_CLIENT_KEY,
                           HL_FX_WRONG_CA_CERT, HL_FX_WRONG_CA_KEY,
                           "/CN=hilock unrelated client", "client_ext",
                           "2001") != 0)
        return -1;

    hl_fx_tls.dir = hl_fx_tls_dir;
    hl_fx_tls.ca_cert = hl_fx_tls_paths[HL_FX_CA_CERT];
    hl_fx_tls.ca_key = hl_fx_tls_paths[HL_FX_CA_KEY];
    hl_fx_tls.server_cert = hl_fx_tls_paths[HL_FX_SERVER_CERT];
    hl_fx_tls.server_key = hl_fx_tls_paths[HL_FX_SERVER_KEY];
    hl_fx_tls.client_cert = hl_fx_tls_paths[HL_FX_CLIENT_CERT];
    hl_fx_tls.client_key = hl_fx_tls_paths[HL_FX_CLIENT_KEY];
    hl_fx_tls.wrong_ca_cert = hl_fx_tls_paths[HL_FX_WRONG_CA_CERT];
    hl_fx_tls.wrong_ca_key = hl_fx_tls_paths[HL_FX_WRONG_CA_KEY];
    hl_fx_tls.wrong_client_cert = hl_fx_tls_paths[HL_FX_WRONG_CLIENT_CERT];
    hl_fx_tls.wrong_client_key = hl_fx_tls_paths[HL_FX_WRONG_CLIENT_KEY];
    return 0;
}

const hl_tls_files *hl_fixture_tls_files(void)
{
    bool ok;

    pthread_mutex_lock(&hl_fx_tls_lock);
    if (!hl_fx_tls_ready && !hl_fx_tls_failed) {
        if (hl_fx_generate() == 0) {
            hl_fx_tls_ready = true;
            atexit(hl_fx_tls_cleanup);
        } else {
            hl_fx_tls_cleanup();
            /* Each later TLS test fails at once instead of retrying. */
            hl_fx_tls_failed = true;
        }
    }
    ok = hl_fx_tls_ready;
    pthread_mutex_unlock(&hl_fx_tls_lock);
    if (!ok)
        fail_msg("could not generate TLS certificates with openssl");
    return &hl_fx_tls;
}

/* ---- servers ---- */

static hl_redis_server *hl_fx_start(const hl_redis_server_config *cfg)
{
    hl_redis_server *s = hl_redis_server_start(cfg);

    if (s == NULL)
        fail_msg("could not start redis-server");
    return s;
}

hl_redis_server *hl_fixture_plain(void)
{
    return hl_fx_start(NULL);
}

hl_redis_cluster *hl_fixture_cluster(void)
{
    hl_redis_cluster_config cfg;
    hl_redis_cluster *c;

    memset(&cfg, 0, sizeof cfg);
    cfg.masters = 3;
    cfg.replicas = 1;
    c = hl_redis_cluster_start(&cfg);
    if (c == NULL)
        fail_msg("cannot start a private cluster (see stderr)");
    return c;
}

hl_redis_cluster *hl_fixture_cluster_tls(void)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    hl_redis_server_config node;
    hl_redis_cluster_config cfg;
    hl_redis_cluster *c;

    memset(&node, 0, sizeof node);
    node.tls_cert_file = t->server_cert;
    node.tls_key_file = t->server_key;
    node.tls_ca_cert_file = t->ca_cert;
    node.tls_client_cert_file = t->client_cert;
    node.tls_client_key_file = t->client_key;
    memset(&cfg, 0, sizeof cfg);
    cfg.masters = 3;
    cfg.replicas = 1;
    cfg.node = &node;
    c = hl_redis_cluster_start(&cfg);
    if (c == NULL)
        fail_msg("cannot start a private TLS cluster (see stderr)");
    return c;
}

hl_redis_replicated *hl_fixture_replicated(void)
{
    hl_redis_replicated_config cfg;
    hl_redis_replicated *g;

    memset(&cfg, 0, sizeof cfg);
    cfg.replicas = 2;
    cfg.sentinels = 3;
    g = hl_redis_replicated_start(&cfg);
    if (g == NULL)
        fail_msg("cannot start a private master, replicas and sentinels "
                 "(see stderr)");
    return g;
}

hl_redis_server *hl_fixture_plain_with(const char *password,
                                       const char *extra_config)
{
    hl_redis_server_config cfg;

    memset(&cfg, 0, sizeof cfg);
    cfg.password = password;
    cfg.extra_config = extra_config;
    return hl_fx_start(&cfg);
}

hl_redis_server *hl_fixture_tls(const char *auth_clients)
{
    const hl_tls_files *t = hl_fixture_tls_files();
    hl_redis_server_config cfg;

    memset(&cfg, 0, sizeof cfg);
    cfg.tls_cert_file = t->server_cert;
    cfg.tls_key_file = t->server_key;
    cfg.tls_ca_cert_file = t->ca_cert;
    cfg.tls_auth_clients = auth_clients;
    cfg.tls_client_cert_file = t->client_cert;
    cfg.tls_client_key_file = t->client_key;
    return hl_fx_start(&cfg);
}

void hl_fixture_masters(hl_redis_server **out, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        out[i] = hl_redis_server_start(NULL);
        if (out[i] == NULL) {
            hl_fixture_stop_masters(out, i);
            fail_msg("could not start master %d of %d", i + 1, n);
        }
    }
}

void hl_fixture_stop_masters(hl_redis_server **servers, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        hl_redis_server_stop(servers[i]);
        servers[i] = NULL;
    }
}

/* ---- commands and faults ---- */

static void hl_fx_expect_ok(const char *what, int type, const char *reply)
{
    if (type != '+')
        fail_msg("%s: %s", what, type < 0 ? "no reply" : reply);
}

static long long hl_fx_integer(const char *what, int type,
                               const char *reply, const char *at)
{
    char *end;
    long long v;

    if (type < 0 || at == NULL)
        fail_msg("%s: unexpected reply %s", what,
                 type < 0 ? "(none)" : reply);
    v = strtoll(at + 1, &end, 10);
    if (end == at + 1 || *end != '\r')
        fail_msg("%s: unexpected reply %s", what, reply);
    return v;
}

void hl_fixture_acl_user(hl_redis_server *s, const char *user,
                         const char *password)
{
    char reply[HL_FX_REPLY];
    char *pass_rule;
    int type;

    if (asprintf(&pass_rule, ">%s", password) < 0)
        fail_msg("out of memory");
    type = hl_redis_server_cmd(s, reply, sizeof reply, "ACL", "SETUSER",
                               user, "on", pass_rule, "~*", "&*", "+@all",
                               (char *)NULL);
    free(pass_rule);
    hl_fx_expect_ok("ACL SETUSER", type, reply);
}

void hl_fixture_acl_user_rules(hl_redis_server *s, const char *user,
                               const char *password, const char *rules)
{
    const char *argv[48];
    char reply[HL_FX_REPLY];
    char *pass_rule, *copy, *save = NULL;
    int argc = 0, type;

    if (asprintf(&pass_rule, ">%s", password) < 0 ||
        (copy = strdup(rules)) == NULL)
        fail_msg("out of memory");
    argv[argc++] = "ACL";
    argv[argc++] = "SETUSER";
    argv[argc++] = user;
    argv[argc++] = "reset";
    argv[argc++] = "on";
    argv[argc++] = pass_rule;
    for (char *r = strtok_r(copy, " ", &save); r != NULL;
         r = strtok_r(NULL, " ", &save)) {
        if (argc == (int)(sizeof argv / sizeof argv[0]))
            fail_msg("too many ACL rules: %s", rules);
        argv[argc++] = r;
    }
    type = hl_redis_server_command(s, reply, sizeof reply, 0, argc, argv);
    free(pass_rule);
    free(copy);
    hl_fx_expect_ok("ACL SETUSER", type, reply);
}

void hl_fixture_kill9(hl_redis_server *s)
{
    if (hl_redis_server_kill9(s) != 0)
        fail_msg("kill -9 of the server on port %d failed",
                 hl_redis_server_port(s));
}

/* The number after needle in INFO section, 0 when it is absent.  Each
 * INFO is a connection of its own, and a sentinel that reconfigures the
 * node (a failover on a loaded machine) closes every normal client with
 * CLIENT KILL: INFO, which changes nothing, is asked again then. */
static long long info_number(hl_redis_server *s, const char *section,
                             const char *needle)
{
    static _Thread_local char info[32768];
    int type = -1;
    for (int tries = 0; tries < 3 && type == -1; tries++)
        type = hl_redis_server_cmd(s, info, sizeof info, "INFO", section,
                                   (char *)NULL);
    assert_int_equal(type, '$');
    const char *p = strstr(info, needle);
    return p ? atoll(p + strlen(needle)) : 0;
}

long long hl_fixture_calls(hl_redis_server *s, const char *command)
{
    char needle[64];
    snprintf(needle, sizeof needle, "cmdstat_%s:calls=", command);
    return info_number(s, "commandstats", needle);
}

long long hl_fixture_errors(hl_redis_server *s, const char *prefix)
{
    char needle[64];
    snprintf(needle, sizeof needle, "errorstat_%s:count=", prefix);
    return info_number(s, "errorstats", needle);
}

void hl_fixture_pause(hl_redis_server *s)
{
    if (hl_redis_server_pause(s) != 0)
        fail_msg("SIGSTOP of the server on port %d failed",
                 hl_redis_server_port(s));
}

void hl_fixture_resume(hl_redis_server *s)
{
    if (hl_redis_server_resume(s) != 0)
        fail_msg("SIGCONT of the server on port %d failed",
                 hl_redis_server_port(s));
}

void hl_fixture_restart(hl_redis_server *s)
{
    if (hl_redis_server_restart(s) != 0)
        fail_msg("restart of the server on port %d failed",
                 hl_redis_server_port(s));
}

long long hl_fixture_client_kill(hl_redis_server *s, const char *type)
{
    char reply[HL_FX_REPLY];
    int t = hl_redis_server_cmd(s, reply, sizeof reply, "CLIENT", "KILL",
                                "TYPE", type, (char *)NULL);

    return hl_fx_integer("CLIENT KILL", t, reply, t == ':' ? reply : NULL);
}

long long hl_fixture_numsub(hl_redis_server *s, const char *channel)
{
    char reply[HL_FX_REPLY];
    int t = hl_redis_server_cmd(s, reply, sizeof reply, "PUBSUB", "NUMSUB",
                                channel, (char *)NULL);

    /* *2 $len channel :count — the count is the last integer. */
    return hl_fx_integer("PUBSUB NUMSUB", t, reply,
                         t == '*' ? strrchr(reply, ':') : NULL);
}

long long hl_fixture_shardnumsub(hl_redis_server *s, const char *channel)
{
    char reply[HL_FX_REPLY];
    int t = hl_redis_server_cmd(s, reply, sizeof reply, "PUBSUB",
                                "SHARDNUMSUB", channel, (char *)NULL);

    return hl_fx_integer("PUBSUB SHARDNUMSUB", t, reply,
                         t == '*' ? strrchr(reply, ':') : NULL);
}

typedef struct numsub_want {
    hl_redis_server *server;
    const char *channel;
    long long min;
    long long max;
} numsub_want;

static bool numsub_in_range(void *arg)
{
    numsub_want *w = arg;
    long long n = hl_fixture_numsub(w->server, w->channel);

    return n >= w->min && n <= w->max;
}

void hl_expect_numsub(hl_redis_server *s, const char *channel,
                      long long min, long long max)
{
    numsub_want w = { s, channel, min, max };

    if (!hl_wait_until(numsub_in_range, &w, hl_widen(10000)))
        fail_msg("PUBSUB NUMSUB %s is %lld, expected %lld..%lld", channel,
                 hl_fixture_numsub(s, channel), min, max);
}

void hl_fixture_debug_sleep(hl_redis_server *s, double seconds)
{
    int64_t deadline;
    char arg[32];

    snprintf(arg, sizeof arg, "%.3f", seconds);
    if (hl_redis_server_cmd_nowait(s, "DEBUG", "SLEEP", arg, (char *)NULL)
        != 0)
        fail_msg("DEBUG SLEEP could not be sent");
    /* The command is in the server's socket, but the server may still be
     * serving others; a test that counts on the server being busy needs
     * to know it is. */
    deadline = hl_now_ms() + 1000;
    while (hl_now_ms() < deadline) {
        if (!hl_redis_server_ping(s, HL_FX_PROBE_MS))
            return;
        hl_sleep_ms(1);
    }
    if (seconds >= 0.2)
        fail_msg("the server on port %d never blocked in DEBUG SLEEP",
                 hl_redis_server_port(s));
}

int hl_refusing_port(int *fd)
{
    *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(*fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(*fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(*fd, (struct sockaddr *)&a, &len), 0);
    return ntohs(a.sin_port);
}
