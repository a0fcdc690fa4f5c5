/* The real-Redis test fixture: servers (plain, TLS, password, ACL users,
 * several masters), faults, and waiting on conditions with a deadline.
 *
 * Functions named hl_fixture_* and hl_expect_* fail the running cmocka
 * test (fail_msg) when they cannot do their job, so a test never
 * continues on a broken setup; they may also be called from cmocka setup
 * functions.  The other helpers only report: hl_wait_* say whether a
 * condition came in time, and an hl_expect_* is the same wait that fails
 * the test when it did not.
 *
 * Servers still running when the process exits are killed by
 * redis_server.c, so a failed test leaves nothing behind; a test should
 * still stop its servers to keep the next test's ports and processes
 * apart.
 *
 * Start servers from the main thread: they die with the thread that
 * started them (see redis_server.h). */
#ifndef HL_FIXTURE_H
#define HL_FIXTURE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "redis_cluster.h"
#include "redis_faults.h"
#include "redis_replicated.h"

/* PEM files, generated with the openssl CLI (EC P-256 keys) at first use,
 * once per process, into a temporary directory removed at exit. */
typedef struct hl_tls_files {
    const char *dir;
    const char *ca_cert;
    const char *ca_key;
    /* Signed by the CA; subjectAltName DNS:localhost, IP:127.0.0.1;
     * usable for both server and client authentication. */
    const char *server_cert;
    const char *server_key;
    /* Signed by the CA; client authentication only. */
    const char *client_cert;
    const char *client_key;
    /* An unrelated CA, and a client certificate it signed, for the tests
     * where verification has to fail on either side. */
    const char *wrong_ca_cert;
    const char *wrong_ca_key;
    const char *wrong_client_cert;
    const char *wrong_client_key;
} hl_tls_files;

/* Generates the files on the first call; never returns NULL. */
const hl_tls_files *hl_fixture_tls_files(void);

/* A plain server with no password. */
hl_redis_server *hl_fixture_plain(void);

/* A plain server with requirepass (password may be NULL) and extra
 * redis.conf lines (may be NULL).  The command helpers AUTH with the
 * password. */
hl_redis_server *hl_fixture_plain_with(const char *password,
                                       const char *extra_config);

/* A TLS-only server with the files of hl_fixture_tls_files(): the server
 * certificate, the CA, and tls-auth-clients set to auth_clients ("yes",
 * "optional" or "no"; NULL means "optional").  The command helpers present
 * the client certificate. */
hl_redis_server *hl_fixture_tls(const char *auth_clients);

/* A plain cluster of 3 masters with one replica each, up and serving
 * every slot.  Start one per test file: it takes seconds. */
hl_redis_cluster *hl_fixture_cluster(void);

/* The same cluster with TLS-only nodes (hl_fixture_tls("optional") each),
 * TLS on the cluster bus and for replication too. */
hl_redis_cluster *hl_fixture_cluster_tls(void);

/* A plain master with 2 replicas, watched by 3 sentinels (quorum 2,
 * down after 1 s), settled.  One per test file. */
hl_redis_replicated *hl_fixture_replicated(void);

/* n independent plain masters, into out[0..n-1]. */
void hl_fixture_masters(hl_redis_server **out, int n);

/* Stops out[0..n-1] and sets each to NULL; NULL entries are skipped. */
void hl_fixture_stop_masters(hl_redis_server **servers, int n);

/* ACL SETUSER user on >password ~* &* +@all. */
void hl_fixture_acl_user(hl_redis_server *s, const char *user,
                         const char *password);

/* ACL SETUSER user reset on >password, then the space-separated rules
 * (for example "~* &* +@all -publish"), for users who lack something. */
void hl_fixture_acl_user_rules(hl_redis_server *s, const char *user,
                               const char *password, const char *rules);

/* How many times s has run command, as INFO commandstats counts it
 * (lower case: "wait", "evalsha"); fails the test when s does not say. */
long long hl_fixture_calls(hl_redis_server *s, const char *command);
/* How many error replies starting with prefix ("READONLY") s has sent,
 * as INFO errorstats counts them. */
long long hl_fixture_errors(hl_redis_server *s, const char *prefix);

/* The faults of redis_server.h, failing the test instead of returning -1. */
void hl_fixture_kill9(hl_redis_server *s);
void hl_fixture_pause(hl_redis_server *s);
void hl_fixture_resume(hl_redis_server *s);
void hl_fixture_restart(hl_redis_server *s);

/* CLIENT KILL TYPE type ("normal", "pubsub", ...); returns how many
 * connections the server closed.  The helper's own connection is spared
 * by the server. */
long long hl_fixture_client_kill(hl_redis_server *s, const char *type);

/* Makes the server run DEBUG SLEEP seconds without blocking the test, and
 * returns once the server is seen to be blocked: a PING has then gone
 * unanswered for 30 ms, so nearly all of the sleep is still ahead.  A
 * sleep shorter than 0.2 s may be over before it is seen; that is not a
 * failure. */
void hl_fixture_debug_sleep(hl_redis_server *s, double seconds);

/* PUBSUB NUMSUB channel: the number of subscribers. */
long long hl_fixture_numsub(hl_redis_server *s, const char *channel);
/* The same for a sharded channel (PUBSUB SHARDNUMSUB): listeners on
 * this node only. */
long long hl_fixture_shardnumsub(hl_redis_server *s, const char *channel);

/* Waits hl_widen(10000) ms for PUBSUB NUMSUB channel to be within
 * min..max. */
void hl_expect_numsub(hl_redis_server *s, const char *channel,
                      long long min, long long max);

/* Runs argv[0] (searched on PATH) with stdin from /dev/null and stdout
 * and stderr captured together into out (NUL-terminated, cut at cap - 1
 * bytes; out may be NULL when cap is 0).  The child inherits no other
 * descriptor.  Returns the exit status, 128 + the signal number if it was
 * killed, or -1 if it could not be started or outlived timeout_ms (it is
 * then killed). */
int hl_run(const char *const argv[], char *out, size_t cap, int timeout_ms);

/* Fails the test for a run (what) that exited rc, with its output out
 * printed whole first: a failure message longer than 1 KiB is cut. */
void hl_fail_run(const char *what, int rc, const char *out);

/* Calls pred(arg) every 5 ms until it returns true (then returns true) or
 * timeout_ms pass (then returns false), for conditions that can only be
 * observed, such as a subscriber count reaching a value. */
bool hl_wait_until(bool (*pred)(void *), void *arg, int timeout_ms);

/* A loopback port that refuses connections: bound to *fd, never
 * listening, for as long as the caller keeps *fd open. */
int hl_refusing_port(int *fd);
/* hl_wait_until for the two conditions most tests wait on: a flag set by
 * a callback, and a counter reaching want. */
bool hl_wait_flag(atomic_bool *flag, int timeout_ms);
bool hl_wait_count(atomic_int *value, int want, int timeout_ms);

/* The failing form of hl_wait_count, for counts of callbacks. */
void hl_expect_count(atomic_int *value, int want, int timeout_ms);

/* CLOCK_MONOTONIC in milliseconds, and in nanoseconds for intervals too
 * short for milliseconds. */
int64_t hl_now_ms(void);
int64_t hl_now_ns(void);

void hl_sleep_ms(int ms);

/* Valgrind runs the library tens of times slower.  The valgrind pass of
 * scripts/test sets HILOCK_TEST_UNDER_VALGRIND; tests then keep their
 * assertions but widen their deadlines and shrink their loop counts. */
bool hl_under_valgrind(void);

/* ms, or ten times ms under valgrind: a bound that catches a hang on a
 * normal build would catch mere slowness there. */
int hl_widen(int ms);

/* normal, or small under valgrind. */
int hl_scaled(int normal, int small);

#endif
