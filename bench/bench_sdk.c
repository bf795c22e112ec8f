/*
 * bench_sdk - cost of publishing a request's thread context: ns per
 * tp_sdk_attach + tp_sdk_detach pair, through the shared library (the
 * TLSDESC access an application linking libtraceprof-sdk.so gets).
 *
 * Each run times --pairs pairs (default 10M) on one thread with a span id
 * that changes every pair; --runs runs (default 7); prints the median with
 * the fastest and slowest run, for the fixed part alone and with two
 * attributes (a route and a method, 16 bytes of attrs-data). Reports only.
 *
 * Then server spans: ns per tp_sdk_span_begin + tp_sdk_span_end pair
 * (traceparent parsed, ids made, context attached, a clock read at each end,
 * detached, span queued) with the exporter running against a sink in this
 * process (a thread that answers every POST 200). Each run ends
 * --span-pairs spans (default 50000) into a queue large enough to hold
 * them, then waits until the exporter has shipped them, so every pair
 * takes the queueing path, never the cheaper drop.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"
#include "traceprof/sdk.h"

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ns per pair of one run. */
static double run(long pairs, const struct tp_sdk_attr *attrs, size_t n)
{
	uint8_t tid[16], sid[8];
	double t0;

	tp_sdk_new_trace_id(tid);
	tp_sdk_new_span_id(sid);
	t0 = now_ns();
	for (long i = 0; i < pairs; i++) {
		sid[7] = (uint8_t)(i | 1);
		tp_sdk_attach(tid, sid, 1, attrs, n);
		tp_sdk_detach();
	}
	return (now_ns() - t0) / (double)pairs;
}

static void report(const char *what, int runs, long pairs, const struct tp_sdk_attr *attrs,
		   size_t n)
{
	double *ns = calloc((size_t)runs, sizeof(*ns));

	if (!ns)
		exit(1);
	run(pairs / 10, attrs, n); /* warm up */
	for (int r = 0; r < runs; r++)
		ns[r] = run(pairs, attrs, n);
	qsort(ns, (size_t)runs, sizeof(*ns), bench_cmp_double);
	printf("| %s | %.1f | %.1f–%.1f |\n", what, ns[runs / 2], ns[0], ns[runs - 1]);
	free(ns);
}

/* The sink: answers every request on every connection with 200. */
static void *sink_main(void *arg)
{
	static char buf[1 << 20];
	int lfd = *(int *)arg;

	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		size_t have = 0;

		if (fd < 0)
			return NULL;
		for (;;) {
			ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
			char *end, *cl;

			if (n <= 0)
				break;
			have += (size_t)n;
			buf[have] = '\0';
			while ((end = strstr(buf, "\r\n\r\n")) &&
			       (cl = strcasestr(buf, "\r\ncontent-length:"))) {
				size_t total = (size_t)(end - buf) + 4 + strtoul(cl + 17, NULL, 10);

				if (have < total)
					break;
				if (write(fd, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 38) !=
				    38)
					break;
				memmove(buf, buf + total, have - total);
				have -= total;
				buf[have] = '\0';
			}
		}
		close(fd);
	}
}

/* ns per begin+end pair of one run; waits until the exporter shipped them all. */
static double span_run(long pairs, uint64_t *dropped)
{
	static const char tp[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
	struct tp_sdk_export_stats st;
	double t0, ns;

	t0 = now_ns();
	for (long i = 0; i < pairs; i++) {
		struct tp_sdk_span sp;

		tp_sdk_span_begin(&sp, tp, sizeof(tp) - 1);
		tp_sdk_span_end(&sp, "POST", "/api/pay", 200);
	}
	ns = (now_ns() - t0) / (double)pairs;
	do {
		usleep(10000);
		tp_sdk_export_get_stats(&st);
	} while (st.spans_exported + st.spans_dropped_error < st.spans_ended);
	*dropped = st.spans_dropped_full + st.spans_dropped_error;
	return ns;
}

static int span_report(int runs, long pairs)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	struct tp_sdk_export_opts o = {.queue_spans = 1u << 16};
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	double *ns = calloc((size_t)runs, sizeof(*ns));
	char url[64];
	uint64_t dropped = 0;
	pthread_t t;

	if (!ns || lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 4) ||
	    getsockname(lfd, (struct sockaddr *)&a, &al) ||
	    pthread_create(&t, NULL, sink_main, &lfd)) {
		fprintf(stderr, "bench_sdk: cannot start the sink\n");
		return 1;
	}
	if (pairs > (long)o.queue_spans)
		pairs = (long)o.queue_spans;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/traces", ntohs(a.sin_port));
	o.endpoint = url;
	if (tp_sdk_export_start(&o)) {
		fprintf(stderr, "bench_sdk: cannot start the exporter\n");
		return 1;
	}
	span_run(pairs / 10, &dropped); /* warm up */
	for (int r = 0; r < runs; r++)
		ns[r] = span_run(pairs, &dropped);
	tp_sdk_export_stop(5000);
	qsort(ns, (size_t)runs, sizeof(*ns), bench_cmp_double);
	printf("\n%d runs of %ld span begin+end pairs, exporter running (dropped: %lu)\n\n", runs,
	       pairs, (unsigned long)dropped);
	printf("| span | ns/pair (median) | fastest–slowest run |\n|---|---:|---:|\n");
	printf("| begin (traceparent) + end (method, route, status) | %.1f | %.1f–%.1f |\n",
	       ns[runs / 2], ns[0], ns[runs - 1]);
	free(ns);
	return 0;
}

int main(int argc, char **argv)
{
	int runs = 7;
	long pairs = 10000000, span_pairs = 50000;
	struct tp_sdk_attr attrs[2];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
			runs = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--pairs") && i + 1 < argc) {
			pairs = atol(argv[++i]);
		} else if (!strcmp(argv[i], "--span-pairs") && i + 1 < argc) {
			span_pairs = atol(argv[++i]);
		} else {
			fprintf(stderr,
				"usage: bench_sdk [--runs N] [--pairs N] [--span-pairs N]\n");
			return 2;
		}
	}
	if (runs < 1 || pairs < 1 || span_pairs < 10) {
		fprintf(stderr,
			"bench_sdk: --runs and --pairs must be positive, --span-pairs >= 10\n");
		return 2;
	}
	attrs[0] =
	    (struct tp_sdk_attr){(uint32_t)tp_sdk_key_register("http.route"), 10, "/cart/{id}"};
	attrs[1] = (struct tp_sdk_attr){(uint32_t)tp_sdk_key_register("http.method"), 4, "POST"};
	printf("%d runs of %ld attach+detach pairs\n\n", runs, pairs);
	printf("| record | ns/pair (median) | fastest–slowest run |\n|---|---:|---:|\n");
	report("fixed part (ids, flags)", runs, pairs, NULL, 0);
	report("+ 2 attributes (16 bytes)", runs, pairs, attrs, 2);
	return span_report(runs, span_pairs);
}
