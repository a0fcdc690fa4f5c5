/* hilock_options_set_url: the URL form of the options.
 *
 * The URL is applied to a private copy of the options and the copy is
 * swapped in only when every part has been accepted, so a bad URL can
 * never leave the caller with half of it applied.  The parser only ever
 * works on (pointer, length) spans inside a string whose length it has
 * measured itself, which keeps every read inside the caller's buffer. */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/config/option_table.h"
#include "core/config/option_values.h"

/* Far above any real URL, yet small enough that a caller handing us an
 * unterminated or hostile buffer costs little before it is refused. */
#define HL_URL_MAX 8192
/* A DNS name is at most 253 characters; a little slack for a final dot
 * costs nothing. */
#define HL_HOST_MAX 255
/* How much of a bad part an error message quotes. */
#define HL_QUOTE_MAX 48
/* What a message shows instead of text that may be a password. */
#define HL_HIDDEN "(not shown: it may hold the password)"

struct url_parser {
    const char *url; /* start of the URL, to give offsets in messages */
    hilock_options *tmp;
    int tls;
    int sentinel;     /* redis-sentinel:// or rediss-sentinel:// */
    int default_port; /* of a host written without one */
    /* Text that may be a password, and so never appears in a message:
     * everything before the last '@' (a raw '/', '?' or '#' in a password
     * moves the end of the user info past the end of the authority), or,
     * with no '@' at all, the port (a URL missing its "@host" has the
     * password where the port goes).  Empty when secret_lo is NULL.  A
     * password of digits and then a '/' or '?', in a URL without "@host",
     * stays beyond help: its tail reads as a db or a query. */
    const char *secret_lo;
    const char *secret_hi;
    /* The raw text of the query value being applied may be quoted. */
    int value_shown;
};

/* A query key: a numeric or a string option of the tables in
 * option_table.h, or the one flag.  bit tells repeated keys apart. */
enum { QK_NUMERIC, QK_STRING, QK_VERIFY, QK_WORD, QK_FSYNC };

typedef struct query_key {
    int kind;
    size_t index;
    const char *name;
    int tls_only; /* a TLS setting: refused on a redis:// URL */
    unsigned bit;
} query_key;

static int find_query_key(const char *p, size_t n, query_key *out)
{
    unsigned bit = 0;
    for (size_t i = 0; i < hl_numeric_option_count; i++) {
        const char *k = hl_numeric_options[i].url_key;
        if (k == NULL)
            continue;
        if (strlen(k) == n && memcmp(k, p, n) == 0) {
            *out = (query_key){QK_NUMERIC, i, k, 0, bit};
            return 1;
        }
        bit++;
    }
    for (size_t i = 0; i < hl_string_option_count; i++, bit++) {
        const char *k = hl_string_options[i].url_key;
        if (strlen(k) == n && memcmp(k, p, n) == 0) {
            *out = (query_key){QK_STRING, i, k, hl_string_options[i].tls,
                               bit};
            return 1;
        }
    }
    if (n == strlen("verify") && memcmp("verify", p, n) == 0) {
        *out = (query_key){QK_VERIFY, 0, "verify", 1, bit};
        return 1;
    }
    bit++;
    for (size_t i = 0; i < hl_word_option_count; i++, bit++) {
        const char *k = hl_word_options[i].url_key;
        if (strlen(k) == n && memcmp(k, p, n) == 0) {
            *out = (query_key){QK_WORD, i, k, 0, bit};
            return 1;
        }
    }
    bit++;
    if (n == strlen("fsync") && memcmp("fsync", p, n) == 0) {
        *out = (query_key){QK_FSYNC, 0, "fsync", 0, bit};
        return 1;
    }
    return 0;
}

static int quote_len(size_t n)
{
    return n > HL_QUOTE_MAX ? HL_QUOTE_MAX : (int)n;
}

/* Every message quotes URL text through these two, so that no path can
 * echo what may be a password: a span that touches that text is
 * replaced as a whole. */
static int may_quote(const struct url_parser *up, const char *p, size_t n)
{
    return up->secret_lo == NULL || p + n <= up->secret_lo ||
           p >= up->secret_hi;
}

static int qlen(const struct url_parser *up, const char *p, size_t n)
{
    return may_quote(up, p, n) ? quote_len(n) : (int)strlen(HL_HIDDEN);
}

static const char *qtext(const struct url_parser *up, const char *p,
                         size_t n)
{
    return may_quote(up, p, n) ? p : HL_HIDDEN;
}

static size_t offset_of(const struct url_parser *up, const char *p)
{
    return (size_t)(p - up->url);
}

static char ascii_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Case-insensitive match of a span against a lower-case word. */
static int span_is(const char *p, size_t n, const char *word)
{
    size_t len = strlen(word);
    if (n != len)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (ascii_lower(p[i]) != word[i])
            return 0;
    return 1;
}

static const char *span_find(const char *p, size_t n, char c)
{
    return n ? memchr(p, c, n) : NULL;
}

static const char *span_find_last(const char *p, size_t n, char c)
{
    while (n > 0) {
        n--;
        if (p[n] == c)
            return p + n;
    }
    return NULL;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = ascii_lower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Decimal digits only: no sign, no spaces, so "+5", " 5" and "5ms" are
 * all refused instead of half-understood the way strtol would. */
enum { DEC_OK, DEC_SYNTAX, DEC_RANGE };

static int parse_decimal(const char *p, size_t n, uint64_t max,
                         uint64_t *out)
{
    if (n == 0)
        return DEC_SYNTAX;
    uint64_t v = 0;
    int range = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return DEC_SYNTAX;
        unsigned d = (unsigned)(p[i] - '0');
        /* Keep scanning after an overflow so that "99999x" is reported as
         * a syntax error, which is the more useful of the two. */
        if (range || v > (max - d) / 10)
            range = 1;
        else
            v = v * 10 + d;
    }
    if (range)
        return DEC_RANGE;
    *out = v;
    return DEC_OK;
}

/* Percent-decode a span into a new NUL-terminated string.  %00 is refused
 * because everything downstream treats these values as C strings and
 * would silently cut them short. */
static int decode(const struct url_parser *up, const char *p, size_t n,
                  const char *what, char **out)
{
    *out = NULL;
    char *buf = hl_malloc(n + 1);
    if (buf == NULL)
        return hl_fail(HILOCK_ENOMEM, "URL %s: out of memory", what);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '%') {
            buf[j++] = p[i];
            continue;
        }
        if (n - i < 3 || hex_value(p[i + 1]) < 0 ||
            hex_value(p[i + 2]) < 0) {
            hl_free(buf);
            return hl_fail(HILOCK_EINVAL,
                           "URL %s: bad percent escape at offset %zu", what,
                           offset_of(up, p + i));
        }
        int c = hex_value(p[i + 1]) * 16 + hex_value(p[i + 2]);
        if (c == 0) {
            hl_free(buf);
            return hl_fail(HILOCK_EINVAL,
                           "URL %s: %%00 (NUL byte) at offset %zu", what,
                           offset_of(up, p + i));
        }
        buf[j++] = (char)c;
        i += 2;
    }
    buf[j] = '\0';
    *out = buf;
    return HILOCK_OK;
}

/* Re-label a setter's range error with the URL part that caused it; the
 * setter's own text already holds the allowed range. */
static int relabel(const struct url_parser *up, int status,
                   const char *part)
{
    if (status != HILOCK_EINVAL)
        return status;
    /* The setter may quote the value it refused. */
    if (!up->value_shown)
        return hl_fail(HILOCK_EINVAL, "URL %s: the value is refused; %s",
                       part, HL_HIDDEN);
    char why[200];
    /* The detail lives in the buffer hl_fail writes to, so it must be
     * copied out before being quoted. */
    snprintf(why, sizeof why, "%s", hilock_last_error());
    return hl_fail(HILOCK_EINVAL, "URL %s: %s", part, why);
}

static int parse_userinfo(struct url_parser *up, const char *p, size_t n)
{
    /* Nothing from the user info is ever quoted: it holds the password. */
    if (span_find(p, n, '@') != NULL)
        return hl_fail(HILOCK_EINVAL,
                       "URL user info holds a raw '@'; write it as %%40");
    const char *colon = span_find(p, n, ':');
    if (colon == NULL)
        return hl_fail(HILOCK_EINVAL,
                       "URL user info has no ':'; write "
                       "'redis://:password@host' or "
                       "'redis://user:password@host'");
    size_t user_len = (size_t)(colon - p);
    size_t pass_len = n - user_len - 1;
    if (pass_len == 0)
        return hl_fail(HILOCK_EINVAL, "URL password is empty");

    char *user = NULL;
    char *password = NULL;
    int rc = HILOCK_OK;
    if (user_len > 0)
        rc = decode(up, p, user_len, "user", &user);
    if (rc == HILOCK_OK)
        rc = decode(up, colon + 1, pass_len, "password", &password);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_user(up->tmp, user);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_password(up->tmp, password);
    hl_free(user);
    hl_free(password);
    return rc;
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

static int parse_port(const struct url_parser *up, const char *p, size_t n,
                      int *port)
{
    if (n == 0)
        return hl_fail(HILOCK_EINVAL, "URL port is empty");
    uint64_t v = 0;
    int rc = parse_decimal(p, n, 65535, &v);
    if (rc == DEC_SYNTAX && !may_quote(up, p, n))
        return hl_fail(HILOCK_EINVAL,
                       "URL port is not a number; if this is "
                       "user:password, the URL lacks its '@host'");
    if (rc == DEC_SYNTAX)
        return hl_fail(HILOCK_EINVAL, "URL port '%.*s' is not a number",
                       qlen(up, p, n), qtext(up, p, n));
    if (rc == DEC_RANGE || v == 0)
        return hl_fail(HILOCK_EINVAL,
                       "URL port '%.*s' out of range 1..65535",
                       qlen(up, p, n), qtext(up, p, n));
    *port = (int)v;
    return HILOCK_OK;
}

/* host[:port] or [ipv6][:port].  The host is checked here rather than at
 * connect time so that the error names the URL, not a failed lookup. */
static int parse_hostport(struct url_parser *up, const char *p, size_t n)
{
    char host[HL_HOST_MAX + 1];
    const char *port_text = NULL;
    size_t port_len = 0;

    if (n == 0)
        return hl_fail(HILOCK_EINVAL, "URL has no host");
    if (p[0] == '[') {
        const char *close = span_find(p, n, ']');
        if (close == NULL)
            return hl_fail(HILOCK_EINVAL, "URL IPv6 address lacks its ']'");
        size_t len = (size_t)(close - p - 1);
        struct in6_addr a6;
        if (len == 0 || len > INET6_ADDRSTRLEN - 1)
            return hl_fail(HILOCK_EINVAL, "URL IPv6 address '%.*s' is bad",
                           qlen(up, p + 1, len), qtext(up, p + 1, len));
        memcpy(host, p + 1, len);
        host[len] = '\0';
        if (inet_pton(AF_INET6, host, &a6) != 1)
            return hl_fail(HILOCK_EINVAL, "URL IPv6 address '%.*s' is bad",
                           qlen(up, p + 1, len), qtext(up, p + 1, len));
        size_t rest = n - (size_t)(close + 1 - p);
        if (rest > 0) {
            if (close[1] != ':')
                return hl_fail(HILOCK_EINVAL,
                               "URL has '%.*s' after the IPv6 address",
                               qlen(up, close + 1, rest),
                               qtext(up, close + 1, rest));
            port_text = close + 2;
            port_len = rest - 1;
        }
    } else {
        const char *colon = span_find(p, n, ':');
        size_t len = colon ? (size_t)(colon - p) : n;
        if (colon != NULL) {
            port_text = colon + 1;
            port_len = n - len - 1;
            if (span_find(port_text, port_len, ':') != NULL)
                return hl_fail(HILOCK_EINVAL,
                               "URL host '%.*s' is followed by several "
                               "':'; an IPv6 address goes in brackets",
                               qlen(up, p, len), qtext(up, p, len));
        }
        if (len == 0)
            return hl_fail(HILOCK_EINVAL, "URL has no host");
        if (len > HL_HOST_MAX)
            return hl_fail(HILOCK_EINVAL,
                           "URL host is longer than %d characters",
                           HL_HOST_MAX);
        int numeric = 1;
        for (size_t i = 0; i < len; i++) {
            if (!is_name_char(p[i]))
                return hl_fail(HILOCK_EINVAL,
                               "URL host '%.*s' has a bad character at "
                               "offset %zu",
                               qlen(up, p, len), qtext(up, p, len),
                               offset_of(up, p + i));
            if (!(p[i] == '.' || (p[i] >= '0' && p[i] <= '9')))
                numeric = 0;
        }
        memcpy(host, p, len);
        host[len] = '\0';
        /* All digits and dots can only mean an IPv4 address, and a wrong
         * one would otherwise surface later as a confusing lookup. */
        struct in_addr a4;
        if (numeric && inet_pton(AF_INET, host, &a4) != 1)
            return hl_fail(HILOCK_EINVAL, "URL IPv4 address '%.*s' is bad",
                           qlen(up, p, len), qtext(up, p, len));
    }

    /* The port belongs to the host: a URL naming another host without a
     * port means that host's default port, never the port of the host it
     * replaces. */
    int port = up->default_port;
    if (port_text != NULL) {
        int rc = parse_port(up, port_text, port_len, &port);
        if (rc != HILOCK_OK)
            return rc;
    }
    int rc = hilock_options_set_host(up->tmp, host);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_port(up->tmp, port);
    return rc;
}

/* host[:port][,host[:port]...]: the seed nodes of a cluster.  The first
 * is the address the client connects to; the others, checked the same
 * way, are kept in order as the seeds to try when it cannot be reached.
 * Each goes through parse_hostport, which leaves its address in the
 * options, so the first is parsed last. */
static int parse_hostlist(struct url_parser *up, const char *p, size_t n)
{
    const char *comma = span_find(p, n, ',');
    if (comma == NULL)
        return parse_hostport(up, p, n);
    /* Every sentinel is asked at once, over a connection each: their
     * number is bounded, and a longer list refused rather than cut. */
    int hosts = 1;
    for (size_t i = 0; i < n; i++)
        hosts += p[i] == ',';
    if (up->sentinel && hosts > HILOCK_MAX_SENTINELS)
        return hl_fail(HILOCK_EINVAL,
                       "Sentinel URL names %d sentinels; at most %d "
                       "(HILOCK_MAX_SENTINELS)",
                       hosts, HILOCK_MAX_SENTINELS);
    size_t first = (size_t)(comma - p);
    char seeds[HL_URL_MAX + 16];
    size_t used = 0;
    const char *q = comma + 1;
    const char *end = p + n;
    for (;;) {
        const char *next = span_find(q, (size_t)(end - q), ',');
        const char *stop = next ? next : end;
        int rc = parse_hostport(up, q, (size_t)(stop - q));
        if (rc != HILOCK_OK)
            return rc;
        const char *h = up->tmp->host;
        bool v6 = strchr(h, ':') != NULL;
        int w = snprintf(seeds + used, sizeof seeds - used,
                         "%s%s%s%s:%d", used ? "," : "", v6 ? "[" : "", h,
                         v6 ? "]" : "", up->tmp->port);
        if (w < 0 || (size_t)w >= sizeof seeds - used)
            return hl_fail(HILOCK_EINVAL, "URL names too many hosts");
        used += (size_t)w;
        if (next == NULL)
            break;
        q = next + 1;
    }
    int rc = parse_hostport(up, p, first);
    if (rc != HILOCK_OK)
        return rc;
    /* After the first host: setting a host drops the seeds. */
    char *copy = hl_strdup(seeds);
    if (copy == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory for the URL's hosts");
    hl_free(up->tmp->seeds);
    up->tmp->seeds = copy;
    return HILOCK_OK;
}

static int parse_db(struct url_parser *up, const char *p, size_t n)
{
    if (n == 0)
        return HILOCK_OK;
    uint64_t v = 0;
    int rc = parse_decimal(p, n, INT32_MAX, &v);
    if (rc == DEC_SYNTAX)
        return hl_fail(HILOCK_EINVAL,
                       "URL db '%.*s' is not a non-negative integer",
                       qlen(up, p, n), qtext(up, p, n));
    if (rc == DEC_RANGE)
        return hl_fail(HILOCK_EINVAL, "URL db '%.*s' out of range 0..%d",
                       qlen(up, p, n), qtext(up, p, n), (int)INT32_MAX);
    return hilock_options_set_db(up->tmp, (int)v);
}

static int parse_flag(const char *v, int *out)
{
    size_t n = strlen(v);
    if (span_is(v, n, "1") || span_is(v, n, "yes") ||
        span_is(v, n, "true")) {
        *out = 1;
        return 0;
    }
    if (span_is(v, n, "0") || span_is(v, n, "no") ||
        span_is(v, n, "false")) {
        *out = 0;
        return 0;
    }
    return -1;
}

/* A decoded query value, or the stand-in when its raw text may be a
 * password. */
static int shown_len(const struct url_parser *up, const char *value)
{
    return up->value_shown ? quote_len(strlen(value))
                           : (int)strlen(HL_HIDDEN);
}

static const char *shown(const struct url_parser *up, const char *value)
{
    return up->value_shown ? value : HL_HIDDEN;
}

static int apply_query(struct url_parser *up, const query_key *key,
                       const char *value)
{
    const char *name = key->name;
    hilock_options *o = up->tmp;
    uint64_t v = 0;
    int flag = 0;

    switch (key->kind) {
    case QK_NUMERIC:
        /* The setter owns the range and its message states it; the cap
         * here only keeps the arithmetic from wrapping. */
        switch (parse_decimal(value, strlen(value), INT64_MAX, &v)) {
        case DEC_SYNTAX:
            return hl_fail(HILOCK_EINVAL,
                           "URL %s '%.*s' is not a decimal number",
                           name, shown_len(up, value), shown(up, value));
        case DEC_RANGE:
            return hl_fail(HILOCK_EINVAL, "URL %s '%.*s' is too large",
                           name, shown_len(up, value), shown(up, value));
        }
        return relabel(up, hl_numeric_options[key->index].set(o, (int64_t)v),
                       name);
    case QK_STRING:
        return relabel(up, hl_string_options[key->index].set(o, value), name);
    case QK_VERIFY:
    case QK_FSYNC:
        if (parse_flag(value, &flag) != 0)
            return hl_fail(HILOCK_EINVAL,
                           "URL %s '%.*s' is not yes, no, true, false, 1 "
                           "or 0",
                           name, shown_len(up, value), shown(up, value));
        return key->kind == QK_VERIFY
                   ? hilock_options_set_tls_verify(o, flag != 0)
                   : hilock_options_set_wait_fsync(o, flag != 0);
    case QK_WORD: {
        const hl_word_option *w = &hl_word_options[key->index];
        int place = hl_word_place(w->words, value, strlen(value));
        if (place >= 0)
            return w->set(o, place);
        char list[128];
        hl_words_text(w->words, list, sizeof list);
        return hl_fail(HILOCK_EINVAL, "URL %s '%.*s' is not %s", name,
                       shown_len(up, value), shown(up, value), list);
    }
    }
    return hl_fail(HILOCK_EINVAL, "URL query key out of table");
}

/* key=value pairs joined by '&'.  Keys are matched exactly; values are
 * percent-decoded, and '+' stays a '+' since this is not a form. */
static int parse_query(struct url_parser *up, const char *p, size_t n)
{
    unsigned seen = 0;
    const char *end = p + n;

    if (n == 0)
        return HILOCK_OK;
    for (;;) {
        const char *amp = span_find(p, (size_t)(end - p), '&');
        const char *item_end = amp ? amp : end;
        size_t item_len = (size_t)(item_end - p);
        if (item_len == 0)
            return hl_fail(HILOCK_EINVAL,
                           "URL query has an empty parameter at offset %zu",
                           offset_of(up, p));
        const char *eq = span_find(p, item_len, '=');
        if (eq == NULL)
            return hl_fail(HILOCK_EINVAL,
                           "URL query parameter '%.*s' has no '='",
                           qlen(up, p, item_len), qtext(up, p, item_len));
        size_t key_len = (size_t)(eq - p);
        size_t value_len = item_len - key_len - 1;

        query_key key;
        if (!find_query_key(p, key_len, &key))
            return hl_fail(HILOCK_EINVAL, "URL query key '%.*s' is unknown",
                           qlen(up, p, key_len), qtext(up, p, key_len));
        /* Which of two values would win is a guess either way, and a
         * guess about a timeout or a CA file is not ours to make. */
        if (seen & (1u << key.bit))
            return hl_fail(HILOCK_EINVAL, "URL query key '%s' is repeated",
                           key.name);
        seen |= 1u << key.bit;
        /* TLS settings on a plain URL almost always mean a forgotten 's';
         * accepting them would connect in clear text without a word. */
        if (key.tls_only && !up->tls)
            return hl_fail(HILOCK_EINVAL,
                           "URL query key '%s' needs a TLS scheme "
                           "(rediss:// or valkeys://)",
                           key.name);
        if (value_len == 0)
            return hl_fail(HILOCK_EINVAL, "URL query key '%s' has no value",
                           key.name);

        char *value = NULL;
        int rc = decode(up, eq + 1, value_len, key.name, &value);
        up->value_shown = may_quote(up, eq + 1, value_len);
        if (rc == HILOCK_OK)
            rc = apply_query(up, &key, value);
        hl_free(value);
        if (rc != HILOCK_OK)
            return rc;
        if (amp == NULL)
            return HILOCK_OK;
        p = amp + 1;
    }
}

/* The fragment of a Sentinel URL: the master's name, percent-decoded. */
static int parse_master_name(struct url_parser *up, const char *p,
                             size_t n)
{
    if (n == 0)
        return hl_fail(HILOCK_EINVAL,
                       "Sentinel URL has no master name; end it with "
                       "#name");
    char *name = NULL;
    int rc = decode(up, p, n, "master name", &name);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_sentinel_master(up->tmp, name);
    hl_free(name);
    return rc;
}

/* [/db][?query], then nothing, or for Sentinel #master-name: a fragment
 * has no other meaning here. */
static int parse_rest(struct url_parser *up, const char *p, const char *end)
{
    int rc;
    if (p < end && *p == '/') {
        const char *db = ++p;
        while (p < end && *p != '?' && *p != '#')
            p++;
        rc = parse_db(up, db, (size_t)(p - db));
        if (rc != HILOCK_OK)
            return rc;
    }
    if (p < end && *p == '?') {
        const char *query = ++p;
        while (p < end && *p != '#')
            p++;
        rc = parse_query(up, query, (size_t)(p - query));
        if (rc != HILOCK_OK)
            return rc;
    }
    if (up->sentinel)
        return parse_master_name(up, p < end ? p + 1 : end,
                                 p < end ? (size_t)(end - p - 1) : 0);
    if (p < end)
        return hl_fail(HILOCK_EINVAL,
                       "URL has a '#' at offset %zu; fragments are not "
                       "allowed (write '#' in a value as %%23)",
                       offset_of(up, p));
    return hilock_options_set_sentinel_master(up->tmp, NULL);
}

static int is_scheme_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
}

static int parse(struct url_parser *up, size_t len)
{
    const char *url = up->url;
    const char *end = url + len;
    const char *p;

    /* Spaces, controls and raw non-ASCII have no place in a URL; turning
     * them away first means no later step has to think about them. */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)url[i];
        if (c <= 0x20 || c >= 0x7f)
            return hl_fail(HILOCK_EINVAL,
                           "URL has byte 0x%02x at offset %zu; only "
                           "printable ASCII is allowed (percent-encode the "
                           "rest)",
                           c, i);
    }

    /* Only scheme characters are taken as the scheme, so that a URL
     * missing its scheme never has its user info quoted back as one. */
    const char *sep = url;
    while (sep < end && is_scheme_char(*sep))
        sep++;
    if (sep == url || end - sep < 3 || memcmp(sep, "://", 3) != 0)
        return hl_fail(HILOCK_EINVAL,
                       "URL has no scheme; expected redis:// or rediss://");
    size_t scheme_len = (size_t)(sep - url);
    up->default_port = HILOCK_DEFAULT_PORT;
    /* Valkey's own schemes name the same thing: its servers speak the
     * same protocol, and its clients write valkey:// URLs. */
    static const struct {
        const char *scheme;
        int tls, sentinel;
    } schemes[] = {
        {"redis", 0, 0},          {"rediss", 1, 0},
        {"redis-sentinel", 0, 1}, {"rediss-sentinel", 1, 1},
        {"valkey", 0, 0},         {"valkeys", 1, 0},
        {"valkey-sentinel", 0, 1}, {"valkeys-sentinel", 1, 1},
    };
    size_t known = 0;
    while (known < sizeof schemes / sizeof schemes[0] &&
           !span_is(url, scheme_len, schemes[known].scheme))
        known++;
    if (known == sizeof schemes / sizeof schemes[0])
        return hl_fail(HILOCK_EINVAL,
                       "URL scheme '%.*s' is unknown; expected redis, "
                       "rediss, redis-sentinel or rediss-sentinel (or "
                       "their valkey forms)",
                       quote_len(scheme_len), url);
    up->tls = schemes[known].tls;
    up->sentinel = schemes[known].sentinel;
    if (up->sentinel)
        up->default_port = HILOCK_DEFAULT_SENTINEL_PORT;
    int rc = hilock_options_set_tls(up->tmp, up->tls != 0);
    if (rc != HILOCK_OK)
        return rc;

    const char *auth = sep + 3;
    p = auth;
    while (p < end && *p != '/' && *p != '?' && *p != '#')
        p++;
    const char *auth_end = p;
    size_t auth_len = (size_t)(auth_end - auth);

    const char *at = span_find_last(auth, auth_len, '@');
    const char *hostport = at ? at + 1 : auth;
    const char *last_at = span_find_last(auth, (size_t)(end - auth), '@');
    if (last_at != NULL) {
        up->secret_lo = auth;
        up->secret_hi = last_at;
    } else {
        const char *close = hostport < auth_end && *hostport == '['
                                ? span_find(hostport,
                                            (size_t)(auth_end - hostport),
                                            ']')
                                : hostport;
        const char *colon =
            close ? span_find(close, (size_t)(auth_end - close), ':') : NULL;
        if (colon != NULL) {
            up->secret_lo = colon + 1;
            up->secret_hi = auth_end;
        }
    }
    if (at != NULL) {
        rc = parse_userinfo(up, auth, (size_t)(at - auth));
        if (rc != HILOCK_OK)
            return rc;
    }
    rc = parse_hostlist(up, hostport, (size_t)(auth_end - hostport));
    if (rc == HILOCK_OK)
        rc = parse_rest(up, auth_end, end);
    /* With no user info before the host, a later '@' means a raw '/', '?'
     * or '#' in a password ended the authority early.  The part that
     * failed is then most likely a piece of that password, so the message
     * quotes nothing and says how to fix it. */
    if (rc == HILOCK_EINVAL && at == NULL &&
        span_find(auth_end, (size_t)(end - auth_end), '@') != NULL)
        return hl_fail(HILOCK_EINVAL,
                       "URL is bad after '://' and an '@' follows: if a "
                       "user or password holds '/', '?' or '#', write "
                       "them as %%2F, %%3F and %%23");
    return rc;
}

int hilock_options_set_url(hilock_options *opts, const char *url)
{
    if (opts == NULL)
        return hl_fail(HILOCK_EINVAL, "set url: options is NULL");
    if (url == NULL)
        return hl_fail(HILOCK_EINVAL, "set url: URL is NULL");

    size_t len = 0;
    while (len <= HL_URL_MAX && url[len] != '\0')
        len++;
    if (len > HL_URL_MAX)
        return hl_fail(HILOCK_EINVAL, "URL is longer than %d bytes",
                       HL_URL_MAX);

    hilock_options *tmp = NULL;
    int rc = hilock_options_copy(&tmp, opts);
    if (rc != HILOCK_OK)
        return rc;
    struct url_parser up = {.url = url, .tmp = tmp, .value_shown = 1};
    rc = parse(&up, len);
    if (rc == HILOCK_OK) {
        hilock_options old = *opts;
        *opts = *tmp;
        *tmp = old;
    }
    hilock_options_free(tmp);
    return rc;
}
