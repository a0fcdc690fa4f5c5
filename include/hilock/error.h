/* Status codes of every hilock call.
 *
 * 0 is success; every error is a small positive number from the table
 * below.  The table is append-only: a code keeps its number forever, new
 * codes go at the end.  Each failing call also leaves a detail message for
 * the calling thread, read with hilock_last_error().
 *
 * HILOCK_ETIMEDOUT and HILOCK_EINDOUBT part the calls that ran out of
 * time where it matters: ETIMEDOUT from a blocking call that sends a
 * single request (a release, a query, a raw command) means nothing of it
 * was sent and it never runs; EINDOUBT means it was sent and may have
 * taken effect, or may still (each function says what it counts as). */
#ifndef HILOCK_ERROR_H
#define HILOCK_ERROR_H

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, number, message).  Append only; never renumber or remove. */
#define HILOCK_ERROR_TABLE(X)                                                \
    X(OK, 0, "success")                                                      \
    X(EINVAL, 1, "invalid argument")                                         \
    X(ENOMEM, 2, "out of memory")                                            \
    X(EIO, 3, "connection failed or lost")                                   \
    X(ETIMEDOUT, 4, "timed out")                                             \
    X(EPROTO, 5, "protocol error")                                           \
    X(EAUTH, 6, "authentication failed")                                     \
    X(ETLS, 7, "TLS error")                                                  \
    X(ECLOSED, 8, "handle is closed")                                        \
    X(ECANCELED, 9, "operation canceled")                                    \
    X(ENOTOWNER, 10, "lock is not held by this owner")                       \
    X(ELEASELOST, 11, "lease lost")                                          \
    X(EDEADLK, 12, "blocking call from the loop thread would deadlock")      \
    X(EREDIS, 13, "server replied with an error")                            \
    X(ETOOBIG, 14, "reply exceeds the configured bounds")                    \
    X(EBUSY, 15, "lock is held by another owner")                            \
    X(ENOTFOUND, 16, "no such pending operation")                           \
    X(ENOQUORUM, 17, "too few servers answered for a quorum")               \
    X(EEXPIRED, 18, "the lease ran out while it was being acquired")      \
    X(ERANDOM, 19, "the secure random number generator failed")            \
    X(EFULL, 20, "too many unfinished operations on this client")           \
    X(EPERM, 21, "the server's ACL does not allow this command to the user") \
    X(ENOACK, 22, "too few replicas acknowledged the write")                \
    X(EINDOUBT, 23, "sent, but whether it took effect is unknown")          \
    X(EUPGRADE, 24, "the owner's read hold would keep its write waiting")  \
    X(EREADONLY, 25, "the server is a replica, which takes no writes")     \
    X(EUNSUPPORTED, 26, "the server cannot do what the options need")

typedef enum hilock_status {
#define HILOCK_ERROR_ENUM_(name, num, msg) HILOCK_##name = num,
    HILOCK_ERROR_TABLE(HILOCK_ERROR_ENUM_)
#undef HILOCK_ERROR_ENUM_
} hilock_status;

/* A static English message for a status code; "unknown error" for a number
 * outside the table.  Any thread; never fails. */
HILOCK_API const char *hilock_strerror(int status);

/* The symbolic name of a status code without prefix, e.g. "ETIMEDOUT";
 * "UNKNOWN" outside the table.  Any thread; never fails. */
HILOCK_API const char *hilock_errname(int status);

/* Detail text of the last error reported to the calling thread: by a
 * failing call made from it, or, inside an async callback, for the status
 * that callback receives.  Never NULL; "" when there is none.  The text
 * stays valid until the next hilock call on this thread. */
HILOCK_API const char *hilock_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
