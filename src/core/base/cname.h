/* The length of a name given as a C string, for the create functions
 * that take one beside their binary-safe _n twins.  It looks no further
 * than one byte past the longest name, so an overlong name is refused as
 * overlong without reading on. */
#ifndef HL_CNAME_H
#define HL_CNAME_H

#include <stddef.h>
#include <string.h>

#include "hilock/lock.h"

static inline size_t hl_cname_len(const char *name)
{
    return name == NULL ? 0 : strnlen(name, (size_t)HILOCK_MAX_NAME_LEN + 1);
}

#endif
