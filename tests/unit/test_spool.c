/*
 * test_spool: the agent's spool (agent/ship/spool.h), on its own and under the
 * shipper with a real PostgreSQL.
 *
 * - a window read back equals the hand-built one written, field by field
 *   (rows with and without counts, every dictionary kind, NULL strings,
 *   request rows, a trigger id);
 * - every truncation and every flipped byte of a file is refused, never a
 *   crash; a file whose checksum holds but whose counts exceed its size is
 *   refused before allocating;
 * - the directory: one agent per database (a second open gets EBUSY),
 *   files read back oldest first, the state record tells the next open that
 *   the run did not stop cleanly and what it lost, max_bytes refuses and
 *   counts, a clean close with nothing left removes the directory;
 * - a shipper killed (SIGKILL, in a child) right after the COMMIT of a
 *   spooled window: the next shipper finds the window, sees its transaction
 *   committed and stores nothing twice; a shipper killed with a window
 *   queued while the database is unreachable: the next one stores it once.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "aggregate.h"
#include "check.h"
#include "shipper.h"
#include "spool.h"
#include "testdb.h"
#include "traceprof/ids.h"
#include "traceprof/log.h"

#define SEC 1000000LL

static char dir[64];

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * SEC + ts.tv_nsec / 1000;
}

/* ---- a hand-built window ---- */

static uint64_t stacks0[3] = {101, 102, 103}, stacks1[1] = {104};
static uint32_t counts0[3] = {5, 1, 7};
static uint64_t frames_a[2] = {201, 202}, frames_b[1] = {203};
static uint64_t off_stacks0[2] = {104, 0}, off_stacks1[1] = {101};
static uint32_t off_us0[2] = {1500, 320}, off_us1[1] = {77};
static uint64_t gpu_stacks0[2] = {101, 104}, gpu_ns0[2] = {5000000000ull, 12};
static uint32_t gpu_launches0[2] = {3, 1};

/* A hand-built window, w, with the arrays it points into. */
struct hand {
	struct agg_window w;
	struct store_sample_row rows[2];
	struct agg_source src[2];
	struct agg_function fn[2];
	struct agg_frame fr[2];
	struct agg_stack st[2];
	struct agg_route rt[1];
	struct store_request rq[1];
	struct store_offcpu_row off[2];
	struct store_gpu_row gpu[1];
};

static struct agg_window *hand_window(struct hand *h)
{
	struct agg_window *w = &h->w;
	struct store_sample_row *rows = h->rows;
	struct agg_source *src = h->src;
	struct agg_function *fn = h->fn;
	struct agg_frame *fr = h->fr;
	struct agg_stack *st = h->st;
	struct agg_route *rt = h->rt;
	struct store_request *rq = h->rq;
	struct store_offcpu_row *off = h->off;

	memset(w, 0, sizeof(*w));
	rows[0] = (struct store_sample_row){.bucket_us = 1700000000000000LL,
					    .source_id = 11,
					    .span_id = 0x55,
					    .hz = 99,
					    .n = 3,
					    .stacks = stacks0,
					    .counts = counts0};
	memset(rows[0].trace_id, 0xab, 16);
	rows[1] = (struct store_sample_row){
	    .bucket_us = 1700000000000000LL, .source_id = 12, .hz = 19, .n = 1, .stacks = stacks1};
	src[0] = (struct agg_source){11, {"checkout", "shop", "pod-1", "c0", "node", "b1d", NULL}};
	src[1] = (struct agg_source){12, {"pay", "", "", "", "", "", "{\"app\":\"pay\"}"}};
	fn[0] = (struct agg_function){301, "main", "/usr/bin/shop", 0};
	fn[1] = (struct agg_function){302, "", "", 3};
	fr[0] = (struct agg_frame){201, 301, "b1d", "shop.c", 12, 0x401000};
	fr[1] = (struct agg_frame){202, 302, "", NULL, 0, 0};
	st[0] = (struct agg_stack){101, 2, frames_a};
	st[1] = (struct agg_stack){104, 1, frames_b};
	rt[0] = (struct agg_route){401, "GET", "/cart/{id}"};
	rq[0] = (struct store_request){.start_us = 1700000000100000LL,
				       .duration_us = 2500,
				       .source_id = 11,
				       .span_id = 0x55,
				       .parent_span_id = 0x44,
				       .route_id = 401,
				       .status_code = 503,
				       .context_source = STORE_CTX_SOURCE_ZEROCODE};
	memset(rq[0].trace_id, 0xab, 16);
	w->seq = 42;
	w->start_us = 1700000000000000LL;
	w->window_us = 15 * SEC;
	w->nrows = 2;
	w->rows = rows;
	w->nsamples = 14;
	w->nsources = 2;
	w->sources = src;
	w->nfunctions = 2;
	w->functions = fn;
	w->nframes = 2;
	w->frames = fr;
	w->nstacks = 2;
	w->stacks = st;
	w->nroutes = 1;
	w->routes = rt;
	w->nrequests = 1;
	w->requests = rq;
	off[0] = (struct store_offcpu_row){.bucket_us = 1700000000000000LL,
					   .source_id = 11,
					   .span_id = 0x55,
					   .kind = STORE_OFFCPU_BLOCKED,
					   .n = 2,
					   .stacks = off_stacks0,
					   .us = off_us0};
	memset(off[0].trace_id, 0xab, 16);
	off[1] = (struct store_offcpu_row){.bucket_us = 1700000000000000LL,
					   .source_id = 12,
					   .kind = STORE_OFFCPU_RUNQ,
					   .n = 1,
					   .stacks = off_stacks1,
					   .us = off_us1};
	w->noffcpu = 2;
	w->offcpu = off;
	w->offcpu_us = 1500 + 320 + 77;
	h->gpu[0] = (struct store_gpu_row){.bucket_us = 1700000000000000LL,
					   .source_id = 11,
					   .span_id = 0x55,
					   .n = 2,
					   .stacks = gpu_stacks0,
					   .launches = gpu_launches0,
					   .gpu_ns = gpu_ns0};
	memset(h->gpu[0].trace_id, 0xab, 16);
	w->ngpu = 1;
	w->gpu = h->gpu;
	w->gpu_launches = 4;
	w->trigger_id = "default/slow-checkout";
	w->missing_entries = 3;
	w->samples_overflow = 2;
	return w;
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void check_same(const struct agg_window *a, const struct agg_window *b)
{
	CHECK(a->seq == 42 && b->seq == 42 && a->start_us == b->start_us &&
		  a->window_us == b->window_us && a->nsamples == b->nsamples &&
		  a->missing_entries == b->missing_entries &&
		  a->samples_overflow == b->samples_overflow,
	      "window fields");
	CHECK(same_str(a->trigger_id, b->trigger_id), "trigger id %s", b->trigger_id);
	CHECK(b->nrows == 2 && b->nsources == 2 && b->nfunctions == 2 && b->nframes == 2 &&
		  b->nstacks == 2 && b->nroutes == 1 && b->nrequests == 1,
	      "counts");
	for (size_t i = 0; i < 2 && b->nrows == 2; i++) {
		const struct store_sample_row *x = &a->rows[i], *y = &b->rows[i];

		CHECK(x->bucket_us == y->bucket_us && x->source_id == y->source_id &&
			  !memcmp(x->trace_id, y->trace_id, 16) && x->span_id == y->span_id &&
			  x->hz == y->hz && x->n == y->n &&
			  !memcmp(x->stacks, y->stacks, x->n * sizeof(uint64_t)),
		      "row %zu", i);
		CHECK((!x->counts && !y->counts) ||
			  (x->counts && y->counts && !memcmp(x->counts, y->counts, x->n * 4)),
		      "row %zu counts", i);
	}
	for (size_t i = 0; i < 2 && b->nsources == 2; i++) {
		const struct store_source *x = &a->sources[i].src, *y = &b->sources[i].src;

		CHECK(a->sources[i].id == b->sources[i].id && same_str(x->service, y->service) &&
			  same_str(x->namespace_, y->namespace_) && same_str(x->pod, y->pod) &&
			  same_str(x->container, y->container) && same_str(x->node, y->node) &&
			  same_str(x->build_id, y->build_id) &&
			  same_str(x->labels_json, y->labels_json),
		      "source %zu", i);
	}
	for (size_t i = 0; i < 2 && b->nfunctions == 2; i++)
		CHECK(a->functions[i].id == b->functions[i].id &&
			  same_str(a->functions[i].name, b->functions[i].name) &&
			  same_str(a->functions[i].module, b->functions[i].module) &&
			  a->functions[i].kind == b->functions[i].kind,
		      "function %zu", i);
	for (size_t i = 0; i < 2 && b->nframes == 2; i++) {
		const struct agg_frame *x = &a->frames[i], *y = &b->frames[i];

		CHECK(x->id == y->id && x->function_id == y->function_id &&
			  same_str(x->build_id, y->build_id) && same_str(x->file, y->file) &&
			  x->line == y->line && x->address == y->address,
		      "frame %zu", i);
	}
	for (size_t i = 0; i < 2 && b->nstacks == 2; i++)
		CHECK(a->stacks[i].id == b->stacks[i].id && a->stacks[i].n == b->stacks[i].n &&
			  !memcmp(a->stacks[i].frame_ids, b->stacks[i].frame_ids,
				  a->stacks[i].n * sizeof(uint64_t)),
		      "stack %zu", i);
	if (b->nroutes == 1)
		CHECK(a->routes[0].id == b->routes[0].id &&
			  same_str(a->routes[0].method, b->routes[0].method) &&
			  same_str(a->routes[0].route, b->routes[0].route),
		      "route");
	if (b->nrequests == 1)
		CHECK(!memcmp(&a->requests[0], &b->requests[0], sizeof(struct store_request)),
		      "request");
	CHECK(b->noffcpu == a->noffcpu && b->offcpu_us == a->offcpu_us, "off-CPU rows %zu, %llu us",
	      b->noffcpu, (unsigned long long)b->offcpu_us);
	for (size_t i = 0; i < a->noffcpu && b->noffcpu == a->noffcpu; i++) {
		const struct store_offcpu_row *x = &a->offcpu[i], *y = &b->offcpu[i];

		CHECK(x->bucket_us == y->bucket_us && x->source_id == y->source_id &&
			  !memcmp(x->trace_id, y->trace_id, 16) && x->span_id == y->span_id &&
			  x->kind == y->kind && x->n == y->n &&
			  !memcmp(x->stacks, y->stacks, x->n * sizeof(uint64_t)) &&
			  !memcmp(x->us, y->us, x->n * sizeof(uint32_t)),
		      "off-CPU row %zu", i);
	}
}

/* GPU rows of a and b the same. */
static void check_same_gpu(const struct agg_window *a, const struct agg_window *b)
{
	CHECK(b->ngpu == a->ngpu && b->gpu_launches == a->gpu_launches,
	      "GPU rows %zu, %llu launches", b->ngpu, (unsigned long long)b->gpu_launches);
	for (size_t i = 0; i < a->ngpu && b->ngpu == a->ngpu; i++) {
		const struct store_gpu_row *x = &a->gpu[i], *y = &b->gpu[i];

		CHECK(x->bucket_us == y->bucket_us && x->source_id == y->source_id &&
			  !memcmp(x->trace_id, y->trace_id, 16) && x->span_id == y->span_id &&
			  x->n == y->n && !memcmp(x->stacks, y->stacks, x->n * sizeof(uint64_t)) &&
			  !memcmp(x->launches, y->launches, x->n * sizeof(uint32_t)) &&
			  !memcmp(x->gpu_ns, y->gpu_ns, x->n * sizeof(uint64_t)),
		      "GPU row %zu", i);
	}
}

/*
 * A file of the second format (before GPU rows: magic TPSPOOL2, no GPU
 * count) written by an earlier agent is still read after an upgrade: the
 * same window, without GPU rows.
 */
static void test_second_format(void)
{
	struct hand h;
	struct agg_window *w = hand_window(&h), *back;
	size_t len, at = 24 + 6 * 8 + 4 + strlen(w->trigger_id) + 8 * 8;
	uint64_t body, sum;
	char *buf;

	w->ngpu = 0;
	w->gpu_launches = 0;
	if (spool_encode(w, &buf, &len) != 0) {
		CHECK(0, "encode");
		return;
	}
	memcpy(buf, "TPSPOOL2", 8);
	memmove(buf + at, buf + at + 8, len - at - 8); /* the GPU count (0) out */
	len -= 8;
	body = len - 24;
	sum = spool_hash(buf + 24, body);
	memcpy(buf + 8, &body, 8);
	memcpy(buf + 16, &sum, 8);
	back = spool_decode(buf, len);
	CHECK(back != NULL, "a second-format file is read");
	if (back) {
		CHECK(back->ngpu == 0 && back->noffcpu == 2 && back->nrows == 2,
		      "second format: rows and off-CPU rows as written, no GPU rows");
		check_same(w, back);
		check_same_gpu(w, back);
	}
	agg_window_free(back);
	free(buf);
}

/*
 * A file of the first format (before off-CPU rows: magic TPSPOOL1, no
 * off-CPU count) written by an earlier agent is still read after an
 * upgrade: the same window, without off-CPU rows.
 */
static void test_first_format(void)
{
	struct hand h;
	struct agg_window *w = hand_window(&h), *back;
	size_t len, at = 24 + 6 * 8 + 4 + strlen(w->trigger_id) + 7 * 8;
	uint64_t body, sum;
	char *buf;

	w->noffcpu = 0;
	w->offcpu_us = 0;
	w->ngpu = 0;
	w->gpu_launches = 0;
	if (spool_encode(w, &buf, &len) != 0) {
		CHECK(0, "encode");
		return;
	}
	memcpy(buf, "TPSPOOL1", 8);
	memmove(buf + at, buf + at + 16, len - at - 16); /* the off-CPU and GPU counts (0) out */
	len -= 16;
	body = len - 24;
	sum = spool_hash(buf + 24, body);
	memcpy(buf + 8, &body, 8);
	memcpy(buf + 16, &sum, 8);
	back = spool_decode(buf, len);
	CHECK(back != NULL, "a first-format file is read");
	if (back) {
		CHECK(back->noffcpu == 0 && back->nrows == 2 && back->nrequests == 1 &&
			  back->rows[0].counts && back->rows[0].counts[2] == 7 &&
			  back->requests[0].status_code == 503,
		      "first format: rows and requests as written, no off-CPU rows");
		w->noffcpu = 0;
		check_same(w, back);
	}
	agg_window_free(back);
	free(buf);
}

static void test_roundtrip(void)
{
	struct hand h;
	struct agg_window *w = hand_window(&h), *back;
	char *buf;
	size_t len;
	int refused = 0, cases = 0;

	CHECK(spool_encode(w, &buf, &len) == 0, "encode");
	back = spool_decode(buf, len);
	CHECK(back != NULL, "decode");
	if (back) {
		check_same(w, back);
		check_same_gpu(w, back);
		CHECK(back->bytes >= sizeof(*back) && back->spool_id == 0, "window bytes %zu",
		      back->bytes);
	}
	agg_window_free(back);

	/* every truncation, every byte flipped */
	for (size_t n = 0; n < len; n++, cases++) {
		struct agg_window *x = spool_decode(buf, n);

		refused += x == NULL && errno == EINVAL;
		agg_window_free(x);
	}
	for (size_t i = 0; i < len; i++, cases++) {
		struct agg_window *x;

		buf[i] ^= 0x5a;
		x = spool_decode(buf, len);
		refused += x == NULL;
		agg_window_free(x);
		buf[i] ^= 0x5a;
	}
	CHECK(refused == cases, "damaged files refused: %d of %d", refused, cases);
	free(buf);

	/* a checksum that holds over counts that do not: refused before allocating */
	{
		char evil[24 + 48 + 4 + 7 * 8];
		uint64_t body = sizeof(evil) - 24, sum = 0xcbf29ce484222325ull, huge = 1ull << 60;
		uint32_t nul = 0xffffffffu;

		memset(evil, 0, sizeof(evil));
		memcpy(evil, "TPSPOOL1", 8);
		memcpy(evil + 24 + 48, &nul, 4);
		memcpy(evil + 24 + 48 + 4, &huge, 8); /* nrows */
		for (size_t i = 24; i < sizeof(evil); i++) {
			sum ^= (unsigned char)evil[i];
			sum *= 0x100000001b3ull;
		}
		memcpy(evil + 8, &body, 8);
		memcpy(evil + 16, &sum, 8);
		CHECK(spool_decode(evil, sizeof(evil)) == NULL && errno == EINVAL,
		      "2^60 rows in a 132-byte file refused");
	}
}

/* ---- the directory ---- */

static struct agg_window *copy_of_hand(void)
{
	struct hand h;
	struct agg_window *c;
	char *buf;
	size_t len;

	if (spool_encode(hand_window(&h), &buf, &len))
		exit(2);
	c = spool_decode(buf, len);
	free(buf);
	if (!c)
		exit(2);
	return c;
}

static void test_directory(void)
{
	struct spool_opts o = {.dir = dir, .db_key = "host=/tmp dbname=spooltest"};
	struct spool_previous prev;
	struct spool_stats ss;
	struct spool *sp, *other;
	struct agg_window *w[3], *back;
	struct spool_state lost = {.samples_open = 123, .raised_held = 4, .requests_unspooled = 5};
	char err[256], path[4200];
	uint64_t ids[3];
	int n;

	sp = spool_open(&o, &prev, err, sizeof(err));
	CHECK(sp != NULL, "open: %s", err);
	if (!sp)
		return;
	CHECK(!prev.found, "no previous run in a new directory");
	other = spool_open(&o, NULL, err, sizeof(err));
	CHECK(other == NULL && errno == EBUSY && strstr(err, "another agent"),
	      "a second agent of the same database is kept out: %s", err);
	spool_close(other, true);
	for (int i = 0; i < 3; i++) {
		w[i] = copy_of_hand();
		w[i]->seq = 42;
		CHECK(spool_write(sp, w[i]) == 0 && w[i]->spool_id, "write %d", i);
		ids[i] = w[i]->spool_id;
	}
	CHECK(ids[0] < ids[1] && ids[1] < ids[2], "ids increase");
	{
		struct spool_commit c = {.xid = "777", .dict_pos = 3, .row_pos = 1}, got[4];

		CHECK(spool_note_commit(sp, ids[0], &c) == 0, "commit record");
		c.row_pos = 2;
		snprintf(c.xid, sizeof(c.xid), "778");
		CHECK(spool_note_commit(sp, ids[0], &c) == 0, "second commit record");
		n = spool_commits(sp, ids[0], got, 4);
		CHECK(n == 2 && !strcmp(got[0].xid, "777") && got[0].row_pos == 1 &&
			  got[0].dict_pos == 3 && !strcmp(got[1].xid, "778") && got[1].row_pos == 2,
		      "commit records read back: %d", n);
	}
	spool_remove(sp, ids[1]); /* delivered */
	spool_note_state(sp, &lost);
	spool_get_stats(sp, &ss);
	CHECK(ss.files == 2 && ss.windows_written == 3 && ss.windows_removed == 1,
	      "files=%zu written=%" PRIu64 " removed=%" PRIu64, ss.files, ss.windows_written,
	      ss.windows_removed);
	spool_close(sp, false); /* as a crash leaves it */
	for (int i = 0; i < 3; i++)
		agg_window_free(w[i]);

	sp = spool_open(&o, &prev, err, sizeof(err));
	CHECK(sp != NULL, "reopen: %s", err);
	if (!sp)
		return;
	CHECK(prev.found && prev.unclean && prev.pid == getpid() && prev.lost.samples_open == 123 &&
		  prev.lost.raised_held == 4 && prev.lost.requests_unspooled == 5,
	      "the state record tells what the crashed run lost");
	back = spool_load(sp);
	CHECK(back && back->spool_id == ids[0] && back->spool_replayed && back->next &&
		  back->next->spool_id == ids[2] && !back->next->next,
	      "the two windows left, oldest first");
	if (back && back->next) {
		struct hand h;

		check_same(hand_window(&h), back->next);
	}
	/* a damaged file is removed and counted */
	{
		FILE *f;

		snprintf(path, sizeof(path), "%s/%016" PRIx64 ".win", spool_path(sp), ids[2] + 1);
		f = fopen(path, "w");
		if (f) {
			fputs("TPSPOOL1 not a window", f);
			fclose(f);
		}
	}
	while (back) {
		struct agg_window *next = back->next;

		spool_remove(sp, back->spool_id);
		agg_window_free(back);
		back = next;
	}
	back = spool_load(sp);
	spool_get_stats(sp, &ss);
	CHECK(!back && ss.files_bad == 1 && access(path, F_OK) != 0,
	      "a damaged file is removed and counted: bad=%" PRIu64, ss.files_bad);
	spool_close(sp, true);

	/* a directory others may write is refused: its windows would go into the database */
	sp = spool_open(&o, NULL, err, sizeof(err));
	CHECK(sp != NULL, "open: %s", err);
	if (sp) {
		snprintf(path, sizeof(path), "%s", spool_path(sp));
		spool_close(sp, false);
		chmod(path, 0777);
		sp = spool_open(&o, NULL, err, sizeof(err));
		CHECK(!sp && errno == EPERM && strstr(err, "only it may write"),
		      "a world-writable spool is refused: %s", err);
		spool_close(sp, true);
		chmod(path, 0700);
		spool_close(spool_open(&o, NULL, err, sizeof(err)), true);
	}

	/* max_bytes */
	o.max_bytes = 1 << 16;
	sp = spool_open(&o, &prev, err, sizeof(err));
	CHECK(sp && !prev.unclean, "a clean close is not a loss");
	if (!sp)
		return;
	{
		int ok = 0, full = 0;

		for (int i = 0; i < 400; i++) {
			struct agg_window *x = copy_of_hand();
			int rc = spool_write(sp, x);

			ok += rc == 0;
			full += rc == -ENOSPC && x->spool_id == 0;
			agg_window_free(x);
		}
		spool_get_stats(sp, &ss);
		CHECK(ok > 10 && full == 400 - ok && ss.windows_full == (uint64_t)full &&
			  ss.bytes <= o.max_bytes,
		      "max_bytes: %d written, %d refused, %zu bytes", ok, full, ss.bytes);
	}
	{
		struct agg_window *all = spool_load(sp);

		while (all) {
			struct agg_window *next = all->next;

			spool_remove(sp, all->spool_id);
			agg_window_free(all);
			all = next;
		}
	}
	snprintf(path, sizeof(path), "%s", spool_path(sp));
	spool_close(sp, true);
	CHECK(access(path, F_OK) != 0, "a clean close with nothing left removes %s", path);
}

/* ---- under the shipper, with PostgreSQL ---- */

static struct agg *agg;
static uint64_t stack_id;

static void register_dict(void)
{
	struct store_source src = {"spooled", "", "", "", "node-1", "", ""};
	uint64_t fn = ids_function("/usr/bin/spooled", "spin");
	uint64_t fr = ids_frame(fn, "", "spin.c", 7, 0x1000);

	CHECK(agg_add_source(agg, 21, &src) == 0 &&
		  agg_add_function(agg, fn, "spin", "/usr/bin/spooled", 0) == 0 &&
		  agg_add_frame(agg, fr, fn, "", "spin.c", 7, 0x1000) == 0,
	      "dictionary");
	stack_id = ids_stack(&fr, 1);
	CHECK(agg_add_stack(agg, stack_id, &fr, 1) == 0, "stack");
}

/* A window of n samples at start (µs). */
static struct agg_window *window_of(int64_t start, int n)
{
	struct agg_sample s = {.time_us = start, .source_id = 21, .stack_id = stack_id, .hz = 19};

	for (int i = 0; i < n; i++)
		agg_add(agg, &s);
	agg_close(agg);
	return agg_take(agg);
}

static long long stored(PGconn *c, int64_t bucket)
{
	char sql[512];

	snprintf(sql, sizeof(sql),
		 "SELECT coalesce(sum(CASE WHEN counts IS NULL THEN cardinality(stacks) ELSE "
		 "(SELECT sum(x) FROM unnest(counts) x) END), 0) FROM traceprof.samples WHERE "
		 "bucket = to_timestamp(%lld / 1000000.0)",
		 (long long)bucket);
	return testdb_scalar(c, sql);
}

static void kill_self(void *ctx, const struct agg_window *w)
{
	(void)ctx;
	(void)w;
	raise(SIGKILL); /* committed, the spool file still there */
}

/* Runs a shipper in a child that is killed in the end; returns its wait status. */
static int child_run(const char *conninfo, struct agg_window *w, bool kill_after_commit)
{
	pid_t pid = fork();
	int status = 0;

	if (pid == 0) {
		struct spool_opts o = {.dir = dir, .db_key = "shipper-test"};
		char err[256];
		struct spool *sp = spool_open(&o, NULL, err, sizeof(err));
		struct shipper_opts so = {.conninfo = conninfo,
					  .spool = sp,
					  .after_commit = kill_after_commit ? kill_self : NULL};
		struct shipper *sh;

		if (!sp)
			_exit(3);
		sh = shipper_start(&so);
		if (!sh || shipper_submit(sh, w) != 0)
			_exit(4);
		if (!kill_after_commit) {
			struct spool_stats ss;

			spool_get_stats(sp, &ss);
			if (ss.files != 1)
				_exit(5);
			raise(SIGKILL); /* queued and spooled, not delivered */
		}
		sleep(60);
		_exit(6);
	}
	agg_window_free(w);
	waitpid(pid, &status, 0);
	return status;
}

/* A fresh shipper on the spool: what it recovered and delivered. */
static void restart(const char *conninfo, struct shipper_stats *out, struct spool_previous *prev)
{
	struct spool_opts o = {.dir = dir, .db_key = "shipper-test"};
	char err[256];
	struct spool *sp = spool_open(&o, prev, err, sizeof(err));
	struct shipper_opts so = {.conninfo = conninfo, .spool = sp};
	struct shipper *sh;
	struct spool_stats ss;

	CHECK(sp != NULL, "reopen: %s", err);
	sh = shipper_start(&so);
	CHECK(sh && shipper_stop(sh, 20000) == 0, "the restarted shipper delivers its queue");
	shipper_get_stats(sh, out);
	shipper_free(sh);
	spool_get_stats(sp, &ss);
	CHECK(ss.files == 0, "the spool is empty after delivery: %zu files", ss.files);
	spool_close(sp, true);
}

static void test_kill(void)
{
	char ci[4200];
	PGconn *c;
	struct shipper_stats st;
	struct spool_previous prev;
	int64_t b1 = (now_us() / SEC - 600) * SEC, b2 = b1 + SEC;
	int status;

	if (testdb_create("test_spool", ci, sizeof(ci)) != 0) {
		CHECK(0, "test database");
		return;
	}
	c = testdb_connect(ci);

	/* killed right after the COMMIT: stored once, not again at the restart */
	status = child_run(ci, window_of(b1, 37), true);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child killed after COMMIT");
	CHECK(stored(c, b1) == 37, "the window was committed before the kill: %lld", stored(c, b1));
	restart(ci, &st, &prev);
	CHECK(prev.unclean, "the restart sees the previous run was killed");
	CHECK(st.windows_recovered == 1 && st.windows_resumed == 1,
	      "recovered=%" PRIu64 " resumed=%" PRIu64, st.windows_recovered, st.windows_resumed);
	CHECK(stored(c, b1) == 37, "stored once, not twice: %lld samples", stored(c, b1));

	/* killed with a window queued while the database is unreachable */
	status = child_run("host=127.0.0.1 port=1 connect_timeout=1", window_of(b2, 23), false);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child killed while queued");
	CHECK(stored(c, b2) == 0, "nothing stored before the restart");
	restart(ci, &st, &prev);
	CHECK(st.windows_recovered == 1 && st.windows_resumed == 0 && st.samples_delivered == 23,
	      "recovered=%" PRIu64 " resumed=%" PRIu64 " delivered=%" PRIu64, st.windows_recovered,
	      st.windows_resumed, st.samples_delivered);
	CHECK(stored(c, b2) == 23, "the queued window is stored after the restart: %lld",
	      stored(c, b2));
	PQfinish(c);
}

int main(void)
{
	char tmpl[] = "/tmp/tp-spool-XXXXXX";

	log_set_level(getenv("TEST_VERBOSE") ? TP_LOG_DEBUG : TP_LOG_QUIET);
	if (!mkdtemp(tmpl))
		return 2;
	snprintf(dir, sizeof(dir), "%s/spool", tmpl);
	test_roundtrip();
	test_first_format();
	test_second_format();
	test_directory();
	agg = agg_new(&(struct agg_opts){.window_us = SEC});
	if (!agg)
		return 2;
	register_dict();
	test_kill();
	agg_free(agg);
	rmdir(dir);
	rmdir(tmpl);
	return check_done();
}
