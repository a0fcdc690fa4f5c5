#include "core/runtime/stats_wire.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct wire_field {
    const char *name;
    size_t offset;
    int count; /* 1, or HILOCK_STATS_BUCKETS for a histogram */
} wire_field;

#define ONE(member, field)                                                  \
    {member, offsetof(hilock_stats, field), 1}
#define BUCKETS(member, field)                                              \
    {member, offsetof(hilock_stats, field), HILOCK_STATS_BUCKETS}

static const wire_field fields[] = {
    ONE("leases_active", counters.leases_active),
    ONE("leases_renewed", counters.leases_renewed),
    ONE("leases_lost", counters.leases_lost),
    ONE("renew_calls", counters.renew_calls),
    ONE("connects", counters.connects),
    ONE("writes", counters.writes),
    ONE("publishes_refused", counters.publishes_refused),
    ONE("subscribes_refused", counters.subscribes_refused),
    ONE("ops_pending", ops_pending),
    ONE("acquires_waiting", acquires_waiting),
    ONE("acquires", acquires),
    ONE("acquires_busy", acquires_busy),
    ONE("acquires_failed", acquires_failed),
    ONE("releases", releases),
    BUCKETS("wait_us", wait_us),
    BUCKETS("hold_us", hold_us),
    ONE("wait_sum_us", wait_sum_us),
    ONE("hold_sum_us", hold_sum_us),
    ONE("acquires_handed", acquires_handed),
};

#define NFIELDS (sizeof fields / sizeof fields[0])

static uint64_t *slot(hilock_stats *s, const wire_field *f)
{
    return (uint64_t *)((char *)s + f->offset);
}

size_t hl_stats_encode(const hilock_stats *s, char *out)
{
    size_t len = 0;
    for (size_t i = 0; i < NFIELDS; i++) {
        const uint64_t *v =
            (const uint64_t *)((const char *)s + fields[i].offset);
        len += (size_t)snprintf(out + len, HL_STATS_WIRE_MAX - len, "%s%s=",
                                i ? " " : "", fields[i].name);
        for (int k = 0; k < fields[i].count; k++)
            len += (size_t)snprintf(out + len, HL_STATS_WIRE_MAX - len,
                                    "%s%llu", k ? "," : "",
                                    (unsigned long long)v[k]);
    }
    return len;
}

static const wire_field *field_named(const char *name, size_t len)
{
    for (size_t i = 0; i < NFIELDS; i++)
        if (strlen(fields[i].name) == len &&
            memcmp(fields[i].name, name, len) == 0)
            return &fields[i];
    return NULL;
}

/* Up to count numbers separated by ',' in [p, end) into v; false on
 * anything else. */
static bool read_numbers(const char *p, const char *end, uint64_t *v,
                         int count)
{
    for (int k = 0; k < count; k++) {
        if (p >= end || *p < '0' || *p > '9')
            return false;
        char num[24];
        size_t n = 0;
        while (p < end && *p >= '0' && *p <= '9' && n < sizeof num - 1)
            num[n++] = *p++;
        num[n] = '\0';
        errno = 0;
        unsigned long long x = strtoull(num, NULL, 10);
        if (errno != 0 || (p < end && *p >= '0' && *p <= '9'))
            return false;
        v[k] = x;
        if (k + 1 < count && (p >= end || *p++ != ','))
            return false;
    }
    return p == end;
}

bool hl_stats_decode(const char *text, size_t len, hilock_stats *out)
{
    memset(out, 0, sizeof *out);
    out->size = sizeof *out;
    const char *p = text, *end = text + len;
    bool known = false;
    while (p < end) {
        const char *word_end = memchr(p, ' ', (size_t)(end - p));
        if (word_end == NULL)
            word_end = end;
        const char *eq = memchr(p, '=', (size_t)(word_end - p));
        const wire_field *f = eq ? field_named(p, (size_t)(eq - p)) : NULL;
        uint64_t v[HILOCK_STATS_BUCKETS];
        if (f != NULL && read_numbers(eq + 1, word_end, v, f->count)) {
            memcpy(slot(out, f), v, sizeof v[0] * (size_t)f->count);
            known = true;
        }
        p = word_end < end ? word_end + 1 : end;
    }
    return known;
}
