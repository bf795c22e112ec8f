/*
 * test_cfi_cache.c - the CFI table cache: sharing by key, tables built by
 * the worker (not ready, then ready), negative entries for files that are
 * not ELF, the byte budget (LRU eviction, held tables never evicted,
 * tables over the budget refused) and destroy with builds queued.
 */
#include "check.h"

#include "cfi_cache.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LIBDIR "/usr/lib/x86_64-linux-gnu/"

static char self_path[4096];

static int file_key(const char *path, struct cfi_cache_key *k)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return -1;
	cfi_cache_key_file(k, st.st_dev, st.st_ino, (uint64_t)st.st_size,
			   (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Polls until the table is ready (10 s at most): the table, with a reference. */
static const struct cfi_table *wait_ready(struct cfi_cache *c, const struct cfi_cache_key *k,
					  const char *path)
{
	uint64_t end = now_ms() + 10000;
	const struct cfi_table *t;
	while (!(t = cfi_cache_get(c, k, path)) && now_ms() < end)
		usleep(1000);
	return t;
}

/* Polls until the cache's stats field at offset off reaches want. */
static int wait_stat(struct cfi_cache *c, size_t off, uint64_t want)
{
	uint64_t end = now_ms() + 10000;
	for (;;) {
		struct cfi_cache_stats st;
		cfi_cache_stats(c, &st);
		uint64_t v;
		memcpy(&v, (const char *)&st + off, sizeof(v));
		if (v >= want)
			return 0;
		if (now_ms() >= end)
			return -1;
		usleep(1000);
	}
}

static void test_not_ready_then_ready(void)
{
	struct cfi_cache *c = cfi_cache_new(NULL);
	CHECK(c != NULL, "new");
	struct cfi_cache_key k;
	CHECK(file_key(self_path, &k) == 0, "stat %s", self_path);
	CHECK(cfi_cache_get(c, &k, self_path) == NULL, "first get is not ready");
	const struct cfi_table *t = wait_ready(c, &k, self_path);
	CHECK(t != NULL && t->nrows > 0, "ready after the worker built it");
	struct cfi_cache_stats st;
	cfi_cache_stats(c, &st);
	CHECK(st.builds == 1 && st.tables == 1 && st.hits == 1 && st.misses >= 1,
	      "builds %lu tables %lu hits %lu misses %lu", (unsigned long)st.builds,
	      (unsigned long)st.tables, (unsigned long)st.hits, (unsigned long)st.misses);
	CHECK(st.bytes == cfi_table_bytes(t), "bytes %lu", (unsigned long)st.bytes);
	cfi_cache_put(c, t);
	cfi_cache_destroy(c);
}

/* release drops a table nobody else holds at once; failed() names negative entries */
static void built(void *arg)
{
	__atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

static void test_release_and_failed(void)
{
	int nbuilt = 0;
	struct cfi_cache_opts o = {.on_built = built, .on_built_arg = &nbuilt};
	struct cfi_cache *c = cfi_cache_new(&o);
	struct cfi_cache_key k, bad;
	struct cfi_cache_stats st;
	CHECK(file_key(self_path, &k) == 0, "stat %s", self_path);
	const struct cfi_table *t1 = wait_ready(c, &k, self_path);
	const struct cfi_table *t2 = cfi_cache_get(c, &k, self_path);
	CHECK(t1 && t1 == t2, "two references to one table");
	cfi_cache_release(c, t1);
	cfi_cache_stats(c, &st);
	CHECK(st.tables == 1 && st.released == 0, "held by the other reference: kept");
	cfi_cache_release(c, t2);
	cfi_cache_stats(c, &st);
	CHECK(st.tables == 0 && st.bytes == 0 && st.released == 1, "released: gone at once");
	CHECK(!cfi_cache_failed(c, &k), "a released table is no failure");
	const struct cfi_table *t3 = wait_ready(c, &k, self_path);
	CHECK(t3 != NULL, "built again after release");
	cfi_cache_reject(c, t3);
	cfi_cache_stats(c, &st);
	CHECK(st.tables == 0 && st.rejected == 1, "rejected: gone, counted");
	CHECK(cfi_cache_failed(c, &k), "rejected: a negative entry");
	CHECK(cfi_cache_get(c, &k, self_path) == NULL, "rejected: not built again at once");
	cfi_cache_key_file(&bad, 0, 3, 0, 0);
	CHECK(!cfi_cache_failed(c, &bad), "unknown: no failure");
	CHECK(cfi_cache_get(c, &bad, "/nonexistent/c") == NULL, "not ready");
	CHECK(wait_stat(c, offsetof(struct cfi_cache_stats, build_failures), 1) == 0, "fails");
	CHECK(cfi_cache_failed(c, &bad), "failed: a negative entry");
	/* the worker tells after it filed the build: wait for it a little */
	for (int i = 0; i < 1000 && __atomic_load_n(&nbuilt, __ATOMIC_SEQ_CST) < 3; i++)
		usleep(1000);
	CHECK(__atomic_load_n(&nbuilt, __ATOMIC_SEQ_CST) == 3, "told of every build (%d)", nbuilt);
	cfi_cache_destroy(c);
}

static void test_sharing(void)
{
	const char *a = "/lib/x86_64-linux-gnu/liblzma.so.5", *b = LIBDIR "liblzma.so.5";
	struct cfi_cache_key k, kb;
	if (file_key(a, &k) != 0 || file_key(b, &kb) != 0) {
		fprintf(stderr, "skip sharing: no liblzma.so.5\n");
		return;
	}
	CHECK(memcmp(&k, &kb, sizeof(k)) == 0, "one file, one key");
	struct cfi_cache *c = cfi_cache_new(NULL);
	const struct cfi_table *t1 = wait_ready(c, &k, a);
	int fd = open(b, O_RDONLY | O_CLOEXEC);
	const struct cfi_table *t2 = cfi_cache_get_fd(c, &kb, fd);
	close(fd);
	CHECK(t1 != NULL && t1 == t2, "two paths, one key: one table");

	/* The same file under another key (a build id): a table of its own. */
	struct cfi_cache_key kid;
	const uint8_t id[20] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3};
	CHECK(cfi_cache_key_build_id(&kid, id, sizeof(id)) == 0, "build id key");
	const struct cfi_table *t3 = wait_ready(c, &kid, b);
	CHECK(t3 != NULL && t3 != t1 && t3->nrows == t1->nrows, "another key: another table");
	struct cfi_cache_stats st;
	cfi_cache_stats(c, &st);
	CHECK(st.builds == 2 && st.tables == 2, "builds %lu tables %lu", (unsigned long)st.builds,
	      (unsigned long)st.tables);
	cfi_cache_put(c, t1);
	cfi_cache_put(c, t2);
	cfi_cache_put(c, t3);
	cfi_cache_destroy(c);
}

static void test_not_elf(void)
{
	char path[] = "/tmp/test_cfi_cache_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp");
	CHECK(write(fd, "not an ELF file\n", 16) == 16, "write");
	close(fd);
	struct cfi_cache_key k;
	file_key(path, &k);
	struct cfi_cache_opts o = {.retry_ms = 200};
	struct cfi_cache *c = cfi_cache_new(&o);
	CHECK(cfi_cache_get(c, &k, path) == NULL, "not ready");
	CHECK(wait_stat(c, offsetof(struct cfi_cache_stats, build_failures), 1) == 0,
	      "the failure is counted");
	uint64_t failed_at = now_ms();
	struct cfi_cache_stats st;
	CHECK(cfi_cache_get(c, &k, path) == NULL, "negative entry");
	usleep(20000);
	cfi_cache_stats(c, &st);
	if (now_ms() < failed_at + 150)
		CHECK(st.build_failures == 1, "no retry before retry_ms: %lu",
		      (unsigned long)st.build_failures);
	CHECK(st.tables == 0 && st.builds == 0, "no table");
	usleep(200000);
	CHECK(cfi_cache_get(c, &k, path) == NULL, "retried, still failing");
	CHECK(wait_stat(c, offsetof(struct cfi_cache_stats, build_failures), 2) == 0,
	      "retried after retry_ms");
	cfi_cache_destroy(c);
	unlink(path);
}

/* Negative entries are bounded: past max_negative the oldest is forgotten. */
static void test_negative_bound(void)
{
	struct cfi_cache_opts o = {.max_negative = 1};
	struct cfi_cache *c = cfi_cache_new(&o);
	struct cfi_cache_key ka, kb;
	cfi_cache_key_file(&ka, 0, 1, 0, 0);
	cfi_cache_key_file(&kb, 0, 2, 0, 0);
	CHECK(cfi_cache_get(c, &ka, "/nonexistent/a") == NULL, "a not ready");
	CHECK(wait_stat(c, offsetof(struct cfi_cache_stats, build_failures), 1) == 0, "a fails");
	CHECK(cfi_cache_get(c, &ka, "/nonexistent/a") == NULL, "a negative");
	CHECK(cfi_cache_get(c, &kb, "/nonexistent/b") == NULL, "b not ready");
	CHECK(wait_stat(c, offsetof(struct cfi_cache_stats, build_failures), 2) == 0, "b fails");
	/* a was forgotten: it is tried again at once (retry_ms is a minute). */
	CHECK(cfi_cache_get(c, &ka, "/nonexistent/a") == NULL, "a queued again");
	CHECK(wait_stat(c, offsetof(struct cfi_cache_stats, build_failures), 3) == 0, "a retried");
	CHECK(cfi_cache_get(c, &kb, "/nonexistent/b") == NULL, "b queued again");
	CHECK(wait_stat(c, offsetof(struct cfi_cache_stats, build_failures), 4) == 0, "b retried");
	cfi_cache_destroy(c);
}

struct file {
	const char *path;
	struct cfi_cache_key key;
	size_t bytes;
};

/* The file's table in c, kept with a reference when hold. */
static const struct cfi_table *load(struct cfi_cache *c, struct file *f, int hold)
{
	const struct cfi_table *t = wait_ready(c, &f->key, f->path);
	if (t && !hold)
		cfi_cache_put(c, t);
	return t;
}

static int ready(struct cfi_cache *c, struct file *f)
{
	struct cfi_cache_stats a, b;
	cfi_cache_stats(c, &a);
	const struct cfi_table *t = cfi_cache_get(c, &f->key, f->path);
	cfi_cache_put(c, t);
	cfi_cache_stats(c, &b);
	return t != NULL && b.hits == a.hits + 1;
}

static void test_budget(void)
{
	const char *paths[] = {LIBDIR "liblzma.so.5", LIBDIR "libc.so.6", self_path,
			       LIBDIR "libcrypto.so.3"};
	struct file f[4];
	size_t n = 0;
	struct cfi_cache *big = cfi_cache_new(NULL);
	for (size_t i = 0; i < 4; i++) {
		if (file_key(paths[i], &f[n].key) != 0) {
			fprintf(stderr, "skip %s\n", paths[i]);
			continue;
		}
		f[n].path = paths[i];
		const struct cfi_table *t = load(big, &f[n], 1);
		CHECK(t != NULL, "%s", paths[i]);
		f[n].bytes = t ? cfi_table_bytes(t) : 0;
		cfi_cache_put(big, t);
		n++;
	}
	cfi_cache_destroy(big);
	if (n < 3) {
		fprintf(stderr, "skip budget: fewer than 3 files\n");
		return;
	}
	/* Room for any two of the first three, not for all three. */
	struct cfi_cache_opts o = {.budget_bytes = f[0].bytes + f[1].bytes + f[2].bytes - 1};
	struct cfi_cache *c = cfi_cache_new(&o);
	struct cfi_cache_stats st;
	load(c, &f[0], 0);
	load(c, &f[1], 0);
	CHECK(ready(c, &f[0]), "0 in, used last");
	load(c, &f[2], 0);
	cfi_cache_stats(c, &st);
	CHECK(st.evictions == 1 && st.tables == 2, "evictions %lu tables %lu",
	      (unsigned long)st.evictions, (unsigned long)st.tables);
	/* Held from here on: 1's table, queued by the miss, finds no room. */
	const struct cfi_table *h0 = cfi_cache_get(c, &f[0].key, f[0].path);
	const struct cfi_table *h2 = cfi_cache_get(c, &f[2].key, f[2].path);
	CHECK(h0 != NULL && h2 != NULL, "0 and 2 stay");
	CHECK(cfi_cache_get(c, &f[1].key, f[1].path) == NULL, "1, least recently used, evicted");
	CHECK(wait_stat(c, offsetof(struct cfi_cache_stats, no_room), 1) == 0, "no room for 1");
	CHECK(h0 && h2 && ready(c, &f[0]) && ready(c, &f[2]), "held tables stay");
	cfi_cache_stats(c, &st);
	CHECK(st.evictions == 1 && st.tables == 2 && st.bytes <= o.budget_bytes,
	      "evictions %lu tables %lu bytes %lu", (unsigned long)st.evictions,
	      (unsigned long)st.tables, (unsigned long)st.bytes);
	/* 0 given back: 1 now evicts it, the only table nobody holds. */
	cfi_cache_put(c, h0);
	CHECK(load(c, &f[1], 0) != NULL, "1 loads");
	CHECK(!ready(c, &f[0]) && ready(c, &f[2]), "0 evicted, held 2 stays");
	cfi_cache_put(c, h2);
	cfi_cache_destroy(c);

	/* A table over the whole budget is refused and remembered. */
	size_t smallest = f[0].bytes;
	for (size_t i = 1; i < n; i++)
		smallest = f[i].bytes < smallest ? f[i].bytes : smallest;
	struct cfi_cache_opts small = {.budget_bytes = smallest - 1};
	c = cfi_cache_new(&small);
	CHECK(cfi_cache_get(c, &f[0].key, f[0].path) == NULL, "not ready");
	CHECK(wait_stat(c, offsetof(struct cfi_cache_stats, refused), 1) == 0, "refused");
	CHECK(cfi_cache_get(c, &f[0].key, f[0].path) == NULL, "negative entry");
	cfi_cache_stats(c, &st);
	CHECK(st.tables == 0 && st.bytes == 0 && st.builds == 0, "nothing kept");
	cfi_cache_destroy(c);
}

static void test_queue_and_destroy(void)
{
	struct cfi_cache_opts o = {.queue_len = 2};
	struct cfi_cache *c = cfi_cache_new(&o);
	const char *paths[] = {LIBDIR "libcrypto.so.3", LIBDIR "libc.so.6", LIBDIR "liblzma.so.5",
			       self_path, "/nonexistent/file"};
	struct cfi_cache_key k;
	for (size_t i = 0; i < 5; i++) {
		if (file_key(paths[i], &k) != 0)
			cfi_cache_key_file(&k, 0, i + 1, 0, 0);
		CHECK(cfi_cache_get(c, &k, paths[i]) == NULL, "not ready");
	}
	struct cfi_cache_stats st;
	cfi_cache_stats(c, &st);
	/* At most one build taken by the worker, two queued: the rest counted. */
	CHECK(st.queue_full >= 2, "queue_full %lu", (unsigned long)st.queue_full);
	cfi_cache_destroy(c); /* builds still queued: freed, not leaked */
}

int main(int argc, char **argv)
{
	(void)argc;
	if (!realpath(argv[0], self_path))
		snprintf(self_path, sizeof(self_path), "%s", argv[0]);
	test_not_ready_then_ready();
	test_release_and_failed();
	test_sharing();
	test_not_elf();
	test_negative_bound();
	test_budget();
	test_queue_and_destroy();
	return check_done();
}
