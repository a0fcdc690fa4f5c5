/* Raw commands through the client: the async call, and the blocking call
 * as a wait on the same operation. */
#include <string.h>

#include "core/base/alloc.h"
#include "core/runtime/client_state.h"
#include "core/runtime/cluster.h"
#include "core/transport/command_slot.h"
#include "core/base/error_detail.h"
#include "core/runtime/op.h"
#include "core/config/option_values.h"

typedef struct command_op {
    hl_op op; /* first */
    char *cmd;
    size_t len;
    int slot; /* the first key's cluster slot, or -1 */
    hilock_command_cb *cb; /* NULL for a blocking call */
    void *user_data;
} command_op;

static void command_answered(void *data, int status, hilock_reply *reply)
{
    command_op *call = data;
    hl_op_done(&call->op, status, 0, reply,
               status ? hilock_last_error() : NULL);
}

static void command_start(hl_op *op)
{
    command_op *call = (command_op *)op;
    hilock_client *c = op->home;
    char *cmd = call->cmd;
    call->cmd = NULL;
    hl_conn *conn = c->conn;
    if (conn != NULL && c->cluster != NULL && call->slot >= 0)
        conn = hl_cluster_conn_for_slot(c->cluster, (unsigned)call->slot);
    _Atomic int *gate = hl_op_gate_requests(op);
    int rc = conn == NULL
                 ? (hl_free(cmd), HILOCK_ECLOSED)
                 : hl_conn_command_take(conn, cmd, call->len,
                                        command_answered, call);
    hl_conn_gate_requests(gate);
    if (rc != 0) {
        hl_op_done(op, rc, 0, NULL,
                   rc == HILOCK_ECLOSED ? "client closed"
                                        : "out of memory for a request");
    }
}

static void command_complete(hl_op *op)
{
    command_op *call = (command_op *)op;
    hilock_reply *reply = op->reply;
    op->reply = NULL;
    call->cb(op->home, op->status, reply, call->user_data);
}

static void command_destroy(hl_op *op)
{
    command_op *call = (command_op *)op;
    hl_free(call->cmd);
    hl_free(call);
}

static const hl_op_type command_type = {
    .start = command_start,
    .complete = command_complete,
    .destroy = command_destroy,
    .bounded = true,
    .withdrawable = true,
};

static int check_args(const hilock_client *c, int argc,
                      const char *const *argv)
{
    if (c == NULL)
        return hl_fail(HILOCK_EINVAL, "client is NULL");
    if (argc < 1 || argv == NULL)
        return hl_fail(HILOCK_EINVAL, "a command needs at least one "
                                      "argument");
    for (int i = 0; i < argc; i++)
        if (argv[i] == NULL)
            return hl_fail(HILOCK_EINVAL, "argument %d is NULL", i);
    return 0;
}

static int new_call(command_op **out, int argc, const char *const *argv,
                    const size_t *argvlen)
{
    command_op *call = hl_calloc(1, sizeof *call);
    if (call == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory for a request");
    hl_op_init(&call->op, &command_type);
    size_t small[16];
    size_t *lens = (size_t *)argvlen;
    if (argvlen == NULL) {
        lens = argc <= 16 ? small : hl_malloc((size_t)argc * sizeof *lens);
        if (lens == NULL) {
            hl_free(call);
            return hl_fail(HILOCK_ENOMEM, "out of memory for a request");
        }
        for (int i = 0; i < argc; i++)
            lens[i] = strlen(argv[i]);
    }
    int rc = hl_format_command(&call->cmd, &call->len, argc, argv, lens);
    call->slot = hl_command_slot(argc, argv, lens);
    if (lens != argvlen && lens != small)
        hl_free(lens);
    if (rc != 0) {
        hl_free(call);
        return hl_fail(HILOCK_ENOMEM, "out of memory for a request");
    }
    *out = call;
    return 0;
}

int hilock_client_command_async(hilock_client *c, int argc,
                                const char *const *argv,
                                const size_t *argvlen, hilock_command_cb *cb,
                                void *user_data)
{
    int rc = check_args(c, argc, argv);
    if (rc != 0)
        return rc;
    if (cb == NULL)
        return hl_fail(HILOCK_EINVAL, "callback is NULL");
    command_op *call;
    rc = new_call(&call, argc, argv, argvlen);
    if (rc != 0)
        return rc;
    call->cb = cb;
    call->user_data = user_data;
    return hl_op_submit_or_drop(c, &call->op);
}

int hilock_client_command(hilock_client *c, int argc, const char *const *argv,
                          const size_t *argvlen, hilock_reply **reply)
{
    if (reply)
        *reply = NULL;
    int rc = check_args(c, argc, argv);
    if (rc != 0)
        return rc;
    command_op *call;
    rc = new_call(&call, argc, argv, argvlen);
    if (rc != 0)
        return rc;
    /* The transport completes every request within its command timeout;
     * the margin here only catches a loop thread that stopped answering. */
    int64_t limit_us = HL_MS(2 * c->opts->command_timeout_ms + 1000);
    hilock_reply *r = NULL;
    rc = hl_op_run_blocking(c, &call->op, limit_us, NULL, &r);
    if (reply)
        *reply = r;
    else
        hilock_reply_free(r);
    return rc;
}
