/*
 * control_auth.c - see control_auth.h.
 */
#include "control_auth.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads the whole of f (closed here) into a new NUL-terminated string; NULL with err set. */
static char *read_all(FILE *f, const char *path, char *err, size_t errlen)
{
	size_t n = 0, cap = 4096;
	char *buf;

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

char *control_auth_read_file(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");

	if (!f) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return NULL;
	}
	return read_all(f, path, err, errlen);
}

/*
 * Whether the open token file fd may be trusted: a regular file that only
 * its owner can write and others cannot read (mode 600 or 640), that owner
 * being us or root. 0, or -EPERM with the
 * fix in err.
 */
static int check_token_file(int fd, const char *path, char *err, size_t errlen)
{
	struct stat st;
	uid_t me = geteuid();

	if (fstat(fd, &st) != 0) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return -EIO;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "token file %s is not a regular file", path);
		return -EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(err, errlen,
			 "token file %s is writable by %s (mode %04o, wanted 600 or 640): anyone "
			 "who can write it can replace the token; run chmod 600 %s",
			 path, st.st_mode & S_IWOTH ? "every user" : "its group",
			 (unsigned)(st.st_mode & 07777), path);
		return -EPERM;
	}
	if (st.st_mode & S_IROTH) {
		snprintf(err, errlen,
			 "token file %s is readable by every user (mode %04o, wanted 600 or 640): "
			 "anyone on the machine can use the token; run chmod 600 %s",
			 path, (unsigned)(st.st_mode & 07777), path);
		return -EPERM;
	}
	if (st.st_uid != me && st.st_uid != 0) {
		snprintf(err, errlen,
			 "token file %s is owned by uid %u, not by this process's user (uid %u) "
			 "or root: that user can replace the token; chown it to uid %u%s",
			 path, (unsigned)st.st_uid, (unsigned)me, (unsigned)me,
			 me ? " or root" : "");
		return -EPERM;
	}
	return 0;
}

char *control_auth_read_token(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY), rc;
	char *text, *s, *e;
	FILE *f;

	if (fd < 0) {
		rc = errno;
		snprintf(err, errlen, "cannot read token file %s: %s", path, strerror(rc));
		errno = rc;
		return NULL;
	}
	rc = check_token_file(fd, path, err, errlen);
	if (rc) {
		close(fd);
		errno = -rc;
		return NULL;
	}
	f = fdopen(fd, "rb");
	if (!f) {
		rc = errno;
		close(fd);
		snprintf(err, errlen, "cannot read token file %s: %s", path, strerror(rc));
		errno = rc;
		return NULL;
	}
	text = read_all(f, path, err, errlen);
	if (!text) {
		errno = EIO;
		return NULL;
	}
	s = text;
	while (*s == ' ' || *s == '\t')
		s++;
	e = s;
	while (*e && *e != '\n' && *e != '\r')
		e++;
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*e = 0;
	if (strlen(s) < CONTROL_AUTH_MIN_TOKEN || strlen(s) > CONTROL_AUTH_MAX_TOKEN) {
		snprintf(err, errlen,
			 "token file %s: the token on its first line has %zu characters, it needs "
			 "%u to %u (a short token can be guessed); write a new one, e.g. head -c "
			 "32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > %s",
			 path, strlen(s), CONTROL_AUTH_MIN_TOKEN, CONTROL_AUTH_MAX_TOKEN, path);
		free(text);
		errno = EINVAL;
		return NULL;
	}
	for (char *c = s; *c; c++)
		if ((unsigned char)*c < 0x21 || (unsigned char)*c > 0x7e) {
			snprintf(err, errlen,
				 "token file %s: the token must be printable ASCII "
				 "without blanks",
				 path);
			free(text);
			errno = EINVAL;
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

/* Makes dir (mode 0700) when missing; refuses one others could write into. 0 or -errno. */
static int token_dir(const char *dir, char *err, size_t errlen)
{
	struct stat st;
	uid_t me = geteuid();

	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		int rc = errno;

		snprintf(err, errlen,
			 "cannot make the directory %s for the control token: %s; set "
			 "control-token-generate to a file in a directory this user owns, or "
			 "give control-token-file",
			 dir, strerror(rc));
		return -rc;
	}
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s is not a directory (it would hold the control token)",
			 dir);
		return -ENOTDIR;
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) || (st.st_uid != me && st.st_uid != 0)) {
		snprintf(err, errlen,
			 "the directory %s of the control token is writable by others (mode %04o, "
			 "uid %u): make it mode 0700 and owned by uid %u, or choose another "
			 "control-token-generate",
			 dir, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)me);
		return -EPERM;
	}
	return 0;
}

/* Writes a new token into a temporary file next to path and links it into place. */
static char *new_token(const char *path, bool *created, char *err, size_t errlen)
{
	unsigned char raw[CONTROL_AUTH_GEN_BYTES];
	char hex[2 * CONTROL_AUTH_GEN_BYTES + 2], tmp[4200];
	size_t got = 0;
	int fd, rc;

	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, errlen, "cannot make a control token: getrandom: %s",
				 strerror(errno));
			return NULL;
		}
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	hex[2 * sizeof(raw)] = '\n';
	hex[2 * sizeof(raw) + 1] = 0;
	snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
	(void)unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "cannot write the control token to %s: %s", tmp,
			 strerror(errno));
		return NULL;
	}
	rc = fchmod(fd, 0600) == 0 && write(fd, hex, strlen(hex)) == (ssize_t)strlen(hex) &&
		     fsync(fd) == 0
		 ? 0
		 : errno;
	close(fd);
	if (!rc && link(tmp, path) != 0)
		rc = errno;
	(void)unlink(tmp);
	if (rc == EEXIST) /* another agent was first: use its token */
		return control_auth_read_token(path, err, errlen);
	if (rc) {
		snprintf(err, errlen, "cannot write the control token to %s: %s", path,
			 strerror(rc));
		return NULL;
	}
	*created = true;
	hex[2 * sizeof(raw)] = 0;
	return strdup(hex);
}

char *control_auth_make_token(const char *path, bool *created, char *err, size_t errlen)
{
	char *copy = strdup(path), *tok;
	int rc;

	*created = false;
	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	rc = token_dir(dirname(copy), err, errlen);
	free(copy);
	if (rc)
		return NULL;
	tok = control_auth_read_token(path, err, errlen);
	if (tok || errno != ENOENT)
		return tok; /* the one there, or why it cannot be used */
	tok = new_token(path, created, err, errlen);
	if (!tok && !err[0])
		snprintf(err, errlen, "out of memory");
	return tok;
}
