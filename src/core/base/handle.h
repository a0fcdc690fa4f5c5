/* The set of live handles, so that a destroyed handle passed again is an
 * error (HILOCK_ECLOSED) rather than a use after free.  Any thread.
 *
 * A set of addresses alone cannot tell a stale pointer from a new handle
 * that the allocator placed at the same address, and the public API
 * passes raw pointers, so no tag can travel with the caller's copy.
 * Hence the quarantine: the memory of the last HL_HANDLE_QUARANTINE
 * handles released is kept back from the allocator, so no new handle can
 * take those addresses while a stale copy is most likely still around.
 * Past that window reuse is undefined behaviour, as with free(). */
#ifndef HL_HANDLE_H
#define HL_HANDLE_H

#include <stdbool.h>

/* 0, or -1 when memory runs out. */
int hl_handle_add(const void *handle);
/* true if the handle was live (and is now removed). */
bool hl_handle_remove(const void *handle);
bool hl_handle_is_live(const void *handle);

/* How many released handles keep their memory. */
#define HL_HANDLE_QUARANTINE 64

/* Give back a handle's memory (hl_malloc'd, handle already removed): it
 * joins the quarantine, and the oldest one there goes to hl_free. */
void hl_handle_release(void *handle);

/* Free the whole quarantine now: before the allocator table changes, since
 * memory goes back to the allocator that made it, and for leak counts. */
void hl_handle_drain(void);

#endif
