#include "core/config/hostlist.h"

#include <string.h>

bool hl_port_parse(const char *p, size_t n, int *port)
{
    uint64_t v;
    if (!hl_decimal_parse(p, n, 65535, &v) || v == 0)
        return false;
    *port = (int)v;
    return true;
}

int hl_hostlist_count(const char *list)
{
    if (list == NULL)
        return 0;
    int n = 1;
    for (const char *p = list; (p = strchr(p, ',')) != NULL; p++)
        n++;
    return n;
}

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
    return hl_port_parse(colon + 1, (size_t)(p + n - colon - 1), port);
}
