/* utf8.c - well-formed UTF-8 and names safe to show (include/traceprof/utf8.h). */
#include "traceprof/utf8.h"

#include <stdbool.h>
#include <string.h>

size_t tp_utf8_len(const unsigned char *s, size_t n)
{
	unsigned int c, cp, min;
	size_t len;

	if (n == 0)
		return 0;
	c = s[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, cp = c & 0x1f, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, cp = c & 0x0f, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, cp = c & 0x07, min = 0x10000;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3fu);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* The code point of the well-formed sequence of len bytes at s. */
static unsigned int code_point(const unsigned char *s, size_t len)
{
	static const unsigned char lead_mask[5] = {0, 0x7f, 0x1f, 0x0f, 0x07};
	unsigned int cp = s[0] & lead_mask[len];

	for (size_t i = 1; i < len; i++)
		cp = (cp << 6) | (s[i] & 0x3fu);
	return cp;
}

static bool unsafe_code_point(unsigned int cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069);
}

size_t tp_utf8_safe_len(const unsigned char *s, size_t n)
{
	size_t len = tp_utf8_len(s, n);

	return len && !unsafe_code_point(code_point(s, len)) ? len : 0;
}

size_t tp_utf8_sanitize(char *out, const char *in, size_t len)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0, replaced = 0;

	for (size_t i = 0; i < len;) {
		size_t u = tp_utf8_safe_len(s + i, len - i);

		if (u) {
			memmove(out + o, s + i, u);
			o += u;
			i += u;
			continue;
		}
		u = tp_utf8_len(s + i, len - i);
		out[o++] = '?';
		i += u ? u : 1;
		replaced++;
	}
	out[o] = '\0';
	return replaced;
}
