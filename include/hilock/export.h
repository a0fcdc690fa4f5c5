/* The one export macro: every public symbol carries HILOCK_API; everything
 * else is hidden when the library is built with -fvisibility=hidden. */
#ifndef HILOCK_EXPORT_H
#define HILOCK_EXPORT_H

#if defined(HILOCK_STATIC)
#define HILOCK_API
#elif defined(__GNUC__) && __GNUC__ >= 4
#define HILOCK_API __attribute__((visibility("default")))
#else
#define HILOCK_API
#endif

#endif
