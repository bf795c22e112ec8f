/*
 * test_offcpu: off-CPU capture (docs/offcpu.md) on the real kernel, against
 * the ground truth a child measures itself.
 *
 * The child serves "requests" on its threads, each publishing an OTEP 4947
 * record (static TLS, as test_sampler's children) whose span id names the
 * request, and blocking in a known function for a time it measures with
 * clock_gettime around the call: a 50 ms nanosleep (fn_sleep), a mutex
 * another thread holds for 40 ms (fn_mutex), a pipe read whose writer
 * waits 30 ms (fn_pipe), an fsync (fn_fsync), 200 sleeps of 100 µs
 * (fn_short: sums of short intervals), and two CPU-bound threads pinned to
 * one CPU (runqueue wait = wall time - CPU time, about half the wall
 * time). A thread outside any request sleeps 50 ms in fn_untagged.
 *
 * What a user relies on: per request, the blocked time within 5 % (or
 * 1 ms) of the truth with the stack of the function it blocked in, the
 * runqueue wait of contended threads, short intervals summed and not lost,
 * threads outside requests left out unless all threads are asked for, and
 * nothing at all while capture is off.
 *
 * Needs root and kernel BTF; otherwise it says why and exits 77 (skip).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <asm/prctl.h>
#endif

#include "check.h"
#include "sampler.h"
#include "traceprof/log.h"
#include "unwind.h"

#define MIN_US	    1000
#define UNWIND_SIZE (8u << 20)
#define SHORT_N	    200
#define RUNQ_MS	    300
#define FN_SPAN	    1024 /* bytes of a function's code that may hold its return address */

/* Requests: the low byte of the span id. */
enum req { R_SLEEP = 1, R_MUTEX, R_PIPE, R_FSYNC, R_RUNQ_A, R_RUNQ_B, R_SHORT, NREQ };

struct ctl {
	volatile int go;	 /* the round the parent wants run */
	volatile int done;	 /* the round the child finished */
	volatile int ready;	 /* the child filled loc */
	volatile int err;	 /* set-up failure: a line number */
	volatile pid_t main_tid; /* the thread of the sequential requests */
	volatile pid_t untagged; /* the thread that sleeps outside requests */
	int64_t truth_us[NREQ];	 /* blocked time measured around the call */
	int64_t wall_us[NREQ];	 /* runqueue requests: wall time */
	int64_t cpu_us[NREQ];	 /* runqueue requests: CPU time */
	int64_t irq_us[NREQ];	 /* interrupt and steal time meanwhile (/proc/stat) */
	int64_t untagged_truth;	 /* fn_untagged's sleep */
	struct tp_tls_loc loc;	 /* where the threads keep their pointer */
	char fsync_path[256];	 /* the file fn_fsync writes */
};

struct record {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t valid;
	uint8_t trace_flags;
	uint16_t attrs_size;
} __attribute__((packed));

static const uint8_t trace_id[16] = {0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd,
				     0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c};

static struct ctl *ctl;
static __thread void *ctx_slot;	      /* stands for otel_thread_ctx_v1 */
static __thread struct record my_rec; /* this thread's record */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int lock_held;
static volatile uint64_t sink;
static int pipefd[2];

static int64_t now_us(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

/*
 * Interrupt, softirq and steal time of cpu (all CPUs when < 0), in µs
 * (/proc/stat ticks): time a thread's CPU clock does not count although it
 * was on the CPU, so wall - CPU overstates its off-CPU time by up to this.
 */
static int64_t irq_us(int cpu)
{
	char want[16], line[256], name[16];
	unsigned long long v[8];
	int64_t us = -1;
	FILE *f = fopen("/proc/stat", "r");

	if (cpu < 0)
		snprintf(want, sizeof(want), "cpu");
	else
		snprintf(want, sizeof(want), "cpu%d", cpu);
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%15s %llu %llu %llu %llu %llu %llu %llu %llu", name, &v[0], &v[1],
			   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 9 &&
		    !strcmp(name, want)) {
			us = (int64_t)(v[5] + v[6] + v[7]) * 1000000 / sysconf(_SC_CLK_TCK);
			break;
		}
	if (f)
		fclose(f);
	return us;
}

static void publish(int req)
{
	memcpy(my_rec.trace_id, trace_id, 16);
	memset(my_rec.span_id, 0, 8);
	my_rec.span_id[0] = 0x5a;
	my_rec.span_id[7] = (uint8_t)req;
	my_rec.trace_flags = 1;
	*(volatile uint8_t *)&my_rec.valid = 1;
	*(void *volatile *)&ctx_slot = &my_rec;
}

static void unpublish(void)
{
	*(void *volatile *)&ctx_slot = NULL;
}

/* The blocking functions: each measures its own blocked time. */
static __attribute__((noinline)) int64_t fn_sleep(void)
{
	int64_t t0 = now_us(CLOCK_MONOTONIC);

	sleep_us(50000);
	return now_us(CLOCK_MONOTONIC) - t0;
}

static __attribute__((noinline)) int64_t fn_mutex(void)
{
	int64_t t0 = now_us(CLOCK_MONOTONIC);

	pthread_mutex_lock(&lock);
	t0 = now_us(CLOCK_MONOTONIC) - t0;
	pthread_mutex_unlock(&lock);
	return t0;
}

static __attribute__((noinline)) int64_t fn_pipe(void)
{
	int64_t t0 = now_us(CLOCK_MONOTONIC);
	char c;

	if (read(pipefd[0], &c, 1) != 1)
		return -1;
	return now_us(CLOCK_MONOTONIC) - t0;
}

static __attribute__((noinline)) int64_t fn_fsync(int fd)
{
	int64_t t0 = now_us(CLOCK_MONOTONIC);

	fsync(fd);
	return now_us(CLOCK_MONOTONIC) - t0;
}

static __attribute__((noinline)) int64_t fn_short(void)
{
	int64_t sum = 0;

	for (int i = 0; i < SHORT_N; i++) {
		int64_t t0 = now_us(CLOCK_MONOTONIC);

		sleep_us(100);
		sum += now_us(CLOCK_MONOTONIC) - t0;
	}
	return sum;
}

static __attribute__((noinline)) int64_t fn_untagged(void)
{
	int64_t t0 = now_us(CLOCK_MONOTONIC);

	sleep_us(50000);
	return now_us(CLOCK_MONOTONIC) - t0;
}

static void *holder(void *arg)
{
	pthread_mutex_lock(&lock);
	lock_held = 1;
	sleep_us(40000);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void *writer(void *arg)
{
	sleep_us(30000);
	if (write(pipefd[1], "x", 1) != 1)
		ctl->err = __LINE__;
	return NULL;
}

static int runq_cpu;

/* A CPU-bound request on runq_cpu, with another one there. */
static void *spinner(void *arg)
{
	int req = (int)(intptr_t)arg;
	cpu_set_t set;
	int64_t w0, c0;

	CPU_ZERO(&set);
	CPU_SET(runq_cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		ctl->err = __LINE__;
	publish(req);
	ctl->irq_us[req] = irq_us(runq_cpu);
	w0 = now_us(CLOCK_MONOTONIC);
	c0 = now_us(CLOCK_THREAD_CPUTIME_ID);
	while (now_us(CLOCK_MONOTONIC) - w0 < RUNQ_MS * 1000)
		for (int i = 0; i < 10000; i++)
			sink += i;
	ctl->cpu_us[req] = now_us(CLOCK_THREAD_CPUTIME_ID) - c0;
	ctl->wall_us[req] = now_us(CLOCK_MONOTONIC) - w0;
	/* plus a tick: /proc/stat counts in ticks */
	ctl->irq_us[req] = irq_us(runq_cpu) - ctl->irq_us[req] + 1000000 / sysconf(_SC_CLK_TCK);
	unpublish();
	return NULL;
}

static void *untagged_thread(void *arg)
{
	ctl->untagged = gettid();
	ctl->untagged_truth = fn_untagged();
	return NULL;
}

static void run_round(void)
{
	static char buf[1 << 20];
	pthread_t th, th2;
	int64_t c0;
	int fd;

	publish(R_SLEEP);
	ctl->truth_us[R_SLEEP] = fn_sleep();
	publish(R_MUTEX);
	lock_held = 0;
	pthread_create(&th, NULL, holder, NULL);
	while (!lock_held)
		;
	ctl->truth_us[R_MUTEX] = fn_mutex();
	pthread_join(th, NULL);
	publish(R_PIPE);
	pthread_create(&th, NULL, writer, NULL);
	ctl->truth_us[R_PIPE] = fn_pipe();
	pthread_join(th, NULL);
	/* Outside any request while the file is written: on some file systems
	 * open and write block too, and those waits are not fn_fsync's. */
	unpublish();
	fd = open(ctl->fsync_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	for (int i = 0; fd >= 0 && i < 8; i++)
		if (write(fd, buf, sizeof(buf)) < 0)
			break;
	publish(R_FSYNC);
	ctl->truth_us[R_FSYNC] = fd >= 0 ? fn_fsync(fd) : -1;
	if (fd >= 0)
		close(fd);
	publish(R_SHORT);
	ctl->irq_us[R_SHORT] = irq_us(-1);
	c0 = now_us(CLOCK_THREAD_CPUTIME_ID);
	ctl->wall_us[R_SHORT] = fn_short();
	/* each sleep is some µs on the CPU: blocked truth = wall - CPU */
	ctl->cpu_us[R_SHORT] = now_us(CLOCK_THREAD_CPUTIME_ID) - c0;
	ctl->truth_us[R_SHORT] = ctl->wall_us[R_SHORT] - ctl->cpu_us[R_SHORT];
	ctl->irq_us[R_SHORT] = irq_us(-1) - ctl->irq_us[R_SHORT] + 1000000 / sysconf(_SC_CLK_TCK);
	unpublish();
	pthread_create(&th, NULL, spinner, (void *)(intptr_t)R_RUNQ_A);
	pthread_create(&th2, NULL, spinner, (void *)(intptr_t)R_RUNQ_B);
	pthread_join(th, NULL);
	pthread_join(th2, NULL);
	pthread_create(&th, NULL, untagged_thread, NULL);
	pthread_join(th, NULL);
}

static uint64_t thread_pointer(void)
{
#if defined(__x86_64__)
	unsigned long fs = 0;

	syscall(SYS_arch_prctl, ARCH_GET_FS, &fs);
	return fs;
#else
	return (uint64_t)__builtin_thread_pointer();
#endif
}

static __attribute__((noreturn)) void child_main(void)
{
	cpu_set_t set;

	if (pipe(pipefd) || sched_getaffinity(0, sizeof(set), &set))
		ctl->err = __LINE__;
	for (runq_cpu = 0; runq_cpu < CPU_SETSIZE && !CPU_ISSET(runq_cpu, &set); runq_cpu++)
		;
	ctl->loc.kind = TP_TLS_STATIC;
	ctl->loc.tp_offset = (int64_t)((uint64_t)&ctx_slot - thread_pointer());
	ctl->main_tid = gettid();
	ctl->ready = 1;
	for (int round = 1;; round++) {
		while (ctl->go < round)
			sleep_us(1000);
		run_round();
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		ctl->done = round;
	}
}

/* What the records of one round showed, per request (index: enum req). */
struct tally {
	pid_t pid;
	int64_t blocked_us[NREQ], runq_us[NREQ];
	int n_long[NREQ];    /* blocked records of one interval */
	int n_short[NREQ];   /* SHORT records */
	int n_fn[NREQ];	     /* long blocked records with the function in the user stack */
	int n_kern[NREQ];    /* long blocked records with kernel frames */
	int untagged;	     /* records of the child outside requests */
	int untagged_fn;     /* of those, blocked in fn_untagged */
	int ut_long;	     /* long blocked records of the untagged thread */
	int ut_user_n;	     /* the last one's user frames */
	uint64_t ut_ip[3];   /* and its first ones */
	int64_t untagged_us; /* their blocked time */
	int bad;	     /* malformed: flags, frames, ids */
	int total;	     /* off-CPU records of any process */
	int samples;	     /* CPU samples (ignored) */
};

static uint64_t fn_start[NREQ];

static bool in_fn(const struct tp_sample *s, uint64_t fn)
{
	for (int i = s->kern_n; i < s->kern_n + s->user_n; i++)
		if (s->ips[i] > fn && s->ips[i] <= fn + FN_SPAN) {
			/* not past another known function that starts in between */
			bool other = false;

			for (int r = 1; r < NREQ; r++)
				if (fn_start[r] > fn && fn_start[r] < s->ips[i])
					other = true;
			if (!other)
				return true;
		}
	return false;
}

static int tally_rec(void *arg, const struct tp_sample *s, size_t len)
{
	struct tally *t = arg;
	int r, blocked;

	if (s->kind != TP_REC_OFFCPU) {
		t->samples++;
		return 0;
	}
	t->total++;
	if (s->pid != (uint32_t)t->pid)
		return 0;
	blocked = (s->flags & TP_SAMPLE_OFF_BLOCKED) != 0;
	if (blocked == !!(s->flags & TP_SAMPLE_OFF_RUNQ) ||
	    len < offsetof(struct tp_sample, ips) + 8u * (s->kern_n + s->user_n) ||
	    ((s->flags & TP_SAMPLE_OFF_SHORT) && (s->kern_n || s->user_n))) {
		t->bad++;
		return 0;
	}
	if (s->ctx_state != TP_CTX_TAGGED) {
		t->untagged++;
		if (blocked)
			t->untagged_us += s->off_us;
		if (blocked && !(s->flags & TP_SAMPLE_OFF_SHORT) && in_fn(s, (uint64_t)fn_untagged))
			t->untagged_fn++;
		if (blocked && !(s->flags & TP_SAMPLE_OFF_SHORT) &&
		    s->tid == (uint32_t)ctl->untagged) {
			t->ut_long++;
			t->ut_user_n = s->user_n;
			for (int i = 0; i < 3 && i < s->user_n; i++)
				t->ut_ip[i] = s->ips[s->kern_n + i];
		}
		return 0;
	}
	r = s->span_id[7];
	if (memcmp(s->trace_id, trace_id, 16) || s->span_id[0] != 0x5a || r < 1 || r >= NREQ) {
		t->bad++;
		return 0;
	}
	if (!blocked) {
		t->runq_us[r] += s->off_us;
		return 0;
	}
	t->blocked_us[r] += s->off_us;
	if (s->flags & TP_SAMPLE_OFF_SHORT) {
		t->n_short[r]++;
		return 0;
	}
	t->n_long[r]++;
	t->n_kern[r] += s->kern_n > 0;
	t->n_fn[r] += in_fn(s, fn_start[r]);
	return 0;
}

/* Runs round n in the child; the records until it is done and a little after. */
static void round_run(struct sampler *s, int n, struct tally *t)
{
	int64_t t0 = now_us(CLOCK_MONOTONIC), end = 0;

	memset(t, 0, sizeof(*t));
	t->pid = -1;
	while (sampler_poll(s, 0, tally_rec, t) > 0)
		;
	memset(t, 0, sizeof(*t));
	t->pid = ctl->main_tid;
	ctl->go = n;
	for (;;) {
		sampler_poll(s, 50, tally_rec, t);
		if (!end && ctl->done >= n)
			end = now_us(CLOCK_MONOTONIC) + 300000;
		if ((end && now_us(CLOCK_MONOTONIC) > end) ||
		    now_us(CLOCK_MONOTONIC) - t0 > 20000000)
			break;
	}
	CHECK(ctl->done >= n, "round %d done by the child", n);
}

static bool near(int64_t got, int64_t truth)
{
	int64_t tol = truth / 20 > 1000 ? truth / 20 : 1000;

	return got >= truth - tol && got <= truth + tol;
}

static void check_request(const struct tally *t, int r, const char *what)
{
	int64_t truth = ctl->truth_us[r], got = t->blocked_us[r] + t->runq_us[r];

	printf("  %-6s truth=%" PRId64 " us blocked=%" PRId64 " runq=%" PRId64
	       " long=%d short=%d with_fn=%d with_kernel=%d\n",
	       what, truth, t->blocked_us[r], t->runq_us[r], t->n_long[r], t->n_short[r],
	       t->n_fn[r], t->n_kern[r]);
	int64_t tol = truth / 20 > 1000 ? truth / 20 : 1000;

	if (r == R_SHORT) {
		/*
		 * 200 sleeps: each blocks at least its 100 µs; the off-CPU
		 * time covers wall - CPU (nothing lost) and stays within the
		 * wall time; blocked alone is at most wall - CPU (the rest is
		 * the runqueue wait after each wakeup, large on a loaded host)
		 */
		CHECK(t->blocked_us[r] >= SHORT_N * 100 && t->blocked_us[r] <= truth + tol,
		      "%s: blocked %" PRId64 " us, at least %d, wall - CPU %" PRId64 " us", what,
		      t->blocked_us[r], SHORT_N * 100, truth);
		CHECK(got >= truth - tol - ctl->irq_us[r] && got <= ctl->wall_us[r] + 1000,
		      "%s: off-CPU %" PRId64 " us, wall - CPU %" PRId64 " us (interrupts %" PRId64
		      " us), wall %" PRId64 " us",
		      what, got, truth, ctl->irq_us[r], ctl->wall_us[r]);
		CHECK(t->n_short[r] > 0, "%s: short intervals summed into SHORT records", what);
		return;
	}
	/*
	 * The truth is the call; the request also holds the code around it,
	 * where a loaded host preempts the thread (runqueue time of the
	 * request, not of the call). So: blocked is the call's time (within
	 * 5 % or 1 ms) less at most its runqueue wait after the wakeup, and
	 * the whole off-CPU time covers the call.
	 */
	CHECK(t->blocked_us[r] <= truth + tol && t->blocked_us[r] + t->runq_us[r] >= truth - tol,
	      "%s: blocked %" PRId64 " us (runq %" PRId64 "), truth %" PRId64 " us", what,
	      t->blocked_us[r], t->runq_us[r], truth);
	CHECK(t->blocked_us[r] > truth / 2, "%s: blocked %" PRId64 " us, mostly blocked", what,
	      t->blocked_us[r]);
	CHECK(near(got, truth) || t->runq_us[r] > tol,
	      "%s: off-CPU %" PRId64 " us, truth %" PRId64 " us (no runqueue wait to explain it)",
	      what, got, truth);
	CHECK(t->n_long[r] >= 1, "%s: a blocked record of its own", what);
	CHECK(t->n_fn[r] >= 1, "%s: the blocked stack holds the function", what);
	CHECK(t->n_kern[r] >= 1, "%s: with kernel frames", what);
}

static void check_runq(const struct tally *t, int r)
{
	int64_t wall = ctl->wall_us[r], truth = wall - ctl->cpu_us[r];
	int64_t tol = truth / 10 > 2000 ? truth / 10 : 2000;

	printf("  runq%d  wall=%" PRId64 " cpu=%" PRId64 " us runq=%" PRId64 " blocked=%" PRId64
	       " irq=%" PRId64 "\n",
	       r - R_RUNQ_A, wall, ctl->cpu_us[r], t->runq_us[r], t->blocked_us[r], ctl->irq_us[r]);
	CHECK(t->runq_us[r] >= truth - tol - ctl->irq_us[r] && t->runq_us[r] <= truth + tol,
	      "runqueue wait %" PRId64 " us, wall - cpu %" PRId64 " us (interrupts %" PRId64 " us)",
	      t->runq_us[r], truth, ctl->irq_us[r]);
	CHECK(t->runq_us[r] > wall / 4 && t->runq_us[r] < wall,
	      "a thread sharing one CPU waits a good part of its wall time: %" PRId64 " of %" PRId64
	      " us",
	      t->runq_us[r], wall);
}

/* Only one of the two runs at a time: together they wait at least about one wall time. */
static void check_runq_pair(const struct tally *t)
{
	int64_t wall = (ctl->wall_us[R_RUNQ_A] + ctl->wall_us[R_RUNQ_B]) / 2;
	int64_t both = t->runq_us[R_RUNQ_A] + t->runq_us[R_RUNQ_B];

	CHECK(both >= wall * 9 / 10 && both <= 2 * wall,
	      "two threads on one CPU: %" PRId64 " us of runqueue wait together, wall %" PRId64
	      " us",
	      both, wall);
}

static pid_t spawn(void)
{
	pid_t pid;

	snprintf(ctl->fsync_path, sizeof(ctl->fsync_path), "test_offcpu.%d.tmp", (int)getpid());
	pid = fork();
	if (pid == 0)
		child_main();
	for (int i = 0; pid > 0 && !ctl->ready && i < 5000; i++)
		sleep_us(1000);
	CHECK(pid > 0 && ctl->ready && !ctl->err, "child set up (line %d)", ctl->err);
	return pid;
}

/* Until the child's unwind tables are placed: whole stacks through libc. */
static struct unwind *place_tables(struct sampler *s, pid_t pid)
{
	struct sampler_unwind_maps sm;
	struct unwind *u;

	if (sampler_unwind_maps(s, &sm))
		return NULL;
	struct unwind_maps um = {sm.rows_fd, sm.nrows, sm.tables_fd, sm.procs_fd};

	u = unwind_new(&um, NULL);
	CHECK(u != NULL, "unwind_new: %s", strerror(errno));
	for (int i = 0; u && i < 250; i++) {
		if (unwind_note_process(u, pid) == 0 && !unwind_process_pending(u, pid))
			return u;
		sleep_us(20000);
	}
	CHECK(0, "tables of the child placed within 5 s");
	return u;
}

static void print_counters(struct sampler *s)
{
	struct sampler_stats st;

	if (sampler_get_stats(s, &st))
		return;
	printf("  counters: records=%" PRIu64 " short=%" PRIu64 " lost=%" PRIu64
	       " state_full=%" PRIu64 " no_wakeup=%" PRIu64 " ustack_lost=%" PRIu64
	       " run_ns=%" PRIu64 " runs=%" PRIu64 "\n",
	       st.counters[TP_CNT_OFF_RECORDS], st.counters[TP_CNT_OFF_SHORT],
	       st.counters[TP_CNT_OFF_LOST], st.counters[TP_CNT_OFF_STATE_FULL],
	       st.counters[TP_CNT_OFF_NO_WAKEUP], st.counters[TP_CNT_OFF_USTACK_LOST],
	       st.offcpu_run_time_ns, st.offcpu_run_cnt);
	CHECK(st.counters[TP_CNT_OFF_LOST] == 0, "no record lost to a full ring");
	CHECK(st.counters[TP_CNT_OFF_STATE_FULL] == 0, "no thread left out: state map full");
}

static void test_offcpu(void)
{
	struct sampler_opts o = {
	    .hz = 19, .ring_bytes = 4 << 20, .filter = TP_FILTER_PIDS, .unwind_bytes = UNWIND_SIZE};
	struct tally *t = calloc(1, sizeof(*t));
	struct unwind *u;
	struct sampler *s;
	pid_t pid;

	s = sampler_open(&o);
	CHECK(s != NULL, "sampler_open: %s", strerror(errno));
	if (!s || !t) {
		free(t);
		return;
	}
	CHECK(sampler_set_offcpu(s, 3, MIN_US) == -EINVAL, "a bad mode is refused");
	CHECK(sampler_set_offcpu(s, SAMPLER_OFFCPU_ALL, 0) == -EINVAL, "threshold 0 is refused");
	CHECK(sampler_set_offcpu(s, SAMPLER_OFFCPU_ALL, SAMPLER_OFFCPU_MIN_US_HI + 1) == -EINVAL,
	      "a threshold above the limit is refused");
	pid = spawn();
	if (pid <= 0)
		goto out;
	CHECK(sampler_add_target_pid(s, pid) == 0, "target");
	CHECK(sampler_set_tls(s, pid, (const struct tp_tls_loc *)&ctl->loc) == 0, "tls location");
	u = place_tables(s, pid);

	printf("round 1: capture never switched on\n");
	round_run(s, 1, t);
	CHECK(t->total == 0, "off: no off-CPU record at all (%d)", t->total);

	printf("round 2: requests only, threshold %d us\n", MIN_US);
	CHECK(sampler_set_offcpu(s, SAMPLER_OFFCPU_REQUESTS, MIN_US) == 0, "capture on");
	round_run(s, 2, t);
	CHECK(t->bad == 0, "well-formed records (%d bad)", t->bad);
	check_request(t, R_SLEEP, "sleep");
	check_request(t, R_MUTEX, "mutex");
	check_request(t, R_PIPE, "pipe");
	check_request(t, R_SHORT, "short");
	printf("  fsync  truth=%" PRId64 " us blocked=%" PRId64 " long=%d with_fn=%d\n",
	       ctl->truth_us[R_FSYNC], t->blocked_us[R_FSYNC], t->n_long[R_FSYNC],
	       t->n_fn[R_FSYNC]);
	CHECK(t->blocked_us[R_FSYNC] > 0, "fsync: blocked time recorded");
	if (t->n_long[R_FSYNC])
		CHECK(t->n_fn[R_FSYNC] >= 1, "fsync: the blocked stack holds the function");
	check_runq(t, R_RUNQ_A);
	check_runq(t, R_RUNQ_B);
	check_runq_pair(t);
	CHECK(t->untagged == 0, "requests only: nothing of threads outside requests (%d)",
	      t->untagged);
	print_counters(s);

	printf("round 3: all threads\n");
	CHECK(sampler_set_offcpu(s, SAMPLER_OFFCPU_ALL, MIN_US) == 0, "all threads");
	round_run(s, 3, t);
	printf("  untagged truth=%" PRId64 " us blocked=%" PRId64 " records=%d in_fn=%d\n",
	       ctl->untagged_truth, t->untagged_us, t->untagged, t->untagged_fn);
	CHECK(t->untagged_fn >= 1,
	      "all threads: the untagged sleep, in fn_untagged (%p): %d records, the last with "
	      "%d user frames %#" PRIx64 " %#" PRIx64 " %#" PRIx64,
	      (void *)fn_untagged, t->ut_long, t->ut_user_n, t->ut_ip[0], t->ut_ip[1], t->ut_ip[2]);
	CHECK(t->untagged_us >= ctl->untagged_truth * 9 / 10,
	      "all threads: the untagged thread's blocked time is there");
	check_request(t, R_SLEEP, "sleep");

	printf("round 4: switched off again\n");
	CHECK(sampler_set_offcpu(s, SAMPLER_OFFCPU_OFF, MIN_US) == 0, "capture off");
	round_run(s, 4, t);
	CHECK(t->total == 0, "off again: no off-CPU record at all (%d)", t->total);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(ctl->fsync_path);
	unwind_free(u);
out:
	sampler_free(s);
	free(t);
}

int main(void)
{
	if (check_skip_without_bpf())
		return 77;
	log_set_level(getenv("TRACEPROF_TEST_VERBOSE") ? TP_LOG_DEBUG : TP_LOG_WARN);
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ctl == MAP_FAILED)
		return 1;
	fn_start[R_SLEEP] = (uint64_t)fn_sleep;
	fn_start[R_MUTEX] = (uint64_t)fn_mutex;
	fn_start[R_PIPE] = (uint64_t)fn_pipe;
	fn_start[R_FSYNC] = (uint64_t)fn_fsync;
	fn_start[R_SHORT] = (uint64_t)fn_short;
	test_offcpu();
	return check_done();
}
