/* Raw commands through the client: the async call, and the sync call as a
 * thin layer that waits for it. */
#include <string.h>

#include "alloc.h"
#include "client_internal.h"
#include "error_detail.h"
#include "options_internal.h"

typedef struct command_call {
    hl_task task;
    hilock_client *client;
    char *cmd;
    size_t len;
    hilock_command_cb *cb;
    void *user_data;
    hl_sync *sync; /* set for a sync call instead of cb */
} command_call;

static void command_done(void *data, int status, hilock_reply *reply)
{
    command_call *call = data;
    hilock_client *c = call->client;
    if (call->sync) {
        hl_sync_post(call->sync, status, reply,
                     status ? hilock_last_error() : NULL);
        hl_free(call);
        return;
    }
    hilock_command_cb *cb = call->cb;
    void *user_data = call->user_data;
    hl_free(call);
    hl_client_enter_callback(c);
    cb(c, status, reply, user_data);
    hl_client_leave_callback(c);
}

static void command_start(hilock_client *c, hl_task *task, bool closed)
{
    command_call *call = (command_call *)task;
    if (closed || c->conn == NULL) {
        hl_free(call->cmd);
        hl_set_detail("client closed");
        command_done(call, HILOCK_ECLOSED, NULL);
        return;
    }
    int rc = hl_conn_command_take(c->conn, call->cmd, call->len,
                                  command_done, call);
    if (rc != 0) {
        hl_set_detail(rc == HILOCK_ECLOSED ? "client closed"
                                           : "out of memory for a request");
        command_done(call, rc, NULL);
    }
}

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

static int prepare_call(command_call **out, hilock_client *c, int argc,
                        const char *const *argv, const size_t *argvlen)
{
    command_call *call = hl_calloc(1, sizeof *call);
    if (call == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory for a request");
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
    if (lens != argvlen && lens != small)
        hl_free(lens);
    if (rc != 0) {
        hl_free(call);
        return hl_fail(HILOCK_ENOMEM, "out of memory for a request");
    }
    call->client = c;
    call->task.run = command_start;
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
    command_call *call;
    rc = prepare_call(&call, c, argc, argv, argvlen);
    if (rc != 0)
        return rc;
    call->cb = cb;
    call->user_data = user_data;
    rc = hl_client_submit(c, &call->task);
    if (rc != 0) {
        hl_free(call->cmd);
        hl_free(call);
    }
    return rc;
}

int hilock_client_command(hilock_client *c, int argc, const char *const *argv,
                          const size_t *argvlen, hilock_reply **reply)
{
    if (reply)
        *reply = NULL;
    int rc = check_args(c, argc, argv);
    if (rc != 0)
        return rc;
    if (hl_client_in_loop(c))
        return hl_fail(HILOCK_EDEADLK, "sync call on the loop thread");
    command_call *call;
    rc = prepare_call(&call, c, argc, argv, argvlen);
    if (rc != 0)
        return rc;
    call->sync = hl_sync_new(hl_client_sync_spin_us(c));
    if (call->sync == NULL) {
        hl_free(call->cmd);
        hl_free(call);
        return hl_fail(HILOCK_ENOMEM, "out of memory for a request");
    }
    hl_sync *sync = call->sync;
    rc = hl_client_submit(c, &call->task);
    if (rc != 0) {
        hl_free(call->cmd);
        hl_free(call);
        hl_sync_post(sync, rc, NULL, hilock_last_error());
    }
    /* The transport completes every request within its command timeout;
     * the margin here only catches a loop thread that stopped answering. */
    int64_t wait_us = HL_MS(2 * c->opts->command_timeout_ms + 1000);
    int status = 0;
    hilock_reply *r = NULL;
    char detail[256];
    if (hl_sync_wait(sync, wait_us, &status, &r, NULL, detail,
                     sizeof detail) !=
        0)
        return hl_fail(HILOCK_ETIMEDOUT, "the loop thread did not answer");
    if (status != 0)
        hl_set_detail(detail);
    else
        hl_clear_detail();
    if (reply)
        *reply = r;
    else
        hilock_reply_free(r);
    return status;
}
