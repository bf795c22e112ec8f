/*
 * procmaps.c - parse /proc/<pid>/maps into a sorted array of executable
 * mappings.
 *
 * A line reads "start-end perms offset major:minor inode   path"; the path
 * may contain spaces and ends the line. The file is read whole (a process
 * has a few hundred lines, tens of kilobytes) and parsed in two passes: one
 * to size the arrays, one to fill them, so the result is three allocations.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "procmaps.h"

#define DELETED_SUFFIX " (deleted)"

static int read_whole(const char *path, char **out, size_t *out_len)
{
	size_t cap = 16384, len = 0;
	char *buf = malloc(cap);
	int fd;

	if (!buf)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;

		free(buf);
		return err == ENOENT ? -ESRCH : -err;
	}
	for (;;) {
		ssize_t r;

		if (len == cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb) {
				close(fd);
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = errno;

			close(fd);
			free(buf);
			/* reading maps of an exited process fails with ESRCH */
			return -err;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	*out = buf;
	*out_len = len;
	return 0;
}

static const char *skip_spaces(const char *p, const char *end)
{
	while (p < end && *p == ' ')
		p++;
	return p;
}

/* Parses a hex number; returns the position after it, or NULL. */
static const char *parse_hex(const char *p, const char *end, uint64_t *out)
{
	uint64_t v = 0;
	const char *start = p;

	for (; p < end; p++) {
		int d;

		if (*p >= '0' && *p <= '9')
			d = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			d = *p - 'a' + 10;
		else if (*p >= 'A' && *p <= 'F')
			d = *p - 'A' + 10;
		else
			break;
		v = (v << 4) | (uint64_t)d;
	}
	*out = v;
	return p == start ? NULL : p;
}

static const char *parse_dec(const char *p, const char *end, uint64_t *out)
{
	uint64_t v = 0;
	const char *start = p;

	for (; p < end && *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	*out = v;
	return p == start ? NULL : p;
}

/*
 * Parses one line [p, end). Returns 1 for an executable mapping (filled in,
 * path as [*path, *path + *path_len)), 0 for a line to skip, -EIO when
 * malformed.
 */
static int parse_line(const char *p, const char *end, struct procmaps_entry *e, const char **path,
		      size_t *path_len)
{
	uint64_t major, minor;
	bool exec;

	p = parse_hex(p, end, &e->start);
	if (!p || p >= end || *p++ != '-')
		return -EIO;
	p = parse_hex(p, end, &e->end);
	if (!p || end - p < 6 || *p++ != ' ')
		return -EIO;
	exec = p[2] == 'x';
	p = skip_spaces(p + 4, end);
	p = parse_hex(p, end, &e->offset);
	if (!p)
		return -EIO;
	p = parse_hex(skip_spaces(p, end), end, &major);
	if (!p || p >= end || *p++ != ':')
		return -EIO;
	p = parse_hex(p, end, &minor);
	if (!p)
		return -EIO;
	p = parse_dec(skip_spaces(p, end), end, &e->inode);
	if (!p)
		return -EIO;
	if (!exec || e->end <= e->start)
		return 0;
	e->dev = (unsigned int)makedev((unsigned int)major, (unsigned int)minor);
	p = skip_spaces(p, end);
	*path = p;
	*path_len = (size_t)(end - p);
	e->deleted = false;
	if (*path_len > strlen(DELETED_SUFFIX) &&
	    memcmp(end - strlen(DELETED_SUFFIX), DELETED_SUFFIX, strlen(DELETED_SUFFIX)) == 0) {
		*path_len -= strlen(DELETED_SUFFIX);
		e->deleted = true;
	}
	return 1;
}

struct procmaps *procmaps_parse(const char *text, size_t len)
{
	const char *end = text + len;
	struct procmaps *pm = calloc(1, sizeof(*pm));
	size_t nlines = 0, str_used = 0;
	int err = -ENOMEM;

	if (!pm)
		goto out_err;
	for (const char *p = text; p < end; p++)
		nlines += *p == '\n';
	nlines++;
	pm->entries = calloc(nlines, sizeof(*pm->entries));
	pm->strings = malloc(len + nlines + 1);
	if (!pm->entries || !pm->strings)
		goto out_free;
	for (const char *p = text; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		struct procmaps_entry *e = &pm->entries[pm->n];
		const char *path = NULL;
		size_t path_len = 0;
		int r;

		if (!eol)
			eol = end;
		r = eol > p ? parse_line(p, eol, e, &path, &path_len) : 0;
		if (r < 0) {
			err = r;
			goto out_free;
		}
		if (r == 1) {
			memcpy(pm->strings + str_used, path, path_len);
			pm->strings[str_used + path_len] = '\0';
			e->path = pm->strings + str_used;
			str_used += path_len + 1;
			if (pm->n > 0 && e->start < pm->entries[pm->n - 1].end) {
				err = -EIO; /* not sorted: not a maps file */
				goto out_free;
			}
			pm->n++;
		}
		p = eol + 1;
	}
	return pm;

out_free:
	procmaps_free(pm);
out_err:
	errno = -err;
	return NULL;
}

struct procmaps *procmaps_read(int pid)
{
	char path[64];
	struct procmaps *pm;
	char *text = NULL;
	size_t len = 0;
	int err;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	err = read_whole(path, &text, &len);
	if (err) {
		errno = -err;
		return NULL;
	}
	pm = procmaps_parse(text, len);
	err = errno;
	free(text);
	errno = err;
	return pm;
}

void procmaps_free(struct procmaps *pm)
{
	if (!pm)
		return;
	free(pm->entries);
	free(pm->strings);
	free(pm);
}

const struct procmaps_entry *procmaps_find(const struct procmaps *pm, uint64_t addr)
{
	size_t lo = 0, hi = pm->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < pm->entries[mid].start)
			hi = mid;
		else if (addr >= pm->entries[mid].end)
			lo = mid + 1;
		else
			return &pm->entries[mid];
	}
	return NULL;
}
