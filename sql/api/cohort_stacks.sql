-- cohort_stacks.sql: cohort_stacks (taken from migration 009).

-- The samples of one cohort of a service's requests that started in
-- [from_time, until_time), per stack: the rule of compare_cohorts (005):
-- a request's samples are the samples rows of the service with its
-- (trace_id, span_id) within request_sample_window of [start, end].
-- requests: how many requests of the cohort have samples on the stack.
CREATE OR REPLACE FUNCTION traceprof.cohort_stacks(service text, from_time timestamptz, until_time timestamptz,
                                        cohort jsonb, cohort_name text DEFAULT 'cohort')
RETURNS TABLE (stack_id bigint, samples bigint, cpu_ms double precision, requests bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    svc text := traceprof._arg_required($1, 'cohort_stacks', 'service');
    f traceprof.cohort_filter := traceprof.parse_cohort($4, coalesce($5, 'cohort'));
    srcs bigint[];
    slack interval := (SELECT value::interval FROM traceprof.config WHERE key = 'request_sample_window');
BEGIN
    PERFORM traceprof._arg_range($2, $3, 'cohort_stacks');
    srcs := traceprof.service_sources(svc);
    RETURN QUERY
    SELECT u.stack_id, sum(coalesce(u.n, 1))::bigint,
           sum(traceprof.cpu_ms(coalesce(u.n, 1), s.hz)),
           count(DISTINCT (r.trace_id, r.span_id))
      FROM traceprof.requests r
      JOIN traceprof.samples s ON s.trace_id = r.trace_id AND s.span_id = r.span_id
     CROSS JOIN LATERAL unnest(s.stacks, s.counts) AS u(stack_id, n)
     WHERE r.source_id = ANY (srcs) AND r.start_time >= $2 AND r.start_time < $3
       AND (f.min_us IS NULL OR r.duration_us >= f.min_us)
       AND (f.max_us IS NULL OR r.duration_us < f.max_us)
       AND (f.statuses IS NULL OR r.status_code::integer <@ f.statuses)
       AND (f.route_ids IS NULL OR r.route_id = ANY (f.route_ids))
       AND s.source_id = ANY (srcs)
       AND s.bucket >= r.start_time - slack
       AND s.bucket <= r.start_time + r.duration_us * interval '1 microsecond' + slack
     GROUP BY u.stack_id
     ORDER BY u.stack_id;
END $$;
