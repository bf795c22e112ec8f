/*
 * procmem.c - mappings, memory, executable, start time and mapped files of
 * another process.
 *
 * A maps line reads "start-end perms offset major:minor inode   path"; the
 * path may contain spaces and ends the line. The file is read whole (a few
 * hundred lines, tens of kilobytes for a typical service) and parsed in two
 * passes: one to size the arrays, one to fill them, so a snapshot is three
 * allocations. A line that does not parse fails the whole read: a process
 * is better not looked into than looked into through a misread map.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "procmem.h"
#include "traceprof/ids.h"

/* Refuse maps files beyond this: a process with more mappings is not looked into. */
#define MAPS_MAX_BYTES (64u << 20)
#define DELETED_SUFFIX " (deleted)"

/* Reads the file at path whole into a new buffer; -EFBIG past MAPS_MAX_BYTES. */
static int read_whole(const char *path, char **out, size_t *out_len)
{
	size_t cap = 16384, len = 0;
	char *buf = malloc(cap);
	int fd, err;

	if (!buf)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		goto out_free;
	}
	for (;;) {
		ssize_t n;

		if (len == cap) {
			char *p;

			if (cap >= MAPS_MAX_BYTES) {
				err = -EFBIG;
				goto out_close;
			}
			p = realloc(buf, cap * 2);
			if (!p) {
				err = -ENOMEM;
				goto out_close;
			}
			buf = p;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = -errno; /* reading maps of an exited process fails with ESRCH */
			goto out_close;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	*out = buf;
	*out_len = len;
	return 0;

out_close:
	close(fd);
out_free:
	free(buf);
	return err;
}

/* True when the n bytes at s end in " (deleted)". */
static bool ends_deleted(const char *s, size_t n)
{
	size_t dn = strlen(DELETED_SUFFIX);

	return n > dn && memcmp(s + n - dn, DELETED_SUFFIX, dn) == 0;
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
 * Parses one line [p, end). Returns 1 for a mapping (filled in but for its
 * path, which is [*path, *path + *path_len)), 0 for one to skip, -EIO when
 * malformed.
 */
static int parse_line(const char *p, const char *end, struct procmem_map *m, const char **path,
		      size_t *path_len)
{
	uint64_t major, minor;

	p = parse_hex(p, end, &m->start);
	if (!p || p >= end || *p++ != '-')
		return -EIO;
	p = parse_hex(p, end, &m->end);
	if (!p || end - p < 6 || *p++ != ' ' || p[4] != ' ')
		return -EIO;
	memcpy(m->perms, p, 4);
	m->perms[4] = '\0';
	p = parse_hex(skip_spaces(p + 4, end), end, &m->offset);
	if (!p)
		return -EIO;
	p = parse_hex(skip_spaces(p, end), end, &major);
	if (!p || p >= end || *p++ != ':')
		return -EIO;
	p = parse_hex(p, end, &minor);
	if (!p)
		return -EIO;
	p = parse_dec(skip_spaces(p, end), end, &m->inode);
	if (!p || (p < end && *p != ' '))
		return -EIO;
	if (m->end <= m->start)
		return 0;
	m->dev = (unsigned int)makedev((unsigned int)major, (unsigned int)minor);
	p = skip_spaces(p, end);
	*path = p;
	*path_len = (size_t)(end - p);
	m->deleted = ends_deleted(p, *path_len);
	if (m->deleted)
		*path_len -= strlen(DELETED_SUFFIX);
	return 1;
}

int procmem_maps_parse(const char *text, size_t len, struct procmem_maps *maps)
{
	const char *end = text + len;
	size_t nlines = 1, str_used = 0;
	int err = -ENOMEM;

	memset(maps, 0, sizeof(*maps));
	for (const char *p = text; p < end; p++)
		nlines += *p == '\n';
	maps->maps = calloc(nlines, sizeof(*maps->maps));
	maps->strings = malloc(len + nlines);
	if (!maps->maps || !maps->strings)
		goto out_free;
	for (const char *p = text; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		struct procmem_map *m = &maps->maps[maps->n];
		const char *path = NULL;
		size_t path_len = 0;
		int r;

		if (!eol)
			eol = end;
		r = eol > p ? parse_line(p, eol, m, &path, &path_len) : 0;
		if (r < 0) {
			err = r;
			goto out_free;
		}
		if (r == 1) {
			if (maps->n > 0 && m->start < maps->maps[maps->n - 1].end) {
				err = -EIO; /* not sorted: not a maps file */
				goto out_free;
			}
			memcpy(maps->strings + str_used, path, path_len);
			maps->strings[str_used + path_len] = '\0';
			m->path = maps->strings + str_used;
			str_used += path_len + 1;
			maps->n++;
		}
		p = eol + 1;
	}
	return 0;

out_free:
	procmem_maps_free(maps);
	return err;
}

#define SCOPE_STATS 64 /* procmem_stat_mapped answers kept per scope */

/* The maps text of one process, kept while a scope is open on this thread. */
static __thread struct {
	bool open;
	pid_t pid;
	char *text; /* NULL until the first read in the scope */
	size_t len;
	uint64_t start_time; /* procmem_start_time(pid), 0 until read in the scope */
	bool exe_known;	     /* exe_st holds procmem_exe_stat(pid) */
	struct stat exe_st;
	size_t nstats; /* entries used in stats */
	struct {
		uint64_t inode;	  /* the mapping's file as the maps name it: */
		unsigned int dev; /* every mapping of one file shares the answer */
		struct stat st;	  /* its file's stat */
	} stats[SCOPE_STATS];
} maps_scope;

void procmem_maps_scope_begin(pid_t pid)
{
	procmem_maps_scope_end();
	maps_scope.open = true;
	maps_scope.pid = pid;
}

void procmem_maps_scope_end(void)
{
	free(maps_scope.text);
	memset(&maps_scope, 0, sizeof(maps_scope));
}

int procmem_maps_read(pid_t pid, struct procmem_maps *maps)
{
	char path[64], *text = NULL;
	size_t len = 0;
	int err;

	memset(maps, 0, sizeof(*maps));
	if (maps_scope.open && maps_scope.pid == pid && maps_scope.text)
		return procmem_maps_parse(maps_scope.text, maps_scope.len, maps);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	/*
	 * The kernel writes the file in chunks, a walk of the mappings each:
	 * read while the process maps or unmaps (a dlopen), lines can come out
	 * of order (-EIO from the parser). Read again, a few times.
	 */
	for (int tries = 0;; tries++) {
		err = read_whole(path, &text, &len);
		if (err)
			return err;
		err = procmem_maps_parse(text, len, maps);
		if (err != -EIO || tries == 2)
			break;
		free(text);
		text = NULL;
	}
	if (maps_scope.open && maps_scope.pid == pid) {
		maps_scope.text = text; /* the scope's readers parse this copy */
		maps_scope.len = len;
	} else {
		free(text);
	}
	return err;
}

void procmem_maps_free(struct procmem_maps *maps)
{
	if (!maps)
		return;
	free(maps->maps);
	free(maps->strings);
	memset(maps, 0, sizeof(*maps));
}

bool procmem_map_has_code(const struct procmem_maps *maps, const struct procmem_map *m)
{
	for (size_t i = 0; i < maps->n; i++)
		if (maps->maps[i].perms[2] == 'x' && maps->maps[i].inode == m->inode &&
		    maps->maps[i].dev == m->dev)
			return true;
	return false;
}

uint64_t procmem_maps_fingerprint(const struct procmem_maps *maps)
{
	uint64_t h = 0x6d617073u; /* "maps" */

	for (size_t i = 0; i < maps->n; i++) {
		const struct procmem_map *m = &maps->maps[i];
		uint64_t fields[5] = {m->start, m->end, m->offset, m->inode, m->dev};

		/* a perf or BPF ring (anon_inode:) holds nothing a look reads either */
		if (!m->path[0] || strcmp(m->path, "[heap]") == 0 ||
		    strncmp(m->path, "[stack", 6) == 0 || strncmp(m->path, "anon_inode:", 11) == 0)
			continue;
		/*
		 * A data file (a database's shared memory segment, a locale
		 * archive) changes no part of a look: only files with code are
		 * modules, and a memfd may hold a published process context.
		 */
		if (procmem_map_is_file(m) && strncmp(m->path, "/memfd:", 7) != 0 &&
		    !procmem_map_has_code(maps, m))
			continue;
		h = ids_hash_bytes(h, fields, sizeof(fields));
		h = ids_hash_bytes(h, m->perms, sizeof(m->perms));
		h = ids_hash_bytes(h, m->path, strlen(m->path));
	}
	return h | 1;
}

static int read_proc_mem(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	char path[64];
	size_t done = 0;
	int fd, err = 0;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(addr + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 && errno != EIO ? -errno : -EFAULT;
			break;
		}
		done += (size_t)n;
	}
	close(fd);
	return err;
}

int procmem_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {.iov_base = buf, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
	ssize_t n;

	if (!len)
		return 0;
	if (addr + len < addr)
		return -EFAULT;
	n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (n == (ssize_t)len)
		return 0;
	if (n >= 0 || errno == EFAULT)
		return -EFAULT; /* a partial read: part of the range is not mapped */
	if (errno == ESRCH)
		return -ESRCH;
	/* EPERM (no ptrace access for this call) or ENOSYS: /proc/<pid>/mem */
	return read_proc_mem(pid, addr, buf, len);
}

bool procmem_map_is_file(const struct procmem_map *map)
{
	return map->inode != 0 && map->path[0] == '/';
}

/*
 * The ways to the file behind map, tried in order: way 0,
 * /proc/<pid>/map_files/<range>, which is that file; way 1,
 * /proc/<pid>/root/<path>, which may name another file now (the caller
 * checks the inode). -ENOENT when the way does not exist for map.
 */
static int mapped_path(pid_t pid, const struct procmem_map *map, int way, char *buf, size_t len)
{
	if (way == 0) {
		snprintf(buf, len, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, map->start,
			 map->end);
		return 0;
	}
	if (!procmem_map_is_file(map) || map->deleted)
		return -ENOENT;
	if (snprintf(buf, len, "/proc/%d/root%s", (int)pid, map->path) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

int procmem_open_mapped(pid_t pid, const struct procmem_map *map, struct stat *st)
{
	char path[PROCMEM_PATH_MAX + 64];
	struct stat tmp;
	int fd, err;

	if (!st)
		st = &tmp;
	for (int way = 0; way < 2; way++) {
		err = mapped_path(pid, map, way, path, sizeof(path));
		if (err)
			return err;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			if (way == 1)
				return -errno;
			continue; /* the range names another file now, or none */
		}
		if (fstat(fd, st) == 0 && (way == 0 || (uint64_t)st->st_ino == map->inode))
			return fd;
		close(fd);
	}
	return -ENOENT; /* replaced since it was mapped */
}

int procmem_stat_mapped(pid_t pid, const struct procmem_map *map, struct stat *st)
{
	char path[PROCMEM_PATH_MAX + 64];
	bool scoped = maps_scope.open && maps_scope.pid == pid;

	scoped = scoped && map->inode;
	if (scoped)
		for (size_t i = 0; i < maps_scope.nstats; i++)
			if (maps_scope.stats[i].inode == map->inode &&
			    maps_scope.stats[i].dev == map->dev) {
				*st = maps_scope.stats[i].st;
				return 0;
			}
	for (int way = 0;; way++) {
		int err = mapped_path(pid, map, way, path, sizeof(path));

		if (err)
			return err;
		if (stat(path, st) == 0) {
			if (way == 1 && (uint64_t)st->st_ino != map->inode)
				return -ENOENT; /* replaced since it was mapped */
			break;
		}
		if (way == 1)
			return -errno;
	}
	if (scoped && maps_scope.nstats < SCOPE_STATS) {
		maps_scope.stats[maps_scope.nstats].inode = map->inode;
		maps_scope.stats[maps_scope.nstats].dev = map->dev;
		maps_scope.stats[maps_scope.nstats++].st = *st;
	}
	return 0;
}

int procmem_exe_stat(pid_t pid, struct stat *st)
{
	char path[64];
	bool scoped = maps_scope.open && maps_scope.pid == pid;

	if (scoped && maps_scope.exe_known) {
		*st = maps_scope.exe_st;
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (stat(path, st) != 0)
		return -errno;
	if (scoped) {
		maps_scope.exe_st = *st;
		maps_scope.exe_known = true;
	}
	return 0;
}

int procmem_exe_path(pid_t pid, char *buf, size_t size, bool *deleted)
{
	char link[64];
	ssize_t n;
	bool del;

	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	n = readlink(link, buf, size);
	if (n < 0)
		return -errno;
	if ((size_t)n >= size)
		return -ENAMETOOLONG;
	del = ends_deleted(buf, (size_t)n);
	if (del)
		n -= (ssize_t)strlen(DELETED_SUFFIX);
	buf[n] = '\0';
	if (deleted)
		*deleted = del;
	return 0;
}

uint64_t procmem_start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	bool scoped = maps_scope.open && maps_scope.pid == pid;
	uint64_t t;
	ssize_t n;
	int fd;

	if (scoped && maps_scope.start_time)
		return maps_scope.start_time; /* a pid's start time never changes */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* the command name may contain anything: fields start after the last ')' */
	p = strrchr(buf, ')');
	/* after ")": state is field 3; starttime is field 22 */
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	t = p ? strtoull(p + 1, NULL, 10) : 0;
	if (scoped)
		maps_scope.start_time = t;
	return t;
}
