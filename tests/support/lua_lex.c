#include "support/lua_lex.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *const keywords[] = {
    "and",      "break",  "do",   "else", "elseif", "end",  "false", "for",
    "function", "goto",   "if",   "in",   "local",  "nil",  "not",   "or",
    "repeat",   "return", "then", "true", "until",  "while"};

/* Longest first, so that ".." is not read as two ".". */
static const char *const operators[] = {
    "...", "==", "~=", "<=", ">=", "..", "::", "+", "-",
    "*",   "/",  "%",  "^",  "#",  "<",  ">",  "=", "(",
    ")",   "{",  "}",  "[",  "]",  ";",  ":",  ",", "."};

void lua_lex_init(lua_lexer *lx, const char *text)
{
    lx->p = text;
    lx->line = 1;
}

int lua_tok_is(const lua_token *t, lua_tok type, const char *word)
{
    return t->type == type && t->len == strlen(word) &&
           memcmp(t->s, word, t->len) == 0;
}

static int refuse(lua_lexer *lx, char *err, size_t err_len, const char *why)
{
    snprintf(err, err_len, "line %d: %s", lx->line, why);
    return -1;
}

/* Whitespace and line comments; a long comment is refused. */
static int skip_space(lua_lexer *lx, char *err, size_t err_len)
{
    for (;;) {
        char c = *lx->p;
        if (c == '\n') {
            lx->line++;
            lx->p++;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            lx->p++;
        } else if (c == '-' && lx->p[1] == '-') {
            if (lx->p[2] == '[' && (lx->p[3] == '[' || lx->p[3] == '='))
                return refuse(lx, err, err_len, "a long comment");
            while (*lx->p != '\0' && *lx->p != '\n')
                lx->p++;
        } else {
            return 0;
        }
    }
}

static int read_string(lua_lexer *lx, lua_token *t, char *err, size_t err_len)
{
    char quote = *lx->p++;
    t->type = LT_STRING;
    t->s = lx->p;
    while (*lx->p != quote) {
        if (*lx->p == '\0' || *lx->p == '\n')
            return refuse(lx, err, err_len, "a string that does not end");
        /* An escape's second character never ends the string. */
        if (*lx->p == '\\' && lx->p[1] != '\0')
            lx->p++;
        lx->p++;
    }
    t->len = (size_t)(lx->p - t->s);
    lx->p++;
    return 0;
}

/* Digits, letters (hex digits, an exponent's e), points, and the sign
 * right after an exponent's e: what Lua's own lexer takes in. */
static void read_number(lua_lexer *lx, lua_token *t)
{
    t->type = LT_NUMBER;
    t->s = lx->p;
    while (isalnum((unsigned char)*lx->p) || *lx->p == '.' ||
           ((*lx->p == '+' || *lx->p == '-') &&
            (lx->p[-1] == 'e' || lx->p[-1] == 'E')))
        lx->p++;
    t->len = (size_t)(lx->p - t->s);
}

static void read_name(lua_lexer *lx, lua_token *t)
{
    t->s = lx->p;
    while (isalnum((unsigned char)*lx->p) || *lx->p == '_')
        lx->p++;
    t->len = (size_t)(lx->p - t->s);
    t->type = LT_NAME;
    for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
        if (lua_tok_is(t, LT_NAME, keywords[i]))
            t->type = LT_KEYWORD;
}

int lua_lex(lua_lexer *lx, lua_token *t, char *err, size_t err_len)
{
    if (skip_space(lx, err, err_len) != 0)
        return -1;
    t->line = lx->line;
    char c = *lx->p;
    if (c == '\0') {
        t->type = LT_EOF;
        t->s = lx->p;
        t->len = 0;
        return 0;
    }
    if (c == '\'' || c == '"')
        return read_string(lx, t, err, err_len);
    if (c == '[' && (lx->p[1] == '[' || lx->p[1] == '='))
        return refuse(lx, err, err_len, "a long string");
    if (isdigit((unsigned char)c) ||
        (c == '.' && isdigit((unsigned char)lx->p[1]))) {
        read_number(lx, t);
        return 0;
    }
    if (isalpha((unsigned char)c) || c == '_') {
        read_name(lx, t);
        return 0;
    }
    for (size_t i = 0; i < sizeof operators / sizeof operators[0]; i++) {
        size_t n = strlen(operators[i]);
        if (strncmp(lx->p, operators[i], n) == 0) {
            t->type = LT_OP;
            t->s = lx->p;
            t->len = n;
            lx->p += n;
            return 0;
        }
    }
    return refuse(lx, err, err_len, "a character that starts no token");
}
