-- compare_cohorts.sql: _cohort_sums, cohort_sizes, compare_cohorts (taken from migration 005).

-- The summed moments of both cohorts: per function_id (NULL: the totals)
-- the request counts and the moments of cohort a and of cohort b, from the
-- rollup where it covers the cohort exactly and from
-- traceprof._cohort_moments for the rest. use_rollup false computes
-- everything from the raw tables.
CREATE OR REPLACE FUNCTION traceprof._cohort_sums(
    service text, from_time timestamptz, until_time timestamptz,
    cohort_a jsonb, cohort_b jsonb, with_functions boolean, use_rollup boolean)
RETURNS TABLE (function_id bigint,
               a_requests bigint, a_sampled bigint, a_samples bigint,
               a_w double precision, a_ww double precision, a_wt double precision,
               a_s double precision, a_ss double precision, a_st double precision,
               b_requests bigint, b_sampled bigint, b_samples bigint,
               b_w double precision, b_ww double precision, b_wt double precision,
               b_s double precision, b_ss double precision, b_st double precision)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    fa traceprof.cohort_filter := traceprof.parse_cohort(cohort_a, 'cohort_a');
    fb traceprof.cohort_filter := traceprof.parse_cohort(cohort_b, 'cohort_b');
    durs_a int8multirange := int8multirange(int8range(coalesce(fa.min_us, 0), fa.max_us));
    durs_b int8multirange := int8multirange(int8range(coalesce(fb.min_us, 0), fb.max_us));
    fast_a smallint[];
    fast_b smallint[];
    part_a int8multirange;
    part_b int8multirange;
    covered tstzmultirange := '{}';
    uncovered tstzmultirange;
    blk_minutes smallint[];
    blk_start timestamptz[];
    blk_sign integer[];
    job_cohort text[] := '{}';
    job_from timestamptz[] := '{}';
    job_until timestamptz[] := '{}';
    job_durs int8multirange[] := '{}';
    r tstzrange;
BEGIN
    IF service IS NULL OR from_time IS NULL OR until_time IS NULL OR until_time <= from_time THEN
        RAISE EXCEPTION 'cohorts of service % need a time range with from_time before until_time, got % .. %',
            coalesce(quote_literal(service), 'NULL'), from_time, until_time
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(traceprof.service_sources(service)) = 0 THEN
        RAISE EXCEPTION 'unknown service "%"', left(service, 200)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'services are those of traceprof.sources: SELECT DISTINCT service FROM traceprof.sources';
    END IF;
    -- Duration buckets wholly inside each cohort's range come from the
    -- rollup; the parts of buckets its bounds cut through do not.
    SELECT coalesce(array_agg(b::smallint), '{}'),
           durs_a - coalesce(range_agg(traceprof.duration_bucket_range(b)), '{}')
      INTO fast_a, part_a
      FROM generate_series(0, cardinality(traceprof.duration_thresholds_us())) b
     WHERE traceprof.duration_bucket_range(b) <@ int8range(fa.min_us, fa.max_us);
    SELECT coalesce(array_agg(b::smallint), '{}'),
           durs_b - coalesce(range_agg(traceprof.duration_bucket_range(b)), '{}')
      INTO fast_b, part_b
      FROM generate_series(0, cardinality(traceprof.duration_thresholds_us())) b
     WHERE traceprof.duration_bucket_range(b) <@ int8range(fb.min_us, fb.max_us);
    -- Whole minutes of the range that the rollup holds.
    IF use_rollup AND traceprof.time_ceil(from_time) < traceprof.time_floor(until_time) THEN
        covered := (SELECT st.rolled FROM traceprof.cohort_rollup_state st)
                   * tstzmultirange(tstzrange(traceprof.time_ceil(from_time), traceprof.time_floor(until_time)));
    END IF;
    -- The rollup blocks that add up to it.
    SELECT coalesce(array_agg(x.block_minutes), '{}'), coalesce(array_agg(x.block_start), '{}'),
           coalesce(array_agg(x.block_sign), '{}')
      INTO blk_minutes, blk_start, blk_sign
      FROM unnest(covered) AS cr(piece),
           LATERAL traceprof._rollup_blocks(lower(cr.piece), upper(cr.piece),
                                            (SELECT st.rolled FROM traceprof.cohort_rollup_state st)) x;
    uncovered := tstzmultirange(tstzrange(from_time, until_time)) - covered;
    -- The exact path's jobs: uncovered time for all of a cohort's
    -- durations, covered time for the cut buckets only.
    FOR r IN SELECT unnest(uncovered) LOOP
        job_cohort := job_cohort || ARRAY['a', 'b'];
        job_from := job_from || ARRAY[lower(r), lower(r)];
        job_until := job_until || ARRAY[upper(r), upper(r)];
        job_durs := job_durs || ARRAY[durs_a, durs_b];
    END LOOP;
    FOR r IN SELECT unnest(covered) LOOP
        IF NOT isempty(part_a) THEN
            job_cohort := job_cohort || 'a'::text;
            job_from := job_from || lower(r);
            job_until := job_until || upper(r);
            job_durs := job_durs || part_a;
        END IF;
        IF NOT isempty(part_b) THEN
            job_cohort := job_cohort || 'b'::text;
            job_from := job_from || lower(r);
            job_until := job_until || upper(r);
            job_durs := job_durs || part_b;
        END IF;
    END LOOP;

    RETURN QUERY EXECUTE $q$
    WITH rolled AS (
        SELECT x.function_id, x.in_a, x.in_b,
               x.sign * x.requests AS requests, x.sign * x.sampled_requests AS sampled_requests,
               x.sign * x.samples AS samples, x.sign * x.sum_w AS sum_w, x.sign * x.sum_ww AS sum_ww,
               x.sign * x.sum_wt AS sum_wt, x.sign * x.sum_s AS sum_s, x.sign * x.sum_ss AS sum_ss,
               x.sign * x.sum_st AS sum_st
        FROM (SELECT c.*, b.sign,
                     c.duration_bucket = ANY ($5)
                       AND ($6::int4multirange IS NULL OR c.status_code::integer <@ $6::int4multirange)
                       AND ($7::bigint[] IS NULL OR c.route_id = ANY ($7)) AS in_a,
                     c.duration_bucket = ANY ($8)
                       AND ($9::int4multirange IS NULL OR c.status_code::integer <@ $9::int4multirange)
                       AND ($10::bigint[] IS NULL OR c.route_id = ANY ($10)) AS in_b
              FROM unnest($2::smallint[], $15::timestamptz[], $16::integer[]) AS b(minutes, start, sign)
              JOIN traceprof.cohort_rollup c
                ON c.service = $1 AND c.minutes = b.minutes AND c.minute = b.start
              WHERE $4 OR c.function_id IS NULL) x
        WHERE x.in_a OR x.in_b
    ), raw AS (
        SELECT m.function_id, j.cohort = 'a' AS in_a, j.cohort = 'b' AS in_b,
               m.requests, m.sampled_requests, m.samples,
               m.sum_w, m.sum_ww, m.sum_wt, m.sum_s, m.sum_ss, m.sum_st
        FROM unnest($11::text[], $12::timestamptz[], $13::timestamptz[], $14::int8multirange[])
             AS j(cohort, from_time, until_time, durations)
        CROSS JOIN LATERAL traceprof._cohort_moments(
             $3, j.from_time, j.until_time, j.durations,
             CASE j.cohort WHEN 'a' THEN $6::int4multirange ELSE $9::int4multirange END,
             CASE j.cohort WHEN 'a' THEN $7::bigint[] ELSE $10::bigint[] END,
             $4) m
    ), parts AS (
        SELECT * FROM rolled UNION ALL SELECT * FROM raw
    ), summed AS (
        SELECT p.function_id,
               sum(p.requests) FILTER (WHERE p.in_a)::bigint AS a_requests,
               sum(p.sampled_requests) FILTER (WHERE p.in_a)::bigint AS a_sampled,
               sum(p.samples) FILTER (WHERE p.in_a)::bigint AS a_samples,
               sum(p.sum_w) FILTER (WHERE p.in_a) AS a_w, sum(p.sum_ww) FILTER (WHERE p.in_a) AS a_ww,
               sum(p.sum_wt) FILTER (WHERE p.in_a) AS a_wt, sum(p.sum_s) FILTER (WHERE p.in_a) AS a_s,
               sum(p.sum_ss) FILTER (WHERE p.in_a) AS a_ss, sum(p.sum_st) FILTER (WHERE p.in_a) AS a_st,
               sum(p.requests) FILTER (WHERE p.in_b)::bigint AS b_requests,
               sum(p.sampled_requests) FILTER (WHERE p.in_b)::bigint AS b_sampled,
               sum(p.samples) FILTER (WHERE p.in_b)::bigint AS b_samples,
               sum(p.sum_w) FILTER (WHERE p.in_b) AS b_w, sum(p.sum_ww) FILTER (WHERE p.in_b) AS b_ww,
               sum(p.sum_wt) FILTER (WHERE p.in_b) AS b_wt, sum(p.sum_s) FILTER (WHERE p.in_b) AS b_s,
               sum(p.sum_ss) FILTER (WHERE p.in_b) AS b_ss, sum(p.sum_st) FILTER (WHERE p.in_b) AS b_st
        FROM parts p
        GROUP BY p.function_id
    )
    -- Subtracted blocks leave rounding residue where nothing remains: the
    -- request counts are exact, so they decide.
    SELECT s.function_id, s.a_requests, s.a_sampled, s.a_samples,
           CASE WHEN s.a_sampled > 0 THEN s.a_w END, CASE WHEN s.a_sampled > 0 THEN s.a_ww END,
           CASE WHEN s.a_sampled > 0 THEN s.a_wt END, CASE WHEN s.a_sampled > 0 THEN s.a_s END,
           CASE WHEN s.a_sampled > 0 THEN s.a_ss END, CASE WHEN s.a_sampled > 0 THEN s.a_st END,
           s.b_requests, s.b_sampled, s.b_samples,
           CASE WHEN s.b_sampled > 0 THEN s.b_w END, CASE WHEN s.b_sampled > 0 THEN s.b_ww END,
           CASE WHEN s.b_sampled > 0 THEN s.b_wt END, CASE WHEN s.b_sampled > 0 THEN s.b_s END,
           CASE WHEN s.b_sampled > 0 THEN s.b_ss END, CASE WHEN s.b_sampled > 0 THEN s.b_st END
    FROM summed s
    WHERE s.function_id IS NULL OR s.a_sampled > 0 OR s.b_sampled > 0
    $q$ USING service, blk_minutes, traceprof.service_sources(service), coalesce(with_functions, true),
              fast_a, fa.statuses, fa.route_ids, fast_b, fb.statuses, fb.route_ids,
              job_cohort, job_from, job_until, job_durs, blk_start, blk_sign;
END $fn$;

-- How much data backs a comparison: per cohort ('a', 'b') the requests
-- that match, those with at least one sample, their samples and CPU ms.
CREATE OR REPLACE FUNCTION traceprof.cohort_sizes(
    service text, from_time timestamptz, until_time timestamptz,
    cohort_a jsonb, cohort_b jsonb, use_rollup boolean DEFAULT true)
RETURNS TABLE (cohort text, requests bigint, sampled_requests bigint, samples bigint, cpu_ms double precision)
LANGUAGE sql STABLE AS $$
    SELECT c.cohort, coalesce(v.requests, 0), coalesce(v.sampled, 0), coalesce(v.samples, 0),
           coalesce(v.cpu_ms, 0)
    FROM (VALUES ('a'), ('b')) AS c(cohort)
    LEFT JOIN (
        SELECT v.*
        FROM traceprof._cohort_sums($1, $2, $3, $4, $5, false, $6) s
        CROSS JOIN LATERAL (VALUES ('a', s.a_requests, s.a_sampled, s.a_samples, s.a_w),
                                   ('b', s.b_requests, s.b_sampled, s.b_samples, s.b_w))
                   AS v(cohort, requests, sampled, samples, cpu_ms)
        WHERE s.function_id IS NULL) v USING (cohort)
    ORDER BY 1
$$;

-- Per function: CPU ms in each cohort, the inclusive share of the cohort's
-- request CPU (a_share, b_share), delta = a_share - b_share, the self
-- shares, the request-level z statistic of delta and its two-sided p-value
-- (and the p-value of the self-share difference). Ordered by |delta|.
-- z and p are NULL when a cohort has fewer than two requests with samples,
-- or when neither cohort varies between requests while the shares differ.
CREATE OR REPLACE FUNCTION traceprof.compare_cohorts(
    service text, from_time timestamptz, until_time timestamptz,
    cohort_a jsonb, cohort_b jsonb, use_rollup boolean DEFAULT true)
RETURNS TABLE (function text, module text,
               a_cpu_ms double precision, b_cpu_ms double precision,
               a_share double precision, b_share double precision, delta double precision,
               a_self_share double precision, b_self_share double precision,
               z double precision, p_value double precision, p_value_self double precision)
LANGUAGE sql STABLE AS $$
    WITH s AS MATERIALIZED (
        SELECT * FROM traceprof._cohort_sums($1, $2, $3, $4, $5, true, $6)
    ), tot AS (
        SELECT * FROM s WHERE s.function_id IS NULL
    ), fn AS (
        SELECT f.function_id,
               coalesce(f.a_w, 0) AS a_cpu, coalesce(f.b_w, 0) AS b_cpu,
               -- rounding can put a share a hair above 1; the true value is not
               least(coalesce(f.a_w, 0) / nullif(t.a_w, 0), 1) AS ra,
               least(coalesce(f.b_w, 0) / nullif(t.b_w, 0), 1) AS rb,
               least(coalesce(f.a_s, 0) / nullif(t.a_w, 0), 1) AS sa,
               least(coalesce(f.b_s, 0) / nullif(t.b_w, 0), 1) AS sb,
               traceprof.ratio_variance(t.a_sampled, t.a_w, t.a_ww, f.a_w, f.a_ww, f.a_wt) AS va,
               traceprof.ratio_variance(t.b_sampled, t.b_w, t.b_ww, f.b_w, f.b_ww, f.b_wt) AS vb,
               traceprof.ratio_variance(t.a_sampled, t.a_w, t.a_ww, f.a_s, f.a_ss, f.a_st) AS vsa,
               traceprof.ratio_variance(t.b_sampled, t.b_w, t.b_ww, f.b_s, f.b_ss, f.b_st) AS vsb
        FROM s f CROSS JOIN tot t
        WHERE f.function_id IS NOT NULL
    ), zs AS (
        SELECT fn.*,
               -- differences within rounding error are none (as in two_sample_z)
               CASE WHEN abs(ra - rb) <= 1e-12 THEN 0 ELSE ra - rb END AS delta,
               traceprof.two_sample_z(ra, va, rb, vb) AS z,
               traceprof.two_sample_z(sa, vsa, sb, vsb) AS z_self
        FROM fn
    )
    SELECT coalesce(f.name, '[function ' || zs.function_id || ']'), coalesce(f.module, ''),
           zs.a_cpu, zs.b_cpu, zs.ra, zs.rb, zs.delta, zs.sa, zs.sb,
           zs.z, traceprof.normal_p_two_sided(zs.z), traceprof.normal_p_two_sided(zs.z_self)
    FROM zs
    LEFT JOIN traceprof.functions f ON f.function_id = zs.function_id
    ORDER BY abs(zs.delta) DESC NULLS LAST, 1, 2
$$;
