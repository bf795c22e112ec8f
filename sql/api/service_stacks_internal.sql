-- service_stacks_internal.sql: _service_stacks (taken from migration 004).

-- The samples of one service in [from_time, until_time) per stack id, all
-- of them or (only_requests) those tagged with a trace.
CREATE OR REPLACE FUNCTION traceprof._service_stacks(p_service text, from_time timestamptz,
                                          until_time timestamptz, only_requests boolean)
RETURNS TABLE (stack_id bigint, samples bigint, cpu_ms double precision)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    srcs bigint[] := traceprof.service_sources(p_service);
BEGIN
    IF cardinality(srcs) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT x.stack_id, sum(x.n)::bigint, sum(x.n * 1000.0::float8 / x.hz)
      FROM (SELECT s.hz, u.stack_id, sum(coalesce(u.n, 1)) AS n
              FROM traceprof.samples s
              CROSS JOIN LATERAL unnest(s.stacks, s.counts) AS u(stack_id, n)
             WHERE s.source_id = ANY (srcs)
               AND s.bucket >= from_time AND s.bucket < until_time
               AND (NOT only_requests OR s.trace_id IS NOT NULL)
             GROUP BY s.hz, u.stack_id) x
     GROUP BY x.stack_id;
END $$;
