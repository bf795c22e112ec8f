-- trace_services.sql: _span_verdict, _service_profiled_hz, _trace_spans, trace_services (taken from migration 006).
--
-- One trace across services, span by span.
--
-- A trace crosses services: each server span is a requests row from the
-- node that served it, and the samples taken while a thread served it are
-- tagged with the same (trace_id, span_id), possibly from another agent,
-- earlier or later than the span row. Nothing is joined at write time:
-- spans and samples meet here, at query time, by (trace_id, span_id), so
-- they may arrive in any order and either side may be missing.
--
-- Workload: the same as trace_summary: one trace, a handful of rows
-- found through the trace_id hash indexes. The samples are read once,
-- per (span, stack); per span only the leaf function of each distinct stack
-- is needed (self CPU), which is one dictionary lookup per stack, not an
-- expansion of every frame.
--
-- Verdict of a span, from its CPU share (CPU sampled in the span / its
-- duration):
--   'cpu'      share >= 50 %: the span's own CPU explains most of its time;
--   'mixed'    20 % <= share < 50 %;
--   'waiting'  share < 20 %: it spent most of its time off CPU (waiting for
--              another service, a lock, the disk) - the same 20 % line as
--              trace_summary's mostly_waiting;
--   'waiting'  also a span with no samples at all, when its service was
--              being profiled (it has samples within a minute of the span,
--              in any request or none) and the span lasted at least five
--              periods of that service's highest sampling rate in the rows
--              nearest the span (_service_profiled_hz): a thread on CPU for
--              that long would have been sampled;
--   'unknown'  no samples and no evidence that the service was profiled
--              (no samples is not evidence of waiting then), a span too
--              short to tell, no span row (no duration to compare with),
--              or a zero duration.
-- With samples present, a share under 20 % implies the span lasted at least
-- five sampling periods, so 'waiting' is never the verdict of a span too
-- short to have been sampled.

-- The verdict of a span (thresholds in the header of this file). profiled_hz:
-- for a span without samples, the highest sampling rate of its service
-- around the span (NULL: not profiled then).
CREATE OR REPLACE FUNCTION traceprof._span_verdict(span_ms double precision, cpu_ms double precision,
                                        profiled_hz integer DEFAULT NULL)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN $1 IS NULL OR $1 <= 0 THEN 'unknown'
                WHEN coalesce($2, 0) <= 0 THEN
                    CASE WHEN $3 > 0 AND $1 >= 5 * 1000.0 / $3 THEN 'waiting' ELSE 'unknown' END
                WHEN $2 >= 0.5 * $1 THEN 'cpu'
                WHEN $2 < 0.2 * $1 THEN 'waiting'
                ELSE 'mixed' END
$$;

-- The highest sampling rate of a service's samples around [t0, t1], or
-- NULL when it has none within a minute of it (not profiled then): per
-- source of the service, its 32 sample rows nearest the span's start on
-- each side (from t0 up to a minute after t1, and back to a minute before
-- t0). Bounded: a busy service has tens of thousands of rows in those two
-- minutes, and reading them all cost 40-80 ms per span without samples; a
-- source's rate is the same in neighbouring rows (its agent's base rate),
-- so the nearest rows tell it. Two short scans of samples_source_idx per
-- source.
CREATE OR REPLACE FUNCTION traceprof._service_profiled_hz(p_service text, t0 timestamptz, t1 timestamptz)
RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT max(x.hz)::integer
      FROM traceprof.sources so
     CROSS JOIN LATERAL (
           (SELECT s.hz FROM traceprof.samples s
             WHERE s.source_id = so.source_id
               AND s.bucket >= t0 AND s.bucket <= t1 + interval '1 minute'
             ORDER BY s.bucket LIMIT 32)
           UNION ALL
           (SELECT s.hz FROM traceprof.samples s
             WHERE s.source_id = so.source_id
               AND s.bucket >= t0 - interval '1 minute' AND s.bucket < t0
             ORDER BY s.bucket DESC LIMIT 32)) x
     WHERE so.service = p_service
$$;

-- One row per span of the trace and per (span id, service) of samples
-- whose span row is missing, given the trace's samples as aligned arrays
-- (the rows of _trace_span_stacks). Samples belong to the span row with
-- their span id whatever their source says; without a span row, to their
-- source's service. A span stored twice counts once (its earliest row).
-- hotspots: the top_n functions by self CPU in the span, as JSON
-- [{function, pct, ms}] (pct of the span's CPU), rounded like
-- trace_summary. Ordered by start (spans without a row last), service,
-- span id.
CREATE OR REPLACE FUNCTION traceprof._trace_spans(p_trace uuid, p_spans bigint[], p_services text[],
                                       p_stacks bigint[], p_samples bigint[],
                                       p_cpu_ms double precision[], top_n integer)
RETURNS TABLE (service text, span_id bigint, parent_span_id bigint, method text, route text,
               status integer, start_time timestamptz, span_ms double precision,
               samples bigint, cpu_ms double precision, cpu_pct double precision,
               top_function text, top_pct double precision, top_cpu_ms double precision,
               verdict text, hotspots jsonb)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH sp AS (
        SELECT DISTINCT ON (r.span_id)
               coalesce(s.service, '[unknown]') AS service, r.span_id, r.parent_span_id,
               coalesce(rt.method, '') AS method, coalesce(rt.route, '') AS route,
               r.status_code::integer AS status, r.start_time, r.duration_us / 1000.0::float8 AS span_ms
          FROM traceprof.requests r
          LEFT JOIN traceprof.sources s ON s.source_id = r.source_id
          LEFT JOIN traceprof.routes rt ON rt.route_id = r.route_id
         WHERE r.trace_id = p_trace
         ORDER BY r.span_id, r.start_time, r.duration_us DESC
    ), st AS (
        -- per (span, owning service, leaf function): self CPU
        SELECT u.span_id, coalesce(sp.service, u.service) AS service,
               coalesce(k.function_ids[cardinality(k.function_ids)], 0) AS function_id,
               sum(u.n) AS n, sum(u.ms) AS ms
          FROM unnest(p_spans, p_services, p_stacks, p_samples, p_cpu_ms) AS u(span_id, service, stack_id, n, ms)
          LEFT JOIN sp ON sp.span_id = u.span_id
          LEFT JOIN traceprof.stacks k ON k.stack_id = u.stack_id
         GROUP BY u.span_id, 2, 3
    ), fn AS (
        SELECT st.*, coalesce(f.name, '[unknown]') AS name,
               sum(st.ms) OVER w AS span_cpu, sum(st.n) OVER w AS span_samples,
               row_number() OVER (PARTITION BY st.span_id, st.service
                                  ORDER BY traceprof._cpu_us(st.ms) DESC, coalesce(f.name, '[unknown]') COLLATE "C",
                                           st.function_id) AS rank
          FROM st
          LEFT JOIN traceprof.functions f ON f.function_id = st.function_id
        WINDOW w AS (PARTITION BY st.span_id, st.service)
    ), cpu AS (
        SELECT fn.span_id, fn.service, min(fn.span_cpu) AS cpu_ms, min(fn.span_samples)::bigint AS samples,
               min(fn.name) FILTER (WHERE fn.rank = 1) AS top_function,
               min(100 * fn.ms / fn.span_cpu) FILTER (WHERE fn.rank = 1) AS top_pct,
               min(fn.ms) FILTER (WHERE fn.rank = 1) AS top_cpu_ms,
               jsonb_agg(jsonb_build_object(
                   'function', fn.name,
                   'pct', round((100 * fn.ms / fn.span_cpu)::numeric, 1),
                   'ms', round(fn.ms::numeric, 1)) ORDER BY fn.rank)
                   FILTER (WHERE fn.rank <= top_n) AS hotspots
          FROM fn
         WHERE fn.span_cpu > 0
         GROUP BY fn.span_id, fn.service
    )
    SELECT coalesce(sp.service, c.service), coalesce(sp.span_id, c.span_id), sp.parent_span_id,
           sp.method, sp.route, sp.status, sp.start_time, sp.span_ms,
           coalesce(c.samples, 0), coalesce(c.cpu_ms, 0),
           CASE WHEN sp.span_ms > 0 THEN 100 * coalesce(c.cpu_ms, 0) / sp.span_ms END,
           c.top_function, c.top_pct, c.top_cpu_ms,
           traceprof._span_verdict(sp.span_ms, c.cpu_ms,
               CASE WHEN coalesce(c.cpu_ms, 0) <= 0 AND sp.span_ms > 0
                    THEN traceprof._service_profiled_hz(sp.service, sp.start_time,
                             sp.start_time + sp.span_ms * interval '1 millisecond') END),
           coalesce(c.hotspots, '[]')
      FROM sp
      FULL JOIN cpu c ON c.span_id = sp.span_id AND c.service = sp.service
     ORDER BY sp.start_time NULLS LAST, coalesce(sp.service, c.service) COLLATE "C",
              coalesce(sp.span_id, c.span_id) NULLS LAST;
END $$;

-- Per span of one trace, across services: what it did with its time.
CREATE OR REPLACE FUNCTION traceprof.trace_services(trace_id text)
RETURNS TABLE (service text, span_id text, parent_span_id text, method text, route text,
               status integer, start_time timestamptz, span_ms double precision,
               samples bigint, cpu_ms double precision, cpu_pct double precision,
               top_function text, top_pct double precision, top_cpu_ms double precision,
               verdict text)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    tid uuid := traceprof._arg_trace($1, 'trace_services');
BEGIN
    RETURN QUERY
    SELECT x.service, traceprof.span_id_text(x.span_id), traceprof.span_id_text(x.parent_span_id),
           x.method, x.route, x.status, x.start_time, x.span_ms, x.samples, x.cpu_ms, x.cpu_pct,
           x.top_function, x.top_pct, x.top_cpu_ms, x.verdict
      FROM (SELECT array_agg(s.span_id) AS spans, array_agg(s.service) AS svcs,
                   array_agg(s.stack_id) AS ids, array_agg(s.samples) AS n, array_agg(s.cpu_ms) AS ms
              FROM traceprof._trace_span_stacks(tid) s) g
     CROSS JOIN LATERAL traceprof._trace_spans(tid, g.spans, g.svcs, g.ids, g.n, g.ms, 1) x;
END $$;
