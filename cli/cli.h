/*
 * cli.h - what the commands of `traceprof` share: exit codes, messages (the
 * database password never printed), the connection, time ranges, output
 * files and JSON strings.
 *
 * Data flow of one run: traceprof.c picks the command from its table; the
 * command parses its flags from its options table into its arguments
 * struct (cli_parse_args), connects (cli_connect), reads
 * through the SQL API (stackset_read.c or its own query), renders with a
 * switch on the format, and returns one of the exit codes below.
 */
#ifndef TRACEPROF_CLI_H
#define TRACEPROF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <libpq-fe.h>

#include "traceprof/options.h"

/* Exit codes (docs/cli.md): scripts rely on them. */
enum cli_exit {
	CLI_OK = 0,	 /* output written */
	CLI_NO_DATA = 1, /* nothing matched: unknown trace, empty range, empty store */
	CLI_USAGE = 2,	 /* wrong flag, argument or expression; bad value refused by the SQL API */
	CLI_DB = 3,	 /* database unreachable, or a query failed */
	CLI_IO = 4,	 /* the output file could not be written */
};

/* Output formats; a command accepts a subset (cli_parse_format). */
enum cli_format {
	CLI_FMT_TEXT = 0,
	CLI_FMT_FOLDED,
	CLI_FMT_JSON,
	CLI_FMT_SVG,   /* flame graph (flamegraph.h) */
	CLI_FMT_PPROF, /* gzip-compressed profile.proto (pprof.h) */
	CLI_FMT_COUNT,
};

/* Options every data command takes. */
struct cli_common {
	const char *conninfo; /* --db, NULL: libpq defaults (PG* environment) */
	const char *output;   /* -o FILE, NULL: stdout */
	enum cli_format format;
};

/* A connection and where it points, for messages. */
struct cli_db {
	PGconn *conn;
	char where[256]; /* "host:port/dbname", never the password */
};

/* A half-open time range [from, until), Unix microseconds. */
struct cli_range {
	int64_t from_us;
	int64_t until_us;
};

/* "traceprof: " + message + newline on stderr, with the password of --db
 * (if any) replaced by "***". */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Remembers the password of conninfo so cli_error never prints it. */
void cli_hide_password(const char *conninfo);

/* Connects and sets TimeZone to UTC. On failure prints "cannot connect to
 * the database at host:port/db: reason" and returns CLI_DB. */
int cli_connect(const char *conninfo, struct cli_db *db);
void cli_disconnect(struct cli_db *db);

/* Runs a parameterized query (text parameters). Returns the result, or
 * NULL after printing the server's message (with its detail and hint);
 * *rc is then CLI_USAGE for a value the SQL API refused (SQLSTATE class
 * 22) and CLI_DB otherwise. The caller PQclear()s the result. */
PGresult *cli_query(struct cli_db *db, const char *sql, int nparams, const char *const *params,
		    int *rc);

/* Parses a format name accepted by the command (mask of 1 << enum
 * cli_format); prints an error naming the formats the command has and
 * returns -1 otherwise. */
int cli_parse_format(const char *name, unsigned accepted, const char *cmd);
const char *cli_format_name(enum cli_format f);

/* --since, --from and --until as given, for cli_range_parse. */
struct cli_range_flags {
	const char *since;
	const char *from;
	const char *until;
};

/* --since (1h, 30m, 2d, 90s, 1w) and --from/--until (RFC 3339, or
 * "YYYY-MM-DD HH:MM[:SS]" in UTC): the range, now - 1h .. now by default.
 * Returns 0, or CLI_USAGE after printing what was wrong. */
int cli_range_parse(const char *since, const char *from, const char *until, struct cli_range *r);
/* Parses one time; 0 or -1. */
int cli_parse_time(const char *text, int64_t *us);
/* Parses "1h"-like spans; 0 or -1. */
int cli_parse_span(const char *text, int64_t *us);
/* Formats Unix microseconds as "2030-01-02 10:00:00+00" (fractions
 * when there are any) into buf (at least 40 bytes), for SQL parameters. */
const char *cli_time_sql(int64_t us, char *buf, size_t len);
/* The same as RFC 3339 UTC, "2030-01-02T10:00:00Z", for output. */
const char *cli_time_rfc3339(int64_t us, char *buf, size_t len);

/* Parses a positive integer flag value; 0 or -1. */
int cli_parse_count(const char *text, long *out);

/*
 * Opens -o FILE (or stdout) for output in format. Text and folded output
 * goes through a stream that escapes what a terminal would act on, so a
 * name from the database cannot move the cursor, recolour or reorder the
 * screen: characters tp_utf8_safe_len refuses (C0 but newline and tab,
 * DEL, C1, bidirectional overrides and isolates) become \uXXXX and bytes
 * that are not UTF-8 \xNN.
 */
FILE *cli_open_output(const char *path, enum cli_format format);
/* Closes it; returns CLI_OK or CLI_IO after printing the error. */
int cli_close_output(FILE *f, const char *path);

/*
 * Writes s as a JSON string (quoted, escaped): controls, DEL, C1 and the
 * bidirectional overrides and isolates as \uXXXX, bytes that are not
 * UTF-8 as \ufffd.
 */
void cli_json_str(FILE *f, const char *s);
/* Writes a double with up to 3 decimals, or null when not finite. */
void cli_json_num(FILE *f, double v);

/* Formats a CPU time in microseconds for people: "4.2s", "312ms", "850µs". */
const char *cli_fmt_us(int64_t us, char *buf, size_t len);

/* Prints "traceprof CMD: message" and "try 'traceprof CMD --help'";
 * returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The usage error of getopt_long's '?' or ':' (ch; opterr is 0 and the
 * option string starts with ':'). */
int cli_bad_option(const char *cmd, char **argv, int ch, int optopt_);

/* When service has no sources in the store, prints so with the services
 * there are and returns true. */
bool cli_unknown_service(struct cli_db *db, const char *service);

/* Commands (cmd_*.c): argc/argv start at the command name; the help
 * functions print the command's usage, flags and an example. */
int cmd_trace_profile(int argc, char **argv);
int cmd_traces(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_trigger(int argc, char **argv);
void help_trace_profile(FILE *f);
void help_traces(FILE *f);
void help_profile(FILE *f);
void help_compare(FILE *f);
void help_trigger(FILE *f);

/*
 * Command lines: each command lists its flags as a traceprof/options.h
 * table filling its own arguments struct, and cli_parse_args() runs it.
 * The rows below are the ones several commands share; T is the arguments
 * struct, with members c (struct cli_common), rf (struct cli_range_flags),
 * help (bool) and, for the rows that fill them, service and limit (long).
 */
#define CLI_OFF(T, m) offsetof(T, m)
#define CLI_OPT_SERVICE(T, h)                                                                      \
	{                                                                                          \
		.name = "service", .type = TP_OPT_STR, .offset = CLI_OFF(T, service), .arg = "S",  \
		.help = h                                                                          \
	}
#define CLI_OPT_RANGE(T)                                                                           \
	{.name = "since",                                                                          \
	 .type = TP_OPT_STR,                                                                       \
	 .offset = CLI_OFF(T, rf.since),                                                           \
	 .arg = "SPAN",                                                                            \
	 .help = "the last SPAN: 90s, 30m, 1h, 2d, 1w (default 1h)"},                              \
	    {.name = "from",                                                                       \
	     .type = TP_OPT_STR,                                                                   \
	     .offset = CLI_OFF(T, rf.from),                                                        \
	     .arg = "TIME",                                                                        \
	     .help = "start, RFC 3339 or 'YYYY-MM-DD HH:MM[:SS]' (UTC)"},                          \
	{                                                                                          \
		.name = "until", .type = TP_OPT_STR, .offset = CLI_OFF(T, rf.until),               \
		.arg = "TIME", .help = "end (exclusive; default now)"                              \
	}
/* --format F of the formats in *fmts (a struct cli_formats). */
#define CLI_OPT_FORMAT(T, fmts, h)                                                                 \
	{                                                                                          \
		.name = "format", .type = TP_OPT_CUSTOM, .offset = CLI_OFF(T, c.format),           \
		.arg = "F", .help = h, .parse = cli_opt_format, .data = fmts                       \
	}
/* --limit N: a count of 1 to 1000000 into a long. */
#define CLI_OPT_LIMIT(T, h)                                                                        \
	{                                                                                          \
		.name = "limit", .type = TP_OPT_CUSTOM, .offset = CLI_OFF(T, limit), .arg = "N",   \
		.help = h, .parse = cli_opt_count                                                  \
	}
#define CLI_OPT_DB(T)                                                                              \
	{                                                                                          \
		.name = "db", .type = TP_OPT_STR, .offset = CLI_OFF(T, c.conninfo),                \
		.arg = "CONNINFO",                                                                 \
		.help = "libpq connection string or URI (default: the PG* environment)"            \
	}
/* -o/--output and -h/--help, last in every table. */
#define CLI_OPT_COMMON(T)                                                                          \
	{.name = "output",                                                                         \
	 .short_name = 'o',                                                                        \
	 .type = TP_OPT_STR,                                                                       \
	 .offset = CLI_OFF(T, c.output),                                                           \
	 .arg = "FILE",                                                                            \
	 .help = "write to FILE instead of standard output"},                                      \
	    CLI_OPT_HELP(T)
/* -h/--help alone (a command whose -o is not an output file). */
#define CLI_OPT_HELP(T) TP_OPT_HELP_ROW(CLI_OFF(T, help))
/* Width of the flag column of --help. */
#define CLI_HELP_WIDTH 20

/* The formats a command takes (mask of 1 << enum cli_format), for --format. */
struct cli_formats {
	unsigned accepted;
	const char *cmd;
};

/* Parsers of the shared rows (TP_OPT_CUSTOM). */
int cli_opt_format(void *obj, const struct tp_option *o, const char *v, char *err, size_t errlen);
int cli_opt_count(void *obj, const struct tp_option *o, const char *v, char *err, size_t errlen);
/* A text flag that may not be empty ("--NAME must not be empty"). */
int cli_opt_nonempty(void *obj, const struct tp_option *o, const char *v, char *err, size_t errlen);

/*
 * Parses a command's flags (argv[0] is the command name) with its table
 * into args. Returns -1 to go on, with *next the first operand; CLI_OK
 * after printing help(stdout) for --help; CLI_USAGE after printing what
 * was wrong (unknown option, missing or bad value).
 */
int cli_parse_args(const char *cmd, const struct tp_option *opts, size_t n, void *args, int argc,
		   char **argv, void (*help)(FILE *), int *next);
/*
 * cli_parse_args for a command of one service and no arguments: also
 * refuses an argument left over and a missing or empty --service (*service,
 * read after parsing). -1 to go on, or the exit code.
 */
int cli_parse_service_args(const char *cmd, const struct tp_option *opts, size_t n, void *args,
			   int argc, char **argv, void (*help)(FILE *), const char *const *service);

#endif
