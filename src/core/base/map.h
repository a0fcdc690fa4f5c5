/* A hash map from byte strings to pointers: channel names, lock names. */
#ifndef HL_MAP_H
#define HL_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct hl_map_entry hl_map_entry;
struct hl_map_entry {
    hl_map_entry *next;
    uint64_t hash;
    void *value;
    size_t keylen;
    char key[]; /* NUL-terminated copy */
};

typedef struct hl_map {
    hl_map_entry **buckets;
    size_t nbuckets; /* a power of two, or 0 before the first insert */
    size_t count;
} hl_map;

/* The entry for key, or NULL. */
hl_map_entry *hl_map_find(const hl_map *m, const void *key, size_t keylen);
/* Insert a new key (it must be absent); NULL when memory runs out. */
hl_map_entry *hl_map_insert(hl_map *m, const void *key, size_t keylen,
                            void *value);
/* Remove and free an entry found by hl_map_find. */
void hl_map_remove(hl_map *m, hl_map_entry *e);
/* Free the table and all entries (not the values). */
void hl_map_clear(hl_map *m);

/* Iterate: for (e = hl_map_first(m, &i); e; e = hl_map_next(m, e, &i)).
 * Removing the current entry is not allowed while iterating; collect
 * first. */
hl_map_entry *hl_map_first(const hl_map *m, size_t *cursor);
hl_map_entry *hl_map_next(const hl_map *m, hl_map_entry *e, size_t *cursor);

uint64_t hl_hash_bytes(const void *key, size_t len);
/* Plain FNV-1a 64, for hashes that are part of a documented contract. */
uint64_t hl_fnv1a64(const void *key, size_t len);

#endif
