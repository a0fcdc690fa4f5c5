/* A key or channel name made when needed, so that a handle carries only
 * its own name: on the stack for ordinary names, on the heap for long
 * ones.  What goes into it is the layout's business, not this file's. */
#ifndef HL_AUXNAME_H
#define HL_AUXNAME_H

#include <stddef.h>

typedef struct hl_aux_name {
    char *s;
    size_t len;
    char buf[160];
} hl_aux_name;

/* Room for need bytes at a->s (len 0), or NULL when out of memory.  Pair
 * with hl_aux_name_done either way. */
char *hl_aux_name_reserve(hl_aux_name *a, size_t need);
void hl_aux_name_done(hl_aux_name *a);
void hl_aux_names_done(int n, hl_aux_name *names);

#endif
