/* hilock: distributed locks on Redis.  The one header users include. */
#ifndef HILOCK_H
#define HILOCK_H

#include "alloc.h"
#include "client.h"
#include "cond.h"
#include "error.h"
#include "events.h"
#include "export.h"
#include "fair.h"
#include "latch.h"
#include "lock.h"
#include "multi.h"
#include "options.h"
#include "reply.h"
#include "rwlock.h"
#include "segmented.h"
#include "semaphore.h"
#include "version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version at run time, as HILOCK_VERSION_HEX and as
 * "MAJOR.MINOR.PATCH".  Any thread. */
HILOCK_API unsigned hilock_version(void);
HILOCK_API const char *hilock_version_string(void);

#ifdef __cplusplus
}
#endif

#endif
