#include "kindkit/kindkit.h"

#include <pthread.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/error_detail.h"
#include "core/transport/resp.h"
#include "hilock/reply.h"
#include "kindkit/script_registry.h"
#include "layout/layout.h"

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

const hl_script_def hl_hash_renew_def = {
    .what = "hash renew",
    .body = renew_lua,
    .script = &hl_hash_renew,
    HL_DEF_KEYS(hl_key_name),
    .batch = true,
};

/* The renewal of holders whose client sets a lock delay: KEYS come in
 * pairs, a lock's name and its delay key; ARGV: the lease, the delay,
 * then one field per lock.  A renewed hold moves its delay key to the
 * lease plus the delay, so the lock stays closed for the delay after the
 * renewed lease would run out; a hold found gone leaves the key alone,
 * its end being the one the delay is about.  The pairs are walked by the
 * loop over every key, so that the batch names no key by a computed
 * place. */
static const char renew_delayed_lua[] =
    "local out = {}\n"
    "local px = tonumber(ARGV[1]) + tonumber(ARGV[2])\n"
    "for i = 1, #KEYS do\n"
    "  local n = math.floor((i + 1) / 2)\n"
    "  if i % 2 == 1 then\n"
    "    if redis.call('hexists', KEYS[i], ARGV[n + 2]) == 1 then\n"
    "      redis.call('pexpire', KEYS[i], ARGV[1])\n"
    "      out[n] = 1\n"
    "    else\n"
    "      out[n] = 0\n"
    "    end\n"
    "  elseif out[n] == 1 then\n"
    "    redis.call('set', KEYS[i], ARGV[2], 'px', px)\n"
    "  end\n"
    "end\n"
    "return out\n";

hl_script hl_hash_renew_delayed;

const hl_script_def hl_hash_renew_delayed_def = {
    .what = "hash renew with a lock delay",
    .body = renew_delayed_lua,
    .script = &hl_hash_renew_delayed,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_LOCK_DELAY),
    .batch = true,
};

int hl_lock_delay_key(const char *name, size_t name_len, hl_aux_name *out)
{
    return hl_layout_key(out, HL_LAYOUT_LOCK_DELAY, name, name_len, NULL,
                         0) == 0
               ? 0
               : HILOCK_ENOMEM;
}
/* KEYS: name, request channel.  ARGV: the reason.  Only when anyone
 * holds the lock, so that the asker learns a lock is free from the same
 * answer that says how many holders heard. */
static const char request_release_lua[] =
    "if redis.call('exists', KEYS[1]) == 0 then return {0, 0} end\n"
    "local n = redis.pcall('publish', KEYS[2], ARGV[1])\n"
    "if type(n) == 'table' and n.err then return {1, 0, n.err} end\n"
    "return {1, n}\n";

static hl_script request_release;

static const hl_script_def request_release_def = {
    .what = "request to give a lock up",
    .body = request_release_lua,
    .script = &request_release,
    HL_DEF_KEYS(hl_key_name, HL_LAYOUT_RELEASE_REQUEST),
};

const hl_script_def *const hl_kindkit_script_defs[] = {
    &hl_hash_renew_def, &hl_hash_renew_delayed_def, &request_release_def,
    NULL};

static pthread_once_t renew_once = PTHREAD_ONCE_INIT;

static void init_renew(void) { hl_script_defs_init(hl_kindkit_script_defs); }

void hl_kindkit_scripts_init(void) { pthread_once(&renew_once, init_renew); }

bool hl_reply_i64(const hilock_reply *r, int64_t *out)
{
    if (r == NULL)
        return false;
    if (r->type == HILOCK_REPLY_INTEGER) {
        *out = r->integer;
        return true;
    }
    return r->type == HILOCK_REPLY_STRING &&
           hl_i64_parse(r->str, r->len, out);
}

void hl_parse_acquire_reply(const hilock_reply *r, hl_acquire_result *out)
{
    out->outcome = HL_ACQ_BAD_REPLY;
    if (r == NULL || r->type != HILOCK_REPLY_ARRAY || r->elements < 1)
        return;
    /* Integers, but for a token, which may come as text. */
    int64_t token = 0;
    for (size_t i = 0; i < r->elements; i++)
        if (i == 2 ? !hl_reply_i64(r->element[i], &token)
                   : r->element[i]->type != HILOCK_REPLY_INTEGER)
            return;
    long long what = r->element[0]->integer;
    if (what == 1 && r->elements == 3) {
        out->outcome = HL_ACQ_ACQUIRED;
        out->count = r->element[1]->integer;
        out->token = (uint64_t)token;
    } else if (what == 0 &&
               (r->elements == 2 ||
                (r->elements == 3 && token >= 0 && token <= 7))) {
        out->outcome = HL_ACQ_HELD;
        out->ttl_ms = r->element[1]->integer;
        out->first_in_line = r->elements == 3 && (token & 1) != 0;
        out->promised = r->elements == 3 && (token & 2) != 0;
        out->wanted = r->elements == 3 && (token & 4) != 0;
    } else if (what == 2) {
        out->outcome = HL_ACQ_VOID;
    } else if (what == 3) {
        out->outcome = HL_ACQ_SELF_WAIT;
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
    if (r->integer == -3)
        return HL_REL_FREED_ELSEWHERE;
    if (r->integer == -4)
        return HL_REL_FREED_OPEN;
    if (r->integer < 0)
        return HL_REL_BAD_REPLY;
    return r->integer == 0 ? HL_REL_FREED : HL_REL_STILL_HELD;
}

int hl_channel_under(const char *prefix, const hilock_lock *lock,
                     const char *field, size_t field_len, hl_aux_name *out)
{
    return hl_layout_key(out, prefix, lock->name, lock->name_len, field,
                         field_len) == 0
               ? 0
               : HILOCK_ENOMEM;
}

int hl_lock_channel_of(const hilock_lock *lock, const char *field,
                       size_t field_len, hl_aux_name *out)
{
    return hl_channel_under(HL_LAYOUT_LOCK_CHANNEL, lock, field, field_len,
                            out);
}

int hl_lock_keys(const hilock_lock *lock, int n, const char *const *prefixes,
                 hl_aux_name *out)
{
    for (int i = 0; i < n; i++) {
        int rc = prefixes[i]
                     ? hl_layout_key(&out[i], prefixes[i], lock->name,
                                     lock->name_len, NULL, 0)
                     : lock->kind->channel(lock, NULL, 0, &out[i]);
        if (rc != 0) {
            hl_aux_names_done(i + 1, out);
            return HILOCK_ENOMEM;
        }
    }
    return 0;
}

int hl_release_request_channel(const hilock_lock *lock, hl_aux_name *out)
{
    static const char *const prefix[] = {HL_LAYOUT_RELEASE_REQUEST};
    return hl_lock_keys(lock, 1, prefix, out);
}

int hl_release_request_send(hilock_lock *lock, const char *reason,
                            size_t reason_len, hl_request_fn *fn, void *data)
{
    const char *args[] = {reason};
    size_t lens[] = {reason_len};
    return hl_run_lock_def(lock, &request_release_def, 1, args, lens, fn,
                           data);
}

int hl_check_name_slot(const hilock_lock *lock)
{
    if (!hl_lock_on_cluster(lock) ||
        hl_layout_one_slot(lock->name, lock->name_len))
        return HILOCK_OK;
    /* The cluster would refuse the scripts that name the other keys
     * (CROSSSLOT), or run those that name one only, and a hold could be
     * taken that no release can give back. */
    return hl_fail(HILOCK_EINVAL,
                   "on a Redis Cluster a lock name with braces needs a hash "
                   "tag of its own ({...} with something between): the "
                   "keys of this name would lie in different slots");
}

/* KEYS[i] of def: the name, a given key, or a key made into made. */
static int def_key(hilock_lock *lock, const char *k, hl_aux_name *made,
                   int *nmade, const char *given, size_t given_len,
                   const char **out, size_t *out_len)
{
    if (k == hl_key_name) {
        *out = lock->name;
        *out_len = lock->name_len;
        return 0;
    }
    if (k == hl_key_given) {
        *out = given;
        *out_len = given_len;
        return 0;
    }
    hl_aux_name *a = &made[(*nmade)++];
    int rc = k == hl_key_channel
                 ? lock->kind->channel(lock, NULL, 0, a)
                 : hl_layout_key(a, k, lock->name, lock->name_len, NULL, 0);
    *out = a->s;
    *out_len = a->len;
    return rc == 0 ? 0 : HILOCK_ENOMEM;
}

int hl_run_def(hilock_lock *lock, const hl_script_def *def, int ngiven,
               const char *const *given, const size_t *given_lens,
               int nargs, const char *const *args, const size_t *arg_lens,
               hl_request_fn *fn, void *data)
{
    hl_conn *conn = hl_lock_conn(lock);
    if (conn == NULL)
        return HILOCK_ECLOSED;
    if (def->batch || def->nkeys > HL_SCRIPT_MAX_KEYS ||
        nargs > HL_LOCK_SCRIPT_MAX_ARGS)
        return HILOCK_EINVAL;
    hl_aux_name made[HL_SCRIPT_MAX_KEYS];
    const char *argv[HL_SCRIPT_MAX_KEYS + HL_LOCK_SCRIPT_MAX_ARGS];
    size_t lens[HL_SCRIPT_MAX_KEYS + HL_LOCK_SCRIPT_MAX_ARGS];
    int nmade = 0, used = 0, rc = HILOCK_OK;
    for (int i = 0; i < def->nkeys && rc == HILOCK_OK; i++) {
        bool is_given = def->keys[i] == hl_key_given;
        if (is_given && used == ngiven) {
            rc = HILOCK_EINVAL;
            break;
        }
        rc = def_key(lock, def->keys[i], made, &nmade,
                     is_given ? given[used] : NULL,
                     is_given ? given_lens[used] : 0, &argv[i], &lens[i]);
        used += is_given;
    }
    if (rc == HILOCK_OK && used != ngiven)
        rc = HILOCK_EINVAL;
    if (rc == HILOCK_OK) {
        for (int i = 0; i < nargs; i++) {
            argv[def->nkeys + i] = args[i];
            lens[def->nkeys + i] = arg_lens[i];
        }
        rc = hl_script_run(conn, def->script, def->nkeys, def->nkeys + nargs,
                           argv, lens, fn, data);
    }
    hl_aux_names_done(nmade, made);
    return rc;
}

int hl_run_lock_def(hilock_lock *lock, const hl_script_def *def, int nargs,
                    const char *const *args, const size_t *arg_lens,
                    hl_request_fn *fn, void *data)
{
    return hl_run_def(lock, def, 0, NULL, NULL, nargs, args, arg_lens, fn,
                      data);
}

int hl_attempt_argv(const hl_attempt_args *a, bool with_keep,
                    int64_t delay_ms, hl_attempt_text *t, const char **args,
                    size_t *lens)
{
    static const char *const wants[] = {"0", "1", "2"};
    int n = 0;
    args[n] = t->lease;
    lens[n++] = hl_i64_dec(t->lease, a->lease_ms);
    args[n] = a->field;
    lens[n++] = a->field_len;
    args[n] = a->fenced ? "1" : "0";
    lens[n++] = 1;
    args[n] = t->token;
    lens[n++] = hl_u64_dec(t->token, a->known_token);
    args[n] = a->nonce;
    lens[n++] = a->nonce_len;
    args[n] = t->wait;
    lens[n++] = hl_i64_dec(t->wait, a->waiter_timeout_ms);
    if (with_keep) {
        args[n] = t->keep;
        lens[n++] = hl_i64_dec(t->keep, a->keep_in_line_ms);
    }
    if (a->want != HL_WANT_NONE) {
        args[n] = wants[a->want];
        lens[n++] = 1;
        args[n] = a->claim ? a->claim : "";
        lens[n++] = a->claim ? a->claim_len : 0;
    }
    if (delay_ms > 0) {
        args[n] = t->delay;
        lens[n++] = hl_i64_dec(t->delay, delay_ms);
    }
    return n;
}

int hl_hash_query_suffixed(hilock_lock *lock, hl_query q, const char *field,
                           size_t field_len, const char *suffix,
                           hl_request_fn *fn, void *data)
{
    hl_conn *conn = hl_lock_conn(lock);
    if (conn == NULL)
        return HILOCK_ECLOSED;
    size_t slen = strlen(suffix);
    char buf[HILOCK_CLIENT_ID_LEN + 22 + 16];
    if (field_len + slen > sizeof buf)
        return HILOCK_EINVAL;
    memcpy(buf, field, field_len);
    memcpy(buf + field_len, suffix, slen);
    const char *cmd = q == HL_QUERY_LOCKED       ? "EXISTS"
                      : q == HL_QUERY_HOLD_COUNT ? "HGET"
                                                 : "PTTL";
    const char *argv[3] = {cmd, lock->name, buf};
    size_t lens[3] = {strlen(cmd), lock->name_len, field_len + slen};
    return hl_conn_command(conn, q == HL_QUERY_HOLD_COUNT ? 3 : 2, argv, lens,
                           fn, data);
}

int hl_hash_query(hilock_lock *lock, hl_query q, const char *field,
                  size_t field_len, hl_request_fn *fn, void *data)
{
    return hl_hash_query_suffixed(lock, q, field, field_len, "", fn, data);
}

bool hl_hash_parse_query(hl_query q, const hilock_reply *r, int64_t *value)
{
    if (q != HL_QUERY_HOLD_COUNT) {
        if (r->type != HILOCK_REPLY_INTEGER)
            return false;
        /* No key (-2) or no expiry (-1) alike: nothing to wait out. */
        *value = q == HL_QUERY_TTL && r->integer < 0 ? -1 : r->integer;
        return true;
    }
    if (r->type == HILOCK_REPLY_NIL) {
        *value = 0;
        return true;
    }
    return r->type == HILOCK_REPLY_STRING &&
           hl_i64_parse(r->str, r->len, value);
}

/* A status and what its pointers lead into, freed as one. */
typedef struct status_mem {
    hilock_lock_status pub; /* first: what the caller frees */
    hilock_reply *reply;
    hilock_lock_owner owners[];
} status_mem;

void hilock_lock_status_free(hilock_lock_status *status)
{
    if (status == NULL)
        return;
    status_mem *m = (status_mem *)status;
    hilock_reply_free(m->reply);
    hl_free(m);
}


static bool reply_is(const hilock_reply *r, const char *s)
{
    return r->type == HILOCK_REPLY_STRING && r->len == strlen(s) &&
           memcmp(r->str, s, r->len) == 0;
}

static bool ends_with(const hilock_reply *r, const char *s)
{
    size_t n = strlen(s);
    return r->len >= n && memcmp(r->str + r->len - n, s, n) == 0;
}

int hl_hash_parse_status(hilock_reply *reply, const char *kind_label,
                         bool rwlock, hilock_lock_status **out)
{
    *out = NULL;
    const hilock_reply *fields, *waiters;
    int64_t pttl, subscribers, seen, delay = -2;
    if (reply == NULL || reply->type != HILOCK_REPLY_ARRAY ||
        (reply->elements != 5 && reply->elements != 6) ||
        (reply->elements == 6 && !hl_reply_i64(reply->element[5], &delay)) ||
        !hl_reply_i64(reply->element[0], &pttl) ||
        (fields = reply->element[1])->type != HILOCK_REPLY_ARRAY ||
        fields->elements % 2 != 0 ||
        (waiters = reply->element[2])->type != HILOCK_REPLY_ARRAY ||
        waiters->elements % 2 != 0 ||
        !hl_reply_i64(reply->element[3], &subscribers) ||
        !hl_reply_i64(reply->element[4], &seen)) {
        hilock_reply_free(reply);
        return HILOCK_EPROTO;
    }
    for (size_t i = 0; i < fields->elements; i++)
        if (fields->element[i]->type != HILOCK_REPLY_STRING) {
            hilock_reply_free(reply);
            return HILOCK_EPROTO;
        }
    for (size_t i = 0; i < waiters->elements; i += 2)
        if (waiters->element[i]->type != HILOCK_REPLY_STRING) {
            hilock_reply_free(reply);
            return HILOCK_EPROTO;
        }
    size_t nfields = fields->elements / 2, nwaiters = waiters->elements / 2;
    /* Room for holders, readers and the writer, then waiters. */
    status_mem *m = hl_calloc(1, sizeof *m + (2 * nfields + nwaiters) *
                                                 sizeof m->owners[0]);
    if (m == NULL) {
        hilock_reply_free(reply);
        return HILOCK_ENOMEM;
    }
    m->reply = reply;
    hilock_lock_status *st = &m->pub;
    hilock_lock_owner *holders = m->owners;
    hilock_lock_owner *readers = holders + nfields;
    hilock_lock_owner *waiting = readers + nfields;
    st->kind = kind_label;
    st->subscribers = subscribers;
    st->kind_seen = seen != 0;
    st->holders = holders;
    st->waiters = waiting;
    if (rwlock)
        st->readers = readers;
    const char *suffix = HL_LAYOUT_RWLOCK_WRITE_SUFFIX;
    for (size_t i = 0; i < nfields; i++) {
        hilock_reply *k = fields->element[2 * i];
        const hilock_reply *v = fields->element[2 * i + 1];
        /* No owner id is "mode": read as another kind, a read-write
         * lock's hash shows its holders, not its mode as one. */
        if (reply_is(k, HL_LAYOUT_RWLOCK_MODE)) {
            if (rwlock)
                st->mode = v->str;
            continue;
        }
        hilock_lock_owner *h = &holders[st->holders_len++];
        h->owner = k->str;
        h->owner_len = k->len;
        if (!hl_reply_i64(v, &h->count)) {
            /* Not written by a lock ("5.5", or beyond 64 bits): keep the
             * holder, counted as no hold, rather than refuse to show
             * anything, or show the nearest number. */
            h->count = 0;
        }
        if (rwlock && ends_with(k, suffix)) {
            h->writer = true;
            /* The reply is ours: cut the suffix off in place, so that
             * the owner id is a string of its own. */
            h->owner_len -= strlen(suffix);
            k->str[h->owner_len] = '\0';
            if (st->writer == NULL)
                st->writer = h;
        } else if (rwlock) {
            readers[st->readers_len++] = *h;
        }
    }
    for (size_t i = 0; i < nwaiters; i++) {
        const hilock_reply *w = waiters->element[2 * i];
        hilock_lock_owner *o = &waiting[st->waiters_len++];
        o->owner = w->str;
        o->owner_len = w->len;
        o->expires = hl_reply_i64(waiters->element[2 * i + 1],
                                  &o->expires_in_ms);
        if (!o->expires)
            o->expires_in_ms = 0;
    }
    /* PTTL's -2 is no key; any other negative, no expiry. */
    st->delay_ms = delay == -2 ? 0 : delay < 0 ? -1 : delay;
    st->locked = st->holders_len > 0 && pttl != -2;
    st->ttl_ms = st->locked && pttl >= 0 ? pttl : -1;
    if (!st->locked) {
        st->holders_len = 0;
        st->readers_len = 0;
        st->writer = NULL;
    }
    *out = st;
    return HILOCK_OK;
}

int hl_run_release_into_cond(hilock_lock *lock, const hl_script_def *plain,
                             const hl_script_def *with_delay, int n,
                             const char **args, size_t *lens,
                             const hl_cond_entry *e, hl_request_fn *fn,
                             void *data)
{
    char delay[24], wt[24];
    int64_t delay_ms = hl_lock_delay_ms(lock);
    if (delay_ms > 0) {
        args[n] = delay;
        lens[n++] = hl_i64_dec(delay, delay_ms);
    }
    args[n] = e->id;
    lens[n++] = e->id_len;
    args[n] = wt;
    lens[n++] = hl_i64_dec(wt, e->waiter_timeout_ms);
    const char *given[] = {e->line, e->alive};
    size_t given_lens[] = {e->line_len, e->alive_len};
    return hl_run_def(lock, delay_ms > 0 ? with_delay : plain, 2, given,
                      given_lens, n, args, lens, fn, data);
}
