/* Writing RESP requests and decimal numbers without printf: on the
 * request path they were a quarter of the client's CPU time; and reading
 * a decimal number as strictly as Redis writes one. */
#ifndef HL_RESP_H
#define HL_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decimal digits of v into buf (at least 20 bytes; no NUL); returns the
 * length. */
size_t hl_u64_dec(char *buf, uint64_t v);
/* The same for a signed value (at least 21 bytes). */
size_t hl_i64_dec(char *buf, int64_t v);

/* The integer that s[0..len) spells the way Redis's INCR reads and
 * writes one: decimal digits, '-' before a negative, no leading zero, no
 * "-0", within 64 bits.  false, with *out untouched, for anything else:
 * a value some other program wrote is refused rather than read as the
 * nearest number. */
bool hl_i64_parse(const char *s, size_t len, int64_t *out);

/* Exact size of the RESP array of bulk strings for these arguments. */
size_t hl_resp_size(int argc, const size_t *lens);
/* Write it at p (hl_resp_size bytes); returns the end. */
char *hl_resp_write(char *p, int argc, const char *const *argv,
                    const size_t *lens);

#endif
