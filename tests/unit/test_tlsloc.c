/*
 * test_tlsloc: the location tlsloc resolves from outside a process gives,
 * through tlsloc_eval and each thread's thread pointer, the true address of
 * that thread's otel_thread_ctx_v1.
 *
 * The writers (tlsloc_writer.c, built several ways) report per thread its
 * tid, thread pointer, &otel_thread_ctx_v1 and the pointer's value over a
 * pipe and then wait; everything here is read back from the stopped-still
 * child with process_vm_readv, as the agent does. No sleeps: the test only
 * waits for lines the writer has to write.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "tlsloc.h"

#define MAX_LINES 16

/* One line of a writer: a thread and where its variable really is. */
struct thread_line {
	int idx;	/* thread index in the writer, 0 = main thread */
	int tid;	/* kernel thread id */
	uint64_t tp;	/* thread pointer (FS base) */
	uint64_t addr;	/* &otel_thread_ctx_v1, 0 if the thread never touched it */
	uint64_t value; /* otel_thread_ctx_v1 */
};

/* A running writer. */
struct writer {
	pid_t pid;			     /* its process id */
	int to_child;			     /* its stdin: closing it ends the writer */
	struct thread_line lines[MAX_LINES]; /* what its threads reported */
	size_t n;			     /* lines read */
};

static int writer_start(const char *exe, const char *arg, struct writer *w)
{
	int in[2], out[2];
	char line[256];
	FILE *f;

	memset(w, 0, sizeof(*w));
	if (pipe(in) || pipe(out))
		return -errno;
	w->pid = fork();
	if (w->pid < 0)
		return -errno;
	if (w->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(exe, exe, arg, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	w->to_child = in[1];
	f = fdopen(out[0], "r");
	while (f && fgets(line, sizeof(line), f)) {
		struct thread_line *t = &w->lines[w->n];
		unsigned long long tp, addr, value;

		if (line[0] == 'R')
			break;
		if (w->n < MAX_LINES && sscanf(line, "T %x %x %llx %llx %llx", (unsigned *)&t->idx,
					       (unsigned *)&t->tid, &tp, &addr, &value) == 5) {
			t->tp = tp;
			t->addr = addr;
			t->value = value;
			w->n++;
		}
	}
	if (f)
		fclose(f);
	return w->n ? 0 : -EIO;
}

static void writer_stop(struct writer *w)
{
	int status;

	if (w->pid <= 0)
		return;
	close(w->to_child);
	waitpid(w->pid, &status, 0);
	w->pid = 0;
}

/* Every thread that touched the variable evaluates to its true address. */
static void check_threads(const char *name, const struct writer *w, const struct tp_tls_loc *loc)
{
	pid_t pid = w->pid;

	for (size_t i = 0; i < w->n; i++) {
		const struct thread_line *t = &w->lines[i];
		uint64_t addr = 0, value = 0;
		int err = tlsloc_eval(loc, t->tp, tlsloc_read_pid, &pid, &addr);

		if (!t->addr) {
			/* static TLS exists in every thread; a dtv entry once the thread used it */
			CHECK(loc->kind == TP_TLS_DTV ? err == -ENOENT : err == 0,
			      "%s: thread %d never touched the variable: eval %d", name, t->idx,
			      err);
			continue;
		}
		CHECK(err == 0 && addr == t->addr,
		      "%s: thread %d (tid %d): eval %d gives 0x%" PRIx64 ", true 0x%" PRIx64, name,
		      t->idx, t->tid, err, addr, t->addr);
		CHECK(procmem_read(pid, addr, &value, sizeof(value)) == 0 && value == t->value,
		      "%s: thread %d: the pointer read there is the thread's (0x%" PRIx64 ")", name,
		      t->idx, value);
	}
}

/*
 * Runs a writer, resolves with flags, checks kind (or any kind when
 * want_kind < 0) and method, and evaluates every thread. Returns the
 * resolved location in *out when not NULL.
 */
static void run_case(const char *name, const char *exe, const char *arg, unsigned flags,
		     int want_kind, enum tlsloc_method want_method, struct tp_tls_loc *out)
{
	struct tp_tls_loc loc;
	struct tlsloc_info info;
	struct writer w;
	int err;

	err = writer_start(exe, arg, &w);
	CHECK(err == 0 && w.n >= 4, "%s: writer reported its threads (%d, %zu)", name, err, w.n);
	if (err) {
		writer_stop(&w);
		return;
	}
	err = tlsloc_resolve(w.pid, flags, &loc, &info);
	CHECK(err == 0, "%s: resolve: %d", name, err);
	CHECK(want_kind < 0 ? loc.kind != TP_TLS_NONE : loc.kind == (uint32_t)want_kind,
	      "%s: kind %u", name, loc.kind);
	CHECK(info.method == want_method, "%s: method %d", name, info.method);
	printf("%s: kind %u method %d module %s st_value %" PRIu64 " tls_offset %" PRIu64
	       " modid %" PRIu64 " tp_offset %" PRId64 "\n",
	       name, loc.kind, info.method, info.module, info.sym_value, info.tls_offset,
	       info.modid, (int64_t)loc.tp_offset);
	if (!err)
		check_threads(name, &w, &loc);
	if (out)
		*out = loc;
	writer_stop(&w);
}

/* The executable's own variable: the link_map and the PT_TLS computation agree. */
static void test_exe(const char *name, const char *exe, enum tlsloc_method method)
{
	struct tp_tls_loc a = {0}, b = {0};
	char name2[64];

	run_case(name, exe, NULL, 0, TP_TLS_STATIC, method, &a);
	snprintf(name2, sizeof(name2), "%s (PT_TLS only)", name);
	run_case(name2, exe, NULL, TLSLOC_NO_LINK_MAP, TP_TLS_STATIC, TLSLOC_PT_TLS, &b);
	CHECK(a.tp_offset == b.tp_offset, "%s: same offset both ways (%" PRId64 ", %" PRId64 ")",
	      name, (int64_t)a.tp_offset, (int64_t)b.tp_offset);
}

static void test_sdk_records(void)
{
	struct tp_tls_loc loc;
	struct writer w;
	pid_t pid;

	CHECK(writer_start(WRITER_SDK, NULL, &w) == 0, "sdk writer started");
	pid = w.pid;
	CHECK(tlsloc_resolve(pid, 0, &loc, NULL) == 0, "sdk: resolve");
	for (size_t i = 0; i < w.n; i++) {
		uint64_t addr = 0, rec = 0;
		uint8_t head[28] = {0};

		if (tlsloc_eval(&loc, w.lines[i].tp, tlsloc_read_pid, &pid, &addr) ||
		    procmem_read(pid, addr, &rec, sizeof(rec)) ||
		    procmem_read(pid, rec, head, sizeof(head))) {
			CHECK(false, "sdk: thread %d record unreadable", w.lines[i].idx);
			continue;
		}
		CHECK(head[0] == 0x10 + w.lines[i].idx && head[15] == 15 && head[24] == 1 &&
			  head[25] == 1,
		      "sdk: thread %d record holds its trace id, valid, flags", w.lines[i].idx);
	}
	writer_stop(&w);
}

static int read_const(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const uint64_t *words = ctx; /* [0]: dtv pointer, [1]: block pointer */

	if (len != 8)
		return -EINVAL;
	memcpy(buf, addr == 0x1000 + 8 ? &words[0] : &words[1], 8);
	return addr == 0x1000 + 8 || addr == 0x5000 + 3 * 16 ? 0 : -EFAULT;
}

/* tlsloc_eval on hand-made memory: the arithmetic the BPF sampler mirrors. */
static void test_eval_arith(void)
{
	struct tp_tls_loc st = {.kind = TP_TLS_STATIC, .tp_offset = -0x48};
	struct tp_tls_loc dtv = {
	    .kind = TP_TLS_DTV, .dtv_stride = 16, .dtv_offset = 8, .modid = 3, .sym_offset = 0x20};
	struct tp_tls_loc none = {0};
	uint64_t words[2] = {0x5000, 0x9000}, addr = 0;

	CHECK(tlsloc_eval(&st, 0x7000, read_const, words, &addr) == 0 && addr == 0x7000 - 0x48,
	      "static: tp + tp_offset");
	CHECK(tlsloc_eval(&dtv, 0x1000, read_const, words, &addr) == 0 && addr == 0x9020,
	      "dtv: dtv[modid].val + sym_offset (0x%" PRIx64 ")", addr);
	words[1] = UINT64_MAX;
	CHECK(tlsloc_eval(&dtv, 0x1000, read_const, words, &addr) == -ENOENT,
	      "dtv: unallocated entry");
	CHECK(tlsloc_eval(&dtv, 0x2000, read_const, words, &addr) == -EFAULT, "dtv: read error");
	CHECK(tlsloc_eval(&none, 0x1000, read_const, words, &addr) == -ENOENT, "none");
}

/* The mapped file of this process whose path contains part; "" when none. */
static void mapped_path(const char *part, char *out, size_t len)
{
	char line[4096];
	FILE *f = fopen("/proc/self/maps", "r");

	out[0] = '\0';
	while (f && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');

		if (p && strstr(p, part)) {
			p[strcspn(p, "\n")] = '\0';
			snprintf(out, len, "%s", p);
			break;
		}
	}
	if (f)
		fclose(f);
}

/*
 * The resolver's symbol lookup (the GNU hash table of .dynsym) finds every
 * defined dynamic symbol of path that a walk of the table finds, at the
 * value of a symbol of that name (versioned names repeat).
 */
static void test_symbol_lookup(const char *path)
{
	int fd = open(path, O_RDONLY), found = 0, wrong = 0, missed = 0, type;
	Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
	Elf_Scn *scn = NULL;
	uint64_t value;

	CHECK(elf != NULL, "%s opened as ELF", path);
	while (elf && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 1; i < n; i++) {
			GElf_Sym sym, o;
			const char *name;
			bool same = false;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
			    !(name = elf_strptr(elf, sh.sh_link, sym.st_name)) || !*name)
				continue;
			if (tlsloc_file_symbol(path, name, &value, &type) != 1) {
				missed++;
				continue;
			}
			found++;
			for (size_t j = 1; j < n && !same; j++) {
				const char *on;

				same = gelf_getsym(d, (int)j, &o) && o.st_shndx != SHN_UNDEF &&
				       o.st_value == value &&
				       (on = elf_strptr(elf, sh.sh_link, o.st_name)) &&
				       !strcmp(on, name);
			}
			wrong += !same;
		}
	}
	CHECK(found > 0 && missed == 0 && wrong == 0,
	      "%s: %d dynamic symbols found by hash, %d missed, %d at a wrong value", path, found,
	      missed, wrong);
	CHECK(tlsloc_file_symbol(path, "tp_no_such_symbol_anywhere", &value, &type) == 0,
	      "%s: an undefined name is not found", path);
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
}

/*
 * Another look at a process reads only the files it did not map at the
 * last one: none when nothing changed, the new library after a dlopen of
 * one without the symbol; and a library with the symbol loaded later is
 * found (this test process is the process looked at).
 */
static void test_new_library(void)
{
	struct tp_tls_loc loc;
	uint64_t n;

	CHECK(tlsloc_resolve(getpid(), 0, &loc, NULL) == 0 && loc.kind == TP_TLS_NONE,
	      "no symbol yet");
	n = tlsloc_files_read();
	CHECK(tlsloc_resolve(getpid(), 0, &loc, NULL) == 0 && loc.kind == TP_TLS_NONE &&
		  tlsloc_files_read() == n,
	      "nothing new mapped: no file read (%" PRIu64 " more)", tlsloc_files_read() - n);
	CHECK(dlopen(PLAIN_DSO, RTLD_NOW) != NULL, "dlopen %s: %s", PLAIN_DSO, dlerror());
	CHECK(tlsloc_resolve(getpid(), 0, &loc, NULL) == 0 && loc.kind == TP_TLS_NONE &&
		  tlsloc_files_read() == n + 1,
	      "a library without the symbol loaded: that file read, and only it (%" PRIu64 ")",
	      tlsloc_files_read() - n);
	CHECK(dlopen(DSO_GD, RTLD_NOW) != NULL, "dlopen %s: %s", DSO_GD, dlerror());
	CHECK(tlsloc_resolve(getpid(), 0, &loc, NULL) == 0 && loc.kind == TP_TLS_DTV,
	      "a library with the symbol loaded later: found (kind %u)", loc.kind);
}

int main(void)
{
	struct tp_tls_loc loc;
	struct tlsloc_info info;

	test_eval_arith();
	{
		char libc[4096], ld[4096];
		uint64_t value;
		int type;

		elf_version(EV_CURRENT);
		mapped_path("libc.so", libc, sizeof(libc));
		mapped_path("ld-linux", ld, sizeof(ld));
		CHECK(libc[0] && ld[0], "libc and the dynamic linker found in /proc/self/maps");
		if (libc[0])
			test_symbol_lookup(libc);
		if (ld[0])
			test_symbol_lookup(ld);
		test_symbol_lookup(DSO_GD);
		CHECK(tlsloc_file_symbol(DSO_GD, TLSLOC_SYMBOL, &value, &type) == 1 &&
			  type == STT_TLS,
		      "the writer library's %s found, a TLS symbol", TLSLOC_SYMBOL);
		CHECK(tlsloc_file_symbol("/proc/self/status", TLSLOC_SYMBOL, &value, &type) < 0,
		      "not an ELF file: an error");
	}
	test_exe("exe PIE", WRITER_PIE, TLSLOC_LINK_MAP);
	test_exe("exe non-PIE", WRITER_NOPIE, TLSLOC_LINK_MAP);
	test_exe("exe initial-exec", WRITER_IE, TLSLOC_LINK_MAP);
	test_exe("exe global-dynamic relaxed", WRITER_GD, TLSLOC_LINK_MAP);
	test_exe("exe, symbol not exported", WRITER_HIDDEN, TLSLOC_LINK_MAP);
#ifdef WRITER_STATIC
	run_case("static exe", WRITER_STATIC, NULL, 0, TP_TLS_STATIC, TLSLOC_PT_TLS, NULL);
#endif
	run_case("sdk", WRITER_SDK, NULL, 0, TP_TLS_STATIC, TLSLOC_LINK_MAP, NULL);
	test_sdk_records();
	run_case("dlopen", WRITER_DLOPEN, DSO_GD, 0, TP_TLS_DTV, TLSLOC_LINK_MAP, NULL);
	run_case("dlopen tlsdesc", WRITER_DLOPEN, DSO_DESC, 0, -1, TLSLOC_LINK_MAP, NULL);

	/* A dlopen'ed module's dynamic TLS is not computable from PT_TLS. */
	{
		struct writer w;

		CHECK(writer_start(WRITER_DLOPEN, DSO_GD, &w) == 0, "dlopen writer started");
		CHECK(tlsloc_resolve(w.pid, TLSLOC_NO_LINK_MAP, &loc, NULL) == -EOPNOTSUPP,
		      "dlopen without the link_map: -EOPNOTSUPP");
		writer_stop(&w);
	}
	/* This test process has no otel_thread_ctx_v1: TP_TLS_NONE, not an error. */
	CHECK(tlsloc_resolve(getpid(), 0, &loc, &info) == 0 && loc.kind == TP_TLS_NONE &&
		  info.method == TLSLOC_NOT_FOUND,
	      "no symbol: TP_TLS_NONE");
	CHECK(tlsloc_resolve(0x3ffffff0, 0, &loc, NULL) == -ENOENT, "no such process: -ENOENT");
	test_new_library();
	return check_done();
}
