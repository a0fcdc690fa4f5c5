/* Lua scripts run by SHA1 (EVALSHA).  Each connection loads a script
 * (SCRIPT LOAD, in the same pipeline, just before its first EVALSHA on
 * that connection), so a reconnect to a restarted server costs no
 * NOSCRIPT round trip and nothing runs out of order.  Only a SCRIPT FLUSH
 * on a live connection still meets NOSCRIPT: the call then runs as EVAL
 * (after commands sent behind it) and the connection loads every script
 * again before its next use. */
#ifndef HL_SCRIPT_H
#define HL_SCRIPT_H

#include <stddef.h>

#include "core/transport/conn.h"

struct hl_script {
    const char *body;
    size_t len;
    int index; /* bit in a connection's set of loaded scripts, or -1 */
    char sha1[41];
    /* The same script with every 'publish' turned into 'spublish', for
     * a cluster with sharded pub/sub; NULL when the body publishes
     * nothing, or when memory ran out (such a script then fails with
     * HILOCK_ENOMEM where it would have to SPUBLISH). */
    struct hl_script *sharded;
    bool publishes;
};

/* How many scripts get a bit in a connection's set of loaded scripts (a
 * multiple of 64).  A process that uses every kind makes 45 scripts and
 * 35 SPUBLISH twins, whichever run, and a script past this runs as EVAL
 * with its whole body every time. */
#define HL_SHA_SCRIPTS 256

/* Compute the SHA1 of a static script body and give it an index.  The
 * first HL_SHA_SCRIPTS scripts of the process run by SHA1 as described
 * above; any later one gets index -1 and runs as EVAL with its body each
 * time.  A script that publishes gets its sharded twin made here too; it
 * lives as long as the process. */
void hl_script_init(hl_script *s, const char *body);

/* Run a script with nkeys keys followed by the other arguments (argv holds
 * keys then args, argc in all); its sharded twin on a connection that
 * publishes sharded (hl_conn_sharded_publish).  fn gets the reply as hl_conn_command's
 * callback would, never a NOSCRIPT error; fn may be NULL to ignore it.  Returns HILOCK_OK,
 * HILOCK_ENOMEM or HILOCK_ECLOSED (fn not called). */
int hl_script_run(hl_conn *conn, const hl_script *s, int nkeys, int argc,
                  const char *const *argv, const size_t *argvlen,
                  hl_request_fn *fn, void *data);

#endif
