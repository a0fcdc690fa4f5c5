/* A Redis reply as hilock hands it out: built by hilock's own bounded RESP
 * reader, independent of the codec underneath. */
#ifndef HILOCK_REPLY_H
#define HILOCK_REPLY_H

#include <stddef.h>

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hilock_reply_type {
    HILOCK_REPLY_STRING = 1,  /* bulk string: str, len */
    HILOCK_REPLY_ARRAY = 2,   /* elements, element[] */
    HILOCK_REPLY_INTEGER = 3, /* integer */
    HILOCK_REPLY_NIL = 4,     /* nil bulk or nil array */
    HILOCK_REPLY_STATUS = 5,  /* simple string: str, len */
    HILOCK_REPLY_ERROR = 6    /* error string: str, len */
} hilock_reply_type;

typedef struct hilock_reply {
    hilock_reply_type type;
    long long integer;
    size_t len;   /* length of str, without the terminating NUL */
    char *str;    /* NUL-terminated; may hold NUL bytes within len */
    size_t elements;
    struct hilock_reply **element;
} hilock_reply;

/* Free a reply and all its elements.  NULL is ignored.  Any thread. */
HILOCK_API void hilock_reply_free(hilock_reply *reply);

#ifdef __cplusplus
}
#endif

#endif
