/*
 * store.c - the PostgreSQL writer behind store.h: connection, schema check,
 * validation and buffering. The flush transaction is in store_flush.c.
 *
 * Data flow: store_add_*() validates a row (a bad row is refused and
 * counted, so it can never abort a COPY later) and appends it, already
 * encoded for COPY by store_copy.c, to one buffer per destination table:
 * five dictionaries, samples, requests, trigger_samples, offcpu and gpu. store_flush() sends the
 * buffers and drops them only after COMMIT; until then they are kept for a retry.
 *
 * Workload: one store per writer thread adding 10^5..10^6 sample rows per
 * second and flushing every 10k-50k rows. Adds do no allocation once the
 * buffers have grown to their working size. Dictionary entries already
 * sent or pending are filtered by a bounded open-addressing set of
 * (kind, id); when it is full it is cleared, since resending an entry only
 * costs a row the server skips (ON CONFLICT DO NOTHING).
 *
 * Bounds: max_rows sample + request + trigger + offcpu + gpu rows and 256 MiB of them encoded;
 * 200000 dictionary entries and 64 MiB of them; beyond that adds return
 * -ENOBUFS (counted) until a flush succeeds.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "store_internal.h"
#include "traceprof/log.h"
#include "traceprof/migrate.h"
#include "traceprof/utf8.h"

/* ---- errors ---- */

/* Replaces every occurrence of the conninfo's password in msg with "***". */
static void scrub_password(char *msg, size_t size, const char *conninfo)
{
	PQconninfoOption *opts;
	char out[1024];

	if (!conninfo || !*conninfo)
		return;
	opts = PQconninfoParse(conninfo, NULL);
	for (PQconninfoOption *o = opts; o && o->keyword; o++) {
		const char *pw = o->val;
		size_t plen = pw ? strlen(pw) : 0;
		size_t w = 0;

		if (strcmp(o->keyword, "password") || !plen)
			continue;
		for (const char *r = msg; *r && w + 4 < sizeof(out);) {
			if (strncmp(r, pw, plen) == 0) {
				memcpy(out + w, "***", 3);
				w += 3;
				r += plen;
			} else {
				out[w++] = *r++;
			}
		}
		out[w] = '\0';
		snprintf(msg, size, "%s", out);
	}
	PQconninfoFree(opts);
}

/* Sets last_error: one line, with libpq's and the server's newlines folded. */
void store_set_error(struct store *st, const char *fmt, ...)
{
	va_list ap;
	char *w = st->last_error;

	va_start(ap, fmt);
	vsnprintf(st->last_error, sizeof(st->last_error), fmt, ap);
	va_end(ap);
	for (const char *r = st->last_error; *r; r++) {
		if (*r == '\n' || *r == '\t') {
			if (w > st->last_error && w[-1] != ' ' && r[1])
				*w++ = ' ';
		} else if (!(*r == ' ' && w > st->last_error && w[-1] == ' ')) {
			*w++ = *r;
		}
	}
	while (w > st->last_error && w[-1] == ' ')
		w--;
	*w = '\0';
	scrub_password(st->last_error, sizeof(st->last_error), st->conninfo);
}

/* Records a failed step of a flush; -ECONNRESET when the connection is gone. */
int store_step_failed(struct store *st, const char *what, PGresult *res)
{
	const char *msg = res ? PQresultErrorMessage(res) : "";
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

	if (!*msg)
		msg = PQerrorMessage(st->conn);
	if (state && strcmp(state, "23514") == 0 && strstr(msg, "no partition"))
		st->missing_partition = true;
	store_set_error(st, "flush to %s: %s failed: %s", st->describe, what, msg);
	return PQstatus(st->conn) == CONNECTION_BAD ? -ECONNRESET : -EIO;
}

/* ---- connection ---- */

static void describe_conn(struct store *st)
{
	const char *host = st->conn ? PQhost(st->conn) : NULL;
	const char *port = st->conn ? PQport(st->conn) : NULL;
	const char *db = st->conn ? PQdb(st->conn) : NULL;
	const char *user = st->conn ? PQuser(st->conn) : NULL;

	snprintf(st->describe, sizeof(st->describe), "host=%s port=%s dbname=%s user=%s",
		 host && *host ? host : "(default)", port && *port ? port : "(default)",
		 db && *db ? db : "(default)", user && *user ? user : "(default)");
	scrub_password(st->describe, sizeof(st->describe), st->conninfo);
}

static int store_connect(struct store *st)
{
	const char *keys[] = {"dbname", "client_encoding",
			      st->opts.app_name ? "application_name" : "fallback_application_name",
			      NULL};
	const char *vals[] = {st->conninfo, "UTF8", st->app_name, NULL};
	const char *enc;

	st->conn = PQconnectdbParams(keys, vals, 1);
	describe_conn(st);
	if (!st->conn) {
		store_set_error(st, "cannot connect to PostgreSQL: out of memory");
		return -ENOMEM;
	}
	if (PQstatus(st->conn) != CONNECTION_OK) {
		store_set_error(st, "cannot connect to PostgreSQL %s: %s", st->describe,
				PQerrorMessage(st->conn));
		PQfinish(st->conn);
		st->conn = NULL;
		return -ECONNREFUSED;
	}
	enc = PQparameterStatus(st->conn, "server_encoding");
	if (enc && strcmp(enc, "UTF8"))
		log_warn("store: database encoding is %s, not UTF8; names outside it will be "
			 "refused by the server %s",
			 enc, st->describe);
	return 0;
}

static int check_schema(struct store *st)
{
	int latest = migrate_latest_version();
	int v = migrate_current_version(st->conn);
	int applied = 0;

	if (v < 0) {
		store_set_error(st, "cannot read the schema version of %s: %s", st->describe,
				PQerrorMessage(st->conn));
		return -EIO;
	}
	if (v < latest && st->opts.migrate) {
		if (migrate_apply(st->conn, &applied)) {
			store_set_error(
			    st,
			    "cannot migrate the schema of %s from version %d to %d (see "
			    "the messages above)",
			    st->describe, v, latest);
			return -EIO;
		}
		log_info("store: migrated %s from schema version %d to %d", st->describe, v,
			 latest);
		return 0;
	}
	if (v == 0) {
		store_set_error(st,
				"no traceprof schema in the database at %s; create it with "
				"'traceprof-db migrate --db CONNINFO'",
				st->describe);
		return -EPROTO;
	}
	if (v < latest) {
		store_set_error(
		    st,
		    "the database at %s has schema version %d, older than this traceprof's "
		    "%d; upgrade it with 'traceprof-db migrate --db CONNINFO'",
		    st->describe, v, latest);
		return -EPROTO;
	}
	if (v > latest)
		log_warn(
		    "store: the database at %s has schema version %d, newer than this traceprof's "
		    "%d; writing anyway",
		    st->describe, v, latest);
	return 0;
}

static void read_retention(struct store *st)
{
	PGresult *res = PQexec(st->conn, "SELECT (extract(epoch FROM value::interval) * 1000000)"
					 "::bigint FROM traceprof.config WHERE key = 'retention'");

	st->retention_us = STORE_DEFAULT_RETENTION_US;
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
	    atoll(PQgetvalue(res, 0, 0)) > 0)
		st->retention_us = atoll(PQgetvalue(res, 0, 0));
	else
		log_warn("store: cannot read traceprof.config retention from %s, using 7 days: %s",
			 st->describe, PQresultErrorMessage(res));
	PQclear(res);
}

/* Parse errors may quote a piece of the string: keep libpq's words, not its quotes. */
static void log_parse_error(const char *errmsg)
{
	char out[512];
	size_t w = 0;
	bool inside = false;

	for (const char *r = errmsg; *r && w + 6 < sizeof(out); r++) {
		if (*r == '"') {
			if (!inside) {
				memcpy(out + w, "\"...\"", 5);
				w += 5;
			}
			inside = !inside;
		} else if (!inside && *r != '\n') {
			out[w++] = *r;
		}
	}
	out[w] = '\0';
	log_error("store: invalid connection string or URI: %s", out);
}

static int idset_init(struct idset *s, unsigned bits);

struct store *store_open(const char *conninfo, const struct store_opts *opts)
{
	struct store *st = calloc(1, sizeof(*st));
	char *errmsg = NULL;
	PQconninfoOption *parsed;
	int err = -ENOMEM;

	if (!st)
		goto out_errno;
	if (opts)
		st->opts = *opts;
	if (!st->opts.max_rows)
		st->opts.max_rows = STORE_DEFAULT_MAX_ROWS;
	snprintf(st->app_name, sizeof(st->app_name), "%s",
		 st->opts.app_name ? st->opts.app_name : "traceprof");
	st->opts.app_name = opts && opts->app_name ? st->app_name : NULL;
	st->format = st->opts.text_copy ? COPY_TEXT : COPY_BINARY;
	st->min_us = INT64_MAX;
	st->max_us = INT64_MIN;
	st->retention_us = STORE_DEFAULT_RETENTION_US;
	snprintf(st->describe, sizeof(st->describe), "(not connected)");
	if (conninfo && *conninfo) {
		parsed = PQconninfoParse(conninfo, &errmsg);
		if (!parsed) {
			log_parse_error(errmsg ? errmsg : "out of memory");
			err = errmsg ? -EINVAL : -ENOMEM;
			PQfreemem(errmsg);
			goto out_free;
		}
		PQconninfoFree(parsed);
		st->conninfo = strdup(conninfo);
		if (!st->conninfo)
			goto out_free;
	}
	if (idset_init(&st->seen, IDSET_MIN_BITS) != 0)
		goto out_free;
	err = store_connect(st);
	if (!err)
		err = check_schema(st);
	if (err) {
		if (st->opts.open_error && st->opts.open_error_len)
			snprintf(st->opts.open_error, st->opts.open_error_len, "%s",
				 st->last_error);
		if (!st->opts.quiet_open)
			log_error("store: %s", st->last_error);
		else
			log_debug("store: %s", st->last_error);
		goto out_free;
	}
	read_retention(st);
	st->last_error[0] = '\0';
	return st;

out_free:
	store_free(st);
out_errno:
	errno = -err;
	return NULL;
}

void store_free(struct store *st)
{
	if (!st)
		return;
	PQfinish(st->conn);
	if (st->conninfo) {
		explicit_bzero(st->conninfo, strlen(st->conninfo));
		free(st->conninfo);
	}
	copybuf_release(&st->samples);
	copybuf_release(&st->requests);
	copybuf_release(&st->trigger_samples);
	copybuf_release(&st->offcpu);
	copybuf_release(&st->gpu);
	for (int k = 0; k < DICT_KINDS; k++)
		copybuf_release(&st->dict[k]);
	free(st->seen.ids);
	free(st->seen.kinds);
	free(st);
}

int store_reconnect(struct store *st)
{
	if (!st)
		return -EINVAL;
	PQfinish(st->conn);
	st->conn = NULL;
	return store_connect(st);
}

const char *store_last_error(const struct store *st)
{
	return st ? st->last_error : "";
}

const char *store_describe(const struct store *st)
{
	return st ? st->describe : "";
}

/* ---- validation ---- */

static int refuse(struct store *st)
{
	st->stats.rows_invalid++;
	return -EINVAL;
}

static int refuse_full(struct store *st)
{
	st->stats.rows_dropped_full++;
	return -ENOBUFS;
}

/* Well-formed UTF-8 as PostgreSQL checks it: no overlong forms, no surrogates, <= U+10FFFF. */
static bool valid_utf8(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strnlen(s, STORE_MAX_STRING + 1);

	if (n > STORE_MAX_STRING)
		return false;
	for (size_t i = 0, u; i < n; i += u)
		if (!(u = tp_utf8_len(p + i, n - i)))
			return false;
	return true;
}

bool store_valid_text(const char *s)
{
	return s && valid_utf8(s);
}

/* NULL is fine (stored as "" or NULL, see the encoders). */
static bool valid_opt_str(const char *s)
{
	return !s || valid_utf8(s);
}

/*
 * A source's labels: NULL, "" or a JSON object whose values are strings
 * (Kubernetes labels), at most STORE_LABELS_MAX bytes, valid UTF-8 without
 * \u0000 (which jsonb refuses). Checked here so that one bad value is
 * refused alone instead of failing the COPY of the whole flush.
 */
static bool valid_labels(const char *s)
{
	json_error_t jerr;
	const char *k;
	json_t *o, *v;
	bool ok;

	if (!s || !*s)
		return true;
	if (strlen(s) > STORE_LABELS_MAX || !valid_utf8(s))
		return false;
	o = json_loads(s, JSON_REJECT_DUPLICATES, &jerr);
	ok = json_is_object(o);
	json_object_foreach(ok ? o : NULL, k, v) if (!json_is_string(v)) ok = false;
	json_decref(o);
	return ok;
}

static bool valid_req_str(const char *s)
{
	return s && *s && valid_utf8(s);
}

static bool trace_zero(const uint8_t id[16])
{
	static const uint8_t zero[16];

	return memcmp(id, zero, 16) == 0;
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Time of a row: partitions exist (or will) from now - retention to now + 1 day. */
static bool valid_time(const struct store *st, int64_t t)
{
	int64_t now = now_us();

	return t >= now - st->retention_us && t <= now + STORE_FUTURE_US;
}

static void note_time(struct store *st, int64_t t)
{
	if (t < st->min_us)
		st->min_us = t;
	if (t > st->max_us)
		st->max_us = t;
}

/* ---- dictionaries ---- */

static int idset_init(struct idset *s, unsigned bits)
{
	s->ids = calloc((size_t)1 << bits, sizeof(*s->ids));
	s->kinds = calloc((size_t)1 << bits, sizeof(*s->kinds));
	s->count = 0;
	s->bits = bits;
	if (s->ids && s->kinds)
		return 0;
	free(s->ids);
	free(s->kinds);
	s->ids = NULL;
	s->kinds = NULL;
	return -ENOMEM;
}

static size_t idset_slot(const struct idset *s, uint64_t id, int kind)
{
	uint64_t h = (id ^ ((uint64_t)(kind + 1) << 56)) * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> (64 - s->bits));
}

static bool idset_contains(const struct idset *s, uint64_t id, int kind)
{
	size_t mask = ((size_t)1 << s->bits) - 1;

	for (size_t i = idset_slot(s, id, kind);; i = (i + 1) & mask) {
		if (!s->kinds[i])
			return false;
		if (s->ids[i] == id && s->kinds[i] == kind + 1)
			return true;
	}
}

static void idset_put(struct idset *s, uint64_t id, uint8_t kind1)
{
	size_t mask = ((size_t)1 << s->bits) - 1, i;

	for (i = idset_slot(s, id, kind1 - 1); s->kinds[i]; i = (i + 1) & mask)
		;
	s->ids[i] = id;
	s->kinds[i] = kind1;
	s->count++;
}

/* Twice the slots, the same pairs; -ENOMEM leaves s as it was. */
static int idset_grow(struct idset *s)
{
	struct idset big;

	if (idset_init(&big, s->bits + 1) != 0)
		return -ENOMEM;
	for (size_t i = 0; i < (size_t)1 << s->bits; i++)
		if (s->kinds[i])
			idset_put(&big, s->ids[i], s->kinds[i]);
	free(s->ids);
	free(s->kinds);
	*s = big;
	return 0;
}

static void idset_add(struct idset *s, uint64_t id, int kind)
{
	if (s->count >= ((size_t)1 << s->bits) / 10 * 7 &&
	    (s->bits >= IDSET_MAX_BITS || idset_grow(s) != 0)) {
		/* Forgetting only costs resending entries the server ignores. */
		log_debug("store: dictionary id set full (%zu), clearing it", s->count);
		memset(s->kinds, 0, ((size_t)1 << s->bits) * sizeof(*s->kinds));
		s->count = 0;
	}
	idset_put(s, id, (uint8_t)(kind + 1));
}

/* 1: already sent or pending; 0: go ahead; -EINVAL, -ENOBUFS: refused (counted). */
static int dict_check(struct store *st, enum dict_kind k, uint64_t id)
{
	size_t bytes = 0;

	if (id == 0)
		return refuse(st); /* 0 means "none" in the schema; ids.h never makes it */
	if (idset_contains(&st->seen, id, k))
		return 1;
	for (int i = 0; i < DICT_KINDS; i++)
		bytes += st->dict[i].len;
	if (st->dict_total >= STORE_MAX_DICT_ENTRIES || bytes >= STORE_MAX_DICT_BYTES)
		return refuse_full(st);
	return 0;
}

static int dict_added(struct store *st, enum dict_kind k, uint64_t id, int err)
{
	if (err)
		return err;
	st->cur.dict_entries[k]++;
	st->dict_total++;
	idset_add(&st->seen, id, k);
	return 0;
}

int store_add_function(struct store *st, uint64_t function_id, const char *name, const char *module,
		       int kind)
{
	int r;

	if (!st)
		return -EINVAL;
	if (!valid_req_str(name) || !valid_opt_str(module) || kind < 0 || kind > 2)
		return refuse(st);
	r = dict_check(st, DICT_FUNCTION, function_id);
	if (r)
		return r > 0 ? 0 : r;
	return dict_added(st, DICT_FUNCTION, function_id,
			  copy_put_function(&st->dict[DICT_FUNCTION], st->format, function_id, name,
					    module ? module : "", kind));
}

int store_add_frame(struct store *st, uint64_t frame_id, uint64_t function_id, const char *build_id,
		    const char *file, int line, uint64_t address)
{
	int r;

	if (!st)
		return -EINVAL;
	if (!valid_opt_str(build_id) || !valid_opt_str(file))
		return refuse(st);
	r = dict_check(st, DICT_FRAME, frame_id);
	if (r)
		return r > 0 ? 0 : r;
	return dict_added(st, DICT_FRAME, frame_id,
			  copy_put_frame(&st->dict[DICT_FRAME], st->format, frame_id, function_id,
					 build_id ? build_id : "", file, line, address));
}

int store_add_stack(struct store *st, uint64_t stack_id, const uint64_t *frame_ids, size_t n)
{
	int r;

	if (!st)
		return -EINVAL;
	if (!frame_ids || n < 1 || n > STORE_MAX_FRAMES)
		return refuse(st);
	r = dict_check(st, DICT_STACK, stack_id);
	if (r)
		return r > 0 ? 0 : r;
	return dict_added(
	    st, DICT_STACK, stack_id,
	    copy_put_stack(&st->dict[DICT_STACK], st->format, stack_id, frame_ids, n));
}

int store_add_source(struct store *st, uint64_t source_id, const struct store_source *src)
{
	int r;

	if (!st)
		return -EINVAL;
	if (!src || !valid_req_str(src->service) || !valid_opt_str(src->namespace_) ||
	    !valid_opt_str(src->pod) || !valid_opt_str(src->container) ||
	    !valid_opt_str(src->node) || !valid_opt_str(src->build_id) ||
	    !valid_labels(src->labels_json))
		return refuse(st);
	r = dict_check(st, DICT_SOURCE, source_id);
	if (r)
		return r > 0 ? 0 : r;
	return dict_added(st, DICT_SOURCE, source_id,
			  copy_put_source(&st->dict[DICT_SOURCE], st->format, source_id, src));
}

int store_add_route(struct store *st, uint64_t route_id, const char *method, const char *route)
{
	int r;

	if (!st)
		return -EINVAL;
	if (!valid_opt_str(method) || !valid_opt_str(route))
		return refuse(st);
	r = dict_check(st, DICT_ROUTE, route_id);
	if (r)
		return r > 0 ? 0 : r;
	return dict_added(
	    st, DICT_ROUTE, route_id,
	    copy_put_route(&st->dict[DICT_ROUTE], st->format, route_id, method, route));
}

/* ---- rows ---- */

static bool rows_full(const struct store *st)
{
	return st->cur.sample_rows + st->cur.request_rows + st->cur.trigger_rows +
		       st->cur.offcpu_rows + st->cur.gpu_rows >=
		   st->opts.max_rows ||
	       st->samples.len + st->requests.len + st->trigger_samples.len + st->offcpu.len +
		       st->gpu.len >=
		   STORE_MAX_ROW_BYTES;
}

/* Validates a sample row; *total receives its number of samples. */
static bool valid_sample(const struct store *st, const struct store_sample_row *r, uint64_t *total)
{
	if (!r || r->hz < 1 || r->hz > STORE_MAX_HZ || r->n < 1 || r->n > STORE_MAX_ROW_STACKS ||
	    !r->stacks || r->source_id == 0 || trace_zero(r->trace_id) != (r->span_id == 0) ||
	    !valid_time(st, r->bucket_us))
		return false;
	*total = r->n;
	if (r->counts) {
		*total = 0;
		for (uint32_t i = 0; i < r->n; i++) {
			if (r->counts[i] < 1 || r->counts[i] > INT32_MAX)
				return false;
			*total += r->counts[i];
		}
	}
	return true;
}

int store_add_samples(struct store *st, const struct store_sample_row *row)
{
	uint64_t total;
	int err;

	if (!st)
		return -EINVAL;
	if (!valid_sample(st, row, &total))
		return refuse(st);
	if (rows_full(st))
		return refuse_full(st);
	err = copy_put_sample(&st->samples, st->format, row, total);
	if (err)
		return err;
	st->cur.sample_rows++;
	st->cur.samples += total;
	note_time(st, row->bucket_us);
	return 0;
}

/* A trigger id: non-empty valid text of at most STORE_MAX_TRIGGER_ID bytes. */
static bool valid_trigger_id(const char *id)
{
	return id && *id && strnlen(id, STORE_MAX_TRIGGER_ID + 1) <= STORE_MAX_TRIGGER_ID &&
	       valid_utf8(id);
}

int store_add_trigger_samples(struct store *st, const char *trigger_id,
			      const struct store_sample_row *row)
{
	uint64_t total;
	int err;

	if (!st)
		return -EINVAL;
	/* Raised samples are kept only for requests: a trace (and span) is required. */
	if (!valid_trigger_id(trigger_id) || !valid_sample(st, row, &total) ||
	    trace_zero(row->trace_id))
		return refuse(st);
	if (rows_full(st))
		return refuse_full(st);
	err = copy_put_trigger_sample(&st->trigger_samples, st->format, trigger_id, row, total);
	if (err)
		return err;
	st->cur.trigger_rows++;
	st->cur.trigger_samples += total;
	note_time(st, row->bucket_us);
	return 0;
}

/* Validates an off-CPU row; *total receives its microseconds. */
static bool valid_offcpu(const struct store *st, const struct store_offcpu_row *r, uint64_t *total)
{
	if (!r || r->n < 1 || r->n > STORE_MAX_ROW_STACKS || !r->stacks || !r->us ||
	    r->source_id == 0 || trace_zero(r->trace_id) != (r->span_id == 0) ||
	    (r->kind != STORE_OFFCPU_BLOCKED && r->kind != STORE_OFFCPU_RUNQ) ||
	    !valid_time(st, r->bucket_us))
		return false;
	*total = 0;
	for (uint32_t i = 0; i < r->n; i++) {
		if (r->us[i] < 1 || r->us[i] > INT32_MAX)
			return false;
		*total += r->us[i];
	}
	return true;
}

int store_add_offcpu(struct store *st, const struct store_offcpu_row *row)
{
	uint64_t total;
	int err;

	if (!st)
		return -EINVAL;
	if (!valid_offcpu(st, row, &total))
		return refuse(st);
	if (rows_full(st))
		return refuse_full(st);
	err = copy_put_offcpu(&st->offcpu, st->format, row);
	if (err)
		return err;
	st->cur.offcpu_rows++;
	st->cur.offcpu_us += total;
	note_time(st, row->bucket_us);
	return 0;
}

/* Validates a GPU row; *total receives its launches. */
static bool valid_gpu(const struct store *st, const struct store_gpu_row *r, uint64_t *total)
{
	if (!r || r->n < 1 || r->n > STORE_MAX_ROW_STACKS || !r->stacks || !r->launches ||
	    !r->gpu_ns || r->source_id == 0 || trace_zero(r->trace_id) != (r->span_id == 0) ||
	    !valid_time(st, r->bucket_us))
		return false;
	*total = 0;
	for (uint32_t i = 0; i < r->n; i++) {
		if (!r->stacks[i] || r->launches[i] < 1 || r->launches[i] > INT32_MAX ||
		    r->gpu_ns[i] > INT64_MAX)
			return false;
		*total += r->launches[i];
	}
	return true;
}

int store_add_gpu(struct store *st, const struct store_gpu_row *row)
{
	uint64_t total;
	int err;

	if (!st)
		return -EINVAL;
	if (!valid_gpu(st, row, &total))
		return refuse(st);
	if (rows_full(st))
		return refuse_full(st);
	err = copy_put_gpu(&st->gpu, st->format, row);
	if (err)
		return err;
	st->cur.gpu_rows++;
	st->cur.gpu_launches += total;
	note_time(st, row->bucket_us);
	return 0;
}

int store_add_request(struct store *st, const struct store_request *req)
{
	int err;

	if (!st)
		return -EINVAL;
	if (!req || req->duration_us < 0 || req->source_id == 0 || trace_zero(req->trace_id) ||
	    req->span_id == 0 || req->status_code < 0 || req->status_code > STORE_MAX_STATUS ||
	    req->context_source > STORE_CTX_SOURCE_MAX || !valid_time(st, req->start_us))
		return refuse(st);
	if (rows_full(st))
		return refuse_full(st);
	err = copy_put_request(&st->requests, st->format, req);
	if (err)
		return err;
	st->cur.request_rows++;
	note_time(st, req->start_us);
	return 0;
}

size_t store_pending_rows(const struct store *st)
{
	return st ? st->cur.sample_rows + st->cur.request_rows + st->cur.trigger_rows +
			st->cur.offcpu_rows + st->cur.gpu_rows
		  : 0;
}

void store_get_stats(const struct store *st, struct store_stats *out)
{
	if (st && out)
		*out = st->stats;
}
