/*
 * procmem.c - mappings, memory and mapped files of another process.
 *
 * /proc/<pid>/maps is read whole into memory first (a few hundred lines for
 * a typical service) and parsed line by line; lines that do not parse are
 * skipped rather than failing the whole read, since the kernel's format has
 * grown fields before.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "procmem.h"

/* Refuse maps files beyond this: a process with more mappings is not profiled. */
#define MAPS_MAX_BYTES (64u << 20)

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

		if (len + 1 >= cap) {
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
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			goto out_close;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	*out = buf;
	*out_len = len;
	return 0;

out_close:
	close(fd);
out_free:
	free(buf);
	return err;
}

/* Parses one maps line into m; false when it does not look like one. */
static bool parse_line(const char *line, struct procmem_map *m)
{
	unsigned long long start, end, off, inode;
	unsigned dev_major, dev_minor;
	char perms[5];
	int pos = 0;
	const char *path;
	size_t n;

	if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu%n", &start, &end, perms, &off, &dev_major,
		   &dev_minor, &inode, &pos) != 7)
		return false;
	path = line + pos;
	while (*path == ' ' || *path == '\t')
		path++;
	n = strcspn(path, "\n");
	if (n >= sizeof(m->path))
		n = sizeof(m->path) - 1;
	memcpy(m->path, path, n);
	m->path[n] = '\0';
	memcpy(m->perms, perms, sizeof(m->perms));
	m->start = start;
	m->end = end;
	m->offset = off;
	m->inode = inode;
	return true;
}

int procmem_maps_read(pid_t pid, struct procmem_maps *maps)
{
	char path[64], *text = NULL, *line;
	size_t len = 0, cap = 0;
	int err;

	maps->maps = NULL;
	maps->n = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	err = read_whole(path, &text, &len);
	if (err)
		return err;
	for (line = text; line < text + len && *line;) {
		char *nl = strchr(line, '\n');
		struct procmem_map m;

		if (nl)
			*nl = '\0';
		if (parse_line(line, &m)) {
			if (maps->n == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				struct procmem_map *p = realloc(maps->maps, ncap * sizeof(*p));

				if (!p) {
					err = -ENOMEM;
					goto out_free;
				}
				maps->maps = p;
				cap = ncap;
			}
			maps->maps[maps->n++] = m;
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	free(text);
	return 0;

out_free:
	free(text);
	procmem_maps_free(maps);
	return err;
}

void procmem_maps_free(struct procmem_maps *maps)
{
	if (!maps)
		return;
	free(maps->maps);
	maps->maps = NULL;
	maps->n = 0;
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

int procmem_open_mapped(pid_t pid, const struct procmem_map *map)
{
	char path[PROCMEM_PATH_MAX + 64];
	const char *deleted = " (deleted)";
	size_t n = strlen(map->path), dn = strlen(deleted);
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid,
		 map->start, map->end);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	if (!procmem_map_is_file(map))
		return -ENOENT;
	if (n > dn && !strcmp(map->path + n - dn, deleted))
		return -ENOENT; /* the path names another file now, or none */
	if (n == sizeof(map->path) - 1)
		return -ENAMETOOLONG;
	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, map->path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd >= 0 ? fd : -errno;
}
