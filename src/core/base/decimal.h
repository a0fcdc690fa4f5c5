/* Strict reading of decimal numbers, as servers and URLs send them. */
#ifndef HL_DECIMAL_H
#define HL_DECIMAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* p[0..n) as a decimal of digits only, at most max: no sign, no space,
 * no trailing text, which strtol would each let through. */
bool hl_decimal_parse(const char *p, size_t n, uint64_t max, uint64_t *out);

#endif
