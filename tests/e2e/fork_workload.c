/*
 * fork_workload - a process that forks short-lived workers, for the
 * agent's fork test (run_agent_fork_test.sh).
 *
 * usage: fork_workload TRACEPARENT WORKERS MS
 *
 * Publishes its service ("fork-workload", traceprof SDK), attaches the
 * trace and span ids of TRACEPARENT to its thread, burns CPU in
 * parent_warmup() for 2.5 s (time for the agent to find its thread
 * context), then forks WORKERS processes one after the other. Each runs
 * forked_worker_burn() for MS milliseconds with the context it inherited
 * and exits; the parent waits for each. At the end it prints the CPU time
 * the workers received ("workers_cpu_us=N", from RUSAGE_CHILDREN), which
 * the test judges the sample count against. Exit status 0, 2 for bad usage.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "traceprof/sdk.h"

static volatile uint64_t sink; /* keeps the loops */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The loops are written out in each function: a shared one would be a tail call, no frame. */
static __attribute__((noinline)) void parent_warmup(double seconds)
{
	double end = now_s() + seconds;

	while (now_s() < end)
		for (int i = 0; i < 100000; i++)
			sink += (uint64_t)i;
}

static __attribute__((noinline)) void forked_worker_burn(double seconds)
{
	double end = now_s() + seconds;

	while (now_s() < end)
		for (int i = 0; i < 100000; i++)
			sink += (uint64_t)i * 3;
}

int main(int argc, char **argv)
{
	uint8_t tid[16], sid[8], flags;
	long workers, ms;

	if (argc != 4 || tp_sdk_traceparent_parse(argv[1], strlen(argv[1]), tid, sid, &flags) ||
	    (workers = atol(argv[2])) < 1 || workers > 1000 || (ms = atol(argv[3])) < 1) {
		fprintf(stderr, "usage: fork_workload TRACEPARENT WORKERS MS\n");
		return 2;
	}
	if (tp_sdk_process_publish("fork-workload", NULL, 0) ||
	    tp_sdk_attach(tid, sid, flags, NULL, 0)) {
		fprintf(stderr, "fork_workload: cannot publish the process or thread context\n");
		return 1;
	}
	parent_warmup(2.5);
	for (long i = 0; i < workers; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			forked_worker_burn((double)ms / 1000);
			_exit(0);
		}
		if (pid < 0) {
			perror("fork_workload: fork");
			return 1;
		}
		waitpid(pid, NULL, 0);
	}
	tp_sdk_detach();
	{
		struct rusage ru;

		if (getrusage(RUSAGE_CHILDREN, &ru) == 0)
			printf("workers_cpu_us=%lld\n",
			       (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
				   ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
	}
	return 0;
}
