#include "core/base/handle.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/base/alloc.h"

/* Open addressing over pointer values; a handful of clients and locks per
 * process, so a lock around a small table is plenty. */
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static const void **slots;
static size_t nslots;
static size_t used;
static const char tombstone;

/* A ring of released handles' memory, oldest at next_out once full. */
static void *quarantine[HL_HANDLE_QUARANTINE];
static size_t next_out;

static size_t slot_of(const void *h, size_t n)
{
    uintptr_t x = (uintptr_t)h;
    x ^= x >> 17;
    x *= 0x9e3779b97f4a7c15ULL;
    return (size_t)(x >> 7) & (n - 1);
}

static size_t find(const void *h)
{
    if (nslots == 0)
        return SIZE_MAX;
    for (size_t i = slot_of(h, nslots), k = 0; k < nslots;
         i = (i + 1) & (nslots - 1), k++) {
        if (slots[i] == h)
            return i;
        if (slots[i] == NULL)
            return SIZE_MAX;
    }
    return SIZE_MAX;
}

static int grow(void)
{
    size_t n = nslots ? nslots * 2 : 64;
    const void **fresh = hl_calloc(n, sizeof *fresh);
    if (fresh == NULL)
        return -1;
    size_t live = 0;
    for (size_t i = 0; i < nslots; i++) {
        const void *h = slots[i];
        if (h == NULL || h == &tombstone)
            continue;
        size_t j = slot_of(h, n);
        while (fresh[j] != NULL)
            j = (j + 1) & (n - 1);
        fresh[j] = h;
        live++;
    }
    hl_free((void *)slots);
    slots = fresh;
    nslots = n;
    used = live;
    return 0;
}

int hl_handle_add(const void *h)
{
    int rc = 0;
    pthread_mutex_lock(&handles_lock);
    if ((used + 1) * 2 > nslots && grow() != 0) {
        rc = -1;
    } else {
        size_t i = slot_of(h, nslots);
        while (slots[i] != NULL && slots[i] != &tombstone)
            i = (i + 1) & (nslots - 1);
        if (slots[i] == NULL)
            used++;
        slots[i] = h;
    }
    pthread_mutex_unlock(&handles_lock);
    return rc;
}

bool hl_handle_remove(const void *h)
{
    pthread_mutex_lock(&handles_lock);
    size_t i = find(h);
    if (i != SIZE_MAX)
        slots[i] = &tombstone;
    pthread_mutex_unlock(&handles_lock);
    return i != SIZE_MAX;
}

bool hl_handle_is_live(const void *h)
{
    pthread_mutex_lock(&handles_lock);
    bool live = find(h) != SIZE_MAX;
    pthread_mutex_unlock(&handles_lock);
    return live;
}

void hl_handle_release(void *h)
{
    if (h == NULL)
        return;
    pthread_mutex_lock(&handles_lock);
    void *oldest = quarantine[next_out];
    quarantine[next_out] = h;
    next_out = (next_out + 1) % HL_HANDLE_QUARANTINE;
    pthread_mutex_unlock(&handles_lock);
    hl_free(oldest);
}

void hl_handle_drain(void)
{
    void *out[HL_HANDLE_QUARANTINE];
    pthread_mutex_lock(&handles_lock);
    memcpy(out, quarantine, sizeof out);
    memset(quarantine, 0, sizeof quarantine);
    next_out = 0;
    pthread_mutex_unlock(&handles_lock);
    for (size_t i = 0; i < HL_HANDLE_QUARANTINE; i++)
        hl_free(out[i]);
}
