/*
 * store_flush.c - store_flush(): write everything a store buffered in one
 * transaction.
 *
 * Steps (see store.c for the whole data flow):
 *   1. create the day partitions the buffered rows need, in their own short
 *      statement before the transaction: creating a partition takes an
 *      ACCESS EXCLUSIVE lock on the parent, which must not be held for a
 *      whole COPY; days already seen are remembered, so in the steady state
 *      this costs no round trip;
 *   2. BEGIN; ON COMMIT DROP temp tables for the dictionaries with new
 *      entries (created only when there are some: after start-up almost
 *      never, which also keeps the catalogs quiet); read the transaction id;
 *   3. COPY each such dictionary into its temp table, then one
 *      INSERT ... SELECT ... ON CONFLICT DO NOTHING per dictionary;
 *   4. COPY samples, requests, trigger_samples and offcpu straight into the
 *      partitioned parents;
 *   5. COMMIT; only now are the sent bytes dropped from the buffers.
 * A failure at any step rolls back and keeps the buffers. A connection lost
 * during COMMIT leaves the outcome unknown; the next flush asks
 * pg_xact_status() and drops (committed) or resends (aborted) that batch.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store_internal.h"
#include "traceprof/log.h"

struct dict_sql {
	const char *table;     /* name of the traceprof table and temp table suffix */
	const char *temp_cols; /* column definitions of the temp table */
	const char *cols;      /* column list, in copy_put_* order */
};

static const struct dict_sql dict_sql[DICT_KINDS] = {
    {"functions", "function_id bigint, name text, module text, kind smallint",
     COPY_FUNCTIONS_COLUMNS},
    {"frames",
     "frame_id bigint, function_id bigint, build_id text, file text, line integer, "
     "address bigint",
     COPY_FRAMES_COLUMNS},
    {"stacks", "stack_id bigint, frame_ids bigint[]", COPY_STACKS_COLUMNS},
    {"sources",
     "source_id bigint, service text, namespace text, pod text, container text, "
     "node text, build_id text, labels jsonb",
     COPY_SOURCES_COLUMNS},
    {"routes", "route_id bigint, method text, route text", COPY_ROUTES_COLUMNS},
};

/* ---- flush ---- */

static void snapshot(const struct store *st, struct pending *m)
{
	*m = st->cur;
	m->sample_bytes = st->samples.len;
	m->request_bytes = st->requests.len;
	m->trigger_bytes = st->trigger_samples.len;
	m->offcpu_bytes = st->offcpu.len;
	m->gpu_bytes = st->gpu.len;
	for (int k = 0; k < DICT_KINDS; k++)
		m->dict_bytes[k] = st->dict[k].len;
}

/*
 * Capacity an emptied buffer keeps: what this flush needed, with room to
 * spare, so a steady workload never reallocates; only a one-off spike above
 * STORE_KEEP_BUFFER is given back.
 */
static size_t keep(size_t used)
{
	return used * 4 > STORE_KEEP_BUFFER ? used * 4 : STORE_KEEP_BUFFER;
}

/* What m describes is committed: count it and drop it from the buffers. */
static void forget_written(struct store *st, const struct pending *m)
{
	copybuf_drop_prefix(&st->samples, m->sample_bytes);
	copybuf_drop_prefix(&st->requests, m->request_bytes);
	copybuf_drop_prefix(&st->trigger_samples, m->trigger_bytes);
	copybuf_drop_prefix(&st->offcpu, m->offcpu_bytes);
	copybuf_drop_prefix(&st->gpu, m->gpu_bytes);
	st->cur.gpu_rows -= m->gpu_rows;
	st->cur.gpu_launches -= m->gpu_launches;
	st->stats.gpu_rows_written += m->gpu_rows;
	st->stats.gpu_launches_written += m->gpu_launches;
	st->cur.sample_rows -= m->sample_rows;
	st->cur.request_rows -= m->request_rows;
	st->cur.trigger_rows -= m->trigger_rows;
	st->cur.offcpu_rows -= m->offcpu_rows;
	st->cur.offcpu_us -= m->offcpu_us;
	st->cur.samples -= m->samples;
	st->cur.trigger_samples -= m->trigger_samples;
	st->stats.sample_rows_written += m->sample_rows;
	st->stats.samples_written += m->samples;
	st->stats.requests_written += m->request_rows;
	st->stats.trigger_rows_written += m->trigger_rows;
	st->stats.trigger_samples_written += m->trigger_samples;
	st->stats.offcpu_rows_written += m->offcpu_rows;
	st->stats.offcpu_us_written += m->offcpu_us;
	for (int k = 0; k < DICT_KINDS; k++) {
		copybuf_drop_prefix(&st->dict[k], m->dict_bytes[k]);
		st->cur.dict_entries[k] -= m->dict_entries[k];
		st->dict_total -= m->dict_entries[k];
		st->stats.dict_entries_written += m->dict_entries[k];
		copybuf_trim(&st->dict[k], keep(m->dict_bytes[k]));
	}
	copybuf_trim(&st->samples, keep(m->sample_bytes));
	copybuf_trim(&st->requests, keep(m->request_bytes));
	copybuf_trim(&st->trigger_samples, keep(m->trigger_bytes));
	copybuf_trim(&st->offcpu, keep(m->offcpu_bytes));
	copybuf_trim(&st->gpu, keep(m->gpu_bytes));
	if (!st->cur.sample_rows && !st->cur.request_rows && !st->cur.trigger_rows &&
	    !st->cur.offcpu_rows && !st->cur.gpu_rows) {
		st->min_us = INT64_MAX;
		st->max_us = INT64_MIN;
	}
	st->stats.flushes++;
}

static bool day_known(const struct store *st, int32_t day)
{
	for (size_t i = 0; i < st->ndays; i++)
		if (st->days[i] == day)
			return true;
	return false;
}

static int64_t floor_day(int64_t us)
{
	return us >= 0 ? us / STORE_DAY_US : -((-us + STORE_DAY_US - 1) / STORE_DAY_US);
}

/* Creates the partitions of days between the buffered rows' extremes not yet known. */
static int ensure_partitions(struct store *st)
{
	int32_t first, last, from = 0, until = -1;
	int err = 0;

	if (st->min_us > st->max_us)
		return 0;
	first = (int32_t)floor_day(st->min_us);
	last = (int32_t)floor_day(st->max_us);
	for (int32_t d = first; d <= last; d++) {
		if (day_known(st, d))
			continue;
		if (until < from)
			from = d;
		until = d;
	}
	for (int32_t a = from; !err && a <= until; a += STORE_PARTITION_CHUNK) {
		int32_t b =
		    a + STORE_PARTITION_CHUNK - 1 < until ? a + STORE_PARTITION_CHUNK - 1 : until;
		char pa[16], pb[16];
		const char *params[2] = {pa, pb};
		PGresult *res;

		snprintf(pa, sizeof(pa), "%d", a);
		snprintf(pb, sizeof(pb), "%d", b);
		res = PQexecParams(st->conn,
				   "SELECT traceprof.create_partitions(to_timestamp($1::bigint * "
				   "86400), to_timestamp($2::bigint * 86400))",
				   2, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			err = store_step_failed(st, "creating partitions", res);
		PQclear(res);
	}
	if (err)
		return err;
	for (int32_t d = from; d <= until; d++) {
		if (st->ndays == STORE_DAYS_CACHED)
			st->ndays = 0;
		if (!day_known(st, d))
			st->days[st->ndays++] = d;
	}
	return 0;
}

static int exec_ok(struct store *st, const char *sql, const char *what)
{
	PGresult *res = PQexec(st->conn, sql);
	int err = 0;

	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
		err = store_step_failed(st, what, res);
	PQclear(res);
	return err;
}

static int put_copy(struct store *st, const char *data, size_t len)
{
	for (size_t off = 0; off < len; off += STORE_COPY_CHUNK) {
		size_t n = len - off < STORE_COPY_CHUNK ? len - off : STORE_COPY_CHUNK;

		if (PQputCopyData(st->conn, data + off, (int)n) != 1)
			return -EIO;
	}
	st->flush_bytes += len;
	return 0;
}

/* Runs one COPY ... FROM STDIN with len bytes of buf as its rows. */
static int copy_in(struct store *st, const char *table, const char *cols, const struct copybuf *buf,
		   size_t len)
{
	char sql[256];
	PGresult *res;
	int err;

	snprintf(sql, sizeof(sql), "COPY %s (%s) FROM STDIN%s", table, cols,
		 st->format == COPY_BINARY ? " (FORMAT binary)" : "");
	res = PQexec(st->conn, sql);
	if (PQresultStatus(res) != PGRES_COPY_IN) {
		err = store_step_failed(st, sql, res);
		PQclear(res);
		return err;
	}
	PQclear(res);
	err = 0;
	if (st->format == COPY_BINARY)
		err = put_copy(st, copy_binary_header, sizeof(copy_binary_header));
	if (!err)
		err = put_copy(st, buf->data, len);
	if (!err && st->format == COPY_BINARY)
		err = put_copy(st, copy_binary_trailer, sizeof(copy_binary_trailer));
	PQputCopyEnd(st->conn, err ? "traceprof store: sending failed" : NULL);
	res = PQgetResult(st->conn);
	err = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : store_step_failed(st, sql, res);
	PQclear(res);
	while ((res = PQgetResult(st->conn)))
		PQclear(res);
	return err;
}

/* BEGIN, temp tables for the dictionaries in m, and the transaction id. */
static int begin(struct store *st, const struct pending *m, char *xid, size_t xid_len)
{
	char sql[2048] = "BEGIN;";
	size_t n = strlen(sql);
	PGresult *res;
	int err = 0;

	for (int k = 0; k < DICT_KINDS; k++)
		if (m->dict_entries[k])
			n += snprintf(sql + n, sizeof(sql) - n,
				      "CREATE TEMP TABLE tp_new_%s (%s) ON COMMIT DROP;",
				      dict_sql[k].table, dict_sql[k].temp_cols);
	snprintf(sql + n, sizeof(sql) - n, "SELECT pg_current_xact_id()::text");
	res = PQexec(st->conn, sql);
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		snprintf(xid, xid_len, "%s", PQgetvalue(res, 0, 0));
	else
		err = store_step_failed(st, "begin", res);
	PQclear(res);
	return err;
}

static int copy_dictionaries(struct store *st, const struct pending *m)
{
	char sql[4096] = "";
	size_t n = 0;
	int err;

	for (int k = 0; k < DICT_KINDS; k++) {
		char temp[64];

		if (!m->dict_entries[k])
			continue;
		snprintf(temp, sizeof(temp), "tp_new_%s", dict_sql[k].table);
		err = copy_in(st, temp, dict_sql[k].cols, &st->dict[k], m->dict_bytes[k]);
		if (err)
			return err;
		n += snprintf(sql + n, sizeof(sql) - n,
			      "INSERT INTO traceprof.%s (%s) SELECT %s FROM %s "
			      "ON CONFLICT DO NOTHING;",
			      dict_sql[k].table, dict_sql[k].cols, dict_sql[k].cols, temp);
	}
	return n ? exec_ok(st, sql, "inserting dictionary entries") : 0;
}

/* One attempt: everything in the buffers now, in one transaction. */
static int flush_once(struct store *st)
{
	struct pending m;
	char xid[32];
	PGresult *res;
	int err;

	snapshot(st, &m);
	st->flush_bytes = 0;
	st->missing_partition = false;
	err = ensure_partitions(st);
	if (err)
		return err;
	err = begin(st, &m, xid, sizeof(xid));
	if (!err)
		err = copy_dictionaries(st, &m);
	if (!err && m.sample_rows)
		err = copy_in(st, "traceprof.samples", COPY_SAMPLES_COLUMNS, &st->samples,
			      m.sample_bytes);
	if (!err && m.request_rows)
		err = copy_in(st, "traceprof.requests", COPY_REQUESTS_COLUMNS, &st->requests,
			      m.request_bytes);
	if (!err && m.trigger_rows)
		err = copy_in(st, "traceprof.trigger_samples", COPY_TRIGGER_SAMPLES_COLUMNS,
			      &st->trigger_samples, m.trigger_bytes);
	if (!err && m.offcpu_rows)
		err = copy_in(st, "traceprof.offcpu", COPY_OFFCPU_COLUMNS, &st->offcpu,
			      m.offcpu_bytes);
	if (!err && m.gpu_rows)
		err = copy_in(st, "traceprof.gpu", COPY_GPU_COLUMNS, &st->gpu, m.gpu_bytes);
	if (!err && st->opts.before_commit && st->opts.before_commit(st->opts.commit_ctx, xid)) {
		store_set_error(st, "flush to %s: the batch was held back before COMMIT",
				st->describe);
		err = -EIO;
	}
	if (err) {
		if (PQstatus(st->conn) == CONNECTION_OK)
			PQclear(PQexec(st->conn, "ROLLBACK"));
		return err;
	}
	res = PQexec(st->conn, "COMMIT");
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		err = store_step_failed(st, "commit", res);
		PQclear(res);
		if (err == -ECONNRESET) {
			/* The server may have committed before the connection dropped. */
			st->commit_unknown = true;
			st->inflight = m;
			st->inflight_bytes = st->flush_bytes;
			snprintf(st->inflight_xid, sizeof(st->inflight_xid), "%s", xid);
		}
		return err;
	}
	PQclear(res);
	st->stats.bytes_sent += st->flush_bytes;
	forget_written(st, &m);
	return 0;
}

/* After a connection lost during COMMIT: did that transaction commit? */
static int resolve_commit(struct store *st)
{
	const char *params[1] = {st->inflight_xid};
	PGresult *res;
	const char *status;
	int err = 0;

	res = PQexecParams(st->conn, "SELECT pg_xact_status($1::xid8)", 1, NULL, params, NULL, NULL,
			   0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK && PQstatus(st->conn) == CONNECTION_BAD) {
		err = store_step_failed(st, "checking the interrupted commit", res);
		PQclear(res);
		return err;
	}
	status = PQresultStatus(res) == PGRES_TUPLES_OK && !PQgetisnull(res, 0, 0)
		     ? PQgetvalue(res, 0, 0)
		     : "unknown";
	if (strcmp(status, "committed") == 0) {
		st->stats.bytes_sent += st->inflight_bytes;
		forget_written(st, &st->inflight);
		st->commit_unknown = false;
	} else if (strcmp(status, "in progress") == 0) {
		store_set_error(
		    st,
		    "flush to %s: the transaction %s interrupted during COMMIT is still "
		    "in progress on the server; flush again later",
		    st->describe, st->inflight_xid);
		err = -EAGAIN;
	} else {
		if (strcmp(status, "aborted"))
			log_warn("store: cannot tell whether transaction %s committed on %s (%s); "
				 "sending its rows again",
				 st->inflight_xid, st->describe, PQresultErrorMessage(res));
		st->commit_unknown = false;
	}
	PQclear(res);
	return err;
}

int store_xact_status(struct store *st, const char *xid)
{
	const char *params[1] = {xid};
	const char *status;
	PGresult *res;
	int err;

	if (!st || !xid || !*xid || strspn(xid, "0123456789") != strlen(xid))
		return -EINVAL;
	if (!st->conn || PQstatus(st->conn) != CONNECTION_OK) {
		store_set_error(st, "checking transaction %s on %s: not connected", xid,
				st->describe);
		return -ECONNRESET;
	}
	res = PQexecParams(st->conn, "SELECT pg_xact_status($1::xid8)", 1, NULL, params, NULL, NULL,
			   0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		/* "transaction ID ... is in the future": not of this cluster */
		err = PQstatus(st->conn) == CONNECTION_BAD
			  ? store_step_failed(st, "checking a transaction's status", res)
			  : -ENOENT;
		PQclear(res);
		return err;
	}
	status = PQgetisnull(res, 0, 0) ? "" : PQgetvalue(res, 0, 0);
	err = strcmp(status, "committed") == 0	   ? 1
	      : strcmp(status, "aborted") == 0	   ? 0
	      : strcmp(status, "in progress") == 0 ? -EAGAIN
						   : -ENOENT;
	PQclear(res);
	return err;
}

int store_flush(struct store *st)
{
	int err = 0;

	if (!st)
		return -EINVAL;
	if (!st->conn || PQstatus(st->conn) != CONNECTION_OK) {
		store_set_error(st, "flush to %s: not connected; call store_reconnect()",
				st->describe);
		err = -ECONNRESET;
	}
	if (!err && st->commit_unknown)
		err = resolve_commit(st);
	if (!err && (st->cur.sample_rows || st->cur.request_rows || st->cur.trigger_rows ||
		     st->cur.offcpu_rows || st->cur.gpu_rows || st->dict_total)) {
		err = flush_once(st);
		if (err == -EIO && st->missing_partition) {
			/* Someone dropped a partition we had seen: look again and retry. */
			st->ndays = 0;
			err = flush_once(st);
		}
	}
	if (err)
		st->stats.flush_errors++;
	return err;
}
