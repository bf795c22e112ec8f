-- trace_summary.sql: _service_verdict, _service_wait_verdict, trace_summary (taken from
-- migrations 004, 006).

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

-- The line about one service of a trace that has off-CPU rows: its span,
-- its CPU and the function that took it, and the dominant wait: blocked
-- time with the top blocking function and its caller (sql/api/offcpu.sql
-- says how they are found), or the wait for a CPU when that is longer:
-- "payment-svc: 934 ms span: 424 ms CPU in validateSignature, 480 ms
-- blocked in pthread_mutex_lock ← ledger_append". When the top blocking
-- function holds less than all of the blocked time (in whole ms), both
-- figures: "490 ms blocked, 480 ms in pthread_mutex_lock ← ledger_append".
CREATE OR REPLACE FUNCTION traceprof._service_wait_verdict(service text, span_count bigint, span_ms numeric,
                                                cpu_ms double precision, top_function text,
                                                blocked_ms double precision, runq_ms double precision,
                                                blocker text, blocker_ms double precision)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT $1 || ': '
        || CASE WHEN $2 IS NULL OR $2 = 0 THEN 'no span'
                WHEN $2 = 1 THEN round($3) || ' ms span'
                ELSE $2 || ' spans, ' || round($3) || ' ms' END
        || ': '
        || CASE WHEN coalesce($4, 0) = 0 THEN 'no CPU samples'
                ELSE round($4) || ' ms CPU' || coalesce(' in ' || $5, '') END
        || CASE WHEN coalesce($6, 0) = 0 AND coalesce($7, 0) = 0 THEN ''
                WHEN coalesce($7, 0) > coalesce($6, 0) THEN ', ' || round($7) || ' ms waiting for a CPU'
                WHEN $8 IS NULL THEN ', ' || round($6) || ' ms blocked'
                WHEN round($9) >= round($6) THEN ', ' || round($6) || ' ms blocked in ' || $8
                ELSE ', ' || round($6) || ' ms blocked, ' || round($9) || ' ms in ' || $8 END
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
-- counts once. NULL when the trace has neither spans nor samples nor
-- off-CPU rows.
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
    ), bd AS MATERIALIZED (
        -- per span: CPU, hotspots and off-CPU time (every blocking function)
        SELECT x.*
          FROM (SELECT array_agg(r.span_id) AS spans, array_agg(r.service) AS svcs,
                       array_agg(r.stack_id) AS ids, array_agg(r.samples) AS n, array_agg(r.cpu_ms) AS ms
                  FROM tagged r) g
         CROSS JOIN LATERAL traceprof._trace_breakdown(tid, g.spans, g.svcs, g.ids, g.n, g.ms, 3, 1000) x
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
                   || CASE WHEN x.has_offcpu THEN jsonb_build_object(
                          'blocked_ms', round(x.blocked_ms::numeric, 1),
                          'runq_ms', round(x.runq_ms::numeric, 1),
                          'other_ms', round(x.other_ms::numeric, 1),
                          'excess_ms', round(x.excess_ms::numeric, 1),
                          'blocked_by', jsonb_path_query_array(x.blocked_by, '$[0 to 2]'))
                      ELSE '{}' END
                   ORDER BY x.start_time NULLS LAST, x.service COLLATE "C", x.span_id NULLS LAST) AS list
          FROM bd x
         WHERE x.start_time IS NOT NULL OR x.samples > 0 OR x.has_offcpu
    ), off_fn AS (
        -- per service and blocking function, over its spans
        SELECT x.service, e->>'function' AS function, sum((e->>'ms')::float8) AS ms,
               (array_agg(e->>'caller' ORDER BY (e->>'ms')::float8 DESC, e->>'caller' COLLATE "C"))[1] AS caller
          FROM bd x
         CROSS JOIN LATERAL jsonb_array_elements(x.blocked_by) e
         WHERE x.has_offcpu
         GROUP BY x.service, e->>'function'
    ), off AS (
        -- per service with off-CPU rows: the breakdown of its spans
        SELECT x.service, sum(x.span_ms) AS span_ms, sum(x.cpu_ms) AS cpu_ms,
               sum(x.blocked_ms) AS blocked_ms, sum(x.runq_ms) AS runq_ms,
               sum(x.other_ms) AS other_ms, sum(x.excess_ms) AS excess_ms,
               (SELECT jsonb_agg(jsonb_build_object('function', f.function, 'caller', f.caller,
                                                    'ms', round(f.ms::numeric, 1))
                                 ORDER BY f.ms DESC, f.function COLLATE "C")
                  FROM (SELECT * FROM off_fn f WHERE f.service = x.service
                         ORDER BY f.ms DESC, f.function COLLATE "C" LIMIT 3) f) AS blocked_by,
               (SELECT f.function || coalesce(' ← ' || f.caller, '') FROM off_fn f
                 WHERE f.service = x.service ORDER BY f.ms DESC, f.function COLLATE "C" LIMIT 1) AS blocker,
               (SELECT f.ms FROM off_fn f
                 WHERE f.service = x.service ORDER BY f.ms DESC, f.function COLLATE "C" LIMIT 1) AS blocker_ms
          FROM bd x
         WHERE x.service IN (SELECT y.service FROM bd y WHERE y.has_offcpu)
         GROUP BY x.service
    ), leafs AS MATERIALIZED (
        -- per service and distinct stack: its functions (the unknown
        -- function when the stack is not in the dictionary) and weights
        SELECT t.service, t.n, t.ms, coalesce(k.function_ids, ARRAY[0::bigint]) AS fns
          FROM (SELECT r.service, r.stack_id, sum(r.samples)::bigint AS n, sum(r.cpu_ms) AS ms
                  FROM tagged r
                 GROUP BY r.service, r.stack_id) t
          LEFT JOIN traceprof.stacks k ON k.stack_id = t.stack_id
    ), prof AS (
        -- self CPU per function (the leaf of each stack), ranked as
        -- _function_profile's rows would be; only the top 5 are shown, so
        -- only they are looked for along the whole stacks (total CPU)
        SELECT x.*,
               sum(x.self_cpu_ms) OVER (PARTITION BY x.service) AS service_ms,
               sum(x.self_samples) OVER (PARTITION BY x.service) AS service_samples,
               row_number() OVER (PARTITION BY x.service
                                  ORDER BY traceprof._cpu_us(x.self_cpu_ms) DESC,
                                           x.function COLLATE "C") AS rank
          FROM (SELECT l.service, l.fns[cardinality(l.fns)] AS function_id,
                       coalesce(f.name, '[unknown]') AS function, coalesce(f.module, '') AS module,
                       sum(l.n)::bigint AS self_samples, sum(l.ms) AS self_cpu_ms
                  FROM leafs l
                  LEFT JOIN traceprof.functions f ON f.function_id = l.fns[cardinality(l.fns)]
                 GROUP BY 1, 2, 3, 4) x
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
          -- the root level is skipped: entry points (main, thread starts) are never the answer.
          -- The path narrows where a level holds less than its parent (not less than the
          -- whole): a few stacks cut short of the root (their own roots) leave the thread
          -- start below the whole, and it must not be taken for the narrowing point.
          FROM (SELECT x.*, coalesce(bool_or(x.narrows) OVER (PARTITION BY x.service ORDER BY x.depth),
                                     false) AS narrowed
                  FROM (SELECT g.service, hp.*,
                               hp.depth > 1 AND hp.share < 0.9995 * lag(hp.share)
                                   OVER (PARTITION BY g.service ORDER BY hp.depth) AS narrows
                          FROM stacks g
                         CROSS JOIN LATERAL traceprof._hot_path(g.ids, g.ms, 0.1) hp) x) h
          LEFT JOIN traceprof.functions f ON f.function_id = h.function_id
         GROUP BY h.service
    ), cpu AS (
        SELECT p.service, min(p.service_ms) AS cpu_ms, min(p.service_samples) AS samples,
               jsonb_agg(jsonb_build_object(
                   'function', p.function, 'module', p.module,
                   'self_cpu_ms', round(p.self_cpu_ms::numeric, 1),
                   'total_cpu_ms', round(p.total_cpu_ms::numeric, 1),
                   'self_pct', round((100 * p.self_cpu_ms / p.service_ms)::numeric, 1),
                   'total_pct', round((100 * p.total_cpu_ms / p.service_ms)::numeric, 1)) ORDER BY p.rank)
                   FILTER (WHERE p.self_cpu_ms > 0) AS hotspots,
               min(p.function) FILTER (WHERE p.rank = 1) AS top_function,
               min(100 * p.self_cpu_ms / p.service_ms) FILTER (WHERE p.rank = 1) AS top_pct,
               min(p.self_cpu_ms) FILTER (WHERE p.rank = 1) AS top_cpu_ms
          FROM (SELECT p.*,
                       (SELECT sum(l.ms) FROM leafs l
                         WHERE l.service = p.service AND l.fns @> ARRAY[p.function_id]) AS total_cpu_ms
                  FROM prof p
                 WHERE p.rank <= 5 AND p.service_ms > 0) p
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
        UNION ALL
        -- a service with off-CPU rows only (no span row, no samples)
        SELECT o.service, NULL, NULL, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL
          FROM off o
         WHERE NOT EXISTS (SELECT FROM spans sp WHERE sp.service = o.service)
           AND NOT EXISTS (SELECT FROM cpu c WHERE c.service = o.service)
    ), out AS (
        SELECT svc.*, o.service IS NOT NULL AS has_offcpu,
               CASE WHEN o.service IS NULL
                    THEN traceprof._service_verdict(svc.service, svc.span_count, svc.span_ms, svc.cpu_ms,
                                                    svc.mostly_waiting, svc.top_function, svc.top_pct,
                                                    svc.top_cpu_ms, svc.deepest)
                    ELSE traceprof._service_wait_verdict(svc.service, svc.span_count, svc.span_ms,
                                                         svc.cpu_ms, svc.top_function, o.blocked_ms,
                                                         o.runq_ms, o.blocker, o.blocker_ms) END AS verdict,
               CASE WHEN o.service IS NOT NULL THEN jsonb_build_object(
                   'span_ms', round(o.span_ms::numeric, 1),
                   'cpu_ms', round(o.cpu_ms::numeric, 1),
                   'blocked_ms', round(o.blocked_ms::numeric, 1),
                   'runq_ms', round(o.runq_ms::numeric, 1),
                   'other_ms', round(o.other_ms::numeric, 1),
                   'excess_ms', round(o.excess_ms::numeric, 1),
                   'blocked_by', coalesce(o.blocked_by, '[]')) END AS breakdown,
               row_number() OVER (ORDER BY svc.cpu_ms DESC, svc.span_ms DESC NULLS LAST,
                                  svc.service COLLATE "C") AS ord
          FROM svc
          LEFT JOIN off o ON o.service = svc.service
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
                   'verdict', o.verdict)
                   || CASE WHEN o.has_offcpu THEN jsonb_build_object('breakdown', o.breakdown)
                           ELSE '{}' END ORDER BY o.ord),
               'service_spans', (SELECT coalesce(ps.list, '[]') FROM per_span ps))
      FROM bounds b, out o
     GROUP BY b.t0, b.t1);
END $$;
