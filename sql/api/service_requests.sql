-- service_requests.sql: service_requests (taken from migration 009).

-- The requests (spans) of a service that started in [from_time,
-- until_time) and match a cohort spec (005's keys: min_duration,
-- max_duration, status, route, method), newest first, at most lim. samples:
-- the span's samples as the one-trace functions count them (raised rows
-- per source when the trace has any; _trace_rows, 007).
CREATE OR REPLACE FUNCTION traceprof.service_requests(service text, from_time timestamptz, until_time timestamptz,
                                           filter jsonb DEFAULT '{}', lim integer DEFAULT 50)
RETURNS TABLE (start_time timestamptz, trace_id text, span_id text, duration_ms double precision,
               status_code smallint, method text, route text, samples bigint, cpu_ms double precision)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    svc text := traceprof._arg_required($1, 'service_requests', 'service');
    f traceprof.cohort_filter := traceprof.parse_cohort(coalesce($4, '{}'), 'filter');
    srcs bigint[];
BEGIN
    PERFORM traceprof._arg_range($2, $3, 'service_requests');
    IF $5 IS NULL OR $5 < 1 THEN
        RAISE EXCEPTION 'service_requests: lim must be a positive number, not %', coalesce($5::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    srcs := traceprof.service_sources(svc);
    RETURN QUERY
    SELECT r.start_time, traceprof.trace_id_text(r.trace_id), traceprof.span_id_text(r.span_id),
           r.duration_us / 1000.0::float8, r.status_code,
           coalesce(rt.method, ''), coalesce(rt.route, ''),
           coalesce(c.n, 0)::bigint, coalesce(c.ms, 0)
      FROM (SELECT q.* FROM traceprof.requests q
             WHERE q.source_id = ANY (srcs) AND q.start_time >= $2 AND q.start_time < $3
               AND (f.min_us IS NULL OR q.duration_us >= f.min_us)
               AND (f.max_us IS NULL OR q.duration_us < f.max_us)
               AND (f.statuses IS NULL OR q.status_code::integer <@ f.statuses)
               AND (f.route_ids IS NULL OR q.route_id = ANY (f.route_ids))
             ORDER BY q.start_time DESC, q.trace_id, q.span_id
             LIMIT $5) r
      LEFT JOIN traceprof.routes rt ON rt.route_id = r.route_id
      LEFT JOIN LATERAL (
            SELECT sum(coalesce(u.n, 1)) AS n, sum(traceprof.cpu_ms(coalesce(u.n, 1), t.hz)) AS ms
              FROM traceprof._trace_rows(r.trace_id) t
             CROSS JOIN LATERAL unnest(t.stacks, t.counts) AS u(stack_id, n)
             WHERE t.span_id = r.span_id AND t.source_id = ANY (srcs)) c ON true
     ORDER BY r.start_time DESC, 2, 3;
END $$;
