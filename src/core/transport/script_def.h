/* A script as the code that runs it declares it: its text, what each of
 * its KEYS is, and why, for the few that must, it names keys it is not
 * given.  Each kind keeps its scripts in one table of these, runs them
 * from it (hl_run_def in kindkit/kindkit.h) and loads them from it, and
 * tests/test_script_keys.c reads every script's text against the same
 * table: a script touches no key its caller does not pass, which servers
 * such as Dragonfly require by default, and which a table retyped in the
 * test could not promise. */
#ifndef HL_SCRIPT_DEF_H
#define HL_SCRIPT_DEF_H

#include <stdbool.h>

#include "core/transport/script.h"

/* What a KEYS entry of a def is, besides a layout prefix (the key
 * "prefix:{NAME}" by the braces rule, see layout/layout.h): the lock's
 * name, the kind's channel for the lock (hl_kind.channel without a
 * field), or the next of the keys the caller names at the run, in
 * order.  Compared by address, so that telling them from a prefix costs
 * nothing on every run. */
extern const char hl_key_name[];
extern const char hl_key_channel[];
extern const char hl_key_given[];

/* The first line that lets a script name keys it is not given on
 * Dragonfly, which reads it as the script's flags; to Redis it is a
 * comment.  Only the scripts whose def has undeclared set carry it. */
#define HL_LUA_UNDECLARED_KEYS "--!df flags=allow-undeclared-keys\n"

/* Why a script names keys it is not given: the Lua function whose
 * results name them, and the reason no caller can pass them. */
typedef struct hl_undeclared_keys {
    const char *maker;
    const char *why;
} hl_undeclared_keys;

typedef struct hl_script_def {
    const char *what; /* "reentrant release", for messages */
    const char *body; /* the Lua text */
    /* Made from body by hl_script_defs_init; NULL for a script sent
     * with its text each time (EVAL). */
    hl_script *script;
    /* KEYS in order.  A batch script (a renewal) takes one key of
     * keys[0]'s sort per lock, as many as it renews. */
    int nkeys;
    const char *const *keys;
    bool batch;
    /* KEYS entries the script never names (bit i - 1: KEYS[i]), passed
     * only so that the keys after them keep the places the shared Lua
     * fragments name them by. */
    unsigned spare_keys;
    const hl_undeclared_keys *undeclared; /* NULL: none */
} hl_script_def;

/* The keys of a def, with their count:
 *   .keys = HL_DEF_KEYS(hl_key_name, HL_LAYOUT_TOKEN) */
#define HL_DEF_KEYS(...)                                                    \
    .keys = (const char *const[]){__VA_ARGS__},                             \
    .nkeys = (int)(sizeof((const char *const[]){__VA_ARGS__}) /             \
                   sizeof(const char *))

/* The most KEYS a def may name (hl_run_def builds them on the stack). */
#define HL_SCRIPT_MAX_KEYS 10

/* Make the script of every def of a NULL-terminated list (once; any
 * thread under the caller's pthread_once). */
void hl_script_defs_init(const hl_script_def *const *defs);

#endif
