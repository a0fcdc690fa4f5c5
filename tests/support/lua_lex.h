/* The tokens of the Lua our scripts are written in, for lua_read.c.  The
 * lexer refuses what the reader would have to guess at: long strings and
 * long comments, and characters that are no Lua token. */
#ifndef LUA_LEX_H
#define LUA_LEX_H

#include <stddef.h>

typedef enum lua_tok {
    LT_EOF,
    LT_NAME,
    LT_KEYWORD,
    LT_NUMBER,
    LT_STRING, /* s: the text between the quotes, escapes as written */
    LT_OP      /* punctuation: "(", "..", "==", ... */
} lua_tok;

typedef struct lua_token {
    lua_tok type;
    const char *s;
    size_t len;
    int line;
} lua_token;

typedef struct lua_lexer {
    const char *p;
    int line;
} lua_lexer;

void lua_lex_init(lua_lexer *lx, const char *text);

/* The next token into t: 0, or -1 with why (and the line) in err. */
int lua_lex(lua_lexer *lx, lua_token *t, char *err, size_t err_len);

/* Whether t is the keyword or operator word. */
int lua_tok_is(const lua_token *t, lua_tok type, const char *word);

#endif
