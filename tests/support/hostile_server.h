/* A fake RESP server for the bytes no real server sends: a ttl of
 * INT64_MAX, an uptime of 10^30, a status line that never ends, a PING
 * left unanswered.  Every other test talks to a real redis-server; this
 * one exists only where the server's misbehaviour is the input.
 *
 * It listens on a free loopback port and serves each connection on a
 * thread of its own with blocking I/O, so a handler may stall or stream
 * for as long as it likes without holding up the client's other
 * connections.  By default it answers what a client needs to come up and
 * wait (PING, AUTH, SELECT, INFO, SCRIPT LOAD, SUBSCRIBE, UNSUBSCRIBE,
 * PUBLISH) like a real server; a test's handler sees every request first
 * and answers whatever it wants with any bytes.
 *
 * hl_hostile_start fails the running cmocka test when it cannot start;
 * the rest only report, and may run on a connection thread. */
#ifndef HL_HOSTILE_SERVER_H
#define HL_HOSTILE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hl_hostile hl_hostile;
typedef struct hl_hostile_conn hl_hostile_conn;

/* One request as the client sent it: an array of bulk strings, each
 * copied with a NUL after it. */
typedef struct hl_hostile_req {
    int argc;
    char **argv;
    size_t *lens;
} hl_hostile_req;

/* Sees each request before the default answer, on the connection's
 * thread.  Returns true when it answered (or chose to say nothing),
 * false to let the default answer go. */
typedef bool hl_hostile_fn(hl_hostile_conn *conn, const hl_hostile_req *req,
                           void *data);

/* Starts serving; fn may be NULL (default answers only). */
hl_hostile *hl_hostile_start(hl_hostile_fn *fn, void *data);

/* Closes every connection and the port, and waits for every thread. */
void hl_hostile_stop(hl_hostile *h);

int hl_hostile_port(const hl_hostile *h);

/* Requests whose first word is cmd (any case) received so far, on every
 * connection. */
long hl_hostile_count(hl_hostile *h, const char *cmd);

/* Connections accepted so far. */
long hl_hostile_connections(hl_hostile *h);

/* Whether the request's first word is cmd (any case). */
bool hl_hostile_is(const hl_hostile_req *req, const char *cmd);

/* Writes bytes to the client; false once the client has gone. */
bool hl_hostile_send(hl_hostile_conn *c, const void *bytes, size_t len);
bool hl_hostile_sendf(hl_hostile_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Writes n bytes of 'x', in pieces, until done or the client has gone;
 * returns how many were written. */
size_t hl_hostile_send_filler(hl_hostile_conn *c, size_t n);

/* Whether the connection subscribed to a channel (the client's pub/sub
 * connection) and has not unsubscribed from all. */
bool hl_hostile_subscribed(const hl_hostile_conn *c);

/* The server the connection belongs to. */
hl_hostile *hl_hostile_of(const hl_hostile_conn *c);

#endif
