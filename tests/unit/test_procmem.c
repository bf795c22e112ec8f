/*
 * test_procmem: the maps parser on hand-written text (the kernel's edge
 * cases and malformed input), then the readers on this process itself:
 * its maps, a mapped file opened from outside, its executable's path and
 * its start time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "check.h"
#include "procmem.h"

static bool str_eq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

static void test_parse(void)
{
	static const char text[] =
	    "55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 1234 /usr/bin/prog\n"
	    "55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 1234 /usr/bin/prog\n"
	    "7f0000000000-7f0000001000 r-xp 00000000 00:00 0 \n"
	    "7f0000002000-7f0000003000 r-xp 00002000 fd:02 99 /tmp/my lib.so (deleted)\n"
	    "7f0000004000-7f0000005000 rw-s 00000000 00:01 7    /memfd:OTEL_CTX (deleted)\n"
	    "7f0000006000-7f0000006000 rw-p 00000000 00:00 0\n"
	    "\n"
	    "7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                  [vdso]";
	struct procmem_maps maps;
	const struct procmem_map *m;

	CHECK(procmem_maps_parse(text, sizeof(text) - 1, &maps) == 0 && maps.n == 6,
	      "6 mappings, got %zu", maps.n);
	if (maps.n != 6)
		goto out;
	m = &maps.maps[1];
	CHECK(m->start == 0x55d0c0a01000ULL && m->end == 0x55d0c0a02000ULL && m->offset == 0x1000 &&
		  m->inode == 1234 && m->dev == makedev(8, 1) && str_eq(m->perms, "r-xp") &&
		  !m->deleted && str_eq(m->path, "/usr/bin/prog") && procmem_map_is_file(m),
	      "prog mapping");
	m = &maps.maps[2];
	CHECK(str_eq(m->path, "") && m->inode == 0 && !procmem_map_is_file(m), "anonymous");
	m = &maps.maps[3];
	CHECK(m->deleted && str_eq(m->path, "/tmp/my lib.so") && m->dev == makedev(0xfd, 2),
	      "deleted path with a space: '%s'", m->path);
	m = &maps.maps[4];
	CHECK(m->deleted && str_eq(m->path, "/memfd:OTEL_CTX") && str_eq(m->perms, "rw-s"),
	      "memfd");
	m = &maps.maps[5];
	CHECK(str_eq(m->path, "[vdso]") && m->start == 0x7ffd00000000ULL,
	      "empty mapping and blank line skipped, last line without newline");
out:
	procmem_maps_free(&maps);
	procmem_maps_free(&maps); /* freed maps are zeroed */

	static const char *const bad[] = {
	    "garbage\n",
	    "1000-2000 r-xp 00000000 08:01\n",				  /* no inode */
	    "1000-2000 r-xp 00000000 0801 5 /x\n",			  /* no ':' in the device */
	    "1000 r-xp 00000000 08:01 5 /x\n",				  /* no end */
	    "1000-2000 r-x 00000000 08:01 5 /x\n",			  /* short perms */
	    "1000-2000 r-xp 00000000 08:01 5x /x\n",			  /* junk after the inode */
	    "0x1000-2000 r-xp 00000000 08:01 5 /x\n",			  /* not the kernel's hex */
	    "3000-4000 r-xp 0 08:01 5 /a\n1000-2000 r-xp 0 08:01 5 /b\n", /* out of order */
	    "1000-3000 r-xp 0 08:01 5 /a\n2000-4000 r-xp 0 08:01 5 /b\n", /* overlapping */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int err = procmem_maps_parse(bad[i], strlen(bad[i]), &maps);

		CHECK(err == -EIO && maps.n == 0 && !maps.maps, "malformed #%zu refused: %d", i,
		      err);
	}
	CHECK(procmem_maps_parse("", 0, &maps) == 0 && maps.n == 0, "empty text");
	procmem_maps_free(&maps);
}

/* This process's maps: the mapping of test_parse's code, opened from outside. */
static void test_self(void)
{
	uint64_t here = (uint64_t)(uintptr_t)&test_parse;
	const struct procmem_map *code = NULL;
	char exe[PROCMEM_PATH_MAX];
	struct procmem_maps maps;
	struct stat st, want;
	bool deleted = true;
	int fd;

	CHECK(procmem_maps_read(getpid(), &maps) == 0 && maps.n > 0, "own maps");
	for (size_t i = 0; i < maps.n; i++)
		if (here >= maps.maps[i].start && here < maps.maps[i].end)
			code = &maps.maps[i];
	CHECK(code && code->perms[2] == 'x' && procmem_map_is_file(code), "code mapping");
	CHECK(procmem_exe_path(getpid(), exe, sizeof(exe), &deleted) == 0 && !deleted &&
		  exe[0] == '/',
	      "exe path '%s'", exe);
	if (code) {
		CHECK(str_eq(code->path, exe), "code in %s, exe %s", code->path, exe);
		fd = procmem_open_mapped(getpid(), code, &st);
		CHECK(fd >= 0 && stat(exe, &want) == 0 && st.st_ino == want.st_ino &&
			  st.st_ino == code->inode,
		      "mapped file opened: %d", fd);
		if (fd >= 0)
			close(fd);
		/* the same file by stat alone, outside a scope and (kept) inside one */
		memset(&st, 0, sizeof(st));
		CHECK(procmem_stat_mapped(getpid(), code, &st) == 0 && st.st_ino == want.st_ino &&
			  st.st_dev == want.st_dev && st.st_size == want.st_size,
		      "mapped file stat'ed");
		procmem_maps_scope_begin(getpid());
		for (int k = 0; k < 2; k++) {
			memset(&st, 0, sizeof(st));
			CHECK(procmem_stat_mapped(getpid(), code, &st) == 0 &&
				  st.st_ino == want.st_ino && st.st_dev == want.st_dev,
			      "mapped file stat'ed in a scope, time %d", k + 1);
		}
		procmem_maps_scope_end();
		{
			struct procmem_map gone = *code;

			gone.start = 0x1000; /* no such mapping: map_files fails, */
			gone.end = 0x2000;   /* the path is checked against the inode */
			gone.inode = want.st_ino + 1;
			CHECK(procmem_stat_mapped(getpid(), &gone, &st) == -ENOENT,
			      "a path naming another inode: -ENOENT");
		}
	}
	CHECK(procmem_exe_path(getpid(), exe, 4, NULL) == -ENAMETOOLONG, "short buffer");
	procmem_maps_free(&maps);
	CHECK(procmem_maps_read(0x7ffffff0, &maps) == -ENOENT, "no such process");
}

static void test_start_time(void)
{
	uint64_t t = procmem_start_time(getpid());

	CHECK(t > 0 && t == procmem_start_time(getpid()), "own start time %llu",
	      (unsigned long long)t);
	CHECK(procmem_start_time(1) <= t, "init started first");
	CHECK(procmem_start_time(0x7ffffff0) == 0, "no such process: 0");
}

/* The fingerprint follows libraries and published mappings, not anonymous memory. */
static uint64_t fp_of(const char *text)
{
	struct procmem_maps maps;
	uint64_t fp = 0;

	if (procmem_maps_parse(text, strlen(text), &maps) == 0) {
		fp = procmem_maps_fingerprint(&maps);
		procmem_maps_free(&maps);
	}
	return fp;
}

static void test_fingerprint(void)
{
	static const char base[] =
	    "55d0c0a00000-55d0c0a01000 r-xp 00000000 08:01 1234 /usr/bin/prog\n"
	    "55d0c0c00000-55d0c0c21000 rw-p 00000000 00:00 0 [heap]\n"
	    "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
	    "7f0000002000-7f0000003000 r-xp 00000000 08:01 55 /usr/lib/libc.so.6\n"
	    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n";
	/* heap grown, a new anonymous region, a larger stack: the same */
	static const char grown[] =
	    "55d0c0a00000-55d0c0a01000 r-xp 00000000 08:01 1234 /usr/bin/prog\n"
	    "55d0c0c00000-55d0c0c99000 rw-p 00000000 00:00 0 [heap]\n"
	    "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
	    "7f0000001000-7f0000001800 rw-p 00000000 00:00 0 \n"
	    "7f0000002000-7f0000003000 r-xp 00000000 08:01 55 /usr/lib/libc.so.6\n"
	    "7ffcfff00000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n";
	/* a library loaded */
	static const char dlopened[] =
	    "55d0c0a00000-55d0c0a01000 r-xp 00000000 08:01 1234 /usr/bin/prog\n"
	    "7f0000002000-7f0000003000 r-xp 00000000 08:01 55 /usr/lib/libc.so.6\n"
	    "7f0000005000-7f0000006000 r-xp 00000000 08:01 77 /opt/app/libtraceprof-sdk.so\n";
	/* a process context published */
	static const char published[] =
	    "55d0c0a00000-55d0c0a01000 r-xp 00000000 08:01 1234 /usr/bin/prog\n"
	    "7f0000002000-7f0000003000 r-xp 00000000 08:01 55 /usr/lib/libc.so.6\n"
	    "7f0000008000-7f0000009000 r--p 00000000 00:00 0 [anon:OTEL_CTX]\n";
	/* a data file mapped (a database's shared memory segment): no module */
	static const char data[] =
	    "55d0c0a00000-55d0c0a01000 r-xp 00000000 08:01 1234 /usr/bin/prog\n"
	    "55d0c0c00000-55d0c0c21000 rw-p 00000000 00:00 0 [heap]\n"
	    "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
	    "7f0000001000-7f0000002000 rw-s 00000000 00:19 4242 /dev/shm/PostgreSQL.1\n"
	    "7f0000002000-7f0000003000 r-xp 00000000 08:01 55 /usr/lib/libc.so.6\n"
	    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n";
	/* a context published in a memfd (no code in it) */
	static const char memfd[] =
	    "55d0c0a00000-55d0c0a01000 r-xp 00000000 08:01 1234 /usr/bin/prog\n"
	    "55d0c0c00000-55d0c0c21000 rw-p 00000000 00:00 0 [heap]\n"
	    "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
	    "7f0000001000-7f0000002000 r--s 00000000 00:01 99 /memfd:OTEL_CTX (deleted)\n"
	    "7f0000002000-7f0000003000 r-xp 00000000 08:01 55 /usr/lib/libc.so.6\n"
	    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n";
	/* a library's read-only segment goes with its code */
	static const char rodata[] =
	    "55d0c0a00000-55d0c0a01000 r-xp 00000000 08:01 1234 /usr/bin/prog\n"
	    "55d0c0c00000-55d0c0c21000 rw-p 00000000 00:00 0 [heap]\n"
	    "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
	    "7f0000001000-7f0000002000 r--p 00000000 08:01 55 /usr/lib/libc.so.6\n"
	    "7f0000002000-7f0000003000 r-xp 00000000 08:01 55 /usr/lib/libc.so.6\n"
	    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n";
	/* perf's and BPF's ring buffers mapped (a profiler starting to record) */
	static const char rings[] =
	    "55d0c0a00000-55d0c0a01000 r-xp 00000000 08:01 1234 /usr/bin/prog\n"
	    "55d0c0c00000-55d0c0c21000 rw-p 00000000 00:00 0 [heap]\n"
	    "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
	    "7f0000001000-7f0000001800 rw-s 00000000 00:10 1038 anon_inode:[perf_event]\n"
	    "7f0000001800-7f0000001c00 r--s 00000000 00:10 1038 anon_inode:bpf-map\n"
	    "7f0000002000-7f0000003000 r-xp 00000000 08:01 55 /usr/lib/libc.so.6\n"
	    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n";
	/* the same program loaded elsewhere (a new exec) */
	static const char moved[] =
	    "55d0c0b00000-55d0c0b01000 r-xp 00000000 08:01 1234 /usr/bin/prog\n"
	    "7f0000002000-7f0000003000 r-xp 00000000 08:01 55 /usr/lib/libc.so.6\n";
	uint64_t f = fp_of(base);

	CHECK(f != 0, "fingerprint never 0");
	CHECK(fp_of(grown) == f, "heap, stack and anonymous memory do not count");
	CHECK(fp_of(dlopened) != f, "a loaded library counts");
	CHECK(fp_of(published) != f && fp_of(published) != fp_of(dlopened),
	      "a named mapping counts");
	CHECK(fp_of(moved) != f, "load addresses count");
	CHECK(fp_of(data) == f, "a data file mapped does not count");
	CHECK(fp_of(rings) == f, "perf and BPF ring buffers do not count");
	CHECK(fp_of(memfd) != f, "a memfd counts (it may hold a process context)");
	CHECK(fp_of(rodata) != f, "another segment of a file with code counts");
	CHECK(fp_of("") != 0, "no mappings: still not 0");
}

/* In a scope the maps come from the kernel once; after it, fresh again. */
static void test_scope(void)
{
	struct procmem_maps m1, m2, m3;
	void *page;

	procmem_maps_scope_begin(getpid());
	CHECK(procmem_maps_read(getpid(), &m1) == 0, "read in scope");
	page = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(page != MAP_FAILED, "mmap");
	CHECK(procmem_maps_read(getpid(), &m2) == 0 && m2.n == m1.n,
	      "same text in scope (%zu, %zu)", m1.n, m2.n);
	procmem_maps_scope_end();
	CHECK(procmem_maps_read(getpid(), &m3) == 0 && m3.n != m1.n,
	      "fresh after the scope (%zu, was %zu)", m3.n, m1.n);
	munmap(page, 4096);
	procmem_maps_free(&m1);
	procmem_maps_free(&m2);
	procmem_maps_free(&m3);
}

int main(void)
{
	test_parse();
	test_fingerprint();
	test_scope();
	test_self();
	test_start_time();
	return check_done();
}
