/*
 * cli_common.c - messages, connection, time ranges, formats and JSON
 * strings shared by the commands of `traceprof` (cli.h).
 *
 * Messages never show the password: cli_hide_password() keeps the one of
 * --db (or PGPASSWORD), and cli_error() masks it wherever it would appear.
 */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "traceprof/utf8.h"

static char hidden_password[256];

void cli_hide_password(const char *conninfo)
{
	PQconninfoOption *opts = PQconninfoParse(conninfo ? conninfo : "", NULL);
	const char *env = getenv("PGPASSWORD");

	hidden_password[0] = '\0';
	if (env && *env)
		snprintf(hidden_password, sizeof(hidden_password), "%s", env);
	for (PQconninfoOption *o = opts; o && o->keyword; o++)
		if (strcmp(o->keyword, "password") == 0 && o->val && *o->val)
			snprintf(hidden_password, sizeof(hidden_password), "%s", o->val);
	PQconninfoFree(opts);
}

/* Replaces every occurrence of the hidden password in buf by "***". */
static void mask_password(char *buf, size_t len)
{
	size_t plen = strlen(hidden_password);
	char *p;

	if (plen == 0)
		return;
	while ((p = strstr(buf, hidden_password)) != NULL) {
		size_t tail = strlen(p + plen);

		if (plen >= 3) {
			memcpy(p, "***", 3);
			memmove(p + 3, p + plen, tail + 1);
		} else if (strlen(buf) + 3 - plen < len) {
			memmove(p + 3, p + plen, tail + 1);
			memcpy(p, "***", 3);
		} else {
			memset(p, '*', plen);
		}
	}
}

void cli_error(const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	n = strlen(buf);
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	mask_password(buf, sizeof(buf));
	fprintf(stderr, "traceprof: %s\n", buf);
}

/* "host:port/dbname" of a connection (made or failed). */
static void describe(PGconn *conn, char *out, size_t len)
{
	const char *host = conn ? PQhost(conn) : NULL;
	const char *port = conn ? PQport(conn) : NULL;
	const char *db = conn ? PQdb(conn) : NULL;

	snprintf(out, len, "%s:%s/%s", host && *host ? host : "(default host)",
		 port && *port ? port : "5432", db && *db ? db : "(default database)");
}

int cli_connect(const char *conninfo, struct cli_db *db)
{
	PGresult *res;

	cli_hide_password(conninfo);
	db->conn = PQconnectdb(conninfo ? conninfo : "");
	describe(db->conn, db->where, sizeof(db->where));
	if (!db->conn || PQstatus(db->conn) != CONNECTION_OK) {
		cli_error("cannot connect to the database at %s: %s", db->where,
			  db->conn ? PQerrorMessage(db->conn) : "out of memory");
		cli_disconnect(db);
		return CLI_DB;
	}
	res = PQexec(db->conn, "SET TimeZone = 'UTC'");
	PQclear(res);
	res = PQexec(db->conn, "SELECT to_regclass('traceprof.samples') IS NOT NULL");
	if (PQresultStatus(res) != PGRES_TUPLES_OK || strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
		cli_error("the database at %s has no traceprof schema; apply it with "
			  "'traceprof-db migrate --db CONNINFO'",
			  db->where);
		PQclear(res);
		cli_disconnect(db);
		return CLI_DB;
	}
	PQclear(res);
	return CLI_OK;
}

void cli_disconnect(struct cli_db *db)
{
	if (db->conn)
		PQfinish(db->conn);
	db->conn = NULL;
}

PGresult *cli_query(struct cli_db *db, const char *sql, int nparams, const char *const *params,
		    int *rc)
{
	PGresult *res = PQexecParams(db->conn, sql, nparams, NULL, params, NULL, NULL, 0);
	const char *state, *detail, *hint;

	if (PQresultStatus(res) == PGRES_TUPLES_OK || PQresultStatus(res) == PGRES_COMMAND_OK)
		return res;
	state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);
	if (state && strncmp(state, "22", 2) == 0) {
		cli_error("%s%s%s%s%s", PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY),
			  detail ? "\ndetail: " : "", detail ? detail : "", hint ? "\nhint: " : "",
			  hint ? hint : "");
		*rc = CLI_USAGE;
	} else {
		cli_error("query failed on %s: %s", db->where,
			  PQstatus(db->conn) == CONNECTION_OK ? PQresultErrorMessage(res)
							      : PQerrorMessage(db->conn));
		*rc = CLI_DB;
	}
	PQclear(res);
	return NULL;
}

static const char *const format_names[CLI_FMT_COUNT] = {"text", "folded", "json", "svg", "pprof"};

const char *cli_format_name(enum cli_format f)
{
	return f < CLI_FMT_COUNT ? format_names[f] : "?";
}

int cli_parse_format(const char *name, unsigned accepted, const char *cmd)
{
	char list[128] = "";

	for (int i = 0; i < CLI_FMT_COUNT; i++)
		if ((accepted & (1u << i)) && strcmp(name, format_names[i]) == 0)
			return i;
	for (int i = 0; i < CLI_FMT_COUNT; i++)
		if (accepted & (1u << i)) {
			if (*list)
				strcat(list, ", ");
			strcat(list, format_names[i]);
		}
	cli_error("%s: unknown format '%s' (formats: %s)", cmd, name, list);
	return -1;
}

int cli_parse_span(const char *text, int64_t *us)
{
	char *end;
	double v;
	double unit;

	errno = 0;
	v = strtod(text, &end);
	if (end == text || errno || !(v > 0) || !isfinite(v))
		return -1;
	if (strcmp(end, "s") == 0)
		unit = 1e6;
	else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
		unit = 60e6;
	else if (strcmp(end, "h") == 0)
		unit = 3600e6;
	else if (strcmp(end, "d") == 0)
		unit = 86400e6;
	else if (strcmp(end, "w") == 0)
		unit = 7 * 86400e6;
	else
		return -1;
	if (v * unit > 400 * 86400e6)
		return -1;
	*us = (int64_t)llround(v * unit);
	return 0;
}

/* Digits of an exact width; advances *p. */
static int digits(const char **p, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)(*p)[i]))
			return -1;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*out = v;
	return 0;
}

int cli_parse_time(const char *text, int64_t *us)
{
	const char *p = text;
	struct tm tm = {0};
	int y, mo, d, h, mi, s = 0, frac_us = 0, off_min = 0;
	time_t t;

	if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
	    digits(&p, 2, &d))
		return -1;
	if (*p != 'T' && *p != 't' && *p != ' ')
		return -1;
	p++;
	if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi))
		return -1;
	if (*p == ':') {
		p++;
		if (digits(&p, 2, &s))
			return -1;
		if (*p == '.') {
			int n = 0;

			p++;
			while (isdigit((unsigned char)*p)) {
				if (n < 6) {
					frac_us = frac_us * 10 + (*p - '0');
					n++;
				}
				p++;
			}
			if (n == 0)
				return -1;
			while (n++ < 6)
				frac_us *= 10;
		}
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p == '-' ? -1 : 1, oh, om;

		p++;
		if (digits(&p, 2, &oh))
			return -1;
		if (*p == ':')
			p++;
		if (digits(&p, 2, &om) || oh > 23 || om > 59)
			return -1;
		off_min = sign * (oh * 60 + om);
	}
	if (*p != '\0')
		return -1;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60)
		return -1;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = s;
	t = timegm(&tm);
	if (tm.tm_mday != d) /* 2030-02-31 */
		return -1;
	*us = ((int64_t)t - (int64_t)off_min * 60) * 1000000 + frac_us;
	return 0;
}

int cli_range_parse(const char *since, const char *from, const char *until, struct cli_range *r)
{
	struct timespec now;
	int64_t now_us, span;

	clock_gettime(CLOCK_REALTIME, &now);
	now_us = (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
	if (since && (from || until)) {
		cli_error("--since and --from/--until exclude each other: give a span back from "
			  "now, or explicit times");
		return CLI_USAGE;
	}
	if (since) {
		if (cli_parse_span(since, &span)) {
			cli_error("--since '%s' is not a span of time: use a number and a unit, "
				  "e.g. 90s, 30m, 1h, 2d, 1w (at most 400 days)",
				  since);
			return CLI_USAGE;
		}
		r->from_us = now_us - span;
		r->until_us = now_us;
		return CLI_OK;
	}
	r->until_us = now_us;
	if (until && cli_parse_time(until, &r->until_us)) {
		cli_error("--until '%s' is not a time: use RFC 3339 (2030-01-02T10:00:00Z, "
			  "2030-01-02T12:00:00+02:00) or 'YYYY-MM-DD HH:MM[:SS]' (UTC)",
			  until);
		return CLI_USAGE;
	}
	r->from_us = r->until_us - 3600LL * 1000000;
	if (from && cli_parse_time(from, &r->from_us)) {
		cli_error("--from '%s' is not a time: use RFC 3339 (2030-01-02T10:00:00Z, "
			  "2030-01-02T12:00:00+02:00) or 'YYYY-MM-DD HH:MM[:SS]' (UTC)",
			  from);
		return CLI_USAGE;
	}
	if (r->until_us <= r->from_us) {
		char a[64], b[64];

		cli_error("the time range is empty: --until %s is not after --from %s",
			  cli_time_rfc3339(r->until_us, a, sizeof(a)),
			  cli_time_rfc3339(r->from_us, b, sizeof(b)));
		return CLI_USAGE;
	}
	return CLI_OK;
}

static const char *fmt_time(int64_t us, char *buf, size_t len, bool rfc)
{
	time_t t = (time_t)(us >= 0 ? us / 1000000 : -((-us + 999999) / 1000000));
	int frac = (int)(us - (int64_t)t * 1000000);
	struct tm tm;
	char base[40];

	gmtime_r(&t, &tm);
	strftime(base, sizeof(base), rfc ? "%Y-%m-%dT%H:%M:%S" : "%Y-%m-%d %H:%M:%S", &tm);
	if (frac)
		snprintf(buf, len, "%s.%06d%s", base, frac, rfc ? "Z" : "+00");
	else
		snprintf(buf, len, "%s%s", base, rfc ? "Z" : "+00");
	return buf;
}

const char *cli_time_sql(int64_t us, char *buf, size_t len)
{
	return fmt_time(us, buf, len, false);
}

const char *cli_time_rfc3339(int64_t us, char *buf, size_t len)
{
	return fmt_time(us, buf, len, true);
}

int cli_parse_count(const char *text, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (end == text || *end || errno || v < 1 || v > 1000000)
		return -1;
	*out = v;
	return 0;
}

/* ---- text output, escaped (cli_open_output) ---- */

struct esc_out {
	FILE *to;	       /* the file or stdout */
	unsigned char pend[4]; /* a character cut between two writes */
	size_t npend;	       /* bytes in pend */
};

/* Bytes of the UTF-8 sequence c starts, 0 when it starts none. */
static size_t seq_len(unsigned char c)
{
	return c >= 0xc2 && c <= 0xdf	? 2
	       : c >= 0xe0 && c <= 0xef ? 3
	       : c >= 0xf0 && c <= 0xf4 ? 4
					: 0;
}

/* Writes the character at s (n bytes left) escaped when it must be; returns its bytes. */
static size_t esc_put(FILE *to, const unsigned char *s, size_t n)
{
	size_t u = tp_utf8_safe_len(s, n), len = tp_utf8_len(s, n);
	unsigned int cp = 0;

	if (u || *s == '\n' || *s == '\t') {
		fwrite(s, 1, u ? u : 1, to);
		return u ? u : 1;
	}
	if (!len) {
		fprintf(to, "\\x%02x", *s);
		return 1;
	}
	cp = len == 1	? *s
	     : len == 2 ? (s[0] & 0x1fu) << 6 | (s[1] & 0x3fu)
			: (s[0] & 0x0fu) << 12 | (s[1] & 0x3fu) << 6 | (s[2] & 0x3fu);
	fprintf(to, "\\u%04x", cp);
	return len;
}

static ssize_t esc_write(void *cookie, const char *buf, size_t size)
{
	struct esc_out *e = cookie;
	const unsigned char *s = (const unsigned char *)buf;
	size_t i = 0;

	/* a character cut by the last write: its continuation bytes first */
	while (e->npend && e->npend < seq_len(e->pend[0]) && i < size && (s[i] & 0xc0) == 0x80)
		e->pend[e->npend++] = s[i++];
	if (e->npend && (i < size || e->npend == seq_len(e->pend[0]))) {
		for (size_t k = 0; k < e->npend;)
			k += esc_put(e->to, e->pend + k, e->npend - k);
		e->npend = 0;
	}
	while (i < size) {
		size_t want = seq_len(s[i]);

		if (want > size - i) { /* maybe cut: keep it for the next write */
			memcpy(e->pend, s + i, size - i);
			e->npend = size - i;
			break;
		}
		i += esc_put(e->to, s + i, size - i);
	}
	return ferror(e->to) ? -1 : (ssize_t)size;
}

static int esc_close(void *cookie)
{
	struct esc_out *e = cookie;
	int err, rc;

	for (size_t k = 0; k < e->npend;)
		k += esc_put(e->to, e->pend + k, e->npend - k);
	err = ferror(e->to);
	rc = e->to == stdout ? fflush(e->to) : fclose(e->to);
	free(e);
	return err ? EOF : rc;
}

/* f behind a stream that escapes (cli.h); f itself when that cannot be made. */
static FILE *escaped(FILE *f)
{
	static const cookie_io_functions_t io = {.write = esc_write, .close = esc_close};
	struct esc_out *e = calloc(1, sizeof(*e));
	FILE *w;

	if (!e)
		return f;
	e->to = f;
	w = fopencookie(e, "w", io);
	if (!w)
		free(e);
	return w ? w : f;
}

FILE *cli_open_output(const char *path, enum cli_format format)
{
	bool text = format == CLI_FMT_TEXT || format == CLI_FMT_FOLDED;
	FILE *f;

	if (!path || strcmp(path, "-") == 0)
		return text ? escaped(stdout) : stdout;
	f = fopen(path, "w");
	if (!f)
		cli_error("cannot write %s: %s", path, strerror(errno));
	return f && text ? escaped(f) : f;
}

int cli_close_output(FILE *f, const char *path)
{
	int err = ferror(f);

	if (f != stdout && (!path || strcmp(path, "-") == 0)) { /* escaped stdout */
		if (fclose(f) || err) {
			cli_error("cannot write the output: %s", strerror(errno));
			return CLI_IO;
		}
		return CLI_OK;
	}
	if (f == stdout) {
		if (fflush(f) || err) {
			cli_error("cannot write the output: %s", strerror(errno));
			return CLI_IO;
		}
		return CLI_OK;
	}
	if (fclose(f) || err) {
		cli_error("cannot write %s: %s", path, strerror(errno));
		return CLI_IO;
	}
	return CLI_OK;
}

void cli_json_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);

	fputc('"', f);
	for (size_t u; *p; p += u, n -= u) {
		u = tp_utf8_len(p, n);
		if (u != 1) { /* not ASCII: as it is when safe to show, else escaped */
			size_t safe = tp_utf8_safe_len(p, n);

			if (safe)
				fwrite(p, 1, safe, f);
			else if (u == 2)
				fprintf(f, "\\u%04x", (p[0] & 0x1fu) << 6 | (p[1] & 0x3fu));
			else if (u == 3)
				fprintf(f, "\\u%04x",
					(p[0] & 0x0fu) << 12 | (p[1] & 0x3fu) << 6 |
					    (p[2] & 0x3fu));
			else
				fputs("\\ufffd", f);
			u = u ? u : 1;
			continue;
		}
		switch (*p) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

void cli_json_num(FILE *f, double v)
{
	char buf[64];
	size_t n;

	if (!isfinite(v)) {
		fputs("null", f);
		return;
	}
	snprintf(buf, sizeof(buf), "%.3f", v);
	n = strlen(buf);
	while (n > 0 && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n > 0 && buf[n - 1] == '.')
		buf[--n] = '\0';
	if (strcmp(buf, "-0") == 0)
		strcpy(buf, "0");
	fputs(buf, f);
}

const char *cli_fmt_us(int64_t us, char *buf, size_t len)
{
	if (us >= 1000000)
		snprintf(buf, len, "%.1fs", us / 1e6);
	else if (us >= 10000)
		snprintf(buf, len, "%.0fms", us / 1e3);
	else if (us >= 1000)
		snprintf(buf, len, "%.1fms", us / 1e3);
	else
		snprintf(buf, len, "%lldµs", (long long)us);
	return buf;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	mask_password(buf, sizeof(buf));
	fprintf(stderr, "traceprof %s: %s\ntry 'traceprof %s --help'\n", cmd, buf, cmd);
	return CLI_USAGE;
}

int cli_bad_option(const char *cmd, char **argv, int ch, int optopt_)
{
	extern int optind;
	const char *arg = argv[optind - 1];
	char name[128];

	if (strncmp(arg, "--", 2) == 0) {
		snprintf(name, sizeof(name), "%s", arg);
		name[strcspn(name, "=")] = '\0';
	} else {
		snprintf(name, sizeof(name), "-%c", optopt_ ? optopt_ : '?');
	}
	if (ch == ':')
		return cli_usage_error(cmd, "option '%s' needs a value", name);
	return cli_usage_error(cmd, "unknown option '%s'", name);
}

bool cli_unknown_service(struct cli_db *db, const char *service)
{
	const char *params[1] = {service};
	PGresult *res =
	    PQexecParams(db->conn,
			 "SELECT EXISTS (SELECT FROM traceprof.sources WHERE service = $1), "
			 "(SELECT string_agg(s, ', ' ORDER BY s COLLATE \"C\") FROM "
			 "(SELECT DISTINCT service AS s FROM traceprof.sources LIMIT 20) x)",
			 1, NULL, params, NULL, NULL, 0);
	bool unknown = false;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
	    strcmp(PQgetvalue(res, 0, 0), "f") == 0) {
		unknown = true;
		if (PQgetisnull(res, 0, 1))
			cli_error(
			    "no service '%s' in %s: the store has no samples or requests at all",
			    service, db->where);
		else
			cli_error("no service '%s' in %s (services: %s)", service, db->where,
				  PQgetvalue(res, 0, 1));
	}
	PQclear(res);
	return unknown;
}

int cli_opt_format(void *obj, const struct tp_option *o, const char *v, char *err, size_t errlen)
{
	const struct cli_formats *f = o->data;
	int fmt = cli_parse_format(v, f->accepted, f->cmd);

	(void)err;
	(void)errlen;
	if (fmt < 0)
		return -EINVAL; /* cli_parse_format said why */
	*TP_OPT_PTR(obj, o, enum cli_format) = (enum cli_format)fmt;
	return 0;
}

int cli_opt_count(void *obj, const struct tp_option *o, const char *v, char *err, size_t errlen)
{
	if (cli_parse_count(v, TP_OPT_PTR(obj, o, long))) {
		snprintf(err, errlen, "--%s '%s' is not a count (1-1000000)", o->name, v);
		return -EINVAL;
	}
	return 0;
}

int cli_opt_nonempty(void *obj, const struct tp_option *o, const char *v, char *err, size_t errlen)
{
	if (!*v) {
		snprintf(err, errlen, "--%s must not be empty", o->name);
		return -EINVAL;
	}
	*TP_OPT_PTR(obj, o, const char *) = v;
	return 0;
}

int cli_parse_args(const char *cmd, const struct tp_option *opts, size_t n, void *args, int argc,
		   char **argv, void (*help)(FILE *), int *next)
{
	struct tp_opts_result res;

	switch (tp_opts_getopt(opts, n, args, argc, argv, TP_OPTS_QUIET, &res)) {
	case TP_OPTS_DONE:
		*next = res.next;
		return -1;
	case TP_OPTS_STOPPED: /* --help */
		help(stdout);
		return CLI_OK;
	case TP_OPTS_BAD_VALUE:
		if (res.err[0])
			cli_usage_error(cmd, "%s", res.err);
		return CLI_USAGE;
	default:
		return cli_bad_option(cmd, argv, res.ch, res.optopt);
	}
}

int cli_parse_service_args(const char *cmd, const struct tp_option *opts, size_t n, void *args,
			   int argc, char **argv, void (*help)(FILE *), const char *const *service)
{
	int next, rc = cli_parse_args(cmd, opts, n, args, argc, argv, help, &next);

	if (rc >= 0)
		return rc;
	if (next < argc)
		return cli_usage_error(cmd, "unexpected argument '%s'", argv[next]);
	if (!*service || !**service)
		return cli_usage_error(cmd, "needs --service S");
	return -1;
}
