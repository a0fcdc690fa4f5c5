/* hilock_stats in the Prometheus text format. */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error_detail.h"
#include "hilock/client.h"

typedef struct text {
    char *buf;
    size_t cap;
    size_t len; /* what it would take, even past cap */
    const char *label;
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
static void labels(text *t, const char *extra)
{
    if (t->label == NULL && extra == NULL)
        return;
    put(t, "{");
    if (t->label != NULL)
        put(t, "client=\"%s\"%s", t->label, extra ? "," : "");
    if (extra != NULL)
        put(t, "%s", extra);
    put(t, "}");
}

static void series(text *t, const char *name, const char *type,
                   const char *help, uint64_t v)
{
    put(t, "# HELP hilock_%s %s\n# TYPE hilock_%s %s\nhilock_%s", name, help,
        name, type, name);
    labels(t, NULL);
    put(t, " %" PRIu64 "\n", v);
}

static void histogram(text *t, const char *name, const char *help,
                      const uint64_t *buckets, uint64_t sum_us)
{
    static const int64_t bounds_us[HILOCK_STATS_BUCKETS] =
        HILOCK_STATS_BUCKET_BOUNDS_US;
    put(t, "# HELP hilock_%s %s\n# TYPE hilock_%s histogram\n", name, help,
        name);
    uint64_t total = 0;
    for (int i = 0; i < HILOCK_STATS_BUCKETS; i++) {
        total += buckets[i];
        char le[48];
        if (i == HILOCK_STATS_BUCKETS - 1)
            snprintf(le, sizeof le, "le=\"+Inf\"");
        else
            snprintf(le, sizeof le, "le=\"%g\"", (double)bounds_us[i] / 1e6);
        put(t, "hilock_%s_bucket", name);
        labels(t, le);
        put(t, " %" PRIu64 "\n", total);
    }
    put(t, "hilock_%s_sum", name);
    labels(t, NULL);
    put(t, " %.6f\nhilock_%s_count", (double)sum_us / 1e6, name);
    labels(t, NULL);
    put(t, " %" PRIu64 "\n", total);
}

int hilock_stats_format_prometheus(const hilock_stats *s, const char *label,
                                   char *buf, size_t cap, size_t *written)
{
    if (written != NULL)
        *written = 0;
    if (s == NULL || buf == NULL || cap == 0)
        return hl_fail(HILOCK_EINVAL, "NULL stats or buffer");
    if (label != NULL && strpbrk(label, "\"\\\n") != NULL)
        return hl_fail(HILOCK_EINVAL,
                       "a label may not hold '\"', '\\' or a newline");
    text t = {.buf = buf, .cap = cap, .label = label};
    const hilock_client_stats *c = &s->counters;
    const struct {
        const char *name, *type, *help;
        uint64_t value;
    } rows[] = {
        {"leases_active", "gauge", "Leases held now.", c->leases_active},
        {"leases_renewed_total", "counter", "Watchdog renewals confirmed.",
         c->leases_renewed},
        {"leases_lost_total", "counter", "Leases reported lost.",
         c->leases_lost},
        {"renew_calls_total", "counter", "Batched renewal scripts sent.",
         c->renew_calls},
        {"connects_total", "counter",
         "Times a command connection became ready.", c->connects},
        {"writes_total", "counter", "Write calls on the command connections.",
         c->writes},
        {"publishes_refused_total", "counter",
         "Wake-ups the server's ACL refused to publish.",
         c->publishes_refused},
        {"subscribes_refused_total", "counter",
         "Subscriptions the server's ACL refused.", c->subscribes_refused},
        {"ops_pending", "gauge", "Operations started and not finished.",
         s->ops_pending},
        {"acquires_waiting", "gauge",
         "Acquires not finished that found the lock held.",
         s->acquires_waiting},
        {"acquires_total", "counter", "Acquires granted.", s->acquires},
        {"acquires_busy_total", "counter",
         "Acquires that ran out of wait with the lock held.",
         s->acquires_busy},
        {"acquires_failed_total", "counter",
         "Acquires that failed otherwise.", s->acquires_failed},
        {"releases_total", "counter", "Holds given back by their owner.",
         s->releases},
        {"acquires_handed_total", "counter",
         "Acquires another client's release gave the lock to outright.",
         s->size >= offsetof(hilock_stats, acquires_handed) +
                        sizeof s->acquires_handed
             ? s->acquires_handed
             : 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        series(&t, rows[i].name, rows[i].type, rows[i].help, rows[i].value);
    histogram(&t, "acquire_wait_seconds",
              "Time from an acquire call to its grant.", s->wait_us,
              s->wait_sum_us);
    histogram(&t, "hold_seconds",
              "Time a hold with a lease was held until its release.",
              s->hold_us, s->hold_sum_us);
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
