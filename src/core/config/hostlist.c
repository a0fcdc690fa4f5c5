#include "core/config/hostlist.h"

#include <stdlib.h>
#include <string.h>

int hl_hostlist_next(const char **cursor, char *host, size_t cap, int *port)
{
    const char *p = *cursor;
    if (p == NULL)
        return -1;
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    *cursor = comma ? comma + 1 : NULL;
    const char *colon = NULL;
    for (size_t i = 0; i < n; i++)
        if (p[i] == ':')
            colon = p + i;
    if (colon == NULL)
        return 0;
    const char *h = p;
    size_t hlen = (size_t)(colon - p);
    if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    if (hlen == 0 || hlen >= cap)
        return 0;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = atoi(colon + 1);
    return *port > 0 && *port <= 65535;
}
