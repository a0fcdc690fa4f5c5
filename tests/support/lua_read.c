#include "support/lua_read.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/lua_lex.h"

/* Every allocation of a reading, linked so that one call frees them. */
typedef struct lua_mem {
    struct lua_mem *next;
    max_align_t data[];
} lua_mem;

struct lua_tree {
    lua_mem *mem;
};

typedef struct reader {
    lua_lexer lx;
    lua_token tok;   /* the current token */
    lua_token ahead; /* the one after it, once peeked at */
    bool has_ahead;
    lua_tree *tree;
    char *err;
    size_t err_len;
    jmp_buf fail;
} reader;

/* A growing list of nodes; its old arrays stay with the tree. */
typedef struct node_list {
    lua_node **items;
    int n, cap;
} node_list;

static void *tree_alloc(reader *r, size_t size)
{
    lua_mem *m = malloc(sizeof *m + size);
    if (m == NULL) {
        snprintf(r->err, r->err_len, "out of memory");
        longjmp(r->fail, 1);
    }
    m->next = r->tree->mem;
    r->tree->mem = m;
    memset(m->data, 0, size);
    return m->data;
}

static _Noreturn void refuse(reader *r, const char *fmt, ...)
{
    int n = snprintf(r->err, r->err_len, "line %d: ", r->tok.line);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < r->err_len)
        vsnprintf(r->err + n, r->err_len - (size_t)n, fmt, ap);
    va_end(ap);
    longjmp(r->fail, 1);
}

static void push(reader *r, node_list *l, lua_node *n)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        lua_node **items = tree_alloc(r, (size_t)cap * sizeof *items);
        if (l->n > 0)
            memcpy(items, l->items, (size_t)l->n * sizeof *items);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = n;
}

static lua_node *node(reader *r, lua_kind kind, int line)
{
    lua_node *n = tree_alloc(r, sizeof *n);
    n->kind = kind;
    n->line = line;
    return n;
}

static void set_kids(lua_node *n, const node_list *l)
{
    n->kids = l->items;
    n->nkids = l->n;
}

static void lex_into(reader *r, lua_token *t)
{
    if (lua_lex(&r->lx, t, r->err, r->err_len) != 0)
        longjmp(r->fail, 1);
}

static void next(reader *r)
{
    if (r->has_ahead) {
        r->tok = r->ahead;
        r->has_ahead = false;
    } else {
        lex_into(r, &r->tok);
    }
}

static const lua_token *peek(reader *r)
{
    if (!r->has_ahead) {
        lex_into(r, &r->ahead);
        r->has_ahead = true;
    }
    return &r->ahead;
}

static bool at_op(reader *r, const char *op)
{
    return lua_tok_is(&r->tok, LT_OP, op);
}

static bool at_keyword(reader *r, const char *word)
{
    return lua_tok_is(&r->tok, LT_KEYWORD, word);
}

static bool accept_op(reader *r, const char *op)
{
    if (!at_op(r, op))
        return false;
    next(r);
    return true;
}

static void expect_op(reader *r, const char *op)
{
    if (!accept_op(r, op))
        refuse(r, "'%s' expected, not '%.*s'", op, (int)r->tok.len, r->tok.s);
}

static void expect_keyword(reader *r, const char *word)
{
    if (!at_keyword(r, word))
        refuse(r, "'%s' expected, not '%.*s'", word, (int)r->tok.len,
               r->tok.s);
    next(r);
}

static lua_node *name_node(reader *r)
{
    if (r->tok.type != LT_NAME)
        refuse(r, "a name expected, not '%.*s'", (int)r->tok.len, r->tok.s);
    lua_node *n = node(r, LX_NAME, r->tok.line);
    n->s = r->tok.s;
    n->len = r->tok.len;
    next(r);
    return n;
}

static lua_node *expr(reader *r);
static lua_node *block(reader *r);

/* ---- expressions ------------------------------------------------------- */

static lua_node *table(reader *r)
{
    lua_node *t = node(r, LX_TABLE, r->tok.line);
    node_list kids = {0};
    expect_op(r, "{");
    while (!at_op(r, "}")) {
        if (accept_op(r, "[")) {
            push(r, &kids, expr(r));
            expect_op(r, "]");
            expect_op(r, "=");
        } else if (r->tok.type == LT_NAME && lua_tok_is(peek(r), LT_OP, "=")) {
            lua_node *key = name_node(r);
            key->kind = LX_STRING;
            push(r, &kids, key);
            next(r);
        }
        push(r, &kids, expr(r));
        if (!accept_op(r, ",") && !accept_op(r, ";"))
            break;
    }
    expect_op(r, "}");
    set_kids(t, &kids);
    return t;
}

static lua_node *call_args(reader *r, lua_node *callee)
{
    lua_node *c = node(r, LX_CALL, r->tok.line);
    node_list kids = {0};
    push(r, &kids, callee);
    if (r->tok.type == LT_STRING) {
        lua_node *s = node(r, LX_STRING, r->tok.line);
        s->s = r->tok.s;
        s->len = r->tok.len;
        push(r, &kids, s);
        next(r);
    } else if (at_op(r, "{")) {
        push(r, &kids, table(r));
    } else {
        expect_op(r, "(");
        if (!at_op(r, ")")) {
            do
                push(r, &kids, expr(r));
            while (accept_op(r, ","));
        }
        expect_op(r, ")");
    }
    set_kids(c, &kids);
    return c;
}

static lua_node *index_node(reader *r, lua_node *object, lua_node *key,
                            const char *how)
{
    lua_node *n = node(r, LX_INDEX, key->line);
    node_list kids = {0};
    push(r, &kids, object);
    push(r, &kids, key);
    set_kids(n, &kids);
    n->s = how;
    n->len = strlen(how);
    return n;
}

/* A name or a parenthesised expression, then its fields, indexes and
 * calls. */
static lua_node *suffixed(reader *r)
{
    lua_node *e;
    if (accept_op(r, "(")) {
        e = expr(r);
        expect_op(r, ")");
    } else {
        e = name_node(r);
    }
    for (;;) {
        if (accept_op(r, ".")) {
            lua_node *key = name_node(r);
            key->kind = LX_STRING;
            e = index_node(r, e, key, ".");
        } else if (accept_op(r, "[")) {
            lua_node *key = expr(r);
            expect_op(r, "]");
            e = index_node(r, e, key, "[");
        } else if (at_op(r, ":")) {
            refuse(r, "a method call");
        } else if (at_op(r, "(") || at_op(r, "{") ||
                   r->tok.type == LT_STRING) {
            e = call_args(r, e);
        } else {
            return e;
        }
    }
}

static lua_node *simple(reader *r)
{
    static const struct {
        const char *word;
        lua_kind kind;
    } words[] = {{"nil", LX_NIL}, {"true", LX_TRUE}, {"false", LX_FALSE}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (at_keyword(r, words[i].word)) {
            lua_node *n = node(r, words[i].kind, r->tok.line);
            next(r);
            return n;
        }
    if (r->tok.type == LT_NUMBER || r->tok.type == LT_STRING) {
        lua_node *n = node(r, r->tok.type == LT_NUMBER ? LX_NUMBER : LX_STRING,
                           r->tok.line);
        n->s = r->tok.s;
        n->len = r->tok.len;
        next(r);
        return n;
    }
    if (at_op(r, "...")) {
        lua_node *n = node(r, LX_VARARG, r->tok.line);
        next(r);
        return n;
    }
    if (at_op(r, "{"))
        return table(r);
    if (at_keyword(r, "function"))
        refuse(r, "an anonymous function");
    return suffixed(r);
}

/* Lua 5.1's binary operators with their left and right priorities (the
 * right one lower for the right-associative ".." and "^"). */
static const struct {
    const char *op;
    lua_tok type;
    int left, right;
} binary[] = {
    {"or", LT_KEYWORD, 1, 1}, {"and", LT_KEYWORD, 2, 2}, {"<", LT_OP, 3, 3},
    {">", LT_OP, 3, 3},       {"<=", LT_OP, 3, 3},       {">=", LT_OP, 3, 3},
    {"~=", LT_OP, 3, 3},      {"==", LT_OP, 3, 3},       {"..", LT_OP, 5, 4},
    {"+", LT_OP, 6, 6},       {"-", LT_OP, 6, 6},        {"*", LT_OP, 7, 7},
    {"/", LT_OP, 7, 7},       {"%", LT_OP, 7, 7},        {"^", LT_OP, 10, 9}};
#define UNARY_PRIORITY 8

static int binary_at(reader *r)
{
    for (int i = 0; i < (int)(sizeof binary / sizeof binary[0]); i++)
        if (lua_tok_is(&r->tok, binary[i].type, binary[i].op))
            return i;
    return -1;
}

static lua_node *subexpr(reader *r, int limit)
{
    lua_node *e;
    if (at_keyword(r, "not") || at_op(r, "#") || at_op(r, "-")) {
        e = node(r, LX_UNOP, r->tok.line);
        e->s = r->tok.s;
        e->len = r->tok.len;
        next(r);
        node_list kids = {0};
        push(r, &kids, subexpr(r, UNARY_PRIORITY));
        set_kids(e, &kids);
    } else {
        e = simple(r);
    }
    for (int op = binary_at(r); op >= 0 && binary[op].left > limit;
         op = binary_at(r)) {
        lua_node *b = node(r, LX_BINOP, r->tok.line);
        b->s = binary[op].op;
        b->len = strlen(b->s);
        next(r);
        node_list kids = {0};
        push(r, &kids, e);
        push(r, &kids, subexpr(r, binary[op].right));
        set_kids(b, &kids);
        e = b;
    }
    return e;
}

static lua_node *expr(reader *r)
{
    return subexpr(r, 0);
}

static void expr_list(reader *r, node_list *into)
{
    do
        push(r, into, expr(r));
    while (accept_op(r, ","));
}

/* ---- statements -------------------------------------------------------- */

static bool block_ends(reader *r)
{
    return r->tok.type == LT_EOF || at_keyword(r, "end") ||
           at_keyword(r, "else") || at_keyword(r, "elseif") ||
           at_keyword(r, "until");
}

static lua_node *if_statement(reader *r, int line)
{
    lua_node *s = node(r, LS_IF, line);
    node_list kids = {0};
    for (;;) {
        push(r, &kids, expr(r));
        expect_keyword(r, "then");
        push(r, &kids, block(r));
        if (!at_keyword(r, "elseif"))
            break;
        next(r);
    }
    if (at_keyword(r, "else")) {
        next(r);
        push(r, &kids, block(r));
    }
    expect_keyword(r, "end");
    set_kids(s, &kids);
    return s;
}

static lua_node *loop_body(reader *r, lua_node *s, node_list *kids)
{
    expect_keyword(r, "do");
    push(r, kids, block(r));
    expect_keyword(r, "end");
    set_kids(s, kids);
    return s;
}

static lua_node *for_statement(reader *r, int line)
{
    lua_node *first = name_node(r);
    node_list kids = {0};
    if (accept_op(r, "=")) {
        lua_node *s = node(r, LS_NUMERIC_FOR, line);
        s->s = first->s;
        s->len = first->len;
        expr_list(r, &kids);
        if (kids.n < 2 || kids.n > 3)
            refuse(r, "a numeric for with %d bounds", kids.n);
        return loop_body(r, s, &kids);
    }
    lua_node *s = node(r, LS_GENERIC_FOR, line);
    push(r, &kids, first);
    while (accept_op(r, ","))
        push(r, &kids, name_node(r));
    s->nnames = kids.n;
    expect_keyword(r, "in");
    expr_list(r, &kids);
    return loop_body(r, s, &kids);
}

static lua_node *local_function(reader *r, int line)
{
    lua_node *s = node(r, LS_LOCAL_FUNCTION, line);
    lua_node *name = name_node(r);
    s->s = name->s;
    s->len = name->len;
    node_list kids = {0};
    expect_op(r, "(");
    if (at_op(r, "..."))
        refuse(r, "a function with varargs");
    if (!at_op(r, ")")) {
        do
            push(r, &kids, name_node(r));
        while (accept_op(r, ","));
    }
    expect_op(r, ")");
    s->nnames = kids.n;
    push(r, &kids, block(r));
    expect_keyword(r, "end");
    set_kids(s, &kids);
    return s;
}

static lua_node *local_statement(reader *r, int line)
{
    if (at_keyword(r, "function")) {
        next(r);
        return local_function(r, line);
    }
    lua_node *s = node(r, LS_LOCAL, line);
    node_list kids = {0};
    do
        push(r, &kids, name_node(r));
    while (accept_op(r, ","));
    s->nnames = kids.n;
    if (accept_op(r, "="))
        expr_list(r, &kids);
    set_kids(s, &kids);
    return s;
}

/* A call, or an assignment to names and fields. */
static lua_node *expression_statement(reader *r, int line)
{
    node_list kids = {0};
    push(r, &kids, suffixed(r));
    if (!at_op(r, "=") && !at_op(r, ",")) {
        if (kids.items[0]->kind != LX_CALL)
            refuse(r, "a statement that is neither a call nor an "
                      "assignment");
        lua_node *s = node(r, LS_CALL, line);
        set_kids(s, &kids);
        return s;
    }
    while (accept_op(r, ","))
        push(r, &kids, suffixed(r));
    for (int i = 0; i < kids.n; i++)
        if (kids.items[i]->kind != LX_NAME && kids.items[i]->kind != LX_INDEX)
            refuse(r, "an assignment to something not a name or field");
    lua_node *s = node(r, LS_ASSIGN, line);
    s->nnames = kids.n;
    expect_op(r, "=");
    expr_list(r, &kids);
    set_kids(s, &kids);
    return s;
}

static lua_node *return_statement(reader *r, int line)
{
    lua_node *s = node(r, LS_RETURN, line);
    node_list kids = {0};
    if (!block_ends(r) && !at_op(r, ";"))
        expr_list(r, &kids);
    accept_op(r, ";");
    if (!block_ends(r))
        refuse(r, "a statement after return");
    set_kids(s, &kids);
    return s;
}

/* One statement, or NULL for an empty one. */
static lua_node *statement(reader *r)
{
    int line = r->tok.line;
    if (accept_op(r, ";"))
        return NULL;
    if (at_op(r, "::") || at_keyword(r, "goto") || at_keyword(r, "repeat"))
        refuse(r, "'%.*s', which this reader does not read", (int)r->tok.len,
               r->tok.s);
    if (at_keyword(r, "function"))
        refuse(r, "a global function");
    if (r->tok.type == LT_KEYWORD) {
        lua_token kw = r->tok;
        next(r);
        if (lua_tok_is(&kw, LT_KEYWORD, "if"))
            return if_statement(r, line);
        if (lua_tok_is(&kw, LT_KEYWORD, "for"))
            return for_statement(r, line);
        if (lua_tok_is(&kw, LT_KEYWORD, "local"))
            return local_statement(r, line);
        if (lua_tok_is(&kw, LT_KEYWORD, "return"))
            return return_statement(r, line);
        if (lua_tok_is(&kw, LT_KEYWORD, "break"))
            return node(r, LS_BREAK, line);
        node_list kids = {0};
        if (lua_tok_is(&kw, LT_KEYWORD, "while")) {
            push(r, &kids, expr(r));
            return loop_body(r, node(r, LS_WHILE, line), &kids);
        }
        if (lua_tok_is(&kw, LT_KEYWORD, "do")) {
            push(r, &kids, block(r));
            expect_keyword(r, "end");
            lua_node *s = node(r, LS_DO, line);
            set_kids(s, &kids);
            return s;
        }
        refuse(r, "a statement that starts with '%.*s'", (int)kw.len, kw.s);
    }
    return expression_statement(r, line);
}

static lua_node *block(reader *r)
{
    lua_node *b = node(r, LS_BLOCK, r->tok.line);
    node_list kids = {0};
    while (!block_ends(r)) {
        lua_node *s = statement(r);
        if (s != NULL)
            push(r, &kids, s);
    }
    set_kids(b, &kids);
    return b;
}

lua_node *lua_read(const char *text, lua_tree **tree, char *err,
                   size_t err_len)
{
    *tree = calloc(1, sizeof **tree);
    if (*tree == NULL) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    reader r = {.tree = *tree, .err = err, .err_len = err_len};
    lua_lex_init(&r.lx, text);
    if (setjmp(r.fail) != 0)
        return NULL;
    next(&r);
    lua_node *top = block(&r);
    if (r.tok.type != LT_EOF)
        refuse(&r, "'%.*s' where the script should end", (int)r.tok.len,
               r.tok.s);
    return top;
}

void lua_tree_free(lua_tree *tree)
{
    if (tree == NULL)
        return;
    while (tree->mem != NULL) {
        lua_mem *m = tree->mem;
        tree->mem = m->next;
        free(m);
    }
    free(tree);
}

bool lua_node_is(const lua_node *n, lua_kind kind, const char *s)
{
    return n->kind == kind && n->len == strlen(s) &&
           memcmp(n->s, s, n->len) == 0;
}
