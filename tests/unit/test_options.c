/*
 * test_options.c - the shared options machinery (traceprof/options.h) on a
 * table of its own: typed values and bounds, defaults, getopt_long from the
 * table (long, short, short-only, optional values, stop rows, errors), the
 * config file reader, --help rendering and the printed settings.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "traceprof/options.h"

struct t {
	int n;
	size_t bytes, count;
	int secs;
	double secs_f;
	char name[8];
	const char *path;
	int level;
	bool flag, on, help;
	int ncustom;
};

static const char *const levels[] = {"low", "mid", "high", NULL};

static int parse_custom(void *obj, const struct tp_option *o, const char *v, char *err,
			size_t errlen)
{
	(void)o;
	if (strcmp(v, "x") != 0) {
		snprintf(err, errlen, "want x");
		return -EINVAL;
	}
	((struct t *)obj)->ncustom++;
	return 0;
}

#define F(m) offsetof(struct t, m)
static const struct tp_option opts[] = {
    {.type = TP_OPT_TEXT, .help = "section:\n"},
    {.name = "n",
     .type = TP_OPT_INT,
     .offset = F(n),
     .min = 1,
     .max = 10,
     .def = "3",
     .help = "a number"},
    {.name = "bytes",
     .type = TP_OPT_BYTES,
     .offset = F(bytes),
     .min = 0,
     .max = 1 << 30,
     .def = "auto",
     .help = "a size"},
    {.name = "count",
     .type = TP_OPT_COUNT,
     .offset = F(count),
     .max = 100,
     .def = "7",
     .help = "a count"},
    {.name = "secs",
     .type = TP_OPT_SECONDS,
     .offset = F(secs),
     .min = 1,
     .max = 7200,
     .def = "1m",
     .help = "a duration\non two lines"},
    {.name = "secs-f", .type = TP_OPT_SECONDS_F, .offset = F(secs_f), .max = 100, .def = "0"},
    {.name = "name", .type = TP_OPT_STRBUF, TP_OPT_STRFIELD(struct t, name), .def = "abc"},
    {.name = "path",
     .short_name = 'p',
     .type = TP_OPT_STR,
     .offset = F(path),
     .arg = "FILE",
     .flags = TP_OPT_NOFILE,
     .help = "a path"},
    {.name = "level", .type = TP_OPT_ENUM, .offset = F(level), .def = "mid", .words = levels},
    {.name = "flag", .type = TP_OPT_FLAG, .offset = F(flag), .flags = TP_OPT_NOPRINT},
    {.name = "on", .type = TP_OPT_BOOL, .offset = F(on), .arg = "BOOL", .bad = "on='%s'?"},
    {.short_name = 'c',
     .type = TP_OPT_CUSTOM,
     .arg = "X",
     .help = "repeatable",
     .parse = parse_custom,
     .flags = TP_OPT_NOPRINT},
    {.name = "help",
     .short_name = 'h',
     .type = TP_OPT_FLAG,
     .offset = F(help),
     .flags = TP_OPT_STOP | TP_OPT_NOPRINT,
     .help = "this help"},
};
#define N TP_OPTS_COUNT(opts)

static int run(struct t *t, struct tp_opts_result *res, int argc, const char *const *args)
{
	static char *argv[16];

	for (int i = 0; i < argc; i++)
		argv[i] = (char *)args[i];
	argv[argc] = NULL;
	return tp_opts_getopt(opts, N, t, argc, argv, TP_OPTS_QUIET, res);
}

static void values(void)
{
	struct t t = {0};
	char err[256];

	tp_opts_defaults(opts, N, &t);
	CHECK(t.n == 3 && t.bytes == 0 && t.count == 7 && t.secs == 60 && !strcmp(t.name, "abc") &&
		  t.level == 1,
	      "defaults");
	CHECK(tp_opts_set_name(opts, N, &t, "n", "11", err, sizeof(err)) == -EINVAL &&
		  !strcmp(err, "n: 11 is out of range"),
	      "int range: %s", err);
	CHECK(tp_opts_set_name(opts, N, &t, "n", "2x", err, sizeof(err)) == -EINVAL &&
		  !strcmp(err, "n: \"2x\" is not a valid integer"),
	      "int form: %s", err);
	CHECK(tp_opts_set_name(opts, N, &t, "bytes", "2k", err, sizeof(err)) == 0 &&
		  t.bytes == 2048,
	      "bytes 2k");
	CHECK(tp_opts_set_name(opts, N, &t, "bytes", "2Q", err, sizeof(err)) == -EINVAL &&
		  strstr(err, "size (e.g. 64M)"),
	      "bytes suffix: %s", err);
	CHECK(tp_opts_set_name(opts, N, &t, "secs", "2h", err, sizeof(err)) == 0 && t.secs == 7200,
	      "secs 2h");
	CHECK(tp_opts_set_name(opts, N, &t, "secs", "1.5s", err, sizeof(err)) == -EINVAL &&
		  strstr(err, "out of range"),
	      "secs fraction: %s", err);
	CHECK(tp_opts_set_name(opts, N, &t, "secs-f", "0.5m", err, sizeof(err)) == 0 &&
		  t.secs_f == 30,
	      "seconds as double");
	CHECK(tp_opts_set_name(opts, N, &t, "name", "12345678", err, sizeof(err)) == -EINVAL &&
		  strstr(err, "longer than 7 bytes"),
	      "strbuf bound: %s", err);
	CHECK(tp_opts_set_name(opts, N, &t, "level", "max", err, sizeof(err)) == -EINVAL &&
		  !strcmp(err, "level: want low, mid or high, not \"max\""),
	      "enum: %s", err);
	CHECK(tp_opts_set_name(opts, N, &t, "nope", "1", err, sizeof(err)) == -ENOENT &&
		  !strcmp(err, "unknown setting \"nope\""),
	      "unknown: %s", err);
}

static void command_line(void)
{
	struct tp_opts_result res;
	struct t t = {0};

	CHECK(run(&t, &res, 9,
		  (const char *const[]){"prog", "--n=4", "-p", "/x", "op", "--on", "-c", "x",
					"--secs=2m"}) == TP_OPTS_DONE &&
		  t.n == 4 && !strcmp(t.path, "/x") && t.on && t.ncustom == 1 && t.secs == 120,
	      "long, short, short-only, optional value");
	CHECK(res.next == 8, "operand moved last: next %d", res.next);
	CHECK(run(&t, &res, 2, (const char *const[]){"prog", "--on=false"}) == TP_OPTS_DONE &&
		  !t.on,
	      "bool false");
	CHECK(run(&t, &res, 2, (const char *const[]){"prog", "--on=maybe"}) == TP_OPTS_BAD_VALUE &&
		  !strcmp(res.err, "on='maybe'?") && !strcmp(res.opt->name, "on"),
	      "bad format: %s", res.err);
	CHECK(run(&t, &res, 3, (const char *const[]){"prog", "-h", "--bogus"}) == TP_OPTS_STOPPED &&
		  res.opt->short_name == 'h',
	      "stop row");
	CHECK(run(&t, &res, 2, (const char *const[]){"prog", "--bogus"}) == TP_OPTS_UNKNOWN &&
		  res.ch == '?',
	      "unknown option");
	CHECK(run(&t, &res, 2, (const char *const[]){"prog", "-p"}) == TP_OPTS_MISSING &&
		  res.optopt == 'p',
	      "missing value");
	CHECK(run(&t, &res, 3, (const char *const[]){"prog", "-c", "y"}) == TP_OPTS_BAD_VALUE &&
		  !strcmp(res.err, "want x"),
	      "custom error");
}

static void file(void)
{
	char path[] = "/tmp/tp-options-XXXXXX", err[512], want[600];
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	struct t t = {0};

	fputs("# comment\n\n n = 5 \nlevel=high\npath = /x\n", f);
	fclose(f);
	CHECK(tp_opts_load_file(opts, N, &t, path, err, sizeof(err)) == -EINVAL, "NOFILE row");
	snprintf(want, sizeof(want), "%s:5: unknown setting \"path\"", path);
	CHECK(!strcmp(err, want) && t.n == 5 && t.level == 2, "line number: %s", err);
	unlink(path);
	CHECK(tp_opts_load_file(opts, N, &t, path, err, sizeof(err)) == -ENOENT &&
		  strstr(err, "cannot read config file"),
	      "missing file: %s", err);
}

static void output(void)
{
	char buf[2048];
	FILE *f = fmemopen(buf, sizeof(buf), "w");
	struct t t = {0};

	tp_opts_help(opts, N, f, 12, TP_OPTS_HELP_DEFAULTS);
	fclose(f);
	CHECK(strstr(buf, "section:\n  --n          a number (default 3)\n"), "help row: %s", buf);
	CHECK(strstr(buf, "  --secs       a duration\n               on two lines (default 1m)\n"),
	      "continuation: %s", buf);
	CHECK(strstr(buf, "  -p, --path FILE a path\n"), "short and arg: %s", buf);
	CHECK(strstr(buf, "  --on[=BOOL]  \n"), "optional value: %s", buf);
	CHECK(strstr(buf, "  -c X         repeatable\n"), "short only: %s", buf);
	tp_opts_defaults(opts, N, &t);
	f = fmemopen(buf, sizeof(buf), "w");
	tp_opts_print(opts, N, &t, f);
	fclose(f);
	CHECK(!strcmp(buf, "n = 3\nbytes = auto\ncount = 7\nsecs = 60s\nsecs-f = 0s\nname = abc\n"
			   "level = mid\non = false\n"),
	      "printed: %s", buf);
}

int main(void)
{
	values();
	command_line();
	file();
	output();
	return check_done();
}
