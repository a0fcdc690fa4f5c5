/* Setting the per-thread error detail that hilock_last_error() reads. */
#ifndef HL_ERROR_DETAIL_H
#define HL_ERROR_DETAIL_H

#include "hilock/error.h"

/* The longest detail kept, with its NUL.  A refusal that names the
 * sentinels' answer and the counts it was judged by runs past 300
 * bytes; a longer one is cut. */
#define HL_DETAIL_MAX 512

/* Set the calling thread's detail text (printf format) and return status,
 * so a failure path reads: return hl_fail(HILOCK_EINVAL, "bad port %d", p) */
int hl_fail(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Set the detail verbatim (NULL clears it). */
void hl_set_detail(const char *text);
/* Clear the calling thread's detail. */
void hl_clear_detail(void);

/* The detail for a request that could not be sent with status: the
 * reason its sender refused it (HILOCK_EINVAL, which the sender explains
 * with hl_fail), else a plain "could not send the request". */
const char *hl_send_failure(int status);

/* The status for a server's error reply with this text: HILOCK_EPERM
 * when its ACL refused the command (NOPERM, or the error a script gets
 * from a call the user may not make), HILOCK_EREADONLY when the server
 * is a replica (READONLY, also from inside a script), else
 * HILOCK_EREDIS. */
int hl_redis_error_status(const char *text);

#endif
