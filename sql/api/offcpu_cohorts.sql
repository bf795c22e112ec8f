-- offcpu_cohorts.sql: _compare_time_cohorts, compare_offcpu_cohorts, compare_wall_cohorts
-- (compare_gpu_cohorts, gpu_cohorts.sql, is the same comparison over GPU time).
--
-- compare_cohorts (compare_cohorts.sql) over blocked time instead of CPU:
-- two cohorts of one service's requests, the same jsonb specs
-- (parse_cohort) and the same request-level statistic (ratio_variance,
-- two_sample_z: the unit is the request), per blocking function
-- (offcpu.sql: where the program called into the code it blocked in).
--
-- A request's blocked time is that of the offcpu rows (kind 1) of the
-- service's sources with its (trace_id, span_id) whose bucket lies within
-- config 'request_sample_window' of [start, end], as compare_cohorts finds
-- its samples. From the raw tables only: there is no rollup of off-CPU
-- time (a comparison over an hour of a busy service reads that hour).

-- metric: 'offcpu', 'wall' or 'gpu' (per kernel: gpu_cohorts.sql).
-- Per blocking function: the blocked ms of each cohort's requests in it,
-- the mean per request of the cohort (all its requests), its share of the
-- cohort's blocked time, delta = a_share - b_share, and the request-level
-- z statistic of delta with its two-sided p-value. Ordered by |delta|.
-- z and p are NULL when a cohort has fewer than two requests with blocked
-- time, or when neither cohort varies between requests while the shares
-- differ.
CREATE OR REPLACE FUNCTION traceprof._compare_time_cohorts(
    metric text, service text, from_time timestamptz, until_time timestamptz, cohort_a jsonb,
    cohort_b jsonb)
RETURNS TABLE (function text, a_ms double precision, b_ms double precision,
               a_ms_per_request double precision, b_ms_per_request double precision,
               a_share double precision, b_share double precision, delta double precision,
               z double precision, p_value double precision)
LANGUAGE plpgsql STABLE
-- Bulk joins (as in _cohort_moments): requests to offcpu rows by hash over
-- the time range, not a trace_id index lookup per request (a nested loop
-- took 7.5 s for ten minutes of a service at 1,500 requests/s).
SET enable_nestloop = off
AS $fn$
#variable_conflict use_column
DECLARE
    fa traceprof.cohort_filter := traceprof.parse_cohort(cohort_a, 'cohort_a');
    fb traceprof.cohort_filter := traceprof.parse_cohort(cohort_b, 'cohort_b');
    srcs bigint[];
    slack interval := (SELECT c.value::interval FROM traceprof.config c WHERE c.key = 'request_sample_window');
BEGIN
    IF service IS NULL OR from_time IS NULL OR until_time IS NULL OR until_time <= from_time THEN
        RAISE EXCEPTION 'cohorts of service % need a time range with from_time before until_time, got % .. %',
            coalesce(quote_literal(service), 'NULL'), from_time, until_time
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    srcs := traceprof.service_sources(service);
    IF cardinality(srcs) = 0 THEN
        RAISE EXCEPTION 'unknown service "%"', left(service, 200)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'services are those of traceprof.sources: SELECT DISTINCT service FROM traceprof.sources';
    END IF;
    -- EXECUTE plans with the actual values (partition pruning of requests
    -- and offcpu); they are passed as parameters, never spliced.
    RETURN QUERY EXECUTE $q$
    WITH req AS MATERIALIZED (
        SELECT c.cohort, r.trace_id, r.span_id, r.start_time,
               r.start_time + r.duration_us * interval '1 microsecond' AS end_time
          FROM traceprof.requests r
         CROSS JOIN (VALUES ('a', $5::bigint, $6::bigint, $7::int4multirange, $8::bigint[]),
                            ('b', $9, $10, $11, $12))
               AS c(cohort, min_us, max_us, statuses, route_ids)
         WHERE r.source_id = ANY ($1) AND r.start_time >= $2 AND r.start_time < $3
           AND (c.min_us IS NULL OR r.duration_us >= c.min_us)
           AND (c.max_us IS NULL OR r.duration_us < c.max_us)
           AND (c.statuses IS NULL OR r.status_code::integer <@ c.statuses)
           AND (c.route_ids IS NULL OR r.route_id = ANY (c.route_ids))
    ), counts AS (
        SELECT q.cohort, count(*) AS requests FROM req q GROUP BY q.cohort
    ), hits AS MATERIALIZED (
        -- ms per request and stack: blocked ('offcpu'); blocked, runqueue and CPU ('wall');
        -- on the GPU ('gpu')
        SELECT q.cohort, q.trace_id, q.span_id, u.stack_id, sum(u.us) / 1000.0::float8 AS ms
          FROM req q
          JOIN traceprof.offcpu o ON o.trace_id = q.trace_id AND o.span_id = q.span_id
         CROSS JOIN LATERAL unnest(o.stacks, o.us) AS u(stack_id, us)
         WHERE $13 IN ('offcpu', 'wall') AND o.source_id = ANY ($1) AND (o.kind = 1 OR $13 = 'wall')
           AND o.bucket >= $2 - $4
           AND o.bucket <= (SELECT max(x.end_time) FROM req x) + $4
           AND o.bucket >= q.start_time - $4 AND o.bucket <= q.end_time + $4
         GROUP BY 1, 2, 3, 4
        UNION ALL
        SELECT q.cohort, q.trace_id, q.span_id, u.stack_id,
               sum(coalesce(u.n, 1) * 1000.0 / s.hz)::float8 AS ms
          FROM req q
          JOIN traceprof.samples s ON s.trace_id = q.trace_id AND s.span_id = q.span_id
         CROSS JOIN LATERAL unnest(s.stacks, s.counts) AS u(stack_id, n)
         WHERE $13 = 'wall' AND s.source_id = ANY ($1) AND s.hz > 0
           AND s.bucket >= $2 - $4
           AND s.bucket <= (SELECT max(x.end_time) FROM req x) + $4
           AND s.bucket >= q.start_time - $4 AND s.bucket <= q.end_time + $4
         GROUP BY 1, 2, 3, 4
        UNION ALL
        -- 'gpu': GPU time per request and launch stack (gpu.sql)
        SELECT q.cohort, q.trace_id, q.span_id, u.stack_id, sum(u.ns) / 1e6::float8 AS ms
          FROM req q
          JOIN traceprof.gpu g ON g.trace_id = q.trace_id AND g.span_id = q.span_id
         CROSS JOIN LATERAL unnest(g.stacks, g.gpu_ns) AS u(stack_id, ns)
         WHERE $13 = 'gpu' AND g.source_id = ANY ($1)
           AND g.bucket >= $2 - $4
           AND g.bucket <= (SELECT max(x.end_time) FROM req x) + $4
           AND g.bucket >= q.start_time - $4 AND g.bucket <= q.end_time + $4
         GROUP BY 1, 2, 3, 4
    ), per_req AS (
        SELECT h.cohort, h.trace_id, h.span_id, sum(h.ms) AS t
          FROM hits h GROUP BY 1, 2, 3
    ), tot AS (
        SELECT p.cohort, count(*) AS n, sum(p.t) AS sum_t, sum(p.t * p.t) AS sum_tt
          FROM per_req p GROUP BY 1
    ), per_fn AS (
        -- 'offcpu': the blocking function of each stack; 'wall': every function on it
        SELECT h.cohort, b.function, h.trace_id, h.span_id, sum(h.ms) AS f
          FROM hits h
          JOIN traceprof._offcpu_blockers((SELECT array_agg(DISTINCT x.stack_id) FROM hits x)) b
            ON b.stack_id = h.stack_id
         WHERE $13 = 'offcpu'
         GROUP BY 1, 2, 3, 4
        UNION ALL
        SELECT h.cohort, f.function, h.trace_id, h.span_id, sum(h.ms) AS f
          FROM hits h
          JOIN traceprof.stacks st ON st.stack_id = h.stack_id
         CROSS JOIN LATERAL (SELECT DISTINCT fn.name AS function
                               FROM unnest(st.function_ids) AS x(id)
                               JOIN traceprof.functions fn ON fn.function_id = x.id) f
         WHERE $13 = 'wall'
         GROUP BY 1, 2, 3, 4
        UNION ALL
        -- 'gpu': the kernel of each stack, its leaf
        SELECT h.cohort, k.kernel, h.trace_id, h.span_id, sum(h.ms) AS f
          FROM hits h
          JOIN traceprof._gpu_kernels((SELECT array_agg(DISTINCT x.stack_id) FROM hits x)) k
            ON k.stack_id = h.stack_id
         WHERE $13 = 'gpu'
         GROUP BY 1, 2, 3, 4
    ), fsum AS (
        SELECT pf.cohort, pf.function, sum(pf.f) AS sum_f, sum(pf.f * pf.f) AS sum_ff,
               sum(pf.f * p.t) AS sum_ft
          FROM per_fn pf
          JOIN per_req p ON p.cohort = pf.cohort AND p.trace_id = pf.trace_id AND p.span_id = pf.span_id
         GROUP BY 1, 2
    ), st AS (
        SELECT f.function,
               coalesce(fa_.sum_f, 0) AS a_ms, coalesce(fb_.sum_f, 0) AS b_ms,
               least(coalesce(fa_.sum_f, 0) / nullif(ta.sum_t, 0), 1) AS ra,
               least(coalesce(fb_.sum_f, 0) / nullif(tb.sum_t, 0), 1) AS rb,
               traceprof.ratio_variance(ta.n, ta.sum_t, ta.sum_tt, fa_.sum_f, fa_.sum_ff, fa_.sum_ft) AS va,
               traceprof.ratio_variance(tb.n, tb.sum_t, tb.sum_tt, fb_.sum_f, fb_.sum_ff, fb_.sum_ft) AS vb
          FROM (SELECT DISTINCT x.function FROM fsum x) f
          LEFT JOIN fsum fa_ ON fa_.cohort = 'a' AND fa_.function = f.function
          LEFT JOIN fsum fb_ ON fb_.cohort = 'b' AND fb_.function = f.function
          LEFT JOIN tot ta ON ta.cohort = 'a'
          LEFT JOIN tot tb ON tb.cohort = 'b'
    )
    SELECT s.function, s.a_ms, s.b_ms,
           s.a_ms / nullif((SELECT c.requests FROM counts c WHERE c.cohort = 'a'), 0),
           s.b_ms / nullif((SELECT c.requests FROM counts c WHERE c.cohort = 'b'), 0),
           s.ra, s.rb,
           CASE WHEN abs(s.ra - s.rb) <= 1e-12 THEN 0 ELSE s.ra - s.rb END,
           traceprof.two_sample_z(s.ra, s.va, s.rb, s.vb),
           traceprof.normal_p_two_sided(traceprof.two_sample_z(s.ra, s.va, s.rb, s.vb))
      FROM st s
     ORDER BY abs(s.ra - s.rb) DESC NULLS LAST, s.function COLLATE "C"
    $q$ USING srcs, from_time, until_time, slack, fa.min_us, fa.max_us, fa.statuses, fa.route_ids,
              fb.min_us, fb.max_us, fb.statuses, fb.route_ids, metric;
END $fn$;

-- Per blocking function (see above).
CREATE OR REPLACE FUNCTION traceprof.compare_offcpu_cohorts(
    service text, from_time timestamptz, until_time timestamptz, cohort_a jsonb, cohort_b jsonb)
RETURNS TABLE (function text, a_blocked_ms double precision, b_blocked_ms double precision,
               a_ms_per_request double precision, b_ms_per_request double precision,
               a_share double precision, b_share double precision, delta double precision,
               z double precision, p_value double precision)
LANGUAGE sql STABLE AS $$
    SELECT * FROM traceprof._compare_time_cohorts('offcpu', $1, $2, $3, $4, $5)
$$;

-- The cohorts over wall time: a request's time is its CPU (its samples,
-- 1000/hz ms each), its blocked time and its runqueue time, and each
-- function is charged the time of every stack it is on (once a stack), as
-- compare_cohorts charges CPU: a_ms is the cohort's time through the
-- function, a_share its share of the cohort's time. Runqueue time has no
-- stack: it counts in the requests' totals only. Same statistics.
CREATE OR REPLACE FUNCTION traceprof.compare_wall_cohorts(
    service text, from_time timestamptz, until_time timestamptz, cohort_a jsonb, cohort_b jsonb)
RETURNS TABLE (function text, a_ms double precision, b_ms double precision,
               a_ms_per_request double precision, b_ms_per_request double precision,
               a_share double precision, b_share double precision, delta double precision,
               z double precision, p_value double precision)
LANGUAGE sql STABLE AS $$
    SELECT * FROM traceprof._compare_time_cohorts('wall', $1, $2, $3, $4, $5)
$$;
