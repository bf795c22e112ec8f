/*
 * jsonbuf.c - see jsonbuf.h.
 */
#include "jsonbuf.h"
#include "traceprof/utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool reserve(struct jsonbuf *b, size_t more)
{
	size_t cap;
	char *p;

	if (b->failed)
		return false;
	if (b->len + more + 1 <= b->cap)
		return true;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + more + 1)
		cap *= 2;
	p = realloc(b->s, cap);
	if (!p) {
		b->failed = true;
		return false;
	}
	b->s = p;
	b->cap = cap;
	return true;
}

void jsonbuf_printf(struct jsonbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void jsonbuf_str(struct jsonbuf *b, const char *s)
{
	size_t n;

	if (!s) {
		jsonbuf_printf(b, "null");
		return;
	}
	n = strlen(s);
	if (!reserve(b, 2 + 6 * n))
		return;
	b->s[b->len++] = '"';
	for (const unsigned char *p = (const unsigned char *)s, *end = p + n; p < end; p++) {
		size_t u;

		if (*p == '"' || *p == '\\') {
			b->s[b->len++] = '\\';
			b->s[b->len++] = (char)*p;
		} else if (*p < 0x20 || *p == 0x7f) {
			b->len += (size_t)snprintf(b->s + b->len, 7, "\\u%04x", *p);
		} else if (*p < 0x80) {
			b->s[b->len++] = (char)*p;
		} else if ((u = tp_utf8_len(p, (size_t)(end - p)))) {
			memcpy(b->s + b->len, p, u);
			b->len += u;
			p += u - 1;
		} else {
			memcpy(b->s + b->len, "\\ufffd", 6); /* not UTF-8: replaced */
			b->len += 6;
		}
	}
	b->s[b->len++] = '"';
	b->s[b->len] = '\0';
}

char *jsonbuf_take(struct jsonbuf *b)
{
	char *s = b->failed ? NULL : b->s;

	if (!s && !b->failed)
		s = strdup("");
	if (b->failed)
		free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
	b->failed = false;
	return s;
}

void jsonbuf_free(struct jsonbuf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
	b->failed = false;
}
