/* What the handshake asks so that a policy the server cannot keep fails
 * the connection at once, in the same round trip as its PING, rather
 * than every lock write at the end of its wait: WAIT for the replica
 * acknowledgement policy, and for fsync=yes the AOF settings WAITAOF
 * depends on and WAITAOF itself.  A replica is never refused here: it
 * takes no writes (each says HILOCK_EREADONLY) and may still be read. */
#include <stdio.h>
#include <string.h>

#include "core/config/option_values.h"
#include "core/transport/conn_internal.h"
#include "hilock/error.h"

void hl_conn_wait_refusal(const hl_conn *c, const char *words, char *out,
                          size_t cap)
{
    if (c->o->wait_fsync) {
        snprintf(out, cap,
                 "%.48s:%d refuses WAITAOF (%.32s...), which fsync=yes "
                 "needs (fsync=no goes without: a crash may then lose a "
                 "counted lock write)",
                 c->o->host, c->o->port, words);
        return;
    }
    char policy[16];
    hl_replica_ack_text(c->o->replica_ack, policy, sizeof policy);
    /* The server's words, cut: its refusal quotes the arguments. */
    snprintf(out, cap,
             "%s:%d refuses WAIT (%.32s...), which replicas=%s needs on a "
             "master with replicas: set replicas=none "
             "(hilock_options_set_replica_ack) to go without; a failover "
             "may then undo a write",
             c->o->host, c->o->port, words, policy);
}

/* Fail the connection: the server cannot keep fsync=yes, for why. */
static void refuse_fsync(hl_conn *c, const char *why)
{
    snprintf(c->err, sizeof c->err,
             "%.48s:%d %.96s, which fsync=yes needs (fsync=no goes "
             "without: a crash may then lose a counted lock write)",
             c->o->host, c->o->port, why);
    hl_conn_drop(c, HILOCK_EUNSUPPORTED, c->err);
}

/* ROLE for the probes: whether the node is a master, and how many
 * replicas it lists. */
static void role_count_reply(void *data, int status, hilock_reply *reply)
{
    hl_conn *c = data;
    char why[160];
    if (status != 0 && reply == NULL) {
        hl_conn_hello_reply(data, status, NULL); /* no answer at all */
        return;
    }
    if (status == 0 && !hl_conn_role_not_master(reply, why, sizeof why)) {
        c->hello_replicas = (int)reply->element[2]->elements;
        c->hello_role = HL_ROLE_MASTER;
    } else if (status == 0 && reply->type == HILOCK_REPLY_ARRAY &&
               reply->elements > 0 &&
               reply->element[0]->type == HILOCK_REPLY_STRING) {
        c->hello_role = HL_ROLE_OTHER; /* a replica, or a sentinel */
    }
    /* Any other answer, a refusal included, leaves both unknown; only
     * the probes asked. */
    hilock_reply_free(reply);
    hl_conn_hello_reply(data, 0, NULL);
}

/* An answer a probe judges, or NULL when the probe has nothing to say:
 * the connection failed (passed on as such), or the node is no master.
 * Frees what it does not hand back. */
static hilock_reply *probe_answer(hl_conn *c, int status,
                                  hilock_reply *reply)
{
    if (status != 0 && reply == NULL) {
        hl_conn_hello_reply(c, status, NULL);
        return NULL;
    }
    if (c->hello_role == HL_ROLE_OTHER) {
        hilock_reply_free(reply);
        hl_conn_hello_reply(c, 0, NULL);
        return NULL;
    }
    return reply;
}

static void wait_reply(void *data, int status, hilock_reply *reply)
{
    hl_conn *c = data;
    if ((reply = probe_answer(c, status, reply)) == NULL)
        return;
    /* A master without replicas needs no WAIT, and one whose count is
     * unknown is judged by its first write. */
    if (reply->type != HILOCK_REPLY_ERROR || c->hello_replicas <= 0) {
        hilock_reply_free(reply);
        hl_conn_hello_reply(c, 0, NULL);
        return;
    }
    hl_conn_wait_refusal(c, reply->str, c->err, sizeof c->err);
    hilock_reply_free(reply);
    hl_conn_drop(c, HILOCK_EUNSUPPORTED, c->err);
}

/* The value CONFIG GET gave for name in its flat name/value array, or
 * NULL. */
static const hilock_reply *config_value(const hilock_reply *r,
                                        const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const hilock_reply *k = r->element[i];
        if (k->type == HILOCK_REPLY_STRING && k->len == n &&
            memcmp(k->str, name, n) == 0 &&
            r->element[i + 1]->type == HILOCK_REPLY_STRING)
            return r->element[i + 1];
    }
    return NULL;
}

static bool value_is(const hilock_reply *v, const char *word)
{
    return v != NULL && v->len == strlen(word) &&
           memcmp(v->str, word, v->len) == 0;
}

/* appendonly must be yes (WAITAOF refuses a local fsync without an AOF)
 * and appendfsync not no (the server then leaves the fsync to the
 * system, and a WAITAOF asking for it cannot complete). */
static void aof_config_reply(void *data, int status, hilock_reply *reply)
{
    hl_conn *c = data;
    if ((reply = probe_answer(c, status, reply)) == NULL)
        return;
    char why[96];
    why[0] = '\0';
    if (reply->type == HILOCK_REPLY_ERROR) {
        snprintf(why, sizeof why,
                 "refuses CONFIG GET (%.24s...) of appendonly and "
                 "appendfsync",
                 reply->str);
    } else if (reply->type != HILOCK_REPLY_ARRAY) {
        snprintf(why, sizeof why, "answered CONFIG GET with %s",
                 hl_reply_kind(reply));
    } else {
        const hilock_reply *aof = config_value(reply, "appendonly");
        const hilock_reply *fsync = config_value(reply, "appendfsync");
        if (aof == NULL || fsync == NULL)
            snprintf(why, sizeof why,
                     "does not show appendonly and appendfsync");
        else if (!value_is(aof, "yes"))
            snprintf(why, sizeof why,
                     "has appendonly %.16s: no append-only file to fsync",
                     aof->str);
        else if (value_is(fsync, "no"))
            snprintf(why, sizeof why,
                     "has appendfsync no: a WAITAOF for the master's own "
                     "fsync cannot complete");
    }
    hilock_reply_free(reply);
    if (why[0] != '\0') {
        refuse_fsync(c, why);
        return;
    }
    hl_conn_hello_reply(c, 0, NULL);
}

static void waitaof_reply(void *data, int status, hilock_reply *reply)
{
    hl_conn *c = data;
    if ((reply = probe_answer(c, status, reply)) == NULL)
        return;
    if (reply->type != HILOCK_REPLY_ERROR) {
        hilock_reply_free(reply);
        hl_conn_hello_reply(c, 0, NULL);
        return;
    }
    char why[96];
    snprintf(why, sizeof why,
             "refuses WAITAOF (%.32s...; Redis has it from 7.2)",
             reply->str);
    hilock_reply_free(reply);
    refuse_fsync(c, why);
}

int hl_conn_probe_send(hl_conn *c, bool send_role)
{
    bool wait = c->cfg.probe_wait, fsync = c->cfg.probe_fsync;
    if (!wait && !fsync)
        return 0;
    const char *role[] = {"ROLE"};
    if (send_role && hl_conn_hello_send(c, 1, role, role_count_reply) != 0)
        return -1;
    const char *wait_argv[] = {"WAIT", "0", "0"};
    if (wait && hl_conn_hello_send(c, 3, wait_argv, wait_reply) != 0)
        return -1;
    /* The settings first: they say what is wrong where a server has
     * WAITAOF, and where it has not, the refusal names it. */
    const char *config[] = {"CONFIG", "GET", "appendonly", "appendfsync"};
    if (fsync && hl_conn_hello_send(c, 4, config, aof_config_reply) != 0)
        return -1;
    const char *waitaof[] = {"WAITAOF", "0", "0", "0"};
    if (fsync && hl_conn_hello_send(c, 4, waitaof, waitaof_reply) != 0)
        return -1;
    return 0;
}
