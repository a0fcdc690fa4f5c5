/* hilock version: the single source of the version number.
 * CMake reads the three HILOCK_VERSION_* lines below; keep their form. */
#ifndef HILOCK_VERSION_H
#define HILOCK_VERSION_H

#define HILOCK_VERSION_MAJOR 0
#define HILOCK_VERSION_MINOR 2
#define HILOCK_VERSION_PATCH 0

#define HILOCK_VERSION_HEX                                                   \
    ((HILOCK_VERSION_MAJOR << 16) | (HILOCK_VERSION_MINOR << 8) |            \
     (HILOCK_VERSION_PATCH))

#define HILOCK_STRINGIFY_(x) #x
#define HILOCK_STRINGIFY(x) HILOCK_STRINGIFY_(x)
#define HILOCK_VERSION_STRING                                                \
    HILOCK_STRINGIFY(HILOCK_VERSION_MAJOR) "."                               \
    HILOCK_STRINGIFY(HILOCK_VERSION_MINOR) "."                               \
    HILOCK_STRINGIFY(HILOCK_VERSION_PATCH)

#endif
