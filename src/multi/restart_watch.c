/* Restart tracking for RedLock masters.
 *
 * A master that restarted without persistence has forgotten the locks it
 * granted, so a vote it gives right after may grant a lock another owner
 * still holds through it.  The safe rule (the RedLock paper's "delayed
 * restart") is to let a master vote only once it has been up for longer
 * than any lease it may have granted.  Each time one of its connections
 * comes up, the client's connect hook asks INFO server: the run_id tells
 * a restart apart from a mere reconnect, the uptime how long a fresh
 * server still has to wait.  Until that answer is in, the master does not
 * vote, since the answer may be "restarted". */
#include <stdlib.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/base/monotime.h"
#include "core/engine/compose.h"
#include "multi_internal.h"

#define RUN_ID_MAX 48

struct hl_restart_watch {
    hilock_client *client;
    int64_t quarantine_ms; /* 0: the client's watchdog timeout */
    /* Loop thread only. */
    char run_id[RUN_ID_MAX];
    bool run_id_seen;
    /* Read by any thread (votes are counted on the coordinator's). */
    atomic_int asking;               /* INFO requests not yet answered */
    _Atomic int64_t quarantine_until; /* monotonic µs; 0: never */
    atomic_bool settled;              /* a first INFO came back, or failed */
};

/* The value of "key:" on a line of an INFO text, or NULL; *len is its
 * length up to the end of the line. */
static const char *info_value(const char *text, const char *key, size_t *len)
{
    size_t klen = strlen(key);
    const char *line = text;
    while (line != NULL && *line != '\0') {
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            const char *v = line + klen + 1;
            *len = strcspn(v, "\r\n");
            return v;
        }
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    return NULL;
}

static int64_t quarantine_of(const hl_restart_watch *w)
{
    return w->quarantine_ms > 0 ? w->quarantine_ms
                                : hl_client_watchdog_ms(w->client);
}

/* A server seen for the first time votes once it has been up for the
 * quarantine time; one whose run_id changed, or that would not say,
 * restarted as far as anyone can tell: it waits the whole quarantine and
 * every lease held on it is lost. */
static void judge(hl_restart_watch *w, bool known, const char *run_id,
                  int64_t uptime_s)
{
    int64_t q = quarantine_of(w);
    hl_monotime now = hl_monotime_now();
    if (known && !w->run_id_seen) {
        w->run_id_seen = true;
        memcpy(w->run_id, run_id, strlen(run_id) + 1);
        /* The server's word, whatever it is: a negative uptime counts as
         * just started, which only makes the wait longer. */
        int64_t up_ms = uptime_s > 0 ? hl_sat_mul(uptime_s, 1000) : 0;
        if (up_ms < q)
            atomic_store(&w->quarantine_until,
                         hl_after_ms(now, hl_sat_sub(q, up_ms)));
        return;
    }
    if (known && strcmp(w->run_id, run_id) == 0)
        return;
    if (known)
        memcpy(w->run_id, run_id, strlen(run_id) + 1);
    atomic_store(&w->quarantine_until, hl_after_ms(now, q));
    hl_client_leases_lost(w->client);
}

static void on_info(void *data, int status, hilock_reply *reply)
{
    hl_restart_watch *w = data;
    char run_id[RUN_ID_MAX] = "";
    bool known = false;
    int64_t uptime_s = 0;
    if (status == HILOCK_OK && reply != NULL &&
        reply->type == HILOCK_REPLY_STRING) {
        size_t len;
        const char *v = info_value(reply->str, "run_id", &len);
        if (v != NULL && len > 0 && len < sizeof run_id) {
            memcpy(run_id, v, len);
            run_id[len] = '\0';
            known = true;
            const char *up = info_value(reply->str, "uptime_in_seconds", &len);
            /* strtoll saturates, so an absurd uptime stays on its side
             * of zero. */
            uptime_s = up != NULL ? strtoll(up, NULL, 10) : 0;
        }
    }
    hilock_reply_free(reply);
    /* A connection lost before the answer asks again when it is back; a
     * closing client has nothing left to judge.  Anything else (a refusal,
     * no answer within the node timeout, text without a run_id) is a
     * server that would not say, which cannot be told from a restart. */
    bool answered = status != HILOCK_EIO && status != HILOCK_ECLOSED;
    if (answered)
        judge(w, known, run_id, uptime_s);
    /* In this order, whoever sees settled also sees the verdict. */
    atomic_fetch_sub(&w->asking, 1);
    if (answered)
        atomic_store(&w->settled, true);
}

static void on_connect(hilock_client *client, void *data)
{
    hl_restart_watch *w = data;
    static const char *const argv[] = {"INFO", "server"};
    static const size_t lens[] = {4, 6};
    atomic_fetch_add(&w->asking, 1);
    if (hl_client_hook_command(client, 2, argv, lens, on_info, w) !=
        HILOCK_OK) {
        judge(w, false, NULL, 0);
        atomic_fetch_sub(&w->asking, 1);
        atomic_store(&w->settled, true);
    }
}

int hl_restart_watch_attach(hl_restart_watch **out, hilock_client *client,
                            int64_t quarantine_ms)
{
    hl_restart_watch *w = hl_calloc(1, sizeof *w);
    *out = w;
    if (w == NULL)
        return hl_fail(HILOCK_ENOMEM, "out of memory");
    w->client = client;
    w->quarantine_ms = quarantine_ms;
    atomic_init(&w->asking, 0);
    atomic_init(&w->quarantine_until, 0);
    atomic_init(&w->settled, false);
    hl_client_set_connect_hook(client, on_connect, w);
    return HILOCK_OK;
}

void hl_restart_watch_free(hl_restart_watch *w)
{
    hl_free(w);
}

bool hl_restart_watch_settled(const hl_restart_watch *w)
{
    return atomic_load(&w->settled) && atomic_load(&w->asking) == 0;
}

bool hl_restart_quarantined(const hilock_client *client)
{
    const hl_restart_watch *w =
        hl_client_connect_hook_data(client, on_connect);
    if (w == NULL)
        return false;
    return atomic_load(&w->asking) > 0 ||
           hl_monotime_now() < atomic_load(&w->quarantine_until);
}
