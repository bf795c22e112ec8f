/*
 * test_sampler: the BPF sampler, loaded by agent/sampling/sampler.c on the real
 * kernel, samples what runs and tags each sample with the thread context.
 *
 * Each case forks a child that burns CPU in spin_leaf() and, for the thread
 * context cases, publishes an OTEP 4947 record with known ids through a TLS
 * pointer: static TLS in this executable (TP_TLS_STATIC), TLS of a library
 * loaded with dlopen (TP_TLS_DTV), the shared SDK and the static SDK (the
 * registration uprobe). The parent drives the child through phases in
 * shared memory (tagged, invalid, garbage pointer, NULL) and checks every
 * sample taken after the child acknowledged a phase. The loader rendezvous
 * uprobe is checked on a child that dlopens and dlcloses a library (maps
 * records, their rate limit, the filter).
 *
 * Needs root and kernel BTF; otherwise it says why and exits 77 (skip).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
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
#include "procmem.h"
#include "sampler.h"
#include "tlsloc.h"
#include "traceprof/log.h"
#include "traceprof/sdk.h"

#define HZ 99

/* What the parent asks the child to publish. */
enum phase {
	PH_START = 0,	/* nothing published yet */
	PH_TAGGED = 1,	/* pointer to the record, valid = 1 */
	PH_INVALID = 2, /* valid = 0 */
	PH_GARBAGE = 3, /* pointer = 0x10 */
	PH_NULL = 4,	/* pointer = NULL */
};

/* Parent <-> child, in a shared mapping. */
struct ctl {
	volatile int phase;	/* enum phase the parent wants */
	volatile int ack;	/* enum phase the child has published */
	volatile int ready;	/* the child filled loc (or err) */
	volatile int err;	/* the child could not set up: a line number */
	volatile pid_t aux_tid; /* a second thread of the child, 0 if none */
	volatile int fork_now;	/* the parent asks the child to fork (test_fork) */
	volatile pid_t forked;	/* the child's own child, once running */
	struct tp_tls_loc loc;	/* where the child keeps its pointer */
};

/* An OTEP 4947 record header, as a writer lays it out. */
struct record {
	uint8_t trace_id[16]; /* W3C trace id */
	uint8_t span_id[8];   /* W3C span id */
	uint8_t valid;	      /* 1: current */
	uint8_t trace_flags;  /* W3C flags */
	uint16_t attrs_size;  /* no attributes */
} __attribute__((packed));

static const uint8_t trace_id[16] = {0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
				     0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36};
static const uint8_t span_id[8] = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
static const char *traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

static struct ctl *ctl;		     /* shared with the child */
static struct record child_record;   /* the child's record */
static __thread void *test_ctx_slot; /* static TLS: stands for otel_thread_ctx_v1 */
static volatile uint64_t spin_sink;  /* keeps the spin loop */
static int aux_samples;		     /* samples of the second thread of a child */

static __attribute__((noinline)) void spin_leaf(void)
{
	for (int i = 0; i < 1000000; i++)
		spin_sink += i;
}

static void publish(void **slot, int phase)
{
	switch (phase) {
	case PH_TAGGED:
		memcpy(child_record.trace_id, trace_id, 16);
		memcpy(child_record.span_id, span_id, 8);
		child_record.trace_flags = 1;
		*(volatile uint8_t *)&child_record.valid = 1;
		*(void *volatile *)slot = &child_record;
		break;
	case PH_INVALID:
		*(volatile uint8_t *)&child_record.valid = 0;
		break;
	case PH_GARBAGE:
		*(void *volatile *)slot = (void *)0x10;
		break;
	case PH_NULL:
		*(void *volatile *)slot = NULL;
		break;
	}
}

/* The child's main loop: publish what the parent asks, burn CPU meanwhile. */
static __attribute__((noreturn)) void child_loop(void **slot)
{
	for (;;) {
		int want = ctl->phase;

		if (slot && want != ctl->ack) {
			publish(slot, want);
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			ctl->ack = want;
		}
		spin_leaf();
	}
}

static void child_busy(void)
{
	ctl->ready = 1;
	child_loop(NULL);
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

static void child_fail(int line)
{
	ctl->err = line;
	ctl->ready = 1;
	_exit(1);
}

static void child_static_tls(void)
{
	ctl->loc.kind = TP_TLS_STATIC;
	ctl->loc.tp_offset = (int64_t)((uint64_t)&test_ctx_slot - thread_pointer());
	ctl->ready = 1;
	child_loop(&test_ctx_slot);
}

/*
 * Static TLS as child_static_tls, tagged at once; when the parent asks, it
 * forks a process of its own that only spins (its copy of the slot points
 * at its copy of the record), and spins itself.
 */
static void child_fork_tls(void)
{
	ctl->loc.kind = TP_TLS_STATIC;
	ctl->loc.tp_offset = (int64_t)((uint64_t)&test_ctx_slot - thread_pointer());
	publish(&test_ctx_slot, PH_TAGGED);
	ctl->ack = PH_TAGGED;
	ctl->ready = 1;
	while (!ctl->fork_now)
		spin_leaf();
	if (fork() == 0) {
		ctl->forked = getpid();
		child_loop(NULL);
	}
	child_loop(NULL);
}

static void *aux_spin(void *arg)
{
	ctl->aux_tid = gettid();
	for (;;)
		spin_leaf();
	return NULL;
}

/* TLS of a dlopen'ed library: located through the DTV, as glibc lays it out. */
static void child_dtv_tls(void)
{
	void **(*slot_fn)(void);
	void *h, *block = NULL;
	uint64_t dtv, entry;
	size_t modid = 0;
	pthread_t aux;

	h = dlopen(TP_TEST_TLS_LIB, RTLD_NOW);
	if (!h)
		child_fail(__LINE__);
	*(void **)&slot_fn = dlsym(h, "sampler_tls_lib_slot");
	if (!slot_fn)
		child_fail(__LINE__);
	void **slot = slot_fn(); /* allocates this thread's block */
	if (dlinfo(h, RTLD_DI_TLS_MODID, &modid) || dlinfo(h, RTLD_DI_TLS_DATA, &block) || !block)
		child_fail(__LINE__);
#if defined(__x86_64__)
	ctl->loc.dtv_offset = 8; /* tcbhead_t: tcb, dtv */
#else
	ctl->loc.dtv_offset = 0; /* aarch64 TCB: dtv first */
#endif
	ctl->loc.kind = TP_TLS_DTV;
	ctl->loc.dtv_stride = 16;
	ctl->loc.dtv_val_offset = 0;
	ctl->loc.modid = modid;
	ctl->loc.sym_offset = (uint64_t)slot - (uint64_t)block;
	/* the layout the sampler assumes, checked here where it can be read */
	memcpy(&dtv, (void *)(thread_pointer() + ctl->loc.dtv_offset), 8);
	memcpy(&entry, (void *)(dtv + modid * 16), 8);
	if (entry != (uint64_t)block)
		child_fail(__LINE__);
	/* a thread that never touches the library: its block stays unallocated */
	if (pthread_create(&aux, NULL, aux_spin, NULL))
		child_fail(__LINE__);
	while (!ctl->aux_tid)
		;
	ctl->ready = 1;
	child_loop(slot);
}

/* An SDK child: set up, spins unregistered until told PH_TAGGED, then attaches. */
static void sdk_child_until_tagged(void)
{
	ctl->ready = 1;
	while (ctl->phase != PH_TAGGED)
		spin_leaf();
	tp_sdk_attach(trace_id, span_id, 1, NULL, 0);
	ctl->ack = PH_TAGGED;
}

static void child_sdk(void)
{
	sdk_child_until_tagged();
	while (ctl->phase != PH_INVALID)
		spin_leaf();
	tp_sdk_detach();
	ctl->ack = PH_INVALID;
	child_loop(NULL);
}

/* child_sdk, but it execs a busy shell once told PH_NULL, still attached. */
static void child_sdk_exec(void)
{
	sdk_child_until_tagged();
	while (ctl->phase != PH_NULL)
		spin_leaf();
	execl("/bin/sh", "sh", "-c", "while :; do :; done", (char *)NULL);
	_exit(127);
}

/* Forks a child running fn; waits until it is set up. */
/* Busy in the kernel: reads of /dev/zero, most of their time copying zeros out. */
static void child_reads(void)
{
	static char buf[1 << 20];
	int fd = open("/dev/zero", O_RDONLY);

	ctl->ready = 1;
	for (;;)
		if (fd < 0 || read(fd, buf, sizeof(buf)) < 0)
			spin_leaf();
}

static pid_t spawn(void (*fn)(void))
{
	struct timespec ts = {0, 1000000};
	pid_t pid;

	memset(ctl, 0, sizeof(*ctl));
	pid = fork();
	if (pid == 0) {
		fn();
		_exit(0);
	}
	for (int i = 0; pid > 0 && !ctl->ready && i < 10000; i++)
		nanosleep(&ts, NULL);
	CHECK(pid > 0 && ctl->ready && !ctl->err, "child set up (failed at line %d)", ctl->err);
	return pid;
}

static void reap(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* What the samples of one collection showed. */
struct tally {
	pid_t pid;	    /* the child */
	pid_t tid;	    /* the thread whose states are checked (0: any) */
	pid_t aux_tid;	    /* a second thread, tallied apart */
	uint64_t text_lo;   /* the child's executable text */
	uint64_t text_hi;   /* end of it */
	int n;		    /* samples of the checked thread */
	int other_pid;	    /* samples of other processes */
	int bad_hz;	    /* hz != HZ */
	int no_user;	    /* user_n == 0 */
	int leaf_in_text;   /* user leaf in the executable's text */
	int leaf_in_spin;   /* user leaf near spin_leaf */
	int state[4];	    /* per enum tp_ctx_state */
	int ids_ok;	    /* TAGGED with the expected ids and flags */
	int aux_n;	    /* samples of aux_tid */
	int aux_tagged;	    /* of which TAGGED */
	uint64_t cgroup_id; /* when non-zero: samples of other cgroups are counted */
	int other_cgroup;   /* samples whose cgroup_id differs */
	int total;	    /* every sample delivered */
};

static int tally_sample(void *arg, const struct tp_sample *smp, size_t len)
{
	struct tally *t = arg;
	uint64_t leaf;

	t->total++;
	if (t->cgroup_id && smp->cgroup_id != t->cgroup_id)
		t->other_cgroup++;
	if (smp->pid != (uint32_t)t->pid) {
		t->other_pid++;
		return 0;
	}
	if (t->aux_tid && smp->tid == (uint32_t)t->aux_tid) {
		t->aux_n++;
		t->aux_tagged += smp->ctx_state == TP_CTX_TAGGED;
		return 0;
	}
	if (t->tid && smp->tid != (uint32_t)t->tid)
		return 0;
	t->n++;
	t->bad_hz += smp->hz != HZ;
	if (smp->ctx_state < 4)
		t->state[smp->ctx_state]++;
	if (smp->ctx_state == TP_CTX_TAGGED && !memcmp(smp->trace_id, trace_id, 16) &&
	    !memcmp(smp->span_id, span_id, 8) && smp->trace_flags == 1)
		t->ids_ok++;
	if (!smp->user_n || smp->kern_n + smp->user_n > 2 * TP_MAX_FRAMES) {
		t->no_user++;
		return 0;
	}
	leaf = smp->ips[smp->kern_n];
	t->leaf_in_text += leaf >= t->text_lo && leaf < t->text_hi;
	t->leaf_in_spin += leaf >= (uint64_t)spin_leaf && leaf < (uint64_t)spin_leaf + 256;
	return 0;
}

static int discard(void *arg, const struct tp_sample *smp, size_t len)
{
	return 0;
}

/* Delivers what the ring holds now, to nobody. */
static void flush(struct sampler *s)
{
	while (sampler_poll(s, 0, discard, NULL) > 0)
		;
}

/*
 * Hands every sample of the next ms milliseconds to fn; sooner done once
 * *count (when count is not NULL) reaches enough.
 */
static void poll_until(struct sampler *s, sampler_sample_fn fn, void *arg, int ms, const int *count,
		       int enough)
{
	struct timespec a, b;
	int err = 0;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		int n = sampler_poll(s, 100, fn, arg);

		if (n < 0 && n != -EINTR)
			err = n;
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((!count || *count < enough) &&
		 (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
	CHECK(err == 0, "poll: %s", strerror(-err));
}

/* Hands every sample of the next ms milliseconds to fn. */
static void poll_for(struct sampler *s, sampler_sample_fn fn, void *arg, int ms)
{
	poll_until(s, fn, arg, ms, NULL, 0);
}

/*
 * The samples of the checked thread for ms milliseconds at most: each
 * check holds for every sample, so COLLECT_ENOUGH of them (several times
 * the fewest a check accepts) end it sooner on an idle machine.
 */
#define COLLECT_ENOUGH 40

static void collect(struct sampler *s, struct tally *t, int ms)
{
	poll_until(s, tally_sample, t, ms, &t->n, COLLECT_ENOUGH);
}

/* Range of the executable's r-x mappings of process pid. */
static void text_range(pid_t pid, struct tally *t)
{
	char path[64], exe[PATH_MAX], line[PATH_MAX + 128];
	ssize_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n <= 0)
		return;
	exe[n] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return;
	t->text_lo = UINT64_MAX;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];
		char *file = strchr(line, '/');

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[2] != 'x' || !file)
			continue;
		file[strcspn(file, "\n")] = '\0';
		if (strcmp(file, exe))
			continue;
		if (lo < t->text_lo)
			t->text_lo = lo;
		if (hi > t->text_hi)
			t->text_hi = hi;
	}
	fclose(f);
}

static struct sampler *open_sampler(enum tp_filter filter)
{
	struct sampler_opts o = {.hz = HZ, .ring_bytes = 256 * 1024, .filter = filter};
	struct sampler *s = sampler_open(&o);

	CHECK(s != NULL, "sampler_open: %s", strerror(errno));
	return s;
}

/* Asks the child for a phase and waits until it published it. */
static bool enter_phase(struct sampler *s, int phase)
{
	struct timespec ts = {0, 1000000};

	ctl->phase = phase;
	for (int i = 0; ctl->ack != phase && i < 10000; i++)
		nanosleep(&ts, NULL);
	CHECK(ctl->ack == phase, "child acknowledged phase %d", phase);
	flush(s);
	return ctl->ack == phase;
}

/* (a) a busy child, target filter on its pid: stacks, hz, counters. */
static void test_busy_child(void)
{
	struct sampler_stats st;
	struct tally t = {0};
	struct sampler *s;
	pid_t pid, other;

	s = open_sampler(TP_FILTER_PIDS);
	if (!s)
		return;
	pid = spawn(child_busy);
	other = spawn(child_busy); /* busy too, not a target: its runs are filtered */
	t.pid = pid;
	text_range(pid, &t);
	CHECK(t.text_hi > t.text_lo, "child text found");
	CHECK(sampler_add_target_pid(s, pid) == 0, "add target");
	collect(s, &t, 2000);
	reap(pid);
	reap(other);
	poll_for(s, tally_sample, &t, 200); /* what was still in the ring */
	CHECK(t.n >= 20, "samples of the busy child: %d", t.n);
	CHECK(t.other_pid == 0, "only the target: %d others", t.other_pid);
	CHECK(t.bad_hz == 0, "hz = %d in every sample", HZ);
	CHECK(t.no_user == 0, "user stacks in every sample (%d without)", t.no_user);
	CHECK(t.leaf_in_text == t.n, "user leaf in the child's text: %d of %d", t.leaf_in_text,
	      t.n);
	CHECK(t.leaf_in_spin * 10 >= t.n * 9, "user leaf in spin_leaf: %d of %d", t.leaf_in_spin,
	      t.n);
	CHECK(t.state[TP_CTX_NONE] == t.n, "no context without a location");
	CHECK(sampler_get_stats(s, &st) == 0, "stats");
	CHECK(st.counters[TP_CNT_SAMPLES] == (uint64_t)t.total, "counted %llu, delivered %d",
	      (unsigned long long)st.counters[TP_CNT_SAMPLES], t.total);
	CHECK(st.counters[TP_CNT_RINGBUF_FULL] == 0, "ring never full");
	CHECK(st.counters[TP_CNT_FILTERED] > 0, "the other child's runs filtered");
	CHECK(st.counters[TP_CNT_TAGGED] == 0 && st.counters[TP_CNT_CTX_FAULT] == 0, "no context");
	sampler_free(s);
}

/* One phase of a context case: every sample after the ack in state want. */
static void check_phase(struct sampler *s, pid_t pid, int phase, int want)
{
	struct tally t = {.pid = pid, .tid = pid, .aux_tid = ctl->aux_tid};

	if (!enter_phase(s, phase))
		return;
	collect(s, &t, 1500);
	CHECK(t.n >= 5, "phase %d: samples %d", phase, t.n);
	CHECK(t.state[want] == t.n, "phase %d: %d of %d samples in state %d (%d/%d/%d/%d)", phase,
	      t.state[want], t.n, want, t.state[0], t.state[1], t.state[2], t.state[3]);
	if (want == TP_CTX_TAGGED)
		CHECK(t.ids_ok == t.n, "phase %d: exact ids in %d of %d", phase, t.ids_ok, t.n);
	CHECK(t.aux_tagged == 0, "phase %d: the other thread untagged (%d of %d)", phase,
	      t.aux_tagged, t.aux_n);
	aux_samples += t.aux_n;
}

/* (b), (c) thread context through a TLS location the agent gives. */
static void test_tls(const char *name, void (*child)(void))
{
	struct sampler_stats st;
	struct sampler *s;
	pid_t pid;

	s = open_sampler(TP_FILTER_PIDS);
	if (!s)
		return;
	aux_samples = 0;
	pid = spawn(child);
	if (pid > 0 && ctl->ready && !ctl->err) {
		CHECK(sampler_add_target_pid(s, pid) == 0, "%s: add target", name);
		CHECK(sampler_set_tls(s, pid, &ctl->loc) == 0, "%s: set tls", name);
		check_phase(s, pid, PH_TAGGED, TP_CTX_TAGGED);
		check_phase(s, pid, PH_INVALID, TP_CTX_INVALID);
		check_phase(s, pid, PH_GARBAGE, TP_CTX_FAULT);
		check_phase(s, pid, PH_NULL, TP_CTX_NONE);
		check_phase(s, pid, PH_TAGGED, TP_CTX_TAGGED);
		CHECK(sampler_get_stats(s, &st) == 0 && st.counters[TP_CNT_TAGGED] > 0 &&
			  st.counters[TP_CNT_CTX_FAULT] > 0,
		      "%s: tagged and fault counted", name);
		CHECK(sampler_forget_pid(s, pid) == 0, "%s: forget", name);
		CHECK(sampler_add_target_pid(s, pid) == 0, "%s: target again", name);
		check_phase(s, pid, PH_TAGGED, TP_CTX_NONE);
		CHECK(!ctl->aux_tid || aux_samples > 0, "%s: samples of the second thread: %d",
		      name, aux_samples);
	}
	reap(pid);
	sampler_free(s);
}

/* (d) the SDK's registration uprobe fills thread_records; exit empties it. */
static void test_sdk_uprobe(void)
{
	struct sampler *s;
	uint64_t rec = 0;
	pid_t pid;

	s = open_sampler(TP_FILTER_PIDS);
	if (!s)
		return;
	{
		/* a file without the probe function (any writer but the SDK): quiet */
		char logged[512] = "";
		FILE *tmp = tmpfile();
		int saved = dup(STDERR_FILENO);

		fflush(stderr);
		if (tmp)
			dup2(fileno(tmp), STDERR_FILENO);
		CHECK(sampler_attach_sdk_uprobe(s, "/bin/true", -1) == -ENOENT,
		      "no function in /bin/true");
		fflush(stderr);
		dup2(saved, STDERR_FILENO);
		close(saved);
		if (tmp) {
			rewind(tmp);
			logged[fread(logged, 1, sizeof(logged) - 1, tmp)] = 0;
			fclose(tmp);
		}
		CHECK(tmp && logged[0] == 0, "nothing logged for a file without it: '%s'", logged);
	}
	pid = spawn(child_sdk);
	CHECK(sampler_attach_sdk_uprobe(s, TP_SDK_SO, pid) == 0, "uprobe attached");
	CHECK(sampler_attach_sdk_uprobe(s, TP_SDK_SO, pid) == 0, "attaching again is a no-op");
	CHECK(sampler_add_target_pid(s, pid) == 0, "add target");
	CHECK(sampler_thread_record(s, pid, &rec) == -ENOENT, "no record before registration");
	check_phase(s, pid, PH_TAGGED, TP_CTX_TAGGED);
	CHECK(sampler_thread_record(s, pid, &rec) == 0 && rec != 0, "record learned");
	/* the agent finding no TLS location must not hide what the uprobe learned */
	CHECK(sampler_set_tls(s, pid, &(struct tp_tls_loc){.kind = TP_TLS_NONE}) == 0,
	      "no TLS location");
	check_phase(s, pid, PH_INVALID, TP_CTX_INVALID); /* still read through the record */
	reap(pid);
	CHECK(sampler_thread_record(s, pid, &rec) == -ENOENT, "record forgotten at exit");
	sampler_free(s);
}

/*
 * (d) a registered thread execs a new program: its samples are no longer
 * read through the old program's record (an address in a memory that is
 * gone), so they are untagged, not faults or stale ids.
 */
static void test_sdk_exec(void)
{
	struct timespec ts = {0, 1000000};
	struct tally t = {0};
	struct sampler *s;
	uint64_t rec = 0;
	char path[64], comm[32] = "";
	pid_t pid;

	s = open_sampler(TP_FILTER_PIDS);
	if (!s)
		return;
	pid = spawn(child_sdk_exec);
	CHECK(sampler_attach_sdk_uprobe(s, TP_SDK_SO, pid) == 0, "exec: uprobe attached");
	CHECK(sampler_add_target_pid(s, pid) == 0, "exec: add target");
	check_phase(s, pid, PH_TAGGED, TP_CTX_TAGGED);
	CHECK(sampler_thread_record(s, pid, &rec) == 0 && rec != 0, "exec: record learned");
	ctl->phase = PH_NULL;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	for (int i = 0; i < 5000 && strcmp(comm, "sh\n") != 0; i++) {
		FILE *f = fopen(path, "r");

		comm[0] = '\0';
		if (f) {
			if (!fgets(comm, sizeof(comm), f))
				comm[0] = '\0';
			fclose(f);
		}
		nanosleep(&ts, NULL);
	}
	CHECK(strcmp(comm, "sh\n") == 0, "exec: the child runs the shell");
	CHECK(sampler_thread_record(s, pid, &rec) == -ENOENT, "exec: the record is dropped");
	flush(s);
	t.pid = t.tid = pid;
	collect(s, &t, 1500);
	CHECK(t.n >= 5, "exec: samples of the shell %d", t.n);
	CHECK(t.state[TP_CTX_NONE] == t.n, "exec: %d of %d samples untagged (%d/%d/%d/%d)",
	      t.state[TP_CTX_NONE], t.n, t.state[0], t.state[1], t.state[2], t.state[3]);
	reap(pid);
	sampler_free(s);
}

/*
 * (d) the SDK's pointer kept per thread (tp_tls_loc.sdk_probe): once read
 * through the TLS location, NULL included, a thread's pointer is in
 * thread_records, and a registration after that goes through the uprobe.
 * Then a thread that registered before the uprobe was attached: its
 * record is learned from its TLS at its first sample.
 */
static void test_sdk_pointer_kept(void)
{
	struct tp_tls_loc loc;
	struct tally t = {0};
	struct sampler *s;
	uint64_t rec = 1;
	pid_t pid;

	s = open_sampler(TP_FILTER_PIDS);
	if (!s)
		return;
	pid = spawn(child_sdk); /* spins unregistered until PH_TAGGED */
	CHECK(sampler_attach_sdk_uprobe(s, TP_SDK_SO, pid) == 0, "kept: uprobe attached");
	CHECK(tlsloc_resolve(pid, 0, &loc, NULL) == 0 && loc.kind != TP_TLS_NONE,
	      "kept: the SDK's TLS location");
	loc.sdk_probe = 1;
	CHECK(sampler_set_tls(s, pid, &loc) == 0, "kept: set tls");
	CHECK(sampler_add_target_pid(s, pid) == 0, "kept: add target");
	flush(s);
	t.pid = t.tid = pid;
	collect(s, &t, 1000);
	CHECK(t.n >= 5 && t.state[TP_CTX_NONE] == t.n, "kept: unregistered, %d of %d untagged",
	      t.state[TP_CTX_NONE], t.n);
	CHECK(sampler_thread_record(s, pid, &rec) == 0 && rec == 0, "kept: the NULL pointer kept");
	check_phase(s, pid, PH_TAGGED, TP_CTX_TAGGED); /* registers: the uprobe overwrites */
	CHECK(sampler_thread_record(s, pid, &rec) == 0 && rec != 0, "kept: the record after it");
	check_phase(s, pid, PH_INVALID, TP_CTX_INVALID);
	reap(pid);
	sampler_free(s);

	s = open_sampler(TP_FILTER_PIDS);
	if (!s)
		return;
	pid = spawn(child_sdk);
	enter_phase(s, PH_TAGGED); /* registered before any uprobe */
	CHECK(sampler_attach_sdk_uprobe(s, TP_SDK_SO, pid) == 0, "learned: uprobe attached");
	CHECK(sampler_thread_record(s, pid, &rec) == -ENOENT, "learned: nothing before a sample");
	CHECK(tlsloc_resolve(pid, 0, &loc, NULL) == 0 && loc.kind != TP_TLS_NONE,
	      "learned: the SDK's TLS location");
	loc.sdk_probe = 1;
	CHECK(sampler_set_tls(s, pid, &loc) == 0, "learned: set tls");
	CHECK(sampler_add_target_pid(s, pid) == 0, "learned: add target");
	check_phase(s, pid, PH_TAGGED, TP_CTX_TAGGED);
	CHECK(sampler_thread_record(s, pid, &rec) == 0 && rec != 0, "learned: the record from TLS");
	check_phase(s, pid, PH_INVALID, TP_CTX_INVALID);
	reap(pid);
	sampler_free(s);
}

/* (d) the same with an executable that links the static SDK. */
static void test_static_sdk_uprobe(void)
{
	struct timespec ts = {0, 1000000};
	struct tally t = {0};
	struct sampler *s;
	uint64_t rec = 0;
	int fds[2];
	pid_t pid;

	s = open_sampler(TP_FILTER_PIDS);
	if (!s || pipe(fds)) {
		sampler_free(s);
		return;
	}
	pid = fork();
	if (pid == 0) {
		dup2(fds[0], 0);
		close(fds[1]);
		execl(TP_SDK_CHILD, TP_SDK_CHILD, traceparent, (char *)NULL);
		_exit(127);
	}
	close(fds[0]);
	/* the exec must have happened before a uprobe by path can see the child */
	for (int i = 0; i < 5000; i++) {
		char exe[PATH_MAX], path[64];
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
		n = readlink(path, exe, sizeof(exe) - 1);
		if (n > 0 && (exe[n] = '\0', strstr(exe, "sampler_sdk_child")))
			break;
		nanosleep(&ts, NULL);
	}
	CHECK(sampler_attach_sdk_uprobe(s, TP_SDK_CHILD, pid) == 0, "uprobe in the executable");
	CHECK(sampler_add_target_pid(s, pid) == 0, "add target");
	CHECK(write(fds[1], "g", 1) == 1, "child started");
	for (int i = 0; i < 5000 && sampler_thread_record(s, pid, &rec); i++)
		nanosleep(&ts, NULL);
	CHECK(rec != 0, "record learned from the static SDK");
	nanosleep(&(struct timespec){0, 50000000}, NULL); /* attach follows registration */
	flush(s);
	t.pid = t.tid = pid;
	collect(s, &t, 1500);
	CHECK(t.n >= 5, "static sdk: samples %d", t.n);
	CHECK(t.ids_ok == t.n, "static sdk: exact ids in %d of %d", t.ids_ok, t.n);
	close(fds[1]);
	reap(pid);
	sampler_free(s);
}

/* The cgroup filter: samples of the child's cgroup v2 only. */
static void test_cgroup_filter(void)
{
	char line[512], path[600];
	struct tally t = {0};
	struct sampler *s;
	struct stat st;
	FILE *f;
	pid_t pid;

	f = fopen("/proc/self/cgroup", "r");
	path[0] = '\0';
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(path, sizeof(path), "/sys/fs/cgroup%s", line + 3);
		}
	if (f)
		fclose(f);
	if (!path[0] || stat(path, &st)) {
		printf("cgroup filter: skipped, no cgroup v2\n");
		return;
	}
	s = open_sampler(TP_FILTER_CGROUP);
	if (!s)
		return;
	CHECK(sampler_add_target_cgroup_path(s, path) == 0, "add cgroup %s", path);
	pid = spawn(child_busy);
	t.pid = pid;
	t.cgroup_id = st.st_ino;
	text_range(pid, &t);
	collect(s, &t, 1500);
	reap(pid);
	CHECK(t.n >= 5, "cgroup: samples of the child %d", t.n);
	CHECK(t.other_cgroup == 0, "cgroup: only its cgroup (%d others)", t.other_cgroup);
	sampler_free(s);
}

/* The fork records seen (test_fork). */
struct forks_seen {
	pid_t pid;	     /* the forked process looked for */
	pid_t parent;	     /* its parent, as recorded */
	uint64_t start_time; /* its start time, as recorded */
	int n;		     /* fork records of pid */
};

static int on_fork_event(void *arg, const struct sampler_event *ev)
{
	struct forks_seen *f = arg;

	if (ev->kind == TP_REC_FORK && ev->pid == f->pid) {
		f->n++;
		f->parent = ev->parent;
		f->start_time = ev->start_time;
	}
	return 0;
}

/*
 * (g) a process forked by a process with a known TLS location: its samples
 * are tagged from the first one, before anyone set its location, and a fork
 * record names its parent and start time.
 */
static void test_fork(void)
{
	struct timespec ts = {0, 1000000};
	struct forks_seen seen = {0};
	struct tally t = {0};
	struct sampler *s;
	pid_t pid, forked = 0;
	uint64_t start;

	s = open_sampler(TP_FILTER_ALL);
	if (!s)
		return;
	pid = spawn(child_fork_tls);
	if (pid > 0 && ctl->ready && !ctl->err) {
		CHECK(sampler_set_tls(s, pid, &ctl->loc) == 0, "fork: set the parent's tls");
		flush(s);
		ctl->fork_now = 1;
		for (int i = 0; !ctl->forked && i < 10000; i++)
			nanosleep(&ts, NULL);
		forked = ctl->forked;
		CHECK(forked > 0, "fork: the child forked");
		start = procmem_start_time(forked);
		t.pid = forked;
		seen.pid = forked;
		sampler_set_event_fn(s, on_fork_event, &seen);
		collect(s, &t, 1500);
		CHECK(t.n >= 5, "fork: samples of the forked process %d", t.n);
		CHECK(t.state[TP_CTX_TAGGED] == t.n && t.ids_ok == t.n,
		      "fork: %d of %d samples tagged with the parent's ids (%d exact)",
		      t.state[TP_CTX_TAGGED], t.n, t.ids_ok);
		CHECK(seen.n == 1 && seen.parent == pid && seen.start_time == start,
		      "fork: one record, parent %d (want %d), start %llu (want %llu)", seen.parent,
		      pid, (unsigned long long)seen.start_time, (unsigned long long)start);
	}
	if (forked > 0)
		kill(forked, SIGKILL);
	reap(pid);
	sampler_free(s);
}

/* Kernel text symbols from /proc/kallsyms, sorted by address. */
struct ksym {
	uint64_t addr;
	char name[64];
};
static struct ksym *ksyms;
static size_t nksyms;

static int cmp_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return (x->addr > y->addr) - (x->addr < y->addr);
}

static void load_ksyms(void)
{
	char line[512], name[256], type;
	unsigned long long addr;
	size_t cap = 0;
	FILE *f = fopen("/proc/kallsyms", "r");

	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3 || !addr ||
		    (type != 't' && type != 'T'))
			continue;
		if (nksyms == cap) {
			cap = cap ? 2 * cap : 65536;
			ksyms = realloc(ksyms, cap * sizeof(*ksyms));
			if (!ksyms)
				abort();
		}
		ksyms[nksyms].addr = addr;
		name[sizeof(ksyms[0].name) - 1] = '\0';
		memcpy(ksyms[nksyms++].name, name, sizeof(ksyms[0].name));
	}
	if (f)
		fclose(f);
	qsort(ksyms, nksyms, sizeof(*ksyms), cmp_ksym);
}

/* Name of the kernel function holding addr; "" when unknown. */
static const char *ksym_name(uint64_t addr)
{
	size_t lo = 0, hi = nksyms;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ksyms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? ksyms[lo - 1].name : "";
}

struct ktally {
	pid_t pid;
	int n;	       /* samples of the child */
	int kernel;    /* with kernel frames */
	int in_read;   /* of which one frame is in the read system call's path */
	int sampling;  /* of which one frame is the sampling's own (perf, stack walk, program) */
	int no_user;   /* of those, without user frames */
	char bad[128]; /* the first frame of the sampling's own seen */
};

static int tally_kernel(void *arg, const struct tp_sample *smp, size_t len)
{
	struct ktally *t = arg;
	bool read_path = false, own = false;

	if (smp->pid != (uint32_t)t->pid)
		return 0;
	t->n++;
	if (!smp->kern_n)
		return 0;
	t->kernel++;
	t->no_user += smp->user_n == 0;
	for (int i = 0; i < smp->kern_n; i++) {
		const char *name = ksym_name(smp->ips[i]);

		read_path |= strstr(name, "sys_read") || strstr(name, "vfs_read") ||
			     strstr(name, "read_zero") || strstr(name, "read_iter_zero");
		/*
		 * What only runs while a sample is taken: perf's overflow path
		 * and the stack walk, anywhere, or the sampling program at the
		 * leaf. (A timer interrupt's frames are not: the read may be
		 * interrupted in the softirq work of another interrupt's exit;
		 * nor are other BPF programs: a BPF LSM hook, or another
		 * tracer's program on the system call's exit, such as an agent
		 * of another test capturing off-CPU time, are part of the read
		 * path.)
		 */
		if (strstr(name, "perf_swevent_hrtimer") || strstr(name, "perf_event_overflow") ||
		    strstr(name, "bpf_overflow_handler") || strstr(name, "bpf_get_stack") ||
		    strstr(name, "perf_callchain") ||
		    (i == 0 && strstr(name, "bpf_prog") && strstr(name, "on_cpu_clock"))) {
			own = true;
			if (!t->bad[0])
				snprintf(t->bad, sizeof(t->bad), "%s (frame %d)", name, i);
		}
	}
	t->in_read += read_path;
	t->sampling += own;
	return 0;
}

/*
 * Runs child as the sampler's only target: *pid is set before the first
 * sample reaches fn; its samples of ms milliseconds (or until *count
 * reaches enough, count not NULL) go to fn(arg), then,
 * once it is gone, what the ring still holds.
 */
static void sample_child(struct sampler *s, const char *name, void (*child)(void), pid_t *pid,
			 sampler_sample_fn fn, void *arg, int ms, const int *count, int enough)
{
	*pid = spawn(child);
	CHECK(sampler_add_target_pid(s, *pid) == 0, "%s: add target", name);
	poll_until(s, fn, arg, ms, count, enough);
	reap(*pid);
	poll_for(s, fn, arg, 200);
}

/*
 * (k) Kernel stacks: a child reading /dev/zero is mostly in the kernel;
 * its samples there carry the read path's frames, never the sampling's
 * own (perf's overflow path, the stack walk, the program), and still the
 * user stack.
 */
static void test_kernel_stacks(void)
{
	struct ktally t = {0};
	struct sampler *s;

	s = open_sampler(TP_FILTER_PIDS);
	if (!s)
		return;
	sample_child(s, "kernel stacks", child_reads, &t.pid, tally_kernel, &t, 2000, &t.n, 100);
	CHECK(t.n >= 20, "kernel stacks: samples of the reading child: %d", t.n);
	CHECK(t.kernel * 2 >= t.n, "kernel stacks: most in the kernel: %d of %d", t.kernel, t.n);
	CHECK(t.in_read * 10 >= t.kernel * 9, "kernel stacks: in the read path: %d of %d",
	      t.in_read, t.kernel);
	CHECK(t.sampling == 0, "kernel stacks: no frame of the sampling's own: %d (first: %s)",
	      t.sampling, t.bad);
	CHECK(t.no_user == 0, "kernel stacks: user frames under the kernel ones (%d without)",
	      t.no_user);
	sampler_free(s);
}

/*
 * (d) Deep stacks: the sampler asks for as many frames as the CPU's recent
 * stacks needed and walks again when a stack fills that. A child that
 * alternates between a stack DEEP_FRAMES deep and one SHALLOW_FRAMES deep
 * (descend() calling itself through a volatile pointer, so the compiler
 * keeps every level) must show every level in the samples taken in its
 * spin at the bottom: never a stack cut at the first size asked.
 */
#define DEEP_FRAMES    100
#define SHALLOW_FRAMES 10

static __attribute__((noinline)) void deep_spin(void)
{
	for (int i = 0; i < 3; i++)
		spin_leaf();
}

static int descend(int depth);
static int (*volatile descend_ptr)(int) = descend;

static __attribute__((noinline)) int descend(int depth)
{
	if (depth <= 1) {
		deep_spin();
		return 0;
	}
	return descend_ptr(depth - 1) + 1;
}

static void child_deep(void)
{
	ctl->ready = 1;
	for (;;) {
		descend(DEEP_FRAMES);
		descend(SHALLOW_FRAMES);
	}
}

struct dtally {
	pid_t pid;
	int in_spin;  /* samples at the bottom (the leaf in spin_leaf) */
	int deep;     /* of those, all DEEP_FRAMES levels there */
	int shallow;  /* of those, all SHALLOW_FRAMES levels there */
	int other;    /* of those, another number of levels: a stack cut short */
	int other_at; /* the levels of the first such */
};

static int tally_deep(void *arg, const struct tp_sample *smp, size_t len)
{
	struct dtally *t = arg;
	const __u64 *u = smp->ips + smp->kern_n;
	uint64_t ret = 0;
	int levels = 0, best = 0;

	if (smp->pid != (uint32_t)t->pid || !smp->user_n ||
	    smp->kern_n + smp->user_n > 2 * TP_MAX_FRAMES)
		return 0;
	/* at the bottom: in spin_leaf, which only deep_spin calls in this child */
	if (u[0] < (uint64_t)spin_leaf || u[0] >= (uint64_t)spin_leaf + 256 || smp->user_n < 3)
		return 0;
	/* descend's levels: its return address after the recursive call, the most frequent frame */
	for (int i = 1; i < smp->user_n; i++) {
		int k = 0;

		for (int j = 1; j < smp->user_n; j++)
			k += u[j] == u[i];
		if (k > best) {
			best = k;
			ret = u[i];
		}
	}
	t->in_spin++;
	for (int j = 1; j < smp->user_n; j++)
		levels += u[j] == ret;
	levels += 1; /* the bottom level, which called deep_spin from another place */
	if (levels == DEEP_FRAMES)
		t->deep++;
	else if (levels == SHALLOW_FRAMES)
		t->shallow++;
	else if (!t->other++)
		t->other_at = levels;
	return 0;
}

static void test_deep_stacks(void)
{
	struct sampler_stats st;
	struct dtally t = {0};
	struct sampler *s;

	s = open_sampler(TP_FILTER_PIDS);
	if (!s)
		return;
	sample_child(s, "deep stacks", child_deep, &t.pid, tally_deep, &t, 3000, NULL, 0);
	CHECK(t.in_spin >= 30, "deep stacks: samples at the bottom: %d", t.in_spin);
	CHECK(t.deep >= 5 && t.shallow >= 5,
	      "deep stacks: both depths seen whole (%d deep, %d shallow)", t.deep, t.shallow);
	/*
	 * A stack cut at the size asked would be every deep one after a
	 * shallow run (12 of 297 with the walk again removed); a rare cut
	 * elsewhere is the kernel's: it reads the stack without faulting,
	 * so a stack page not present at that instant (being migrated, say)
	 * ends the walk (seen once in CI: 72 of 100 levels).
	 */
	CHECK(t.other * 100 <= t.in_spin,
	      "deep stacks: none cut short but the rare unreadable page: %d of %d (the first "
	      "with %d levels)",
	      t.other, t.in_spin, t.other_at);
	CHECK(sampler_get_stats(s, &st) == 0 && st.counters[TP_CNT_STACK_RETAKE] > 0,
	      "deep stacks: walked again after a shallow one (%llu)",
	      (unsigned long long)st.counters[TP_CNT_STACK_RETAKE]);
	sampler_free(s);
}

/*
 * (i) the child of test_loader_probe: when told (phase 1), dlopens and
 * dlcloses a library (four loader rendezvous calls within microseconds),
 * waits past the record gap and dlopens it again; then says so (ack 1).
 */
static __attribute__((noreturn)) void child_dlopens(void)
{
	struct timespec gap = {0, 3 * (long)(TP_MAPS_GAP_NS / 2)}, tick = {0, 1000000};
	void *h;

	ctl->ready = 1;
	while (ctl->phase != 1)
		nanosleep(&tick, NULL);
	h = dlopen(TP_TEST_TLS_LIB, RTLD_NOW | RTLD_LOCAL);
	if (!h || dlclose(h) != 0)
		ctl->err = __LINE__;
	nanosleep(&gap, NULL);
	if (!dlopen(TP_TEST_TLS_LIB, RTLD_NOW | RTLD_LOCAL))
		ctl->err = __LINE__;
	ctl->ack = 1;
	for (;;)
		nanosleep(&tick, NULL);
}

struct maps_seen {
	pid_t pid; /* the process looked for */
	int n;	   /* its maps records */
	int other; /* maps records of other processes */
};

static int on_maps_event(void *arg, const struct sampler_event *ev)
{
	struct maps_seen *m = arg;

	if (ev->kind == TP_REC_MAPS)
		*(ev->pid == m->pid ? &m->n : &m->other) += 1;
	return 0;
}

/* This process's dynamic loader: a file named ld-*.so* in its maps. */
static bool own_loader(char *path, size_t size, struct stat *st)
{
	struct procmem_maps pm;
	bool found = false;

	if (procmem_maps_read(getpid(), &pm) != 0)
		return false;
	for (size_t i = 0; i < pm.n && !found; i++) {
		const char *b = strrchr(pm.maps[i].path, '/');

		if (b && !strncmp(b + 1, "ld-", 3) && strstr(b, ".so") && pm.maps[i].offset == 0) {
			snprintf(path, size, "%s", pm.maps[i].path);
			found = stat(path, st) == 0;
		}
	}
	procmem_maps_free(&pm);
	return found;
}

/*
 * (i) the loader rendezvous uprobe: once per loader file; a file without
 * _dl_debug_state is -ENOENT; a target's dlopen and dlclose give maps
 * records, at most one per TP_MAPS_GAP_NS (the calls within it counted),
 * and a process the filter does not want (this one) none.
 */
static void test_loader_probe(void)
{
	struct timespec tick = {0, 1000000};
	struct maps_seen seen = {0};
	struct sampler_stats st0, st1;
	struct stat ld, exe;
	char path[PATH_MAX];
	struct sampler *s;
	pid_t pid;
	void *h;

	if (!own_loader(path, sizeof(path), &ld)) {
		CHECK(0, "loader probe: no ld-*.so* in this process's maps");
		return;
	}
	s = open_sampler(TP_FILTER_PIDS);
	if (!s)
		return;
	CHECK(sampler_attach_loader_probe(s, path, ld.st_dev, ld.st_ino) == 0,
	      "loader probe: attached to %s", path);
	CHECK(sampler_attach_loader_probe(s, path, ld.st_dev, ld.st_ino) == 0,
	      "loader probe: the same file again");
	CHECK(stat("/proc/self/exe", &exe) == 0 &&
		  sampler_attach_loader_probe(s, "/proc/self/exe", exe.st_dev, exe.st_ino) ==
		      -ENOENT,
	      "loader probe: a file without the function is -ENOENT");
	pid = spawn(child_dlopens);
	if (pid > 0 && ctl->ready && !ctl->err) {
		CHECK(sampler_add_target_pid(s, pid) == 0, "loader probe: target the child");
		flush(s);
		CHECK(sampler_get_stats(s, &st0) == 0, "loader probe: stats");
		seen.pid = pid;
		sampler_set_event_fn(s, on_maps_event, &seen);
		h = dlopen(TP_TEST_TLS_LIB, RTLD_NOW | RTLD_LOCAL); /* this process: not a target */
		if (h)
			dlclose(h);
		ctl->phase = 1;
		for (int i = 0; !ctl->ack && i < 5000; i++) {
			sampler_poll(s, 0, discard, NULL);
			nanosleep(&tick, NULL);
		}
		poll_for(s, discard, NULL, 200);
		CHECK(ctl->ack && !ctl->err, "loader probe: the child's dlopens (line %d)",
		      ctl->err);
		CHECK(sampler_get_stats(s, &st1) == 0, "loader probe: stats");
		/* 2 when each burst of calls fits in the gap, as it does unless the machine stalls
		 */
		CHECK(seen.n >= 2 && seen.n <= 5 && seen.other == 0,
		      "loader probe: %d maps records of the child (want 2), %d of others", seen.n,
		      seen.other);
		CHECK(st1.counters[TP_CNT_MAPS] - st0.counters[TP_CNT_MAPS] == (uint64_t)seen.n &&
			  st1.counters[TP_CNT_MAPS_LIMITED] - st0.counters[TP_CNT_MAPS_LIMITED] +
				  (uint64_t)seen.n ==
			      6,
		      "loader probe: records %llu + calls within the gap %llu = 6 rendezvous calls",
		      (unsigned long long)(st1.counters[TP_CNT_MAPS] - st0.counters[TP_CNT_MAPS]),
		      (unsigned long long)(st1.counters[TP_CNT_MAPS_LIMITED] -
					   st0.counters[TP_CNT_MAPS_LIMITED]));
		CHECK(st1.loaders_probed == 1 && st1.loaders_no_symbol == 1,
		      "loader probe: 1 loader probed, 1 without the function");
	}
	reap(pid);
	sampler_free(s);
}

int main(void)
{
	if (check_skip_without_bpf())
		return 77;
	log_set_level(getenv("TRACEPROF_TEST_VERBOSE") ? TP_LOG_DEBUG : TP_LOG_WARN);
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ctl == MAP_FAILED)
		return 1;
	load_ksyms();
	test_busy_child();
	test_kernel_stacks();
	test_deep_stacks();
	test_tls("static tls", child_static_tls);
	test_tls("dtv tls", child_dtv_tls);
	test_sdk_uprobe();
	test_sdk_exec();
	test_sdk_pointer_kept();
	test_static_sdk_uprobe();
	test_cgroup_filter();
	test_fork();
	test_loader_probe();
	return check_done();
}
