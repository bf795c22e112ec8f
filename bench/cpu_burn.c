/*
 * cpu_burn.c - a CPU-bound workload for the agent overhead benchmark.
 *
 * Runs one thread per CPU (or --threads N) for --seconds S, each repeating a
 * fixed unit of integer work in a few named functions (so profiles have real
 * stacks), and prints the total units per second. A profiler's overhead is
 * the drop of that figure next to a run without it.
 *
 * With --service NAME the process publishes NAME as its service (traceprof
 * SDK) and every --span-units units of each thread are one server span
 * (GET /burn), exported over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT: the
 * threads are inside a request nearly all the time, as a trigger's targets
 * are. --attach-units N does the same without spans or an exporter: every N
 * units of a thread run with a fresh trace and span attached as its thread
 * context (a service inside requests, every sample tagged, nothing sent).
 * --skip S starts counting after S seconds (the run lasts S + seconds).
 */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "traceprof/sdk.h"

static atomic_bool stop;
static atomic_bool counting;
static long span_units;	  /* units per server span; 0: no spans */
static long attach_units; /* units per attached context (no span); 0: none */

struct worker {
	pthread_t thread; /* the worker */
	uint64_t units;	  /* units of work done */
	uint64_t sink;	  /* result, kept so the work is not optimized away */
};

__attribute__((noinline)) static uint64_t mix_block(uint64_t x)
{
	for (int i = 0; i < 2000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

__attribute__((noinline)) static uint64_t work_unit(uint64_t x)
{
	for (int i = 0; i < 16; i++)
		x = mix_block(x + (uint64_t)i);
	return x;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	uint64_t x = (uint64_t)(uintptr_t)w | 1;
	struct tp_sdk_span sp;

	if (span_units)
		tp_sdk_thread_register();
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		long n = span_units ? span_units : attach_units ? attach_units : 1;
		uint8_t trace[16], span[8];

		if (span_units) {
			tp_sdk_span_begin(&sp, NULL, 0);
		} else if (attach_units) {
			tp_sdk_new_trace_id(trace);
			tp_sdk_new_span_id(span);
			tp_sdk_attach(trace, span, 1, NULL, 0);
		}
		for (long i = 0; i < n; i++)
			x = work_unit(x);
		if (span_units)
			tp_sdk_span_end(&sp, "GET", "/burn", 200);
		else if (attach_units)
			tp_sdk_detach();
		if (atomic_load_explicit(&counting, memory_order_relaxed))
			w->units += (uint64_t)n;
	}
	w->sink = x;
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long nthreads = sysconf(_SC_NPROCESSORS_ONLN);
	double seconds = 5, skip = 0, t0, t1;
	const char *service = NULL;
	struct worker *w;
	uint64_t units = 0, sink = 0;
	int c;

	static const struct option opts[] = {{"threads", required_argument, NULL, 't'},
					     {"seconds", required_argument, NULL, 's'},
					     {"skip", required_argument, NULL, 'k'},
					     {"service", required_argument, NULL, 'S'},
					     {"span-units", required_argument, NULL, 'u'},
					     {"attach-units", required_argument, NULL, 'a'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	while ((c = getopt_long(argc, argv, "t:s:k:S:u:a:h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			nthreads = atol(optarg);
			break;
		case 's':
			seconds = atof(optarg);
			break;
		case 'k':
			skip = atof(optarg);
			break;
		case 'S':
			service = optarg;
			break;
		case 'u':
			span_units = atol(optarg);
			break;
		case 'a':
			attach_units = atol(optarg);
			break;
		case 'h':
			printf(
			    "usage: cpu_burn [--threads N] [--seconds S] [--skip S]\n"
			    "                [--service NAME [--span-units N] | --attach-units N]\n"
			    "prints units of work per second over S seconds on N threads,\n"
			    "counted after the first --skip seconds; with --service, every\n"
			    "N units (default 1000) of a thread are one server span exported\n"
			    "over OTLP/HTTP (OTEL_EXPORTER_OTLP_ENDPOINT); with --attach-units,\n"
			    "every N units run with a new trace context attached, nothing sent\n");
			return 0;
		default:
			return 2;
		}
	}
	if (nthreads < 1 || nthreads > 1024 || !(seconds > 0) || !(skip >= 0) || span_units < 0 ||
	    attach_units < 0 || (service && attach_units)) {
		fprintf(stderr, "cpu_burn: bad --threads, --seconds, --skip, --span-units or "
				"--attach-units (not with --service)\n");
		return 2;
	}
	if (service) {
		if (!span_units)
			span_units = 1000;
		if (tp_sdk_process_publish(service, NULL, 0) != 0 ||
		    tp_sdk_export_start(NULL) != 0) {
			fprintf(stderr,
				"cpu_burn: cannot publish the service or start the exporter\n");
			return 1;
		}
	} else {
		span_units = 0;
	}
	w = calloc((size_t)nthreads, sizeof(*w));
	if (!w)
		return 1;
	for (long i = 0; i < nthreads; i++)
		if (pthread_create(&w[i].thread, NULL, run, &w[i]) != 0)
			return 1;
	usleep((useconds_t)(skip * 1e6));
	t0 = now_s();
	atomic_store(&counting, true);
	usleep((useconds_t)(seconds * 1e6));
	atomic_store(&stop, true);
	for (long i = 0; i < nthreads; i++) {
		pthread_join(w[i].thread, NULL);
		units += w[i].units;
		sink ^= w[i].sink;
	}
	t1 = now_s();
	printf("%.1f units/s (%d)\n", (double)units / (t1 - t0), (int)(sink & 1));
	free(w);
	if (service)
		tp_sdk_export_stop(2000);
	return 0;
}
