/*
 * test_unwind_walk - the BPF sampler walks whole user stacks of code built
 * without frame pointers, with the unwind tables the agent places
 * (agent/unwind/unwind.h), and stops cleanly at the thread's root.
 *
 * The workload (unwind_workload.c, -O2 -fomit-frame-pointer) is sampled
 * at 99 Hz by the real sampler; its stacks are symbolized by the agent's
 * symbolizer. What a user relies on: a flame graph of such a program shows
 * its whole call chain, through libc and back (qsort calling our
 * comparator), through a signal handler, and every stack ends at the
 * program's root (_start), not cut at the first frame without a frame
 * pointer. The same workload walked with frame pointers only shows what
 * the tables change (and that the workload really has no frame pointers).
 *
 * Needs root and kernel BTF; otherwise it says why and exits 77 (skip).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "sampler.h"
#include "symbolize.h"
#include "traceprof/log.h"
#include "unwind.h"

#define HZ	       99
#define MAX_CHAIN      8
#define WANT	       250   /* samples collected per run */
#define MAX_COLLECT_MS 15000 /* ... or this long */
#define ROOT_NAMES     "_start __libc_start_main __libc_start_call_main clone clone3 start_thread"
#define UNWIND_SIZE    (8u << 20)

struct tally {
	pid_t pid;
	struct symbolizer *sym;
	const char *chain[MAX_CHAIN]; /* functions the stack must hold, root to leaf */
	int nchain;
	int n;	      /* samples of pid with a user stack */
	int rooted;   /* whose root-most frame is a thread root */
	int chained;  /* that hold chain in order */
	int via_leaf; /* samples whose leaf is chain's last entry (for the chain test) */
	int max_depth;
	uint64_t truncated; /* the sampler's count of stacks cut at TP_MAX_FRAMES */
	int in_vdso;	    /* samples whose leaf is in the vdso */
};

static bool is_root(const char *fn)
{
	char pad[128];

	if (!fn || strlen(fn) > sizeof(pad) - 3)
		return false;
	snprintf(pad, sizeof(pad), " %s ", fn);
	return strstr(" " ROOT_NAMES " ", pad) != NULL;
}

static int tally_sample(void *arg, const struct tp_sample *s, size_t len)
{
	struct tally *t = arg;
	const char *names[TP_MAX_FRAMES];
	struct sym_frame f[8];
	int n = 0, next = 0;

	(void)len;
	if (s->kind != TP_REC_SAMPLE || (pid_t)s->pid != t->pid || !s->user_n)
		return 0;
	for (int i = 0; i < s->user_n && i < TP_MAX_FRAMES; i++) {
		uint64_t ip = s->ips[s->kern_n + i] - (i > 0 ? 1 : 0);
		int k = sym_user(t->sym, t->pid, ip, f, 8);

		/* the outermost of the inlined frames stands for the address */
		names[n++] = k > 0 ? f[k - 1].function : "?";
		if (i == 0 && k > 0 && f[0].module && !strcmp(f[0].module, "[vdso]"))
			t->in_vdso++;
	}
	t->n++;
	if (n > t->max_depth)
		t->max_depth = n;
	if (is_root(names[n - 1]))
		t->rooted++;
	for (int i = n - 1; i >= 0 && next < t->nchain; i--) /* root to leaf */
		if (names[i] && strstr(names[i], t->chain[next]))
			next++;
	if (t->nchain && next == t->nchain)
		t->chained++;
	return 0;
}

static pid_t start_workload(const char *mode)
{
	int fds[2];
	char buf[8];
	pid_t pid;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl(TP_UNWIND_WORKLOAD, TP_UNWIND_WORKLOAD, mode, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	if (pid < 0 || read(fds[0], buf, sizeof(buf)) <= 0) {
		close(fds[0]);
		return -1;
	}
	close(fds[0]);
	return pid;
}

static void stop_workload(pid_t pid)
{
	int status = 0;

	if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid)
		CHECK(0, "workload ran until stopped (ended with status 0x%x)", status);
	else if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

/* Until the process's tables are placed (the cache builds them on its thread). */
static void wait_tables(struct unwind *u, pid_t pid)
{
	struct timespec ts = {0, 20000000};

	for (int i = 0; i < 250; i++) {
		if (unwind_note_process(u, pid) == 0 && !unwind_process_pending(u, pid))
			return;
		nanosleep(&ts, NULL);
	}
	CHECK(0, "tables of pid %d placed within 5 s", (int)pid);
}

/* Until WANT samples, or MAX_COLLECT_MS on a machine too busy to give them. */
static void collect(struct sampler *s, struct tally *t)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		sampler_poll(s, 100, tally_sample, t);
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while (t->n < WANT &&
		 (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < MAX_COLLECT_MS);
}

/* Samples mode's workload, with tables when with_tables; fills t. */
static void run(const char *mode, bool with_tables, struct tally *t)
{
	struct sampler_opts o = {.hz = HZ,
				 .ring_bytes = 1 << 20,
				 .filter = TP_FILTER_PIDS,
				 .unwind_bytes = with_tables ? UNWIND_SIZE : 0};
	struct sym_opts so = {.idle_ms = -1};
	struct sampler_unwind_maps sm;
	struct unwind *u = NULL;
	struct sampler *s;
	pid_t pid;

	s = sampler_open(&o);
	CHECK(s != NULL, "sampler_open: %s", strerror(errno));
	if (!s)
		return;
	pid = start_workload(mode);
	CHECK(pid > 0, "workload %s started", mode);
	t->pid = pid;
	t->sym = sym_new(&so);
	if (pid > 0 && t->sym) {
		sym_note_process(t->sym, pid);
		sampler_add_target_pid(s, pid);
		if (with_tables) {
			CHECK(sampler_unwind_maps(s, &sm) == 0, "unwind maps");
			struct unwind_maps um = {sm.rows_fd, sm.nrows, sm.tables_fd, sm.procs_fd};

			u = unwind_new(&um, NULL);
			CHECK(u != NULL, "unwind_new: %s", strerror(errno));
			if (u)
				wait_tables(u, pid);
		}
		while (sampler_poll(s, 0, tally_sample, &(struct tally){0}) > 0)
			; /* samples from before the tables */
		collect(s, t);
	}
	if (u) {
		struct unwind_stats st;
		struct sampler_stats ss;

		unwind_get_stats(u, &st);
		sampler_get_stats(s, &ss);
		t->truncated = ss.counters[TP_CNT_UW_TRUNC];
		printf("  tables=%" PRIu64 " rows=%" PRIu64 " placed=%" PRIu64 " pending=%" PRIu64
		       " uw_stacks=%" PRIu64 " root=%" PRIu64 " fp_end=%" PRIu64 " cut=%" PRIu64
		       " trunc=%" PRIu64 " frames_cfi=%" PRIu64 " frames_fp=%" PRIu64 "\n",
		       st.tables, st.rows, st.maps_placed, st.maps_pending,
		       ss.counters[TP_CNT_UW_STACKS], ss.counters[TP_CNT_UW_ROOT],
		       ss.counters[TP_CNT_UW_FP_END], ss.counters[TP_CNT_UW_CUT],
		       ss.counters[TP_CNT_UW_TRUNC], ss.counters[TP_CNT_UW_FRAMES_CFI],
		       ss.counters[TP_CNT_UW_FRAMES_FP]);
	}
	stop_workload(pid);
	unwind_free(u);
	sampler_free(s);
	sym_free(t->sym);
	t->sym = NULL;
	printf("%s %s: samples=%d rooted=%d chained=%d max_depth=%d\n", mode,
	       with_tables ? "CFI" : "frame pointers", t->n, t->rooted, t->chained, t->max_depth);
}

static double share(int part, int n)
{
	return n ? (double)part / n : 0;
}

/* main -> work_outer -> work_inner -> qsort -> by_value, every stack rooted. */
static void test_libc(void)
{
	struct tally fp = {.chain = {"main", "work_outer", "msort_with_tmp", "by_value"},
			   .nchain = 4};
	struct tally cfi = fp;

	run("libc", false, &fp);
	run("libc", true, &cfi);
	CHECK(cfi.n >= 100, "enough samples (%d)", cfi.n);
	CHECK(share(cfi.rooted, cfi.n) >= 0.99, "libc: %.1f %% of stacks end at the root",
	      100 * share(cfi.rooted, cfi.n));
	/* by_value is most of the time; the rest is qsort's own work and the loop */
	CHECK(share(cfi.chained, cfi.n) >= 0.5, "libc: main..qsort..by_value in %.1f %%",
	      100 * share(cfi.chained, cfi.n));
	/* the workload really has no frame pointers: without tables stacks are cut */
	CHECK(share(fp.rooted, fp.n) < 0.5, "frame pointers alone root %.1f %% (expected few)",
	      100 * share(fp.rooted, fp.n));
}

/* Stacks through the signal frame: handler_inner <- handler_outer <- __restore_rt <- spin_main. */
static void test_signal(void)
{
	struct tally t = {.chain = {"main", "spin_main", "handler_outer"}, .nchain = 3};

	run("signal", true, &t);
	CHECK(t.n >= 100, "enough samples (%d)", t.n);
	CHECK(share(t.rooted, t.n) >= 0.99, "signal: %.1f %% of stacks end at the root",
	      100 * share(t.rooted, t.n));
	CHECK(t.chained >= t.n / 5, "signal: %d of %d stacks go through the handler to main",
	      t.chained, t.n);
}

/* Through the vdso: clock_gettime's frames have the vdso's table. */
static void test_vdso(void)
{
	struct tally t = {.chain = {"main", "clock_loop"}, .nchain = 2};

	run("vdso", true, &t);
	CHECK(t.n >= 100, "enough samples (%d)", t.n);
	CHECK(share(t.rooted, t.n) >= 0.99, "vdso: %.1f %% of stacks end at the root",
	      100 * share(t.rooted, t.n));
	CHECK(share(t.chained, t.n) >= 0.99, "vdso: main..clock_loop in %.1f %%",
	      100 * share(t.chained, t.n));
	CHECK(t.in_vdso >= t.n / 10, "vdso: %d of %d samples in the vdso", t.in_vdso, t.n);
}

/* Deeper than TP_MAX_FRAMES: cut at the limit, counted, no harm. */
static void test_deep(void)
{
	struct tally t = {0};

	run("deep", true, &t);
	CHECK(t.n >= 100, "enough samples (%d)", t.n);
	CHECK(t.max_depth == TP_MAX_FRAMES, "deep stacks keep %d frames (max %d)", t.max_depth,
	      TP_MAX_FRAMES);
	CHECK(t.truncated >= (uint64_t)t.n * 9 / 10, "cut stacks counted (%" PRIu64 " of %d)",
	      t.truncated, t.n);
}

/* Waits for pid's tables, then returns its unwind stats. */
static struct unwind_stats note_and_stats(struct unwind *u, pid_t pid)
{
	struct unwind_stats st;

	wait_tables(u, pid);
	unwind_get_stats(u, &st);
	return st;
}

/*
 * One process cannot take the whole area: in an area exactly the size of
 * the workload's tables, it places at most half (UNWIND_SHARE) and the rest
 * is refused and counted; a second process mapping the same files then
 * names the tables the first placed.
 */
static void test_share(void)
{
	struct sampler_opts o = {
	    .hz = HZ, .ring_bytes = 1 << 20, .filter = TP_FILTER_PIDS, .unwind_bytes = UNWIND_SIZE};
	struct sampler_unwind_maps sm;
	struct unwind_stats whole, half, second;
	struct sampler *s = sampler_open(&o);
	struct unwind *u;
	pid_t a, b;

	CHECK(s != NULL && sampler_unwind_maps(s, &sm) == 0, "sampler and its unwind maps");
	if (!s)
		return;
	a = start_workload("libc");
	b = start_workload("libc");
	CHECK(a > 0 && b > 0, "two workloads");
	u = unwind_new(&(struct unwind_maps){sm.rows_fd, sm.nrows, sm.tables_fd, sm.procs_fd},
		       NULL);
	whole = note_and_stats(u, a); /* what its tables take in a large area */
	unwind_free(u);
	CHECK(whole.tables >= 2 && whole.share_refused == 0,
	      "all of it in a large area: %" PRIu64 " tables, %" PRIu64 " rows", whole.tables,
	      whole.rows);
	u = unwind_new(&(struct unwind_maps){sm.rows_fd, whole.rows, sm.tables_fd, sm.procs_fd},
		       NULL);
	half = note_and_stats(u, a);
	CHECK(half.share_refused >= 1 && half.rows < whole.rows,
	      "in an area of its size: %" PRIu64 " of %" PRIu64 " rows placed, %" PRIu64
	      " tables refused",
	      half.rows, whole.rows, half.share_refused);
	second = note_and_stats(u, b);
	CHECK(second.maps_placed > half.maps_placed, "the second process names tables too");
	unwind_free(u);
	stop_workload(a);
	stop_workload(b);
	sampler_free(s);
}

int main(void)
{
	if (check_skip_without_bpf())
		return 77;
	log_set_level(TP_LOG_WARN);
	test_libc();
	test_signal();
	test_vdso();
	test_deep();
	test_share();
	return check_done();
}
