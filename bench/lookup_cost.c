/*
 * lookup_cost - what each way of finding a thread's context costs a
 * CPU-clock sample, two ways side by side.
 *
 * usage: lookup_cost [--seconds S] [--rounds R] [--hz HZ] A:B [A:B]...
 *   A, B: none, hash-hit, hash-miss, hash-two, storage-hit, storage-miss
 *         (finding the context); stack, ringbuf, ring-reserve, perfbuf
 *         ringbuf-array, ring-reserve-32 (handing a sample over); count-percpu, count-array
 *         (counting)
 *         (enum lookup_mode in lookup_cost.h)
 *
 * For each pair and round, two copies of lookup_cost.bpf.c are loaded,
 * one per mode, each on its own CPU-clock event per online CPU at HZ (99).
 * The second set is opened half a period after the first, so neither runs
 * right after the other (which would find the caches warm). Their run
 * times (kernel.bpf_stats_enabled) are read over S seconds (5) after one
 * second of settling; then the same with the order swapped. Run it next to
 * a CPU-bound load (bench/bench_lookup_cost.sh does), so that samples
 * interrupt a task that evicts what the program touched. Prints per run
 *
 *   lookup_cost run a=MODE b=MODE first=a|b a_ns=MEAN b_ns=MEAN
 *
 * and per pair the medians over the 2R runs:
 *
 *   lookup_cost pair=A:B runs=N a_ns=M b_ns=M b_minus_a_ns=D
 *
 * D is the median of the per-run differences: both copies ran at the same
 * time on the same CPUs, so the machine's drift cancels. Needs root (or
 * CAP_BPF + CAP_PERFMON); exits 1 when the probe cannot be loaded. Never
 * fails on timing.
 */
#include <errno.h>
#include <getopt.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bench_stats.h"
#include "lookup_cost.h"
#include "lookup_cost.skel.h"

#define MAX_PAIRS 16
#define MAX_RUNS  64

static const char *const mode_names[LOOKUP_MODES] = {
    "none",	    "hash-hit",	   "hash-miss",	    "hash-two",	       "storage-hit",
    "storage-miss", "stack",	   "ringbuf",	    "ring-reserve",    "perfbuf",
    "count-percpu", "count-array", "ringbuf-array", "ring-reserve-32",
};

/* One loaded copy and its events. */
struct copy {
	struct lookup_cost_bpf *skel;
	struct ring_buffer *ring; /* drains the copy's ring */
	struct perf_buffer *pb;	  /* drains its perf buffers */
	struct bpf_link *links[256];
	int nlinks;
};

static int mode_of(const char *name)
{
	for (int i = 0; i < LOOKUP_MODES; i++)
		if (!strcmp(name, mode_names[i]))
			return i;
	return -1;
}

static int drop_record(void *ctx, void *data, size_t len)
{
	(void)ctx;
	(void)data;
	(void)len;
	return 0;
}

static enum bpf_perf_event_ret drop_event(void *ctx, int cpu, struct perf_event_header *e)
{
	(void)ctx;
	(void)cpu;
	(void)e;
	return LIBBPF_PERF_EVENT_CONT;
}

static void copy_close(struct copy *c)
{
	for (int i = 0; i < c->nlinks; i++)
		bpf_link__destroy(c->links[i]);
	ring_buffer__free(c->ring);
	perf_buffer__free(c->pb);
	lookup_cost_bpf__destroy(c->skel);
}

static int copy_open(struct copy *c, int mode)
{
	memset(c, 0, sizeof(*c));
	c->skel = lookup_cost_bpf__open();
	if (!c->skel)
		return -errno;
	c->skel->rodata->mode = (__u32)mode;
	bpf_map__set_max_entries(c->skel->maps.acounters, (__u32)libbpf_num_possible_cpus());
	bpf_map__set_max_entries(c->skel->maps.out_rows, (__u32)libbpf_num_possible_cpus());
	if (lookup_cost_bpf__load(c->skel)) {
		lookup_cost_bpf__destroy(c->skel);
		c->skel = NULL;
		return -EINVAL;
	}
	c->ring = ring_buffer__new(bpf_map__fd(c->skel->maps.ring), drop_record, NULL, NULL);
	{
		/* wake the reader only at 64 kB pending: the loader drains on a timer anyway */
		struct perf_event_attr a = {
		    .type = PERF_TYPE_SOFTWARE,
		    .config = PERF_COUNT_SW_BPF_OUTPUT,
		    .size = sizeof(a),
		    .sample_type = PERF_SAMPLE_RAW,
		    .watermark = 1,
		    .wakeup_watermark = 64 * 1024,
		};

		c->pb = perf_buffer__new_raw(bpf_map__fd(c->skel->maps.perfbuf), 64, &a, drop_event,
					     NULL, NULL);
	}
	if (!c->ring || !c->pb) {
		copy_close(c);
		return -ENOMEM;
	}
	return 0;
}

static int copy_attach(struct copy *c, int hz)
{
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);

	for (int cpu = 0; cpu < ncpu && c->nlinks < 256; cpu++) {
		struct perf_event_attr a = {
		    .type = PERF_TYPE_SOFTWARE,
		    .config = PERF_COUNT_SW_CPU_CLOCK,
		    .size = sizeof(a),
		    .freq = 1,
		    .sample_freq = (__u64)hz,
		};
		int fd = (int)syscall(SYS_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		struct bpf_link *l;

		if (fd < 0)
			return -errno;
		l = bpf_program__attach_perf_event(c->skel->progs.probe, fd);
		if (!l) {
			close(fd);
			return -errno;
		}
		c->links[c->nlinks++] = l; /* the link owns the fd */
	}
	return 0;
}

static void run_stats(const struct copy *c, __u64 *ns, __u64 *cnt)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	bpf_obj_get_info_by_fd(bpf_program__fd(c->skel->progs.probe), &info, &len);
	*ns = info.run_time_ns;
	*cnt = info.run_cnt;
}

static void sleep_ns(long ns)
{
	struct timespec ts = {ns / 1000000000L, ns % 1000000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* One side-by-side run; the means of mode a and mode b in *an, *bn. */
static int run_pair(int a, int b, bool b_first, int hz, int seconds, double *an, double *bn)
{
	struct copy ca, cb, *first = b_first ? &cb : &ca, *second = b_first ? &ca : &cb;
	__u64 a0, a1, b0, b1, na0, na1, nb0, nb1;
	int err;

	if ((err = copy_open(&ca, a)) != 0)
		return err;
	if ((err = copy_open(&cb, b)) != 0) {
		copy_close(&ca);
		return err;
	}
	err = copy_attach(first, hz);
	sleep_ns(500000000L / hz); /* half a period apart */
	if (!err)
		err = copy_attach(second, hz);
	if (!err) {
		sleep_ns(1000000000L);
		run_stats(&ca, &a0, &na0);
		run_stats(&cb, &b0, &nb0);
		/* drain both copies' buffers every 50 ms for the measured seconds */
		for (int t = 0; t < seconds * 20; t++) {
			sleep_ns(50000000L);
			ring_buffer__consume(ca.ring);
			ring_buffer__consume(cb.ring);
			perf_buffer__consume(ca.pb);
			perf_buffer__consume(cb.pb);
		}
		run_stats(&ca, &a1, &na1);
		run_stats(&cb, &b1, &nb1);
		if (na1 == na0 || nb1 == nb0)
			err = -ENODATA;
		else {
			*an = (double)(a1 - a0) / (double)(na1 - na0);
			*bn = (double)(b1 - b0) / (double)(nb1 - nb0);
		}
	}
	copy_close(&ca);
	copy_close(&cb);
	return err;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: lookup_cost [--seconds S] [--rounds R] [--hz HZ] A:B [A:B]...\n"
		   "  modes: none hash-hit hash-miss hash-two storage-hit storage-miss\n"
		   "         stack ringbuf ring-reserve perfbuf count-percpu count-array\n"
		   "         ringbuf-array ring-reserve-32\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"seconds", required_argument, NULL, 's'},
					     {"rounds", required_argument, NULL, 'r'},
					     {"hz", required_argument, NULL, 'z'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	int seconds = 5, rounds = 3, hz = 99, npairs = 0, pa[MAX_PAIRS], pb[MAX_PAIRS], c, stats_fd;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			seconds = atoi(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'z':
			hz = atoi(optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (seconds < 1 || rounds < 1 || rounds > MAX_RUNS / 2 || hz < 1 || hz > 1000 ||
	    optind == argc) {
		usage(stderr);
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		char *colon = strchr(argv[i], ':');

		if (!colon || npairs == MAX_PAIRS) {
			usage(stderr);
			return 2;
		}
		*colon = '\0';
		pa[npairs] = mode_of(argv[i]);
		pb[npairs] = mode_of(colon + 1);
		if (pa[npairs] < 0 || pb[npairs] < 0) {
			fprintf(stderr, "lookup_cost: unknown mode in %s:%s\n", argv[i], colon + 1);
			return 2;
		}
		npairs++;
	}
	libbpf_set_print(NULL);
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0) {
		fprintf(stderr, "lookup_cost: cannot enable BPF run-time stats: %s\n",
			strerror(errno));
		return 1;
	}
	for (int p = 0; p < npairs; p++) {
		double av[MAX_RUNS], bv[MAX_RUNS], dv[MAX_RUNS];
		int n = 0;

		for (int r = 0; r < rounds; r++)
			for (int order = 0; order < 2; order++) {
				double an = 0, bn = 0;
				int err = run_pair(pa[p], pb[p], order == 1, hz, seconds, &an, &bn);

				if (err) {
					fprintf(stderr, "lookup_cost: run failed: %s\n",
						strerror(-err));
					return 1;
				}
				printf("lookup_cost run a=%s b=%s first=%s a_ns=%.0f b_ns=%.0f\n",
				       mode_names[pa[p]], mode_names[pb[p]], order ? "b" : "a", an,
				       bn);
				fflush(stdout);
				av[n] = an;
				bv[n] = bn;
				dv[n] = bn - an;
				n++;
			}
		printf("lookup_cost pair=%s:%s runs=%d a_ns=%.0f b_ns=%.0f b_minus_a_ns=%.0f\n",
		       mode_names[pa[p]], mode_names[pb[p]], n, bench_median(av, n),
		       bench_median(bv, n), bench_median(dv, n));
		fflush(stdout);
	}
	close(stats_fd);
	return 0;
}
