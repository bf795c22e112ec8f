/*
 * utf8.h - well-formed UTF-8 (RFC 3629, as PostgreSQL checks it: no
 * overlong forms, no surrogates, nothing above U+10FFFF), one check for
 * every reader of untrusted names: the store, manifests and JSON, perf
 * maps, the GPU rings. Part of the dependency-free traceprof_hex objects.
 *
 * Names that come from other processes (symbols, perf maps, Python code,
 * HTTP routes) are also made safe to show: tp_utf8_safe_len() tells the
 * characters a terminal or a bidirectional renderer would act on (C0
 * controls, DEL, C1 controls such as U+009B CSI, the bidirectional
 * overrides and isolates U+202A-U+202E and U+2066-U+2069) from the rest,
 * and tp_utf8_sanitize() replaces them, and bytes that are not UTF-8, with
 * '?': one byte for each, so the text never grows (it can be done in place
 * and stays within any length bound) and reads the same on every terminal.
 */
#ifndef TRACEPROF_UTF8_H
#define TRACEPROF_UTF8_H

#include <stddef.h>

/*
 * Bytes of the well-formed UTF-8 sequence at s (n bytes left): 1 for any
 * byte below 0x80 (NUL included), 2 to 4 for a multi-byte character, 0
 * when the bytes there are not one (or n is 0).
 */
size_t tp_utf8_len(const unsigned char *s, size_t n);
/*
 * tp_utf8_len() of the character at s when it is safe to show: 0 also for
 * a control character (U+0000-U+001F, U+007F-U+009F) or a bidirectional
 * override or isolate (U+202A-U+202E, U+2066-U+2069).
 */
size_t tp_utf8_safe_len(const unsigned char *s, size_t n);
/*
 * Copies in (len bytes) to out, each character that is not safe to show
 * and each byte that is not UTF-8 replaced by one '?', and NUL-terminates
 * it: out needs len + 1 bytes and may be in itself. Returns how many were
 * replaced.
 */
size_t tp_utf8_sanitize(char *out, const char *in, size_t len);

#endif
