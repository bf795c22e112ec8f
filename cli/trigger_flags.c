/*
 * trigger_flags.c - the flags of `traceprof trigger create` from the spec
 * table (include/traceprof/trigger_spec.h): one traceprof/options.h row
 * per field that has a flag, so the table stays the one source of their
 * names, arguments, help, bounds and defaults. A value is kept as the text
 * given; the spec's validator reads it when the manifest is built
 * (trigger_manifest_from_values), so a bad value is reported with its
 * field, as in a manifest file.
 */
#include <stddef.h>
#include <stdio.h>

#include "trigger.h"

/* A spec flag's value: kept as given, into trig_opts.spec[i]. */
static int set_spec_value(void *obj, const struct tp_option *o, const char *v, char *err,
			  size_t errlen)
{
	(void)err;
	(void)errlen;
	*TP_OPT_PTR(obj, o, const char *) = v ? v : "true"; /* a boolean's flag takes no value */
	return 0;
}

/* "help, 1-100 (default 99)": the field's help, bounds and default. */
static void spec_help(const struct trigger_spec_field *sf, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "%s", sf->help);
	char d[32];

	if (n < len && sf->type == TRIGGER_SPEC_UINT)
		n += (size_t)snprintf(buf + n, len - n, ", %lld-%lld", (long long)sf->min,
				      (long long)sf->max);
	if (n < len && sf->type == TRIGGER_SPEC_DURATION && sf->max) {
		manifest_format_duration((uint64_t)sf->max * 1000, d, sizeof(d));
		n += (size_t)snprintf(buf + n, len - n, ", at most %s", d);
	}
	if (n < len && sf->type == TRIGGER_SPEC_DURATION_US) {
		char lo[32];

		manifest_format_duration((uint64_t)sf->min, lo, sizeof(lo));
		manifest_format_duration((uint64_t)sf->max, d, sizeof(d));
		n += (size_t)snprintf(buf + n, len - n, ", %s-%s", lo, d);
	}
	if (n < len && sf->default_text && sf->type != TRIGGER_SPEC_BOOL)
		snprintf(buf + n, len - n, " (default %s)", sf->default_text);
}

size_t trig_spec_options(struct tp_option *rows, size_t max)
{
	static char help[TRIGGER_SPEC_N_FIELDS][256];
	size_t n = 0;

	for (size_t i = 0; i < trigger_spec_n_fields && n < max; i++) {
		const struct trigger_spec_field *sf = &trigger_spec_fields[i];

		if (!sf->flag)
			continue;
		spec_help(sf, help[i], sizeof(help[i]));
		rows[n++] = (struct tp_option){
		    .name = sf->flag,
		    .type = TP_OPT_CUSTOM,
		    .offset = offsetof(struct trig_opts, spec) + i * sizeof(const char *),
		    .min = (double)sf->min,
		    .max = (double)sf->max,
		    .arg = sf->flag_arg,
		    .help = help[i],
		    .flags = sf->type == TRIGGER_SPEC_BOOL ? TP_OPT_NOARG : 0,
		    .parse = set_spec_value,
		    .data = sf,
		};
	}
	return n;
}
