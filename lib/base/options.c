/*
 * options.c - command lines and config files from one table (options.h).
 *
 * Every reader goes through tp_opts_set(), so a flag and a config file key
 * of the same row take exactly the same values; --help and the printed
 * settings walk the same rows.
 */
#include "traceprof/options.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const struct tp_option *tp_opts_find(const struct tp_option *opts, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (opts[i].name && opts[i].type != TP_OPT_TEXT && strcmp(opts[i].name, name) == 0)
			return &opts[i];
	return NULL;
}

/* A number with at most one suffix character. */
static int parse_number(const char *v, double *out, char *suffix)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if (end == v || errno || d != d)
		return -EINVAL;
	*suffix = *end;
	if (*end && end[1])
		return -EINVAL;
	*out = d;
	return 0;
}

/* "a, b or c" of a NULL-terminated word list. */
static void word_list(const char *const *words, char *out, size_t len)
{
	size_t o = 0, n = 0;

	while (words[n])
		n++;
	out[0] = '\0';
	for (size_t i = 0; i < n && o < len; i++)
		o += (size_t)snprintf(out + o, len - o, "%s%s",
				      i == 0	   ? ""
				      : i + 1 == n ? " or "
						   : ", ",
				      words[i]);
}

static int set_words(const struct tp_option *o, void *obj, const char *value, char *err,
		     size_t errlen)
{
	char list[256];

	for (int i = 0; o->words[i]; i++)
		if (strcmp(value, o->words[i]) == 0) {
			*TP_OPT_PTR(obj, o, int) = i;
			return 0;
		}
	if (o->bad) {
		snprintf(err, errlen, o->bad, value);
		return -EINVAL;
	}
	word_list(o->words, list, sizeof(list));
	snprintf(err, errlen, "%s: want %s, not \"%s\"", o->name, list, value);
	return -EINVAL;
}

static int set_bool(const struct tp_option *o, void *obj, const char *value, char *err,
		    size_t errlen)
{
	if (!value || strcmp(value, "true") == 0) {
		*TP_OPT_PTR(obj, o, bool) = true;
		return 0;
	}
	if (strcmp(value, "false") == 0) {
		*TP_OPT_PTR(obj, o, bool) = false;
		return 0;
	}
	if (o->bad)
		snprintf(err, errlen, o->bad, value);
	else
		snprintf(err, errlen, "%s: want true or false, not \"%s\"", o->name, value);
	return -EINVAL;
}

/* The multiplier of a size (K, M, G) or duration (s, m, h) suffix; 0: bad. */
static double unit(enum tp_opt_type type, char suffix)
{
	if (type == TP_OPT_BYTES) {
		switch (toupper((unsigned char)suffix)) {
		case 0:
			return 1;
		case 'K':
			return 1024;
		case 'M':
			return 1024.0 * 1024;
		case 'G':
			return 1024.0 * 1024 * 1024;
		}
		return 0;
	}
	switch (suffix) {
	case 0:
	case 's':
		return 1;
	case 'm':
		return 60;
	case 'h':
		return 3600;
	}
	return 0;
}

/* The numeric types; 0, -EINVAL (not a number) or -ERANGE (out of range). */
static int set_number(const struct tp_option *o, void *obj, const char *value)
{
	double d, mult = 1;
	char suffix;

	if (parse_number(value, &d, &suffix))
		return -EINVAL;
	if (o->type == TP_OPT_INT || o->type == TP_OPT_COUNT) {
		if (suffix || d != (double)(long long)d)
			return -EINVAL;
	} else {
		mult = unit(o->type, suffix);
		if (d < 0 || mult == 0)
			return -EINVAL;
		d *= mult;
	}
	if (o->type == TP_OPT_SECONDS_F) {
		if (d > o->max)
			return -ERANGE;
		*TP_OPT_PTR(obj, o, double) = d;
		return 0;
	}
	if ((o->type == TP_OPT_SECONDS && d != (double)(int)d) || d < o->min || d > o->max)
		return -ERANGE;
	if (o->type == TP_OPT_INT || o->type == TP_OPT_SECONDS)
		*TP_OPT_PTR(obj, o, int) = (int)d;
	else
		*TP_OPT_PTR(obj, o, size_t) = (size_t)d;
	return 0;
}

static int set_numeric(const struct tp_option *o, void *obj, const char *value, char *err,
		       size_t errlen)
{
	int rc;

	/* a size whose default is "auto" also takes "auto", stored as 0 */
	if (o->type == TP_OPT_BYTES && !strcmp(value, "auto") && o->def &&
	    !strcmp(o->def, "auto")) {
		*TP_OPT_PTR(obj, o, size_t) = 0;
		return 0;
	}
	rc = set_number(o, obj, value);
	if (rc == 0)
		return 0;
	if (o->bad)
		snprintf(err, errlen, o->bad, value);
	else if (rc == -ERANGE)
		snprintf(err, errlen, "%s: %s is out of range", o->name, value);
	else
		snprintf(err, errlen, "%s: \"%s\" is not a valid %s", o->name, value,
			 o->type == TP_OPT_BYTES ? "size (e.g. 64M)"
			 : (o->type == TP_OPT_SECONDS || o->type == TP_OPT_SECONDS_F)
			     ? "duration (e.g. 15s, 2m)"
			     : "integer");
	return -EINVAL;
}

int tp_opts_set(const struct tp_option *o, void *obj, const char *value, char *err, size_t errlen)
{
	char dummy[8];

	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (o->type == TP_OPT_CUSTOM)
		return o->parse ? o->parse(obj, o, value, err, errlen) : -EINVAL;
	if (o->type == TP_OPT_FLAG) {
		*TP_OPT_PTR(obj, o, bool) = true;
		return 0;
	}
	if (o->type == TP_OPT_BOOL)
		return set_bool(o, obj, value, err, errlen);
	if (!value || o->type == TP_OPT_TEXT) {
		snprintf(err, errlen, "%s needs a value", o->name ? o->name : "?");
		return -EINVAL;
	}
	switch (o->type) {
	case TP_OPT_STRBUF:
		if (strlen(value) >= o->size) {
			snprintf(err, errlen, "%s: value longer than %zu bytes", o->name,
				 o->size - 1);
			return -EINVAL;
		}
		strcpy(TP_OPT_PTR(obj, o, char), value);
		return 0;
	case TP_OPT_STR:
		*TP_OPT_PTR(obj, o, const char *) = value;
		return 0;
	case TP_OPT_ENUM:
		return set_words(o, obj, value, err, errlen);
	default:
		return set_numeric(o, obj, value, err, errlen);
	}
}

int tp_opts_set_name(const struct tp_option *opts, size_t n, void *obj, const char *name,
		     const char *value, char *err, size_t errlen)
{
	const struct tp_option *o = tp_opts_find(opts, n, name);

	if (!o) {
		if (err && errlen)
			snprintf(err, errlen, "unknown setting \"%s\"", name);
		return -ENOENT;
	}
	return tp_opts_set(o, obj, value, err, errlen);
}

void tp_opts_defaults(const struct tp_option *opts, size_t n, void *obj)
{
	for (size_t i = 0; i < n; i++) {
		int rc;

		if (!opts[i].def || opts[i].type == TP_OPT_TEXT)
			continue;
		rc = tp_opts_set(&opts[i], obj, opts[i].def, NULL, 0);
		(void)rc; /* the defaults are valid by construction (tests check) */
	}
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* One line of a config file (not a comment): 0 or -EINVAL with err set. */
static int load_line(const struct tp_option *opts, size_t n, void *obj, char *p, char *err,
		     size_t errlen)
{
	const struct tp_option *o;
	char *eq = strchr(p, '='), *name;

	if (!eq) {
		snprintf(err, errlen, "want \"name = value\"");
		return -EINVAL;
	}
	*eq = '\0';
	name = trim(p);
	o = tp_opts_find(opts, n, name);
	if (!o || (o->flags & TP_OPT_NOFILE) || o->type == TP_OPT_STR) {
		snprintf(err, errlen, "unknown setting \"%s\"", name);
		return -EINVAL;
	}
	return tp_opts_set(o, obj, trim(eq + 1), err, errlen) ? -EINVAL : 0;
}

int tp_opts_load_file(const struct tp_option *opts, size_t n, void *obj, const char *path,
		      char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[8192], why[256], dummy[8];
	int lineno = 0, rc = 0;

	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "cannot read config file %s: %s", path, strerror(errno));
		return rc;
	}
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		char *p;

		lineno++;
		if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
			snprintf(err, errlen, "%s:%d: line too long", path, lineno);
			rc = -EINVAL;
			break;
		}
		p = trim(line);
		if (!*p || *p == '#')
			continue;
		if (load_line(opts, n, obj, p, why, sizeof(why))) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
			rc = -EINVAL;
			break;
		}
	}
	fclose(f);
	return rc;
}

/* getopt_long's has_arg of a row. */
static int has_arg(const struct tp_option *o)
{
	if (o->type == TP_OPT_FLAG || (o->flags & TP_OPT_NOARG))
		return no_argument;
	if (o->type == TP_OPT_BOOL || (o->flags & TP_OPT_OPTARG))
		return optional_argument;
	return required_argument;
}

/* The row of getopt_long's return ch (256 + row for long-only options). */
static const struct tp_option *row_of(const struct tp_option *opts, size_t n, int ch)
{
	if (ch >= 256 && (size_t)(ch - 256) < n)
		return &opts[ch - 256];
	for (size_t i = 0; i < n; i++)
		if (opts[i].short_name == ch && opts[i].type != TP_OPT_TEXT)
			return &opts[i];
	return NULL;
}

/* The long options and the option string of a table. */
static void build_getopt(const struct tp_option *opts, size_t n, unsigned flags,
			 struct option *longopts, char *shortopts)
{
	size_t l = 0, s = 0;

	if (flags & TP_OPTS_QUIET)
		shortopts[s++] = ':';
	for (size_t i = 0; i < n; i++) {
		const struct tp_option *o = &opts[i];
		int arg = has_arg(o);

		if (o->type == TP_OPT_TEXT)
			continue;
		if (o->name) /* a row without one is a short option only */
			longopts[l++] = (struct option){
			    o->name, arg, NULL, o->short_name ? o->short_name : 256 + (int)i};
		if (o->short_name) {
			shortopts[s++] = (char)o->short_name;
			if (arg != no_argument)
				shortopts[s++] = ':';
			if (arg == optional_argument)
				shortopts[s++] = ':';
		}
	}
	longopts[l] = (struct option){NULL, 0, NULL, 0};
	shortopts[s] = '\0';
}

int tp_opts_getopt(const struct tp_option *opts, size_t n, void *obj, int argc, char **argv,
		   unsigned flags, struct tp_opts_result *res)
{
	struct option longopts[TP_OPTS_MAX + 1];
	char shortopts[3 * TP_OPTS_MAX + 2];
	int ch;

	memset(res, 0, sizeof(*res));
	if (n > TP_OPTS_MAX)
		return TP_OPTS_TOO_MANY;
	build_getopt(opts, n, flags, longopts, shortopts);
	opterr = !(flags & TP_OPTS_QUIET);
	optind = 0; /* start over (GNU getopt), also after an earlier parse */
	while ((ch = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		const struct tp_option *o = row_of(opts, n, ch);

		res->next = optind;
		if (!o || ch == '?' || ch == ':') {
			res->ch = ch;
			res->optopt = optopt;
			return ch == ':' ? TP_OPTS_MISSING : TP_OPTS_UNKNOWN;
		}
		res->opt = o;
		res->value = optarg;
		if (tp_opts_set(o, obj, optarg, res->err, sizeof(res->err)))
			return TP_OPTS_BAD_VALUE;
		if (o->flags & TP_OPT_STOP)
			return TP_OPTS_STOPPED;
	}
	res->next = optind;
	res->opt = NULL;
	res->value = NULL;
	return TP_OPTS_DONE;
}

/* "-s, --name ARG", "--name ARG" or "--name[=ARG]". */
static void left_column(const struct tp_option *o, char *out, size_t len)
{
	int n = 0;

	if (o->short_name && !o->name) {
		if (o->arg)
			snprintf(out, len, "-%c %s", o->short_name, o->arg);
		else
			snprintf(out, len, "-%c", o->short_name);
		return;
	}
	if (o->short_name)
		n = snprintf(out, len, "-%c, ", o->short_name);
	if (n < 0 || (size_t)n >= len)
		return;
	if (!o->arg)
		snprintf(out + n, len - (size_t)n, "--%s", o->name);
	else if (has_arg(o) == optional_argument)
		snprintf(out + n, len - (size_t)n, "--%s[=%s]", o->name, o->arg);
	else
		snprintf(out + n, len - (size_t)n, "--%s %s", o->name, o->arg);
}

void tp_opts_help(const struct tp_option *opts, size_t n, FILE *out, int width, unsigned flags)
{
	for (size_t i = 0; i < n; i++) {
		const struct tp_option *o = &opts[i];
		char left[128];

		if (o->flags & TP_OPT_HIDDEN)
			continue;
		if (o->type == TP_OPT_TEXT) {
			fputs(o->help ? o->help : "", out);
			continue;
		}
		left_column(o, left, sizeof(left));
		fprintf(out, "  %-*s ", width, left);
		for (const char *h = o->help ? o->help : ""; *h; h++) {
			fputc(*h, out);
			if (*h == '\n')
				fprintf(out, "%*s", width + 3, "");
		}
		if ((flags & TP_OPTS_HELP_DEFAULTS) && o->def && o->def[0])
			fprintf(out, " (default %s)", o->def);
		fputc('\n', out);
	}
}

void tp_opts_print_value(FILE *out, const void *obj, const struct tp_option *o)
{
	const char *p = (const char *)obj + o->offset;

	if (o->print) {
		o->print(out, obj, o);
		return;
	}
	switch (o->type) {
	case TP_OPT_INT:
		fprintf(out, "%d", *(const int *)(const void *)p);
		break;
	case TP_OPT_SECONDS:
		fprintf(out, "%ds", *(const int *)(const void *)p);
		break;
	case TP_OPT_SECONDS_F:
		fprintf(out, "%gs", *(const double *)(const void *)p);
		break;
	case TP_OPT_BYTES:
		if (*(const size_t *)(const void *)p == 0 && o->def && !strcmp(o->def, "auto")) {
			fputs("auto", out);
			break;
		}
		/* fall through */
	case TP_OPT_COUNT:
		fprintf(out, "%zu", *(const size_t *)(const void *)p);
		break;
	case TP_OPT_STRBUF:
		fputs(p, out);
		break;
	case TP_OPT_STR: {
		const char *s = *(const char *const *)(const void *)p;

		fputs(s ? s : "", out);
		break;
	}
	case TP_OPT_ENUM: {
		int v = *(const int *)(const void *)p, nw = 0;

		while (o->words[nw])
			nw++;
		fputs(v >= 0 && v < nw ? o->words[v] : "?", out);
		break;
	}
	case TP_OPT_FLAG:
	case TP_OPT_BOOL:
		fputs(*(const bool *)(const void *)p ? "true" : "false", out);
		break;
	default:
		break;
	}
}

void tp_opts_print(const struct tp_option *opts, size_t n, const void *obj, FILE *out)
{
	for (size_t i = 0; i < n; i++) {
		const struct tp_option *o = &opts[i];

		if (o->type == TP_OPT_TEXT || (o->flags & (TP_OPT_NOFILE | TP_OPT_NOPRINT)))
			continue;
		fprintf(out, "%s = ", o->name);
		tp_opts_print_value(out, obj, o);
		fputc('\n', out);
	}
}
