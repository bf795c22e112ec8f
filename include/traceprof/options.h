/*
 * options.h - command lines and config files from one table.
 *
 * A program lists its settings once, as an array of struct tp_option rows:
 * name, value type, bounds, default, help and where the value goes (an
 * offset into the program's own struct). From that table this module
 *
 *   - parses a value of each type, with bounds (tp_opts_set),
 *   - applies the defaults (tp_opts_defaults),
 *   - reads "name = value" config files (tp_opts_load_file),
 *   - builds getopt_long's tables and runs it (tp_opts_getopt),
 *   - renders the option list of --help (tp_opts_help),
 *   - prints the effective settings in config-file form (tp_opts_print).
 *
 * Values of the common types (integers, sizes, durations, text, words) are
 * parsed here; a program adds its own types with a parse callback
 * (TP_OPT_CUSTOM). Parsing stores into the caller's struct and reports
 * errors into a buffer: nothing here prints to stderr or exits, so the
 * program keeps its own error style.
 */
#ifndef TRACEPROF_OPTIONS_H
#define TRACEPROF_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* How a row's value is parsed and stored (the field's C type in brackets). */
enum tp_opt_type {
	TP_OPT_INT = 0,	  /* [int] integer within [min, max] */
	TP_OPT_BYTES,	  /* [size_t] size with an optional K, M or G suffix (binary units);
			     "auto" stored as 0 when the row's default is "auto" */
	TP_OPT_COUNT,	  /* [size_t] non-negative integer within [min, max] */
	TP_OPT_SECONDS,	  /* [int] duration: number with s, m or h suffix; plain = seconds */
	TP_OPT_SECONDS_F, /* [double] the same, fractions allowed */
	TP_OPT_STRBUF,	  /* [char[size]] text copied into the array */
	TP_OPT_STR,	  /* [const char *] points at the value (command lines only:
			     argv outlives parsing) */
	TP_OPT_ENUM,	  /* [int] index of the value in words[] */
	TP_OPT_FLAG,	  /* [bool] no value: set to true */
	TP_OPT_BOOL,	  /* [bool] optional value true or false; none: true */
	TP_OPT_CUSTOM,	  /* parse() decides (required value unless TP_OPT_NOARG/OPTARG) */
	TP_OPT_TEXT,	  /* no option: help is printed verbatim (a section heading) */
};

/* Row flags. */
#define TP_OPT_NOARG   0x01u /* TP_OPT_CUSTOM: takes no value (parse gets NULL) */
#define TP_OPT_OPTARG  0x02u /* TP_OPT_CUSTOM: value optional ("--name=V"; parse may get NULL) */
#define TP_OPT_STOP    0x04u /* command line: stop parsing after it (e.g. --help) */
#define TP_OPT_HIDDEN  0x08u /* not in --help */
#define TP_OPT_NOFILE  0x10u /* command line only: not a config file key */
#define TP_OPT_NOPRINT 0x20u /* left out of tp_opts_print */

struct tp_option;

/* A TP_OPT_CUSTOM value: store into obj; 0, or -EINVAL with err set (err
 * may be left empty when the callback reported the problem itself). */
typedef int (*tp_opt_parse_fn)(void *obj, const struct tp_option *o, const char *value, char *err,
			       size_t errlen);
/* Prints a row's value in config-file form (no name, no newline). */
typedef void (*tp_opt_print_fn)(FILE *out, const void *obj, const struct tp_option *o);

struct tp_option {
	const char *name;      /* long flag (--name) and config file key; NULL: TP_OPT_TEXT,
				  or a short option only (short_name) */
	enum tp_opt_type type; /* how the value is parsed */
	size_t offset;	       /* the field in the caller's struct */
	size_t size;	       /* TP_OPT_STRBUF: size of the char array */
	double min, max;       /* bounds for numbers (a custom parser may use them too) */
	const char *def;       /* default in text form, applied by tp_opts_defaults; NULL: none */
	const char *help;      /* --help text; '\n' continues on an indented line */
	const char *arg;       /* value name in --help ("FILE"), NULL: none shown */
	int short_name;	       /* single-letter flag (-o), or 0 */
	unsigned flags;	       /* TP_OPT_NOARG, ... */
	const char *const *words; /* TP_OPT_ENUM: the values, NULL-terminated */
	const char *bad;	  /* printf format of the error for a bad value (one %s: the
				     value); NULL: "NAME: \"V\" is not a valid ..." */
	tp_opt_parse_fn parse;	  /* TP_OPT_CUSTOM */
	tp_opt_print_fn print;	  /* tp_opts_print of a TP_OPT_CUSTOM row, or to override */
	const void *data;	  /* for parse/print */
};

#define TP_OPTS_COUNT(table) (sizeof(table) / sizeof((table)[0]))
/* A macro's value as a string literal, for defaults in help texts. */
#define TP_OPTS_STR(x)	TP_OPTS_STR_(x)
#define TP_OPTS_STR_(x) #x
/* The field of row o in obj, as a pointer to type. */
#define TP_OPT_PTR(obj, o, type) ((type *)(void *)((char *)(obj) + (o)->offset))
/* offset and size of a char array member, for TP_OPT_STRBUF rows. */
#define TP_OPT_STRFIELD(type, member)                                                              \
	.offset = offsetof(type, member), .size = sizeof(((type *)0)->member)

/* The -v/--verbose and -h/--help rows of every program: bool fields at off. */
#define TP_OPT_VERBOSE_ROW(off)                                                                    \
	{                                                                                          \
		.name = "verbose", .short_name = 'v', .type = TP_OPT_FLAG, .offset = (off),        \
		.help = "debug output"                                                             \
	}
#define TP_OPT_HELP_ROW(off)                                                                       \
	{                                                                                          \
		.name = "help", .short_name = 'h', .type = TP_OPT_FLAG, .offset = (off),           \
		.flags = TP_OPT_STOP, .help = "this help"                                          \
	}

/* The row named name (long name), or NULL. */
const struct tp_option *tp_opts_find(const struct tp_option *opts, size_t n, const char *name);

/*
 * Parses value into row o's field of obj. value is NULL for a flag given
 * without one. Returns 0 or -EINVAL; err (may be NULL) gets the reason.
 */
int tp_opts_set(const struct tp_option *o, void *obj, const char *value, char *err, size_t errlen);

/*
 * The same by name: -ENOENT and "unknown setting \"NAME\"" when no row
 * has that name.
 */
int tp_opts_set_name(const struct tp_option *opts, size_t n, void *obj, const char *name,
		     const char *value, char *err, size_t errlen);

/* Applies every row's default (rows with def set); obj should be zeroed first. */
void tp_opts_defaults(const struct tp_option *opts, size_t n, void *obj);

/*
 * Reads a config file of "name = value" lines ('#' comments, blank lines).
 * Unknown names, bad values and unreadable files are errors; err gets
 * "cannot read config file PATH: reason" or "PATH:LINE: reason". Returns 0
 * or -errno (-EINVAL for content errors). Rows with TP_OPT_NOFILE are not
 * keys; TP_OPT_STR rows cannot be read from a file.
 */
int tp_opts_load_file(const struct tp_option *opts, size_t n, void *obj, const char *path,
		      char *err, size_t errlen);

/* tp_opts_getopt flags. */
#define TP_OPTS_QUIET 0x01u /* getopt prints nothing (opterr = 0): the caller reports */

/* What tp_opts_getopt stopped on. */
enum tp_opts_status {
	TP_OPTS_DONE = 0,	/* all options parsed; res->next is the first operand */
	TP_OPTS_STOPPED = 1,	/* a TP_OPT_STOP row (res->opt), e.g. --help */
	TP_OPTS_UNKNOWN = -1,	/* unknown option (getopt's '?'; also a missing value
				   without TP_OPTS_QUIET) */
	TP_OPTS_MISSING = -2,	/* an option without its value (TP_OPTS_QUIET only) */
	TP_OPTS_BAD_VALUE = -3, /* a value refused: res->opt, res->value, res->err */
	TP_OPTS_TOO_MANY = -4,	/* the table has more rows than TP_OPTS_MAX */
};

#define TP_OPTS_MAX 96 /* rows a table may have for tp_opts_getopt */

struct tp_opts_result {
	int next;		     /* optind when parsing ended */
	const struct tp_option *opt; /* the row of a stop or a bad value, else NULL */
	const char *value;	     /* its value (NULL: none) */
	int ch;			     /* getopt's return of an error ('?' or ':') */
	int optopt;		     /* getopt's optopt of an error */
	char err[512];		     /* a bad value: why ("" if the parser reported it) */
};

/*
 * Parses argv (argv[0] is the program or command name) with getopt_long:
 * the long options are the rows' names, the short ones their short_name;
 * each value goes through tp_opts_set into obj. GNU order: options and
 * operands may mix, operands end up from res->next. Returns an enum
 * tp_opts_status.
 */
int tp_opts_getopt(const struct tp_option *opts, size_t n, void *obj, int argc, char **argv,
		   unsigned flags, struct tp_opts_result *res);

/* tp_opts_help flags. */
#define TP_OPTS_HELP_DEFAULTS 0x01u /* append " (default DEF)" when def is not empty */

/*
 * Prints the option list: per row "  " + "-s, --name ARG" (or "--name ARG",
 * "--name[=ARG]" for an optional value) padded to width + " " + help, and
 * TP_OPT_TEXT rows verbatim. Rows with TP_OPT_HIDDEN are skipped.
 */
void tp_opts_help(const struct tp_option *opts, size_t n, FILE *out, int width, unsigned flags);

/*
 * Prints "name = value" for each row of obj in config-file form, in table
 * order, skipping TP_OPT_TEXT, TP_OPT_NOFILE and TP_OPT_NOPRINT rows.
 */
void tp_opts_print(const struct tp_option *opts, size_t n, const void *obj, FILE *out);

/* Prints one row's value of obj in config-file form (no name, no newline). */
void tp_opts_print_value(FILE *out, const void *obj, const struct tp_option *o);

#endif
