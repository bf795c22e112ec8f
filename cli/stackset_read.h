/*
 * stackset_read.h - fill a struct tp_stackset (include/traceprof/stackset.h)
 * from the PostgreSQL store through the SQL API (docs/sql.md; the reader's
 * functions are in sql/api/, e.g. trace_stacks.sql, stack_frames.sql):
 *
 *   one trace      traceprof.trace_stacks: per span, raised rows per source
 *                  when the trace has any (as trace_profile);
 *   one service    traceprof.service_stacks over [from, until);
 *   two cohorts    traceprof.cohort_stacks per cohort spec (a in samples /
 *                  cpu_us, b in b_samples / b_cpu_us; differential).
 *
 * Frames come from traceprof.stack_frames (stacks -> frames -> functions)
 * with module, build id, file, line and address. The set's strings and
 * arrays live in one arena freed by stackset_free().
 */
#ifndef TRACEPROF_STACKSET_READ_H
#define TRACEPROF_STACKSET_READ_H

#include <stdint.h>

#include <libpq-fe.h>

#include "traceprof/stackset.h"

/* Errors: 0 on success (the set may have no rows); otherwise -EINVAL when
 * the SQL API refused an argument (bad trace id, bad cohort spec, empty
 * range), -EIO when a query failed, -ENOMEM; err then holds the message. */

/* The samples of one trace (service NULL: every service). Rows keep the
 * trace id and span id (span_id NULL: samples tagged with the trace but no
 * span). *out is set on success; the caller frees it with stackset_free. */
int stackset_read_trace(PGconn *conn, const char *trace_id, const char *service,
			struct tp_stackset **out, char *err, size_t errlen);

/* The continuous profile of a service in [from_us, until_us) (Unix
 * microseconds); rows aggregate requests (trace_id NULL). */
int stackset_read_service(PGconn *conn, const char *service, int64_t from_us, int64_t until_us,
			  struct tp_stackset **out, char *err, size_t errlen);

/* Two cohorts of a service's requests that started in [from_us, until_us),
 * given as cohort spec JSON (cohort_expr_compile): differential, a_name
 * and b_name copied into the set. */
int stackset_read_cohorts(PGconn *conn, const char *service, int64_t from_us, int64_t until_us,
			  const char *spec_a, const char *spec_b, const char *a_name,
			  const char *b_name, struct tp_stackset **out, char *err, size_t errlen);

/* Frees a set made by a stackset_read_* function; NULL is a no-op. */
void stackset_free(struct tp_stackset *set);

#endif
