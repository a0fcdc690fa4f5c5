/* Allocation through one replaceable table, so tests can fail the n-th
 * allocation and embedders can plug in their own allocator. */
#ifndef HL_ALLOC_H
#define HL_ALLOC_H

#include <stddef.h>

void *hl_malloc(size_t size);
void *hl_calloc(size_t count, size_t size);
void *hl_realloc(void *ptr, size_t size);
void hl_free(void *ptr);
/* strdup / memdup through the table; NULL in gives NULL out. */
char *hl_strdup(const char *s);
void *hl_memdup(const void *p, size_t len);

#endif
