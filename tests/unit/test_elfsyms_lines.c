/*
 * test_elfsyms_lines: the inlined chains elfsyms_lines() gives from its
 * per-unit function index, against libdw's own scope walk.
 *
 * For every address of .text (every byte of the small symtest program,
 * every STEP-th of the larger programs), the chain of functions, files and
 * lines must equal what dwarf_getscopes() and dwarf_getscopes_die() give
 * on a separate libdw handle of the same file: the lookup elfsyms used
 * before the index, rewritten here as the reference. Also prints the time
 * per lookup of both (informational; never a failure).
 *
 * usage: test_elfsyms_lines FILE[:STEP]...
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
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

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int ref_call_site(Dwarf_Die *die, Dwarf_Files *files, size_t nfiles, const char **file)
{
	Dwarf_Attribute attr;
	Dwarf_Word v;
	int line = 0;

	*file = NULL;
	if (files && dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &v) == 0 &&
	    v < nfiles)
		*file = dwarf_filesrc(files, v, NULL, NULL);
	if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &v) == 0 && v <= INT32_MAX)
		line = (int)v;
	return line;
}

/* The reference: libdw's scope walk of the unit, root first like elfsyms_lines. */
static int ref_lines(Dwarf *dw, uint64_t vaddr, struct elfsyms_line *out, int max)
{
	Dwarf_Die cudie, *scopes = NULL, *fn[MAX_CHAIN];
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	const char *leaf_file = NULL;
	int leaf_line = 0, nscopes, nfn = 0, count;
	Dwarf_Line *dl;

	if (!dwarf_addrdie(dw, vaddr, &cudie))
		return 0;
	dl = dwarf_getsrc_die(&cudie, vaddr);
	if (dl) {
		leaf_file = dwarf_linesrc(dl, NULL, NULL);
		if (dwarf_lineno(dl, &leaf_line) != 0)
			leaf_line = 0;
	}
	nscopes = dwarf_getscopes(&cudie, vaddr, &scopes);
	for (int i = 0; i < nscopes; i++) {
		int tag = dwarf_tag(&scopes[i]);

		if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram) {
			Dwarf_Die innermost = scopes[i];

			free(scopes);
			scopes = NULL;
			nscopes = dwarf_getscopes_die(&innermost, &scopes);
			break;
		}
	}
	for (int i = 0; i < nscopes && nfn < MAX_CHAIN; i++) {
		int tag = dwarf_tag(&scopes[i]);

		if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram)
			fn[nfn++] = &scopes[i];
		if (tag == DW_TAG_subprogram)
			break;
	}
	if (nfn == 0) {
		free(scopes);
		if (!leaf_file && leaf_line == 0)
			return 0;
		out[0] = (struct elfsyms_line){.file = leaf_file, .line = leaf_line};
		return 1;
	}
	if (dwarf_getsrcfiles(&cudie, &files, &nfiles) != 0)
		files = NULL;
	count = nfn < max ? nfn : max;
	for (int k = 0; k < count; k++) {
		int j = nfn - 1 - k;

		out[k].function = dwarf_diename(fn[j]);
		if (j == 0) {
			out[k].file = leaf_file;
			out[k].line = leaf_line;
		} else {
			out[k].line = ref_call_site(fn[j - 1], files, nfiles, &out[k].file);
		}
	}
	free(scopes);
	return count;
}

static bool str_same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
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

/* Compares every step-th address of path's .text; returns the chains longer than 1. */
static long compare_file(const char *path, uint64_t step)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), fd2 = open(path, O_RDONLY | O_CLOEXEC);
	struct elfsyms_source src = {.fd = fd};
	struct elfsyms *es;
	uint64_t lo = 0, hi = 0;
	long addrs = 0, differ = 0, chained = 0;
	double t_index = 0, t_ref = 0;
	Dwarf *dw;

	CHECK(fd >= 0 && fd2 >= 0, "open %s", path);
	if (fd < 0 || fd2 < 0)
		return 0;
	es = elfsyms_load(&src, NULL, true);
	dw = dwarf_begin(fd2, DWARF_C_READ);
	CHECK(es && elfsyms_has_lines(es) && dw, "%s: loaded with DWARF", path);
	CHECK(text_range(fd2, &lo, &hi) && hi > lo, "%s: .text found", path);
	for (uint64_t a = lo; es && dw && a < hi; a += step) {
		struct elfsyms_line x[MAX_CHAIN], y[MAX_CHAIN];
		double t0 = now_us(), t1, t2;
		int nx = elfsyms_lines(es, a, x, MAX_CHAIN), ny;
		bool same;

		t1 = now_us();
		ny = ref_lines(dw, a, y, MAX_CHAIN);
		t2 = now_us();
		t_index += t1 - t0;
		t_ref += t2 - t1;
		addrs++;
		chained += nx > 1;
		same = nx == ny;
		for (int i = 0; same && i < nx; i++)
			same = str_same(x[i].function, y[i].function) &&
			       str_same(x[i].file, y[i].file) && x[i].line == y[i].line;
		if (!same && differ++ < 5) {
			fprintf(stderr, "%s: 0x%llx: index gives %d entries, libdw %d\n", path,
				(unsigned long long)a, nx, ny);
			for (int i = 0; i < nx || i < ny; i++)
				fprintf(
				    stderr, "  %s %s:%d | %s %s:%d\n",
				    i < nx && x[i].function ? x[i].function : "-",
				    i < nx && x[i].file ? x[i].file : "-", i < nx ? x[i].line : 0,
				    i < ny && y[i].function ? y[i].function : "-",
				    i < ny && y[i].file ? y[i].file : "-", i < ny ? y[i].line : 0);
		}
	}
	CHECK(differ == 0, "%s: %ld of %ld addresses differ from libdw's scope walk", path, differ,
	      addrs);
	CHECK(addrs > 0, "%s: addresses compared", path);
	if (addrs > 0)
		printf("%s: %ld addresses (every %llu), %ld inlined chains, same as libdw: "
		       "%.2f us per lookup with the index, %.1f us with the scope walk\n",
		       path, addrs, (unsigned long long)step, chained, t_index / (double)addrs,
		       t_ref / (double)addrs);
	if (dw)
		dwarf_end(dw);
	elfsyms_free(es);
	close(fd);
	close(fd2);
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
