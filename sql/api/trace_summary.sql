-- trace_summary.sql: _service_verdict, trace_summary (taken from migrations 004, 006).

-- One line about one service of a trace. span_ms NULL: no span row;
-- cpu_ms 0: no samples.
CREATE OR REPLACE FUNCTION traceprof._service_verdict(service text, span_count bigint, span_ms numeric,
                                           cpu_ms double precision, mostly_waiting boolean,
                                           top_function text, top_pct double precision,
                                           top_cpu_ms double precision, deepest text)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT $1 || ': '
        || CASE WHEN $2 IS NULL OR $2 = 0 THEN 'no span'
                WHEN $2 = 1 THEN round($3) || ' ms span'
                ELSE $2 || ' spans, ' || round($3) || ' ms' END
        || ', '
        || CASE WHEN coalesce($4, 0) = 0 THEN 'no CPU samples'
                WHEN $5 THEN 'mostly waiting (' || round($4) || ' ms CPU)'
                ELSE $6 || ' ' || round($7) || ' % (' || round($8) || ' ms CPU)'
                     || coalesce(' → ' || $9, '') END
$$;

-- A JSON object describing one trace: its time span, and per service its
-- spans, CPU, samples, top 5 self-CPU hotspots, the heaviest path below the
-- point where its CPU narrows (hot_path: functions with at least 10 % of the
-- service's CPU), whether it mostly waited (CPU under 20 % of its spans'
-- duration) and a one-line verdict. The verdict names the first function of
-- the hot path holding at least half of the service's CPU (the subtree that
-- took the time) and, when it goes deeper, the last one that still does:
-- "validateSignature 94 % (4105 ms CPU) → bn_mod_exp 83 %". Without such a
-- path it names the top self hotspot. The key "service_spans" holds one
-- object per row of trace_services with the span's top 3 hotspots. The
-- trace's samples are read once, per span (_trace_span_stacks: raised rows
-- per source when it has any), and summed per service; a span stored twice
-- counts once. NULL when the trace has neither spans nor samples.
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
