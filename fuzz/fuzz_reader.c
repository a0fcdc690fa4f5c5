/* The bounded reply reader (core/reply.c) on any bytes, fed as a socket
 * would split them.
 *
 * Input: one byte choosing the bounds, one byte choosing how the rest is
 * cut into reads, then the bytes a server sent.  The bounds are the
 * library's defaults or small ones an option allows, so that every bound
 * is crossed somewhere.  Each input is read twice, in one read and in
 * reads of the chosen sizes, and the reader must hand out the same
 * replies both ways: the split of a stream must never change what it
 * means.  Only a bound on buffered bytes may stop the split reading
 * earlier, since a split stream buffers a reply before it is whole.
 * Every reply must keep within the bounds; all are freed, and after a
 * protocol error or a crossed bound the reader is dropped, as the
 * connection does. */
/* fuzz-max-len: 4096 */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "core/transport/reply.h"
#include "hilock/options.h"

/* Each reply takes at least 3 bytes, so longer inputs are skipped;
 * this still leaves room for a line past the line bound. */
#define MAX_REPLIES 65536
#define MAX_STREAM (3 * MAX_REPLIES)

typedef struct reading {
    hilock_reply *replies[MAX_REPLIES];
    size_t count;
    int end; /* 0: waiting for more, -1: protocol error, -2: bound */
} reading;

static reading whole_run, split_run;

static hl_reply_limits limits_from(uint8_t b)
{
    static const uint64_t bytes[] = {HILOCK_DEFAULT_MAX_REPLY_BYTES, 1024,
                                     2048, 4ull * 1024 * 1024 * 1024};
    static const int64_t elements[] = {HILOCK_DEFAULT_MAX_REPLY_ELEMENTS,
                                       1, 2, 16};
    hl_reply_limits lim = {0};
    lim.max_bytes = bytes[b & 3];
    lim.max_elements = elements[(b >> 2) & 3];
    lim.max_depth = (b >> 4) & 7;
    if (lim.max_depth == 0)
        lim.max_depth = HILOCK_DEFAULT_MAX_REPLY_DEPTH;
    return lim;
}

/* Whether a reply, at nesting level depth, keeps within the bounds; adds
 * its string bytes to *bytes. */
static void check_reply(const hilock_reply *r, const hl_reply_limits *lim,
                        int depth, uint64_t *bytes)
{
    FUZZ_CHECK(r != NULL, "an array holds a NULL element");
    switch (r->type) {
    case HILOCK_REPLY_STATUS:
    case HILOCK_REPLY_ERROR:
        FUZZ_CHECK(r->len <= HL_MAX_LINE_BYTES, "a line of %zu bytes",
                   r->len);
        /* fall through */
    case HILOCK_REPLY_STRING:
        FUZZ_CHECK(r->str != NULL && r->str[r->len] == '\0',
                   "a string without its NUL");
        *bytes += r->len;
        break;
    case HILOCK_REPLY_ARRAY:
        FUZZ_CHECK(depth < lim->max_depth, "an array nested %d deep",
                   depth + 1);
        FUZZ_CHECK(r->elements <= (uint64_t)lim->max_elements,
                   "an array of %zu elements", r->elements);
        FUZZ_CHECK(r->elements == 0 || r->element != NULL,
                   "an array without its elements");
        for (size_t i = 0; i < r->elements; i++)
            check_reply(r->element[i], lim, depth + 1, bytes);
        break;
    case HILOCK_REPLY_INTEGER:
    case HILOCK_REPLY_NIL:
        break;
    default:
        FUZZ_CHECK(0, "a reply of type %d", (int)r->type);
    }
}

static bool same_reply(const hilock_reply *a, const hilock_reply *b)
{
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case HILOCK_REPLY_ARRAY:
        if (a->elements != b->elements)
            return false;
        for (size_t i = 0; i < a->elements; i++)
            if (!same_reply(a->element[i], b->element[i]))
                return false;
        return true;
    case HILOCK_REPLY_INTEGER:
        return a->integer == b->integer;
    case HILOCK_REPLY_NIL:
        return true;
    default:
        return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
    }
}

/* Take every reply the reader has; false once it is dead. */
static bool drain(redisReader *reader, hl_reply_limits *lim, reading *out)
{
    for (;;) {
        hilock_reply *r = NULL;
        int rc = hl_reader_next(reader, lim, &r);
        if (rc == 1) {
            uint64_t bytes = 0;
            check_reply(r, lim, 0, &bytes);
            FUZZ_CHECK(bytes <= lim->max_bytes,
                       "a reply of %llu string bytes",
                       (unsigned long long)bytes);
            FUZZ_CHECK(out->count < MAX_REPLIES, "a reply under 3 bytes");
            out->replies[out->count++] = r;
            continue;
        }
        FUZZ_CHECK(r == NULL, "a reply handed out with status %d", rc);
        FUZZ_CHECK(rc == 0 || rc == -1 || rc == -2, "status %d", rc);
        out->end = rc;
        return rc == 0;
    }
}

/* A small generator for the sizes of the reads, seeded by the input. */
static uint32_t next_size(uint32_t *state, uint32_t max)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return 1 + x % max;
}

static void read_stream(const uint8_t *p, size_t n, uint8_t bounds,
                        uint8_t split, reading *out)
{
    hl_reply_limits lim = limits_from(bounds);
    out->count = 0;
    out->end = 0;
    redisReader *reader = hl_reader_create(&lim);
    if (reader == NULL)
        return;
    /* split 0 reads all at once; otherwise reads are at most
     * 2^(split % 12) bytes, so single bytes and whole replies both
     * occur. */
    uint32_t max = 1u << (split % 12);
    uint32_t state = 0x9e3779b9u ^ split;
    size_t at = 0;
    while (at < n) {
        size_t len = split == 0 ? n - at : next_size(&state, max);
        if (len > n - at)
            len = n - at;
        if (redisReaderFeed(reader, (const char *)p + at, len) != REDIS_OK)
            break;
        at += len;
        if (!drain(reader, &lim, out))
            break;
    }
    redisReaderFree(reader);
}

static void forget(reading *r)
{
    for (size_t i = 0; i < r->count; i++)
        hilock_reply_free(r->replies[i]);
    r->count = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size - 2 > MAX_STREAM)
        return 0;
    const uint8_t *stream = data + 2;
    size_t n = size - 2;
    read_stream(stream, n, data[0], 0, &whole_run);
    read_stream(stream, n, data[0], data[1] ? data[1] : 1, &split_run);

    size_t common = whole_run.count < split_run.count ? whole_run.count
                                                      : split_run.count;
    for (size_t i = 0; i < common; i++)
        FUZZ_CHECK(same_reply(whole_run.replies[i], split_run.replies[i]),
                   "reply %zu differs when the stream is split", i);
    if (whole_run.end == 0 && split_run.end != -2) {
        FUZZ_CHECK(split_run.end == 0,
                   "a split stream is a protocol error, the whole is not");
        FUZZ_CHECK(whole_run.count == split_run.count,
                   "%zu replies whole, %zu split", whole_run.count,
                   split_run.count);
    }
    forget(&whole_run);
    forget(&split_run);
    return 0;
}
