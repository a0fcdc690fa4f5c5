/* Every kind's table of scripts (core/transport/script_def.h): a
 * NULL-terminated list per kind, which the kind loads its scripts from
 * and tests/test_script_keys.c checks whole.  A script missing from its
 * list is never loaded, so no kind can run one the check did not see. */
#ifndef HL_SCRIPT_REGISTRY_H
#define HL_SCRIPT_REGISTRY_H

#include "core/transport/script_def.h"

extern const hl_script_def *const hl_reentrant_script_defs[];
extern const hl_script_def *const hl_fair_script_defs[];
extern const hl_script_def *const hl_rwlock_script_defs[];
extern const hl_script_def *const hl_semaphore_script_defs[];
extern const hl_script_def *const hl_latch_script_defs[];
/* The scripts kindkit runs for several kinds (the hash kinds' renewal). */
extern const hl_script_def *const hl_kindkit_script_defs[];
/* A condition's signal, poll and leave (src/cond). */
extern const hl_script_def *const hl_cond_script_defs[];

#endif
