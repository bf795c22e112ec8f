/*
 * swevent_cost - time the kernel spends taking samples of software
 * CPU-clock perf events, for comparing profilers' in-kernel cost.
 *
 * usage: swevent_cost [--seconds N] [--settle S] [--prog-b ID] [-- COMMAND [ARG]...]
 *
 * A perf record and a BPF profiler both sample through a CPU-clock event:
 * an hrtimer whose callback (perf_swevent_hrtimer) does the profiler's
 * per-sample work in the interrupted task's time, where no per-process
 * CPU figure sees it. This loads swevent_cost.bpf.c, which times that
 * callback through the hrtimer_expire_entry/exit tracepoints, and prints,
 * after N seconds or when COMMAND exits (COMMAND's exit status is
 * swevent_cost's):
 *
 *   swevent_cost class=K callbacks=C total_ns=T mean_ns=M median_ns=D max_ns=X
 *                wall_s=W core_pct=P near_callbacks=N far_mean_ns=F
 *                overlap_callbacks=O overlap_mean_ns=OM alone_mean_ns=AM
 *
 * one line per class K (output: perf record, bpf: a BPF profiler; with
 * --prog-b ID also bpf-b: the callbacks of BPF program ID); the
 * median to 100 ns, from a histogram kept in the kernel. N callbacks began
 * less than 0.5 ms after the other class's last one on the same CPU (the
 * sampling path still warm from it: cheaper); F is the mean of the rest,
 * the figure to compare two profilers run side by side. O callbacks ran
 * while another CPU ran one of the same class (the same profiler sampling
 * two CPUs at the same instant); OM is their mean, AM the others'.
 * With --settle S the probe is attached, S seconds pass uncounted, and the
 * line "swevent_cost measuring" is printed when counting starts: a
 * benchmark reading it starts its own figures then, so the start-up of
 * this program (which the profilers being measured sample, symbolize and
 * store like any new process) falls outside the measured window.
 * core_pct is T over W: the share of one core the callbacks took. Only
 * meaningful with one profiler running at a time. Needs root (or
 * CAP_BPF + CAP_PERFMON); exits 1 when the probe cannot be loaded.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "swevent_cost.h"
#include "swevent_cost.skel.h"

/* Address of a kernel text symbol from /proc/kallsyms; 0 when not found. */
static uint64_t kallsyms_addr(const char *name)
{
	char line[512], sym[256], type;
	unsigned long long addr;
	uint64_t found = 0;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %255s", &addr, &type, sym) == 3 &&
		    strcmp(sym, name) == 0) {
			found = addr;
			break;
		}
	}
	fclose(f);
	return found;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sums one class over the CPUs and prints its line. */
static void report(const char *cls, const struct swevent_cost *percpu, int ncpu, double wall)
{
	struct swevent_cost total = {0};
	double median_ns = 0;
	uint64_t far, far_ns;

	for (int i = 0; i < ncpu; i++) {
		total.callbacks += percpu[i].callbacks;
		total.total_ns += percpu[i].total_ns;
		total.near_callbacks += percpu[i].near_callbacks;
		total.near_total_ns += percpu[i].near_total_ns;
		total.overlap_callbacks += percpu[i].overlap_callbacks;
		total.overlap_total_ns += percpu[i].overlap_total_ns;
		if (percpu[i].max_ns > total.max_ns)
			total.max_ns = percpu[i].max_ns;
		for (int b = 0; b < SWEVENT_HIST_BUCKETS; b++)
			total.hist[b] += percpu[i].hist[b];
	}
	for (uint64_t b = 0, seen = 0; b < SWEVENT_HIST_BUCKETS && total.callbacks; b++) {
		seen += total.hist[b];
		if (2 * seen >= total.callbacks) {
			median_ns = (b + 0.5) * SWEVENT_HIST_NS;
			break;
		}
	}
	far = total.callbacks - total.near_callbacks;
	far_ns = total.total_ns - total.near_total_ns;
	printf("swevent_cost class=%s callbacks=%" PRIu64 " total_ns=%" PRIu64
	       " mean_ns=%.0f median_ns=%.0f max_ns=%" PRIu64 " wall_s=%.2f core_pct=%.4f"
	       " near_callbacks=%" PRIu64 " far_mean_ns=%.0f overlap_callbacks=%" PRIu64
	       " overlap_mean_ns=%.0f alone_mean_ns=%.0f\n",
	       cls, (uint64_t)total.callbacks, (uint64_t)total.total_ns,
	       total.callbacks ? (double)total.total_ns / total.callbacks : 0.0, median_ns,
	       (uint64_t)total.max_ns, wall, 100.0 * total.total_ns / 1e9 / wall,
	       (uint64_t)total.near_callbacks, far ? (double)far_ns / far : 0.0,
	       (uint64_t)total.overlap_callbacks,
	       total.overlap_callbacks ? (double)total.overlap_total_ns / total.overlap_callbacks
				       : 0.0,
	       total.callbacks > total.overlap_callbacks
		   ? (double)(total.total_ns - total.overlap_total_ns) /
			 (double)(total.callbacks - total.overlap_callbacks)
		   : 0.0);
}

static void usage(FILE *out)
{
	fprintf(out, "usage: swevent_cost [--seconds N] [--settle S] [--prog-b ID] [-- COMMAND "
		     "[ARG]...]\n"
		     "times the kernel's perf_swevent_hrtimer callbacks (the per-sample work of\n"
		     "CPU-clock profilers) for N seconds (default 10) or while COMMAND runs;\n"
		     "--settle S: wait S seconds after attaching, uncounted, then print\n"
		     "\"swevent_cost measuring\" and start counting;\n"
		     "--prog-b ID: the callbacks of BPF program ID are class bpf-b, the other\n"
		     "BPF programs' class bpf (two builds of a BPF profiler side by side)\n");
}

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static double positive_arg(const char *name, const char *arg, bool zero_ok)
{
	char *end;
	double v = strtod(arg, &end);

	if (*end || !(v > 0 || (zero_ok && v == 0))) {
		fprintf(stderr, "swevent_cost: %s wants a %s number, got '%s'\n", name,
			zero_ok ? "non-negative" : "positive", arg);
		return -1;
	}
	return v;
}

/* What to measure, from the command line. */
struct cost_args {
	double seconds;	      /* --seconds, without a command */
	double settle;	      /* --settle: wait, then start the totals again */
	unsigned long prog_b; /* --prog-b: a second BPF program's id, or 0 */
};

/*
 * The options into *a (its defaults set by the caller). Returns -1 to
 * measure, else the exit status: 0 after --help, 2 after a wrong option.
 */
static int parse_args(int argc, char **argv, struct cost_args *a)
{
	static const struct option opts[] = {{"seconds", required_argument, NULL, 's'},
					     {"settle", required_argument, NULL, 'w'},
					     {"prog-b", required_argument, NULL, 'b'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	int opt;

	while ((opt = getopt_long(argc, argv, "s:h", opts, NULL)) != -1) {
		if (opt == 's') {
			a->seconds = positive_arg("--seconds", optarg, false);
			if (a->seconds < 0)
				return 2;
		} else if (opt == 'b') {
			char *end;

			errno = 0;
			a->prog_b = strtoul(optarg, &end, 10);
			if (errno || *end || !a->prog_b || a->prog_b > UINT32_MAX) {
				fprintf(stderr,
					"swevent_cost: --prog-b wants a BPF program id, got '%s'\n",
					optarg);
				return 2;
			}
		} else if (opt == 'w') {
			a->settle = positive_arg("--settle", optarg, true);
			if (a->settle < 0)
				return 2;
		} else if (opt == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct swevent_cost_bpf *skel;
	struct swevent_cost *percpu;
	struct cost_args args = {.seconds = 10};
	double t0, wall;
	int ncpu, status = 0, rc;
	pid_t child = 0;
	uint64_t fn;

	rc = parse_args(argc, argv, &args);
	if (rc >= 0)
		return rc;
	rc = 0;
	fn = kallsyms_addr("perf_swevent_hrtimer");
	if (!fn) {
		fprintf(stderr, "swevent_cost: perf_swevent_hrtimer not in /proc/kallsyms "
				"(needs root, or kptr_restrict allows it)\n");
		return 1;
	}
	skel = swevent_cost_bpf__open();
	if (!skel) {
		fprintf(stderr, "swevent_cost: cannot open the probe: %s\n", strerror(errno));
		return 1;
	}
	skel->rodata->swevent_fn = fn;
	skel->rodata->prog_b_id = (uint32_t)args.prog_b;
	if (swevent_cost_bpf__load(skel) || swevent_cost_bpf__attach(skel)) {
		fprintf(stderr, "swevent_cost: cannot load or attach the probe: %s\n",
			strerror(errno));
		swevent_cost_bpf__destroy(skel);
		return 1;
	}
	ncpu = libbpf_num_possible_cpus();
	percpu = ncpu > 0 ? calloc((size_t)ncpu, sizeof(*percpu)) : NULL;
	if (!percpu) {
		fprintf(stderr, "swevent_cost: out of memory\n");
		swevent_cost_bpf__destroy(skel);
		return 1;
	}
	if (args.settle > 0) {
		sleep_s(args.settle);
		/* percpu is all zeros: start every class's totals again */
		for (uint32_t cls = 0; cls < SWEVENT_CLASSES; cls++) {
			if (bpf_map_update_elem(bpf_map__fd(skel->maps.cost), &cls, percpu,
						BPF_ANY)) {
				fprintf(stderr, "swevent_cost: cannot reset the totals: %s\n",
					strerror(errno));
				free(percpu);
				swevent_cost_bpf__destroy(skel);
				return 1;
			}
		}
		printf("swevent_cost measuring\n");
		fflush(stdout);
	}
	t0 = now_s();
	if (optind < argc) {
		child = fork();
		if (child == 0) {
			execvp(argv[optind], &argv[optind]);
			fprintf(stderr, "swevent_cost: cannot run %s: %s\n", argv[optind],
				strerror(errno));
			_exit(127);
		}
		if (child < 0 || waitpid(child, &status, 0) < 0) {
			fprintf(stderr, "swevent_cost: cannot run %s: %s\n", argv[optind],
				strerror(errno));
			rc = 1;
		} else {
			rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
	} else {
		sleep_s(args.seconds);
	}
	wall = now_s() - t0;

	for (uint32_t cls = 0; cls < SWEVENT_CLASSES; cls++) {
		if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.cost), &cls, percpu)) {
			fprintf(stderr, "swevent_cost: cannot read the totals: %s\n",
				strerror(errno));
			free(percpu);
			swevent_cost_bpf__destroy(skel);
			return 1;
		}
		if (cls == SWEVENT_BPF_B && !args.prog_b)
			continue;
		report(cls == SWEVENT_BPF     ? "bpf"
		       : cls == SWEVENT_BPF_B ? "bpf-b"
					      : "output",
		       percpu, ncpu, wall);
	}
	free(percpu);
	swevent_cost_bpf__destroy(skel);
	return rc;
}
