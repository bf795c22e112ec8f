/*
 * test_symbolize: user, kernel and unknown frames from real programs.
 *
 * Each case starts a build of symtest_prog, which prints the addresses of
 * its functions (and of getpid, the vdso, an anonymous mapping, mapped
 * files), notes the process and symbolizes those addresses. Expectations
 * come from the test's own reading of the files with libelf (symbol
 * values and the .note.gnu.build-id section), not from the symbolizer.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "procmem.h"
#include "symbolize.h"

#define MAX_MAPS 4

struct child {
	pid_t pid;		 /* the running symtest program */
	FILE *to;		 /* its stdin */
	FILE *from;		 /* its stdout */
	uint64_t alpha;		 /* address of tp_symtest_alpha */
	uint64_t beta;		 /* address of tp_symtest_beta */
	uint64_t inline_pc;	 /* return address inside the inlined function */
	int line_call;		 /* line where tp_symtest_inner is inlined */
	int line_pc;		 /* line of the call inside tp_symtest_inner */
	uint64_t getpid_addr;	 /* getpid in libc */
	uint64_t vdso;		 /* __vdso_clock_gettime, 0 if none */
	uint64_t anon;		 /* an anonymous executable page */
	uint64_t maps[MAX_MAPS]; /* the --map files, in order */
};

static char tmpdir[64]; /* scratch files of this run */

static bool str_eq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = s ? strlen(s) : 0, m = strlen(suffix);

	return s && n >= m && strcmp(s + n - m, suffix) == 0;
}

static int child_start(struct child *c, const char *exe, const char *map1, const char *map2,
		       const char *map3)
{
	int in[2], out[2];
	char line[512];
	int nmaps = 0;

	memset(c, 0, sizeof(*c));
	if (pipe(in) || pipe(out))
		return -errno;
	c->pid = fork();
	if (c->pid == 0) {
		char a1[300], a2[300], a3[300];

		snprintf(a1, sizeof(a1), "--map=%s", map1 ? map1 : "");
		snprintf(a2, sizeof(a2), "--map=%s", map2 ? map2 : "");
		snprintf(a3, sizeof(a3), "--map=%s", map3 ? map3 : "");
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(exe, exe, map1 ? a1 : NULL, map2 ? a2 : NULL, map3 ? a3 : NULL, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->to = fdopen(in[1], "w");
	c->from = fdopen(out[0], "r");
	while (fgets(line, sizeof(line), c->from)) {
		char key[32];
		uint64_t v = 0;
		int a = 0, b = 0;

		if (sscanf(line, "%31s %" SCNx64 " %d %d", key, &v, &a, &b) < 1)
			continue;
		if (strcmp(key, "alpha") == 0)
			c->alpha = v;
		else if (strcmp(key, "beta") == 0)
			c->beta = v;
		else if (strcmp(key, "inline") == 0)
			c->inline_pc = v, c->line_call = a, c->line_pc = b;
		else if (strcmp(key, "getpid") == 0)
			c->getpid_addr = v;
		else if (strcmp(key, "vdso") == 0)
			c->vdso = v;
		else if (strcmp(key, "anon") == 0)
			c->anon = v;
		else if (strcmp(key, "map") == 0 && nmaps < MAX_MAPS)
			c->maps[nmaps++] = v;
		else if (strcmp(key, "ready") == 0)
			return 0;
	}
	return -EIO;
}

/* Ends the child (end of its stdin) and reaps it. */
static void child_stop(struct child *c)
{
	int status;

	if (c->to)
		fclose(c->to);
	if (c->from)
		fclose(c->from);
	c->to = c->from = NULL;
	waitpid(c->pid, &status, 0);
}

/* The build id of path from its .note.gnu.build-id section, as hex; "" if none. */
static void file_build_id(const char *path, char *hex, size_t cap)
{
	int fd = open(path, O_RDONLY);
	Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	hex[0] = '\0';
	if (elf && elf_getshdrstrndx(elf, &shstrndx) == 0) {
		while ((scn = elf_nextscn(elf, scn)) != NULL) {
			GElf_Shdr sh;
			Elf_Data *d;
			const char *name;

			if (!gelf_getshdr(scn, &sh))
				continue;
			name = elf_strptr(elf, shstrndx, sh.sh_name);
			if (!name || strcmp(name, ".note.gnu.build-id") != 0)
				continue;
			d = elf_getdata(scn, NULL);
			/* Elf64_Nhdr (12 bytes) + "GNU\0" + the id */
			if (d && d->d_size > 16) {
				const unsigned char *p = d->d_buf;

				for (size_t i = 16; i < d->d_size && 2 * (i - 16) + 3 <= cap; i++)
					snprintf(hex + 2 * (i - 16), 3, "%02x", p[i]);
			}
		}
	}
	elf_end(elf);
	if (fd >= 0)
		close(fd);
}

/* st_value of a symbol in path's .symtab, 0 if absent. */
static uint64_t file_symbol(const char *path, const char *symbol)
{
	int fd = open(path, O_RDONLY);
	Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	Elf_Scn *scn = NULL;
	uint64_t v = 0;

	while (elf && !v && (scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *name;

			if (!gelf_getsym(d, (int)i, &s))
				break;
			name = elf_strptr(elf, sh.sh_link, s.st_name);
			if (name && strcmp(name, symbol) == 0)
				v = s.st_value;
		}
	}
	elf_end(elf);
	if (fd >= 0)
		close(fd);
	return v;
}

static int copy_file(const char *from, const char *to, size_t max_bytes)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	size_t total = 0;
	ssize_t n;

	while (in >= 0 && out >= 0 && total < max_bytes &&
	       (n = read(in, buf,
			 sizeof(buf) < max_bytes - total ? sizeof(buf) : max_bytes - total)) > 0) {
		if (write(out, buf, (size_t)n) != n)
			break;
		total += (size_t)n;
	}
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return in >= 0 && out >= 0 ? 0 : -1;
}

/* Changes the last byte of the build id of a copy of symtest_pie. */
static int flip_build_id(const char *path)
{
	int fd = open(SYMTEST_DIR "/symtest_pie", O_RDONLY);
	Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	Elf_Scn *scn = NULL;
	uint64_t off = 0, size = 0;
	size_t shstrndx;
	unsigned char b;
	int err = -1, out;

	if (elf && elf_getshdrstrndx(elf, &shstrndx) == 0) {
		while ((scn = elf_nextscn(elf, scn)) != NULL) {
			GElf_Shdr sh;
			const char *name;

			if (gelf_getshdr(scn, &sh) &&
			    (name = elf_strptr(elf, shstrndx, sh.sh_name)) &&
			    strcmp(name, ".note.gnu.build-id") == 0) {
				off = sh.sh_offset;
				size = sh.sh_size;
			}
		}
	}
	elf_end(elf);
	if (fd >= 0)
		close(fd);
	out = open(path, O_RDWR);
	if (out >= 0 && size > 16 && pread(out, &b, 1, (off_t)(off + size - 1)) == 1) {
		b ^= 0x5a;
		err = pwrite(out, &b, 1, (off_t)(off + size - 1)) == 1 ? 0 : -1;
	}
	if (out >= 0)
		close(out);
	return err;
}

/* Checks alpha, alpha+1, alpha+10 and beta+2 of a build with symbols. */
static void check_functions(struct symbolizer *sym, const struct child *c, const char *exe,
			    const char *module, bool lines)
{
	struct sym_frame f[8];
	char bid[129];
	uint64_t alpha_v = file_symbol(exe, "tp_symtest_alpha");
	uint64_t beta_v = file_symbol(exe, "tp_symtest_beta");
	static const uint64_t deltas[] = {0, 1, 10};

	file_build_id(exe, bid, sizeof(bid));
	CHECK(bid[0] != '\0', "%s has a build id", exe);
	for (size_t i = 0; i < sizeof(deltas) / sizeof(deltas[0]); i++) {
		int n = sym_user(sym, c->pid, c->alpha + deltas[i], f, 8);

		CHECK(n == 1, "%s alpha+%" PRIu64 ": one frame, got %d", module, deltas[i], n);
		CHECK(str_eq(f[0].function, "tp_symtest_alpha"), "%s: function %s", module,
		      f[0].function);
		CHECK(f[0].kind == SYM_KIND_USER, "%s: kind %d", module, f[0].kind);
		CHECK(str_eq(f[0].module, module), "module %s, want %s", f[0].module, module);
		CHECK(str_eq(f[0].build_id, bid), "%s: build id %s, want %s", module, f[0].build_id,
		      bid);
		CHECK(alpha_v == 0 || f[0].address == alpha_v + deltas[i],
		      "%s: ELF address %" PRIx64 ", want %" PRIx64, module, f[0].address,
		      alpha_v + deltas[i]);
		if (lines)
			CHECK(ends_with(f[0].file, "symtest_prog.c") && f[0].line > 0,
			      "%s: line %s:%d", module, f[0].file ? f[0].file : "(null)",
			      f[0].line);
		else
			CHECK(f[0].file == NULL && f[0].line == 0, "%s: no line info", module);
	}
	CHECK(sym_user(sym, c->pid, c->beta + 2, f, 8) == 1 &&
		  str_eq(f[0].function, "tp_symtest_beta") &&
		  (beta_v == 0 || f[0].address == beta_v + 2),
	      "%s: beta+2 -> %s", module, f[0].function);
}

static void test_pie(void)
{
	struct symbolizer *sym = sym_new(NULL);
	const char *exe = SYMTEST_DIR "/symtest_pie";
	struct sym_frame f[8], g[8];
	struct sym_stats st0, st1;
	struct child c;
	char bid[129], libc_bid[129];
	Dl_info info;
	int n;

	CHECK(child_start(&c, exe, NULL, NULL, NULL) == 0, "start %s", exe);
	CHECK(sym_note_process(sym, c.pid) == 0, "note pid %d", c.pid);
	check_functions(sym, &c, exe, "symtest_pie", true);

	/* inlined chain, root first, with the call-site lines */
	n = sym_user(sym, c.pid, c.inline_pc - 1, f, 8);
	CHECK(n == 2, "inline chain of 2 frames, got %d", n);
	if (n == 2) {
		CHECK(str_eq(f[0].function, "tp_symtest_outer") && f[0].line == c.line_call,
		      "root %s:%d, want tp_symtest_outer:%d", f[0].function, f[0].line,
		      c.line_call);
		CHECK(str_eq(f[1].function, "tp_symtest_inner") && f[1].line == c.line_pc,
		      "inlined %s:%d, want tp_symtest_inner:%d", f[1].function, f[1].line,
		      c.line_pc);
		CHECK(f[0].address == f[1].address && f[1].kind == SYM_KIND_USER,
		      "one address for the chain");
	}
	n = sym_user(sym, c.pid, c.inline_pc - 1, g, 1);
	CHECK(n == 1 && str_eq(g[0].function, "tp_symtest_outer"), "max 1 keeps the root");

	/* libc, through the same libc the test runs with */
	CHECK(dladdr(dlsym(RTLD_DEFAULT, "getpid"), &info) != 0, "dladdr getpid");
	file_build_id(info.dli_fname, libc_bid, sizeof(libc_bid));
	n = sym_user(sym, c.pid, c.getpid_addr, f, 8);
	CHECK(n >= 1 && str_eq(f[n - 1].function, "getpid") && f[0].kind == SYM_KIND_USER,
	      "getpid -> %s", f[n - 1].function);
	CHECK(strncmp(f[0].module, "libc.so", 7) == 0, "libc module %s", f[0].module);
	CHECK(libc_bid[0] == '\0' || str_eq(f[0].build_id, libc_bid), "libc build id %s",
	      f[0].build_id);

	if (c.vdso) {
		n = sym_user(sym, c.pid, c.vdso, f, 8);
		CHECK(n == 1 && strstr(f[0].function, "clock_gettime") &&
			  str_eq(f[0].module, "[vdso]") && f[0].kind == SYM_KIND_USER,
		      "vdso -> %s in %s kind %d", f[0].function, f[0].module, f[0].kind);
	}
	n = sym_user(sym, c.pid, c.anon + 16, f, 8);
	CHECK(n == 1 && f[0].kind == SYM_KIND_UNKNOWN && str_eq(f[0].module, "[anon]"),
	      "anonymous -> %s kind %d", f[0].function, f[0].kind);
	n = sym_user(sym, c.pid, 0x10, f, 8);
	CHECK(n == 1 && f[0].kind == SYM_KIND_UNKNOWN && str_eq(f[0].function, "[unknown]"),
	      "unmapped -> %s", f[0].function);
	CHECK(sym_user(sym, c.pid, c.alpha, f, 0) == -EINVAL, "max 0 refused");

	file_build_id(exe, bid, sizeof(bid));
	CHECK(str_eq(sym_build_id_of_exe(sym, c.pid), bid), "exe build id");

	/* the address cache: same strings, no new miss */
	sym_get_stats(sym, &st0);
	sym_user(sym, c.pid, c.alpha, f, 8);
	sym_user(sym, c.pid, c.alpha, g, 8);
	sym_get_stats(sym, &st1);
	CHECK(st1.cache_hits == st0.cache_hits + 2 && st1.cache_misses == st0.cache_misses,
	      "repeats hit the cache (hits %" PRIu64 " -> %" PRIu64 ")", st0.cache_hits,
	      st1.cache_hits);
	CHECK(f[0].function == g[0].function && f[0].build_id == g[0].build_id, "interned strings");

	/* after exit: the snapshot answers (an address not looked up yet) */
	child_stop(&c);
	n = sym_user(sym, c.pid, c.beta + 5, f, 8);
	CHECK(n == 1 && str_eq(f[0].function, "tp_symtest_beta"), "after exit: %s", f[0].function);
	CHECK(st1.processes == 1 && st1.elf_entries >= 3,
	      "stats: %" PRIu64 " processes, %" PRIu64 " files", st1.processes, st1.elf_entries);
	sym_forget_process(sym, c.pid);
	sym_get_stats(sym, &st1);
	CHECK(st1.processes == 0, "forgotten");
	/* never noted and gone: still a frame */
	n = sym_user(sym, c.pid, c.alpha, f, 8);
	CHECK(n == 1 && f[0].kind == SYM_KIND_UNKNOWN, "gone pid -> %s", f[0].function);
	sym_free(sym);
}

/* Symbol tables evicted right away must load again from the kept file, after exit too. */
static void test_eviction(void)
{
	struct sym_opts o = {.max_elf_bytes = 1};
	struct symbolizer *sym = sym_new(&o);
	struct sym_frame f[8];
	struct sym_stats st;
	struct child c;
	int n;

	CHECK(child_start(&c, SYMTEST_DIR "/symtest_pie", NULL, NULL, NULL) == 0, "start");
	sym_note_process(sym, c.pid);
	child_stop(&c);
	n = sym_user(sym, c.pid, c.getpid_addr, f, 8);
	CHECK(n >= 1 && str_eq(f[n - 1].function, "getpid"), "evict: libc %s", f[0].function);
	n = sym_user(sym, c.pid, c.alpha + 3, f, 8);
	CHECK(n == 1 && str_eq(f[0].function, "tp_symtest_alpha"), "evict: exe %s", f[0].function);
	n = sym_user(sym, c.pid, c.getpid_addr + 1, f, 8);
	CHECK(n >= 1 && str_eq(f[n - 1].function, "getpid"), "reloaded: libc %s", f[0].function);
	sym_get_stats(sym, &st);
	CHECK(st.elf_loads == 3 && st.elf_evictions >= 2, "loads %" PRIu64 " evictions %" PRIu64,
	      st.elf_loads, st.elf_evictions);
	sym_free(sym);
}

static void test_builds(void)
{
	struct symbolizer *sym = sym_new(NULL);
	struct sym_frame f[8], g[8];
	char bid_pie[129], bid_v2[129], bid_bare[129], want[64];
	struct child c1, c2, c3;
	uint64_t alpha_v;
	int n;

	/* non-PIE: ELF addresses are the run-time addresses */
	CHECK(child_start(&c1, SYMTEST_DIR "/symtest_nopie", NULL, NULL, NULL) == 0, "nopie");
	check_functions(sym, &c1, SYMTEST_DIR "/symtest_nopie", "symtest_nopie", true);
	CHECK(sym_user(sym, c1.pid, c1.alpha, f, 8) == 1 && f[0].address == c1.alpha,
	      "non-PIE address is the ip");
	child_stop(&c1);

	/* .dynsym only */
	CHECK(child_start(&c1, SYMTEST_DIR "/symtest_dynsym", NULL, NULL, NULL) == 0, "dynsym");
	check_functions(sym, &c1, SYMTEST_DIR "/symtest_dynsym", "symtest_dynsym", false);
	child_stop(&c1);

	/* no symbols at all: module+0xoffset with the build id */
	alpha_v = file_symbol(SYMTEST_DIR "/symtest_plain", "tp_symtest_alpha");
	file_build_id(SYMTEST_DIR "/symtest_bare", bid_bare, sizeof(bid_bare));
	CHECK(child_start(&c1, SYMTEST_DIR "/symtest_bare", NULL, NULL, NULL) == 0, "bare");
	n = sym_user(sym, c1.pid, c1.alpha + 4, f, 8);
	snprintf(want, sizeof(want), "symtest_bare+0x%" PRIx64, alpha_v + 4);
	CHECK(n == 1 && f[0].kind == SYM_KIND_UNKNOWN && str_eq(f[0].function, want) &&
		  str_eq(f[0].module, "symtest_bare") && str_eq(f[0].build_id, bid_bare) &&
		  f[0].address == alpha_v + 4,
	      "stripped -> %s (want %s) build id %s", f[0].function, want, f[0].build_id);
	child_stop(&c1);

	/* no build id: keyed by the file, still symbolized */
	CHECK(child_start(&c1, SYMTEST_DIR "/symtest_nobuildid", NULL, NULL, NULL) == 0, "nobid");
	n = sym_user(sym, c1.pid, c1.alpha, f, 8);
	CHECK(n == 1 && str_eq(f[0].function, "tp_symtest_alpha") && str_eq(f[0].build_id, ""),
	      "no build id -> %s [%s]", f[0].function, f[0].build_id);
	CHECK(sym_build_id_of_exe(sym, c1.pid) == NULL && errno == ENODATA, "exe without id");
	child_stop(&c1);

	/* redeploy: two builds side by side keep separate entries */
	file_build_id(SYMTEST_DIR "/symtest_pie", bid_pie, sizeof(bid_pie));
	file_build_id(SYMTEST_DIR "/symtest_v2", bid_v2, sizeof(bid_v2));
	CHECK(strcmp(bid_pie, bid_v2) != 0, "builds differ");
	CHECK(child_start(&c2, SYMTEST_DIR "/symtest_pie", NULL, NULL, NULL) == 0, "v1");
	CHECK(child_start(&c3, SYMTEST_DIR "/symtest_v2", NULL, NULL, NULL) == 0, "v2");
	sym_user(sym, c2.pid, c2.alpha, f, 8);
	sym_user(sym, c3.pid, c3.alpha, g, 8);
	CHECK(str_eq(f[0].function, "tp_symtest_alpha") &&
		  str_eq(g[0].function, "tp_symtest_alpha"),
	      "both builds resolve");
	CHECK(str_eq(f[0].build_id, bid_pie) && str_eq(g[0].build_id, bid_v2),
	      "separate build ids %s %s", f[0].build_id, g[0].build_id);
	child_stop(&c3);
	child_stop(&c2);
	sym_free(sym);
}

/* A binary deleted after start: read through /proc/P/map_files. */
static void test_deleted(void)
{
	struct symbolizer *sym = sym_new(NULL);
	char path[128], bid[129];
	struct sym_frame f[8];
	struct child c;
	int n;

	snprintf(path, sizeof(path), "%s/symtest_deleted", tmpdir);
	CHECK(copy_file(SYMTEST_DIR "/symtest_pie", path, SIZE_MAX) == 0, "copy");
	file_build_id(path, bid, sizeof(bid));
	CHECK(child_start(&c, path, NULL, NULL, NULL) == 0, "start deleted");
	unlink(path);
	CHECK(sym_note_process(sym, c.pid) == 0, "note");
	n = sym_user(sym, c.pid, c.alpha, f, 8);
	CHECK(n == 1 && str_eq(f[0].function, "tp_symtest_alpha") &&
		  str_eq(f[0].module, "symtest_deleted") && str_eq(f[0].build_id, bid),
	      "deleted binary -> %s in %s", f[0].function, f[0].module);
	child_stop(&c);
	sym_free(sym);
}

/* Corrupt files mapped executable: unknown frames, no crash. */
static void test_corrupt(void)
{
	struct symbolizer *sym = sym_new(NULL);
	char garbage[128], trunc[128], badsh[128], bid[129];
	struct sym_frame f[8];
	struct child c;
	Elf64_Ehdr eh;
	int fd, n;

	snprintf(garbage, sizeof(garbage), "%s/garbage.bin", tmpdir);
	snprintf(trunc, sizeof(trunc), "%s/truncated.so", tmpdir);
	snprintf(badsh, sizeof(badsh), "%s/badsections.so", tmpdir);
	fd = open(garbage, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	{
		unsigned char junk[8192];

		for (size_t i = 0; i < sizeof(junk); i++)
			junk[i] = (unsigned char)(i * 7919 >> 3);
		CHECK(write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk), "write garbage");
	}
	close(fd);
	CHECK(copy_file(SYMTEST_DIR "/symtest_pie", trunc, 4096) == 0, "truncated copy");
	CHECK(copy_file(SYMTEST_DIR "/symtest_pie", badsh, SIZE_MAX) == 0, "copy");
	fd = open(badsh, O_RDWR);
	CHECK(pread(fd, &eh, sizeof(eh), 0) == sizeof(eh), "read ehdr");
	eh.e_shoff = 0x7fffffff00ULL;
	eh.e_shnum = 0xfff0;
	CHECK(pwrite(fd, &eh, sizeof(eh), 0) == sizeof(eh), "write ehdr");
	close(fd);
	/* other builds: not found in the cache under the intact file's build id */
	CHECK(flip_build_id(trunc) == 0 && flip_build_id(badsh) == 0, "new build ids");
	file_build_id(SYMTEST_DIR "/symtest_pie", bid, sizeof(bid));
	if (strlen(bid) >= 2) {
		size_t len = strlen(bid);
		unsigned int last = (unsigned int)strtoul(bid + len - 2, NULL, 16) ^ 0x5a;

		snprintf(bid + len - 2, 3, "%02x", last);
	}

	CHECK(child_start(&c, SYMTEST_DIR "/symtest_pie", garbage, trunc, badsh) == 0, "start");
	CHECK(c.maps[0] && c.maps[1] && c.maps[2], "three files mapped");
	CHECK(sym_note_process(sym, c.pid) == 0, "note");
	n = sym_user(sym, c.pid, c.maps[0] + 0x10, f, 8);
	CHECK(n == 1 && f[0].kind == SYM_KIND_UNKNOWN &&
		  str_eq(f[0].function, "garbage.bin+0x10") && str_eq(f[0].build_id, ""),
	      "not ELF -> %s", f[0].function);
	n = sym_user(sym, c.pid, c.maps[1] + 0x100, f, 8);
	CHECK(n == 1 && f[0].kind == SYM_KIND_UNKNOWN &&
		  str_eq(f[0].function, "truncated.so+0x100") && str_eq(f[0].build_id, bid),
	      "truncated ELF -> %s [%s]", f[0].function, f[0].build_id);
	n = sym_user(sym, c.pid, c.maps[2] + 0x2000, f, 8);
	CHECK(n == 1 && f[0].kind == SYM_KIND_UNKNOWN && str_eq(f[0].module, "badsections.so"),
	      "bad section headers -> %s", f[0].function);
	child_stop(&c);
	sym_free(sym);
}

/* An address in a library loaded after the snapshot refreshes the maps. */
static void test_dlopen(void)
{
	struct sym_opts o = {.refresh_ms = -1};
	struct symbolizer *sym = sym_new(&o);
	char line[256];
	uint64_t addr = 0;
	struct sym_frame f[8];
	struct sym_stats st;
	struct child c;
	int n;

	CHECK(child_start(&c, SYMTEST_DIR "/symtest_pie", NULL, NULL, NULL) == 0, "start");
	CHECK(sym_note_process(sym, c.pid) == 0, "note");
	fprintf(c.to, "dlopen %s\n", SYMTEST_DL);
	fflush(c.to);
	if (fgets(line, sizeof(line), c.from))
		sscanf(line, "dl %" SCNx64, &addr);
	CHECK(addr != 0, "dlopen in the child");
	n = sym_user(sym, c.pid, addr + 1, f, 8);
	CHECK(n == 1 && str_eq(f[0].function, "tp_symtest_dl_func") &&
		  str_eq(f[0].module, "libsymtest_dl.so"),
	      "dlopened -> %s in %s", f[0].function, f[0].module);
	sym_get_stats(sym, &st);
	CHECK(st.map_refreshes == 1, "one refresh, got %" PRIu64, st.map_refreshes);
	child_stop(&c);
	sym_free(sym);
}

static void test_kernel(void)
{
	struct symbolizer *sym = sym_new(NULL);
	FILE *fp = fopen("/proc/kallsyms", "r");
	char line[512], name[256], type, path[128];
	uint64_t addr = 0, a;
	struct sym_frame f;
	struct sym_opts o = {0};
	struct sym_stats st;

	while (fp && fgets(line, sizeof(line), fp)) {
		if (sscanf(line, "%" SCNx64 " %c %255s", &a, &type, name) == 3 &&
		    strcmp(name, "schedule") == 0 && (type == 'T' || type == 't')) {
			addr = a;
			break;
		}
	}
	if (fp)
		fclose(fp);
	if (addr) {
		CHECK(sym_kernel(sym, addr, &f) == 1 && str_eq(f.function, "schedule") &&
			  f.kind == SYM_KIND_KERNEL && str_eq(f.module, "vmlinux"),
		      "schedule -> %s (%s) kind %d", f.function, f.module, f.kind);
		CHECK(sym_kernel(sym, addr + 4, &f) == 1 && str_eq(f.function, "schedule"),
		      "schedule+4 -> %s", f.function);
	} else {
		fprintf(stderr, "kallsyms shows no addresses here: real kernel check skipped\n");
	}
	sym_free(sym);

	/* an unprivileged view: every address 0 */
	snprintf(path, sizeof(path), "%s/kallsyms_zero", tmpdir);
	fp = fopen(path, "w");
	fprintf(fp, "0000000000000000 T _text\n0000000000000000 T schedule\n");
	fclose(fp);
	o.kallsyms_path = path;
	sym = sym_new(&o);
	CHECK(sym_kernel(sym, 0xffffffff81000010ULL, &f) == 1 && f.kind == SYM_KIND_UNKNOWN &&
		  str_eq(f.function, "[kernel]"),
	      "restricted -> %s", f.function);
	sym_get_stats(sym, &st);
	CHECK(st.kallsyms_restricted, "restriction reported");
	sym_free(sym);

	/* module names and module-relative addresses */
	fp = fopen(path, "w");
	fprintf(fp, "ffffffff81000000 T _text\nffffffff81000100 t do_thing\n"
		    "ffffffff81000200 D some_data\nffffffffc0001000 t mod_a\t[foomod]\n"
		    "ffffffffc0001040 T mod_b\t[foomod]\n");
	fclose(fp);
	sym = sym_new(&o);
	CHECK(sym_kernel(sym, 0xffffffff81000180ULL, &f) == 1 && str_eq(f.function, "do_thing") &&
		  f.address == 0x180,
	      "do_thing -> %s +%" PRIx64, f.function, f.address);
	CHECK(sym_kernel(sym, 0xffffffffc0001050ULL, &f) == 1 && str_eq(f.function, "mod_b") &&
		  str_eq(f.module, "foomod") && f.address == 0x50 && f.kind == SYM_KIND_KERNEL,
	      "mod_b -> %s [%s] +%" PRIx64, f.function, f.module, f.address);
	CHECK(sym_kernel(sym, 0x1000, &f) == 1 && f.kind == SYM_KIND_UNKNOWN, "below all symbols");
	sym_free(sym);
	unlink(path);
}

/*
 * Processes mapping the same file share its address cache entries, at any
 * load address; a copy of the file under another name gets its own.
 */
static void test_shared_cache(void)
{
	struct symbolizer *sym = sym_new(NULL);
	struct sym_frame f[8], g[8];
	struct sym_stats st0, st1;
	struct child a, b, c;
	char copy[128];
	int n;

	snprintf(copy, sizeof(copy), "%s/symtest_copy", tmpdir);
	CHECK(copy_file(SYMTEST_DIR "/symtest_pie", copy, SIZE_MAX) == 0 && chmod(copy, 0755) == 0,
	      "copy symtest_pie");
	CHECK(child_start(&a, SYMTEST_DIR "/symtest_pie", NULL, NULL, NULL) == 0, "first");
	CHECK(child_start(&b, SYMTEST_DIR "/symtest_pie", NULL, NULL, NULL) == 0, "second");
	CHECK(child_start(&c, copy, NULL, NULL, NULL) == 0, "copy");
	CHECK(a.alpha != b.alpha, "two load addresses (ASLR): %" PRIx64 " %" PRIx64, a.alpha,
	      b.alpha);
	CHECK(sym_note_process(sym, b.pid) == 0 && sym_note_process(sym, c.pid) == 0, "noted");
	n = sym_user(sym, a.pid, a.alpha + 3, f, 8);
	CHECK(n == 1 && str_eq(f[0].function, "tp_symtest_alpha"), "first -> %s", f[0].function);
	sym_get_stats(sym, &st0);
	n = sym_user(sym, b.pid, b.alpha + 3, g, 8);
	sym_get_stats(sym, &st1);
	CHECK(n == 1 && st1.cache_misses == st0.cache_misses &&
		  st1.cache_hits == st0.cache_hits + 1,
	      "second process hits the first one's entry (misses %" PRIu64 " -> %" PRIu64 ")",
	      st0.cache_misses, st1.cache_misses);
	CHECK(g[0].function == f[0].function && g[0].module == f[0].module &&
		  g[0].build_id == f[0].build_id && g[0].address == f[0].address &&
		  g[0].line == f[0].line && g[0].file == f[0].file,
	      "same frame");
	/* the same build under another name: its own module name */
	n = sym_user(sym, c.pid, c.alpha + 3, g, 8);
	CHECK(n == 1 && str_eq(g[0].function, "tp_symtest_alpha") &&
		  str_eq(g[0].module, "symtest_copy") && str_eq(g[0].build_id, f[0].build_id),
	      "copy -> %s in %s", g[0].function, g[0].module);
	/* the vDSO of each (mapped at its own address) is the one image: one entry */
	if (a.vdso && b.vdso) {
		int na = sym_user(sym, a.pid, a.vdso, f, 8),
		    nb = sym_user(sym, b.pid, b.vdso, g, 8);

		CHECK(na == 1 && nb == 1 && strstr(f[0].function, "clock_gettime") &&
			  g[0].function == f[0].function && str_eq(g[0].module, "[vdso]") &&
			  g[0].build_id == f[0].build_id && g[0].address == f[0].address,
		      "both vDSOs -> %s in %s, one entry", nb == 1 ? g[0].function : "-",
		      nb == 1 ? g[0].module : "-");
	}
	/* a raw address of one process means nothing in another: anonymous memory */
	n = sym_user(sym, b.pid, a.anon + 16, g, 8);
	CHECK(n == 1 && g[0].kind == SYM_KIND_UNKNOWN, "foreign address -> %s", g[0].function);
	child_stop(&c);
	child_stop(&b);
	child_stop(&a);
	sym_free(sym);
}

/* A function of this test, for a forked copy of it to run. */
static __attribute__((noinline)) void inherit_marker(void)
{
	pause();
}

/* A child that waits in inherit_marker until killed. */
static pid_t fork_paused(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		inherit_marker();
		_exit(0);
	}
	return pid;
}

/*
 * A forked process gets its parent's snapshot (sym_inherit_process) and
 * its addresses resolve after it is gone, where a process first seen dead
 * has none.
 */
static void test_inherit(void)
{
	struct symbolizer *sym = sym_new(NULL);
	struct sym_frame f[8];
	struct sym_stats st;
	uint64_t start, ip = (uint64_t)(uintptr_t)inherit_marker + 2;
	pid_t kid, dead;
	int n;

	CHECK(sym_note_process(sym, getpid()) == 0, "note self");
	kid = fork_paused();
	dead = fork();
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	start = procmem_start_time(kid);
	CHECK(kid > 0 && start > 0, "child running");
	CHECK(sym_inherit_process(sym, kid, 1 << 30, start) == -ESRCH, "unknown parent: ESRCH");
	CHECK(sym_inherit_process(sym, kid, getpid(), start) == 0, "inherit");
	CHECK(sym_inherit_process(sym, kid, getpid(), start) == 0, "inherit again: no-op");
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	n = sym_user(sym, kid, ip, f, 8);
	CHECK(n >= 1 && str_eq(f[n - 1].function, "inherit_marker") &&
		  f[n - 1].kind == SYM_KIND_USER,
	      "gone child: %s", n >= 1 ? f[n - 1].function : "(none)");
	sym_get_stats(sym, &st);
	CHECK(st.inherited == 1 && st.processes == 2,
	      "counted: inherited %" PRIu64 ", processes %" PRIu64, st.inherited, st.processes);
	/* the same address in a process never seen alive: no snapshot, no name */
	n = sym_user(sym, dead, ip, f, 8);
	CHECK(n == 1 && f[0].kind == SYM_KIND_UNKNOWN, "never seen: %s", f[0].function);
	sym_free(sym);
}

static __attribute__((noinline)) int idle_probe_a(int x)
{
	return x * 3 + 1;
}

static __attribute__((noinline)) int idle_probe_b(int x)
{
	return x * 5 + 2;
}

/*
 * Snapshots of exited processes: with idle_ms > 0 the symbolizer finds the
 * gone ones itself (reading their /proc) and drops them; with idle_ms < 0
 * it never does, and the caller's sym_forget_process is what drops them.
 */
static void test_idle(void)
{
	for (int mode = 0; mode < 2; mode++) {
		struct sym_opts o = {.idle_ms = mode == 0 ? 1 : -1};
		struct symbolizer *sym = sym_new(&o);
		struct sym_frame f[8];
		struct sym_stats st;
		pid_t kid;

		CHECK(sym_note_process(sym, getpid()) == 0, "note self");
		kid = fork_paused();
		CHECK(kid > 0 && sym_note_process(sym, kid) == 0, "note child");
		/* a miss now: the next collection is a second away */
		CHECK(sym_user(sym, getpid(), (uint64_t)(uintptr_t)idle_probe_a, f, 8) >= 1,
		      "first lookup");
		kill(kid, SIGKILL);
		waitpid(kid, NULL, 0);
		usleep(1100 * 1000);
		/* another miss: collects the idle snapshots that are gone */
		CHECK(sym_user(sym, getpid(), (uint64_t)(uintptr_t)idle_probe_b, f, 8) >= 1,
		      "second lookup");
		sym_get_stats(sym, &st);
		if (mode == 0) {
			CHECK(st.processes == 1, "idle_ms 1: the gone child dropped (%" PRIu64 ")",
			      st.processes);
		} else {
			CHECK(st.processes == 2, "idle_ms -1: kept until forgotten (%" PRIu64 ")",
			      st.processes);
			sym_forget_process(sym, kid);
			sym_get_stats(sym, &st);
			CHECK(st.processes == 1, "forgotten (%" PRIu64 ")", st.processes);
		}
		sym_free(sym);
	}
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_symbolize.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	elf_version(EV_CURRENT);
	signal(SIGPIPE, SIG_IGN);
	test_pie();
	test_eviction();
	test_builds();
	test_shared_cache();
	test_inherit();
	test_idle();
	test_deleted();
	test_corrupt();
	test_dlopen();
	test_kernel();
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", tmpdir);
	}
	return check_done();
}
