#include "core/base/buf.h"

#include <string.h>

#include "core/base/alloc.h"

int hl_buf_append(hl_buf *b, const void *p, size_t len)
{
    if (len == 0)
        return 0;
    if (b->start == b->end)
        b->start = b->end = 0;
    if (b->cap - b->end < len) {
        /* Slide the live bytes down first; grow only if that is not enough. */
        size_t live = b->end - b->start;
        if (b->start > 0 && b->cap - live >= len) {
            memmove(b->data, b->data + b->start, live);
        } else {
            size_t cap = b->cap ? b->cap : 4096;
            while (cap - live < len)
                cap *= 2;
            char *data = hl_malloc(cap);
            if (data == NULL)
                return -1;
            if (live)
                memcpy(data, b->data + b->start, live);
            hl_free(b->data);
            b->data = data;
            b->cap = cap;
        }
        b->start = 0;
        b->end = live;
    }
    memcpy(b->data + b->end, p, len);
    b->end += len;
    return 0;
}

/* A drained buffer larger than this lets its memory go: a burst (a
 * renewal round of many leases, a flood of acquires) would otherwise
 * leave its high-water mark allocated for good. */
#define KEEP_WHEN_DRAINED (64 * 1024)

void hl_buf_consume(hl_buf *b, size_t len)
{
    b->start += len;
    if (b->start < b->end)
        return;
    b->start = b->end = 0;
    if (b->cap > KEEP_WHEN_DRAINED)
        hl_buf_free(b);
}

void hl_buf_reset(hl_buf *b) { b->start = b->end = 0; }

void hl_buf_free(hl_buf *b)
{
    hl_free(b->data);
    b->data = NULL;
    b->start = b->end = b->cap = 0;
}
