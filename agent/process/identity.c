/*
 * identity.c - service name, resource attributes, container, pod and
 * build id of a process, from procfs, the process context and the ELF file.
 *
 * Everything read from the process is bounded (the environment and the
 * cgroup file are read up to a fixed size) and parsed without trusting it:
 * values that do not fit the fixed-size fields are cut (names) or rejected
 * (ids that do not have the exact form).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buildid.h"
#include "identity.h"
#include "traceprof/hex.h"
#include "procctx.h"
#include "procmem.h"
#include "traceprof/log.h"

#define ENVIRON_MAX    (1u << 20)  /* bytes of /proc/<pid>/environ read */
#define CGROUP_MAX     (64u << 10) /* bytes of /proc/<pid>/cgroup read */
#define EXE_MEMO_SLOTS 256	   /* executables whose build id is remembered (a power of two) */
#define ATTRS_MAX      256	   /* resource attributes kept from the environment */

/* Reads up to max - 1 bytes of a procfs file into a new NUL-terminated buffer. */
static int read_file(const char *path, size_t max, char **out, size_t *len)
{
	char *buf = malloc(max);
	size_t n = 0;
	int fd, err = 0;

	if (!buf)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		free(buf);
		return err;
	}
	while (n < max - 1) {
		ssize_t r = read(fd, buf + n, max - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			err = -errno;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (err) {
		free(buf);
		return err;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

static void copy_name(char *dst, size_t size, const char *src, size_t n)
{
	if (n >= size)
		n = size - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* ------------------------------------------------------------------ cgroup */

static bool is_lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
			return false;
	return true;
}

static bool starts_with(const char *s, size_t n, const char *prefix)
{
	size_t p = strlen(prefix);

	return n >= p && !memcmp(s, prefix, p);
}

/*
 * A container id in one path component: 64 hex digits, alone or after a
 * runtime prefix ending in '-' ("cri-containerd-", "crio-", "docker-",
 * "libpod-"), with an optional ".scope". Conmon scopes are no container.
 */
static bool component_container(const char *c, size_t n, char *out)
{
	if (n > 6 && !memcmp(c + n - 6, ".scope", 6))
		n -= 6;
	if (n < IDENTITY_CONTAINER_ID_LEN || starts_with(c, n, "crio-conmon-") ||
	    starts_with(c, n, "libpod-conmon-"))
		return false;
	c += n - IDENTITY_CONTAINER_ID_LEN;
	if (n > IDENTITY_CONTAINER_ID_LEN && c[-1] != '-')
		return false;
	if (!is_lower_hex(c, IDENTITY_CONTAINER_ID_LEN))
		return false;
	memcpy(out, c, IDENTITY_CONTAINER_ID_LEN);
	out[IDENTITY_CONTAINER_ID_LEN] = '\0';
	return true;
}

/* A pod UID at u (n bytes left): 8-4-4-4-12 hex with '-' or '_', or 32 hex. */
static size_t pod_uid_at(const char *u, size_t n, char *out)
{
	static const int dashes[] = {8, 13, 18, 23};

	if (n >= IDENTITY_POD_UID_LEN) {
		bool ok = true;

		for (int i = 0, d = 0; i < IDENTITY_POD_UID_LEN && ok; i++) {
			if (d < 4 && i == dashes[d]) {
				ok = u[i] == '-' || u[i] == '_';
				d++;
			} else {
				ok = is_lower_hex(u + i, 1);
			}
		}
		if (ok && (n == IDENTITY_POD_UID_LEN || u[IDENTITY_POD_UID_LEN] == '.')) {
			for (int i = 0; i < IDENTITY_POD_UID_LEN; i++)
				out[i] = u[i] == '_' ? '-' : u[i];
			out[IDENTITY_POD_UID_LEN] = '\0';
			return IDENTITY_POD_UID_LEN;
		}
	}
	if (n >= 32 && is_lower_hex(u, 32) && (n == 32 || u[32] == '.')) {
		memcpy(out, u, 32);
		out[32] = '\0';
		return 32;
	}
	return 0;
}

/* A pod UID in one component: "pod<uid>" (cgroupfs) or "...-pod<uid>.slice" (systemd). */
static bool component_pod(const char *c, size_t n, char *out)
{
	for (size_t i = 0; i + 3 < n; i++) {
		if (memcmp(c + i, "pod", 3) || (i > 0 && c[i - 1] != '-'))
			continue;
		if (pod_uid_at(c + i + 3, n - i - 3, out))
			return true;
	}
	return false;
}

/* The deepest container id and pod UID in one cgroup path. */
static void parse_path(const char *path, size_t len, char *cid, char *pod)
{
	const char *end = path + len;

	cid[0] = pod[0] = '\0';
	while (path < end) {
		const char *slash = memchr(path, '/', (size_t)(end - path));
		size_t n = (size_t)((slash ? slash : end) - path);
		char tmp[IDENTITY_CONTAINER_ID_LEN + 1];

		if (component_container(path, n, tmp))
			memcpy(cid, tmp, sizeof(tmp));
		else if (component_pod(path, n, tmp))
			memcpy(pod, tmp, IDENTITY_POD_UID_LEN + 1);
		path += n + (slash ? 1 : 0);
	}
}

int identity_parse_cgroup(const char *text, char container_id[IDENTITY_CONTAINER_ID_LEN + 1],
			  char pod_uid[IDENTITY_POD_UID_LEN + 1])
{
	container_id[0] = pod_uid[0] = '\0';
	while (text && *text) {
		const char *nl = strchr(text, '\n');
		size_t len = nl ? (size_t)(nl - text) : strlen(text);
		const char *c1 = memchr(text, ':', len), *c2;
		char cid[IDENTITY_CONTAINER_ID_LEN + 1], pod[IDENTITY_POD_UID_LEN + 1];

		c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - text)) : NULL;
		if (c2) {
			parse_path(c2 + 1, len - (size_t)(c2 + 1 - text), cid, pod);
			/* the first hierarchy naming a container decides, with its pod */
			if (!container_id[0] && cid[0]) {
				memcpy(container_id, cid, sizeof(cid));
				if (pod[0])
					memcpy(pod_uid, pod, sizeof(pod));
			}
			if (!pod_uid[0] && pod[0])
				memcpy(pod_uid, pod, sizeof(pod));
		}
		text = nl ? nl + 1 : NULL;
	}
	return container_id[0] || pod_uid[0] ? 0 : -ENOENT;
}

/* ------------------------------------------------- OTEL_RESOURCE_ATTRIBUTES */

/* Percent-decodes n bytes at s (blanks around them trimmed) into a new string. */
static int decode_part(const char *s, size_t n, char **out)
{
	char *d, *p;

	while (n && (*s == ' ' || *s == '\t'))
		s++, n--;
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	d = malloc(n + 1);
	if (!d)
		return -ENOMEM;
	p = d;
	for (size_t i = 0; i < n; i++) {
		int hi, lo;

		if (s[i] != '%') {
			*p++ = s[i];
			continue;
		}
		if (i + 2 >= n)
			goto out_invalid;
		hi = tp_hex_digit(s[i + 1]);
		lo = tp_hex_digit(s[i + 2]);
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
			goto out_invalid;
		*p++ = (char)(hi << 4 | lo);
		i += 2;
	}
	*p = '\0';
	*out = d;
	return 0;

out_invalid:
	free(d);
	return -EINVAL;
}

void identity_attrs_free(struct identity_attr *attrs, size_t n)
{
	for (size_t i = 0; attrs && i < n; i++) {
		free(attrs[i].key);
		free(attrs[i].value);
	}
	free(attrs);
}

int identity_parse_resource_attrs(const char *text, struct identity_attr **attrs, size_t *n)
{
	struct identity_attr *a;
	size_t count = 0;
	int err = 0;

	*attrs = NULL;
	*n = 0;
	a = calloc(ATTRS_MAX, sizeof(*a));
	if (!a)
		return -ENOMEM;
	while (*text) {
		size_t len = strcspn(text, ",");
		const char *eq = memchr(text, '=', len);
		bool blank = strspn(text, " \t") >= len;

		if (!blank) {
			if (!eq) {
				err = -EINVAL;
				break;
			}
			if (count == ATTRS_MAX) {
				err = -E2BIG;
				break;
			}
			err = decode_part(text, (size_t)(eq - text), &a[count].key);
			if (!err) {
				err = decode_part(eq + 1, len - (size_t)(eq + 1 - text),
						  &a[count].value);
				if (err)
					free(a[count].key);
			}
			if (err)
				break;
			if (!a[count].key[0]) {
				free(a[count].key);
				free(a[count].value);
				err = -EINVAL;
				break;
			}
			count++;
		}
		text += len + (text[len] == ',' ? 1 : 0);
	}
	if (err) {
		identity_attrs_free(a, count);
		return err;
	}
	*attrs = a;
	*n = count;
	return 0;
}

/* --------------------------------------------------------------- the process */

/* The value of name in a NUL-separated environment block, or NULL. */
static const char *env_get(const char *env, size_t len, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = env; p < env + len; p += strlen(p) + 1)
		if (!strncmp(p, name, n) && p[n] == '=')
			return p + n + 1;
	return NULL;
}

/* True for attributes kept in identity.attrs (service.name has its own field). */
static bool is_resource_attr(const char *key)
{
	return strcmp(key, "service.name") && strncmp(key, "threadlocal.", 12);
}

/* Appends copies of the resource attributes among n to id->attrs (empty before). */
static int set_attrs(struct identity *id, const char *const *keys, const char *const *values,
		     size_t n)
{
	id->attrs = calloc(n ? n : 1, sizeof(*id->attrs));
	if (!id->attrs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct identity_attr *a = &id->attrs[id->nattrs];

		if (!is_resource_attr(keys[i]))
			continue;
		a->key = strdup(keys[i]);
		a->value = strdup(values[i]);
		if (!a->key || !a->value) {
			free(a->key);
			free(a->value);
			return -ENOMEM;
		}
		id->nattrs++;
	}
	return 0;
}

static void set_name(struct identity *id, const char *name, size_t n, enum identity_source src)
{
	copy_name(id->service_name, sizeof(id->service_name), name, n);
	id->source = src;
}

/* Service name and attributes from the process context; -ENOENT when none. */
static int from_procctx(pid_t pid, struct identity *id)
{
	const char **keys = NULL, **values = NULL;
	struct procctx ctx;
	int err;

	err = procctx_read(pid, &ctx);
	if (err)
		return err == -ENOMEM ? err : -ENOENT;
	keys = calloc(ctx.nattrs + 1, sizeof(*keys));
	values = calloc(ctx.nattrs + 1, sizeof(*values));
	err = keys && values ? 0 : -ENOMEM;
	for (size_t i = 0; !err && i < ctx.nattrs; i++) {
		keys[i] = ctx.attrs[i].key;
		values[i] = ctx.attrs[i].value;
	}
	if (!err)
		err = set_attrs(id, keys, values, ctx.nattrs);
	id->ctx_form = (int)ctx.form;
	if (!err && ctx.service_name && ctx.service_name[0])
		set_name(id, ctx.service_name, strlen(ctx.service_name), IDENTITY_FROM_PROCCTX);
	free(keys);
	free(values);
	procctx_clear(&ctx);
	return err;
}

/* OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES of the process's initial environment. */
static int from_environ(pid_t pid, struct identity *id)
{
	const char *ra, *sn, *ra_service = NULL;
	struct identity_attr *attrs = NULL;
	char path[64], *env;
	size_t len, n = 0;
	int err;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	if (read_file(path, ENVIRON_MAX, &env, &len))
		return 0; /* unreadable (a kernel thread, a zombie): not an error */
	ra = env_get(env, len, "OTEL_RESOURCE_ATTRIBUTES");
	if (ra) {
		err = identity_parse_resource_attrs(ra, &attrs, &n);
		if (err == -ENOMEM)
			goto out_free;
		if (err)
			log_debug("identity: OTEL_RESOURCE_ATTRIBUTES ignored pid=%d err=%d",
				  (int)pid, err);
	}
	for (size_t i = 0; i < n; i++)
		if (!strcmp(attrs[i].key, "service.name") && attrs[i].value[0])
			ra_service = attrs[i].value;
	err = 0;
	if (!id->attrs && n) {
		const char **keys = calloc(n, sizeof(*keys)), **values = calloc(n, sizeof(*values));

		err = keys && values ? 0 : -ENOMEM;
		for (size_t i = 0; !err && i < n; i++) {
			keys[i] = attrs[i].key;
			values[i] = attrs[i].value;
		}
		if (!err)
			err = set_attrs(id, keys, values, n);
		free(keys);
		free(values);
	}
	sn = env_get(env, len, "OTEL_SERVICE_NAME");
	if (!id->service_name[0] && sn && sn[0])
		set_name(id, sn, strlen(sn), IDENTITY_FROM_ENV);
	else if (!id->service_name[0] && ra_service)
		set_name(id, ra_service, strlen(ra_service), IDENTITY_FROM_ENV);
out_free:
	identity_attrs_free(attrs, n);
	free(env);
	return err;
}

/* The executable's file name, then the main thread's name. */
static void from_exe(pid_t pid, struct identity *id)
{
	char path[64], target[PROCMEM_PATH_MAX], *comm;
	const char *base;
	size_t len;

	if (procmem_exe_path(pid, target, sizeof(target), NULL) == 0) {
		base = strrchr(target, '/');
		base = base ? base + 1 : target;
		if (*base) {
			set_name(id, base, strlen(base), IDENTITY_FROM_EXE);
			return;
		}
	}
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (read_file(path, 64, &comm, &len) == 0) {
		len = strcspn(comm, "\n");
		if (len)
			set_name(id, comm, len, IDENTITY_FROM_COMM);
		free(comm);
	}
}

/* A copy of the cgroup v2 path in the text of /proc/<pid>/cgroup ("0::<path>"), or NULL. */
static char *cgroup_v2_path(const char *text)
{
	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);

		if (len >= 3 && !strncmp(l, "0::", 3))
			return strndup(l + 3, len - 3);
		l = nl ? nl + 1 : NULL;
	}
	return NULL;
}

/*
 * The build id of the executable of pid, in hex ("" when it has none).
 * Remembered per file (device, inode, size, modification time), so a
 * program started again and again (a shell, a probe) costs a stat, not an
 * open and a read of its notes.
 */
static void exe_build_id(pid_t pid, char *hex, size_t len)
{
	static __thread struct {
		uint64_t dev, ino, size;
		int64_t mtime_ns;
		char hex[2 * BUILDID_MAX + 1];
	} memo[EXE_MEMO_SLOTS];
	char path[64];
	struct stat st, fst;
	uint64_t h;
	bool same;
	int fd;

	hex[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (procmem_exe_stat(pid, &st) == 0 && st.st_dev) {
		int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;

		h = ((uint64_t)st.st_dev * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)st.st_ino;
		h = (h ^ (h >> 29)) & (EXE_MEMO_SLOTS - 1);
		if (memo[h].dev == (uint64_t)st.st_dev && memo[h].ino == (uint64_t)st.st_ino &&
		    memo[h].size == (uint64_t)st.st_size && memo[h].mtime_ns == mt) {
			snprintf(hex, len, "%s", memo[h].hex);
			return;
		}
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return;
		if (buildid_read_hex(fd, hex, len))
			hex[0] = '\0';
		/* remembered only when the file read is the one stat'ed (no exec in between) */
		same = fstat(fd, &fst) == 0 && fst.st_dev == st.st_dev && fst.st_ino == st.st_ino;
		close(fd);
		if (!same)
			return;
		memo[h].dev = (uint64_t)st.st_dev;
		memo[h].ino = (uint64_t)st.st_ino;
		memo[h].size = (uint64_t)st.st_size;
		memo[h].mtime_ns = mt;
		snprintf(memo[h].hex, sizeof(memo[h].hex), "%s", hex);
	}
}

int identity_read(pid_t pid, struct identity *id)
{
	char path[64], *cgroup;
	size_t len;
	int err;

	memset(id, 0, sizeof(*id));
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (access(path, F_OK))
		return -ENOENT;
	err = from_procctx(pid, id);
	if (err && err != -ENOENT)
		goto out_clear;
	err = from_environ(pid, id);
	if (err)
		goto out_clear;
	if (!id->service_name[0])
		from_exe(pid, id);
	if (!id->service_name[0]) {
		err = -ENOENT; /* neither exe nor comm: the process is gone */
		goto out_clear;
	}
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (read_file(path, CGROUP_MAX, &cgroup, &len) == 0) {
		identity_parse_cgroup(cgroup, id->container_id, id->pod_uid);
		id->cgroup_v2 = cgroup_v2_path(cgroup);
		free(cgroup);
	}
	exe_build_id(pid, id->build_id, sizeof(id->build_id));
	return 0;

out_clear:
	identity_clear(id);
	return err;
}

void identity_clear(struct identity *id)
{
	if (!id)
		return;
	identity_attrs_free(id->attrs, id->nattrs);
	free(id->cgroup_v2);
	memset(id, 0, sizeof(*id));
}
