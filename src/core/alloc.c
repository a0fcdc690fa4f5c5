#include "alloc.h"

#include <stdlib.h>
#include <string.h>

#include "hilock/alloc.h"

static hilock_allocators allocators = {malloc, calloc, realloc, free};

int hilock_set_allocators(const hilock_allocators *table)
{
    if (table == NULL) {
        allocators = (hilock_allocators){malloc, calloc, realloc, free};
        return 0;
    }
    if (!table->malloc_fn || !table->calloc_fn || !table->realloc_fn ||
        !table->free_fn)
        return 1; /* HILOCK_EINVAL */
    allocators = *table;
    return 0;
}

void *hl_malloc(size_t size) { return allocators.malloc_fn(size ? size : 1); }

void *hl_calloc(size_t count, size_t size)
{
    return allocators.calloc_fn(count ? count : 1, size ? size : 1);
}

void *hl_realloc(void *ptr, size_t size)
{
    return allocators.realloc_fn(ptr, size ? size : 1);
}

void hl_free(void *ptr)
{
    if (ptr != NULL)
        allocators.free_fn(ptr);
}

void *hl_memdup(const void *p, size_t len)
{
    if (p == NULL)
        return NULL;
    char *copy = hl_malloc(len + 1);
    if (copy == NULL)
        return NULL;
    memcpy(copy, p, len);
    copy[len] = '\0';
    return copy;
}

char *hl_strdup(const char *s)
{
    return s ? hl_memdup(s, strlen(s)) : NULL;
}
