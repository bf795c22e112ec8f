-- trace_rows.sql: _trace_window, _trace_rows, _trace_stacks, _trace_span_stacks (taken from migration 007).

-- Where a trace's samples are looked for: from its first request start minus
-- config trace_window_margin to its last request end plus the margin;
-- (-infinity, infinity) when it has no request rows (every partition).
CREATE OR REPLACE FUNCTION traceprof._trace_window(p_trace uuid, OUT lo timestamptz, OUT hi timestamptz)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    margin interval;
BEGIN
    SELECT min(r.start_time), max(r.start_time + r.duration_us * interval '1 microsecond')
      INTO lo, hi
      FROM traceprof.requests r
     WHERE r.trace_id = p_trace;
    IF lo IS NULL THEN
        lo := '-infinity';
        hi := 'infinity';
    ELSE
        margin := coalesce((SELECT c.value::interval FROM traceprof.config c
                             WHERE c.key = 'trace_window_margin'), interval '5 minutes');
        lo := lo - margin;
        hi := hi + margin;
    END IF;
END $$;

-- The sample rows of one trace that per-trace queries count: per source,
-- its trigger_samples rows (of one trigger, the smallest id) when it has
-- any in the trace's window, else its samples rows. raised tells which.
-- Two hash index lookups in the partitions of the window.
CREATE OR REPLACE FUNCTION traceprof._trace_rows(p_trace uuid)
RETURNS TABLE (source_id bigint, span_id bigint, hz smallint, stacks bigint[], counts integer[],
               raised boolean)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    w record;
BEGIN
    SELECT * INTO w FROM traceprof._trace_window(p_trace);
    RETURN QUERY
    WITH up AS MATERIALIZED (
        SELECT t.source_id, t.span_id, t.hz, t.stacks, t.counts, t.trigger_id
          FROM traceprof.trigger_samples t
         WHERE t.trace_id = p_trace
           AND t.bucket >= w.lo AND t.bucket <= w.hi
    ), pick AS (
        SELECT u.source_id, min(u.trigger_id COLLATE "C") AS trigger_id
          FROM up u
         GROUP BY u.source_id
    )
    SELECT u.source_id, u.span_id, u.hz, u.stacks, u.counts, true
      FROM up u
      JOIN pick p ON p.source_id = u.source_id AND p.trigger_id = u.trigger_id COLLATE "C"
    UNION ALL
    SELECT s.source_id, s.span_id, s.hz, s.stacks, s.counts, false
      FROM traceprof.samples s
     WHERE s.trace_id = p_trace
       AND s.bucket >= w.lo AND s.bucket <= w.hi
       AND NOT EXISTS (SELECT FROM pick p WHERE p.source_id = s.source_id);
END $$;

-- The samples of one trace per (span, service, stack id), read through
-- _trace_rows (raised rows per source when it has any): raw count and CPU
-- ms, each row weighted by its hz. span_id NULL: samples tagged with the
-- trace but no span. What trace_services, trace_summary and trace_stacks
-- read.
CREATE OR REPLACE FUNCTION traceprof._trace_span_stacks(p_trace uuid)
RETURNS TABLE (span_id bigint, service text, stack_id bigint, samples bigint, cpu_ms double precision)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN QUERY
    SELECT x.span_id, coalesce(src.service, '[unknown]'), x.stack_id, sum(x.n)::bigint,
           sum(x.n * 1000.0::float8 / x.hz)
      FROM (SELECT s.span_id, s.source_id, s.hz, u.stack_id, sum(coalesce(u.n, 1)) AS n
              FROM traceprof._trace_rows(p_trace) s
              CROSS JOIN LATERAL unnest(s.stacks, s.counts) AS u(stack_id, n)
             GROUP BY s.span_id, s.source_id, s.hz, u.stack_id) x
      LEFT JOIN traceprof.sources src ON src.source_id = x.source_id
     GROUP BY x.span_id, 2, x.stack_id;
END $$;

-- The same rows without the span: per (service, stack id) of one trace,
-- the raw count and CPU ms, each row weighted by its hz. service NULL:
-- every service. What trace_profile and trace_folded read.
CREATE OR REPLACE FUNCTION traceprof._trace_stacks(p_trace uuid, p_service text)
RETURNS TABLE (service text, stack_id bigint, samples bigint, cpu_ms double precision)
LANGUAGE sql STABLE AS $$
    SELECT x.service, x.stack_id, sum(x.samples)::bigint, sum(x.cpu_ms)
      FROM traceprof._trace_span_stacks(p_trace) x
     WHERE p_service IS NULL OR x.service = p_service
     GROUP BY x.service, x.stack_id
$$;
