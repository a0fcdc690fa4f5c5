/* Lua scripts run by SHA1 (EVALSHA).  Each connection loads a script
 * (SCRIPT LOAD, in the same pipeline, just before its first EVALSHA on
 * that connection), so a reconnect to a restarted server costs no
 * NOSCRIPT round trip and nothing runs out of order.  Only a SCRIPT FLUSH
 * on a live connection still meets NOSCRIPT: the call then runs as EVAL
 * (after commands sent behind it) and the connection loads every script
 * again before its next use. */
#ifndef HL_SCRIPT_H
#define HL_SCRIPT_H

#include <stdbool.h>
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
    /* The twins for a cluster whose channels shared with Redisson are
     * published plain ([0]) or both ways ([1]), made on first use by a
     * connection that needs them (see hl_script_run). */
    _Atomic(struct hl_script *) shared[2];
    bool publishes;
    /* A 'publish' or a count of subscribers ('pubsub') of the body is
     * in no form the shared twins' rewrite knows, so they cannot be made:
     * a defect of the script, which test_script_forms checks no script of
     * the library has. */
    bool rewrite_unknown;
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
 * lives as long as the process, as do the other twins. */
void hl_script_init(hl_script *s, const char *body);

/* The form of s that a connection publishing how runs (see
 * hl_script_run); NULL when memory runs out, or for a shared form of a
 * script with rewrite_unknown.  Any thread. */
const hl_script *hl_script_form(const hl_script *s, hl_publish how);

/* Run a script with nkeys keys followed by the other arguments (argv holds
 * keys then args, argc in all), in the form the connection's way of
 * publishing asks for (hl_conn_publish): as it is, its sharded twin, or a
 * twin for channels shared with Redisson.  In the last, each PUBLISH goes
 * through a function that SPUBLISHes on hilock's own channels and
 * PUBLISHes (or does both) on the others, and a count of a shared
 * channel's subscribers (PUBSUB NUMSUB or SHARDNUMSUB) answers "many":
 * its plain subscribers may be on any node, and a node counts only its
 * own, so a release that would stay quiet for want of listeners there
 * announces.  fn gets the reply as hl_conn_command's callback would,
 * never a NOSCRIPT error; fn may be NULL to ignore it.  Returns
 * HILOCK_OK, HILOCK_ENOMEM, HILOCK_ECLOSED or HILOCK_EUNSUPPORTED (a
 * shared twin of a script with rewrite_unknown; fn not called). */
int hl_script_run(hl_conn *conn, const hl_script *s, int nkeys, int argc,
                  const char *const *argv, const size_t *argvlen,
                  hl_request_fn *fn, void *data);

#endif
