/*
 * control_auth.c - see control_auth.h.
 */
#include "control_auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *control_auth_read_file(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	size_t n = 0, cap = 4096;
	char *buf;

	if (!f) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return NULL;
	}
	buf = malloc(cap);
	while (buf) {
		size_t got = fread(buf + n, 1, cap - n - 1, f);

		n += got;
		if (got == 0)
			break;
		if (n + 1 == cap) {
			char *nb = cap >= CONTROL_AUTH_MAX_FILE ? NULL : realloc(buf, cap * 2);

			if (!nb) {
				free(buf);
				buf = NULL;
				snprintf(err, errlen, "cannot read %s: larger than %u bytes", path,
					 CONTROL_AUTH_MAX_FILE);
				fclose(f);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
	}
	if (!buf) {
		snprintf(err, errlen, "cannot read %s: out of memory", path);
	} else if (ferror(f)) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		free(buf);
		buf = NULL;
	} else {
		buf[n] = 0;
	}
	fclose(f);
	return buf;
}

char *control_auth_read_token(const char *path, char *err, size_t errlen)
{
	char *text = control_auth_read_file(path, err, errlen), *s, *e;

	if (!text)
		return NULL;
	s = text;
	while (*s == ' ' || *s == '\t')
		s++;
	e = s;
	while (*e && *e != '\n' && *e != '\r')
		e++;
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*e = 0;
	if (!*s || strlen(s) > CONTROL_AUTH_MAX_TOKEN) {
		snprintf(err, errlen,
			 "token file %s: the first line must hold a token of 1 to %u "
			 "characters",
			 path, CONTROL_AUTH_MAX_TOKEN);
		free(text);
		return NULL;
	}
	for (char *c = s; *c; c++)
		if ((unsigned char)*c < 0x21 || (unsigned char)*c > 0x7e) {
			snprintf(err, errlen,
				 "token file %s: the token must be printable ASCII "
				 "without blanks",
				 path);
			free(text);
			return NULL;
		}
	memmove(text, s, strlen(s) + 1);
	return text;
}

bool control_auth_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	volatile unsigned char diff = alen != blen;
	size_t n = alen > blen ? alen : blen;

	for (size_t i = 0; i < n; i++) {
		unsigned char x = i < alen ? (unsigned char)a[i] : 0;
		unsigned char y = i < blen ? (unsigned char)b[i] : 0;

		diff |= x ^ y;
	}
	return diff == 0;
}
