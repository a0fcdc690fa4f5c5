#include "support/lua_keys.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "support/lua_read.h"

/* What the uses of a parameter ask of what every call passes it: a key
 * itself, or a channel (a key, or a key with text appended). */
enum { ROLE_KEY = 1, ROLE_CHANNEL = 2 };

#define MAX_PARAMS 8
#define MAX_VARS 1024
#define MAX_FUNCTIONS 256

/* Where a command's keys are: none, its first argument, every argument,
 * its first argument as a channel, or PUBSUB NUMSUB's channels after the
 * subcommand. */
typedef enum command_keys {
    KEYS_NONE,
    KEY_FIRST,
    KEYS_ALL,
    CHANNEL_FIRST,
    PUBSUB_COUNT
} command_keys;

static const struct {
    const char *name;
    command_keys keys;
} commands[] = {{"time", KEYS_NONE},
                {"get", KEY_FIRST},
                {"set", KEY_FIRST},
                {"incr", KEY_FIRST},
                {"incrby", KEY_FIRST},
                {"decr", KEY_FIRST},
                {"decrby", KEY_FIRST},
                {"pexpire", KEY_FIRST},
                {"pttl", KEY_FIRST},
                {"type", KEY_FIRST},
                {"hget", KEY_FIRST},
                {"hset", KEY_FIRST},
                {"hdel", KEY_FIRST},
                {"hexists", KEY_FIRST},
                {"hincrby", KEY_FIRST},
                {"hgetall", KEY_FIRST},
                {"hkeys", KEY_FIRST},
                {"hlen", KEY_FIRST},
                {"sadd", KEY_FIRST},
                {"sismember", KEY_FIRST},
                {"lindex", KEY_FIRST},
                {"lpop", KEY_FIRST},
                {"rpush", KEY_FIRST},
                {"lrem", KEY_FIRST},
                {"lpos", KEY_FIRST},
                {"lrange", KEY_FIRST},
                {"zadd", KEY_FIRST},
                {"zrem", KEY_FIRST},
                {"zscore", KEY_FIRST},
                {"zcount", KEY_FIRST},
                {"zrange", KEY_FIRST},
                {"zrangebyscore", KEY_FIRST},
                {"zcard", KEY_FIRST},
                {"del", KEYS_ALL},
                {"exists", KEYS_ALL},
                {"publish", CHANNEL_FIRST},
                {"spublish", CHANNEL_FIRST},
                {"pubsub", PUBSUB_COUNT}};

/* The globals a script may read besides KEYS, ARGV and redis: Lua's own,
 * none of which names a key. */
static const char *const globals[] = {"ARGV",   "tonumber", "tostring",
                                      "type",   "ipairs",   "unpack",
                                      "string", "math"};

typedef struct function_info {
    int nparams;
    int roles[MAX_PARAMS];
    int keys_param; /* the parameter named KEYS, or -1 */
    long keys_read; /* the highest index read of it */
    bool done;      /* its body read: a call from inside it would recurse */
} function_info;

typedef enum binding_kind {
    B_VALUE,    /* anything but the below */
    B_KEY,      /* a local bound to a KEYS entry where declared */
    B_PARAM,    /* a parameter: what it must be, its uses say */
    B_FUNCTION, /* a local function */
    B_KEYS_LOOP, /* the variable of a loop from 1 to #KEYS */
    B_KEYS_PARAM /* a parameter named KEYS: every call passes a table of
                    keys, at least as many as the function reads */
} binding_kind;

typedef struct binding {
    const char *name;
    size_t len;
    int line;
    binding_kind kind;
    int role;      /* B_PARAM */
    bool assigned; /* after its declaration */
    function_info *fn; /* B_FUNCTION; B_KEYS_PARAM: the function it is of */
} binding;

typedef struct walker {
    const lua_keys_spec *spec;
    lua_keys_report *report;
    binding vars[MAX_VARS]; /* the names in scope, innermost last */
    int nvars;
    function_info fns[MAX_FUNCTIONS];
    int nfns;
    jmp_buf fail;
} walker;

typedef enum key_class {
    C_NONE,
    C_KEY,    /* a KEYS entry, or a local bound to one */
    C_PARAM,  /* a parameter: its callers decide */
    C_MADE,   /* a result of spec.maker */
    C_DERIVED /* a key or parameter with text appended: a channel */
} key_class;

typedef struct classified {
    key_class c;
    binding *param; /* C_PARAM, and C_DERIVED from one */
} classified;

static _Noreturn void refuse(walker *w, int line, const char *fmt, ...)
{
    char *err = w->report->error;
    size_t len = sizeof w->report->error;
    int n = snprintf(err, len, "line %d: ", line);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < len)
        vsnprintf(err + n, len - (size_t)n, fmt, ap);
    va_end(ap);
    longjmp(w->fail, 1);
}

/* A short text of e for messages. */
static const char *describe(const lua_node *e, char *buf, size_t len)
{
    char inner[96];
    switch (e->kind) {
    case LX_NAME:
    case LX_NUMBER:
        snprintf(buf, len, "%.*s", (int)e->len, e->s);
        break;
    case LX_STRING:
        snprintf(buf, len, "'%.*s'", (int)e->len, e->s);
        break;
    case LX_INDEX:
        snprintf(
            buf, len, "%s[%s]", describe(e->kids[0], inner, sizeof inner / 2),
            describe(e->kids[1], inner + sizeof inner / 2, sizeof inner / 2));
        break;
    case LX_CALL:
        snprintf(buf, len, "%s(...)",
                 describe(e->kids[0], inner, sizeof inner));
        break;
    case LX_BINOP:
        snprintf(buf, len, "%s %.*s ...",
                 describe(e->kids[0], inner, sizeof inner), (int)e->len, e->s);
        break;
    default:
        snprintf(buf, len, "an expression");
    }
    return buf;
}

static binding *lookup(walker *w, const char *name, size_t len)
{
    for (int i = w->nvars - 1; i >= 0; i--)
        if (w->vars[i].len == len && memcmp(w->vars[i].name, name, len) == 0)
            return &w->vars[i];
    return NULL;
}

static binding *lookup_node(walker *w, const lua_node *n)
{
    return n->kind == LX_NAME ? lookup(w, n->s, n->len) : NULL;
}

/* Whether n names the global name (not a local that hides it). */
static bool is_global(walker *w, const lua_node *n, const char *name)
{
    return lua_node_is(n, LX_NAME, name) && lookup_node(w, n) == NULL;
}

static binding *declare(walker *w, const char *name, size_t len, int line,
                        binding_kind kind)
{
    if (w->nvars == MAX_VARS)
        refuse(w, line, "more names in scope than this check keeps");
    binding *b = &w->vars[w->nvars++];
    *b = (binding){.name = name, .len = len, .line = line, .kind = kind};
    return b;
}

/* Drop the names declared since mark.  One that stands for a key and is
 * assigned again anywhere in its scope could name another key by then. */
static void leave_scope(walker *w, int mark)
{
    for (int i = w->nvars - 1; i >= mark; i--) {
        const binding *b = &w->vars[i];
        if (b->assigned && (b->kind == B_KEY || b->kind == B_KEYS_LOOP ||
                            b->kind == B_KEYS_PARAM ||
                            (b->kind == B_PARAM && b->role != 0)))
            refuse(w, b->line, "%.*s stands for a key and is assigned again",
                   (int)b->len, b->name);
    }
    w->nvars = mark;
}

/* The value of an integer constant: a number, or a sum or difference of
 * them (the line macros index KEYS[L + 1]). */
static bool const_int(const lua_node *e, long *v)
{
    if (e->kind == LX_NUMBER) {
        char *end;
        char text[32];
        if (e->len == 0 || e->len >= sizeof text)
            return false;
        memcpy(text, e->s, e->len);
        text[e->len] = '\0';
        *v = strtol(text, &end, 10);
        return *end == '\0';
    }
    long a, b;
    if (e->kind != LX_BINOP || !const_int(e->kids[0], &a) ||
        !const_int(e->kids[1], &b))
        return false;
    if (lua_node_is(e, LX_BINOP, "+"))
        *v = a + b;
    else if (lua_node_is(e, LX_BINOP, "-"))
        *v = a - b;
    else
        return false;
    return true;
}

/* KEYS[index], read anywhere in the script. */
static void keys_index(walker *w, const lua_node *index, int line)
{
    char text[96];
    long v;
    if (const_int(index, &v)) {
        if (w->spec->batch)
            refuse(w, line,
                   "KEYS[%ld] in a batch script, whose keys are one per "
                   "lock, as many as it is given",
                   v);
        if (v < 1 || v > w->spec->nkeys)
            refuse(w, line, "KEYS[%ld], beyond the %d keys the caller passes",
                   v, w->spec->nkeys);
        if (v <= 64)
            w->report->named |= UINT64_C(1) << (v - 1);
        return;
    }
    const binding *b = lookup_node(w, index);
    if (b != NULL && b->kind == B_KEYS_LOOP)
        return;
    refuse(w, line,
           "KEYS[%s]: an index neither constant nor the variable of a loop "
           "over #KEYS",
           describe(index, text, sizeof text));
}

/* Whether n names a parameter KEYS (B_KEYS_PARAM), which it returns. */
static binding *keys_param(walker *w, const lua_node *n)
{
    binding *b = lookup_node(w, n);
    return b != NULL && b->kind == B_KEYS_PARAM ? b : NULL;
}

/* KEYS[index] of a parameter KEYS: a constant index, which every call
 * must pass that many keys for (local_call). */
static void param_keys_index(walker *w, binding *param, const lua_node *index,
                             int line)
{
    char text[96];
    long v;
    if (!const_int(index, &v) || v < 1)
        refuse(w, line, "KEYS[%s] of a parameter KEYS: an index that is no "
               "constant from 1",
               describe(index, text, sizeof text));
    if (v > param->fn->keys_read)
        param->fn->keys_read = v;
}

static classified classify(walker *w, const lua_node *e)
{
    classified none = {C_NONE, NULL};
    const binding *fb;
    switch (e->kind) {
    case LX_INDEX:
        return is_global(w, e->kids[0], "KEYS") || keys_param(w, e->kids[0])
                   ? (classified){C_KEY, NULL}
                   : none;
    case LX_NAME: {
        binding *b = lookup_node(w, e);
        if (b != NULL && b->kind == B_KEY)
            return (classified){C_KEY, NULL};
        if (b != NULL && b->kind == B_PARAM)
            return (classified){C_PARAM, b};
        return none;
    }
    case LX_CALL:
        fb = lookup_node(w, e->kids[0]);
        if (w->spec->maker != NULL &&
            lua_node_is(e->kids[0], LX_NAME, w->spec->maker) && fb != NULL &&
            fb->kind == B_FUNCTION)
            return (classified){C_MADE, NULL};
        return none;
    case LX_BINOP:
        if (lua_node_is(e, LX_BINOP, "..")) {
            classified base = classify(w, e->kids[0]);
            if (base.c == C_KEY || base.c == C_PARAM || base.c == C_DERIVED)
                return (classified){C_DERIVED, base.param};
        }
        return none;
    default:
        return none;
    }
}

/* Whether e is a choice of two values, c and a or b. */
static bool is_choice(const lua_node *e)
{
    return lua_node_is(e, LX_BINOP, "or") &&
           lua_node_is(e->kids[0], LX_BINOP, "and");
}

/* e is passed where a key (ROLE_KEY) or a channel (ROLE_CHANNEL) goes;
 * where says where, for the message.  Of a choice, either value may be
 * passed. */
static void require(walker *w, const lua_node *e, int role, const char *where)
{
    if (is_choice(e)) {
        require(w, e->kids[0]->kids[1], role, where);
        require(w, e->kids[1], role, where);
        return;
    }
    char text[96];
    classified c = classify(w, e);
    switch (c.c) {
    case C_KEY:
        return;
    case C_PARAM:
        c.param->role |= role;
        return;
    case C_DERIVED:
        if (role == ROLE_CHANNEL) {
            if (c.param != NULL)
                c.param->role |= ROLE_CHANNEL;
            return;
        }
        break;
    case C_MADE:
        if (role == ROLE_KEY) {
            w->report->made++;
            return;
        }
        break;
    case C_NONE:
        break;
    }
    refuse(w, e->line, "the %s %s of %s is not one the caller passes in KEYS",
           role == ROLE_KEY ? "key" : "channel",
           describe(e, text, sizeof text), where);
}

static void visit(walker *w, const lua_node *e);

/* PUBSUB's subcommand: a literal NUMSUB or SHARDNUMSUB, or a choice of
 * them (c and 'shardnumsub' or 'numsub'). */
static void pubsub_subcommand(walker *w, const lua_node *e)
{
    if (e->kind == LX_STRING) {
        if ((e->len == 6 && strncasecmp(e->s, "numsub", 6) == 0) ||
            (e->len == 11 && strncasecmp(e->s, "shardnumsub", 11) == 0))
            return;
        refuse(w, e->line, "PUBSUB %.*s, which this check does not know",
               (int)e->len, e->s);
    }
    if (is_choice(e)) {
        pubsub_subcommand(w, e->kids[0]->kids[1]);
        pubsub_subcommand(w, e->kids[1]);
        return;
    }
    refuse(w, e->line, "a PUBSUB subcommand that is no literal");
}

static void redis_call(walker *w, const lua_node *call)
{
    w->report->calls++;
    if (call->nkids < 2 || call->kids[1]->kind != LX_STRING)
        refuse(w, call->line, "a command that is no literal string");
    const lua_node *cmd = call->kids[1];
    size_t i = 0, n = sizeof commands / sizeof commands[0];
    while (i < n && !(strlen(commands[i].name) == cmd->len &&
                      strncasecmp(commands[i].name, cmd->s, cmd->len) == 0))
        i++;
    if (i == n)
        refuse(w, call->line,
               "the command '%.*s', which this check does not know: teach "
               "it where the command's keys are",
               (int)cmd->len, cmd->s);
    char where[48];
    snprintf(where, sizeof where, "'%s'", commands[i].name);
    const lua_node *const *args = (const lua_node *const *)call->kids + 2;
    int nargs = call->nkids - 2;
    if (commands[i].keys == KEYS_NONE) {
        if (nargs > 0)
            refuse(w, call->line, "%s with arguments", where);
        return;
    }
    if (nargs < 1)
        refuse(w, call->line, "%s without its first argument", where);
    switch (commands[i].keys) {
    case KEY_FIRST:
        require(w, args[0], ROLE_KEY, where);
        break;
    case KEYS_ALL:
        for (int k = 0; k < nargs; k++)
            require(w, args[k], ROLE_KEY, where);
        break;
    case CHANNEL_FIRST:
        require(w, args[0], ROLE_CHANNEL, where);
        break;
    case PUBSUB_COUNT:
        pubsub_subcommand(w, args[0]);
        for (int k = 1; k < nargs; k++)
            require(w, args[k], ROLE_CHANNEL, where);
        break;
    case KEYS_NONE:
        break;
    }
}

/* A call of a local function: what it passes where the function's
 * parameters go on as keys or channels must be keys or channels. */
static void local_call(walker *w, const lua_node *call, const binding *f)
{
    if (!f->fn->done)
        refuse(w, call->line, "%.*s calls itself", (int)f->len, f->name);
    int k = f->fn->keys_param;
    if (k >= 0) {
        /* Its KEYS: a table of keys, listed, as many as it reads. */
        char where[96];
        snprintf(where, sizeof where, "the KEYS of %.*s()", (int)f->len,
                 f->name);
        const lua_node *t = k + 1 < call->nkids ? call->kids[k + 1] : NULL;
        if (t == NULL || t->kind != LX_TABLE)
            refuse(w, call->line, "%s: no table constructor", where);
        if (t->nkids < f->fn->keys_read)
            refuse(w, call->line, "%s: %d keys, where it reads KEYS[%ld]",
                   where, t->nkids, f->fn->keys_read);
        for (int i = 0; i < t->nkids; i++)
            require(w, t->kids[i], ROLE_KEY, where);
    }
    for (int p = 0; p < f->fn->nparams; p++) {
        int role = f->fn->roles[p];
        if (role == 0)
            continue;
        char where[96];
        snprintf(where, sizeof where, "parameter %d of %.*s()", p + 1,
                 (int)f->len, f->name);
        if (p + 1 >= call->nkids)
            refuse(w, call->line, "no argument for %s, a %s", where,
                   role & ROLE_KEY ? "key" : "channel");
        require(w, call->kids[p + 1],
                role & ROLE_KEY ? ROLE_KEY : ROLE_CHANNEL, where);
    }
}

/* The arguments first: what they read is refused before what they
 * are passed as. */
static void visit_call(walker *w, const lua_node *call)
{
    for (int i = 1; i < call->nkids; i++)
        visit(w, call->kids[i]);
    const lua_node *f = call->kids[0];
    const binding *b = lookup_node(w, f);
    if (f->kind == LX_INDEX && is_global(w, f->kids[0], "redis")) {
        if (!lua_node_is(f->kids[1], LX_STRING, "call") &&
            !lua_node_is(f->kids[1], LX_STRING, "pcall"))
            refuse(w, call->line, "redis.%.*s, which this check does not read",
                   (int)f->kids[1]->len, f->kids[1]->s);
        redis_call(w, call);
    } else if (b != NULL && b->kind == B_FUNCTION) {
        local_call(w, call, b);
    } else {
        visit(w, f);
    }
}

static void visit_name(walker *w, const lua_node *e)
{
    const binding *b = lookup_node(w, e);
    if (b != NULL) {
        if (b->kind == B_KEYS_PARAM)
            refuse(w, e->line, "KEYS read other than as KEYS[i]");
        if (b->kind == B_FUNCTION)
            refuse(w, e->line, "the function %.*s used as a value",
                   (int)e->len, e->s);
        return;
    }
    if (lua_node_is(e, LX_NAME, "KEYS"))
        refuse(w, e->line, "KEYS read other than as KEYS[i] or #KEYS");
    if (lua_node_is(e, LX_NAME, "redis"))
        refuse(w, e->line,
               "redis read other than as redis.call or "
               "redis.pcall");
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        if (lua_node_is(e, LX_NAME, globals[i]))
            return;
    refuse(w, e->line, "the global %.*s, which this check does not know",
           (int)e->len, e->s);
}

static void visit(walker *w, const lua_node *e)
{
    switch (e->kind) {
    case LX_NAME:
        visit_name(w, e);
        return;
    case LX_INDEX: {
        if (is_global(w, e->kids[0], "KEYS")) {
            keys_index(w, e->kids[1], e->line);
            return;
        }
        binding *param = keys_param(w, e->kids[0]);
        if (param != NULL) {
            param_keys_index(w, param, e->kids[1], e->line);
            return;
        }
        break;
    }
    case LX_UNOP:
        if (lua_node_is(e, LX_UNOP, "#") && is_global(w, e->kids[0], "KEYS"))
            return;
        break;
    case LX_CALL:
        visit_call(w, e);
        return;
    default:
        break;
    }
    for (int i = 0; i < e->nkids; i++)
        visit(w, e->kids[i]);
}

static void walk_block(walker *w, const lua_node *block);

static void assign_target(walker *w, const lua_node *t)
{
    if (t->kind == LX_INDEX) {
        if (is_global(w, t->kids[0], "KEYS") || keys_param(w, t->kids[0]) ||
            is_global(w, t->kids[0], "ARGV"))
            refuse(w, t->line, "an assignment into %.*s", (int)t->kids[0]->len,
                   t->kids[0]->s);
        visit(w, t);
        return;
    }
    binding *b = lookup_node(w, t);
    if (b == NULL)
        refuse(w, t->line, "an assignment to the global %.*s", (int)t->len,
               t->s);
    if (b->kind == B_FUNCTION)
        refuse(w, t->line, "an assignment to the function %.*s", (int)t->len,
               t->s);
    b->assigned = true;
}

static void local_function(walker *w, const lua_node *s)
{
    if (w->nfns == MAX_FUNCTIONS || s->nnames > MAX_PARAMS)
        refuse(w, s->line,
               "more functions or parameters than this check "
               "keeps");
    function_info *fn = &w->fns[w->nfns++];
    *fn = (function_info){.nparams = s->nnames, .keys_param = -1};
    declare(w, s->s, s->len, s->line, B_FUNCTION)->fn = fn;
    int mark = w->nvars;
    for (int i = 0; i < s->nnames; i++) {
        const lua_node *p = s->kids[i];
        bool keys = lua_node_is(p, LX_NAME, "KEYS");
        if (keys && fn->keys_param >= 0)
            refuse(w, p->line, "two parameters named KEYS");
        if (keys)
            fn->keys_param = i;
        declare(w, p->s, p->len, p->line, keys ? B_KEYS_PARAM : B_PARAM)
            ->fn = fn;
    }
    walk_block(w, s->kids[s->nnames]);
    for (int i = 0; i < s->nnames; i++)
        fn->roles[i] = w->vars[mark + i].role;
    leave_scope(w, mark);
    fn->done = true;
}

static void numeric_for(walker *w, const lua_node *s)
{
    int nbounds = s->nkids - 1;
    for (int i = 0; i < nbounds; i++)
        visit(w, s->kids[i]);
    bool over_keys = nbounds == 2 && lua_node_is(s->kids[0], LX_NUMBER, "1") &&
                     lua_node_is(s->kids[1], LX_UNOP, "#") &&
                     is_global(w, s->kids[1]->kids[0], "KEYS");
    int mark = w->nvars;
    declare(w, s->s, s->len, s->line, over_keys ? B_KEYS_LOOP : B_VALUE);
    walk_block(w, s->kids[nbounds]);
    leave_scope(w, mark);
}

static void generic_for(walker *w, const lua_node *s)
{
    for (int i = s->nnames; i < s->nkids - 1; i++)
        visit(w, s->kids[i]);
    int mark = w->nvars;
    for (int i = 0; i < s->nnames; i++)
        declare(w, s->kids[i]->s, s->kids[i]->len, s->kids[i]->line, B_VALUE);
    walk_block(w, s->kids[s->nkids - 1]);
    leave_scope(w, mark);
}

static void walk_statement(walker *w, const lua_node *s)
{
    switch (s->kind) {
    case LS_LOCAL:
        for (int i = s->nnames; i < s->nkids; i++)
            visit(w, s->kids[i]);
        for (int i = 0; i < s->nnames; i++) {
            int v = s->nnames + i;
            bool key = v < s->nkids && classify(w, s->kids[v]).c == C_KEY;
            declare(w, s->kids[i]->s, s->kids[i]->len, s->kids[i]->line,
                    key ? B_KEY : B_VALUE);
        }
        return;
    case LS_LOCAL_FUNCTION:
        local_function(w, s);
        return;
    case LS_ASSIGN:
        for (int i = s->nnames; i < s->nkids; i++)
            visit(w, s->kids[i]);
        for (int i = 0; i < s->nnames; i++)
            assign_target(w, s->kids[i]);
        return;
    case LS_IF:
        for (int i = 0; i + 1 < s->nkids; i += 2) {
            visit(w, s->kids[i]);
            walk_block(w, s->kids[i + 1]);
        }
        if (s->nkids % 2 == 1)
            walk_block(w, s->kids[s->nkids - 1]);
        return;
    case LS_WHILE:
        visit(w, s->kids[0]);
        walk_block(w, s->kids[1]);
        return;
    case LS_NUMERIC_FOR:
        numeric_for(w, s);
        return;
    case LS_GENERIC_FOR:
        generic_for(w, s);
        return;
    case LS_DO:
        walk_block(w, s->kids[0]);
        return;
    case LS_CALL:
    case LS_RETURN:
        for (int i = 0; i < s->nkids; i++)
            visit(w, s->kids[i]);
        return;
    case LS_BREAK:
        return;
    default:
        refuse(w, s->line, "a statement this check does not read");
    }
}

static void walk_block(walker *w, const lua_node *block)
{
    int mark = w->nvars;
    for (int i = 0; i < block->nkids; i++)
        walk_statement(w, block->kids[i]);
    leave_scope(w, mark);
}

int lua_keys_check(const char *text, const lua_keys_spec *spec,
                   lua_keys_report *report)
{
    memset(report, 0, sizeof *report);
    lua_tree *tree = NULL;
    const lua_node *top =
        lua_read(text, &tree, report->error, sizeof report->error);
    walker *w = top != NULL ? calloc(1, sizeof *w) : NULL;
    int rc = -1;
    if (w != NULL) {
        w->spec = spec;
        w->report = report;
        if (setjmp(w->fail) == 0) {
            walk_block(w, top);
            rc = 0;
        }
    } else if (top != NULL) {
        snprintf(report->error, sizeof report->error, "out of memory");
    }
    free(w);
    lua_tree_free(tree);
    return rc;
}
