/* Segmented locks: one logical resource split into S segments, each
 * behind its own reentrant lock, so that work on keys of different
 * segments proceeds at once.  The stock counter of a shop is the classic
 * case: split each product's stock (or the product space) into segments
 * and deduct under the segment's lock.
 *
 * The segment of a key is FNV-1a 64 of its bytes modulo S, so any
 * language can compute the same assignment; segment i is the lock named
 * "<name>:seg:<i>". */
#ifndef HILOCK_SEGMENTED_H
#define HILOCK_SEGMENTED_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "lock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hilock_segmented hilock_segmented;

/* Largest number of segments. */
#define HILOCK_MAX_SEGMENTS 65536

/* Make S lock handles "<name>:seg:0" .. "<name>:seg:<S-1>" (name a C
 * string; the _n twin takes a binary-safe name and its length).  Any
 * thread; no round trip.
 * @return HILOCK_OK
 * @return HILOCK_EINVAL  NULL argument, segments 0 or above the maximum,
 *                        or a name that leaves no room for the suffix
 * @return HILOCK_ENOMEM, HILOCK_ECLOSED (client closed) */
HILOCK_API int hilock_segmented_create(hilock_segmented **out,
                                       hilock_client *client,
                                       const char *name, unsigned segments);
HILOCK_API int hilock_segmented_create_n(hilock_segmented **out,
                                         hilock_client *client,
                                         const char *name, size_t name_len,
                                         unsigned segments);

/* Destroy the segment handles (as hilock_lock_destroy does for each) and
 * the set.  A second destroy returns HILOCK_ECLOSED, within the window
 * hilock_client_destroy describes. */
HILOCK_API int hilock_segmented_destroy(hilock_segmented *set);

HILOCK_API unsigned hilock_segmented_count(const hilock_segmented *set);

/* The segment of a key: FNV-1a 64 of its bytes modulo the count.  Any
 * thread. */
HILOCK_API unsigned hilock_segmented_index(const hilock_segmented *set,
                                           const void *key, size_t key_len);

/* The lock of segment i (NULL when out of range), or of a key's segment.
 * The handle belongs to the set; do not destroy it yourself. */
HILOCK_API hilock_lock *hilock_segmented_lock(const hilock_segmented *set,
                                              unsigned index);
HILOCK_API hilock_lock *hilock_segmented_lock_for(
    const hilock_segmented *set, const void *key, size_t key_len);

#ifdef __cplusplus
}
#endif

#endif
