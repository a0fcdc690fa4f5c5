/* The host lists options keep: "host:port" items joined by ',', an IPv6
 * host in brackets (cluster seeds, sentinels); and the strict reading of
 * the numbers in them and in the addresses servers send. */
#ifndef HL_HOSTLIST_H
#define HL_HOSTLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/decimal.h"

/* Read the item at *cursor into host (cap bytes, brackets removed) and
 * port, and move *cursor past it (NULL after the last).  1 when read, 0
 * for an item that cannot be (still skipped), -1 at the end. */
int hl_hostlist_next(const char **cursor, char *host, size_t cap,
                     int *port);

/* The items of a list (0 for NULL), readable or not. */
int hl_hostlist_count(const char *list);

/* p[0..n) as a port: digits only, 1..65535. */
bool hl_port_parse(const char *p, size_t n, int *port);

#endif
