/*
 * hex.c - hexadecimal text forms of byte strings (see hex.h). No allocation,
 * no dependencies: linked into both libtraceprof and the SDK.
 */
#include <errno.h>

#include "traceprof/hex.h"

static int hexval(int c, bool lower_only)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (!lower_only && c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int tp_hex_digit(char c)
{
	return hexval((unsigned char)c, false);
}

int tp_hex_decode(const char *text, uint8_t *out, size_t nbytes, bool lower_only)
{
	for (size_t i = 0; i < nbytes; i++) {
		int hi = hexval((unsigned char)text[2 * i], lower_only);
		int lo = hi < 0 ? -1 : hexval((unsigned char)text[2 * i + 1], lower_only);

		if (lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

void tp_hex_encode(const uint8_t *in, size_t nbytes, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < nbytes; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
}

bool tp_hex_all_zero(const uint8_t *in, size_t nbytes)
{
	uint8_t any = 0;

	for (size_t i = 0; i < nbytes; i++)
		any |= in[i];
	return any == 0;
}
