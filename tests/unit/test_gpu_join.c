/*
 * test_gpu_join: the agent's GPU join and ring reader (agent/gpu/,
 * docs/gpu.md "The agent") without BPF, on synthetic launches and
 * records with a clock of the test's own.
 *
 * The join: a kernel record joins its launch (the launch's request, its
 * stack under the kernel's [gpu] frame); one launch joins many records (a
 * graph) for GPU_MATCHED_KEEP_US after its last; a record before its
 * launch waits GPU_PENDING_US, then is stored alone; a launch without a
 * record expires at GPU_LAUNCH_EXPIRE_US; bad times, duplicate ids and a
 * full FIFO are counted. The ring: a ring in this process's own memfd,
 * read through /proc/self/map_files like any process's: every lie of the
 * header refused, bad records and names counted, a name cut on a
 * character boundary, heads ahead and behind resynchronized, a file
 * shrunk under the reader answered with -EIO, never a signal.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "aggregate.h"
#include "check.h"
#include "gpu_internal.h"
#include "symbolize.h"
#include "traceprof/log.h"

#define SEC 1000000LL

static struct agg *agg;
static struct symbolizer *sym;

static struct gpu *new_gpu(void)
{
	struct agg_opts ao = {.window_us = 15 * SEC};
	struct gpu_opts o = {.sym = &sym};
	struct store_source src = {"svc", "", "", "", "node", "", NULL};
	uint64_t frames[2] = {11, 12};
	struct gpu *g;

	agg_free(agg);
	agg = agg_new(&ao);
	o.agg = agg;
	g = gpu_new(&o);
	CHECK(g && gpu_join_init(g) == 0, "gpu tables");
	agg_add_source(agg, 3, &src);
	agg_add_function(agg, 10, "main", "app", 0);
	agg_add_frame(agg, 11, 10, "", NULL, 0, 0);
	agg_add_frame(agg, 12, 10, "", NULL, 0, 1);
	agg_add_stack(agg, 21, frames, 2);
	return g;
}

static struct gpu_launch launch(int pid, uint32_t corr, int64_t t, bool tagged)
{
	struct gpu_launch l = {
	    .key = (uint64_t)pid << 32 | corr, .stack_id = 21, .source_id = 3, .t_us = t};

	if (tagged) {
		l.span_id = 7;
		l.trace_id[0] = 9;
	}
	return l;
}

static struct gpu_krec krec(uint32_t corr, uint64_t ns, const char *name)
{
	struct gpu_krec k = {.start_ns = 1000, .end_ns = 1000 + ns, .correlation_id = corr};

	snprintf(k.name, sizeof(k.name), "%s", name);
	return k;
}

/* The closed window's GPU rows summed: launches and ns, tagged ones, kernels alone. */
struct sums {
	uint64_t launches, ns, tagged, alone;
	bool leaf_ok; /* every stack ends in a [gpu] frame, over frames 11, 12 or alone */
};

static struct sums close_window(void)
{
	struct sums s = {.leaf_ok = true};
	struct agg_window *w;

	agg_close(agg);
	w = agg_take(agg);
	for (size_t i = 0; w && i < w->ngpu; i++)
		for (uint32_t j = 0; j < w->gpu[i].n; j++) {
			const struct agg_stack *st = NULL;

			s.launches += w->gpu[i].launches[j];
			s.ns += w->gpu[i].gpu_ns[j];
			s.tagged += w->gpu[i].span_id ? w->gpu[i].launches[j] : 0;
			for (size_t k = 0; k < w->nstacks; k++)
				if (w->stacks[k].id == w->gpu[i].stacks[j])
					st = &w->stacks[k];
			if (!st || (st->n != 1 && st->n != 3) ||
			    (st->n == 3 && (st->frame_ids[0] != 11 || st->frame_ids[1] != 12)))
				s.leaf_ok = false;
			else if (st->n == 1)
				s.alone += w->gpu[i].launches[j];
		}
	for (size_t k = 0; w && k < w->nfunctions; k++)
		if (strncmp(w->functions[k].name, "[gpu] ", 6) == 0 &&
		    strcmp(w->functions[k].module, "[gpu]") != 0)
			s.leaf_ok = false;
	agg_window_free(w);
	return s;
}

static void test_join(void)
{
	struct gpu *g = new_gpu();
	struct gpu_launch l;
	struct gpu_krec k;
	struct sums s;
	int64_t t = 1000 * SEC, now = 1700000000 * SEC;

	/* a launch, then its record; a graph: one launch, three records */
	l = launch(100, 1, t, true);
	gpu_add_launch(g, &l);
	gpu_add_launch(g, &l); /* the same id again: the first kept */
	k = krec(1, 500, "gemm");
	gpu_add_record(g, 100, 3, &k, t, now);
	l = launch(100, 2, t, true);
	gpu_add_launch(g, &l);
	for (int i = 0; i < 3; i++) {
		k = krec(2, 100, i ? "graph_b" : "graph_a");
		gpu_add_record(g, 100, 3, &k, t + 500000, now);
	}
	/* a record before its launch: waits, then joins */
	k = krec(3, 40, "early");
	gpu_add_record(g, 100, 3, &k, t, now);
	gpu_join_tick(g, t + SEC, now);
	CHECK(g->p_n == 1, "the early record waits");
	l = launch(100, 3, t + SEC, true);
	gpu_add_launch(g, &l);
	gpu_join_tick(g, t + SEC, now);
	CHECK(g->p_n == 0 && g->st.records_joined == 5, "it joined its launch (%llu joined)",
	      (unsigned long long)g->st.records_joined);
	/* a record without a launch: stored alone after GPU_PENDING_US, not before */
	k = krec(4, 8, "orphan");
	gpu_add_record(g, 200, 3, &k, t + SEC, now);
	gpu_join_tick(g, t + SEC + GPU_PENDING_US - 1, now);
	CHECK(g->st.records_unmatched == 0, "the orphan still waits");
	gpu_join_tick(g, t + SEC + GPU_PENDING_US, now);
	CHECK(g->st.records_unmatched == 1, "the orphan is stored alone");
	/* bad times, a duplicate id */
	k = krec(1, 0, "bad");
	k.end_ns = 10;
	gpu_add_record(g, 100, 3, &k, t, now);
	k = krec(1, GPU_MAX_NS + 1, "bad");
	gpu_add_record(g, 100, 3, &k, t, now);
	CHECK(g->st.records_bad_time == 2 && g->st.launches_dup == 1, "bad times, a duplicate");
	/* a launch without records expires at GPU_LAUNCH_EXPIRE_US */
	l = launch(100, 9, t + 2 * SEC, false);
	gpu_add_launch(g, &l);
	gpu_join_tick(g, t + 2 * SEC + GPU_LAUNCH_EXPIRE_US - 1, now);
	CHECK(g->st.launches_unmatched == 0, "not expired before its time");
	gpu_join_tick(g, t + 2 * SEC + GPU_LAUNCH_EXPIRE_US, now);
	CHECK(g->st.launches_unmatched == 1 && g->l_n == 0,
	      "expired at its time (%llu unmatched, %u kept)",
	      (unsigned long long)g->st.launches_unmatched, g->l_n);
	/* the graph's launch is gone GPU_MATCHED_KEEP_US after its last record */
	k = krec(2, 100, "graph_late");
	gpu_add_record(g, 100, 3, &k, t + 40 * SEC, now);
	CHECK(g->p_n == 1, "a record after its launch went waits");
	s = close_window();
	CHECK(s.launches == 1 + 3 + 1 + 1 && s.ns == 500 + 300 + 40 + 8 && s.tagged == 5 &&
		  s.alone == 1 && s.leaf_ok,
	      "stored: %llu launches, %llu ns, %llu tagged, %llu alone, leaves %s",
	      (unsigned long long)s.launches, (unsigned long long)s.ns,
	      (unsigned long long)s.tagged, (unsigned long long)s.alone,
	      s.leaf_ok ? "ok" : "wrong");
	CHECK(g->st.records_stored == 6 && g->st.launches_joined == 3, "counters");
	gpu_free(g);
}

static void test_full(void)
{
	struct gpu *g = new_gpu();
	struct gpu_launch l;
	struct gpu_krec k;

	for (uint32_t i = 0; i <= GPU_MAX_LAUNCHES; i++) {
		l = launch(100, i + 1, 0, false);
		gpu_add_launch(g, &l);
	}
	CHECK(g->l_n == GPU_MAX_LAUNCHES && g->st.launches_evicted == 1,
	      "a full FIFO: the oldest launch goes, counted");
	k = krec(GPU_MAX_LAUNCHES + 1, 5, "last");
	gpu_add_record(g, 100, 3, &k, 0, 1700000000 * SEC);
	k = krec(2, 5, "second");
	gpu_add_record(g, 100, 3, &k, 0, 1700000000 * SEC);
	CHECK(g->st.records_joined == 2, "the index still finds the newest and the oldest kept");
	for (uint32_t i = 0; i < GPU_MAX_PENDING; i++) {
		k = krec(0x80000000u + i, 1, "pending");
		gpu_add_record(g, 300, 3, &k, 0, 1700000000 * SEC);
	}
	gpu_add_record(g, 300, 3, &k, 0, 1700000000 * SEC);
	CHECK(g->st.records_pending_full == 1, "a full pending table: counted");
	close_window();
	gpu_free(g);
}

/*
 * Launch records of a process the module does not follow (its library
 * not found, or the process table full): kept, looked at once a second,
 * and never a crash.
 */
static void test_unfollowed(void)
{
	struct gpu *g = new_gpu();
	struct tp_sample smp = {
	    .pid = (uint32_t)getpid(), .tid = (uint32_t)getpid(), .kind = TP_REC_GPU, .user_n = 1};
	uint8_t trace[16] = {0};

	smp.ips[0] = (uint64_t)(uintptr_t)test_unfollowed;
	for (uint32_t i = 0; i < 3; i++) {
		smp.off_us = i + 1;
		gpu_on_launch(g, &smp, TP_GPU_BYTES(1), 3, trace, 0, 0);
	}
	gpu_on_launch(g, &smp, TP_GPU_BYTES(1) - 1, 3, trace, 0, 0); /* short: ignored */
	CHECK(g->st.launches == 3 && g->l_n == 3 && gpu_active(g),
	      "3 launches of a process not followed kept (%llu, %u)",
	      (unsigned long long)g->st.launches, g->l_n);
	close_window();
	gpu_free(g);
}

/* ---- the ring ---- */

#define NRECS 16
#define NAMES 1024

struct ring {
	int fd;
	size_t bytes;
	struct tp_cuda_ring_hdr *h;
	struct tp_cuda_rec *r;
	char *names;
};

static int make_ring(struct ring *x)
{
	x->bytes = TP_CUDA_HDR_BYTES + NRECS * sizeof(struct tp_cuda_rec) + NAMES;
	x->fd = memfd_create(TP_CUDA_RING_NAME, MFD_CLOEXEC);
	if (x->fd < 0 || ftruncate(x->fd, (off_t)x->bytes) != 0)
		return -1;
	x->h = mmap(NULL, x->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0);
	if (x->h == MAP_FAILED)
		return -1;
	x->h->magic = TP_CUDA_RING_MAGIC;
	x->h->version = TP_CUDA_RING_VERSION;
	x->h->rec_bytes = sizeof(struct tp_cuda_rec);
	x->h->nrecs = NRECS;
	x->h->names_bytes = NAMES;
	x->h->recs_off = TP_CUDA_HDR_BYTES;
	x->h->names_off = TP_CUDA_HDR_BYTES + NRECS * sizeof(struct tp_cuda_rec);
	x->r = (struct tp_cuda_rec *)((char *)x->h + x->h->recs_off);
	x->names = (char *)x->h + x->h->names_off;
	return 0;
}

static void drop_ring(struct ring *x)
{
	munmap(x->h, x->bytes);
	close(x->fd);
}

static void test_header_lies(void)
{
	struct gpu_ring_stats st = {0};
	struct gpu_ring r;
	struct ring x;
	int refused = 0, cases = 0;

	for (int lie = 0; lie < 11; lie++) {
		if (make_ring(&x) != 0) {
			CHECK(0, "memfd");
			return;
		}
		switch (lie) {
		case 0:
			x.h->magic ^= 1;
			break;
		case 1:
			x.h->version = 2;
			break;
		case 2:
			x.h->rec_bytes = 40;
			break;
		case 3:
			x.h->nrecs = 12;
			break;
		case 4:
			x.h->nrecs = 1u << 30;
			break;
		case 5:
			x.h->recs_off = 8;
			break;
		case 6:
			x.h->recs_off = x.bytes;
			break;
		case 7:
			x.h->names_bytes = NAMES + 1;
			break;
		case 8:
			x.h->names_off = ~0ull - 10;
			break;
		case 9:
			x.h->names_off = TP_CUDA_HDR_BYTES;
			break; /* over the records */
		case 10:
			x.h->recs_off = TP_CUDA_HDR_BYTES + 4;
			break;
		}
		cases++;
		refused += gpu_ring_open(&r, getpid(), &st) == -EPROTO;
		gpu_ring_close(&r);
		drop_ring(&x);
	}
	CHECK(refused == cases && st.bad_header == (uint64_t)cases,
	      "%d of %d lying headers refused", refused, cases);
}

static void test_ring(void)
{
	struct gpu_ring_stats st = {0};
	struct gpu_krec out[NRECS];
	struct gpu_ring r;
	struct ring x;
	char longname[400];
	int n;

	if (make_ring(&x) != 0) {
		CHECK(0, "memfd");
		return;
	}
	n = gpu_ring_open(&r, getpid(), &st);
	if (n == -EPERM || n == -EACCES) {
		printf("skip the ring: /proc/self/map_files needs CAP_SYS_ADMIN\n");
		drop_ring(&x);
		return;
	}
	CHECK(n == 0 && x.h->consumer_pid == (uint64_t)getpid(), "opened, consumer_pid set (%d)",
	      n);
	/* a name of 254 ASCII bytes then a 3-byte character: cut before it */
	memset(longname, 'a', sizeof(longname));
	memcpy(longname + 254, "\xe2\x82\xac", 3);
	memcpy(x.names, "good", 4);
	memcpy(x.names + 4, "\xc3\x28", 2);
	memcpy(x.names + 8, longname, 300);
	x.h->names_used = 308;
	for (int i = 0; i < 7; i++)
		x.r[i] = (struct tp_cuda_rec){.start_ns = 1,
					      .end_ns = 2,
					      .correlation_id = (uint32_t)i,
					      .kind = TP_CUDA_REC_KERNEL,
					      .name_len = 4};
	x.r[1].kind = 2;			      /* another kind */
	x.r[2].name_off = 300, x.r[2].name_len = 100; /* past names_used */
	x.r[3].name_off = ~0u, x.r[3].name_len = ~0u; /* overflow */
	x.r[4].name_off = 4, x.r[4].name_len = 2;     /* not UTF-8 */
	x.r[5].name_off = 8, x.r[5].name_len = 300;   /* cut */
	x.r[6].name_len = 0, x.r[6].flags = 0x80;     /* unknown flag */
	x.h->head = 7;
	n = gpu_ring_drain(&r, out, NRECS, &st);
	CHECK(n == 3 && !strcmp(out[0].name, "good") && !strcmp(out[1].name, "[bad name]") &&
		  strlen(out[2].name) == 254,
	      "3 of 7 records kept (%d), names checked and cut", n);
	CHECK(st.bad_records == 4 && st.bad_names == 1 && st.cut_names == 1 && x.h->tail == 7,
	      "4 bad records, a bad name, a cut one counted; tail stored");
	x.h->head = 7 + (1ull << 40);
	n = gpu_ring_drain(&r, out, NRECS, &st);
	CHECK(n == 0 && st.bad_head == 1 && x.h->tail == 7 + (1ull << 40), "a head far ahead");
	x.h->head = 3;
	n = gpu_ring_drain(&r, out, NRECS, &st);
	CHECK(n == 0 && st.bad_head == 2 && x.h->tail == 3, "a head behind the tail");
	x.h->head = 3 + NRECS; /* a whole ring: read, all of them */
	n = gpu_ring_drain(&r, out, 4, &st);
	CHECK(n == 2 && x.h->tail == 7, "at most max records a drain (%d of 4 good)", n);
	CHECK(ftruncate(x.fd, TP_CUDA_HDR_BYTES) == 0, "shrink");
	n = gpu_ring_drain(&r, out, NRECS, &st);
	CHECK(n >= 0 && st.read_errors == 1, "the shrunk file: a short read, counted");
	CHECK(gpu_ring_drain(&r, out, NRECS, &st) == -EIO, "then -EIO, never a signal");
	gpu_ring_close(&r);
	drop_ring(&x);
}

static void test_utf8(void)
{
	CHECK(gpu_utf8_ok("abc", 3) && gpu_utf8_ok("\xc3\xa9", 2) &&
		  gpu_utf8_ok("\xf0\x9f\x98\x80", 4),
	      "valid UTF-8");
	CHECK(!gpu_utf8_ok("a\0b", 3) && !gpu_utf8_ok("\xc0\xaf", 2) &&
		  !gpu_utf8_ok("\xed\xa0\x80", 3) && !gpu_utf8_ok("\xe2\x82", 2) &&
		  !gpu_utf8_ok("\xf4\x90\x80\x80", 4),
	      "NUL, overlong, surrogate, cut, past U+10FFFF refused");
}

int main(void)
{
	log_set_level(TP_LOG_QUIET);
	sym = sym_new(NULL);
	test_join();
	test_full();
	test_unfollowed();
	test_utf8();
	test_header_lies();
	test_ring();
	agg_free(agg);
	sym_free(sym);
	return check_done();
}
