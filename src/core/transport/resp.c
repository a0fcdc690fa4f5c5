#include "core/transport/resp.h"

#include <string.h>

#include "core/base/decimal.h"

size_t hl_u64_dec(char *buf, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    return n;
}

size_t hl_i64_dec(char *buf, int64_t v)
{
    if (v >= 0)
        return hl_u64_dec(buf, (uint64_t)v);
    buf[0] = '-';
    /* Negate in unsigned arithmetic: INT64_MIN has no positive twin. */
    return 1 + hl_u64_dec(buf + 1, 0 - (uint64_t)v);
}

bool hl_i64_parse(const char *s, size_t len, int64_t *out)
{
    bool neg = len > 0 && s[0] == '-';
    size_t i = neg ? 1 : 0;
    if (i == len || s[i] < '0' || s[i] > '9')
        return false;
    if (s[i] == '0') {
        if (neg || len != 1)
            return false;
        *out = 0;
        return true;
    }
    /* Up to 2^63 in unsigned arithmetic, which only a negative may
     * reach. */
    const uint64_t limit = (uint64_t)INT64_MAX + (neg ? 1 : 0);
    uint64_t v = 0;
    if (!hl_decimal_parse(s + i, len - i, limit, &v))
        return false;
    /* INT64_MIN has no positive twin: negate one below it. */
    *out = neg ? -(int64_t)(v - 1) - 1 : (int64_t)v;
    return true;
}

static size_t digits(size_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

size_t hl_resp_size(int argc, const size_t *lens)
{
    /* "*<argc>\r\n" then "$<len>\r\n<bytes>\r\n" per argument. */
    size_t size = 1 + digits((size_t)argc) + 2;
    for (int i = 0; i < argc; i++)
        size += 1 + digits(lens[i]) + 2 + lens[i] + 2;
    return size;
}

static char *header(char *p, char kind, size_t n)
{
    *p++ = kind;
    p += hl_u64_dec(p, n);
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

char *hl_resp_write(char *p, int argc, const char *const *argv,
                    const size_t *lens)
{
    p = header(p, '*', (size_t)argc);
    for (int i = 0; i < argc; i++) {
        p = header(p, '$', lens[i]);
        if (lens[i] > 0)
            memcpy(p, argv[i], lens[i]);
        p += lens[i];
        *p++ = '\r';
        *p++ = '\n';
    }
    return p;
}
