/*
 * kallsyms.c - sorted kernel text symbols for kernel stack frames.
 *
 * /proc/kallsyms has ~100k-200k lines ("addr type name [module]"); the
 * table keeps text symbols as 16-byte entries (address, name offset,
 * module index) plus one blob of names, a few megabytes, loaded once and
 * looked up by binary search. The kernel does not say where a symbol ends:
 * a symbol covers the addresses up to the next one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "traceprof/hex.h"
#include "buildid.h"
#include "kallsyms.h"

#define KALLSYMS_LAST_SPAN 4096 /* bytes the last symbol is assumed to cover */

struct ksym {
	uint64_t addr;	 /* symbol address */
	uint32_t name;	 /* offset of the name in names */
	uint32_t module; /* index into modules */
};

struct kmodule {
	char *name;	/* "vmlinux" or the [mod] name */
	uint64_t base;	/* lowest text address seen */
	char *build_id; /* hex, "" when unknown, NULL until first asked */
};

struct kallsyms {
	struct ksym *syms;	 /* sorted by address */
	size_t n;		 /* entries in syms */
	char *names;		 /* NUL-terminated names */
	size_t names_len;	 /* bytes used in names */
	struct kmodule *modules; /* modules[0] is the kernel itself */
	size_t nmodules;	 /* entries in modules */
	size_t bytes;		 /* heap bytes, for stats */
};

static int read_file(const char *path, char **out, size_t *out_len)
{
	size_t cap = 1 << 20, len = 0;
	char *buf = malloc(cap);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int err = 0;

	if (fd < 0 || !buf) {
		err = fd < 0 ? -errno : -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t r;

		if (cap - len < 4096) {
			char *nb = realloc(buf, cap * 2);

			if (!nb) {
				err = -ENOMEM;
				goto out;
			}
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + len, cap - len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
	*out = buf;
	*out_len = len;
	buf = NULL;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return err;
}

static int module_index(struct kallsyms *ks, const char *name, size_t len, size_t *cap)
{
	struct kmodule *m;

	/* lines of one module come together: check the last one first */
	for (size_t i = ks->nmodules; i-- > 0;) {
		if (strlen(ks->modules[i].name) == len &&
		    memcmp(ks->modules[i].name, name, len) == 0)
			return (int)i;
	}
	if (ks->nmodules == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		struct kmodule *nm = realloc(ks->modules, ncap * sizeof(*nm));

		if (!nm)
			return -ENOMEM;
		ks->modules = nm;
		*cap = ncap;
	}
	m = &ks->modules[ks->nmodules];
	m->name = strndup(name, len);
	if (!m->name)
		return -ENOMEM;
	m->base = UINT64_MAX;
	m->build_id = NULL;
	return (int)ks->nmodules++;
}

static int cmp_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name;
}

/* Parses every line of text into ks. Returns 0, -EPERM (all zero) or -errno. */
static int parse(struct kallsyms *ks, char *text, size_t len)
{
	size_t cap = 0, mcap = 0, nonzero = 0, lines = 0;
	char *p = text, *end = text + len;

	if (module_index(ks, "vmlinux", 7, &mcap) < 0)
		return -ENOMEM;
	ks->names = malloc(len + 1);
	if (!ks->names)
		return -ENOMEM;
	while (p < end) {
		char *eol = memchr(p, '\n', (size_t)(end - p)), *name, *mod, *q;
		uint64_t addr;
		char type;
		int mi = 0;

		if (!eol)
			eol = end;
		*eol = '\0';
		addr = strtoull(p, &q, 16);
		lines++;
		if (q == p || q + 3 > eol || q[0] != ' ' || q[2] != ' ')
			goto next;
		type = q[1];
		if (addr)
			nonzero++;
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			goto next;
		name = q + 3;
		mod = strchr(name, '\t');
		if (mod) {
			char *mend;

			*mod++ = '\0';
			if (*mod == '[')
				mod++;
			mend = strchr(mod, ']');
			mi =
			    module_index(ks, mod, mend ? (size_t)(mend - mod) : strlen(mod), &mcap);
			if (mi < 0)
				return mi;
		}
		if (!addr || !*name)
			goto next;
		if (ks->n == cap) {
			size_t ncap = cap ? cap * 2 : 65536;
			struct ksym *ns = realloc(ks->syms, ncap * sizeof(*ns));

			if (!ns)
				return -ENOMEM;
			ks->syms = ns;
			cap = ncap;
		}
		ks->syms[ks->n].addr = addr;
		ks->syms[ks->n].name = (uint32_t)ks->names_len;
		ks->syms[ks->n].module = (uint32_t)mi;
		ks->n++;
		memcpy(ks->names + ks->names_len, name, strlen(name) + 1);
		ks->names_len += strlen(name) + 1;
		if (addr < ks->modules[mi].base)
			ks->modules[mi].base = addr;
	next:
		p = eol + 1;
	}
	if (lines > 0 && nonzero == 0)
		return -EPERM;
	if (ks->n == 0)
		return -EIO;
	qsort(ks->syms, ks->n, sizeof(*ks->syms), cmp_ksym);
	return 0;
}

struct kallsyms *kallsyms_load(const char *path)
{
	struct kallsyms *ks = calloc(1, sizeof(*ks));
	char *text = NULL;
	size_t len = 0;
	int err = -ENOMEM;

	if (!ks)
		goto out_err;
	err = read_file(path ? path : "/proc/kallsyms", &text, &len);
	if (err)
		goto out_free;
	err = parse(ks, text, len);
	free(text);
	if (err)
		goto out_free;
	/* give back what the names did not use */
	{
		char *shrunk = realloc(ks->names, ks->names_len ? ks->names_len : 1);
		struct ksym *s2 = realloc(ks->syms, ks->n * sizeof(*ks->syms));

		if (shrunk)
			ks->names = shrunk;
		if (s2)
			ks->syms = s2;
	}
	ks->bytes = sizeof(*ks) + ks->n * sizeof(*ks->syms) + ks->names_len +
		    ks->nmodules * sizeof(*ks->modules);
	return ks;

out_free:
	kallsyms_free(ks);
out_err:
	errno = -err;
	return NULL;
}

void kallsyms_free(struct kallsyms *ks)
{
	if (!ks)
		return;
	for (size_t i = 0; i < ks->nmodules; i++) {
		free(ks->modules[i].name);
		free(ks->modules[i].build_id);
	}
	free(ks->modules);
	free(ks->syms);
	free(ks->names);
	free(ks);
}

static char *read_build_id(const char *module)
{
	char path[256];
	uint8_t id[BUILDID_MAX];
	char *text = NULL, *hex;
	size_t len = 0;
	int n = 0;

	if (strcmp(module, "vmlinux") == 0)
		snprintf(path, sizeof(path), "/sys/kernel/notes");
	else
		snprintf(path, sizeof(path), "/sys/module/%s/notes/.note.gnu.build-id", module);
	if (read_file(path, &text, &len) == 0)
		n = buildid_from_notes(text, len, 4, id);
	free(text);
	if (n < 0)
		n = 0; /* one too long counts as none */
	hex = malloc(2 * (size_t)n + 1);
	if (!hex)
		return NULL;
	tp_hex_encode(id, (size_t)n, hex);
	hex[2 * n] = '\0';
	return hex;
}

int kallsyms_lookup(struct kallsyms *ks, uint64_t addr, struct kallsyms_hit *out)
{
	size_t lo = 0, hi = ks->n;
	const struct ksym *s;
	struct kmodule *m;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ks->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -ENOENT;
	s = &ks->syms[lo - 1];
	if (lo == ks->n && addr - s->addr >= KALLSYMS_LAST_SPAN)
		return -ENOENT;
	m = &ks->modules[s->module];
	if (!m->build_id)
		m->build_id = read_build_id(m->name);
	out->name = ks->names + s->name;
	out->module = m->name;
	out->build_id = m->build_id ? m->build_id : "";
	out->start = s->addr;
	out->base = m->base;
	return 0;
}

size_t kallsyms_count(const struct kallsyms *ks)
{
	return ks->n;
}

size_t kallsyms_bytes(const struct kallsyms *ks)
{
	return ks->bytes;
}
