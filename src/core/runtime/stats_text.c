/* hilock_stats in the Prometheus text format. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error_detail.h"
#include "hilock/client.h"

typedef struct text {
    char *buf;
    size_t cap;
    size_t len; /* what it would take, even past cap */
} text;

__attribute__((format(printf, 2, 3))) static void put(text *t,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = t->len < t->cap ? t->cap - t->len : 0;
    int n = vsnprintf(room ? t->buf + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len += (size_t)n;
}

/* {client="label"} or {client="label",extra} or {extra} or "". */
static void labels(text *t, const char *label, const char *extra)
{
    if (label == NULL && extra == NULL)
        return;
    put(t, "{");
    if (label != NULL)
        put(t, "client=\"%s\"%s", label, extra ? "," : "");
    if (extra != NULL)
        put(t, "%s", extra);
    put(t, "}");
}

/* The plain series, in the order they are written. */
#define SERIES 15

typedef struct series_def {
    const char *name, *type, *help;
} series_def;

static const series_def series_defs[SERIES] = {
    {"leases_active", "gauge", "Leases held now."},
    {"leases_renewed_total", "counter", "Watchdog renewals confirmed."},
    {"leases_lost_total", "counter", "Leases reported lost."},
    {"renew_calls_total", "counter", "Batched renewal scripts sent."},
    {"connects_total", "counter", "Times a command connection became ready."},
    {"writes_total", "counter", "Write calls on the command connections."},
    {"publishes_refused_total", "counter",
     "Wake-ups the server's ACL refused to publish."},
    {"subscribes_refused_total", "counter",
     "Subscriptions the server's ACL refused."},
    {"ops_pending", "gauge", "Operations started and not finished."},
    {"acquires_waiting", "gauge",
     "Acquires not finished that found the lock held."},
    {"acquires_total", "counter", "Acquires granted."},
    {"acquires_busy_total", "counter",
     "Acquires that ran out of wait with the lock held."},
    {"acquires_failed_total", "counter", "Acquires that failed otherwise."},
    {"releases_total", "counter", "Holds given back by their owner."},
    {"acquires_handed_total", "counter",
     "Acquires another client's release gave the lock to outright."},
};

/* The values of series_defs for s; a field past the caller's size
 * (an older caller's struct) reads 0. */
static void series_values(const hilock_stats *s, uint64_t out[SERIES])
{
    const hilock_client_stats *c = &s->counters;
    uint64_t v[SERIES] = {
        c->leases_active,      c->leases_renewed,    c->leases_lost,
        c->renew_calls,        c->connects,          c->writes,
        c->publishes_refused,  c->subscribes_refused, s->ops_pending,
        s->acquires_waiting,   s->acquires,          s->acquires_busy,
        s->acquires_failed,    s->releases,
        s->size >= offsetof(hilock_stats, acquires_handed) +
                       sizeof s->acquires_handed
            ? s->acquires_handed
            : 0};
    memcpy(out, v, sizeof v);
}

static void histogram(text *t, const char *name, const char *help,
                      const hilock_stats *const *stats,
                      const char *const *label_of, size_t n, bool hold)
{
    static const int64_t bounds_us[HILOCK_STATS_BUCKETS] =
        HILOCK_STATS_BUCKET_BOUNDS_US;
    put(t, "# HELP hilock_%s %s\n# TYPE hilock_%s histogram\n", name, help,
        name);
    for (size_t k = 0; k < n; k++) {
        const hilock_stats *s = stats[k];
        const char *label = label_of ? label_of[k] : NULL;
        const uint64_t *buckets = hold ? s->hold_us : s->wait_us;
        uint64_t sum_us = hold ? s->hold_sum_us : s->wait_sum_us;
        uint64_t total = 0;
        for (int i = 0; i < HILOCK_STATS_BUCKETS; i++) {
            total += buckets[i];
            char le[48];
            if (i == HILOCK_STATS_BUCKETS - 1)
                snprintf(le, sizeof le, "le=\"+Inf\"");
            else
                snprintf(le, sizeof le, "le=\"%g\"",
                         (double)bounds_us[i] / 1e6);
            put(t, "hilock_%s_bucket", name);
            labels(t, label, le);
            put(t, " %" PRIu64 "\n", total);
        }
        put(t, "hilock_%s_sum", name);
        labels(t, label, NULL);
        put(t, " %.6f\nhilock_%s_count", (double)sum_us / 1e6, name);
        labels(t, label, NULL);
        put(t, " %" PRIu64 "\n", total);
    }
}

int hilock_stats_format_prometheus_many(const hilock_stats *const *stats,
                                        const char *const *label_of,
                                        size_t n, char *buf, size_t cap,
                                        size_t *written)
{
    if (written != NULL)
        *written = 0;
    if ((stats == NULL && n > 0) || buf == NULL || cap == 0)
        return hl_fail(HILOCK_EINVAL, "NULL stats or buffer");
    for (size_t k = 0; k < n; k++) {
        if (stats[k] == NULL)
            return hl_fail(HILOCK_EINVAL, "NULL stats");
        const char *label = label_of ? label_of[k] : NULL;
        if (label != NULL && strpbrk(label, "\"\\\n") != NULL)
            return hl_fail(HILOCK_EINVAL,
                           "a label may not hold '\"', '\\' or a newline");
    }
    /* One family at a time, every client's series in it: a family is
     * described once in the text format. */
    text t = {.buf = buf, .cap = cap};
    for (int i = 0; i < SERIES; i++) {
        const series_def *d = &series_defs[i];
        put(&t, "# HELP hilock_%s %s\n# TYPE hilock_%s %s\n", d->name,
            d->help, d->name, d->type);
        for (size_t k = 0; k < n; k++) {
            uint64_t v[SERIES];
            series_values(stats[k], v);
            put(&t, "hilock_%s", d->name);
            labels(&t, label_of ? label_of[k] : NULL, NULL);
            put(&t, " %" PRIu64 "\n", v[i]);
        }
    }
    histogram(&t, "acquire_wait_seconds",
              "Time from an acquire call to its grant.", stats, label_of, n,
              false);
    histogram(&t, "hold_seconds",
              "Time a hold with a lease was held until its release.", stats,
              label_of, n, true);
    if (t.len >= cap) {
        buf[0] = '\0';
        if (written != NULL)
            *written = t.len + 1;
        return hl_fail(HILOCK_EINVAL, "the buffer of %zu bytes is too small: "
                                      "%zu are needed",
                       cap, t.len + 1);
    }
    if (written != NULL)
        *written = t.len;
    return HILOCK_OK;
}

int hilock_stats_format_prometheus(const hilock_stats *s, const char *label,
                                   char *buf, size_t cap, size_t *written)
{
    if (written != NULL)
        *written = 0;
    if (s == NULL)
        return hl_fail(HILOCK_EINVAL, "NULL stats or buffer");
    return hilock_stats_format_prometheus_many(&s, &label, 1, buf, cap,
                                               written);
}
