/*
 * triggers_db.c - see triggers_db.h. Every statement takes its values as
 * parameters; nothing of a manifest is spliced into SQL text.
 */
#include "triggers_db.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

#include "jsonbuf.h"
#include "traceprof/log.h"

/* Rows that are not detached: the newest per (namespace, name). */
#define CURRENT_ROWS                                                                               \
	"SELECT DISTINCT ON (namespace, name) * FROM traceprof.trace_profile_triggers "            \
	"WHERE coalesce(reason, '') NOT LIKE '%manifest removed' "                                 \
	"ORDER BY namespace, name, created_at DESC"

static bool ok(PGconn *conn, PGresult *res, const char *what)
{
	ExecStatusType st = PQresultStatus(res);

	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
		return true;
	log_error("database: %s failed: %s", what, PQerrorMessage(conn));
	return false;
}

static PGresult *exec_params(PGconn *conn, const char *sql, int n, const char *const *params)
{
	return PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
}

/* (namespace, name) pairs, sorted, to look up thousands of triggers fast. */
struct name_index {
	const char **ns;   /* namespaces */
	const char **name; /* names, same order */
	size_t *order;	   /* indexes into ns/name, sorted by (namespace, name) */
	size_t n;	   /* entries */
};

static const struct name_index *sorting;

static int cmp_names(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	int c = strcmp(sorting->ns[x], sorting->ns[y]);

	return c ? c : strcmp(sorting->name[x], sorting->name[y]);
}

static int name_index_sort(struct name_index *ix)
{
	ix->order = calloc(ix->n ? ix->n : 1, sizeof(*ix->order));
	if (!ix->order)
		return -ENOMEM;
	for (size_t i = 0; i < ix->n; i++)
		ix->order[i] = i;
	sorting = ix;
	qsort(ix->order, ix->n, sizeof(*ix->order), cmp_names);
	return 0;
}

/* The entry for (ns, name), or -1. */
static ssize_t name_index_find(const struct name_index *ix, const char *ns, const char *name)
{
	size_t lo = 0, hi = ix->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2, k = ix->order[mid];
		int c = strcmp(ix->ns[k], ns);

		if (!c)
			c = strcmp(ix->name[k], name);
		if (!c)
			return (ssize_t)k;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static void name_index_free(struct name_index *ix)
{
	free(ix->ns);
	free(ix->name);
	free(ix->order);
	memset(ix, 0, sizeof(*ix));
}

static int name_index_alloc(struct name_index *ix, size_t n)
{
	ix->n = n;
	ix->ns = calloc(n ? n : 1, sizeof(*ix->ns));
	ix->name = calloc(n ? n : 1, sizeof(*ix->name));
	return ix->ns && ix->name ? 0 : -ENOMEM;
}

/*
 * Marks in changed[] the triggers of m whose row needs writing: no current
 * row, another spec, or another fixed id. One statement for all of them, so
 * a pass over thousands of unchanged triggers is one round trip.
 */
static int find_changed(PGconn *conn, const struct manifest_list *m, bool *changed)
{
	static const char sql[] =
	    "SELECT (u.o - 1)::text FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY u(e, o) "
	    "LEFT JOIN (" CURRENT_ROWS ") c "
	    "  ON c.namespace = u.e->>'n' AND c.name = u.e->>'m' "
	    "WHERE c.trigger_id IS NULL OR c.spec IS DISTINCT FROM u.e->'s' "
	    "   OR c.trigger_id <> coalesce(u.e->>'i', c.trigger_id)";
	struct jsonbuf b = {0};
	const char *params[1];
	PGresult *res;
	char *text;
	int rc = 0;

	jsonbuf_printf(&b, "[");
	for (size_t i = 0; i < m->n; i++) {
		const struct manifest_trigger *t = &m->items[i];
		char *spec = manifest_spec_json(t);

		if (!spec) {
			jsonbuf_free(&b);
			return -ENOMEM;
		}
		jsonbuf_printf(&b, "%s{\"n\": ", i ? ", " : "");
		jsonbuf_str(&b, t->namespace_);
		jsonbuf_printf(&b, ", \"m\": ");
		jsonbuf_str(&b, t->name);
		jsonbuf_printf(&b, ", \"i\": ");
		jsonbuf_str(&b, t->id);
		jsonbuf_printf(&b, ", \"s\": %s}", spec);
		free(spec);
	}
	jsonbuf_printf(&b, "]");
	if (!(text = jsonbuf_take(&b)))
		return -ENOMEM;
	params[0] = text;
	res = exec_params(conn, sql, 1, params);
	if (!ok(conn, res, "comparing triggers")) {
		rc = -EIO;
	} else {
		for (int r = 0; r < PQntuples(res); r++) {
			long k = strtol(PQgetvalue(res, r, 0), NULL, 10);

			if (k >= 0 && (size_t)k < m->n)
				changed[k] = true;
		}
	}
	PQclear(res);
	free(text);
	return rc;
}

/* namespace/name/8 hex digits: a new id for every first sighting. */
static void mint_id(const struct manifest_trigger *t, char *out, size_t len)
{
	uint32_t r = 0;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)rand();
	snprintf(out, len, "%s/%s/%08x", t->namespace_, t->name, r);
}

/*
 * Inserts or updates the row of one manifest; existing is its current id or
 * NULL. A new row's times come from one clock_timestamp(): deadline -
 * created_at is exactly the timeout, and rows inserted one after another
 * in a pass keep their order (the per-service limit goes by created_at).
 */
static int upsert(PGconn *conn, const struct manifest_trigger *t, const char *existing)
{
	static const char sql[] =
	    "INSERT INTO traceprof.trace_profile_triggers AS t "
	    "  (trigger_id, namespace, name, service, spec, phase, frequency_hz, max_requests, "
	    "   created_at, started_at, deadline) "
	    "SELECT $1, $2, $3, $4, $5::jsonb, 'Active', $6::integer, $7::integer, c.t, c.t, "
	    "       c.t + $8::bigint * interval '1 millisecond' "
	    "FROM (SELECT clock_timestamp() AS t) c " /* one reading */
	    "ON CONFLICT (trigger_id) DO UPDATE SET "
	    "  service = EXCLUDED.service, spec = EXCLUDED.spec, "
	    "  frequency_hz = EXCLUDED.frequency_hz, "
	    "  max_requests = greatest(EXCLUDED.max_requests, t.collected_requests), "
	    "  deadline = t.created_at + $8::bigint * interval '1 millisecond', "
	    "  generation = t.generation + 1, "
	    "  phase = CASE WHEN t.phase = 'Active' "
	    "               AND t.collected_requests >= EXCLUDED.max_requests "
	    "               THEN 'Completed' ELSE t.phase END, "
	    "  completed_at = CASE WHEN t.phase = 'Active' "
	    "               AND t.collected_requests >= EXCLUDED.max_requests "
	    "               THEN now() ELSE t.completed_at END "
	    "WHERE t.spec IS DISTINCT FROM EXCLUDED.spec "
	    "RETURNING (xmax = 0) AS inserted, trigger_id, "
	    "  max_requests <> $7::integer AS capped";
	char id[MANIFEST_NAME_MAX * 2 + 16], freq[16], max[16], timeout[32];
	char *spec = manifest_spec_json(t);
	const char *params[8];
	PGresult *res;
	int rc = 0;

	if (!spec)
		return -ENOMEM;
	if (existing)
		snprintf(id, sizeof(id), "%s", existing);
	else if (t->id)
		snprintf(id, sizeof(id), "%s", t->id);
	else
		mint_id(t, id, sizeof(id));
	snprintf(freq, sizeof(freq), "%u", t->frequency_hz);
	snprintf(max, sizeof(max), "%u", t->max_requests);
	snprintf(timeout, sizeof(timeout), "%llu", (unsigned long long)t->timeout_ms);
	params[0] = id;
	params[1] = t->namespace_;
	params[2] = t->name;
	params[3] = t->service;
	params[4] = spec;
	params[5] = freq;
	params[6] = max;
	params[7] = timeout;
	res = exec_params(conn, sql, 8, params);
	if (!ok(conn, res, "saving a trigger")) {
		rc = -EIO;
	} else if (PQntuples(res) == 1) {
		bool inserted = PQgetvalue(res, 0, 0)[0] == 't';

		log_info("trigger %s id=%s file=%s service=%s", inserted ? "created" : "updated",
			 id, t->file, t->service ? t->service : "");
		if (PQgetvalue(res, 0, 2)[0] == 't')
			log_warn(
			    "trigger maxRequests below what it collected: kept at the collected "
			    "count id=%s",
			    id);
	}
	PQclear(res);
	free(spec);
	return rc;
}

static int remove_row(PGconn *conn, const char *id)
{
	static const char sql[] =
	    "UPDATE traceprof.trace_profile_triggers SET "
	    "  phase = CASE WHEN phase IN ('Active', 'Pending') THEN 'Failed' ELSE phase END, "
	    "  reason = CASE WHEN phase IN ('Active', 'Pending') THEN 'manifest removed' "
	    "                ELSE coalesce(reason || '; ', '') || 'manifest removed' END, "
	    "  completed_at = coalesce(completed_at, now()) "
	    "WHERE trigger_id = $1";
	const char *params[1] = {id};
	PGresult *res = exec_params(conn, sql, 1, params);
	int rc = ok(conn, res, "ending a removed trigger") ? 0 : -EIO;

	PQclear(res);
	if (!rc)
		log_info("trigger manifest removed id=%s", id);
	return rc;
}

/* Later Active triggers of a service beyond the limit turn Rejected. */
static int enforce_limit(PGconn *conn)
{
	char sql[1024];
	PGresult *res;
	int rc;

	snprintf(
	    sql, sizeof(sql),
	    "UPDATE traceprof.trace_profile_triggers t SET phase = 'Rejected', "
	    "  reason = format('service %%s already has %d active triggers', t.service), "
	    "  completed_at = now() "
	    "FROM (SELECT trigger_id, row_number() OVER (PARTITION BY service "
	    "        ORDER BY created_at, trigger_id) AS rn "
	    "      FROM traceprof.trace_profile_triggers "
	    "      WHERE phase = 'Active' AND service IS NOT NULL) a "
	    "WHERE t.trigger_id = a.trigger_id AND a.rn > %d RETURNING t.trigger_id, t.service",
	    TRIGGERS_PER_SERVICE, TRIGGERS_PER_SERVICE);
	res = PQexec(conn, sql);
	rc = ok(conn, res, "limiting active triggers per service") ? 0 : -EIO;
	for (int i = 0; !rc && i < PQntuples(res); i++)
		log_warn(
		    "trigger rejected: service already has %d active triggers id=%s service=%s",
		    TRIGGERS_PER_SERVICE, PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
	PQclear(res);
	return rc;
}

static int simple(PGconn *conn, const char *sql, const char *what)
{
	PGresult *res = PQexec(conn, sql);
	int rc = ok(conn, res, what) ? 0 : -EIO;

	PQclear(res);
	return rc;
}

/* Inside the pass's transaction: -ESTALE when the current term is not fence->term. */
static int check_term(PGconn *conn, struct triggers_db_fence *fence)
{
	PGresult *res;
	uint64_t cur;

	if (!fence || !fence->term)
		return 0;
	res = PQexec(conn, "SELECT traceprof.controller_term()");
	if (!ok(conn, res, "reading the controller term")) {
		PQclear(res);
		return -EIO;
	}
	cur = PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)
		  ? strtoull(PQgetvalue(res, 0, 0), NULL, 10)
		  : 0;
	PQclear(res);
	if (cur == fence->term)
		return 0;
	fence->newer = cur;
	return -ESTALE;
}

int triggers_db_take_term(PGconn *conn, const char *identity, uint64_t *term)
{
	const char *params[1] = {identity};
	PGresult *res = exec_params(conn, "SELECT traceprof.controller_take_term($1)", 1, params);

	if (!ok(conn, res, "taking a controller term")) {
		PQclear(res);
		return -EIO;
	}
	*term = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return 0;
}

/* Whether a row of (ns, name, id) may be ended as removed. */
static bool confirmed_gone(struct triggers_db_fence *fence, const char *ns, const char *name,
			   const char *id)
{
	if (!fence || !fence->gone || fence->gone(fence->arg, ns, name, id))
		return true;
	log_info("trigger kept: its object still exists id=%s", id);
	return false;
}

int triggers_db_sync(PGconn *conn, const struct manifest_list *m, bool allow_removals,
		     struct triggers_db_fence *fence)
{
	struct name_index rows = {0}, defined = {0};
	bool *changed = calloc(m->n ? m->n : 1, sizeof(*changed));
	PGresult *cur = NULL;
	int rc, nrows;

	if (!changed)
		return -ENOMEM;
	if ((rc = simple(conn, "BEGIN", "starting a transaction"))) {
		free(changed);
		return rc;
	}
	if ((rc = check_term(conn, fence))) {
		PQclear(PQexec(conn, "ROLLBACK"));
		free(changed);
		return rc;
	}
	cur = PQexec(conn, "SELECT trigger_id, namespace, name FROM (" CURRENT_ROWS ") c");
	if (!ok(conn, cur, "reading triggers")) {
		rc = -EIO;
		goto out_rollback;
	}
	nrows = PQntuples(cur);
	/* the current rows and what the manifests define (valid or named by an error) */
	if ((rc = name_index_alloc(&rows, (size_t)nrows)) ||
	    (rc = name_index_alloc(&defined, m->n + m->n_errors)))
		goto out_rollback;
	for (int r = 0; r < nrows; r++) {
		rows.ns[r] = PQgetvalue(cur, r, 1);
		rows.name[r] = PQgetvalue(cur, r, 2);
	}
	for (size_t i = 0; i < m->n; i++) {
		defined.ns[i] = m->items[i].namespace_;
		defined.name[i] = m->items[i].name;
	}
	for (size_t i = 0; i < m->n_errors; i++) {
		defined.ns[m->n + i] = m->errors[i].namespace_;
		defined.name[m->n + i] = m->errors[i].name;
	}
	if ((rc = name_index_sort(&rows)) || (rc = name_index_sort(&defined)) ||
	    (m->n && (rc = find_changed(conn, m, changed))))
		goto out_rollback;
	for (size_t i = 0; !rc && i < m->n; i++) {
		const struct manifest_trigger *t = &m->items[i];
		const char *existing = NULL;
		ssize_t r;

		if (!changed[i])
			continue;
		if ((r = name_index_find(&rows, t->namespace_, t->name)) >= 0)
			existing = PQgetvalue(cur, (int)r, 0);
		/* the same name with another fixed id: the old object is gone */
		if (existing && t->id && strcmp(existing, t->id) != 0) {
			if (!confirmed_gone(fence, t->namespace_, t->name, existing))
				continue; /* this manifest is the stale one */
			rc = remove_row(conn, existing);
			existing = NULL;
		}
		if (!rc)
			rc = upsert(conn, t, existing);
	}
	for (int r = 0; !rc && r < nrows; r++) {
		const char *ns = PQgetvalue(cur, r, 1), *name = PQgetvalue(cur, r, 2);

		/* an error with a readable name keeps its row as it is */
		if (name_index_find(&defined, ns, name) >= 0)
			continue;
		if (!allow_removals) {
			log_debug("trigger kept: some manifest files cannot be read id=%s",
				  PQgetvalue(cur, r, 0));
			continue;
		}
		if (!confirmed_gone(fence, ns, name, PQgetvalue(cur, r, 0)))
			continue;
		rc = remove_row(conn, PQgetvalue(cur, r, 0));
	}
	if (!rc)
		rc = enforce_limit(conn);
	if (!rc)
		rc = simple(conn, "SELECT traceprof.expire_triggers()", "expiring triggers");
	if (!rc)
		rc = simple(conn, "COMMIT", "committing");
	if (!rc)
		goto out;
out_rollback:
	if (PQstatus(conn) == CONNECTION_OK)
		PQclear(PQexec(conn, "ROLLBACK"));
out:
	PQclear(cur);
	name_index_free(&rows);
	name_index_free(&defined);
	free(changed);
	return rc;
}

static char *dup_value(PGresult *res, int r, int c, bool *oom)
{
	char *s = strdup(PQgetvalue(res, r, c));

	if (!s)
		*oom = true;
	return s;
}

int triggers_db_load(PGconn *conn, struct trigger_rows *out)
{
	static const char sql[] =
	    "SELECT trigger_id, namespace, name, coalesce(service, ''), spec::text, phase, "
	    "  coalesce(reason, ''), frequency_hz, max_requests, collected_requests, "
	    "  coalesce(array_to_string(ARRAY(SELECT traceprof.trace_id_text(x) "
	    "      FROM unnest(trace_ids) WITH ORDINALITY u(x, o) ORDER BY o), ','), ''), "
	    "  (extract(epoch FROM deadline) * 1000)::bigint, "
	    "  to_char(deadline AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), "
	    "  coalesce(to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), "
	    "''), "
	    "  coalesce(to_char(completed_at AT TIME ZONE 'UTC', "
	    "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), '') "
	    "FROM (" CURRENT_ROWS ") c ORDER BY namespace, name";
	PGresult *res = PQexec(conn, sql);
	bool oom = false;
	int n;

	memset(out, 0, sizeof(*out));
	if (!ok(conn, res, "reading triggers")) {
		PQclear(res);
		return -EIO;
	}
	n = PQntuples(res);
	out->v = calloc(n ? (size_t)n : 1, sizeof(*out->v));
	if (!out->v) {
		PQclear(res);
		return -ENOMEM;
	}
	for (int r = 0; r < n; r++) {
		struct trigger_row *t = &out->v[out->n++];

		t->id = dup_value(res, r, 0, &oom);
		t->namespace_ = dup_value(res, r, 1, &oom);
		t->name = dup_value(res, r, 2, &oom);
		t->service = dup_value(res, r, 3, &oom);
		t->spec = dup_value(res, r, 4, &oom);
		t->phase = dup_value(res, r, 5, &oom);
		t->reason = dup_value(res, r, 6, &oom);
		t->frequency_hz = atoi(PQgetvalue(res, r, 7));
		t->max_requests = atoi(PQgetvalue(res, r, 8));
		t->collected = atoi(PQgetvalue(res, r, 9));
		t->trace_ids = dup_value(res, r, 10, &oom);
		t->deadline_ms = strtoll(PQgetvalue(res, r, 11), NULL, 10);
		t->deadline = dup_value(res, r, 12, &oom);
		t->started = dup_value(res, r, 13, &oom);
		t->completed = dup_value(res, r, 14, &oom);
	}
	PQclear(res);
	if (oom) {
		trigger_rows_free(out);
		return -ENOMEM;
	}
	return 0;
}

int triggers_db_reject(PGconn *conn, const char *id, const char *reason)
{
	static const char sql[] =
	    "UPDATE traceprof.trace_profile_triggers SET phase = 'Rejected', reason = $2, "
	    "  completed_at = now() WHERE trigger_id = $1 AND phase = 'Active'";
	const char *params[2] = {id, reason};
	PGresult *res = exec_params(conn, sql, 2, params);
	int rc = ok(conn, res, "rejecting a trigger") ? 0 : -EIO;

	PQclear(res);
	return rc;
}

void trigger_rows_free(struct trigger_rows *r)
{
	for (size_t i = 0; i < r->n; i++) {
		struct trigger_row *t = &r->v[i];

		free(t->id);
		free(t->namespace_);
		free(t->name);
		free(t->service);
		free(t->spec);
		free(t->phase);
		free(t->reason);
		free(t->trace_ids);
		free(t->deadline);
		free(t->started);
		free(t->completed);
	}
	free(r->v);
	memset(r, 0, sizeof(*r));
}
