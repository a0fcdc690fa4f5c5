#include "core/base/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/handle.h"
#include "hilock/alloc.h"

static const hilock_allocators libc_allocators = {malloc, calloc, realloc,
                                                   free};
/* The table in use is published through an atomic pointer, and a new one
 * is written to the slot not in use, so a reader never sees a half-copied
 * table.  (Swapping while objects are alive is still the caller's error:
 * memory must be freed by the allocator that made it.) */
static hilock_allocators custom[2];
static _Atomic(const hilock_allocators *) current = &libc_allocators;

static const hilock_allocators *table_in_use(void)
{
    return atomic_load_explicit(&current, memory_order_acquire);
}

int hilock_set_allocators(const hilock_allocators *table)
{
    hl_handle_drain();
    if (table == NULL) {
        atomic_store_explicit(&current, &libc_allocators,
                              memory_order_release);
        return 0;
    }
    if (!table->malloc_fn || !table->calloc_fn || !table->realloc_fn ||
        !table->free_fn)
        return 1; /* HILOCK_EINVAL */
    hilock_allocators *slot =
        table_in_use() == &custom[0] ? &custom[1] : &custom[0];
    *slot = *table;
    atomic_store_explicit(&current, slot, memory_order_release);
    return 0;
}

void *hl_malloc(size_t size)
{
    return table_in_use()->malloc_fn(size ? size : 1);
}

void *hl_calloc(size_t count, size_t size)
{
    return table_in_use()->calloc_fn(count ? count : 1, size ? size : 1);
}

void *hl_realloc(void *ptr, size_t size)
{
    return table_in_use()->realloc_fn(ptr, size ? size : 1);
}

void hl_free(void *ptr)
{
    if (ptr != NULL)
        table_in_use()->free_fn(ptr);
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
