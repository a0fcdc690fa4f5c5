/* Reading what a fixture server holds; see raw_reads.h. */
#include "support/raw_reads.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "support/fixture.h"

static int raw_cmd_v(const hl_redis_server *s, char *reply, size_t cap,
                     const char *arg0, va_list ap)
{
    const char *argv[HL_RAW_MAX_ARGS];
    int argc = 0, type;

    for (const char *a = arg0; a != NULL; a = va_arg(ap, const char *)) {
        if (argc == HL_RAW_MAX_ARGS)
            fail_msg("%s: too many arguments for this helper", arg0);
        argv[argc++] = a;
    }
    type = hl_redis_server_command(s, reply, cap, hl_widen(5000), argc,
                                   argv);
    if (type < 0)
        fail_msg("%s: no reply from the server", arg0);
    if (type == '-')
        fail_msg("%s: %s", arg0, reply);
    return type;
}

int hl_raw_cmd(const hl_redis_server *s, char *reply, size_t cap,
               const char *arg0, ...)
{
    va_list ap;
    int type;

    va_start(ap, arg0);
    type = raw_cmd_v(s, reply, cap, arg0, ap);
    va_end(ap);
    return type;
}

long long hl_raw_int(const hl_redis_server *s, const char *arg0, ...)
{
    char reply[HL_RAW_REPLY_CAP], *end;
    long long v;
    va_list ap;
    int type;

    va_start(ap, arg0);
    type = raw_cmd_v(s, reply, sizeof reply, arg0, ap);
    va_end(ap);
    if (type != ':')
        fail_msg("%s: expected an integer, got \"%.60s\"", arg0, reply);
    v = strtoll(reply + 1, &end, 10);
    if (end == reply + 1 || *end != '\r')
        fail_msg("%s: malformed integer \"%.60s\"", arg0, reply);
    return v;
}

bool hl_raw_bulk(const hl_redis_server *s, char *out, size_t cap,
                 const char *arg0, ...)
{
    char reply[HL_RAW_REPLY_CAP];
    const char *p = reply;
    va_list ap;

    va_start(ap, arg0);
    raw_cmd_v(s, reply, sizeof reply, arg0, ap);
    va_end(ap);
    return hl_raw_parse_bulk(&p, out, cap) >= 0;
}

long long hl_raw_exists(const hl_redis_server *s, const char *key)
{
    return hl_raw_int(s, "EXISTS", key, (char *)NULL);
}

long long hl_raw_dbsize_locks(const hl_redis_server *s)
{
    char reply[HL_RAW_REPLY_CAP];
    long long all = hl_raw_int(s, "DBSIZE", (char *)NULL);
    static const char *const kept[] = {"hilock_client:*", "hilock_holds:*",
                                       "hilock_kind:*"};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
        if (hl_raw_cmd(s, reply, sizeof reply, "KEYS", kept[i],
                       (char *)NULL) != '*')
            fail_msg("KEYS %s answered %.200s", kept[i], reply);
        const char *p = reply;
        all -= hl_raw_parse_array(&p);
    }
    return all;
}

long long hl_raw_pttl(const hl_redis_server *s, const char *key)
{
    return hl_raw_int(s, "PTTL", key, (char *)NULL);
}

long long hl_raw_server_ms(const hl_redis_server *s)
{
    char reply[256], secs[32], usecs[32];
    const char *p = reply;

    hl_raw_cmd(s, reply, sizeof reply, "TIME", (char *)NULL);
    if (hl_raw_parse_array(&p) != 2)
        fail_msg("TIME: unexpected reply \"%.60s\"", reply);
    hl_raw_parse_bulk(&p, secs, sizeof secs);
    hl_raw_parse_bulk(&p, usecs, sizeof usecs);
    return strtoll(secs, NULL, 10) * 1000 + strtoll(usecs, NULL, 10) / 1000;
}

void hl_raw_list(const hl_redis_server *s, const char *key, char *out,
                 size_t cap)
{
    char reply[HL_RAW_REPLY_CAP], member[256];
    const char *p = reply;
    size_t len = 0;
    long n;
    int w;

    if (cap == 0)
        fail_msg("LRANGE %s: no room for the members", key);
    hl_raw_cmd(s, reply, sizeof reply, "LRANGE", key, "0", "-1",
               (char *)NULL);
    n = hl_raw_parse_array(&p);
    out[0] = '\0';
    for (long i = 0; i < n; i++) {
        hl_raw_parse_bulk(&p, member, sizeof member);
        w = snprintf(out + len, cap - len, "%s%s", i ? " " : "", member);
        if (w < 0 || (size_t)w >= cap - len)
            fail_msg("LRANGE %s: %ld members, more than %zu bytes", key, n,
                     cap - 1);
        len += (size_t)w;
    }
}

long hl_raw_parse_array(const char **p)
{
    char *end;
    long n;

    if (**p != '*')
        fail_msg("expected an array, got \"%.40s\"", *p);
    n = strtol(*p + 1, &end, 10);
    if (end == *p + 1 || end[0] != '\r' || end[1] != '\n')
        fail_msg("malformed array header \"%.40s\"", *p);
    *p = end + 2;
    return n;
}

long hl_raw_parse_bulk(const char **p, char *out, size_t cap)
{
    const char *s = *p;
    char *end;
    long len;

    if (*s != '$')
        fail_msg("expected a bulk string, got \"%.40s\"", s);
    len = strtol(s + 1, &end, 10);
    if (end == s + 1 || end[0] != '\r' || end[1] != '\n')
        fail_msg("malformed bulk header \"%.40s\"", s);
    s = end + 2;
    if (len < 0) {
        *p = s;
        if (out != NULL && cap > 0)
            out[0] = '\0';
        return -1;
    }
    if (out != NULL) {
        if ((size_t)len >= cap)
            fail_msg("a bulk string of %ld bytes, room for %zu", len,
                     cap > 0 ? cap - 1 : 0);
        memcpy(out, s, (size_t)len);
        out[len] = '\0';
    }
    *p = s + len + 2;
    return len;
}
