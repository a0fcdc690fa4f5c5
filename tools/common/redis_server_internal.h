/* What the launcher (redis_server.c) shares with the fault injection
 * (redis_faults.c) and the groups built of servers (redis_cluster.c,
 * redis_replicated.c): the handle, the steps of starting a process, and
 * small helpers.  Nothing outside tools/common includes it. */
#ifndef HL_REDIS_SERVER_INTERNAL_H
#define HL_REDIS_SERVER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "redis_server.h"

/* Flags for hl_rs_fail() and the command exchange. */
#define HL_RS_QUIET 1
#define HL_RS_NO_AUTH 2
#define HL_RS_NOWAIT 4

struct hl_redis_server {
    hl_redis_server *prev;
    hl_redis_server *next;
    /* Only the process that forked the server may signal or reap it. */
    pid_t owner;
    pid_t pid;
    bool paused;
    int port;
    int start_timeout_ms;
    char *exe;
    char *dir;
    char *conf_path;
    char *log_path;
    char *extra_config;
    char *password;
    char *auth_user;
    char *auth_password;
    bool tls;
    bool sentinel;
    char *tls_cert;
    char *tls_key;
    char *tls_ca;
    char *tls_auth_clients;
    char *tls_client_cert;
    char *tls_client_key;
};

/* One explaining line on stderr, unless flags has HL_RS_QUIET. */
void hl_rs_fail(int flags, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int64_t hl_rs_now_ms(void);
void hl_rs_sleep_ms(int ms);
/* Fork and exec the server on s->port; *log_from is where its log starts. */
int hl_rs_spawn(hl_redis_server *s, off_t *log_from);
/* Wait for the process, after a SIGKILL. */
void hl_rs_reap(hl_redis_server *s);
/* 1 ready, 0 the process exited, -1 timed out (then killed). */
int hl_rs_wait_ready(hl_redis_server *s, off_t log_from, int64_t deadline);
/* The text of a bulk-string answer to "A B" (INFO, CLUSTER NODES), to
 * free(); NULL for no answer or another type. */
char *hl_rs_ask_text(const hl_redis_server *s, const char *a, const char *b);
bool hl_rs_log_says_port_busy(const hl_redis_server *s, off_t from);
void hl_rs_print_log_tail(const hl_redis_server *s, off_t from);

#endif
