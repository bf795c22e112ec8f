/*
 * bench_symbolize - cost of the agent's symbolizer (agent/symbols/symbolize.h).
 *
 * The benchmark symbolizes its own process: 4096 distinct addresses spread
 * over the executable mappings of libc. Per run, with a fresh symbolizer:
 *   note      sym_note_process() of this process (maps + opening files)
 *   load      the first lookup in libc: parsing its symbol table
 *   cold      the other lookups of the set, each an address cache miss
 *             (mapping search, symbol search, interning, cache fill)
 *   warm      the same set again, 50 times: address cache hits
 *   kernel    loading /proc/kallsyms, then warm kernel lookups
 * and the bytes held for libc's table and for kallsyms. Prints medians
 * (min-max) over the runs; never fails on timing.
 *
 *   bench_symbolize [--runs N]     (default 7)
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"
#include "procmem.h"
#include "symbolize.h"

#define NADDR	  4096
#define WARM_REPS 50
#define MAX_RUNS  31

struct run {
	double note_us;	      /* sym_note_process */
	double load_us;	      /* first lookup in libc */
	double cold_per_s;    /* misses per second */
	double warm_per_s;    /* hits per second */
	double hit_rate;      /* hits / lookups in the warm phase */
	double libc_bytes;    /* elf_bytes after libc loaded */
	double ks_load_ms;    /* first sym_kernel */
	double ks_warm_per_s; /* sym_kernel hits per second */
	double ks_bytes;      /* kallsyms table */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Prints the median and the range of field off over n runs. */
static void report(const char *what, const char *unit, const struct run *runs, int n, size_t off)
{
	double v[MAX_RUNS];

	for (int i = 0; i < n; i++)
		memcpy(&v[i], (const char *)&runs[i] + off, sizeof(double));
	qsort(v, (size_t)n, sizeof(double), bench_cmp_double);
	printf("| %s | %.4g | %.4g-%.4g | %s |\n", what, v[n / 2], v[0], v[n - 1], unit);
}

/* True for an executable mapping of the file libc was loaded from. */
static bool is_libc_code(const struct procmem_map *m, const char *libc)
{
	return m->perms[2] == 'x' && (strcmp(m->path, libc) == 0 || strstr(m->path, "/libc.so"));
}

/* Addresses spread over the executable mappings of the file libc was loaded from. */
static int libc_addresses(uint64_t *addr, size_t n)
{
	struct procmem_maps pm;
	Dl_info info;
	uint64_t total = 0, step, pos = 0;
	size_t k = 0;

	if (!dladdr(dlsym(RTLD_DEFAULT, "getpid"), &info) || procmem_maps_read(getpid(), &pm) != 0)
		return -1;
	for (size_t i = 0; i < pm.n; i++) {
		if (is_libc_code(&pm.maps[i], info.dli_fname))
			total += pm.maps[i].end - pm.maps[i].start;
	}
	step = total / n;
	for (size_t i = 0; i < pm.n && k < n; i++) {
		const struct procmem_map *e = &pm.maps[i];

		if (!is_libc_code(e, info.dli_fname))
			continue;
		for (; pos < e->end - e->start && k < n; pos += step, k++)
			addr[k] = e->start + pos + (k * 13) % 7;
		pos -= e->end - e->start;
	}
	procmem_maps_free(&pm);
	return k == n ? 0 : -1;
}

static int one_run(struct run *r, const uint64_t *addr, uint64_t ks_addr, bool no_lines)
{
	struct sym_opts o = {.no_lines = no_lines};
	struct symbolizer *sym = sym_new(&o);
	struct sym_frame f[8];
	struct sym_stats st;
	int pid = getpid();
	double t0, t1;

	if (!sym)
		return -1;
	t0 = now_s();
	sym_note_process(sym, pid);
	t1 = now_s();
	r->note_us = (t1 - t0) * 1e6;
	sym_user(sym, pid, addr[0], f, 8);
	t0 = now_s();
	r->load_us = (t0 - t1) * 1e6;
	for (int i = 1; i < NADDR; i++)
		sym_user(sym, pid, addr[i], f, 8);
	t1 = now_s();
	r->cold_per_s = (NADDR - 1) / (t1 - t0);
	sym_get_stats(sym, &st);
	r->libc_bytes = (double)st.elf_bytes;
	{
		uint64_t hits0 = st.cache_hits;

		t0 = now_s();
		for (int rep = 0; rep < WARM_REPS; rep++)
			for (int i = 0; i < NADDR; i++)
				sym_user(sym, pid, addr[i], f, 8);
		t1 = now_s();
		sym_get_stats(sym, &st);
		r->warm_per_s = (double)WARM_REPS * NADDR / (t1 - t0);
		r->hit_rate = (double)(st.cache_hits - hits0) / (WARM_REPS * NADDR);
	}
	if (ks_addr) {
		t0 = now_s();
		sym_kernel(sym, ks_addr, f);
		t1 = now_s();
		r->ks_load_ms = (t1 - t0) * 1e3;
		t0 = now_s();
		for (int i = 0; i < WARM_REPS * NADDR; i++)
			sym_kernel(sym, ks_addr, f);
		r->ks_warm_per_s = (double)WARM_REPS * NADDR / (now_s() - t0);
		sym_get_stats(sym, &st);
		r->ks_bytes = (double)st.kernel_bytes;
	}
	sym_free(sym);
	return 0;
}

static uint64_t kernel_address(void)
{
	FILE *fp = fopen("/proc/kallsyms", "r");
	char line[512], name[256], type;
	uint64_t a, found = 0;

	while (fp && !found && fgets(line, sizeof(line), fp)) {
		if (sscanf(line, "%" SCNx64 " %c %255s", &a, &type, name) == 3 &&
		    strcmp(name, "schedule") == 0)
			found = a + 8;
	}
	if (fp)
		fclose(fp);
	return found;
}

static void print_runs(const struct run *runs, int nruns, bool no_lines, bool kernel)
{
	printf("\n%s: %d runs, %d distinct libc addresses, warm = %d passes\n\n",
	       no_lines ? "symbols only (no_lines)" : "symbols + DWARF lines and inlines", nruns,
	       NADDR, WARM_REPS);
	printf("| measure | median | min-max | unit |\n|---|---:|---:|---|\n");
	report("sym_note_process (this process)", "us", runs, nruns, offsetof(struct run, note_us));
	report("first libc lookup (table load)", "us", runs, nruns, offsetof(struct run, load_us));
	report("cold lookups (cache misses)", "lookups/s", runs, nruns,
	       offsetof(struct run, cold_per_s));
	report("warm lookups (cache hits)", "lookups/s", runs, nruns,
	       offsetof(struct run, warm_per_s));
	report("warm hit rate", "fraction", runs, nruns, offsetof(struct run, hit_rate));
	report("libc symbol table", "bytes", runs, nruns, offsetof(struct run, libc_bytes));
	if (kernel) {
		report("kallsyms load", "ms", runs, nruns, offsetof(struct run, ks_load_ms));
		report("warm kernel lookups", "lookups/s", runs, nruns,
		       offsetof(struct run, ks_warm_per_s));
		report("kallsyms table", "bytes", runs, nruns, offsetof(struct run, ks_bytes));
	}
}

int main(int argc, char **argv)
{
	static uint64_t addr[NADDR];
	struct run runs[MAX_RUNS];
	int nruns = 7;
	uint64_t ks_addr = kernel_address();

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
			nruns = atoi(argv[++i]);
	}
	if (nruns < 1 || nruns > MAX_RUNS) {
		fprintf(stderr, "bench_symbolize: --runs must be 1..%d\n", MAX_RUNS);
		return 2;
	}
	if (libc_addresses(addr, NADDR) != 0) {
		fprintf(stderr,
			"bench_symbolize: cannot find libc's mappings in /proc/self/maps\n");
		return 1;
	}
	for (int mode = 0; mode < 2; mode++) {
		for (int i = 0; i < nruns; i++) {
			if (one_run(&runs[i], addr, ks_addr, mode == 1) != 0) {
				fprintf(stderr, "bench_symbolize: sym_new failed\n");
				return 1;
			}
		}
		print_runs(runs, nruns, mode == 1, ks_addr != 0);
	}
	return 0;
}
