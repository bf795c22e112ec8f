/*
 * test_raise: raised sampling on the real kernel (docs/triggers.md).
 *
 * Two children run raise_child (static SDK): a main thread inside a
 * request (SDK thread context, registration seen by the uprobe) and a
 * background thread outside any request, all burning CPU. Child A is a
 * raised target, child B only a sampled process. With the base events at
 * 19 Hz and the raised events at 99 Hz, per CPU-second of each thread
 * (schedstat, so a shared machine does not matter): A's in-request thread
 * gets ~99 RAISED samples, ~19 of them also BASE, and no base-event
 * sample (nothing counted twice); A's background thread and B stay at
 * 19 Hz without flags. Changing the target set moves the raised rate to B
 * without reopening; sampler_set_raised(s, 0) brings everyone back to the
 * base rate at once.
 *
 * Needs root and kernel BTF; otherwise it says why and exits 77 (skip).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "sampler.h"
#include "traceprof/log.h"

#define BASE_HZ	  19
#define RAISED_HZ 99

static const char *traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/* One child: its pid, its background thread, its stdin. */
struct child {
	pid_t pid;    /* main thread = the in-request thread */
	pid_t bg_tid; /* background thread, no context */
	int go_fd;    /* write end of its stdin */
	int out_fd;   /* read end of its stdout */
};

/* Samples of one thread in a time window, by flags. */
struct thread_tally {
	pid_t tid;	 /* the thread */
	int plain;	 /* no flags: base events */
	int raised;	 /* TP_SAMPLE_RAISED (with or without BASE) */
	int raised_base; /* TP_SAMPLE_RAISED | TP_SAMPLE_BASE */
	int bad_hz;	 /* hz not what its flags say */
	int untagged;	 /* raised but not TP_CTX_TAGGED */
	uint64_t cpu0;	 /* schedstat ns at the start */
	uint64_t cpu1;	 /* schedstat ns at the end */
};

struct window {
	uint64_t t0, t1;	   /* CLOCK_MONOTONIC ns: samples counted in [t0, t1] */
	struct thread_tally th[4]; /* A main, A bg, B main, B bg */
	int raised_hz;		   /* hz expected on RAISED samples */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static uint64_t cpu_ns(pid_t pid, pid_t tid)
{
	char path[96];
	unsigned long long ns = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%llu", &ns) != 1)
			ns = 0;
		fclose(f);
	}
	return ns;
}

static int tally(void *arg, const struct tp_sample *smp, size_t len)
{
	struct window *w = arg;

	(void)len;
	if (smp->time_ns < w->t0 || smp->time_ns > w->t1)
		return 0;
	for (int i = 0; i < 4; i++) {
		struct thread_tally *t = &w->th[i];

		if (smp->tid != (uint32_t)t->tid)
			continue;
		if (smp->flags & TP_SAMPLE_RAISED) {
			t->raised++;
			t->raised_base += !!(smp->flags & TP_SAMPLE_BASE);
			t->bad_hz += smp->hz != w->raised_hz;
			t->untagged += smp->ctx_state != TP_CTX_TAGGED;
		} else {
			t->plain++;
			t->bad_hz += smp->hz != BASE_HZ || (smp->flags & TP_SAMPLE_BASE);
		}
	}
	return 0;
}

static int discard(void *arg, const struct tp_sample *smp, size_t len)
{
	(void)arg, (void)smp, (void)len;
	return 0;
}

/* Samples of both children's threads over ms, counted per CPU-second. */
static void measure(struct sampler *s, const struct child *a, const struct child *b,
		    struct window *w, int ms, int raised_hz)
{
	pid_t pids[4] = {a->pid, a->pid, b->pid, b->pid};

	while (sampler_poll(s, 0, discard, NULL) > 0)
		;
	memset(w, 0, sizeof(*w));
	w->raised_hz = raised_hz;
	w->th[0].tid = a->pid;
	w->th[1].tid = a->bg_tid;
	w->th[2].tid = b->pid;
	w->th[3].tid = b->bg_tid;
	w->t1 = UINT64_MAX;
	for (int i = 0; i < 4; i++)
		w->th[i].cpu0 = cpu_ns(pids[i], w->th[i].tid);
	w->t0 = mono_ns();
	while (mono_ns() - w->t0 < (uint64_t)ms * 1000000)
		sampler_poll(s, 100, tally, w);
	w->t1 = mono_ns();
	for (int i = 0; i < 4; i++)
		w->th[i].cpu1 = cpu_ns(pids[i], w->th[i].tid);
	/* what the CPUs took before t1 but the ring had not handed over yet */
	for (int i = 0; i < 3; i++)
		sampler_poll(s, 100, tally, w);
}

/* Samples per CPU-second of thread i. */
static double rate(const struct window *w, int i, int n)
{
	double cpu_s = (double)(w->th[i].cpu1 - w->th[i].cpu0) / 1e9;

	return cpu_s > 0 ? n / cpu_s : 0;
}

/*
 * Whether n samples of thread i match hz: within 25 % or, for the few
 * samples of a short window at the base rate, 3 standard deviations of the
 * expected count (which thread a tick finds running is a random draw).
 */
static bool near(const struct window *w, int i, int n, double hz)
{
	double want = hz * (double)(w->th[i].cpu1 - w->th[i].cpu0) / 1e9;
	double tol = want * 0.25 > 3 * sqrt(want) ? want * 0.25 : 3 * sqrt(want);

	return want > 0 && n >= want - tol && n <= want + tol;
}

static const char *names[4] = {"A in request", "A background", "B in request", "B background"};

/* Thread i sampled at the base rate only, no flags. */
static void check_base_only(const struct window *w, int i, const char *phase)
{
	const struct thread_tally *t = &w->th[i];

	CHECK(t->raised == 0, "%s: %s: no raised samples (%d)", phase, names[i], t->raised);
	CHECK(near(w, i, t->plain, BASE_HZ), "%s: %s: %.1f base samples per CPU-s (%d)", phase,
	      names[i], rate(w, i, t->plain), t->plain);
	CHECK(t->bad_hz == 0, "%s: %s: hz and flags right (%d wrong)", phase, names[i], t->bad_hz);
}

/* Thread i sampled by the raised events only, a BASE subsample among them. */
static void check_raised(const struct window *w, int i, const char *phase)
{
	const struct thread_tally *t = &w->th[i];
	double rr = rate(w, i, t->raised), rb = rate(w, i, t->raised_base);

	CHECK(t->plain == 0, "%s: %s: no base-event samples (%d): nothing counted twice", phase,
	      names[i], t->plain);
	CHECK(near(w, i, t->raised, RAISED_HZ), "%s: %s: %.1f raised samples per CPU-s (%d)", phase,
	      names[i], rr, t->raised);
	CHECK(near(w, i, t->raised_base, BASE_HZ), "%s: %s: %.1f of them BASE per CPU-s (%d)",
	      phase, names[i], rb, t->raised_base);
	/* the accumulator is exact per CPU: off by at most one per CPU */
	CHECK(abs(t->raised_base * RAISED_HZ - t->raised * BASE_HZ) <= 2 * RAISED_HZ,
	      "%s: %s: BASE share %d of %d is %d/%d", phase, names[i], t->raised_base, t->raised,
	      BASE_HZ, RAISED_HZ);
	CHECK(t->bad_hz == 0 && t->untagged == 0, "%s: %s: hz %d, tagged (%d wrong, %d untagged)",
	      phase, names[i], RAISED_HZ, t->bad_hz, t->untagged);
}

static bool start_child(struct sampler *s, struct child *c)
{
	struct timespec ts = {0, 1000000};
	int in[2], out[2];
	uint64_t rec = 0;

	memset(c, 0, sizeof(*c));
	if (pipe(in) || pipe(out))
		return false;
	c->pid = fork();
	if (c->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(TP_RAISE_CHILD, TP_RAISE_CHILD, traceparent, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->go_fd = in[1];
	c->out_fd = out[0];
	if (c->pid < 0)
		return false;
	/* a uprobe by path sees the child only once it runs the program */
	for (int i = 0; i < 5000; i++) {
		char exe[PATH_MAX], path[64];
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%d/exe", (int)c->pid);
		n = readlink(path, exe, sizeof(exe) - 1);
		if (n > 0 && (exe[n] = '\0', strstr(exe, "raise_child")))
			break;
		nanosleep(&ts, NULL);
	}
	CHECK(sampler_attach_sdk_uprobe(s, TP_RAISE_CHILD, c->pid) == 0, "uprobe in the child");
	CHECK(sampler_add_target_pid(s, c->pid) == 0, "sample the child");
	CHECK(write(c->go_fd, "g", 1) == 1, "child started");
	CHECK(read(c->out_fd, &c->bg_tid, sizeof(c->bg_tid)) == sizeof(c->bg_tid) && c->bg_tid > 0,
	      "background thread id");
	for (int i = 0; i < 5000 && sampler_thread_record(s, c->pid, &rec); i++)
		nanosleep(&ts, NULL);
	CHECK(rec != 0, "the child's request context registered");
	return rec != 0 && c->bg_tid > 0;
}

static void stop_child(struct child *c)
{
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
	}
	if (c->go_fd > 0)
		close(c->go_fd);
	if (c->out_fd > 0)
		close(c->out_fd);
}

static void test_raise(void)
{
	struct sampler_opts o = {.hz = BASE_HZ, .ring_bytes = 1 << 20, .filter = TP_FILTER_PIDS};
	struct sampler_stats st0, st1;
	struct child a = {0}, b = {0};
	uint32_t many[TP_MAX_RAISED_TARGETS + 1];
	struct window *w = calloc(1, sizeof(*w));
	struct sampler *s = sampler_open(&o);
	uint32_t ta, tb;
	uint64_t t_off;

	CHECK(s != NULL, "sampler_open: %s", strerror(errno));
	if (!s || !w)
		goto out;
	if (!start_child(s, &a) || !start_child(s, &b))
		goto out;
	ta = (uint32_t)a.pid;
	tb = (uint32_t)b.pid;

	measure(s, &a, &b, w, 3000, RAISED_HZ);
	for (int i = 0; i < 4; i++)
		check_base_only(w, i, "raised off");

	/* bad input changes nothing */
	log_set_level(TP_LOG_QUIET); /* the errors it logs are expected */
	CHECK(sampler_set_raised(s, BASE_HZ - 1) == -EINVAL, "raised below the base rate refused");
	CHECK(sampler_set_raised(s, SAMPLER_MAX_HZ + 1) == -EINVAL, "raised above the max refused");
	for (int i = 0; i <= TP_MAX_RAISED_TARGETS; i++)
		many[i] = i + 1;
	CHECK(sampler_set_raised_targets(s, many, TP_MAX_RAISED_TARGETS + 1) == -ENOSPC,
	      "too many raised targets refused");
	log_set_level(TP_LOG_WARN);
	CHECK(sampler_set_raised_targets(s, (uint32_t[]){0}, 1) == -EINVAL, "tgid 0 refused");
	CHECK(sampler_raised_hz(s) == 0, "still off");

	CHECK(sampler_set_raised_targets(s, &ta, 1) == 0, "target A");
	CHECK(sampler_get_stats(s, &st0) == 0, "stats");
	CHECK(sampler_set_raised(s, RAISED_HZ) == 0 && sampler_raised_hz(s) == RAISED_HZ,
	      "raised to %d Hz", RAISED_HZ);
	CHECK(sampler_set_raised(s, RAISED_HZ) == 0, "the same rate again is a no-op");
	measure(s, &a, &b, w, 3000, RAISED_HZ);
	check_raised(w, 0, "A raised");
	check_base_only(w, 1, "A raised");
	check_base_only(w, 2, "A raised");
	check_base_only(w, 3, "A raised");
	CHECK(sampler_get_stats(s, &st1) == 0, "stats");
	CHECK(st1.counters[TP_CNT_RAISED] - st0.counters[TP_CNT_RAISED] >=
		  (uint64_t)w->th[0].raised,
	      "raised samples counted");
	CHECK(st1.counters[TP_CNT_RAISED_BASE] > st0.counters[TP_CNT_RAISED_BASE],
	      "BASE subsample counted");
	CHECK(st1.counters[TP_CNT_BASE_COVERED] > st0.counters[TP_CNT_BASE_COVERED],
	      "covered base samples counted");
	CHECK(st1.counters[TP_CNT_RAISED_IDLE] > st0.counters[TP_CNT_RAISED_IDLE],
	      "raised samples outside a request counted");
	CHECK(st1.counters[TP_CNT_RAISED_OTHER] > st0.counters[TP_CNT_RAISED_OTHER],
	      "raised samples of other processes counted");

	/* the target set moves to B without reopening anything */
	CHECK(sampler_set_raised_targets(s, &tb, 1) == 0, "target B instead");
	measure(s, &a, &b, w, 3000, RAISED_HZ);
	check_base_only(w, 0, "B raised");
	check_base_only(w, 1, "B raised");
	check_raised(w, 2, "B raised");
	check_base_only(w, 3, "B raised");

	/* off: the base rate at once */
	CHECK(sampler_set_raised(s, 0) == 0 && sampler_raised_hz(s) == 0, "raised off");
	t_off = mono_ns();
	measure(s, &a, &b, w, 1000, RAISED_HZ);
	CHECK(w->t0 - t_off < 200000000ull, "measured right after switching off");
	for (int i = 0; i < 4; i++)
		check_base_only(w, i, "off again");
	CHECK(sampler_set_raised_targets(s, NULL, 0) == 0, "empty target set");
out:
	stop_child(&a);
	stop_child(&b);
	sampler_free(s);
	free(w);
}

int main(void)
{
	if (check_skip_without_bpf())
		return 77;
	log_set_level(getenv("TRACEPROF_TEST_VERBOSE") ? TP_LOG_DEBUG : TP_LOG_WARN);
	test_raise();
	return check_done();
}
