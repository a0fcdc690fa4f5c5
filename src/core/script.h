/* Lua scripts run by SHA1 (EVALSHA), falling back to EVAL when the server
 * has forgotten them (NOSCRIPT after a restart or SCRIPT FLUSH); EVAL
 * also loads the script again, so the next call is an EVALSHA hit. */
#ifndef HL_SCRIPT_H
#define HL_SCRIPT_H

#include <stddef.h>

#include "conn.h"

typedef struct hl_script {
    const char *body;
    size_t len;
    char sha1[41];
} hl_script;

/* Compute the SHA1 of a static script body. */
void hl_script_init(hl_script *s, const char *body);

/* Run a script with nkeys keys followed by the other arguments (argv holds
 * keys then args, argc in all).  fn gets the reply as hl_conn_command's
 * callback would, never a NOSCRIPT error; fn may be NULL to ignore it.  Returns HILOCK_OK,
 * HILOCK_ENOMEM or HILOCK_ECLOSED (fn not called). */
int hl_script_run(hl_conn *conn, const hl_script *s, int nkeys, int argc,
                  const char *const *argv, const size_t *argvlen,
                  hl_request_fn *fn, void *data);

#endif
