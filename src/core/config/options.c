#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/config/option_table.h"
#include "core/config/option_values.h"

#define HL_BACKOFF_MAX_MS 3600000
#define HL_REPLY_BYTES_MIN 1024u
#define HL_REPLY_BYTES_MAX (4ull * 1024 * 1024 * 1024)
#define HL_REPLY_DEPTH_MAX 7

static void options_free_strings(hilock_options *o)
{
    hl_free(o->host);
    hl_free(o->seeds);
    hl_free(o->user);
    hl_free(o->password);
    hl_free(o->sentinel_master);
    hl_free(o->sentinel_user);
    hl_free(o->sentinel_password);
    hl_free(o->tls_ca_file);
    hl_free(o->tls_ca_dir);
    hl_free(o->tls_cert_file);
    hl_free(o->tls_key_file);
    hl_free(o->tls_server_name);
    hl_free(o->description);
}

int hilock_options_create(hilock_options **out)
{
    if (out == NULL)
        return hl_fail(HILOCK_EINVAL, "options_create: out is NULL");
    *out = NULL;
    hilock_options *o = hl_calloc(1, sizeof *o);
    if (o == NULL)
        return hl_fail(HILOCK_ENOMEM, "options_create: out of memory");
    o->host = hl_strdup("127.0.0.1");
    if (o->host == NULL) {
        hl_free(o);
        return hl_fail(HILOCK_ENOMEM, "options_create: out of memory");
    }
    o->port = HILOCK_DEFAULT_PORT;
#define HL_SET_DEFAULT(name, key, vtype, ftype, min, max, off, def, unit,    \
                       what)                                                 \
    o->name = (ftype)(def);
    HL_NUMERIC_OPTIONS(HL_SET_DEFAULT)
#undef HL_SET_DEFAULT
    o->db = 0;
    o->reconnect_min_ms = HILOCK_DEFAULT_RECONNECT_MIN_MS;
    o->reconnect_max_ms = HILOCK_DEFAULT_RECONNECT_MAX_MS;
    o->max_reply_bytes = HILOCK_DEFAULT_MAX_REPLY_BYTES;
    o->max_reply_elements = HILOCK_DEFAULT_MAX_REPLY_ELEMENTS;
    o->max_reply_depth = HILOCK_DEFAULT_MAX_REPLY_DEPTH;
#define HL_SET_WORD_DEFAULT(name, key, vtype, words, def, what)             \
    o->name = (int)(def);
    HL_WORD_OPTIONS(HL_SET_WORD_DEFAULT)
#undef HL_SET_WORD_DEFAULT
    o->tls = 0;
    o->tls_verify = 1;
    o->loop = NULL;
    *out = o;
    return HILOCK_OK;
}

/* Copy one optional string; a NULL source is not a failure. */
static int dup_optional(char **dst, const char *src)
{
    *dst = NULL;
    if (src == NULL)
        return 0;
    *dst = hl_strdup(src);
    return *dst == NULL ? -1 : 0;
}

int hilock_options_copy(hilock_options **out, const hilock_options *src)
{
    if (out == NULL)
        return hl_fail(HILOCK_EINVAL, "options_copy: out is NULL");
    *out = NULL;
    if (src == NULL)
        return hl_fail(HILOCK_EINVAL, "options_copy: src is NULL");
    hilock_options *o = hl_malloc(sizeof *o);
    if (o == NULL)
        return hl_fail(HILOCK_ENOMEM, "options_copy: out of memory");
    *o = *src;
    /* Every string pointer is replaced before any can fail, so the
     * cleanup below never frees a string that belongs to src. */
    int bad = 0;
    bad |= dup_optional(&o->host, src->host);
    bad |= dup_optional(&o->seeds, src->seeds);
    bad |= dup_optional(&o->user, src->user);
    bad |= dup_optional(&o->password, src->password);
    bad |= dup_optional(&o->sentinel_master, src->sentinel_master);
    bad |= dup_optional(&o->sentinel_user, src->sentinel_user);
    bad |= dup_optional(&o->sentinel_password, src->sentinel_password);
    bad |= dup_optional(&o->tls_ca_file, src->tls_ca_file);
    bad |= dup_optional(&o->tls_ca_dir, src->tls_ca_dir);
    bad |= dup_optional(&o->tls_cert_file, src->tls_cert_file);
    bad |= dup_optional(&o->tls_key_file, src->tls_key_file);
    bad |= dup_optional(&o->tls_server_name, src->tls_server_name);
    bad |= dup_optional(&o->description, src->description);
    if (bad) {
        options_free_strings(o);
        hl_free(o);
        return hl_fail(HILOCK_ENOMEM, "options_copy: out of memory");
    }
    *out = o;
    return HILOCK_OK;
}

void hilock_options_free(hilock_options *opts)
{
    if (opts == NULL)
        return;
    options_free_strings(opts);
    hl_free(opts);
}

/* Replace an optional string field.  The new copy is made before the old
 * one is freed so that a failed copy leaves the field as it was. */
static int replace_string(hilock_options *opts, char **field,
                          const char *value, const char *what)
{
    if (opts == NULL)
        return hl_fail(HILOCK_EINVAL, "set %s: options is NULL", what);
    if (value != NULL && value[0] == '\0')
        return hl_fail(HILOCK_EINVAL, "%s is empty", what);
    char *copy = NULL;
    if (value != NULL) {
        copy = hl_strdup(value);
        if (copy == NULL)
            return hl_fail(HILOCK_ENOMEM, "set %s: out of memory", what);
    }
    hl_free(*field);
    *field = copy;
    return HILOCK_OK;
}

int hilock_options_set_host(hilock_options *opts, const char *host)
{
    if (host == NULL)
        return hl_fail(HILOCK_EINVAL, "host is NULL");
    int rc = replace_string(opts, opts ? &opts->host : NULL, host, "host");
    /* One address set by hand names one server, not a cluster's seeds. */
    if (rc == HILOCK_OK) {
        hl_free(opts->seeds);
        opts->seeds = NULL;
    }
    return rc;
}

int hilock_options_set_port(hilock_options *opts, int port)
{
    if (opts == NULL)
        return hl_fail(HILOCK_EINVAL, "set port: options is NULL");
    if (port < 1 || port > 65535)
        return hl_fail(HILOCK_EINVAL, "port out of range 1..65535: %d",
                       port);
    opts->port = port;
    return HILOCK_OK;
}

int hilock_options_set_user(hilock_options *opts, const char *user)
{
    return replace_string(opts, opts ? &opts->user : NULL, user, "user");
}

int hilock_options_set_password(hilock_options *opts, const char *password)
{
    return replace_string(opts, opts ? &opts->password : NULL, password,
                          "password");
}

int hilock_options_set_db(hilock_options *opts, int db)
{
    if (opts == NULL)
        return hl_fail(HILOCK_EINVAL, "set db: options is NULL");
    /* The upper bound INT32_MAX is int's own maximum on every platform
     * we build for, so only the sign can be wrong. */
    if (db < 0)
        return hl_fail(HILOCK_EINVAL, "db out of range 0..%d: %d",
                       (int)INT32_MAX, db);
    opts->db = db;
    return HILOCK_OK;
}

/* Range checks shared by every numeric setter; the table says which
 * range each option has. */
static int check_numeric(const hilock_options *opts, const char *what,
                         const char *unit, int64_t min, int64_t max,
                         bool zero_is_off, int64_t value)
{
    if (opts == NULL)
        return hl_fail(HILOCK_EINVAL, "set %s: options is NULL", what);
    if (zero_is_off && value == 0)
        return HILOCK_OK;
    if (value < min || value > max)
        return hl_fail(HILOCK_EINVAL, "%s out of range %s%lld..%lld%s%s: %lld",
                       what, zero_is_off ? "0 or " : "", (long long)min,
                       (long long)max, unit[0] ? " " : "", unit,
                       (long long)value);
    return HILOCK_OK;
}

/* set_wide_ and get_wide_ are the table's uniform view of the typed
 * public pair, so the URL parser and the tests reach the same checks. */
#define HL_DEFINE_NUMERIC(name, key, vtype, ftype, min, max, off, def, unit, \
                          what)                                              \
    static int set_wide_##name(hilock_options *opts, int64_t value)          \
    {                                                                        \
        int rc = check_numeric(opts, what, unit, min, max, off, value);      \
        if (rc == HILOCK_OK)                                                 \
            opts->name = (ftype)value;                                       \
        return rc;                                                           \
    }                                                                        \
    int hilock_options_set_##name(hilock_options *opts, vtype value)         \
    {                                                                        \
        return set_wide_##name(opts, (int64_t)value);                        \
    }                                                                        \
    vtype hilock_options_##name(const hilock_options *opts)                  \
    {                                                                        \
        return opts ? (vtype)opts->name : -1;                                \
    }                                                                        \
    static int64_t get_wide_##name(const hilock_options *opts)               \
    {                                                                        \
        return hilock_options_##name(opts);                                  \
    }
HL_NUMERIC_OPTIONS(HL_DEFINE_NUMERIC)
#undef HL_DEFINE_NUMERIC

#define HL_DESCRIBE_NUMERIC(name, key, vtype, ftype, min, max, off, def,     \
                            unit, what)                                      \
    {#name, key, min, max, off, def, set_wide_##name, get_wide_##name},
const hl_numeric_option hl_numeric_options[] = {
    HL_NUMERIC_OPTIONS(HL_DESCRIBE_NUMERIC)};
#undef HL_DESCRIBE_NUMERIC
const size_t hl_numeric_option_count =
    sizeof hl_numeric_options / sizeof hl_numeric_options[0];

int hilock_options_set_reconnect_backoff_ms(hilock_options *opts,
                                            int64_t min_ms, int64_t max_ms)
{
    if (opts == NULL)
        return hl_fail(HILOCK_EINVAL, "set backoff: options is NULL");
    if (min_ms < 1 || min_ms > max_ms || max_ms > HL_BACKOFF_MAX_MS)
        return hl_fail(HILOCK_EINVAL,
                       "reconnect backoff needs 1 <= min <= max <= %d ms: "
                       "min %lld, max %lld",
                       HL_BACKOFF_MAX_MS, (long long)min_ms,
                       (long long)max_ms);
    opts->reconnect_min_ms = min_ms;
    opts->reconnect_max_ms = max_ms;
    return HILOCK_OK;
}

int hilock_options_set_max_reply_bytes(hilock_options *opts, uint64_t bytes)
{
    if (opts == NULL)
        return hl_fail(HILOCK_EINVAL, "set max reply bytes: options is NULL");
    if (bytes < HL_REPLY_BYTES_MIN || bytes > HL_REPLY_BYTES_MAX)
        return hl_fail(HILOCK_EINVAL,
                       "max reply bytes out of range %u..%llu: %llu",
                       HL_REPLY_BYTES_MIN, HL_REPLY_BYTES_MAX,
                       (unsigned long long)bytes);
    opts->max_reply_bytes = bytes;
    return HILOCK_OK;
}

int hilock_options_set_max_reply_elements(hilock_options *opts,
                                          int64_t elements)
{
    if (opts == NULL)
        return hl_fail(HILOCK_EINVAL,
                       "set max reply elements: options is NULL");
    if (elements < 1 || elements > INT32_MAX)
        return hl_fail(HILOCK_EINVAL,
                       "max reply elements out of range 1..%d: %lld",
                       (int)INT32_MAX, (long long)elements);
    opts->max_reply_elements = elements;
    return HILOCK_OK;
}

int hilock_options_set_max_reply_depth(hilock_options *opts, int depth)
{
    if (opts == NULL)
        return hl_fail(HILOCK_EINVAL, "set max reply depth: options is NULL");
    /* The RESP codec refuses nesting deeper than 7 whatever we ask, so a
     * larger bound would promise something it cannot keep. */
    if (depth < 1 || depth > HL_REPLY_DEPTH_MAX)
        return hl_fail(HILOCK_EINVAL,
                       "max reply depth out of range 1..%d: %d",
                       HL_REPLY_DEPTH_MAX, depth);
    opts->max_reply_depth = depth;
    return HILOCK_OK;
}

int hilock_options_set_tls(hilock_options *opts, bool enable)
{
    if (opts == NULL)
        return hl_fail(HILOCK_EINVAL, "set tls: options is NULL");
    opts->tls = enable;
    return HILOCK_OK;
}

int hilock_options_set_tls_verify(hilock_options *opts, bool verify)
{
    if (opts == NULL)
        return hl_fail(HILOCK_EINVAL, "set tls verify: options is NULL");
    opts->tls_verify = verify;
    return HILOCK_OK;
}

int hilock_options_set_tls_ca_file(hilock_options *opts, const char *path)
{
    return replace_string(opts, opts ? &opts->tls_ca_file : NULL, path,
                          "tls ca file");
}

int hilock_options_set_tls_ca_dir(hilock_options *opts, const char *path)
{
    return replace_string(opts, opts ? &opts->tls_ca_dir : NULL, path,
                          "tls ca dir");
}

int hilock_options_set_tls_cert_file(hilock_options *opts, const char *path)
{
    return replace_string(opts, opts ? &opts->tls_cert_file : NULL, path,
                          "tls cert file");
}

int hilock_options_set_tls_key_file(hilock_options *opts, const char *path)
{
    return replace_string(opts, opts ? &opts->tls_key_file : NULL, path,
                          "tls key file");
}

int hilock_options_set_tls_server_name(hilock_options *opts,
                                       const char *name)
{
    return replace_string(opts, opts ? &opts->tls_server_name : NULL, name,
                          "tls server name");
}

int hilock_options_set_loop(hilock_options *opts, struct ev_loop *loop)
{
    if (opts == NULL)
        return hl_fail(HILOCK_EINVAL, "set loop: options is NULL");
    opts->loop = loop;
    return HILOCK_OK;
}

/* Getters are for diagnostics, so a NULL object answers rather than
 * crashes: NULL for strings, -1 for numbers. */

const char *hilock_options_host(const hilock_options *opts)
{
    return opts ? opts->host : NULL;
}

int hilock_options_port(const hilock_options *opts)
{
    return opts ? opts->port : -1;
}

const char *hilock_options_user(const hilock_options *opts)
{
    return opts ? opts->user : NULL;
}

int hilock_options_has_password(const hilock_options *opts)
{
    return opts ? opts->password != NULL : -1;
}

int hilock_options_db(const hilock_options *opts)
{
    return opts ? opts->db : -1;
}

int hilock_options_tls(const hilock_options *opts)
{
    return opts ? opts->tls : -1;
}

int hilock_options_tls_verify(const hilock_options *opts)
{
    return opts ? opts->tls_verify : -1;
}

const char *hilock_options_tls_ca_file(const hilock_options *opts)
{
    return opts ? opts->tls_ca_file : NULL;
}

const char *hilock_options_tls_ca_dir(const hilock_options *opts)
{
    return opts ? opts->tls_ca_dir : NULL;
}

const char *hilock_options_tls_cert_file(const hilock_options *opts)
{
    return opts ? opts->tls_cert_file : NULL;
}

const char *hilock_options_tls_key_file(const hilock_options *opts)
{
    return opts ? opts->tls_key_file : NULL;
}

const char *hilock_options_tls_server_name(const hilock_options *opts)
{
    return opts ? opts->tls_server_name : NULL;
}

/* At most HILOCK_DESCRIPTION_MAX bytes, none of them a control
 * character: it is shown to operators as it is. */
int hilock_options_set_description(hilock_options *opts, const char *text)
{
    if (text != NULL && strlen(text) > HILOCK_DESCRIPTION_MAX)
        return hl_fail(HILOCK_EINVAL,
                       "a description has at most %d bytes, not %zu",
                       HILOCK_DESCRIPTION_MAX, strlen(text));
    for (const char *p = text; p != NULL && *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return hl_fail(HILOCK_EINVAL,
                           "a description holds no control character "
                           "(found byte %d)",
                           (int)(unsigned char)*p);
    return replace_string(opts, opts ? &opts->description : NULL, text,
                          "description");
}

const char *hilock_options_description(const hilock_options *opts)
{
    return opts ? opts->description : NULL;
}

#define HL_DESCRIBE_STRING(name, key, tls, what)                             \
    {#name, key, tls, hilock_options_set_##name, hilock_options_##name},
const hl_string_option hl_string_options[] = {
    HL_STRING_OPTIONS(HL_DESCRIBE_STRING)};
#undef HL_DESCRIBE_STRING
const size_t hl_string_option_count =
    sizeof hl_string_options / sizeof hl_string_options[0];

int hilock_options_set_sentinel_master(hilock_options *opts, const char *name)
{
    return replace_string(opts, opts ? &opts->sentinel_master : NULL, name,
                          "sentinel master name");
}

const char *hilock_options_sentinel_master(const hilock_options *opts)
{
    return opts ? opts->sentinel_master : NULL;
}

int hilock_options_set_sentinel_auth(hilock_options *opts, const char *user,
                                     const char *password)
{
    if (opts == NULL)
        return hl_fail(HILOCK_EINVAL, "set sentinel auth: options is NULL");
    if (user != NULL && password == NULL)
        return hl_fail(HILOCK_EINVAL, "sentinel user '%s' has no password",
                       user);
    /* Both or neither: copies first, so a failure changes nothing. */
    hilock_options tmp = {0};
    int rc = replace_string(&tmp, &tmp.sentinel_user, user, "sentinel user");
    if (rc == HILOCK_OK)
        rc = replace_string(&tmp, &tmp.sentinel_password, password,
                            "sentinel password");
    if (rc != HILOCK_OK) {
        hl_free(tmp.sentinel_user);
        hl_free(tmp.sentinel_password);
        return rc;
    }
    hl_free(opts->sentinel_user);
    hl_free(opts->sentinel_password);
    opts->sentinel_user = tmp.sentinel_user;
    opts->sentinel_password = tmp.sentinel_password;
    return HILOCK_OK;
}

int hl_word_place(const char *words, const char *w, size_t n)
{
    int place = 0;
    for (const char *p = words;; place++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        bool same = len == n;
        for (size_t i = 0; same && i < n; i++) {
            char c = w[i];
            if (c >= 'A' && c <= 'Z')
                c = (char)(c - 'A' + 'a');
            same = c == p[i];
        }
        if (same)
            return place;
        if (bar == NULL)
            return -1;
        p = bar + 1;
    }
}

int hilock_options_set_wait_fsync(hilock_options *opts, bool on)
{
    if (opts == NULL)
        return hl_fail(HILOCK_EINVAL, "set wait fsync: options is NULL");
    opts->wait_fsync = on;
    return HILOCK_OK;
}

int hilock_options_wait_fsync(const hilock_options *opts)
{
    return opts ? opts->wait_fsync : -1;
}

void hl_replica_ack_text(int ack, char *out, size_t cap)
{
    const char *p = NULL;
    for (size_t i = 0; i < hl_word_option_count && p == NULL; i++)
        if (strcmp(hl_word_options[i].name, "replica_ack") == 0)
            p = hl_word_options[i].words;
    for (int i = 0; i < ack && p != NULL; i++) {
        p = strchr(p, '|');
        p = p ? p + 1 : NULL;
    }
    if (ack < 0 || p == NULL)
        p = "?";
    snprintf(out, cap, "%.*s", (int)strcspn(p, "|"), p);
}

void hl_words_text(const char *words, char *out, size_t cap)
{
    size_t at = 0;
    const char *last = strrchr(words, '|');
    if (cap == 0)
        return;
    out[0] = '\0';
    for (const char *p = words; *p != '\0' && at + 1 < cap; p++) {
        const char *sep = *p != '|' ? NULL : p == last ? " or " : ", ";
        size_t len = sep ? strlen(sep) : 1;
        if (at + len >= cap)
            break;
        memcpy(out + at, sep ? sep : p, len);
        at += len;
    }
    out[at] = '\0';
}

static int word_count(const char *words)
{
    int n = 1;
    for (const char *p = words; *p != '\0'; p++)
        n += *p == '|';
    return n;
}

/* set_word_ is the table's uniform view of the typed public setter. */
#define HL_DEFINE_WORD(name, key, vtype, words, def, what)                   \
    static int set_word_##name(hilock_options *opts, int value)              \
    {                                                                        \
        char list[128];                                                      \
        if (opts == NULL)                                                    \
            return hl_fail(HILOCK_EINVAL, "set %s: options is NULL", what);  \
        if (value < 0 || value >= word_count(words)) {                       \
            hl_words_text(words, list, sizeof list);                         \
            return hl_fail(HILOCK_EINVAL, "%s %d is not %s", what, value,    \
                           list);                                            \
        }                                                                    \
        opts->name = value;                                                  \
        return HILOCK_OK;                                                    \
    }                                                                        \
    int hilock_options_set_##name(hilock_options *opts, vtype value)         \
    {                                                                        \
        return set_word_##name(opts, (int)value);                            \
    }                                                                        \
    int hilock_options_##name(const hilock_options *opts)                    \
    {                                                                        \
        return opts ? opts->name : -1;                                       \
    }
HL_WORD_OPTIONS(HL_DEFINE_WORD)
#undef HL_DEFINE_WORD

#define HL_DESCRIBE_WORD(name, key, vtype, words, def, what)                 \
    {#name, key, words, (int)(def), set_word_##name, hilock_options_##name},
const hl_word_option hl_word_options[] = {HL_WORD_OPTIONS(HL_DESCRIBE_WORD)};
#undef HL_DESCRIBE_WORD
const size_t hl_word_option_count =
    sizeof hl_word_options / sizeof hl_word_options[0];

int hilock_options_set_event_callback(hilock_options *opts,
                                      hilock_event_cb *cb, void *user_data)
{
    if (opts == NULL)
        return hl_fail(HILOCK_EINVAL, "set event callback: options is NULL");
    opts->event_cb = cb;
    opts->event_data = cb ? user_data : NULL;
    return HILOCK_OK;
}

const char *hilock_event_name(hilock_event_type type)
{
    switch (type) {
    case HILOCK_EVENT_CONNECTED:
        return "connected";
    case HILOCK_EVENT_DISCONNECTED:
        return "disconnected";
    case HILOCK_EVENT_MASTER_CHANGED:
        return "master changed";
    case HILOCK_EVENT_LEASE_LOST:
        return "lease lost";
    case HILOCK_EVENT_ACK_SHORT:
        return "acknowledgement short";
    case HILOCK_EVENT_PUBLISH_REFUSED:
        return "publish refused";
    case HILOCK_EVENT_SUBSCRIBE_REFUSED:
        return "subscribe refused";
    }
    return "unknown";
}
