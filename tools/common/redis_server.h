/* Private redis-server processes for the demo, the benchmark and the test
 * fixture.  Not part of the library, and deliberately independent of it:
 * the tests use this code to judge the library, so it must not share the
 * library's bugs.
 *
 * Each server listens on 127.0.0.1 only, on a port of its own, with no
 * persistence, in a fresh temporary directory that holds its generated
 * redis.conf and its log file.  Servers are started with fork and exec and
 * die with the thread that started them (PR_SET_PDEATHSIG), so start them
 * from a thread that lives as long as the servers, normally main.  Servers
 * still running at exit() are killed and their directories removed.
 *
 * Errors are reported as -1 (or NULL) with one explaining line on stderr,
 * because the callers are tests and tools that only print and give up.
 *
 * Threads: a handle belongs to one thread at a time, except that the
 * command, ping and accessor functions may run concurrently with each
 * other on the same handle.  Different handles are independent. */
#ifndef HL_REDIS_SERVER_H
#define HL_REDIS_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct hl_redis_server hl_redis_server;

/* Everything optional: a zero-initialised struct, or NULL, gives a plain
 * server with no password.  Strings are copied by hl_redis_server_start(). */
typedef struct hl_redis_server_config {
    /* Lines appended verbatim to redis.conf ("name value\n" each), e.g.
     * ACL rules or "maxmemory 10mb". */
    const char *extra_config;
    /* Sets requirepass; the command helpers then AUTH with it. */
    const char *password;
    /* A non-NULL tls_cert_file makes the server TLS-only: "port 0" and
     * "tls-port" on the chosen port.  tls_auth_clients is "yes",
     * "optional" or "no" (NULL means "optional"). */
    const char *tls_cert_file;
    const char *tls_key_file;
    const char *tls_ca_cert_file;
    const char *tls_auth_clients;
    /* The identity the command helpers present to a TLS server; NULL
     * means the server's own certificate and key, which works when that
     * certificate allows client authentication. */
    const char *tls_client_cert_file;
    const char *tls_client_key_file;
    /* A Redis Sentinel rather than a server: the binary is
     * $HILOCK_REDIS_SENTINEL if set, else "redis-sentinel" on PATH, and
     * extra_config holds its "sentinel ..." lines.  It keeps no data. */
    bool sentinel;
    /* Bound on start-up and restart; 0 means 10000 ms. */
    int start_timeout_ms;
} hl_redis_server_config;

/* Starts a server and waits until it accepts commands.  The binary is
 * $HILOCK_REDIS_SERVER if set, else "redis-server" found on PATH.  The
 * port is picked below the kernel's ephemeral range when possible, so
 * that a client reconnecting to a dead server can never end up connected
 * to itself; a port lost to a race is replaced by another, a few times.
 * Returns NULL on failure, after printing the end of the server log. */
hl_redis_server *hl_redis_server_start(const hl_redis_server_config *cfg);

/* SIGTERM, then SIGKILL if the server has not exited within 5 s; removes
 * the directory and frees the handle.  A paused server is resumed so that
 * it can see the SIGTERM.  NULL is ignored.  In a forked child of the
 * process that started the server, only frees the handle. */
void hl_redis_server_stop(hl_redis_server *s);

/* Stops every server this process started and has not stopped yet.  The
 * same runs from atexit(). */
void hl_redis_server_stop_all(void);

int hl_redis_server_port(const hl_redis_server *s);
/* 0 when the server is not running. */
pid_t hl_redis_server_pid(const hl_redis_server *s);
const char *hl_redis_server_dir(const hl_redis_server *s);
bool hl_redis_server_is_tls(const hl_redis_server *s);
/* True while the process exists, paused or not; notices a crash. */
bool hl_redis_server_is_running(hl_redis_server *s);

/* Changes the credentials the command helpers AUTH with (user may be NULL
 * for the default user; password NULL for no AUTH), for tests that change
 * them on a live server. */
void hl_redis_server_set_auth(hl_redis_server *s, const char *user,
                              const char *password);

/* Sends one command over a fresh connection (TLS when the server is TLS)
 * and reads one complete RESP2 reply within timeout_ms (0 means 5000).
 * The raw reply bytes, NUL-terminated, go to reply (may be NULL when cap
 * is 0).  Returns the reply's type byte ('+', '-', ':', '$' or '*'), so an
 * error reply is not a failure; returns -1 on a connection failure, a
 * timeout, a refused AUTH or a reply that does not fit. */
int hl_redis_server_command(const hl_redis_server *s, char *reply,
                            size_t cap, int timeout_ms, int argc,
                            const char *const argv[]);

/* The same with the arguments listed and NULL-terminated, 5 s timeout:
 *   hl_redis_server_cmd(s, buf, sizeof buf, "CLIENT", "KILL", "TYPE",
 *                       "normal", (char *)NULL); */
int hl_redis_server_cmd(const hl_redis_server *s, char *reply, size_t cap,
                        ...) __attribute__((sentinel));

/* Sends one command and closes the connection without waiting for the
 * reply, for commands such as DEBUG SLEEP that block the server; the
 * server still runs it.  Returns 0 once the command is written, or -1.
 * The server may not have started it yet when this returns. */
int hl_redis_server_command_nowait(const hl_redis_server *s, int argc,
                                   const char *const argv[]);
int hl_redis_server_cmd_nowait(const hl_redis_server *s, ...)
    __attribute__((sentinel));

/* True if PING gets +PONG within timeout_ms; false, silently, otherwise,
 * which is how a paused or busy server is recognised. */
bool hl_redis_server_ping(const hl_redis_server *s, int timeout_ms);

#endif
