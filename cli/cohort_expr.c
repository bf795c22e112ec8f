/*
 * cohort_expr.c - a hand-written tokenizer and recursive-descent parser for
 * cohort expressions (grammar in cohort_expr.h), emitting the cohort spec
 * JSON of docs/cohorts.md.
 *
 * Why only "and": a cohort spec ANDs its keys and ORs the values of one
 * key, so "status in (4xx, 5xx)" has a spec but "duration > 1s or status =
 * 5xx" has none. Rather than accept "or" sometimes, the grammar has
 * "in (...)" for alternatives of one key and refuses "or" with that advice.
 *
 * Bounds: min_duration is inclusive and max_duration exclusive in the
 * spec; durations are whole microseconds, so "> X" is min X + 1 µs and
 * "<= X" is max X + 1 µs, exactly.
 */

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cohort_expr.h"

#define MAX_VALUES    32  /* values of one "in (...)" list */
#define MAX_VALUE_LEN 256 /* bytes of one value */

enum tok_kind { T_END, T_WORD, T_STRING, T_OP, T_LPAREN, T_RPAREN, T_COMMA, T_BAD };

struct tok {
	enum tok_kind kind;
	size_t pos;		  /* offset in the expression */
	char text[MAX_VALUE_LEN]; /* word, unquoted string or operator */
};

struct parser {
	const char *s;
	size_t at; /* next byte to scan */
	struct tok t;
	struct cohort_expr_error *err;
	bool failed;
	/* what the conditions set (the spec) */
	bool has_min, has_max;
	int64_t min_us, max_us;
	size_t min_pos, max_pos;
	int nstatus, nroute, nmethod;
	char status[MAX_VALUES][MAX_VALUE_LEN];
	char route[MAX_VALUES][MAX_VALUE_LEN];
	char method[MAX_VALUES][MAX_VALUE_LEN];
};

static void fail(struct parser *p, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(struct parser *p, size_t pos, const char *fmt, ...)
{
	va_list ap;

	if (p->failed)
		return;
	p->failed = true;
	p->err->pos = pos;
	va_start(ap, fmt);
	vsnprintf(p->err->message, sizeof(p->err->message), fmt, ap);
	va_end(ap);
}

static bool word_char(char c)
{
	return c && !isspace((unsigned char)c) && !strchr("(),<>=~\"", c);
}

static void next(struct parser *p)
{
	const char *s = p->s;
	size_t n = 0;

	while (isspace((unsigned char)s[p->at]))
		p->at++;
	p->t.pos = p->at;
	p->t.text[0] = '\0';
	switch (s[p->at]) {
	case '\0':
		p->t.kind = T_END;
		return;
	case '(':
		p->t.kind = T_LPAREN;
		strcpy(p->t.text, "(");
		p->at++;
		return;
	case ')':
		p->t.kind = T_RPAREN;
		strcpy(p->t.text, ")");
		p->at++;
		return;
	case ',':
		p->t.kind = T_COMMA;
		strcpy(p->t.text, ",");
		p->at++;
		return;
	case '<':
	case '>':
	case '=':
	case '~':
		p->t.kind = T_OP;
		p->t.text[n++] = s[p->at++];
		if ((p->t.text[0] == '<' || p->t.text[0] == '>') && s[p->at] == '=')
			p->t.text[n++] = s[p->at++];
		p->t.text[n] = '\0';
		return;
	case '"':
		p->at++;
		while (s[p->at] && s[p->at] != '"') {
			if (s[p->at] == '\\' && (s[p->at + 1] == '"' || s[p->at + 1] == '\\'))
				p->at++;
			if (n + 1 >= sizeof(p->t.text)) {
				p->t.kind = T_BAD;
				fail(p, p->t.pos, "quoted value longer than %d bytes",
				     MAX_VALUE_LEN - 1);
				return;
			}
			p->t.text[n++] = s[p->at++];
		}
		p->t.text[n] = '\0';
		if (s[p->at] != '"') {
			p->t.kind = T_BAD;
			fail(p, p->t.pos, "unterminated quoted value: expected a closing '\"'");
			return;
		}
		p->at++;
		p->t.kind = T_STRING;
		return;
	default:
		while (word_char(s[p->at])) {
			if (n + 1 >= sizeof(p->t.text)) {
				p->t.kind = T_BAD;
				fail(p, p->t.pos, "value longer than %d bytes", MAX_VALUE_LEN - 1);
				return;
			}
			p->t.text[n++] = s[p->at++];
		}
		p->t.text[n] = '\0';
		p->t.kind = T_WORD;
	}
}

static bool is_word(const struct parser *p, const char *w)
{
	return p->t.kind == T_WORD && strcasecmp(p->t.text, w) == 0;
}

/* A description of the current token for messages. */
static const char *found(const struct parser *p, char *buf, size_t len)
{
	if (p->t.kind == T_END)
		return "the end of the expression";
	snprintf(buf, len, "'%.60s'", p->t.kind == T_STRING ? "\"...\"" : p->t.text);
	if (p->t.kind == T_STRING)
		snprintf(buf, len, "\"%.60s\"", p->t.text);
	return buf;
}

/* "250ms" -> 250000. Whole microseconds only. */
static int parse_duration(const char *text, int64_t *us)
{
	static const struct {
		const char *unit;
		double us;
	} units[] = {{"us", 1},	  {"µs", 1},	 {"ms", 1e3},  {"s", 1e6},
		     {"m", 60e6}, {"min", 60e6}, {"h", 3600e6}};
	char *end;
	double v, x;

	if (!isdigit((unsigned char)text[0]) && text[0] != '.')
		return -1;
	errno = 0;
	v = strtod(text, &end);
	if (end == text || errno || v < 0)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].unit) != 0)
			continue;
		x = v * units[i].us;
		if (x > 1e15)
			return -1;
		if (fabs(x - (double)llround(x)) > 1e-6 * (x > 1 ? x : 1))
			return -2;
		*us = llround(x);
		return 0;
	}
	return -1;
}

static bool valid_status(const char *s)
{
	size_t n = strlen(s);

	if (n != 3 || s[0] < '1' || s[0] > '5')
		return false;
	if ((s[1] == 'x' || s[1] == 'X') && (s[2] == 'x' || s[2] == 'X'))
		return true;
	return isdigit((unsigned char)s[1]) && isdigit((unsigned char)s[2]);
}

static bool valid_method(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isalpha((unsigned char)*s) && *s != '-' && *s != '_')
			return false;
	return true;
}

static void condition_duration(struct parser *p)
{
	char op[3], buf[80];
	size_t op_pos, val_pos;
	int64_t us;
	int r;

	next(p);
	if (p->t.kind != T_OP || strcmp(p->t.text, "=") == 0 || strcmp(p->t.text, "~") == 0) {
		fail(p, p->t.pos, "expected >, >=, < or <= after 'duration', found %s",
		     found(p, buf, sizeof(buf)));
		return;
	}
	memcpy(op, p->t.text, sizeof(op) - 1); /* operators are 1 or 2 bytes */
	op[sizeof(op) - 1] = '\0';
	op_pos = p->t.pos;
	next(p);
	val_pos = p->t.pos;
	if (p->t.kind != T_WORD) {
		fail(p, p->t.pos, "expected a duration such as 250ms or 1.5s, found %s",
		     found(p, buf, sizeof(buf)));
		return;
	}
	r = parse_duration(p->t.text, &us);
	if (r == -2) {
		fail(p, val_pos, "duration '%s' is not a whole number of microseconds", p->t.text);
		return;
	}
	if (r) {
		fail(p, val_pos,
		     "'%s' is not a duration: expected a number and a unit (us, ms, s, m, h), "
		     "e.g. 250ms or 1.5s",
		     p->t.text);
		return;
	}
	if (op[0] == '>') {
		if (p->has_min) {
			fail(p, op_pos, "duration already has a lower bound");
			return;
		}
		p->has_min = true;
		p->min_us = op[1] == '=' ? us : us + 1;
		p->min_pos = op_pos;
	} else {
		if (p->has_max) {
			fail(p, op_pos, "duration already has an upper bound");
			return;
		}
		if (op[1] != '=' && us == 0) {
			fail(p, val_pos, "no request lasts less than 0");
			return;
		}
		p->has_max = true;
		p->max_us = op[1] == '=' ? us + 1 : us;
		p->max_pos = op_pos;
	}
	next(p);
}

/* One value, or "in (v, ...)", into vals; check validates each. */
static void condition_values(struct parser *p, const char *key, const char *ops,
			     char (*vals)[MAX_VALUE_LEN], int *nvals, bool (*check)(const char *),
			     const char *expected)
{
	char buf[80];
	bool list;

	if (*nvals) {
		fail(p, p->t.pos, "%s is already given: for several values write %s in (A, B)", key,
		     key);
		return;
	}
	next(p);
	list = is_word(p, "in");
	if (!list && !(p->t.kind == T_OP && strstr(ops, p->t.text) && strlen(p->t.text) == 1)) {
		fail(p, p->t.pos, "expected %s or 'in' after '%s', found %s",
		     strcmp(ops, "=") == 0 ? "'='" : "'~' (glob) or '=' (exact)", key,
		     found(p, buf, sizeof(buf)));
		return;
	}
	bool exact_route = strcmp(key, "route") == 0 && strcmp(p->t.text, "=") == 0;
	if (list) {
		next(p);
		if (p->t.kind != T_LPAREN) {
			fail(p, p->t.pos, "expected '(' after 'in', found %s",
			     found(p, buf, sizeof(buf)));
			return;
		}
	}
	do {
		next(p);
		if (p->t.kind != T_WORD && p->t.kind != T_STRING) {
			fail(p, p->t.pos, "expected %s, found %s", expected,
			     found(p, buf, sizeof(buf)));
			return;
		}
		if (check && !check(p->t.text)) {
			fail(p, p->t.pos, "'%s' is not %s", p->t.text, expected);
			return;
		}
		if (*nvals == MAX_VALUES) {
			fail(p, p->t.pos, "more than %d values for %s", MAX_VALUES, key);
			return;
		}
		if (exact_route) { /* escape the glob characters */
			char *o = vals[*nvals];
			size_t n = 0;

			for (const char *c = p->t.text; *c && n + 2 < MAX_VALUE_LEN; c++) {
				if (*c == '*' || *c == '?' || *c == '\\')
					o[n++] = '\\';
				o[n++] = *c;
			}
			o[n] = '\0';
		} else {
			snprintf(vals[*nvals], MAX_VALUE_LEN, "%s", p->t.text);
		}
		(*nvals)++;
		next(p);
	} while (list && p->t.kind == T_COMMA);
	if (list) {
		if (p->t.kind != T_RPAREN) {
			fail(p, p->t.pos, "expected ',' or ')' in the list of %s values, found %s",
			     key, found(p, buf, sizeof(buf)));
			return;
		}
		next(p);
	}
}

static void condition(struct parser *p)
{
	char buf[80];

	if (is_word(p, "duration"))
		condition_duration(p);
	else if (is_word(p, "status"))
		condition_values(p, "status", "=", p->status, &p->nstatus, valid_status,
				 "a status code (100-599) or class (1xx-5xx)");
	else if (is_word(p, "route"))
		condition_values(p, "route", "~=", p->route, &p->nroute, NULL,
				 "a route or route glob such as /api/checkout*");
	else if (is_word(p, "method"))
		condition_values(p, "method", "=", p->method, &p->nmethod, valid_method,
				 "an HTTP method such as GET or POST");
	else
		fail(p, p->t.pos, "expected duration, status, route or method, found %s",
		     found(p, buf, sizeof(buf)));
}

static void emit_list(FILE *f, const char *key, char (*vals)[MAX_VALUE_LEN], int n, bool *first)
{
	if (!n)
		return;
	fprintf(f, "%s\"%s\": [", *first ? "" : ", ", key);
	for (int i = 0; i < n; i++) {
		fputs(i ? ", \"" : "\"", f);
		for (const char *c = vals[i]; *c; c++) {
			if (*c == '"' || *c == '\\')
				fputc('\\', f);
			if ((unsigned char)*c < 0x20)
				fprintf(f, "\\u%04x", *c);
			else
				fputc(*c, f);
		}
		fputc('"', f);
	}
	fputc(']', f);
	*first = false;
}

char *cohort_expr_compile(const char *expr, struct cohort_expr_error *err)
{
	struct parser *p = calloc(1, sizeof(*p));
	char buf[80], *out = NULL;
	size_t outlen = 0;
	bool first = true;
	FILE *f;

	if (!p) {
		err->pos = 0;
		snprintf(err->message, sizeof(err->message), "out of memory");
		return NULL;
	}
	p->s = expr;
	p->err = err;
	next(p);
	if (p->t.kind == T_END) {
		fail(p, 0,
		     "empty expression: expected a condition such as 'duration > 1s', "
		     "or 'all'");
	} else if (is_word(p, "all")) {
		next(p);
		if (p->t.kind != T_END)
			fail(p, p->t.pos,
			     "expected the end of the expression after 'all', found %s",
			     found(p, buf, sizeof(buf)));
	} else {
		condition(p);
		while (!p->failed && p->t.kind != T_END) {
			if (is_word(p, "or")) {
				fail(
				    p, p->t.pos,
				    "'or' is not supported: conditions on different keys are all "
				    "required; for alternatives of one key write 'in', e.g. status "
				    "in (4xx, 5xx)");
			} else if (is_word(p, "and")) {
				next(p);
				condition(p);
			} else {
				fail(p, p->t.pos,
				     "expected 'and' or the end of the expression, "
				     "found %s",
				     found(p, buf, sizeof(buf)));
			}
		}
	}
	if (!p->failed && p->has_min && p->has_max && p->min_us >= p->max_us)
		fail(p, p->max_pos, "no duration is both %s and below this bound",
		     "above the lower bound");
	if (p->failed)
		goto out;
	f = open_memstream(&out, &outlen);
	if (!f) {
		fail(p, 0, "out of memory");
		goto out;
	}
	fputc('{', f);
	if (p->has_min) {
		fprintf(f, "\"min_duration\": \"%" PRId64 "us\"", p->min_us);
		first = false;
	}
	if (p->has_max) {
		fprintf(f, "%s\"max_duration\": \"%" PRId64 "us\"", first ? "" : ", ", p->max_us);
		first = false;
	}
	emit_list(f, "status", p->status, p->nstatus, &first);
	emit_list(f, "route", p->route, p->nroute, &first);
	emit_list(f, "method", p->method, p->nmethod, &first);
	fputc('}', f);
	if (fclose(f)) {
		free(out);
		out = NULL;
		fail(p, 0, "out of memory");
	}
out:
	free(p);
	return out;
}

void cohort_expr_print_error(FILE *f, const char *what, const char *expr,
			     const struct cohort_expr_error *err)
{
	size_t col = 0;

	fprintf(f, "traceprof: %s: %s\n", what, err->message);
	fprintf(f, "  %s\n  ", expr);
	/* one column per character: UTF-8 continuation bytes take none */
	for (size_t i = 0; i < err->pos && expr[i]; i++)
		if (((unsigned char)expr[i] & 0xC0) != 0x80)
			col++;
	for (size_t i = 0; i < col; i++)
		fputc(' ', f);
	fputs("^\n", f);
}
