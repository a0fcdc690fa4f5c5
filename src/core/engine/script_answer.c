/* What a kind's script answered, once its announcement is set aside,
 * and the answer of a script that refused a value it did not expect. */
#include "core/engine/compose.h"

#include <stdio.h>
#include <string.h>

#include "core/runtime/client_state.h"

const hilock_reply *hl_script_answer(hilock_client *client,
                                     const hilock_reply *reply)
{
    /* {answer, refusal}: the refusal is the error text of the PUBLISH,
     * a string; no script of ours answers a pair ending in one. */
    if (reply == NULL || reply->type != HILOCK_REPLY_ARRAY ||
        reply->elements != 2 ||
        (reply->element[1]->type != HILOCK_REPLY_STRING &&
         reply->element[1]->type != HILOCK_REPLY_STATUS))
        return reply;
    if (client != NULL) {
        client->publishes_refused++;
        hl_client_event(client, HILOCK_EVENT_PUBLISH_REFUSED, NULL,
                        reply->element[1]->str, NULL, 0);
    }
    return reply->element[0];
}

static bool is_text(const hilock_reply *r)
{
    return r->type == HILOCK_REPLY_STRING;
}

/* s[0..len) between quotes, at most max bytes of it, into out: the bytes
 * that could hide what the value is (quotes, backslashes, control and
 * non-ASCII bytes) as \xNN, and "..." after a cut. */
static void quote(char *out, size_t cap, const char *s, size_t len,
                  size_t max)
{
    size_t n = 0;
    out[n++] = '"';
    for (size_t i = 0; i < len && i < max && n + 5 < cap; i++) {
        unsigned char b = (unsigned char)s[i];
        if (b < 0x20 || b >= 0x7f || b == '"' || b == '\\')
            n += (size_t)snprintf(out + n, cap - n, "\\x%02x", b);
        else
            out[n++] = (char)b;
    }
    if (len > max && n + 4 < cap) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n++] = '"';
    out[n] = '\0';
}

bool hl_foreign_detail(const hilock_reply *reply, char *out, size_t cap)
{
    const hilock_reply *r = hl_script_answer(NULL, reply);
    if (r == NULL || r->type != HILOCK_REPLY_ARRAY || r->elements != 4)
        return false;
    for (size_t i = 0; i < 4; i++)
        if (!is_text(r->element[i]))
            return false;
    const hilock_reply *mark = r->element[0];
    if (mark->len != strlen(HL_FOREIGN_MARK) ||
        memcmp(mark->str, HL_FOREIGN_MARK, mark->len) != 0)
        return false;
    hl_foreign_format(out, cap, r->element[1]->str, r->element[1]->len,
                      r->element[2]->str, r->element[2]->len,
                      r->element[3]->str);
    return true;
}

void hl_foreign_format(char *out, size_t cap, const char *key,
                       size_t key_len, const char *value, size_t value_len,
                       const char *what)
{
    /* Each quoted at most 48 bytes, 4 bytes a byte when escaped. */
    char k[48 * 4 + 8], v[48 * 4 + 8];
    quote(k, sizeof k, key, key_len, 48);
    quote(v, sizeof v, value, value_len, 48);
    snprintf(out, cap,
             "%s holds %s, which is not %.40s (a decimal 64-bit "
             "integer): refused, nothing changed",
             k, v, what);
}
