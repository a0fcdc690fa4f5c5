/* The numeric and string options, each described once.  The setters and
 * getters of options.c and the URL query keys of url.c are generated from
 * these tables, so a range or a key cannot differ between the two ways
 * of setting an option.  Only the core's config folder and the tests
 * include this header. */
#ifndef HL_OPTION_TABLE_H
#define HL_OPTION_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hilock/options.h"

#define HL_TIMEOUT_MAX_MS 86400000
#define HL_BUSY_POLL_MAX_US 1000000
/* Below this, heartbeats every third of it would load the server. */
#define HL_WAITER_TIMEOUT_MIN_MS 100
#define HL_WAITER_TIMEOUT_MAX_MS 3600000
/* Consul caps its lock-delay at a minute; an hour leaves room for slow
 * failovers while a typo in the unit (seconds taken for ms, ms for us)
 * still stands out as an error rather than a lock closed for days. */
#define HL_LOCK_DELAY_MAX_MS 3600000

/* X(name, url key, setter's value type, field type, min, max, zero is
 * "off", default, unit, what).  name is both the struct field and the
 * suffix of hilock_options_set_<name> and hilock_options_<name>.  A NULL
 * url key: the option has no URL query key.  Zero outside min..max is
 * still accepted when "zero is off" is 1. */
#define HL_NUMERIC_OPTIONS(X)                                                \
    X(connect_timeout_ms, "connect_timeout", int64_t, int64_t, 1,            \
      HL_TIMEOUT_MAX_MS, 0, HILOCK_DEFAULT_CONNECT_TIMEOUT_MS, "ms",         \
      "connect timeout")                                                     \
    X(command_timeout_ms, "command_timeout", int64_t, int64_t, 1,            \
      HL_TIMEOUT_MAX_MS, 0, HILOCK_DEFAULT_COMMAND_TIMEOUT_MS, "ms",         \
      "command timeout")                                                     \
    X(watchdog_timeout_ms, "watchdog_timeout", int64_t, int64_t, 1,          \
      HL_TIMEOUT_MAX_MS, 0, HILOCK_DEFAULT_WATCHDOG_TIMEOUT_MS, "ms",        \
      "watchdog timeout")                                                    \
    X(max_hold_ms, "max_hold", int64_t, int64_t, 1, HL_TIMEOUT_MAX_MS, 1, 0, \
      "ms", "max hold")                                                      \
    X(lock_delay_ms, "lock_delay", int64_t, int64_t, 1, HL_LOCK_DELAY_MAX_MS, \
      1, 0, "ms", "lock delay")                                              \
    X(waiter_timeout_ms, "waiter_timeout", int64_t, int64_t,                 \
      HL_WAITER_TIMEOUT_MIN_MS, HL_WAITER_TIMEOUT_MAX_MS, 0,                 \
      HILOCK_DEFAULT_WAITER_TIMEOUT_MS, "ms", "waiter timeout")              \
    X(node_timeout_ms, "node_timeout", int64_t, int64_t, 1,                  \
      HL_TIMEOUT_MAX_MS, 0, HILOCK_DEFAULT_NODE_TIMEOUT_MS, "ms",            \
      "node timeout")                                                        \
    X(quarantine_ms, "quarantine", int64_t, int64_t, 1, HL_TIMEOUT_MAX_MS,   \
      1, 0, "ms", "quarantine")                                              \
    X(connections, "connections", int, int, 1, HILOCK_MAX_CONNECTIONS, 0,    \
      HILOCK_DEFAULT_CONNECTIONS, "", "connections")                         \
    X(max_pending, "max_pending", int64_t, int, 1, HILOCK_MAX_PENDING_LIMIT, \
      0, HILOCK_DEFAULT_MAX_PENDING, "", "max pending")                      \
    X(busy_poll_us, NULL, int64_t, int64_t, -1, HL_BUSY_POLL_MAX_US, 0, 0,   \
      "us", "busy poll")                                                     \
    X(replica_ack_timeout_ms, "ack_timeout", int64_t, int64_t, 1,            \
      HL_TIMEOUT_MAX_MS, 0, HILOCK_DEFAULT_REPLICA_ACK_TIMEOUT_MS, "ms",     \
      "replica ack timeout")

/* X(name, url key, a TLS setting, what): string options set through
 * hilock_options_set_<name> and read through hilock_options_<name>.  A
 * TLS setting in the query of a redis:// URL is refused: it almost
 * always means a forgotten 's'.  The password is not here: it has a
 * setter and the URL's user info, and no table may hand it out through a
 * getter. */
#define HL_STRING_OPTIONS(X)                                                 \
    X(tls_ca_file, "ca_file", 1, "tls ca file")                              \
    X(tls_ca_dir, "ca_dir", 1, "tls ca dir")                                 \
    X(tls_cert_file, "cert_file", 1, "tls cert file")                        \
    X(tls_key_file, "key_file", 1, "tls key file")                           \
    X(tls_server_name, "sni", 1, "tls server name")                          \
    X(description, "description", 0, "description")

/* X(name, url key, setter's value type, words, default, what): options
 * that take one of a few words, '|' between them.  The setter takes the
 * public header's enum, whose values are the words' places in the list
 * (0 for the first), and the getter gives it back as an int; the URL key
 * takes the word itself, in any case. */
#define HL_WORD_OPTIONS(X)                                                   \
    X(replica_ack, "replicas", hilock_replica_ack, "none|one|majority|all",  \
      HILOCK_DEFAULT_REPLICA_ACK, "replica ack")                             \
    X(redisson_pubsub, "redisson_pubsub", hilock_redisson_pubsub,            \
      "sharded|plain|both", HILOCK_DEFAULT_REDISSON_PUBSUB,                  \
      "redisson pubsub")

/* One numeric option as data, for the URL parser and for tests that walk
 * every option.  set and get take and give the value widened to int64_t;
 * set checks the range exactly as the public setter does (it is the
 * public setter's body). */
typedef struct hl_numeric_option {
    const char *name;
    const char *url_key; /* NULL: not a URL query key */
    int64_t min;
    int64_t max;
    bool zero_is_off;
    int64_t def;
    int (*set)(hilock_options *opts, int64_t value);
    int64_t (*get)(const hilock_options *opts);
} hl_numeric_option;

typedef struct hl_string_option {
    const char *name;
    const char *url_key;
    bool tls;
    int (*set)(hilock_options *opts, const char *value);
    const char *(*get)(const hilock_options *opts);
} hl_string_option;

typedef struct hl_word_option {
    const char *name;
    const char *url_key;
    const char *words; /* "a|b|c" */
    int def;
    int (*set)(hilock_options *opts, int value);
    int (*get)(const hilock_options *opts);
} hl_word_option;

/* The place of the word w (n bytes, any case) in words ("a|b|c"), or -1
 * when it is none of them. */
int hl_word_place(const char *words, const char *w, size_t n);
/* words as a sentence's end, "a, b or c", into out (cap bytes). */
void hl_words_text(const char *words, char *out, size_t cap);

extern const hl_numeric_option hl_numeric_options[];
extern const size_t hl_numeric_option_count;
extern const hl_string_option hl_string_options[];
extern const size_t hl_string_option_count;
extern const hl_word_option hl_word_options[];
extern const size_t hl_word_option_count;

#endif
