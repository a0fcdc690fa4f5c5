/* Building hilock_reply objects from the hiredis reader, within bounds. */
#ifndef HL_REPLY_H
#define HL_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/read.h>

#include "hilock/reply.h"

/* The longest line of a reply: a status, an error, an integer, or the
 * header of a string or array.  Real servers send a few hundred bytes at
 * most; a longer one is refused like a reply over max_bytes. */
#define HL_MAX_LINE_BYTES 65536

/* Which bound a reply crossed. */
enum hl_bound {
    HL_BOUND_NONE,
    HL_BOUND_BYTES,    /* max_bytes, in strings or buffered */
    HL_BOUND_ELEMENTS, /* max_elements in one array */
    HL_BOUND_DEPTH,    /* max_depth */
    HL_BOUND_LINE      /* HL_MAX_LINE_BYTES */
};

typedef struct hl_reply_limits {
    uint64_t max_bytes;    /* string bytes of one reply, and bytes buffered */
    int64_t max_elements;  /* elements of one array */
    int max_depth;         /* array nesting */
    uint64_t bytes_so_far; /* string bytes of the reply being built */
    int violated;          /* the hl_bound crossed: the reader stops */
    /* The reader waits for more bytes.  It resumes with a line (the rest
     * of a line, or the header of the string whose body it waits for),
     * so until a line end arrives it is not asked again: hiredis would
     * scan the whole unfinished line on every read. */
    int waiting;
    size_t scanned; /* unread bytes known to hold no line end */
} hl_reply_limits;

/* A reader that builds hilock_reply objects and enforces *limits (which
 * must outlive it).  NULL when memory runs out. */
redisReader *hl_reader_create(hl_reply_limits *limits);

/* Read one reply from the reader.  Returns 1 with *out set, 0 when more
 * bytes are needed, -1 on a protocol error, -2 when a bound is crossed
 * (also a line over HL_MAX_LINE_BYTES, finished or not).  Each byte fed
 * is looked at a bounded number of times, however it is split. */
int hl_reader_next(redisReader *reader, hl_reply_limits *limits,
                   hilock_reply **out);

/* Which bound limits->violated names, with its value, into out (cap
 * bytes): what a refused reply is told apart by. */
void hl_reply_bound_why(const hl_reply_limits *limits, char *out,
                        size_t cap);

/* Small helpers for code that reads replies. */
int hl_reply_is_error_prefix(const hilock_reply *r, const char *prefix);

/* What r is, for a message about a reply of the wrong shape: "nil", "an
 * integer", "a bulk string", "a status", "an error", "an array", or "no
 * reply" for NULL. */
const char *hl_reply_kind(const hilock_reply *r);

/* Bytes a server sent, made fit for a message: at most 64 of them, each
 * outside printable ASCII written as \xNN, and "..." when cut.  out gets
 * at most cap bytes, NUL-terminated; returns out. */
char *hl_reply_quote(char *out, size_t cap, const char *s, size_t len);

#endif
