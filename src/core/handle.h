/* The set of live handles, so that a destroyed handle passed again is an
 * error (HILOCK_ECLOSED) rather than a use after free.  Any thread. */
#ifndef HL_HANDLE_H
#define HL_HANDLE_H

#include <stdbool.h>

/* 0, or -1 when memory runs out. */
int hl_handle_add(const void *handle);
/* true if the handle was live (and is now removed). */
bool hl_handle_remove(const void *handle);
bool hl_handle_is_live(const void *handle);

#endif
