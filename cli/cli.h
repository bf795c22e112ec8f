/*
 * cli.h - what the commands of `traceprof` share: exit codes, messages (the
 * database password never printed), the connection, time ranges, output
 * files and JSON strings.
 *
 * Data flow of one run: traceprof.c picks the command from its table; the
 * command parses its flags (getopt_long), connects (cli_connect), reads
 * through the SQL API (stackset_read.c or its own query), renders with a
 * switch on the format, and returns one of the exit codes below.
 */
#ifndef TRACEPROF_CLI_H
#define TRACEPROF_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <libpq-fe.h>

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
/* --format NAME into c->format when the command accepts it: 0, or -1 after
 * cli_parse_format's error. */
int cli_set_format(struct cli_common *c, const char *name, unsigned accepted, const char *cmd);

/* --since, --from and --until as given, for cli_range_parse. */
struct cli_range_flags {
	const char *since;
	const char *from;
	const char *until;
};

/*
 * The flags the data commands share: --db ('d') and -o/--output ('o'),
 * and when r is not NULL --since ('n'), --from ('F') and --until ('U').
 * Stores arg and returns true when ch is one of them; false otherwise
 * (the command's own flags).
 */
bool cli_common_flag(struct cli_common *c, struct cli_range_flags *r, int ch, const char *arg);

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

/* Opens -o FILE (or returns stdout). */
FILE *cli_open_output(const char *path);
/* Closes it; returns CLI_OK or CLI_IO after printing the error. */
int cli_close_output(FILE *f, const char *path);

/* Writes s as a JSON string (quoted, escaped). */
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

/* Help text shared by the data commands. */
#define CLI_HELP_DB                                                                                \
	"  --db CONNINFO        libpq connection string or URI (default: the PG* environment)\n"
#define CLI_HELP_RANGE                                                                             \
	"  --since SPAN         the last SPAN: 90s, 30m, 1h, 2d, 1w (default 1h)\n"                \
	"  --from TIME          start, RFC 3339 or 'YYYY-MM-DD HH:MM[:SS]' (UTC)\n"                \
	"  --until TIME         end (exclusive; default now)\n"
#define CLI_HELP_COMMON                                                                            \
	"  -o, --output FILE    write to FILE instead of standard output\n"                        \
	"  -h, --help           this help\n"

#endif
