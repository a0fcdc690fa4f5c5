#include "lua_common.h"

#include <pthread.h>

static const char renew_lua[] =
    "local out = {}\n"
    "for i = 1, #KEYS do\n"
    "  if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then\n"
    "    redis.call('pexpire', KEYS[i], ARGV[1])\n"
    "    out[i] = 1\n"
    "  else\n"
    "    out[i] = 0\n"
    "  end\n"
    "end\n"
    "return out\n";

hl_script hl_hash_renew;
static pthread_once_t renew_once = PTHREAD_ONCE_INIT;

static void init_renew(void) { hl_script_init(&hl_hash_renew, renew_lua); }

void hl_hash_renew_init(void) { pthread_once(&renew_once, init_renew); }

void hl_parse_acquire_reply(const hilock_reply *r, hl_acquire_result *out)
{
    out->outcome = HL_ACQ_BAD_REPLY;
    if (r == NULL || r->type != HILOCK_REPLY_ARRAY || r->elements < 1)
        return;
    for (size_t i = 0; i < r->elements; i++)
        if (r->element[i]->type != HILOCK_REPLY_INTEGER)
            return;
    long long what = r->element[0]->integer;
    if (what == 1 && r->elements == 3) {
        out->outcome = HL_ACQ_ACQUIRED;
        out->count = r->element[1]->integer;
        out->token = (uint64_t)r->element[2]->integer;
    } else if (what == 0 && r->elements == 2) {
        out->outcome = HL_ACQ_HELD;
        out->ttl_ms = r->element[1]->integer;
    } else if (what == 2) {
        out->outcome = HL_ACQ_VOID;
    } else if (what == 3) {
        out->outcome = HL_ACQ_UPGRADE;
    }
}

hl_release_outcome hl_parse_release_reply(const hilock_reply *r,
                                          int64_t *remaining)
{
    if (r == NULL || r->type != HILOCK_REPLY_INTEGER)
        return HL_REL_BAD_REPLY;
    *remaining = r->integer > 0 ? r->integer : 0;
    if (r->integer == -1)
        return HL_REL_NOT_OWNER;
    if (r->integer == -2)
        return HL_REL_OWNER_DONE;
    if (r->integer < 0)
        return HL_REL_BAD_REPLY;
    return r->integer == 0 ? HL_REL_FREED : HL_REL_STILL_HELD;
}

int hl_run_lock_script(hilock_lock *lock, const hl_script *script, int naux,
                       const char *const *prefixes, int nargs,
                       const char *const *args, const size_t *arg_lens,
                       hl_request_fn *fn, void *data)
{
    hl_conn *conn = hl_lock_conn(lock);
    if (conn == NULL)
        return HILOCK_ECLOSED;
    hl_aux_name k[HL_LOCK_SCRIPT_MAX_AUX];
    if (hl_aux_names_make(lock, naux, prefixes, k) != 0)
        return HILOCK_ENOMEM;
    const char *argv[1 + HL_LOCK_SCRIPT_MAX_AUX + HL_LOCK_SCRIPT_MAX_ARGS];
    size_t lens[1 + HL_LOCK_SCRIPT_MAX_AUX + HL_LOCK_SCRIPT_MAX_ARGS];
    argv[0] = lock->name;
    lens[0] = lock->name_len;
    for (int i = 0; i < naux; i++) {
        argv[1 + i] = k[i].s;
        lens[1 + i] = k[i].len;
    }
    for (int i = 0; i < nargs; i++) {
        argv[1 + naux + i] = args[i];
        lens[1 + naux + i] = arg_lens[i];
    }
    int rc = hl_script_run(conn, script, 1 + naux, 1 + naux + nargs, argv,
                           lens, fn, data);
    hl_aux_names_done(naux, k);
    return rc;
}
