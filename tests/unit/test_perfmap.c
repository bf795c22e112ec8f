/*
 * test_perfmap: JIT names from perf maps (/tmp/perf-<pid>.map).
 *
 * The reader (perfmap.c) against hand-written files: lookups at the edges
 * of ranges, growth (only appended lines parsed, a line still being
 * written waits), replacement (a new file, a shorter one, one rewritten in
 * place, also with the same first line), later lines winning over the ones they overlap, garbage
 * lines counted and skipped, the caps per process and over all processes, the bytes parsed per
 * pass, and files that must not be read (a FIFO, a symbolic or hard link, another user's file,
 * root's file bind-mounted by a user over its own map in its own namespaces). Then the
 * symbolizer: a child process with anonymous and memfd executable pages and a perf map naming them;
 * an address added to the map later is named once the generation moves on; ELF code keeps its
 * symbol whatever the map says.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "perfmap.h"
#include "symbolize.h"

static char dir[64]; /* the "root" of the hand-written maps */
static int dirfd_;   /* open on dir */
static struct perfmap_stats st;

static const struct perfmap_limits lim_default = {
    .max_entries = 100000,
    .max_bytes = 64u << 20,
    .total_bytes = 256u << 20,
    .pass_bytes = 8u << 20,
};

static bool str_eq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

static void write_file(const char *name, const char *mode, const char *text, size_t len)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, mode);
	if (!f) {
		perror(path);
		exit(1);
	}
	fwrite(text, 1, len, f);
	fclose(f);
}

static void put(const char *name, const char *mode, const char *text)
{
	write_file(name, mode, text, strlen(text));
}

/* Opens dir/name and updates pm from it; the update's result or -errno. */
static int update(struct perfmap *pm, const char *name, const struct perfmap_limits *lim)
{
	int fd = perfmap_open_at(dirfd_, name, getuid(), &st), r;

	if (fd < 0)
		return fd;
	r = perfmap_update(pm, fd, lim ? lim : &lim_default, &st);
	close(fd);
	return r;
}

static const char *look(const struct perfmap *pm, uint64_t addr)
{
	return perfmap_lookup(pm, addr, NULL);
}

static void test_edges_and_growth(void)
{
	struct perfmap *pm = perfmap_new();
	uint64_t lines0 = st.lines, start = 0;
	int r;

	put("grow.map", "w", "1000 100 alpha\n0x2000 0x10 beta gamma\n3000 1 one\r\n");
	r = update(pm, "grow.map", NULL);
	CHECK(r == PERFMAP_ADDED, "first read: %d", r);
	CHECK(perfmap_count(pm) == 3, "%zu entries", perfmap_count(pm));
	CHECK(look(pm, 0xfff) == NULL, "before the first entry");
	CHECK(str_eq(perfmap_lookup(pm, 0x1000, &start), "alpha") && start == 0x1000, "first byte");
	CHECK(str_eq(look(pm, 0x10ff), "alpha"), "last byte");
	CHECK(look(pm, 0x1100) == NULL, "one past the end");
	CHECK(str_eq(look(pm, 0x2000), "beta gamma"), "0x prefixes, a name with a space");
	CHECK(str_eq(look(pm, 0x200f), "beta gamma"), "last byte of beta");
	CHECK(look(pm, 0x2010) == NULL, "past beta");
	CHECK(str_eq(look(pm, 0x3000), "one"), "size 1, CRLF line end: %s", look(pm, 0x3000));
	CHECK(look(pm, 0x3001) == NULL, "past one");

	/* nothing new: nothing changes */
	CHECK(update(pm, "grow.map", NULL) == 0, "unchanged file");
	/* appended: one complete line, one still being written */
	put("grow.map", "a", "4000 10 delta\n5000 10 eps");
	CHECK(update(pm, "grow.map", NULL) == PERFMAP_ADDED, "appended");
	CHECK(str_eq(look(pm, 0x4005), "delta"), "appended line");
	CHECK(look(pm, 0x5000) == NULL, "a line without its end waits");
	put("grow.map", "a", "ilon\n");
	CHECK(update(pm, "grow.map", NULL) == PERFMAP_ADDED, "the line completed");
	CHECK(str_eq(look(pm, 0x5000), "epsilon"), "the completed line: %s", look(pm, 0x5000));
	CHECK(str_eq(look(pm, 0x1000), "alpha"), "earlier entries stay");
	CHECK(st.lines - lines0 == 5, "each line parsed once: %llu",
	      (unsigned long long)(st.lines - lines0));
	CHECK(st.rereads == 0, "no re-read: %llu", (unsigned long long)st.rereads);
	perfmap_free(pm, &st);
}

static void test_overlaps(void)
{
	struct perfmap *pm = perfmap_new();
	int r;

	put("over.map", "w", "1000 100 old\n2000 100 keep\n");
	update(pm, "over.map", NULL);
	/* a JIT reused the space of "old": the new entry wins, the old one goes whole */
	put("over.map", "a", "1080 10 new\n");
	r = update(pm, "over.map", NULL);
	CHECK(r == (PERFMAP_ADDED | PERFMAP_REPLACED), "overlap: %d", r);
	CHECK(str_eq(look(pm, 0x1085), "new"), "the later entry wins");
	CHECK(look(pm, 0x1000) == NULL && look(pm, 0x10ff) == NULL, "the earlier one is dropped");
	CHECK(str_eq(look(pm, 0x2000), "keep"), "others stay");
	/* the same range again: the later name */
	put("over.map", "a", "1080 10 newer\n");
	CHECK(update(pm, "over.map", NULL) == (PERFMAP_ADDED | PERFMAP_REPLACED), "same range");
	CHECK(str_eq(look(pm, 0x1080), "newer"), "same range: the later name");
	/* overlaps within one read: x(0-100, 2nd), y(10-20, 3rd), z(50-60, 1st): only y */
	put("over.map", "a", "8050 10 z\n8000 100 x\n8010 10 y\n");
	update(pm, "over.map", NULL);
	CHECK(str_eq(look(pm, 0x8015), "y"), "y wins");
	CHECK(look(pm, 0x8000) == NULL && look(pm, 0x8055) == NULL, "x and z dropped");
	/* an entry spanning two older ones replaces both */
	put("over.map", "a", "1f00 300 span\n");
	update(pm, "over.map", NULL);
	CHECK(str_eq(look(pm, 0x2000), "span") && str_eq(look(pm, 0x21ff), "span"),
	      "span replaces keep");
	CHECK(str_eq(look(pm, 0x1080), "newer"), "entries outside span stay");
	CHECK(perfmap_count(pm) == 3, "newer, span and y: %zu", perfmap_count(pm));
	perfmap_free(pm, &st);
}

/* a first line longer than the bytes kept of a file's start */
#define LONG_NAME "java.lang.invoke.LambdaForm$MH.invoke(java.lang.Object, java.lang.Object)"

static void test_replaced(void)
{
	struct perfmap *pm = perfmap_new();
	char path[128], tmp[128];
	uint64_t rereads = st.rereads;
	int r;

	put("repl.map", "w", "1000 10 first\n2000 10 second\n");
	update(pm, "repl.map", NULL);
	/* a new file (another inode) in its place: read from the start */
	put("repl.tmp", "w", "3000 10 third\n");
	snprintf(path, sizeof(path), "%s/repl.map", dir);
	snprintf(tmp, sizeof(tmp), "%s/repl.tmp", dir);
	rename(tmp, path);
	r = update(pm, "repl.map", NULL);
	CHECK(r == (PERFMAP_ADDED | PERFMAP_REPLACED), "replaced: %d", r);
	CHECK(look(pm, 0x1000) == NULL && str_eq(look(pm, 0x3000), "third"), "new file read");
	CHECK(st.rereads == rereads + 1, "re-read counted");
	/* shrunk in place */
	put("repl.map", "w", "4000 1 x\n");
	update(pm, "repl.map", NULL);
	CHECK(look(pm, 0x3000) == NULL && str_eq(look(pm, 0x4000), "x"), "shrunk file read again");
	/* rewritten in place, longer, other first bytes (a new dump) */
	put("repl.map", "w", "5000 10 dump2-a\n6000 10 dump2-b\n");
	update(pm, "repl.map", NULL);
	CHECK(look(pm, 0x4000) == NULL, "stale entry of the rewritten file");
	CHECK(str_eq(look(pm, 0x5000), "dump2-a") && str_eq(look(pm, 0x6000), "dump2-b"),
	      "rewritten file read from the start");
	/* a new dump in place: the same first line, other lines after it (a JIT's
	   dump of its whole code cache again), longer */
	put("repl.map", "w", "4f00 10 " LONG_NAME "\n6000 10 dump2-b\n");
	update(pm, "repl.map", NULL);
	CHECK(str_eq(look(pm, 0x6000), "dump2-b"), "a dump with a long first line");
	put("repl.map", "w", "4f00 10 " LONG_NAME "\n7000 10 dump3-c\n8000 10 dump3-d\n");
	update(pm, "repl.map", NULL);
	CHECK(look(pm, 0x6000) == NULL, "stale entry of the new dump: %s", look(pm, 0x6000));
	CHECK(str_eq(look(pm, 0x7000), "dump3-c") && str_eq(look(pm, 0x8000), "dump3-d"),
	      "the new dump read from the start");
	CHECK(st.rereads == rereads + 5, "five re-reads: %llu",
	      (unsigned long long)(st.rereads - rereads));
	perfmap_free(pm, &st);
}

static void test_garbage(void)
{
	struct perfmap *pm = perfmap_new();
	uint64_t bad = st.bad_lines;
	char *big = malloc(20000), *longname = malloc(PERFMAP_NAME_MAX + 64);
	static const char bytes[] = "7000 10 bad\xff\xfe"
				    "name\x01\x7f\xc3\xa9\xe2\x82\xac\xed\xa0\x80\xc0\xaf\n";

	put("bad.map", "w",
	    "zzz\n"
	    "\n"
	    "1000\n"
	    "1000 10\n"
	    "1000 10 \n"
	    "1000 0 zero\n"
	    "ffffffffffffffff 2 wraps\n"
	    "fffffffffffffff0 10 wraps-to-zero\n"
	    "12345678901234567 10 seventeen-digits\n"
	    "10g0 10 badhex\n"
	    "0x 10 nodigits\n"
	    "1000 -10 negative\n"
	    "1000 10 good\n");
	memset(longname, 'n', PERFMAP_NAME_MAX + 1);
	longname[PERFMAP_NAME_MAX + 1] = '\0';
	{
		char line[PERFMAP_NAME_MAX + 64];
		int n = snprintf(line, sizeof(line), "2000 10 %s\n", longname);

		write_file("bad.map", "a", line, (size_t)n);
	}
	memset(big, 'x', 20000);
	write_file("bad.map", "a", big, 20000); /* a line of 20000 bytes, no name */
	put("bad.map", "a", "\n3000 10 after-the-long-line\n");
	write_file("bad.map", "a", bytes, sizeof(bytes) - 1);
	update(pm, "bad.map", NULL);
	CHECK(st.bad_lines - bad == 14, "bad lines counted: %llu",
	      (unsigned long long)(st.bad_lines - bad));
	CHECK(str_eq(look(pm, 0x1000), "good"), "the good line among them");
	CHECK(look(pm, 0x2000) == NULL, "an overlong name is skipped");
	CHECK(str_eq(look(pm, 0x3000), "after-the-long-line"), "the line after a long one");
	CHECK(str_eq(look(pm, 0x7000), "bad??name??\xc3\xa9\xe2\x82\xac?????"),
	      "sanitized to UTF-8 text: %s", look(pm, 0x7000));
	CHECK(perfmap_count(pm) == 3, "%zu entries", perfmap_count(pm));

	/* random bytes: no crash, bounded, whatever parses is kept */
	srand(42);
	for (int i = 0; i < 20000; i++)
		big[i] = (char)(rand() % 4 == 0 ? '\n' : rand());
	write_file("rand.map", "w", big, 20000);
	update(pm, "rand.map", NULL);
	CHECK(perfmap_count(pm) <= 20000, "random bytes: %zu entries", perfmap_count(pm));
	free(big);
	free(longname);
	perfmap_free(pm, &st);
}

static void test_caps(void)
{
	struct perfmap_limits lim = lim_default;
	struct perfmap *a = perfmap_new(), *b = perfmap_new();
	uint64_t dropped = st.dropped, bytes0 = st.bytes;
	char line[64];
	int n;

	put("cap.map", "w", "");
	for (int i = 0; i < 20; i++) {
		n = snprintf(line, sizeof(line), "%x 10 f%d\n", 0x1000 + i * 0x100, i);
		write_file("cap.map", "a", line, (size_t)n);
	}
	lim.max_entries = 10;
	update(a, "cap.map", &lim);
	CHECK(perfmap_count(a) == 10, "entry cap: %zu", perfmap_count(a));
	CHECK(st.dropped - dropped == 10, "dropped: %llu",
	      (unsigned long long)(st.dropped - dropped));
	CHECK(str_eq(look(a, 0x1000), "f0") && look(a, 0x1a00) == NULL, "the first ones kept");
	/* over all processes: a second map gets what the first left */
	lim.max_entries = 1000;
	lim.total_bytes = st.bytes + 3 * (24 + 4);
	update(b, "cap.map", &lim);
	CHECK(perfmap_count(b) == 3, "total cap: %zu", perfmap_count(b));
	CHECK(st.bytes <= lim.total_bytes, "bytes %llu over the total cap",
	      (unsigned long long)st.bytes);
	/* per process bytes */
	perfmap_free(b, &st);
	b = perfmap_new();
	lim.total_bytes = 1u << 30;
	lim.max_bytes = 5 * (24 + 4);
	update(b, "cap.map", &lim);
	CHECK(perfmap_count(b) == 5, "byte cap: %zu", perfmap_count(b));
	perfmap_free(a, &st);
	perfmap_free(b, &st);
	CHECK(st.bytes == bytes0 && st.entries == 0, "freed maps give their bytes back: %llu",
	      (unsigned long long)st.bytes);
}

static void test_pass_bound(void)
{
	struct perfmap_limits lim = lim_default;
	struct perfmap *pm = perfmap_new();
	FILE *f;
	char path[128];
	int passes = 0;

	snprintf(path, sizeof(path), "%s/pass.map", dir);
	f = fopen(path, "w");
	for (int i = 0; i < 40000; i++) /* ~700 KiB */
		fprintf(f, "%x 10 function_number_%d\n", 0x100000 + i * 0x10, i);
	fclose(f);
	lim.pass_bytes = 1; /* the smallest pass: 128 KiB */
	while (passes < 100 && perfmap_count(pm) < 40000) {
		update(pm, "pass.map", &lim);
		passes++;
	}
	CHECK(passes >= 8 && passes <= 12, "a bounded pass each time: %d passes", passes);
	CHECK(perfmap_count(pm) == 40000, "all read in the end: %zu", perfmap_count(pm));
	CHECK(str_eq(look(pm, 0x100000 + 39999 * 0x10 + 0xf), "function_number_39999"), "last one");
	perfmap_free(pm, &st);
}

static void test_refused(void)
{
	char path[128];
	uint64_t refused = st.refused;
	int fd;

	snprintf(path, sizeof(path), "%s/fifo.map", dir);
	mkfifo(path, 0600);
	fd = perfmap_open_at(dirfd_, "fifo.map", getuid(), &st);
	CHECK(fd == -EPERM, "a FIFO is refused without blocking: %d", fd);
	CHECK(st.refused == refused + 1, "refusal counted");
	/* a symbolic link is never followed, out of the root or inside it */
	put("target.map", "w", "1000 10 inside\n");
	snprintf(path, sizeof(path), "%s/link.map", dir);
	if (symlink("/etc/hostname", path) == 0) {
		fd = perfmap_open_at(dirfd_, "link.map", getuid(), &st);
		CHECK(fd == -EPERM, "a link out of the root is refused: %d", fd);
		if (fd >= 0)
			close(fd);
	}
	snprintf(path, sizeof(path), "%s/inlink.map", dir);
	CHECK(symlink("target.map", path) == 0, "link made");
	fd = perfmap_open_at(dirfd_, "inlink.map", getuid(), &st);
	CHECK(fd == -EPERM, "a link inside the root is refused: %d", fd);
	if (fd >= 0)
		close(fd);
	/* a second name of a file (a hard link to what the user could not read) */
	snprintf(path, sizeof(path), "%s/hard.map", dir);
	{
		char target[128];

		snprintf(target, sizeof(target), "%s/target.map", dir);
		CHECK(link(target, path) == 0, "hard link made");
	}
	fd = perfmap_open_at(dirfd_, "hard.map", getuid(), &st);
	CHECK(fd == -EPERM, "a file with two names is refused: %d", fd);
	if (fd >= 0)
		close(fd);
	CHECK(perfmap_open_at(dirfd_, "missing.map", getuid(), &st) == -ENOENT, "no map");
	if (getuid() == 0) {
		/* a file of another user is refused */
		put("other.map", "w", "1000 10 x\n");
		snprintf(path, sizeof(path), "%s/other.map", dir);
		if (chown(path, 12345, 12345) == 0) {
			fd = perfmap_open_at(dirfd_, "other.map", 12345, &st);
			CHECK(fd >= 0, "the process's own user's file: %d", fd);
			if (fd >= 0)
				close(fd);
			CHECK(perfmap_open_at(dirfd_, "other.map", 54321, &st) == -EPERM,
			      "another user's file is refused");
		}
		/* root's file, for a process of another user */
		CHECK(perfmap_open_at(dirfd_, "target.map", 12345, &st) == -EPERM,
		      "root's file for another user's process is refused");
	}
}

/*
 * The attack itself: a process of an unprivileged user bind-mounts a file
 * only root may read over its own perf map, in a user and mount namespace
 * of its own, where the agent (root) would read it through /proc/PID/root.
 */
static void test_bind_mount(void)
{
	char secret[128], map[64];
	int sync_pipe[2], go[2], fd, nspid = 0;
	uid_t uid = 0;
	uint64_t refused = st.refused;
	pid_t pid;
	char c = 0;

	if (getuid() != 0) {
		printf("skip: the bind-mount check needs root\n");
		return;
	}
	char sdir[] = "/tmp/tp-perfmap-secret-XXXXXX";
	FILE *sf;

	/* a directory anyone may pass through, holding a file only root may read */
	CHECK(mkdtemp(sdir) && chmod(sdir, 0755) == 0, "secret directory");
	snprintf(secret, sizeof(secret), "%s/secret", sdir);
	sf = fopen(secret, "w");
	CHECK(sf && fputs("1000 10 root_only_secret\n", sf) >= 0 && fclose(sf) == 0,
	      "secret written");
	chmod(secret, 0600);
	signal(SIGPIPE, SIG_IGN);
	CHECK(pipe(sync_pipe) == 0 && pipe(go) == 0, "pipes");
	pid = fork();
	if (pid == 0) {
		char m[64];
		int f;

		snprintf(m, sizeof(m), "/tmp/perf-%d.map", getpid());
		unlink(m);
		if (setgid(65534) || setuid(65534))
			_exit(2);
		f = open(m, O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (f < 0)
			_exit(3);
		close(f);
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) || mount(secret, m, NULL, MS_BIND, NULL))
			_exit(4);
		c = 'r';
		if (write(sync_pipe[1], &c, 1) != 1)
			_exit(5);
		if (read(go[0], &c, 1) != 1)
			_exit(6);
		_exit(0);
	}
	close(sync_pipe[1]);
	close(go[0]);
	CHECK(read(sync_pipe[0], &c, 1) == 1 && c == 'r', "the child bind-mounted a root file");
	fd = perfmap_open(pid, &nspid, &uid, &st);
	CHECK(uid == 65534, "its user is nobody: %u", (unsigned)uid);
	CHECK(fd == -EPERM, "the bind-mounted root file is refused: %d", fd);
	CHECK(st.refused == refused + 1, "refusal counted");
	if (fd >= 0)
		close(fd);
	c = 'g';
	CHECK(write(go[1], &c, 1) == 1, "told the child to end");
	{
		int status = 0;

		waitpid(pid, &status, 0);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child: %d", status);
	}
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", pid);
	unlink(map);
	unlink(secret);
	rmdir(sdir);
	close(sync_pipe[0]);
	close(go[1]);
}

/* ---- through the symbolizer ---- */

struct pages {
	uint64_t anon;	/* an anonymous executable page */
	uint64_t memfd; /* a memfd page mapped executable */
	uint64_t text;	/* a function of this program */
};

static __attribute__((noinline)) int text_marker(int x)
{
	return x * 3 + 1;
}

static pid_t child_start(struct pages *pg)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		struct pages mine = {0};
		void *a =
		    mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		int mfd = memfd_create("jit", 0);
		void *m = MAP_FAILED;

		if (mfd >= 0 && ftruncate(mfd, 4096) == 0)
			m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_SHARED, mfd, 0);
		mine.anon = (uint64_t)(uintptr_t)a;
		mine.memfd = m == MAP_FAILED ? 0 : (uint64_t)(uintptr_t)m;
		mine.text = (uint64_t)(uintptr_t)&text_marker;
		if (write(p[1], &mine, sizeof(mine)) != (ssize_t)sizeof(mine))
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], pg, sizeof(*pg)) != (ssize_t)sizeof(*pg)) {
		close(p[0]);
		return -1;
	}
	close(p[0]);
	return pid;
}

static void test_symbolizer(void)
{
	struct sym_opts o = {.refresh_ms = -1}; /* look at the map at every miss */
	struct sym_opts off = {.no_perf_maps = true};
	struct symbolizer *sym = sym_new(&o), *plain = sym_new(&off);
	struct sym_frame f[4];
	struct sym_stats ss;
	struct pages pg;
	char map[64], text[256];
	pid_t pid = child_start(&pg);
	uint32_t gen;
	FILE *fp;
	int n;

	CHECK(pid > 0 && pg.anon, "child started");
	if (pid <= 0)
		return;
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)pid);
	fp = fopen(map, "w");
	fprintf(fp, "%llx 40 LazyCompile:*hotLoopJs /app/x.js:1\n", (unsigned long long)pg.anon);
	if (pg.memfd)
		fprintf(fp, "%llx 100 memfd_fn\n", (unsigned long long)pg.memfd);
	fprintf(fp, "%llx 100 not_this_one\n", (unsigned long long)pg.text);
	fclose(fp);

	n = sym_user(sym, pid, pg.anon + 0x10, f, 4);
	CHECK(n == 1 && str_eq(f[0].function, "LazyCompile:*hotLoopJs /app/x.js:1"),
	      "anonymous JIT code named: %s", n > 0 ? f[0].function : "");
	CHECK(n == 1 && str_eq(f[0].module, "[perf-map]") && f[0].kind == SYM_KIND_USER &&
		  f[0].address == 0 && str_eq(f[0].build_id, ""),
	      "a [perf-map] frame: %s kind %d", f[0].module, f[0].kind);
	if (pg.memfd) {
		n = sym_user(sym, pid, pg.memfd + 0xff, f, 4);
		CHECK(n == 1 && str_eq(f[0].function, "memfd_fn"), "memfd JIT code: %s",
		      f[0].function);
	}
	n = sym_user(sym, pid, pg.text, f, 4);
	CHECK(n >= 1 && str_eq(f[0].function, "text_marker"), "ELF code keeps its symbol: %s",
	      f[0].function);
	/* an address the map does not have yet: unnamed; named once appended */
	n = sym_user(sym, pid, pg.anon + 0x800, f, 4);
	CHECK(n == 1 && str_eq(f[0].function, "[anon]"), "not in the map: %s", f[0].function);
	gen = sym_names_gen(sym, pid);
	CHECK(sym_names_gen(sym, pid) == gen, "the generation holds while nothing changes");
	fp = fopen(map, "a");
	fprintf(fp, "%llx 20 later_fn\n", (unsigned long long)(pg.anon + 0x800));
	fclose(fp);
	CHECK(sym_names_gen(sym, pid) != gen, "the generation moves when a pending one is named");
	n = sym_user(sym, pid, pg.anon + 0x80f, f, 4);
	CHECK(n == 1 && str_eq(f[0].function, "later_fn"), "named after the map grew: %s",
	      f[0].function);
	n = sym_user(sym, pid, pg.anon + 0x10, f, 4);
	CHECK(n == 1 && str_eq(f[0].function, "LazyCompile:*hotLoopJs /app/x.js:1"), "cached");
	sym_get_stats(sym, &ss);
	CHECK(ss.perfmap_processes == 1 && ss.perfmap_entries == (pg.memfd ? 4u : 3u) &&
		  ss.perfmap_frames >= 3 && ss.perfmap_bytes > 0,
	      "stats: %llu processes %llu entries %llu frames",
	      (unsigned long long)ss.perfmap_processes, (unsigned long long)ss.perfmap_entries,
	      (unsigned long long)ss.perfmap_frames);
	/* turned off: anonymous as before */
	n = sym_user(plain, pid, pg.anon + 0x10, f, 4);
	CHECK(n == 1 && str_eq(f[0].function, "[anon]"), "no_perf_maps: %s", f[0].function);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* gone: what was read still answers */
	n = sym_user(sym, pid, pg.anon + 0x3f, f, 4);
	CHECK(n == 1 && str_eq(f[0].function, "LazyCompile:*hotLoopJs /app/x.js:1"),
	      "after exit: %s", f[0].function);
	sym_forget_process(sym, pid);
	sym_get_stats(sym, &ss);
	CHECK(ss.perfmap_processes == 0 && ss.perfmap_entries == 0 && ss.perfmap_bytes == 0,
	      "forgotten: %llu bytes", (unsigned long long)ss.perfmap_bytes);
	snprintf(text, sizeof(text), "%s", map);
	unlink(text);
	sym_free(sym);
	sym_free(plain);
}

int main(void)
{
	char cmd[128];

	snprintf(dir, sizeof(dir), "/tmp/tp_perfmap_XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	dirfd_ = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	test_edges_and_growth();
	test_overlaps();
	test_replaced();
	test_garbage();
	test_caps();
	test_pass_bound();
	test_refused();
	test_bind_mount();
	test_symbolizer();
	close(dirfd_);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	return check_done();
}
