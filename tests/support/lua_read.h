/* A small, strict reader of the Lua hilock's scripts are written in
 * (Lua 5.1, as Redis runs it), for tests that check what a script does
 * (lua_keys.h).  It turns the text into a tree and refuses, with the
 * line, what it does not read rather than guess at it: long strings and
 * comments, method calls, anonymous and global functions, varargs in a
 * function, repeat and goto.  The scripts are our own: one it refuses is
 * rewritten, or the reader taught. */
#ifndef LUA_READ_H
#define LUA_READ_H

#include <stdbool.h>
#include <stddef.h>

typedef enum lua_kind {
    /* Expressions. */
    LX_NIL,
    LX_TRUE,
    LX_FALSE,
    LX_NUMBER, /* s: its text */
    LX_STRING, /* s: the text between the quotes */
    LX_VARARG,
    LX_NAME,  /* s: the name */
    LX_INDEX, /* kids: object, key; s "." for a.b (the key a string) */
    LX_CALL,  /* kids: callee, then the arguments */
    LX_BINOP, /* s: the operator; kids: left, right */
    LX_UNOP,  /* s: the operator ("not", "#", "-"); kids: the operand */
    LX_TABLE, /* kids: every key and value, in order */
    /* Statements. */
    LS_BLOCK,          /* kids: statements */
    LS_LOCAL,          /* kids: nnames names, then the values */
    LS_LOCAL_FUNCTION, /* s: name; kids: nnames parameters, then the body */
    LS_ASSIGN,         /* kids: nnames targets, then the values */
    LS_CALL,           /* kids: the call */
    LS_IF,             /* kids: condition, block, ...; then an else block */
    LS_WHILE,          /* kids: condition, block */
    LS_NUMERIC_FOR,    /* s: the name; kids: start, limit, [step], block */
    LS_GENERIC_FOR,    /* kids: nnames names, then the values, then block */
    LS_DO,             /* kids: block */
    LS_RETURN,         /* kids: values */
    LS_BREAK
} lua_kind;

typedef struct lua_node {
    lua_kind kind;
    int line;
    const char *s;
    size_t len;
    int nnames;
    struct lua_node **kids;
    int nkids;
} lua_node;

/* Owns every node of one reading. */
typedef struct lua_tree lua_tree;

/* The block text is, or NULL with why (the line first) in err.  Either
 * way *tree is set: free it with lua_tree_free. */
lua_node *lua_read(const char *text, lua_tree **tree, char *err,
                   size_t err_len);
void lua_tree_free(lua_tree *tree);

/* Whether n is of kind with the text s (a name, string or operator). */
bool lua_node_is(const lua_node *n, lua_kind kind, const char *s);

#endif
