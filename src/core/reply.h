/* Building hilock_reply objects from the hiredis reader, within bounds. */
#ifndef HL_REPLY_H
#define HL_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/read.h>

#include "hilock/reply.h"

typedef struct hl_reply_limits {
    uint64_t max_bytes;    /* string bytes of one reply, and bytes buffered */
    int64_t max_elements;  /* elements of one array */
    int max_depth;         /* array nesting */
    uint64_t bytes_so_far; /* string bytes of the reply being built */
    int violated;          /* a bound was crossed: the reader stops */
} hl_reply_limits;

/* A reader that builds hilock_reply objects and enforces *limits (which
 * must outlive it).  NULL when memory runs out. */
redisReader *hl_reader_create(hl_reply_limits *limits);

/* Read one reply from the reader.  Returns 1 with *out set, 0 when more
 * bytes are needed, -1 on a protocol error, -2 when a bound is crossed. */
int hl_reader_next(redisReader *reader, hl_reply_limits *limits,
                   hilock_reply **out);

/* Small helpers for code that reads replies. */
int hl_reply_is_error_prefix(const hilock_reply *r, const char *prefix);

#endif
