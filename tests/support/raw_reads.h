/* Reading what a fixture server holds over the fixture's own connections
 * (redis_server.h), never through the library under test, so that a test
 * sees the keys of a lock as they are.
 *
 * Commands are listed and NULL-terminated, at most HL_RAW_MAX_ARGS
 * words:
 *   hl_raw_int(server, "LLEN", key, (char *)NULL)
 * Every function here fails the running cmocka test when the server does
 * not answer within hl_widen(5000) ms, answers with an error, or answers
 * with another kind of reply than the one asked for; none is for forked
 * children.  Raw replies are the RESP bytes as they came, NUL-terminated;
 * the hl_raw_parse_* functions take them apart. */
#ifndef HL_RAW_READS_H
#define HL_RAW_READS_H

#include <stdbool.h>
#include <stddef.h>

#include "redis_server.h"

#define HL_RAW_MAX_ARGS 8

/* Room for any reply these helpers read whole. */
#define HL_RAW_REPLY_CAP 16384

/* The raw reply into reply; returns its type byte. */
int hl_raw_cmd(const hl_redis_server *s, char *reply, size_t cap,
               const char *arg0, ...) __attribute__((sentinel));

/* An integer reply. */
long long hl_raw_int(const hl_redis_server *s, const char *arg0, ...)
    __attribute__((sentinel));

/* A bulk string reply into out; false for a nil, with out empty. */
bool hl_raw_bulk(const hl_redis_server *s, char *out, size_t cap,
                 const char *arg0, ...) __attribute__((sentinel));

long long hl_raw_exists(const hl_redis_server *s, const char *key);

/* DBSIZE, less the clients' cards (hilock_client:{<id>}), which every
 * client keeps while it runs, and the words on what names are
 * (hilock_kind:{NAME}), which outlast a lock by design: the keys the
 * locks left. */
long long hl_raw_dbsize_locks(const hl_redis_server *s);
long long hl_raw_pttl(const hl_redis_server *s, const char *key);

/* The server's clock (TIME) in ms, on which the scripts reckon places,
 * promises and leases. */
long long hl_raw_server_ms(const hl_redis_server *s);

/* The members of the list at key, first to last, joined by single spaces
 * into out ("" for no list); they must fit in cap. */
void hl_raw_list(const hl_redis_server *s, const char *key, char *out,
                 size_t cap);

/* Take apart a raw reply from *p on, moving *p past what they read.  An
 * array header "*n\r\n": returns n. */
long hl_raw_parse_array(const char **p);

/* A bulk string "$len\r\nbytes\r\n", or "$-1\r\n" for a nil: the bytes
 * go to out (NULL: skipped, else they must fit with their NUL), and the
 * length is returned, -1 for a nil. */
long hl_raw_parse_bulk(const char **p, char *out, size_t cap);

#endif
