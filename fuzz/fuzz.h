/* What every fuzz target shares: libFuzzer's entry points, declared for
 * the project's warnings, and a check that outlives NDEBUG. */
#ifndef HILOCK_FUZZ_H
#define HILOCK_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise has to end the run the way a crash does, so that
 * libFuzzer keeps the input as an artifact; assert() would vanish in a
 * release build. */
#define FUZZ_CHECK(cond, ...)                                               \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "broken promise: " __VA_ARGS__);                \
            fputc('\n', stderr);                                            \
            abort();                                                        \
        }                                                                   \
    } while (0)

#endif
