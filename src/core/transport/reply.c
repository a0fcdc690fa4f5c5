#include "core/transport/reply.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"

void hilock_reply_free(hilock_reply *reply)
{
    if (reply == NULL)
        return;
    if (reply->type == HILOCK_REPLY_ARRAY) {
        for (size_t i = 0; i < reply->elements; i++)
            hilock_reply_free(reply->element[i]);
        hl_free(reply->element);
    } else {
        hl_free(reply->str);
    }
    hl_free(reply);
}

static void reply_free_object(void *obj) { hilock_reply_free(obj); }

/* Attach a fresh object to its parent array, as the reader expects. */
static void *reply_attach(const redisReadTask *task, hilock_reply *r)
{
    if (task->parent != NULL) {
        hilock_reply *parent = task->parent->obj;
        parent->element[task->idx] = r;
    }
    return r;
}

static hilock_reply *reply_new(const redisReadTask *task, int type)
{
    (void)task;
    hilock_reply *r = hl_calloc(1, sizeof *r);
    if (r != NULL)
        r->type = (hilock_reply_type)type;
    return r;
}

static void *reply_create_string(const redisReadTask *task, char *str,
                                 size_t len)
{
    hl_reply_limits *lim = task->privdata;
    lim->bytes_so_far += len;
    bool line = task->type != REDIS_REPLY_STRING;
    if (lim->bytes_so_far > lim->max_bytes ||
        (line && len > HL_MAX_LINE_BYTES)) {
        lim->violated = lim->bytes_so_far > lim->max_bytes ? HL_BOUND_BYTES
                                                           : HL_BOUND_LINE;
        return NULL;
    }
    hilock_reply *r = reply_new(task, task->type);
    if (r == NULL)
        return NULL;
    r->str = hl_memdup(str, len);
    if (r->str == NULL) {
        hl_free(r);
        return NULL;
    }
    r->len = len;
    return reply_attach(task, r);
}

static void *reply_create_array(const redisReadTask *task, int elements)
{
    hl_reply_limits *lim = task->privdata;
    int depth = 0;
    for (const redisReadTask *t = task->parent; t != NULL; t = t->parent)
        depth++;
    if (depth >= lim->max_depth) {
        lim->violated = HL_BOUND_DEPTH;
        return NULL;
    }
    if (elements < 0 || (int64_t)elements > lim->max_elements) {
        lim->violated = HL_BOUND_ELEMENTS;
        return NULL;
    }
    hilock_reply *r = reply_new(task, HILOCK_REPLY_ARRAY);
    if (r == NULL)
        return NULL;
    if (elements > 0) {
        r->element = hl_calloc((size_t)elements, sizeof *r->element);
        if (r->element == NULL) {
            hl_free(r);
            return NULL;
        }
    }
    r->elements = (size_t)elements;
    return reply_attach(task, r);
}

static void *reply_create_integer(const redisReadTask *task, long long v)
{
    hilock_reply *r = reply_new(task, HILOCK_REPLY_INTEGER);
    if (r == NULL)
        return NULL;
    r->integer = v;
    return reply_attach(task, r);
}

static void *reply_create_nil(const redisReadTask *task)
{
    hilock_reply *r = reply_new(task, HILOCK_REPLY_NIL);
    return r ? reply_attach(task, r) : NULL;
}

static redisReplyObjectFunctions reply_functions = {
    reply_create_string, reply_create_array, reply_create_integer,
    reply_create_nil, reply_free_object};

redisReader *hl_reader_create(hl_reply_limits *limits)
{
    redisReader *reader = redisReaderCreateWithFunctions(&reply_functions);
    if (reader != NULL)
        reader->privdata = limits;
    return reader;
}

/* Whether the reader's unread bytes hold a line end ("\r\n"), looking
 * only at what came since the last look. */
static bool line_end_arrived(const redisReader *reader, hl_reply_limits *lim)
{
    const char *tail = reader->buf + reader->pos;
    size_t len = reader->len - reader->pos;
    /* A CR last time may have its LF now. */
    size_t at = lim->scanned > 0 ? lim->scanned - 1 : 0;
    while (at < len) {
        const char *cr = memchr(tail + at, '\r', len - at);
        if (cr == NULL)
            break;
        at = (size_t)(cr - tail) + 1;
        if (at < len && tail[at] == '\n')
            return true;
    }
    lim->scanned = len;
    return false;
}

int hl_reader_next(redisReader *reader, hl_reply_limits *limits,
                   hilock_reply **out)
{
    void *obj = NULL;
    *out = NULL;
    if (limits->waiting) {
        if (!line_end_arrived(reader, limits)) {
            /* Room for the line, a type byte the reader has not taken
             * yet, and a CR whose LF is still to come. */
            if (reader->len - reader->pos > HL_MAX_LINE_BYTES + 2) {
                limits->violated = HL_BOUND_LINE;
                return -2;
            }
            return 0;
        }
        limits->waiting = 0;
    }
    int rc = redisReaderGetReply(reader, &obj);
    if (limits->violated)
        return -2;
    if (rc != REDIS_OK)
        return -1;
    if (obj == NULL) {
        /* The reader keeps only the unparsed tail; a tail larger than the
         * bound is a reply that is too big before it is even complete. */
        if ((uint64_t)(reader->len - reader->pos) > limits->max_bytes) {
            limits->violated = HL_BOUND_BYTES;
            return -2;
        }
        limits->waiting = 1;
        limits->scanned = 0;
        return 0;
    }
    limits->bytes_so_far = 0;
    *out = obj;
    return 1;
}

void hl_reply_bound_why(const hl_reply_limits *lim, char *out, size_t cap)
{
    switch (lim->violated) {
    case HL_BOUND_DEPTH:
        snprintf(out, cap, "a reply nested deeper than %d arrays "
                           "(max_reply_depth)",
                 lim->max_depth);
        break;
    case HL_BOUND_ELEMENTS:
        snprintf(out, cap, "a reply with an array of more than %lld "
                           "elements, or of a negative count "
                           "(max_reply_elements)",
                 (long long)lim->max_elements);
        break;
    case HL_BOUND_LINE:
        snprintf(out, cap, "a reply with a line longer than %d bytes",
                 HL_MAX_LINE_BYTES);
        break;
    default:
        snprintf(out, cap, "a reply of more than %llu bytes "
                           "(max_reply_bytes)",
                 (unsigned long long)lim->max_bytes);
        break;
    }
}

int hl_reply_is_error_prefix(const hilock_reply *r, const char *prefix)
{
    size_t n = strlen(prefix);
    return r != NULL && r->type == HILOCK_REPLY_ERROR && r->len >= n &&
           memcmp(r->str, prefix, n) == 0;
}

const char *hl_reply_kind(const hilock_reply *r)
{
    if (r == NULL)
        return "no reply";
    switch (r->type) {
    case HILOCK_REPLY_STRING:
        return "a bulk string";
    case HILOCK_REPLY_ARRAY:
        return "an array";
    case HILOCK_REPLY_INTEGER:
        return "an integer";
    case HILOCK_REPLY_NIL:
        return "nil";
    case HILOCK_REPLY_STATUS:
        return "a status";
    case HILOCK_REPLY_ERROR:
        return "an error";
    }
    return "an unknown reply";
}

char *hl_reply_quote(char *out, size_t cap, const char *s, size_t len)
{
    size_t at = 0, i = 0;
    /* A byte takes at most 4 characters, and "..." and the NUL 4 more. */
    for (; i < len && i < 64 && at + 8 <= cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            out[at++] = (char)c;
        else
            at += (size_t)snprintf(out + at, cap - at, "\\x%02x", c);
    }
    if (i < len && at + 4 <= cap) {
        memcpy(out + at, "...", 3);
        at += 3;
    }
    if (cap > 0)
        out[at] = '\0';
    return out;
}
