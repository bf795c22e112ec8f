/*
 * jsonbuf.h - a growing text buffer for writing JSON (the spec column and
 * the status file). Errors are sticky: after a failed allocation every call
 * is a no-op and jsonbuf_take() returns NULL.
 */
#ifndef TRACEPROF_SPEC_JSONBUF_H
#define TRACEPROF_SPEC_JSONBUF_H

#include <stdbool.h>
#include <stddef.h>

struct jsonbuf {
	char *s;     /* the text, NUL-terminated */
	size_t len;  /* bytes used, without the NUL */
	size_t cap;  /* bytes allocated */
	bool failed; /* an allocation failed */
};

void jsonbuf_printf(struct jsonbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * s as a JSON string literal with quotes; NULL writes null. Always valid
 * JSON: control characters as \u00XX, a byte that is not part of valid
 * UTF-8 as U+FFFD.
 */
void jsonbuf_str(struct jsonbuf *b, const char *s);
/* The text (the caller frees it), or NULL after a failure; b is emptied. */
char *jsonbuf_take(struct jsonbuf *b);
void jsonbuf_free(struct jsonbuf *b);

#endif
