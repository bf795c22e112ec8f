/*
 * test_elfsyms_lines: the inlined chains elfsyms_lines() gives from its
 * per-unit function index, against binutils' addr2line.
 *
 * For every address of .text (every byte of the small symtest program,
 * every STEP-th of the larger programs), the chain of functions, files and
 * lines must equal what `addr2line -a -f -i` prints for it: a DWARF reader
 * of its own (BFD's), run once per file on all the addresses. addr2line
 * prints the innermost function first with the address's line, then each
 * caller it is inlined into with the line of the call; elfsyms_lines gives
 * the same chain root first. Where elfsyms knows no function (no DWARF
 * function covers the address), addr2line names one from the symbol
 * table: there only the file and line are compared; where elfsyms gives
 * no entry at all, addr2line must know no line either ("??:?", "FILE:?").
 * Also prints the time per lookup (informational; never a failure).
 *
 * usage: test_elfsyms_lines FILE[:STEP]...
 */
#include <ctype.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "elfsyms.h"

#define MAX_CHAIN 32
#define MAX_TEXT  4096 /* bytes kept per name or file of the reference */

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* One address's chain as addr2line prints it, innermost first. */
struct ref_chain {
	int n;
	char function[MAX_CHAIN][MAX_TEXT]; /* "" for "??" */
	char file[MAX_CHAIN][MAX_TEXT];	    /* "" for "??" */
	int line[MAX_CHAIN];		    /* 0 for "?" */
};

/* addr2line's output, read one line ahead. */
struct ref_reader {
	FILE *in;
	char *buf;
	size_t cap;
	bool have; /* buf holds a line not yet used */
};

static const char *ref_next(struct ref_reader *r)
{
	ssize_t len;

	if (r->have) {
		r->have = false;
		return r->buf;
	}
	len = getline(&r->buf, &r->cap, r->in);
	if (len < 0)
		return NULL;
	if (len > 0 && r->buf[len - 1] == '\n')
		r->buf[len - 1] = '\0';
	return r->buf;
}

/* "FILE:LINE", "FILE:LINE (discriminator N)", "??:?" or "??:0". */
static void ref_position(const char *s, char *file, int *line)
{
	const char *colon = strrchr(s, ':');
	size_t n = colon ? (size_t)(colon - s) : strlen(s);

	if (n >= MAX_TEXT)
		n = MAX_TEXT - 1;
	memcpy(file, s, n);
	file[n] = '\0';
	if (strcmp(file, "??") == 0)
		file[0] = '\0';
	*line = colon && isdigit((unsigned char)colon[1]) ? atoi(colon + 1) : 0;
}

/* The chain of address a: its "0x..." line, then function and position lines. */
static bool ref_read(struct ref_reader *r, uint64_t a, struct ref_chain *c)
{
	const char *s = ref_next(r);

	c->n = 0;
	if (!s || strncmp(s, "0x", 2) != 0 || strtoull(s, NULL, 16) != a)
		return false;
	while ((s = ref_next(r)) != NULL) {
		if (strncmp(s, "0x", 2) == 0) {
			r->have = true;
			break;
		}
		if (c->n < MAX_CHAIN)
			snprintf(c->function[c->n], MAX_TEXT, "%s", strcmp(s, "??") ? s : "");
		s = ref_next(r);
		if (!s)
			return false;
		if (c->n < MAX_CHAIN)
			ref_position(s, c->file[c->n], &c->line[c->n]);
		c->n++;
	}
	return c->n > 0 && c->n <= MAX_CHAIN;
}

/* Starts addr2line on every step-th address of [lo, hi) of path. */
static FILE *ref_start(const char *path, uint64_t lo, uint64_t hi, uint64_t step, char *tmp)
{
	char cmd[8192], quoted[4096 * 4 + 3], *q = quoted;
	int fd = mkstemp(tmp);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	if (!f)
		return NULL;
	for (uint64_t a = lo; a < hi; a += step)
		fprintf(f, "0x%llx\n", (unsigned long long)a);
	if (fclose(f) != 0)
		return NULL;
	*q++ = '\'';
	for (const char *p = path; *p && q < quoted + sizeof(quoted) - 6; p++) {
		if (*p == '\'') {
			memcpy(q, "'\\''", 4);
			q += 4;
		} else {
			*q++ = *p;
		}
	}
	*q++ = '\'';
	*q = '\0';
	snprintf(cmd, sizeof(cmd), "addr2line -a -f -i -e %s < %s", quoted, tmp);
	return popen(cmd, "r");
}

/* Whether elfsyms' chain x (root first) is what addr2line printed (innermost first). */
static bool same_chain(const struct elfsyms_line *x, int nx, const struct ref_chain *c)
{
	if (nx == 1 && !x[0].function)
		/* no DWARF function: addr2line's name comes from the symbol table */
		return c->n == 1 && strcmp(x[0].file ? x[0].file : "", c->file[0]) == 0 &&
		       x[0].line == c->line[0];
	if (nx == 0)
		return c->n == 1 && c->line[0] == 0;
	if (nx != c->n)
		return false;
	for (int k = 0; k < nx; k++) {
		int j = nx - 1 - k;

		if (strcmp(x[k].function ? x[k].function : "", c->function[j]) != 0 ||
		    strcmp(x[k].file ? x[k].file : "", c->file[j]) != 0 || x[k].line != c->line[j])
			return false;
	}
	return true;
}

static bool text_range(int fd, uint64_t *lo, uint64_t *hi)
{
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	size_t shstr;
	GElf_Shdr sh;
	bool found = false;

	if (!e || elf_getshdrstrndx(e, &shstr) != 0) {
		elf_end(e);
		return false;
	}
	while (!found && (scn = elf_nextscn(e, scn)) != NULL) {
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(e, shstr, sh.sh_name);
		if (name && strcmp(name, ".text") == 0) {
			*lo = sh.sh_addr;
			*hi = sh.sh_addr + sh.sh_size;
			found = true;
		}
	}
	elf_end(e);
	return found;
}

static void print_mismatch(const char *path, uint64_t a, const struct elfsyms_line *x, int nx,
			   const struct ref_chain *c)
{
	fprintf(
	    stderr,
	    "%s: 0x%llx: elfsyms gives %d entries (root first), addr2line %d (innermost first)\n",
	    path, (unsigned long long)a, nx, c->n);
	for (int i = 0; i < nx; i++)
		fprintf(stderr, "  elfsyms   %s %s:%d\n", x[i].function ? x[i].function : "-",
			x[i].file ? x[i].file : "-", x[i].line);
	for (int i = 0; i < c->n; i++)
		fprintf(stderr, "  addr2line %s %s:%d\n", c->function[i][0] ? c->function[i] : "-",
			c->file[i][0] ? c->file[i] : "-", c->line[i]);
}

/* Compares every step-th address of path's .text; returns the chains longer than 1. */
static long compare_file(const char *path, uint64_t step)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct elfsyms_source src = {.fd = fd};
	struct ref_reader r = {0};
	static struct ref_chain c;
	char tmp[] = "/tmp/test_elfsyms_lines.XXXXXX";
	struct elfsyms *es;
	uint64_t lo = 0, hi = 0;
	long addrs = 0, differ = 0, chained = 0;
	double t_index = 0;

	CHECK(fd >= 0, "open %s", path);
	if (fd < 0)
		return 0;
	es = elfsyms_load(&src, NULL, true, NULL, NULL);
	CHECK(es && elfsyms_has_lines(es), "%s: loaded with DWARF", path);
	CHECK(text_range(fd, &lo, &hi) && hi > lo, "%s: .text found", path);
	r.in = es && hi > lo ? ref_start(path, lo, hi, step, tmp) : NULL;
	CHECK(r.in, "%s: addr2line started", path);
	for (uint64_t a = lo; r.in && a < hi; a += step) {
		struct elfsyms_line x[MAX_CHAIN];
		double t0 = now_us();
		int nx = elfsyms_lines(es, a, x, MAX_CHAIN);

		t_index += now_us() - t0;
		if (!ref_read(&r, a, &c)) {
			CHECK(false, "%s: 0x%llx: addr2line's output", path, (unsigned long long)a);
			break;
		}
		addrs++;
		chained += nx > 1;
		if (!same_chain(x, nx, &c) && differ++ < 5)
			print_mismatch(path, a, x, nx, &c);
	}
	if (r.in) {
		CHECK(pclose(r.in) == 0, "%s: addr2line exits 0", path);
		unlink(tmp);
	}
	free(r.buf);
	CHECK(differ == 0, "%s: %ld of %ld addresses differ from addr2line", path, differ, addrs);
	CHECK(addrs > 0, "%s: addresses compared", path);
	if (addrs > 0)
		printf(
		    "%s: %ld addresses (every %llu), %ld inlined chains, compared with addr2line: "
		    "%.2f us per lookup\n",
		    path, addrs, (unsigned long long)step, chained, t_index / (double)addrs);
	elfsyms_free(es);
	close(fd);
	return chained;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_elfsyms_lines FILE[:STEP]...\n");
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		char path[4096], *colon;
		uint64_t step = 1;

		snprintf(path, sizeof(path), "%s", argv[i]);
		colon = strrchr(path, ':');
		if (colon) {
			*colon = '\0';
			step = strtoull(colon + 1, NULL, 10);
			if (step == 0)
				step = 1;
		}
		/* every file given is built with -g and inlines somewhere */
		CHECK(compare_file(path, step) > 0, "%s: some addresses have inlined chains", path);
	}
	return check_done();
}
