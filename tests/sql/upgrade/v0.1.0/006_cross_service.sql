-- 006_cross_service: one trace across services, span by span.
--
-- A trace crosses services: each server span is a requests row from the
-- node that served it, and the samples taken while a thread served it are
-- tagged with the same (trace_id, span_id), possibly from another agent,
-- earlier or later than the span row. Nothing is joined at write time:
-- spans and samples meet here, at query time, by (trace_id, span_id), so
-- they may arrive in any order and either side may be missing.
--
-- Workload: the same as trace_summary (004): one trace, a handful of rows
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
--              periods of that service's highest sampling rate: a thread
--              on CPU for that long would have been sampled;
--   'unknown'  no samples and no evidence that the service was profiled
--              (no samples is not evidence of waiting then), a span too
--              short to tell, no span row (no duration to compare with),
--              or a zero duration.
-- With samples present, a share under 20 % implies the span lasted at least
-- five sampling periods, so 'waiting' is never the verdict of a span too
-- short to have been sampled.

-- Step 1: the samples of one trace per (span, service, stack) ---------------

-- As _trace_stacks (004), keeping the span: raw count and CPU ms per span
-- id, the service of the samples' source and stack id. span_id NULL: samples
-- tagged with the trace but no span.
CREATE FUNCTION traceprof._trace_span_stacks(p_trace uuid)
RETURNS TABLE (span_id bigint, service text, stack_id bigint, samples bigint, cpu_ms double precision)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    lo timestamptz;
    hi timestamptz;
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
    RETURN QUERY
    SELECT x.span_id, coalesce(src.service, '[unknown]'), x.stack_id, sum(x.n)::bigint,
           sum(x.n * 1000.0::float8 / x.hz)
      FROM (SELECT s.span_id, s.source_id, s.hz, u.stack_id, sum(coalesce(u.n, 1)) AS n
              FROM traceprof.samples s
              CROSS JOIN LATERAL unnest(s.stacks, s.counts) AS u(stack_id, n)
             WHERE s.trace_id = p_trace
               AND s.bucket >= lo AND s.bucket <= hi
             GROUP BY s.span_id, s.source_id, s.hz, u.stack_id) x
      LEFT JOIN traceprof.sources src ON src.source_id = x.source_id
     GROUP BY x.span_id, 2, x.stack_id;
END $$;

-- Step 2: spans joined with their samples ----------------------------------

-- The verdict of a span (thresholds in the header of this file). profiled_hz:
-- for a span without samples, the highest sampling rate of its service
-- around the span (NULL: not profiled then).
CREATE FUNCTION traceprof._span_verdict(span_ms double precision, cpu_ms double precision,
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

-- The highest sampling rate of a service's samples within a minute of
-- [t0, t1], or NULL when it has none (not profiled then). Through
-- sources_service_idx and samples_source_idx.
CREATE FUNCTION traceprof._service_profiled_hz(p_service text, t0 timestamptz, t1 timestamptz)
RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT max(x.hz)::integer
      FROM traceprof.sources so
      JOIN traceprof.samples x ON x.source_id = so.source_id
     WHERE so.service = p_service
       AND x.bucket >= t0 - interval '1 minute' AND x.bucket <= t1 + interval '1 minute'
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
CREATE FUNCTION traceprof._trace_spans(p_trace uuid, p_spans bigint[], p_services text[],
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
CREATE FUNCTION traceprof.trace_services(trace_id text)
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

-- trace_summary, as in 004, plus the key "service_spans": one object per
-- row of trace_services with the span's top 3 hotspots. The trace's samples
-- are read once (per span) and summed per service for the keys of 004. A
-- span stored twice now counts once in the keys of 004 too.
CREATE OR REPLACE FUNCTION traceprof.trace_summary(trace_id text) RETURNS jsonb
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    tid uuid := traceprof._arg_trace($1, 'trace_summary');
BEGIN
    RETURN (
    WITH span AS (
        -- a span stored twice (a resent batch) counts once, as in _trace_spans
        SELECT DISTINCT ON (r.span_id)
               coalesce(s.service, '[unknown]') AS service, r.span_id, r.parent_span_id, r.start_time,
               r.duration_us, r.status_code, coalesce(rt.method, '') AS method, coalesce(rt.route, '') AS route
          FROM traceprof.requests r
          LEFT JOIN traceprof.sources s ON s.source_id = r.source_id
          LEFT JOIN traceprof.routes rt ON rt.route_id = r.route_id
         WHERE r.trace_id = tid
         ORDER BY r.span_id, r.start_time, r.duration_us DESC
    ), tagged AS MATERIALIZED (
        -- the trace's samples, read once
        SELECT * FROM traceprof._trace_span_stacks(tid)
    ), stacks AS MATERIALIZED (
        -- per service (of the samples' source), for the profile and the hot path
        SELECT t.service, array_agg(t.stack_id) AS ids, array_agg(t.samples) AS n,
               array_agg(t.cpu_ms) AS ms
          FROM (SELECT r.service, r.stack_id, sum(r.samples)::bigint AS samples, sum(r.cpu_ms) AS cpu_ms
                  FROM tagged r
                 GROUP BY r.service, r.stack_id) t
         GROUP BY t.service
    ), per_span AS (
        SELECT jsonb_agg(jsonb_build_object(
                   'service', x.service,
                   'span_id', traceprof.span_id_text(x.span_id),
                   'parent_span_id', traceprof.span_id_text(x.parent_span_id),
                   'method', x.method, 'route', x.route, 'status', x.status, 'start', x.start_time,
                   'span_ms', round(x.span_ms::numeric, 3),
                   'cpu_ms', round(x.cpu_ms::numeric, 1),
                   'cpu_pct', round(x.cpu_pct::numeric, 1),
                   'verdict', x.verdict,
                   'hotspots', x.hotspots)
                   ORDER BY x.start_time NULLS LAST, x.service COLLATE "C", x.span_id NULLS LAST) AS list
          FROM (SELECT array_agg(r.span_id) AS spans, array_agg(r.service) AS svcs,
                       array_agg(r.stack_id) AS ids, array_agg(r.samples) AS n, array_agg(r.cpu_ms) AS ms
                  FROM tagged r) g
         CROSS JOIN LATERAL traceprof._trace_spans(tid, g.spans, g.svcs, g.ids, g.n, g.ms, 3) x
    ), prof AS (
        SELECT g.service, p.*,
               row_number() OVER (PARTITION BY g.service
                                  ORDER BY traceprof._cpu_us(p.self_cpu_ms) DESC,
                                           p.function COLLATE "C") AS rank
          FROM stacks g
         CROSS JOIN LATERAL traceprof._function_profile(g.ids, g.n, g.ms) p
    ), hot AS (
        -- per service, the heaviest path below the point where it narrows
        SELECT h.service, jsonb_agg(jsonb_build_object(
                   'function', coalesce(f.name, '[unknown]'),
                   'total_cpu_ms', round(h.weight::numeric, 1),
                   'total_pct', round((100 * h.share)::numeric, 1)) ORDER BY h.depth)
                   FILTER (WHERE h.narrowed AND h.share >= 0.1) AS path,
               (array_agg(coalesce(f.name, '[unknown]') ORDER BY h.depth)
                   FILTER (WHERE h.narrowed AND h.share >= 0.5))[1] AS cause,
               (array_agg(100 * h.share ORDER BY h.depth)
                   FILTER (WHERE h.narrowed AND h.share >= 0.5))[1] AS cause_pct,
               (array_agg(h.weight ORDER BY h.depth)
                   FILTER (WHERE h.narrowed AND h.share >= 0.5))[1] AS cause_ms,
               (array_agg(coalesce(f.name, '[unknown]') || ' ' || round(100 * h.share) || ' %'
                          ORDER BY h.depth DESC)
                   FILTER (WHERE h.narrowed AND h.share >= 0.5))[1] AS deepest,
               count(*) FILTER (WHERE h.narrowed AND h.share >= 0.5) AS path_len
          -- the root level is skipped: entry points (main, thread starts) are never the answer
          FROM (SELECT g.service, hp.*, hp.depth > 1 AND hp.share < 0.9995 AS narrowed
                  FROM stacks g
                 CROSS JOIN LATERAL traceprof.hot_path(g.ids, g.ms) hp) h
          LEFT JOIN traceprof.functions f ON f.function_id = h.function_id
         GROUP BY h.service
    ), cpu AS (
        SELECT p.service, sum(p.self_cpu_ms) AS cpu_ms, sum(p.self_samples) AS samples,
               jsonb_agg(jsonb_build_object(
                   'function', p.function, 'module', p.module,
                   'self_cpu_ms', round(p.self_cpu_ms::numeric, 1),
                   'total_cpu_ms', round(p.total_cpu_ms::numeric, 1),
                   'self_pct', round(p.self_pct::numeric, 1),
                   'total_pct', round(p.total_pct::numeric, 1)) ORDER BY p.rank)
                   FILTER (WHERE p.rank <= 5 AND p.self_cpu_ms > 0) AS hotspots,
               min(p.function) FILTER (WHERE p.rank = 1) AS top_function,
               min(p.self_pct) FILTER (WHERE p.rank = 1) AS top_pct,
               min(p.self_cpu_ms) FILTER (WHERE p.rank = 1) AS top_cpu_ms
          FROM prof p
         GROUP BY p.service
    ), spans AS (
        SELECT sp.service, count(*) AS span_count, round(sum(sp.duration_us) / 1000.0, 3) AS span_ms,
               jsonb_agg(jsonb_build_object(
                   'span_id', traceprof.span_id_text(sp.span_id),
                   'parent_span_id', traceprof.span_id_text(sp.parent_span_id),
                   'method', sp.method, 'route', sp.route, 'status', sp.status_code,
                   'start', sp.start_time, 'duration_ms', round(sp.duration_us / 1000.0, 3))
                   ORDER BY sp.start_time, sp.span_id) AS list
          FROM span sp
         GROUP BY sp.service
    ), svc AS (
        SELECT coalesce(sp.service, c.service) AS service, sp.span_count, sp.span_ms, sp.list,
               coalesce(c.cpu_ms, 0) AS cpu_ms, coalesce(c.samples, 0) AS samples, c.hotspots,
               coalesce(hot.cause, c.top_function) AS top_function,
               coalesce(hot.cause_pct, c.top_pct) AS top_pct,
               coalesce(hot.cause_ms, c.top_cpu_ms) AS top_cpu_ms, hot.path AS hot_path,
               CASE WHEN hot.path_len > 1 THEN hot.deepest END AS deepest,
               CASE WHEN sp.span_ms IS NULL OR c.cpu_ms IS NULL THEN NULL
                    ELSE c.cpu_ms < 0.2 * sp.span_ms::float8 END AS mostly_waiting
          FROM spans sp
          FULL JOIN cpu c ON c.service = sp.service
          LEFT JOIN hot ON hot.service = coalesce(sp.service, c.service)
    ), out AS (
        SELECT svc.*,
               traceprof._service_verdict(svc.service, svc.span_count, svc.span_ms, svc.cpu_ms,
                                          svc.mostly_waiting, svc.top_function, svc.top_pct,
                                          svc.top_cpu_ms, svc.deepest) AS verdict,
               row_number() OVER (ORDER BY svc.cpu_ms DESC, svc.span_ms DESC NULLS LAST,
                                  svc.service COLLATE "C") AS ord
          FROM svc
    ), bounds AS (
        SELECT min(sp.start_time) AS t0,
               max(sp.start_time + sp.duration_us * interval '1 microsecond') AS t1
          FROM span sp
    )
    SELECT jsonb_build_object(
               'trace_id', traceprof.trace_id_text(tid),
               'start', b.t0,
               'end', b.t1,
               'duration_ms', round(extract(epoch FROM b.t1 - b.t0) * 1000, 3),
               'cpu_ms', round(sum(o.cpu_ms)::numeric, 1),
               'samples', sum(o.samples),
               'verdict', string_agg(o.verdict, '; ' ORDER BY o.ord),
               'services', jsonb_agg(jsonb_build_object(
                   'service', o.service,
                   'spans', coalesce(o.list, '[]'),
                   'span_ms', o.span_ms,
                   'cpu_ms', round(o.cpu_ms::numeric, 1),
                   'samples', o.samples,
                   'mostly_waiting', o.mostly_waiting,
                   'hotspots', coalesce(o.hotspots, '[]'),
                   'hot_path', coalesce(o.hot_path, '[]'),
                   'verdict', o.verdict) ORDER BY o.ord),
               'service_spans', (SELECT coalesce(ps.list, '[]') FROM per_span ps))
      FROM bounds b, out o
     GROUP BY b.t0, b.t1);
END $$;
