/*
 * traceprof - the query command of traceprof: per-request profiles, recent
 * requests, a service's continuous profile and cohort comparisons, read
 * from the PostgreSQL store through its SQL API.
 *
 * Subcommands come from one table (name, function, help, summary); each
 * lives in cmd_*.c, parses its own flags from its options table and returns an
 * exit code of cli.h (0 ok, 1 no data, 2 usage, 3 database, 4 output).
 * Start reading at the table below, then cmd_trace.c.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#ifndef TRACEPROF_VERSION
#define TRACEPROF_VERSION "0.0.0"
#endif

struct command {
	const char *name;		   /* as typed */
	int (*run)(int argc, char **argv); /* argv[0] is the name */
	void (*help)(FILE *f);		   /* full help */
	const char *summary;		   /* one line for the command list */
};

static const struct command commands[] = {
    {"trace-profile", cmd_trace_profile, help_trace_profile,
     "one request's profile: hotspots and call tree per service"},
    {"traces", cmd_traces, help_traces,
     "a service's recent requests (to find a trace id), newest first"},
    {"profile", cmd_profile, help_profile, "a service's continuous profile over a time range"},
    {"compare", cmd_compare, help_compare,
     "functions hotter in one cohort of requests than in another"},
    {"trigger", cmd_trigger, help_trigger,
     "create, list, get, delete TraceProfileTriggers (cluster or directory)"},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
	fprintf(f,
		"usage: traceprof COMMAND [OPTIONS]\n"
		"       traceprof help COMMAND | traceprof COMMAND --help | traceprof --version\n"
		"\n"
		"Read profiles from the traceprof PostgreSQL store.\n"
		"\n"
		"commands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-15s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n"
		   "The database comes from --db CONNINFO or the PG* environment variables\n"
		   "(PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, ...).\n"
		   "\n"
		   "exit codes: 0 ok, 1 no data (unknown trace, empty range), 2 usage error,\n"
		   "            3 database unreachable or query failed, 4 output not written\n");
}

static const struct command *find(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static int unknown(const char *name)
{
	fprintf(stderr, "traceprof: unknown command '%s'\ncommands:", name);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(stderr, " %s", commands[i].name);
	fprintf(stderr, "\ntry 'traceprof --help'\n");
	return CLI_USAGE;
}

int main(int argc, char **argv)
{
	const struct command *c;

	if (argc < 2) {
		usage(stderr);
		return CLI_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return CLI_OK;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
		printf("traceprof %s\n", TRACEPROF_VERSION);
		return CLI_OK;
	}
	if (strcmp(argv[1], "help") == 0) {
		if (argc == 2) {
			usage(stdout);
			return CLI_OK;
		}
		if (argc > 3) {
			fprintf(stderr, "traceprof help: one command at a time\n");
			return CLI_USAGE;
		}
		c = find(argv[2]);
		if (!c)
			return unknown(argv[2]);
		c->help(stdout);
		return CLI_OK;
	}
	if (argv[1][0] == '-') {
		fprintf(stderr,
			"traceprof: unknown option '%s' before the command\n"
			"try 'traceprof --help'\n",
			argv[1]);
		return CLI_USAGE;
	}
	c = find(argv[1]);
	if (!c)
		return unknown(argv[1]);
	return c->run(argc - 1, argv + 1);
}
