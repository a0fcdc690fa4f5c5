/* A growable byte buffer with a read cursor: bytes are appended at the end
 * and consumed from the front, so partial writes need no memmove until the
 * buffer is drained. */
#ifndef HL_BUF_H
#define HL_BUF_H

#include <stddef.h>

typedef struct hl_buf {
    char *data;
    size_t start; /* first unconsumed byte */
    size_t end;   /* one past the last byte */
    size_t cap;
} hl_buf;

/* 0 on success, -1 when memory runs out (the buffer is unchanged). */
int hl_buf_append(hl_buf *b, const void *p, size_t len);
static inline size_t hl_buf_len(const hl_buf *b) { return b->end - b->start; }
static inline const char *hl_buf_head(const hl_buf *b)
{
    return b->data + b->start;
}
/* Consume len bytes from the front; a buffer drained by it lets its
 * memory go when it grew past 64 KiB. */
void hl_buf_consume(hl_buf *b, size_t len);
void hl_buf_reset(hl_buf *b);
void hl_buf_free(hl_buf *b);

#endif
