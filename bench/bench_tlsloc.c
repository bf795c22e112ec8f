/*
 * bench_tlsloc - what looking for a process's thread context costs the
 * agent (agent/process/tlsloc.c), the first time it sees the process's files and
 * once it remembers them.
 *
 * usage: bench_tlsloc PID [RUNS]
 *
 * Each run is a fresh child process (the resolver remembers files per
 * process) that resolves PID twice and reports both times; prints the
 * median over RUNS (default 7) of each:
 *
 *   bench_tlsloc pid=P modules=M first_us=F again_us=A
 *
 * first: nothing remembered (maps read, every module's ELF file opened
 * and its symbols looked up); again: every file remembered (maps read, a
 * stat() per module). Needs to read PID's /proc files (root for other
 * users' processes).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tlsloc.h"
#include "traceprof/log.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* In a child: resolves pid twice, writes both times (µs) to fd. */
static void child_run(pid_t pid, int fd)
{
	struct tp_tls_loc loc;
	double t[2];

	for (int i = 0; i < 2; i++) {
		double t0 = now_us();

		if (tlsloc_resolve(pid, 0, &loc, NULL) < 0)
			_exit(1);
		t[i] = now_us() - t0;
	}
	_exit(write(fd, t, sizeof(t)) == sizeof(t) ? 0 : 1);
}

static int count_modules(pid_t pid)
{
	char path[64], line[4096], last[4096] = "";
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');

		if (p && strstr(line, " r-xp ") && strcmp(p, last)) {
			n++;
			snprintf(last, sizeof(last), "%s", p);
		}
	}
	if (f)
		fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	double first[64], again[64];
	int runs = argc > 2 ? atoi(argv[2]) : 7;
	pid_t pid;

	if (argc < 2 || argc > 3 || (pid = (pid_t)atoi(argv[1])) <= 0 || runs < 1 || runs > 64) {
		fprintf(stderr, "usage: bench_tlsloc PID [RUNS (1-64)]\n");
		return 2;
	}
	log_set_level(TP_LOG_QUIET);
	for (int r = 0; r < runs; r++) {
		int pfd[2], status;
		double t[2];
		pid_t c;

		if (pipe(pfd) != 0)
			return 1;
		c = fork();
		if (c == 0) {
			close(pfd[0]);
			child_run(pid, pfd[1]);
		}
		close(pfd[1]);
		if (c < 0 || read(pfd[0], t, sizeof(t)) != sizeof(t) ||
		    waitpid(c, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
			fprintf(stderr, "bench_tlsloc: cannot resolve pid %d\n", (int)pid);
			return 1;
		}
		close(pfd[0]);
		first[r] = t[0];
		again[r] = t[1];
	}
	qsort(first, (size_t)runs, sizeof(double), cmp_double);
	qsort(again, (size_t)runs, sizeof(double), cmp_double);
	printf("bench_tlsloc pid=%d modules=%d first_us=%.0f again_us=%.0f\n", (int)pid,
	       count_modules(pid), first[runs / 2], again[runs / 2]);
	return 0;
}
