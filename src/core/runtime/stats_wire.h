/* hilock_stats as one line of text, for the client's card (presence.c):
 * "name=value" words, a histogram's buckets as "name=v0,v1,...", one
 * space between words.  A reader takes the names it knows and leaves
 * the rest at 0, so that cards of other versions read as far as they
 * agree. */
#ifndef HL_STATS_WIRE_H
#define HL_STATS_WIRE_H

#include <stdbool.h>
#include <stddef.h>

#include "hilock/client.h"

/* Room for any line hl_stats_encode writes. */
#define HL_STATS_WIRE_MAX 2048

/* s as a line into out (HL_STATS_WIRE_MAX bytes); its length. */
size_t hl_stats_encode(const hilock_stats *s, char *out);

/* The line of len bytes at text into *out (size set, the rest 0 but for
 * what the line says); false when it holds no word this version knows. */
bool hl_stats_decode(const char *text, size_t len, hilock_stats *out);

#endif
