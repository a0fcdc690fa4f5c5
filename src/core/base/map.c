#include "core/base/map.h"

#include <string.h>

#include "core/base/alloc.h"

uint64_t hl_fnv1a64(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t hl_hash_bytes(const void *key, size_t len)
{
    /* FNV-1a with a final mix to spread the low bits the buckets use;
     * names come from the application, not from an attacker who could
     * choose colliding keys. */
    uint64_t h = hl_fnv1a64(key, len);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

hl_map_entry *hl_map_find(const hl_map *m, const void *key, size_t keylen)
{
    if (m->nbuckets == 0)
        return NULL;
    uint64_t h = hl_hash_bytes(key, keylen);
    for (hl_map_entry *e = m->buckets[h & (m->nbuckets - 1)]; e; e = e->next)
        if (e->hash == h && e->keylen == keylen &&
            memcmp(e->key, key, keylen) == 0)
            return e;
    return NULL;
}

static int map_grow(hl_map *m)
{
    size_t n = m->nbuckets ? m->nbuckets * 2 : 16;
    hl_map_entry **b = hl_calloc(n, sizeof *b);
    if (b == NULL)
        return -1;
    for (size_t i = 0; i < m->nbuckets; i++) {
        hl_map_entry *e = m->buckets[i];
        while (e) {
            hl_map_entry *next = e->next;
            size_t slot = e->hash & (n - 1);
            e->next = b[slot];
            b[slot] = e;
            e = next;
        }
    }
    hl_free(m->buckets);
    m->buckets = b;
    m->nbuckets = n;
    return 0;
}

hl_map_entry *hl_map_insert(hl_map *m, const void *key, size_t keylen,
                            void *value)
{
    if (m->count >= m->nbuckets && map_grow(m) != 0 && m->nbuckets == 0)
        return NULL;
    hl_map_entry *e = hl_malloc(sizeof *e + keylen + 1);
    if (e == NULL)
        return NULL;
    e->hash = hl_hash_bytes(key, keylen);
    e->value = value;
    e->keylen = keylen;
    memcpy(e->key, key, keylen);
    e->key[keylen] = '\0';
    size_t slot = e->hash & (m->nbuckets - 1);
    e->next = m->buckets[slot];
    m->buckets[slot] = e;
    m->count++;
    return e;
}

void hl_map_remove(hl_map *m, hl_map_entry *e)
{
    hl_map_entry **pp = &m->buckets[e->hash & (m->nbuckets - 1)];
    while (*pp && *pp != e)
        pp = &(*pp)->next;
    if (*pp == NULL)
        return;
    *pp = e->next;
    m->count--;
    hl_free(e);
}

void hl_map_clear(hl_map *m)
{
    for (size_t i = 0; i < m->nbuckets; i++) {
        hl_map_entry *e = m->buckets[i];
        while (e) {
            hl_map_entry *next = e->next;
            hl_free(e);
            e = next;
        }
    }
    hl_free(m->buckets);
    m->buckets = NULL;
    m->nbuckets = m->count = 0;
}

hl_map_entry *hl_map_first(const hl_map *m, size_t *cursor)
{
    for (size_t i = 0; i < m->nbuckets; i++) {
        if (m->buckets[i]) {
            *cursor = i;
            return m->buckets[i];
        }
    }
    return NULL;
}

hl_map_entry *hl_map_next(const hl_map *m, hl_map_entry *e, size_t *cursor)
{
    if (e->next)
        return e->next;
    for (size_t i = *cursor + 1; i < m->nbuckets; i++) {
        if (m->buckets[i]) {
            *cursor = i;
            return m->buckets[i];
        }
    }
    return NULL;
}
