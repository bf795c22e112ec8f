/*
 * offcpu_capture - runs bench/offcpu/pingpong under the traceprof sampler
 * with off-CPU capture in one mode, for bench/offcpu_cost.sh:
 *
 *   offcpu_capture MODE MIN_US PINGPONG [pingpong args...]
 *
 * MODE: off (the sampler loaded, capture never switched on), requests
 * (threads inside requests: all pingpong threads are), all. Starts the
 * workload with --wait, gives the sampler its pid and TLS location (the
 * first line it prints) and the unwind tables of its files, switches
 * capture, lets it run, draining the ring meanwhile, then prints the
 * workload's line followed by what was captured, the off-CPU programs'
 * run time (kernel.bpf_stats_enabled=1 for it, set by the script) and the
 * CPU time this reader spent draining the ring (reader_cpu_ms).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sampler.h"
#include "traceprof/log.h"
#include "unwind.h"

struct counts {
	uint64_t records, shorts, us, samples, frames;
};

static int on_record(void *arg, const struct tp_sample *s, size_t len)
{
	struct counts *c = arg;

	(void)len;
	if (s->kind != TP_REC_OFFCPU) {
		c->samples++;
		return 0;
	}
	if (s->flags & TP_SAMPLE_OFF_SHORT)
		c->shorts++;
	else
		c->records++;
	c->us += s->off_us;
	c->frames += s->kern_n + s->user_n;
	return 0;
}

static int mode_of(const char *m)
{
	if (!strcmp(m, "off"))
		return SAMPLER_OFFCPU_OFF;
	if (!strcmp(m, "requests"))
		return SAMPLER_OFFCPU_REQUESTS;
	if (!strcmp(m, "all"))
		return SAMPLER_OFFCPU_ALL;
	return -1;
}

int main(int argc, char **argv)
{
	struct sampler_opts o = {.hz = 19, .filter = TP_FILTER_PIDS, .unwind_bytes = 16u << 20};
	int in[2], out[2], mode, min_us;
	struct sampler_unwind_maps sm;
	struct tp_tls_loc loc = {.kind = TP_TLS_STATIC};
	struct counts c = {0};
	struct unwind *u = NULL;
	struct sampler_stats st;
	struct sampler *s;
	char line[256], result[256] = "";
	long long off;
	FILE *f;
	pid_t pid;

	if (argc < 4 || (mode = mode_of(argv[1])) < 0 || (min_us = atoi(argv[2])) <= 0) {
		fprintf(stderr, "usage: offcpu_capture off|requests|all MIN_US PINGPONG [args]\n");
		return 2;
	}
	log_set_level(TP_LOG_WARN);
	if (pipe(in) || pipe(out))
		return 1;
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execv(argv[3], argv + 3);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	f = fdopen(out[0], "r");
	if (!f || !fgets(line, sizeof(line), f) || sscanf(line, "tls_offset=%lld", &off) != 1) {
		fprintf(stderr, "offcpu_capture: no tls_offset line from the workload\n");
		return 1;
	}
	loc.tp_offset = off;
	s = sampler_open(&o);
	if (!s) {
		fprintf(stderr, "offcpu_capture: sampler_open: %s\n", strerror(errno));
		kill(pid, SIGKILL);
		return 1;
	}
	if (sampler_add_target_pid(s, pid) || sampler_set_tls(s, pid, &loc))
		fprintf(stderr, "offcpu_capture: cannot set the target\n");
	if (!sampler_unwind_maps(s, &sm)) {
		struct unwind_maps um = {sm.rows_fd, sm.nrows, sm.tables_fd, sm.procs_fd};
		struct timespec ts = {0, 20000000};

		u = unwind_new(&um, NULL);
		for (int i = 0; u && i < 250; i++) {
			if (unwind_note_process(u, pid) == 0 && !unwind_process_pending(u, pid))
				break;
			nanosleep(&ts, NULL);
		}
	}
	if (mode != SAMPLER_OFFCPU_OFF && sampler_set_offcpu(s, mode, (uint32_t)min_us)) {
		fprintf(stderr, "offcpu_capture: cannot switch capture on\n");
		return 1;
	}
	struct rusage r0, r1;

	getrusage(RUSAGE_SELF, &r0);
	if (write(in[1], "go\n", 3) != 3)
		return 1;
	for (;;) {
		struct pollfd pf = {.fd = out[0], .events = POLLIN};

		sampler_poll(s, 50, on_record, &c);
		if (poll(&pf, 1, 0) > 0) {
			if (!fgets(result, sizeof(result), f))
				result[0] = '\0';
			break;
		}
	}
	while (sampler_poll(s, 0, on_record, &c) > 0)
		;
	getrusage(RUSAGE_SELF, &r1);
	waitpid(pid, NULL, 0);
	result[strcspn(result, "\n")] = '\0';
	memset(&st, 0, sizeof(st));
	sampler_get_stats(s, &st);
	printf("%s records=%" PRIu64 " short=%" PRIu64 " off_us=%" PRIu64 " frames=%" PRIu64
	       " lost=%" PRIu64 " state_full=%" PRIu64 " ustack_lost=%" PRIu64
	       " bpf_run_ns=%" PRIu64 " bpf_runs=%" PRIu64 " reader_cpu_ms=%.1f\n",
	       result, c.records, c.shorts, c.us, c.frames, st.counters[TP_CNT_OFF_LOST],
	       st.counters[TP_CNT_OFF_STATE_FULL], st.counters[TP_CNT_OFF_USTACK_LOST],
	       st.offcpu_run_time_ns, st.offcpu_run_cnt,
	       (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) *
		       1e3 +
		   (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec -
		    r0.ru_stime.tv_usec) /
		       1e3);
	unwind_free(u);
	sampler_free(s);
	return 0;
}
