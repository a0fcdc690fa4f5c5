/* Segmented locks: S reentrant locks addressed by a stable hash. */
#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/base/handle.h"
#include "core/base/map.h"
#include "hilock/segmented.h"
#include "core/base/cname.h"

struct hilock_segmented {
    hilock_client *client;
    unsigned count;
    hilock_lock *locks[];
};

int hilock_segmented_create_n(hilock_segmented **out, hilock_client *client,
                              const char *name, size_t name_len,
                              unsigned segments)
{
    if (out == NULL || client == NULL || name == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    *out = NULL;
    if (segments == 0 || segments > HILOCK_MAX_SEGMENTS)
        return hl_fail(HILOCK_EINVAL, "segments must be 1..%d, not %u",
                       HILOCK_MAX_SEGMENTS, segments);
    /* ":seg:" and up to five digits. */
    if (name_len == 0 || name_len > HILOCK_MAX_NAME_LEN - 10)
        return hl_fail(HILOCK_EINVAL, "bad segmented lock name length %zu",
                       name_len);
    hilock_segmented *set =
        hl_calloc(1, sizeof *set + segments * sizeof set->locks[0]);
    char *buf = hl_malloc(name_len + 16);
    if (set == NULL || buf == NULL) {
        hl_free(set);
        hl_free(buf);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    set->client = client;
    set->count = segments;
    memcpy(buf, name, name_len);
    int rc = HILOCK_OK;
    for (unsigned i = 0; i < segments && rc == HILOCK_OK; i++) {
        int n = snprintf(buf + name_len, 16, ":seg:%u", i);
        rc = hilock_lock_create_n(&set->locks[i], client, buf,
                                name_len + (size_t)n);
    }
    hl_free(buf);
    if (rc == HILOCK_OK && hl_handle_add(set) != 0)
        rc = hl_fail(HILOCK_ENOMEM, "out of memory");
    if (rc != HILOCK_OK) {
        char detail[HL_DETAIL_MAX];
        snprintf(detail, sizeof detail, "%s", hilock_last_error());
        for (unsigned i = 0; i < segments; i++)
            if (set->locks[i])
                hilock_lock_destroy(set->locks[i]);
        hl_free(set);
        return hl_fail(rc, "%s", detail);
    }
    *out = set;
    return HILOCK_OK;
}

int hilock_segmented_create(hilock_segmented **out, hilock_client *client,
                            const char *name, unsigned segments)
{
    return hilock_segmented_create_n(out, client, name,
                                     hl_cname_len(name), segments);
}

int hilock_segmented_destroy(hilock_segmented *set)
{
    if (set == NULL)
        return hl_fail(HILOCK_EINVAL, "set is NULL");
    if (!hl_handle_remove(set))
        return hl_fail(HILOCK_ECLOSED, "set was destroyed already");
    for (unsigned i = 0; i < set->count; i++)
        hilock_lock_destroy(set->locks[i]);
    hl_handle_release(set);
    return HILOCK_OK;
}

unsigned hilock_segmented_count(const hilock_segmented *set)
{
    return set ? set->count : 0;
}

unsigned hilock_segmented_index(const hilock_segmented *set, const void *key,
                                size_t key_len)
{
    if (set == NULL || (key == NULL && key_len > 0))
        return 0;
    /* Plain FNV-1a 64, without the mixing of the internal maps, so the
     * assignment is the documented one. */
    return (unsigned)(hl_fnv1a64(key, key_len) % set->count);
}

hilock_lock *hilock_segmented_lock(const hilock_segmented *set,
                                   unsigned index)
{
    if (set == NULL || index >= set->count)
        return NULL;
    return set->locks[index];
}

hilock_lock *hilock_segmented_lock_for(const hilock_segmented *set,
                                       const void *key, size_t key_len)
{
    return hilock_segmented_lock(set,
                                 hilock_segmented_index(set, key, key_len));
}
