/*
 * main.c - traceprof-agent: command line, config file, signals.
 *
 * Settings come from config.c's table: defaults, then --config FILE, then
 * the other flags (same names as the file). SIGTERM and SIGINT stop the
 * agent cleanly: sampling stops, the open window is closed and everything
 * queued is flushed to the database within a deadline. SIGUSR1 writes the
 * stats file now. SIGHUP is ignored.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "config.h"
#include "traceprof/listen.h"
#include "traceprof/log.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: traceprof-agent [--config FILE] [--NAME VALUE]...\n"
		     "\n"
		     "Samples on-CPU stacks of the processes on this machine with eBPF, tags each\n"
		     "sample with the trace and span id of the request the thread was serving\n"
		     "(OpenTelemetry thread context), symbolizes, aggregates into windows and\n"
		     "streams them into the traceprof PostgreSQL store.\n"
		     "\n"
		     "Needs root, or CAP_BPF + CAP_PERFMON + CAP_SYS_PTRACE + CAP_DAC_READ_SEARCH\n"
		     "(docs/agent.md, \"Running the agent\", says why each is needed).\n"
		     "\n"
		     "settings (flags, or \"name = value\" lines in the config file):\n");
	config_print_help(out);
	fprintf(
	    out,
	    "\n"
	    "other flags:\n"
	    "  --config FILE          read settings from FILE first\n"
	    "  --print-config         print the effective settings and exit\n"
	    "  -v, --verbose          same as --log-level debug\n"
	    "  -h, --help             this help\n"
	    "\n"
	    "exit status: 0 after a clean stop, 1 when the agent failed, 2 for usage errors.\n");
}

static volatile sig_atomic_t stop_requested, stats_requested;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void on_stats(int sig)
{
	(void)sig;
	stats_requested = 1;
}

/* Splits "--name=value" or "--name value"; returns the index of the next argument or -1. */
static int parse_flags(int argc, char **argv, struct agent_config *cfg, bool *print_config)
{
	/* --config first, so flags override the file wherever they appear. */
	for (int i = 1; i < argc; i++) {
		const char *path = NULL;

		if (strcmp(argv[i], "--config") == 0) {
			if (i + 1 >= argc) {
				log_error("--config needs a file name");
				return -1;
			}
			path = argv[i + 1];
		} else if (strncmp(argv[i], "--config=", 9) == 0) {
			path = argv[i] + 9;
		}
		if (path && config_load_file(cfg, path) != 0)
			return -1;
	}
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *value;
		char name[64], err[256];
		const char *eq;

		if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
			usage(stdout);
			exit(0);
		}
		if (strcmp(arg, "-v") == 0 || strcmp(arg, "--verbose") == 0) {
			cfg->log_level = TP_LOG_DEBUG;
			continue;
		}
		if (strcmp(arg, "--print-config") == 0) {
			*print_config = true;
			continue;
		}
		if (strcmp(arg, "--config") == 0) {
			i++;
			continue;
		}
		if (strncmp(arg, "--config=", 9) == 0)
			continue;
		if (strncmp(arg, "--", 2) != 0) {
			log_error("unexpected argument \"%s\" (try --help)", arg);
			return -1;
		}
		eq = strchr(arg + 2, '=');
		if ((eq ? (size_t)(eq - arg - 2) : strlen(arg + 2)) >= sizeof(name)) {
			log_error("unknown flag %s (try --help)", arg);
			return -1;
		}
		snprintf(name, sizeof(name), "%.*s",
			 (int)(eq ? (size_t)(eq - arg - 2) : strlen(arg + 2)), arg + 2);
		if (!config_known(name)) {
			log_error("unknown flag --%s (try --help)", name);
			return -1;
		}
		if (eq) {
			value = eq + 1;
		} else {
			if (i + 1 >= argc) {
				log_error("--%s needs a value", name);
				return -1;
			}
			value = argv[++i];
		}
		if (config_set(cfg, name, value, err, sizeof(err)) != 0) {
			log_error("%s", err);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct agent_config cfg;
	bool print_config = false;
	struct sigaction sa;
	struct agent *agent;
	int rc;

	log_set_prefix("traceprof-agent");
	config_defaults(&cfg);
	if (parse_flags(argc, argv, &cfg, &print_config) != 0)
		return 2;
	log_set_level((enum log_level)cfg.log_level);
	if (print_config) {
		config_print(&cfg, stdout);
		return 0;
	}

	/* connections are capped below this (max-conns: 1/8 of it per port) */
	log_debug("open file limit %ld", tp_nofile_raise());
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_stats;
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);

	agent = agent_new(&cfg);
	if (!agent)
		return 1;
	rc = agent_run(agent, &stop_requested, &stats_requested);
	agent_free(agent);
	return rc == 0 ? 0 : 1;
}
