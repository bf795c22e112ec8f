/*
 * bench_sampler - the kernel to user data path of the BPF sampler, measured:
 * one tp_sample per sample through the ring buffer, with a wakeup of the
 * reader per sample against batched wakeups. (The in-kernel aggregation
 * path it was once compared with is gone: docs/agent.md.)
 *
 * Workload: one worker process per CPU, each serving "requests" back to
 * back: a fresh trace and span id in an OTEP 4947 record reached through a
 * static TLS pointer (the sampler reads it at every sample), then CPU burnt
 * at one of 16 stack depths, then detach. Every CPU is busy, so nearly
 * every program run keeps a sample.
 *
 * Per wakeup mode and frequency (19 Hz, 99 Hz), --runs runs of --seconds:
 *  - BPF ns per run: run_time_ns / run_cnt of on_cpu_clock from
 *    bpf_prog_info, counted while the benchmark holds a BPF_ENABLE_STATS
 *    fd: what kernel.bpf_stats_enabled=1 turns on, without changing the
 *    sysctl (others may use it; closing the fd restores the old state);
 *  - user CPU per sample and per second: getrusage (user + system) of this
 *    process, which only polls the ring (timeout --drain-ms) and copies
 *    what it gets into a buffer.
 * Prints medians (min-max) as a markdown table. Needs root. Never fails on
 * timing.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <asm/prctl.h>
#endif

#include <bpf/bpf.h>

#include "bench_stats.h"
#include "sampler.h"
#include "traceprof/log.h"

#define MAX_RUNS 64

/* An OTEP 4947 record header. */
struct record {
	uint8_t trace_id[16]; /* W3C trace id */
	uint8_t span_id[8];   /* W3C span id */
	uint8_t valid;	      /* 1: current */
	uint8_t trace_flags;  /* W3C flags */
	uint16_t attrs_size;  /* no attributes */
} __attribute__((packed));

/* What a worker tells the benchmark, in a shared mapping. */
struct worker_info {
	volatile int ready;	    /* tp_offset is set */
	volatile int64_t tp_offset; /* &bench_ctx - thread pointer */
};

/* One run's figures. */
struct run_result {
	double bpf_ns_per_run;	   /* on_cpu_clock run time / runs */
	double user_ns_per_sample; /* this process's CPU / samples delivered */
	double samples_per_s;	   /* samples delivered per second */
	double user_ms_per_s;	   /* this process's CPU ms per second of run */
	uint64_t samples;	   /* samples kept by the kernel side */
	uint64_t ring_full;	   /* ring: samples lost to a full ring */
	uint64_t tagged;	   /* samples tagged with a trace id */
};

/* What the consumer callbacks count and copy. */
struct sink {
	uint64_t samples;		       /* samples delivered */
	uint64_t copy[2 * TP_MAX_FRAMES + 16]; /* where data is copied to, like a consumer */
};

static volatile sig_atomic_t stop;	  /* SIGINT / SIGTERM seen */
static __thread struct record *bench_ctx; /* stands for otel_thread_ctx_v1 */
static struct record bench_record;	  /* the worker's record */
static volatile uint64_t burn_sink;	  /* keeps the loops */

static void on_signal(int sig)
{
	stop = 1;
}

static __attribute__((noinline)) void burn(int depth, uint64_t iters)
{
	if (depth > 0) {
		burn(depth - 1, iters);
		burn_sink++; /* not a tail call: each level stays on the stack */
		return;
	}
	for (uint64_t i = 0; i < iters; i++)
		burn_sink += i;
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

static __attribute__((noreturn)) void worker(struct worker_info *info, uint64_t iters)
{
	info->tp_offset = (int64_t)((uint64_t)&bench_ctx - thread_pointer());
	bench_ctx = &bench_record;
	info->ready = 1;
	for (unsigned req = 0;; req++) {
		if (getrandom(&bench_record, 24, 0) != 24) /* trace id and span id */
			bench_record.trace_id[0] = (uint8_t)req;
		bench_record.trace_flags = 1;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		*(volatile uint8_t *)&bench_record.valid = 1;
		burn(4 + req % 16, iters);
		*(volatile uint8_t *)&bench_record.valid = 0;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	}
}

static int on_sample(void *ctx, const struct tp_sample *s, size_t len)
{
	struct sink *k = ctx;

	memcpy(k->copy, s, len < sizeof(k->copy) ? len : sizeof(k->copy));
	k->samples++;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
}

/* The wakeup modes compared. */
struct variant {
	const char *name;    /* as printed */
	size_t wakeup_bytes; /* when the kernel wakes the reader */
};

static const struct variant variants[] = {
    {"ring buffer, wakeup per sample", SAMPLER_WAKEUP_EVERY},
    {"ring buffer, batched wakeup", 0},
};

static int one_run(const struct variant *v, int hz, double seconds, int drain_ms, const pid_t *pids,
		   const struct worker_info *infos, int nworkers, struct run_result *r)
{
	struct sampler_opts o = {
	    .hz = hz, .wakeup_bytes = v->wakeup_bytes, .filter = TP_FILTER_PIDS};
	struct sampler_stats st;
	struct sink *k;
	struct sampler *s;
	double t0, c0, t1, c1;
	int err = 0;

	k = calloc(1, sizeof(*k));
	s = k ? sampler_open(&o) : NULL;
	if (!s) {
		free(k);
		return k ? -errno : -ENOMEM;
	}
	for (int i = 0; i < nworkers; i++) {
		struct tp_tls_loc loc = {.kind = TP_TLS_STATIC, .tp_offset = infos[i].tp_offset};

		err = sampler_add_target_pid(s, pids[i]);
		if (!err)
			err = sampler_set_tls(s, pids[i], &loc);
		if (err)
			goto out_free;
	}
	t0 = now_s();
	c0 = cpu_ns();
	while (!stop && now_s() - t0 < seconds) {
		err = sampler_poll(s, drain_ms, on_sample, k);
		if (err < 0 && err != -EINTR)
			goto out_free;
	}
	/* what is still in the kernel belongs to this run */
	err = sampler_poll(s, 0, on_sample, k);
	if (err < 0)
		goto out_free;
	t1 = now_s();
	c1 = cpu_ns();
	err = sampler_get_stats(s, &st);
	if (err)
		goto out_free;
	memset(r, 0, sizeof(*r));
	r->samples = st.counters[TP_CNT_SAMPLES];
	r->bpf_ns_per_run = st.run_cnt ? (double)st.run_time_ns / st.run_cnt : 0;
	r->user_ns_per_sample = k->samples ? (c1 - c0) / k->samples : 0;
	r->samples_per_s = k->samples / (t1 - t0);
	r->user_ms_per_s = (c1 - c0) / 1e6 / (t1 - t0);
	r->ring_full = st.counters[TP_CNT_RINGBUF_FULL];
	r->tagged = st.counters[TP_CNT_TAGGED];
out_free:
	sampler_free(s);
	free(k);
	return err < 0 ? err : 0;
}

/* Median of field at offset off over n results, with min and max. */
static void median(const struct run_result *r, int n, size_t off, double out[3])
{
	double v[MAX_RUNS];

	for (int i = 0; i < n; i++)
		memcpy(&v[i], (const char *)&r[i] + off, sizeof(double));
	qsort(v, n, sizeof(double), bench_cmp_double);
	out[0] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	out[1] = v[0];
	out[2] = v[n - 1];
}

static void report(const char *name, int hz, const struct run_result *r, int n)
{
	double b[3], u[3], sps[3], ms[3];
	uint64_t samples = 0, full = 0, tagged = 0;

	median(r, n, offsetof(struct run_result, bpf_ns_per_run), b);
	median(r, n, offsetof(struct run_result, user_ns_per_sample), u);
	median(r, n, offsetof(struct run_result, samples_per_s), sps);
	median(r, n, offsetof(struct run_result, user_ms_per_s), ms);
	for (int i = 0; i < n; i++) {
		samples += r[i].samples;
		full += r[i].ring_full;
		tagged += r[i].tagged;
	}
	printf("| %s | %d | %.0f | %.0f (%.0f–%.0f) | %.2f (%.2f–%.2f) | %.3f | %.1f %% | %llu |\n",
	       name, hz, sps[0], b[0], b[1], b[2], u[0] / 1e3, u[1] / 1e3, u[2] / 1e3, ms[0],
	       samples ? 100.0 * tagged / samples : 0, (unsigned long long)full);
	fflush(stdout);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: bench_sampler [--runs N] [--seconds S] [--drain-ms MS] "
		   "[--workers N] [--request-iters N]\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"runs", required_argument, NULL, 'r'},
						 {"seconds", required_argument, NULL, 's'},
						 {"drain-ms", required_argument, NULL, 'd'},
						 {"workers", required_argument, NULL, 'w'},
						 {"request-iters", required_argument, NULL, 'i'},
						 {"help", no_argument, NULL, 'h'},
						 {NULL, 0, NULL, 0}};
	static const int hzs[] = {19, 99};
	struct run_result results[MAX_RUNS];
	int runs = 5, drain_ms = 1000, nworkers = (int)sysconf(_SC_NPROCESSORS_ONLN), stats_fd;
	double seconds = 10;
	uint64_t iters = 2000000;
	struct worker_info *infos;
	pid_t pids[64];
	int c, err = 0;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'r':
			runs = atoi(optarg);
			break;
		case 's':
			seconds = atof(optarg);
			break;
		case 'd':
			drain_ms = atoi(optarg);
			break;
		case 'w':
			nworkers = atoi(optarg);
			break;
		case 'i':
			iters = strtoull(optarg, NULL, 10);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (runs < 1 || runs > MAX_RUNS || seconds <= 0 || drain_ms < 1 || nworkers < 1 ||
	    nworkers > 64 || !iters) {
		usage(stderr);
		return 2;
	}
	log_set_level(TP_LOG_WARN);
	/* the kernel counts run time while this fd is open, whatever the sysctl says */
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0) {
		fprintf(stderr,
			"bench_sampler: cannot enable BPF run time statistics: %s (run as "
			"root)\n",
			strerror(-stats_fd));
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	infos = mmap(NULL, sizeof(*infos) * nworkers, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (infos == MAP_FAILED) {
		err = -errno;
		goto out_close;
	}
	for (int i = 0; i < nworkers; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			worker(&infos[i], iters);
		}
		if (pids[i] < 0) {
			err = -errno;
			nworkers = i;
			goto out_kill;
		}
		while (!infos[i].ready)
			usleep(1000);
	}
	printf("%d workers, %d runs of %.0f s, polled every %d ms\n\n", nworkers, runs, seconds,
	       drain_ms);
	printf("| data path | Hz | samples/s | BPF ns/run (min–max) | user µs/sample (min–max) | "
	       "user CPU ms/s | tagged | ring full |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
	for (size_t p = 0; p < sizeof(variants) / sizeof(variants[0]) && !stop; p++)
		for (size_t h = 0; h < sizeof(hzs) / sizeof(hzs[0]) && !stop; h++) {
			int n = 0;

			for (; n < runs && !stop; n++) {
				err = one_run(&variants[p], hzs[h], seconds, drain_ms, pids, infos,
					      nworkers, &results[n]);
				if (err) {
					fprintf(stderr, "bench_sampler: run failed: %s\n",
						strerror(-err));
					goto out_kill;
				}
			}
			if (n)
				report(variants[p].name, hzs[h], results, n);
		}
out_kill:
	for (int i = 0; i < nworkers; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
	}
out_close:
	close(stats_fd);
	return err ? 1 : 0;
}
