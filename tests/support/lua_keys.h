/* Which keys a script touches, read from its text (lua_read.h): every
 * key argument of every redis.call and redis.pcall, and of every local
 * function that passes its parameters on to one, must be a KEYS entry
 * the caller passes, or a local bound to one and never assigned again
 * (or a choice of two such, c and KEYS[i] or KEYS[j]).  A channel
 * (PUBLISH, PUBSUB NUMSUB) may also be a KEYS entry with text
 * appended, which keeps it in the entry's cluster slot whenever the
 * entry has a hash tag of its own.  Only the commands this file lists
 * are read; any other is refused until it is taught, with where its keys
 * are, as are a command name that is not a literal, KEYS read whole, an
 * index into KEYS that is neither a constant nor a loop over #KEYS, and
 * a global that is not one of Lua's libraries. */
#ifndef LUA_KEYS_H
#define LUA_KEYS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct lua_keys_spec {
    int nkeys;  /* KEYS the caller passes */
    bool batch; /* as many as it likes: the script loops over #KEYS */
    /* A local function whose results may stand for keys the caller does
     * not pass (a script's documented exception), or NULL. */
    const char *maker;
} lua_keys_spec;

typedef struct lua_keys_report {
    uint64_t named; /* bit i - 1: the text names KEYS[i] */
    int calls;      /* redis.call and redis.pcall sites read */
    int made;       /* key arguments spec.maker makes */
    char error[320];
} lua_keys_report;

/* 0 when the script keeps to spec, else -1 with the first thing wrong
 * (its line first) in report->error. */
int lua_keys_check(const char *text, const lua_keys_spec *spec,
                   lua_keys_report *report);

#endif
