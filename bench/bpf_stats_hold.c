/*
 * bpf_stats_hold.c - run a command with BPF run time statistics on.
 *
 * usage: bpf_stats_hold COMMAND [ARG]...
 *
 * The kernel counts run_time_ns and run_cnt of every BPF program (what
 * bpf_prog_info and /proc/PID/fdinfo report) while at least one
 * BPF_ENABLE_STATS fd is open, or while kernel.bpf_stats_enabled is 1.
 * Writing the sysctl races with anyone else who uses it; an fd does not:
 * statistics stay on for as long as someone holds one and the old state
 * comes back when the last is closed.
 *
 * This takes such an fd, keeps it open across exec and becomes COMMAND, so
 * the statistics are on for exactly as long as COMMAND runs, and COMMAND
 * keeps its pid (a script can read /proc/PID of what it started). Prints
 * nothing but errors; exits 127 when COMMAND cannot be run, 1 when the
 * statistics cannot be enabled (needs root or CAP_SYS_ADMIN).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

int main(int argc, char **argv)
{
	int fd, flags;

	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		fprintf(argc < 2 ? stderr : stdout,
			"usage: bpf_stats_hold COMMAND [ARG]...\n"
			"runs COMMAND with BPF run time statistics enabled (BPF_ENABLE_STATS)\n");
		return argc < 2 ? 2 : 0;
	}
	fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (fd < 0) {
		fprintf(stderr, "bpf_stats_hold: cannot enable BPF run time statistics: %s\n",
			strerror(-fd));
		return 1;
	}
	/* the kernel opens it close-on-exec; it must outlive the exec */
	flags = fcntl(fd, F_GETFD);
	if (flags < 0 || fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) < 0) {
		fprintf(stderr, "bpf_stats_hold: cannot keep the statistics fd: %s\n",
			strerror(errno));
		return 1;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "bpf_stats_hold: cannot run %s: %s\n", argv[1], strerror(errno));
	return 127;
}
