/*
 * hex.h - hexadecimal text forms of byte strings, shared by libtraceprof
 * (trace/span ids in the store) and the SDK (W3C traceparent).
 *
 * Built as its own small static library without dependencies, so the SDK can
 * link it without pulling in libpq; its symbols are hidden in the SDK's
 * shared library.
 */
#ifndef TRACEPROF_HEX_H
#define TRACEPROF_HEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Decodes exactly 2 * nbytes hex digits at text into out. Upper case digits
 * are accepted unless lower_only. Returns 0 or -EINVAL (out is then
 * partially written).
 */
int tp_hex_decode(const char *text, uint8_t *out, size_t nbytes, bool lower_only);
/* The value of one hex digit (either case), or -1. */
int tp_hex_digit(char c);
/* Writes 2 * nbytes lower case digits to out, without a terminating NUL. */
void tp_hex_encode(const uint8_t *in, size_t nbytes, char *out);
/* True when all nbytes bytes are zero. */
bool tp_hex_all_zero(const uint8_t *in, size_t nbytes);

#endif
