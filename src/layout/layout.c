#include "layout/layout.h"

#include <stdbool.h>
#include <string.h>

bool hl_layout_one_slot(const char *name, size_t name_len)
{
    const char *open = memchr(name, '{', name_len);
    if (open == NULL)
        return memchr(name, '}', name_len) == NULL;
    size_t rest = name_len - (size_t)(open + 1 - name);
    const char *close = memchr(open + 1, '}', rest);
    return close != NULL && close > open + 1;
}

int hl_layout_key(hl_aux_name *out, const char *prefix, const char *name,
                  size_t name_len, const char *tail, size_t tail_len)
{
    size_t plen = strlen(prefix);
    /* Redisson's rule: a name with a hash tag of its own keeps it, so
     * both sides name the same keys. */
    bool braces = memchr(name, '{', name_len) == NULL;
    char *p = hl_aux_name_reserve(out, plen + name_len + 5 +
                                           (tail ? tail_len : 0));
    if (p == NULL)
        return -1;
    memcpy(p, prefix, plen);
    p += plen;
    *p++ = ':';
    if (braces)
        *p++ = '{';
    memcpy(p, name, name_len);
    p += name_len;
    if (braces)
        *p++ = '}';
    if (tail) {
        *p++ = ':';
        memcpy(p, tail, tail_len);
        p += tail_len;
    }
    *p = '\0';
    out->len = (size_t)(p - out->s);
    return 0;
}

int hl_layout_latch_channel(hl_aux_name *out, const char *name,
                            size_t name_len)
{
    size_t plen = strlen(HL_LAYOUT_LATCH_CHANNEL);
    char *p = hl_aux_name_reserve(out, plen + name_len + 3);
    if (p == NULL)
        return -1;
    memcpy(p, HL_LAYOUT_LATCH_CHANNEL, plen);
    p += plen;
    *p++ = '{';
    memcpy(p, name, name_len);
    p += name_len;
    *p++ = '}';
    *p = '\0';
    out->len = (size_t)(p - out->s);
    return 0;
}

int hl_layout_suffixed(hl_aux_name *out, const char *name, size_t name_len,
                       const char *tail)
{
    size_t tlen = strlen(tail);
    bool braces = memchr(name, '{', name_len) == NULL;
    char *p = hl_aux_name_reserve(out, name_len + tlen + 4);
    if (p == NULL)
        return -1;
    if (braces)
        *p++ = '{';
    memcpy(p, name, name_len);
    p += name_len;
    if (braces)
        *p++ = '}';
    *p++ = ':';
    memcpy(p, tail, tlen);
    p += tlen;
    *p = '\0';
    out->len = (size_t)(p - out->s);
    return 0;
}
