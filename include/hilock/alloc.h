/* Replaceable allocator.  hilock allocates through this table; the RESP
 * codec (hiredis) keeps using the C library's malloc for its own buffers. */
#ifndef HILOCK_ALLOC_H
#define HILOCK_ALLOC_H

#include <stddef.h>

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hilock_allocators {
    void *(*malloc_fn)(size_t size);
    void *(*calloc_fn)(size_t count, size_t size);
    void *(*realloc_fn)(void *ptr, size_t size);
    void (*free_fn)(void *ptr);
} hilock_allocators;

/* Replace the allocator table; NULL restores the C library's.  Call it
 * before any other hilock call and never while a hilock object is alive:
 * memory must be freed by the allocator that made it.  Not thread-safe.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  a member of the table is NULL */
HILOCK_API int hilock_set_allocators(const hilock_allocators *table);

#ifdef __cplusplus
}
#endif

#endif
