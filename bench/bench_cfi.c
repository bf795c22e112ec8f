/*
 * bench_cfi - what CFI unwind tables (agent/unwind/cfi.c) take for the
 * files of a machine: memory and build time.
 *
 * usage: bench_cfi [PATH...]
 *
 * Builds the table of every ELF shared object and executable found under
 * each PATH (a file or a directory; default /usr/lib/x86_64-linux-gnu and
 * /usr/bin; links below them are not followed, so each file counts once),
 * three times, and prints
 *
 *   bench_cfi files=F tables=T skipped=S rows=R bytes=B unsupported_pct=U
 *             errors=E build_ms=M median_bytes=MB p90_bytes=PB largest=FILE:BYTES
 *
 * files: ELF files of type ET_DYN or ET_EXEC; tables: those with CFI
 * (skipped: no CFI, another machine); bytes: the rows of all tables;
 * unsupported: rows a walker cannot follow (falls back to frame
 * pointers there), as a share of all rows but gaps; build_ms: the median
 * of three passes over all files (each file read from the page cache
 * after the first pass); median_bytes, p90_bytes: of one table.
 */
#include <elf.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"
#include "cfi.h"

static char **paths;
static size_t npaths, cap;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* An ELF shared object or executable (by its header). */
static int is_elf_object(const char *path)
{
	unsigned char h[EI_NIDENT + 2];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, h, sizeof(h));
	close(fd);
	if (n != (ssize_t)sizeof(h) || memcmp(h, ELFMAG, SELFMAG) != 0)
		return 0;
	unsigned type = h[EI_DATA] == ELFDATA2LSB ? h[16] | h[17] << 8 : h[17] | h[16] << 8;
	return type == ET_DYN || type == ET_EXEC;
}

static int visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag != FTW_F || !S_ISREG(st->st_mode) || st->st_size < EI_NIDENT ||
	    !is_elf_object(path))
		return 0;
	if (npaths == cap) {
		cap = cap ? cap * 2 : 256;
		paths = realloc(paths, cap * sizeof(*paths));
		if (!paths)
			abort();
	}
	paths[npaths++] = strdup(path);
	return 0;
}

static double *file_bytes; /* per table, of the last pass */

struct totals {
	size_t tables, skipped, rows, bytes, gaps, unsupported, errors, largest_bytes;
	const char *largest;
};

static uint64_t errors(const struct cfi_stats *s)
{
	return s->err_entry + s->err_cie + s->err_encoding + s->err_range + s->err_overlap +
	       s->err_frame + s->err_fde_rows + s->err_limit + s->err_work;
}

static void pass(struct totals *t)
{
	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < npaths; i++) {
		struct cfi_table tab;
		if (cfi_build(paths[i], NULL, &tab) != 0) {
			t->skipped++;
			continue;
		}
		file_bytes[t->tables++] = (double)cfi_table_bytes(&tab);
		t->rows += tab.nrows;
		t->bytes += cfi_table_bytes(&tab);
		for (size_t k = 0; k < tab.nrows; k++)
			t->gaps += tab.rows[k].cfa == CFI_CFA_GAP;
		t->unsupported += tab.stats.rows_unsupported;
		t->errors += errors(&tab.stats);
		if (cfi_table_bytes(&tab) > t->largest_bytes) {
			t->largest_bytes = cfi_table_bytes(&tab);
			t->largest = paths[i];
		}
		cfi_free(&tab);
	}
}

int main(int argc, char **argv)
{
	const char *defaults[] = {"/usr/lib/x86_64-linux-gnu", "/usr/bin"};
	const char **roots = argc > 1 ? (const char **)argv + 1 : defaults;
	int nroots = argc > 1 ? argc - 1 : 2;
	for (int i = 0; i < nroots; i++) {
		char *root = realpath(roots[i], NULL); /* a link named here is followed */
		if (!root || nftw(root, visit, 32, FTW_PHYS) != 0)
			fprintf(stderr, "bench_cfi: cannot walk %s\n", roots[i]);
		free(root);
	}
	struct totals t;
	double ms[3];
	file_bytes = calloc(npaths + 1, sizeof(*file_bytes));
	if (!file_bytes)
		return 1;
	for (int r = 0; r < 3; r++) {
		double t0 = now_ms();
		pass(&t);
		ms[r] = now_ms() - t0;
	}
	size_t real = t.rows - t.gaps;
	double median = 0, p90 = 0;
	if (t.tables) {
		median = bench_median(file_bytes, (int)t.tables); /* sorts */
		p90 = file_bytes[(size_t)(0.9 * (double)(t.tables - 1))];
	}
	printf("bench_cfi files=%zu tables=%zu skipped=%zu rows=%zu bytes=%zu "
	       "unsupported_pct=%.2f errors=%zu build_ms=%.0f median_bytes=%.0f p90_bytes=%.0f "
	       "largest=%s:%zu\n",
	       npaths, t.tables, t.skipped, t.rows, t.bytes,
	       real ? 100.0 * (double)t.unsupported / (double)real : 0.0, t.errors,
	       bench_median(ms, 3), median, p90, t.largest ? t.largest : "-", t.largest_bytes);
	for (size_t i = 0; i < npaths; i++)
		free(paths[i]);
	free(paths);
	free(file_bytes);
	return 0;
}
