#include "core/transport/script.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "core/base/alloc.h"
#include "hilock/error.h"
#include "core/base/error_detail.h"
#include "core/transport/pubsub.h"
#include "core/transport/reply.h"
#include "core/transport/resp.h"

static void script_setup(hl_script *s, const char *body)
{
    static atomic_int next_index;
    unsigned char md[SHA_DIGEST_LENGTH];
    int i = atomic_load(&next_index);
    while (i < HL_SHA_SCRIPTS &&
           !atomic_compare_exchange_weak(&next_index, &i, i + 1))
        ;
    s->index = i < HL_SHA_SCRIPTS ? i : -1;
    s->body = body;
    s->len = strlen(body);
    SHA1((const unsigned char *)body, s->len, md);
    for (int k = 0; k < SHA_DIGEST_LENGTH; k++)
        snprintf(s->sha1 + 2 * k, 3, "%02x", md[k]);
    s->sharded = NULL;
    atomic_init(&s->shared[0], NULL);
    atomic_init(&s->shared[1], NULL);
    s->publishes = false;
}

#define PUBLISH_WORD "'publish'"
#define PUBSUB_WORD "'pubsub'"

/* body with each 'publish' as 'spublish'; NULL when memory runs out.
 * Twins live as long as the process, like the static scripts they copy,
 * so they come from the C library rather than the client's allocator
 * table, whose blocks all go back when the last client does. */
static char *sharded_body(const char *body)
{
    size_t n = 0;
    for (const char *p = strstr(body, PUBLISH_WORD); p;
         p = strstr(p + 1, PUBLISH_WORD))
        n++;
    char *out = malloc(strlen(body) + n + 1);
    if (out == NULL)
        return NULL;
    char *w = out;
    const char *r = body;
    for (const char *p = strstr(r, PUBLISH_WORD); p;
         p = strstr(r, PUBLISH_WORD)) {
        memcpy(w, r, (size_t)(p - r));
        w += p - r;
        memcpy(w, "'s", 2);
        w += 2;
        r = p + 1;
    }
    strcpy(w, r);
    return out;
}

/* ---- twins for the channels shared with Redisson ----------------------- */

/* What a shared twin puts in front of the body: hl_own tells hilock's
 * own channels (HL_OWN_CHANNEL_PREFIX) from the shared ones,
 * hl_publish(call, ch, msg) publishes as the twin's mode says, and
 * hl_listeners(call, what, ch) counts a channel's subscribers, "many" on
 * a shared one (see hl_script_run). */
#define SHARED_PROLOGUE_HEAD                                                \
    "local HL_OWN = '" HL_OWN_CHANNEL_PREFIX "'\n"                          \
    "local function hl_own(ch)\n"                                           \
    "  return string.sub(ch, 1, #HL_OWN) == HL_OWN\n"                       \
    "end\n"                                                                 \
    "local function hl_listeners(call, what, ch)\n"                         \
    "  if hl_own(ch) then return call('pubsub', what, ch) end\n"            \
    "  return {ch, 1000000000}\n"                                           \
    "end\n"

static const char *const shared_prologue[2] = {
    SHARED_PROLOGUE_HEAD
    "local function hl_publish(call, ch, msg)\n"
    "  if hl_own(ch) then return call('spublish', ch, msg) end\n"
    "  return call('publish', ch, msg)\n"
    "end\n",
    /* A refusal (pcall's error table) of either is the answer. */
    SHARED_PROLOGUE_HEAD
    "local function hl_publish(call, ch, msg)\n"
    "  local n = call('spublish', ch, msg)\n"
    "  if hl_own(ch) or type(n) ~= 'number' then return n end\n"
    "  local p = call('publish', ch, msg)\n"
    "  if type(p) ~= 'number' then return p end\n"
    "  return n + p\n"
    "end\n"};

/* The calls a shared twin routes through the prologue's functions. */
static const struct {
    const char *from;
    const char *to;
} shared_calls[] = {
    {"redis.call('publish',", "hl_publish(redis.call,"},
    {"redis.pcall('publish',", "hl_publish(redis.pcall,"},
    {"redis.call('pubsub',", "hl_listeners(redis.call,"},
    {"redis.pcall('pubsub',", "hl_listeners(redis.pcall,"},
};

/* body with its calls rewritten into out (when not NULL); returns the
 * length. */
static size_t rewrite_calls(const char *body, char *out)
{
    size_t n = 0;
    size_t count = sizeof shared_calls / sizeof shared_calls[0];
    for (const char *r = body; *r != '\0';) {
        size_t k = 0;
        while (k < count && strncmp(r, shared_calls[k].from,
                                    strlen(shared_calls[k].from)) != 0)
            k++;
        if (k == count) {
            if (out)
                out[n] = *r;
            n++;
            r++;
            continue;
        }
        size_t len = strlen(shared_calls[k].to);
        if (out)
            memcpy(out + n, shared_calls[k].to, len);
        n += len;
        r += strlen(shared_calls[k].from);
    }
    return n;
}

/* The shared twin's body for mode (0 plain, 1 both), or NULL when memory
 * runs out or a 'publish' of the body is in no form the rewrite knows,
 * which would then publish the wrong way. */
static char *shared_body(const char *body, int mode)
{
    size_t head = strlen(shared_prologue[mode]);
    size_t n = rewrite_calls(body, NULL);
    char *out = malloc(head + n + 1);
    if (out == NULL)
        return NULL;
    memcpy(out, shared_prologue[mode], head);
    rewrite_calls(body, out + head);
    out[head + n] = '\0';
    if (strstr(out + head, PUBLISH_WORD) != NULL ||
        strstr(out + head, PUBSUB_WORD) != NULL) {
        free(out);
        return NULL;
    }
    return out;
}

static pthread_mutex_t twins_lock = PTHREAD_MUTEX_INITIALIZER;

/* The shared twin of s for mode, made once for the process. */
static const hl_script *shared_twin(const hl_script *s, int mode)
{
    /* Every hl_script is a caller's writable object, const only here. */
    hl_script *w = (hl_script *)s;
    hl_script *twin =
        atomic_load_explicit(&w->shared[mode], memory_order_acquire);
    if (twin != NULL)
        return twin;
    pthread_mutex_lock(&twins_lock);
    twin = atomic_load_explicit(&w->shared[mode], memory_order_relaxed);
    if (twin == NULL) {
        char *body = shared_body(s->body, mode);
        twin = body ? malloc(sizeof *twin) : NULL;
        if (twin != NULL) {
            script_setup(twin, body);
            atomic_store_explicit(&w->shared[mode], twin,
                                  memory_order_release);
        } else {
            free(body);
        }
    }
    pthread_mutex_unlock(&twins_lock);
    return twin;
}

const hl_script *hl_script_form(const hl_script *s, hl_publish how)
{
    if (!s->publishes || how == HL_PUBLISH_PLAIN)
        return s;
    if (how == HL_PUBLISH_SHARDED)
        return s->sharded;
    return shared_twin(s, how == HL_PUBLISH_SHARED_BOTH);
}

/* Whether some word of body ('publish', 'pubsub') is called in no form
 * of shared_calls: that call would go out as written in a shared twin. */
static bool word_unknown(const char *body, const char *word)
{
    size_t wlen = strlen(word);
    for (const char *p = strstr(body, word); p; p = strstr(p + 1, word)) {
        bool known = false;
        for (size_t k = 0; k < sizeof shared_calls / sizeof *shared_calls;
             k++) {
            const char *from = shared_calls[k].from;
            size_t flen = strlen(from);
            if (flen < wlen + 1 ||
                strncmp(from + flen - wlen - 1, word, wlen) != 0)
                continue;
            size_t lead = flen - wlen - 1;
            if ((size_t)(p - body) >= lead &&
                strncmp(p - lead, from, flen) == 0)
                known = true;
        }
        if (!known)
            return true;
    }
    return false;
}

void hl_script_init(hl_script *s, const char *body)
{
    script_setup(s, body);
    if (strstr(body, PUBLISH_WORD) == NULL)
        return;
    s->publishes = true;
    /* A count of subscribers left as written would count a shared
     * channel's plain listeners on this node alone, and a release would
     * stay quiet for want of listeners the node cannot see. */
    s->rewrite_unknown = word_unknown(body, PUBLISH_WORD) ||
                         word_unknown(body, PUBSUB_WORD);
    char *twin_body = sharded_body(body);
    hl_script *twin = malloc(sizeof *twin);
    if (twin_body == NULL || twin == NULL) {
        free(twin_body);
        free(twin);
        return;
    }
    script_setup(twin, twin_body);
    s->sharded = twin;
}

/* What a retry needs: the arguments, kept until the first reply. */
typedef struct script_call {
    hl_conn *conn;
    const hl_script *script;
    hl_request_fn *fn;
    void *data;
    int argc; /* "EVALSHA", sha, nkeys, then the caller's arguments */
    const char **argv;
    size_t *lens;
    char nkeys[24];
    _Alignas(sizeof(void *)) char storage[];
} script_call;

static void script_call_free(script_call *c) { hl_free(c); }

static void script_complete(script_call *c, int status, hilock_reply *reply)
{
    if (c->fn)
        c->fn(c->data, status, reply);
    else
        hilock_reply_free(reply);
    script_call_free(c);
}

static int script_send(script_call *c, hl_request_fn *on_reply, bool sha)
{
    char *cmd;
    size_t len;
    int rc = hl_format_command(&cmd, &len, c->argc, c->argv, c->lens);
    if (rc != 0)
        return rc;
    if (sha)
        return hl_conn_script_take(c->conn, c->script, cmd, len, on_reply,
                                   c);
    return hl_conn_command_take(c->conn, cmd, len, on_reply, c);
}

static void on_eval_reply(void *data, int status, hilock_reply *reply)
{
    script_complete(data, status, reply);
}

static void on_evalsha_reply(void *data, int status, hilock_reply *reply)
{
    script_call *c = data;
    if (status == HILOCK_EREDIS && hl_reply_is_error_prefix(reply, "NOSCRIPT")) {
        hilock_reply_free(reply);
        /* Flushed under us: every script must be loaded again. */
        hl_conn_forget_scripts(c->conn);
        c->argv[0] = "EVAL";
        c->lens[0] = 4;
        c->argv[1] = c->script->body;
        c->lens[1] = c->script->len;
        int rc = script_send(c, on_eval_reply, false);
        if (rc == 0)
            return;
        hl_set_detail("could not queue the script again after NOSCRIPT");
        script_complete(c, rc, NULL);
        return;
    }
    script_complete(c, status, reply);
}

int hl_script_run(hl_conn *conn, const hl_script *s, int nkeys, int argc,
                  const char *const *argv, const size_t *argvlen,
                  hl_request_fn *fn, void *data)
{
    hl_publish how = hl_conn_publish(conn);
    const hl_script *form = hl_script_form(s, how);
    if (form == NULL && s->rewrite_unknown && how != HL_PUBLISH_SHARDED) {
        hl_set_detail("a script of the library publishes or counts "
                      "subscribers in a form the rewrite for channels "
                      "shared with Redisson (redisson_pubsub) does not "
                      "know: it was not run");
        return HILOCK_EUNSUPPORTED;
    }
    if (form == NULL) {
        hl_set_detail("no memory for the script's cluster form");
        return HILOCK_ENOMEM;
    }
    s = form;
    size_t bytes = 0;
    for (int i = 0; i < argc; i++)
        bytes += argvlen[i];
    int total = argc + 3;
    size_t head = sizeof(script_call);
    size_t vec = (size_t)total * (sizeof(char *) + sizeof(size_t));
    script_call *c = hl_malloc(head + vec + bytes);
    if (c == NULL)
        return HILOCK_ENOMEM;
    c->conn = conn;
    c->script = s;
    c->fn = fn;
    c->data = data;
    c->argc = total;
    c->argv = (const char **)(void *)c->storage;
    c->lens = (size_t *)(void *)(c->storage + (size_t)total * sizeof(char *));
    char *p = c->storage + vec;
    size_t nkeys_len = hl_u64_dec(c->nkeys, (uint64_t)(nkeys > 0 ? nkeys
                                                                   : 0));
    /* A script without a slot in the connections' loaded sets goes as
     * EVAL every time: more bytes, but in order and never NOSCRIPT. */
    bool sha = s->index >= 0;
    c->argv[0] = sha ? "EVALSHA" : "EVAL";
    c->lens[0] = sha ? 7 : 4;
    c->argv[1] = sha ? s->sha1 : s->body;
    c->lens[1] = sha ? 40 : s->len;
    c->argv[2] = c->nkeys;
    c->lens[2] = nkeys_len;
    for (int i = 0; i < argc; i++) {
        memcpy(p, argv[i], argvlen[i]);
        c->argv[3 + i] = p;
        c->lens[3 + i] = argvlen[i];
        p += argvlen[i];
    }
    int rc = sha ? script_send(c, on_evalsha_reply, true)
                 : script_send(c, on_eval_reply, false);
    if (rc != 0)
        script_call_free(c);
    return rc;
}
