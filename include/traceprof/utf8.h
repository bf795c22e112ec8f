/*
 * utf8.h - well-formed UTF-8 (RFC 3629, as PostgreSQL checks it: no
 * overlong forms, no surrogates, nothing above U+10FFFF), one check for
 * every reader of untrusted names: the store, manifests and JSON, perf
 * maps, the GPU rings. Part of the dependency-free traceprof_hex objects.
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

#endif
