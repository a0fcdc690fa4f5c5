/* The host lists options keep: "host:port" items joined by ',', an IPv6
 * host in brackets (cluster seeds, sentinels). */
#ifndef HL_HOSTLIST_H
#define HL_HOSTLIST_H

#include <stddef.h>

/* Read the item at *cursor into host (cap bytes, brackets removed) and
 * port, and move *cursor past it (NULL after the last).  1 when read, 0
 * for an item that cannot be (still skipped), -1 at the end. */
int hl_hostlist_next(const char **cursor, char *host, size_t cap,
                     int *port);

#endif
