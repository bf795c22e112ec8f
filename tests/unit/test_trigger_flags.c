/*
 * test_trigger_flags.c - the command line of `traceprof trigger`: the rows
 * made from the spec table (trig_spec_options, cli/trigger_flags.c) have
 * the table's names, arguments, help, bounds and defaults, keep a value's
 * text as given for the validator, and the help of the command is
 * byte for byte tests/unit/trigger_help.golden.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cli.h"
#include "trigger.h"

/* One row per field with a flag, in table order, with its help. */
static void rows_follow_table(void)
{
	struct tp_option rows[TRIGGER_SPEC_N_FIELDS];
	size_t n = trig_spec_options(rows, TRIGGER_SPEC_N_FIELDS), r = 0;

	for (size_t i = 0; i < trigger_spec_n_fields; i++) {
		const struct trigger_spec_field *sf = &trigger_spec_fields[i];
		char want[128];

		if (!sf->flag)
			continue;
		CHECK(r < n, "no row for --%s", sf->flag);
		if (r >= n)
			return;
		CHECK(!strcmp(rows[r].name, sf->flag) &&
			  (rows[r].arg && sf->flag_arg ? !strcmp(rows[r].arg, sf->flag_arg)
						       : rows[r].arg == sf->flag_arg),
		      "row %zu is --%s %s, want --%s %s", r, rows[r].name,
		      rows[r].arg ? rows[r].arg : "", sf->flag, sf->flag_arg ? sf->flag_arg : "");
		/* a boolean's flag takes no value, the others one */
		CHECK(!!(rows[r].flags & TP_OPT_NOARG) == (sf->type == TRIGGER_SPEC_BOOL),
		      "--%s: takes a value: %d", sf->flag, !(rows[r].flags & TP_OPT_NOARG));
		CHECK(rows[r].type == TP_OPT_CUSTOM && rows[r].data == sf, "--%s: not the field's",
		      sf->flag);
		CHECK(!strncmp(rows[r].help, sf->help, strlen(sf->help)), "--%s help: %s", sf->flag,
		      rows[r].help);
		if (sf->type == TRIGGER_SPEC_UINT) {
			snprintf(want, sizeof(want), ", %lld-%lld", (long long)sf->min,
				 (long long)sf->max);
			CHECK(strstr(rows[r].help, want), "--%s help lacks \"%s\": %s", sf->flag,
			      want, rows[r].help);
		}
		if (sf->type == TRIGGER_SPEC_DURATION && sf->max)
			CHECK(strstr(rows[r].help, ", at most "), "--%s help lacks its bound: %s",
			      sf->flag, rows[r].help);
		if (sf->type == TRIGGER_SPEC_DURATION_US) {
			char lo[32], hi[32];

			manifest_format_duration((uint64_t)sf->min, lo, sizeof(lo));
			manifest_format_duration((uint64_t)sf->max, hi, sizeof(hi));
			snprintf(want, sizeof(want), ", %s-%s", lo, hi);
			CHECK(strstr(rows[r].help, want), "--%s help lacks \"%s\": %s", sf->flag,
			      want, rows[r].help);
		}
		if (sf->default_text && sf->type != TRIGGER_SPEC_BOOL) {
			snprintf(want, sizeof(want), " (default %s)", sf->default_text);
			CHECK(strstr(rows[r].help, want), "--%s help lacks \"%s\": %s", sf->flag,
			      want, rows[r].help);
		}
		r++;
	}
	CHECK(r == n, "%zu rows for %zu flags", n, r);
	CHECK(trig_spec_options(rows, 2) == 2, "more rows than asked for");
}

/* Values are kept as given (the validator judges them), into spec[i]. */
static void values_kept(void)
{
	struct tp_option rows[TRIGGER_SPEC_N_FIELDS];
	size_t n = trig_spec_options(rows, TRIGGER_SPEC_N_FIELDS);
	const char *args[] = {"create", "--service", "pay", "--frequency=500",
			      "x",	"--route",   "",    NULL};
	struct trig_opts o = {.sub = "create"};
	struct tp_opts_result res;
	int rc = tp_opts_getopt(rows, n, &o, 7, (char **)args, TP_OPTS_QUIET, &res);
	size_t svc = (size_t)(trigger_spec_flag("service") - trigger_spec_fields);
	size_t hz = (size_t)(trigger_spec_flag("frequency") - trigger_spec_fields);
	size_t route = (size_t)(trigger_spec_flag("route") - trigger_spec_fields);

	CHECK(rc == TP_OPTS_DONE && res.next == 6 && !strcmp(args[6], "x"), "rc %d next %d", rc,
	      res.next);
	CHECK(o.spec[svc] && !strcmp(o.spec[svc], "pay"), "--service: %s", o.spec[svc]);
	CHECK(o.spec[hz] && !strcmp(o.spec[hz], "500"), "--frequency: %s", o.spec[hz]);
	CHECK(o.spec[route] && !strcmp(o.spec[route], ""), "--route: %s", o.spec[route]);
	for (size_t i = 0; i < trigger_spec_n_fields; i++)
		if (i != svc && i != hz && i != route)
			CHECK(!o.spec[i], "%s set to %s", trigger_spec_fields[i].path, o.spec[i]);
}

/* --offcpu takes no value and reads as "true"; --offcpu-threshold keeps its text. */
static void offcpu_flags(void)
{
	struct tp_option rows[TRIGGER_SPEC_N_FIELDS];
	size_t n = trig_spec_options(rows, TRIGGER_SPEC_N_FIELDS);
	const char *args[] = {"create", "--offcpu", "--offcpu-threshold", "250us", "x", NULL};
	struct trig_opts o = {.sub = "create"};
	struct tp_opts_result res;
	int rc = tp_opts_getopt(rows, n, &o, 5, (char **)args, TP_OPTS_QUIET, &res);
	size_t on = (size_t)(trigger_spec_flag("offcpu") - trigger_spec_fields);
	size_t th = (size_t)(trigger_spec_flag("offcpu-threshold") - trigger_spec_fields);

	CHECK(rc == TP_OPTS_DONE && res.next == 4, "rc %d next %d", rc, res.next);
	CHECK(o.spec[on] && !strcmp(o.spec[on], "true"), "--offcpu: %s", o.spec[on]);
	CHECK(o.spec[th] && !strcmp(o.spec[th], "250us"), "--offcpu-threshold: %s", o.spec[th]);
}

static void help_golden(void)
{
	char *got = NULL, want[16384];
	size_t got_len = 0, want_len;
	FILE *f = open_memstream(&got, &got_len), *g = fopen(HELP_GOLDEN, "r");

	CHECK(f && g, "cannot open %s", HELP_GOLDEN);
	if (!f || !g)
		return;
	help_trigger(f);
	fclose(f);
	want_len = fread(want, 1, sizeof(want), g);
	fclose(g);
	CHECK(got_len == want_len && !memcmp(got, want, want_len),
	      "traceprof trigger --help differs from %s:\n%s", HELP_GOLDEN, got);
	free(got);
}

int main(void)
{
	rows_follow_table();
	values_kept();
	offcpu_flags();
	help_golden();
	return check_done();
}
