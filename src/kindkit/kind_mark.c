#include "kindkit/kind_mark.h"

#include <string.h>

#include "core/base/error_detail.h"
#include "core/runtime/runtime.h"
#include "hilock/client.h"
#include "hilock/lock.h"
#include "kindkit/kindkit.h"
#include "layout/layout.h"
#include "core/base/cname.h"

/* How often a handle's grants mark its name again: well inside the
 * marker's day, and rare enough to cost nothing beside the grants. */
#define MARK_AGAIN_MS (60 * 60 * 1000)

void hl_kind_mark(hilock_lock *lock, const char *kind, const char *after_s)
{
    hl_conn *conn = hl_lock_conn(lock);
    hl_aux_name key;
    static const char *const prefix[] = {HL_LAYOUT_KIND};
    if (conn == NULL || hl_lock_keys(lock, 1, prefix, &key) != 0)
        return;
    const char *argv[] = {"SET", key.s, kind, "EX", after_s};
    size_t lens[] = {3, key.len, strlen(kind), 2,
                     after_s ? strlen(after_s) : 0};
    (void)hl_conn_command(conn, after_s ? 5 : 3, argv, lens, NULL, NULL);
    hl_aux_names_done(1, &key);
}

static void mark_grant(hilock_lock *lock, const char *kind)
{
    /* Modular: a handle last marked a multiple of 49.7 days ago marks
     * again up to an hour late. */
    uint32_t now = hl_monotime_ms32();
    if (lock->kind_marked_ms != 0 &&
        (uint32_t)(now - lock->kind_marked_ms) < MARK_AGAIN_MS)
        return;
    lock->kind_marked_ms = now;
    hl_kind_mark(lock, kind, HL_LAYOUT_KIND_AFTER_S);
}

void hl_kind_mark_fair_grant(hilock_lock *lock)
{
    mark_grant(lock, HL_LAYOUT_KIND_FAIR);
}

void hl_kind_mark_read_write_grant(hilock_lock *lock)
{
    mark_grant(lock, HL_LAYOUT_KIND_READ_WRITE);
}

/* The word as this version knows it, or NULL. */
static const char *known_kind(const char *s, size_t len)
{
    static const char *const words[] = {
        HL_LAYOUT_KIND_FAIR, HL_LAYOUT_KIND_READ_WRITE,
        HL_LAYOUT_KIND_SEMAPHORE, HL_LAYOUT_KIND_LATCH};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strlen(words[i]) == len && memcmp(words[i], s, len) == 0)
            return words[i];
    return NULL;
}

int hilock_client_name_kind_n(hilock_client *client, const char *name,
                              size_t name_len, const char **kind)
{
    hl_clear_detail();
    if (kind != NULL)
        *kind = NULL;
    if (client == NULL || name == NULL || kind == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL argument");
    if (name_len == 0 || name_len > HILOCK_MAX_NAME_LEN)
        return hl_fail(HILOCK_EINVAL, "a name is 1..%d bytes",
                       HILOCK_MAX_NAME_LEN);
    hl_aux_name key;
    if (hl_layout_key(&key, HL_LAYOUT_KIND, name, name_len, NULL, 0) != 0) {
        hl_aux_name_done(&key);
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    }
    const char *argv[] = {"GET", key.s};
    size_t lens[] = {3, key.len};
    hilock_reply *r = NULL;
    int rc = hilock_client_command(client, 2, argv, lens, &r);
    hl_aux_name_done(&key);
    if (rc == HILOCK_OK && r->type == HILOCK_REPLY_STRING)
        *kind = known_kind(r->str, r->len);
    else if (rc == HILOCK_OK && r->type != HILOCK_REPLY_NIL)
        rc = hl_fail(HILOCK_EPROTO, "GET of a kind marker answered no "
                                    "string");
    hilock_reply_free(r);
    return rc;
}

int hilock_client_name_kind(hilock_client *client, const char *name,
                            const char **kind)
{
    return hilock_client_name_kind_n(client, name, hl_cname_len(name),
                                     kind);
}
