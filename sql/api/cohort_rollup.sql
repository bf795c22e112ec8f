-- cohort_rollup.sql: _stack_functions_indexed, _cohort_moments, refresh_rollups_range, refresh_rollups, _rollup_blocks (taken from migration 005).

-- traceprof.stack_functions planned on its own, with nested loops allowed:
-- _cohort_moments runs with them off (its joins are bulk), but a few
-- thousand stacks are best found by index lookups in the stacks table, not
-- by reading all of it.
CREATE OR REPLACE FUNCTION traceprof._stack_functions_indexed(stack_ids bigint[])
RETURNS TABLE (stack_id bigint, function_id bigint, is_leaf boolean)
LANGUAGE sql STABLE SET enable_nestloop = on AS $$
    SELECT * FROM traceprof.stack_functions(stack_ids)
$$;

-- ---------------------------------------------------------------------
-- The per-request moments: the one piece of SQL behind both the rollup and
-- the exact path of compare_cohorts. For the requests of source_ids that
-- started in [from_time, until_time) and pass the filters, returns per
-- (minute, route, status, duration bucket) a totals row (function_id NULL)
-- and, when with_functions, a row per function, shaped like cohort_rollup.
--
-- A request's samples are the samples rows of the same service with its
-- (trace_id, span_id) whose bucket lies within config
-- 'request_sample_window' of [start, end].
CREATE OR REPLACE FUNCTION traceprof._cohort_moments(
    source_ids bigint[],
    from_time timestamptz,
    until_time timestamptz,
    durations int8multirange DEFAULT NULL,
    statuses int4multirange DEFAULT NULL,
    route_ids bigint[] DEFAULT NULL,
    with_functions boolean DEFAULT true)
RETURNS TABLE (minute timestamptz, route_id bigint, status_code smallint, duration_bucket smallint,
               function_id bigint, requests bigint, sampled_requests bigint, samples bigint,
               sum_w double precision, sum_ww double precision, sum_wt double precision,
               sum_s double precision, sum_ss double precision, sum_st double precision)
LANGUAGE plpgsql STABLE
-- The planner cannot estimate the CTEs (it guesses a handful of rows where
-- there are 10^5) and then groups by sorting on eight keys, which costs
-- twice what hashing does here. Nothing in this query needs an order.
-- For the same reason, on partitions not analyzed yet, it joins requests
-- to samples with a nested loop (thousands x thousands of rows, 0.5 s for
-- ten minutes of a small service); these joins are always bulk, so hash.
SET enable_sort = off
SET enable_nestloop = off
AS $fn$
DECLARE
    slack interval := (SELECT value::interval FROM traceprof.config WHERE key = 'request_sample_window');
BEGIN
    -- EXECUTE plans with the actual values (partition pruning, row
    -- estimates); they are passed as parameters, never spliced.
    RETURN QUERY EXECUTE $q$
    WITH req AS NOT MATERIALIZED (
        SELECT r.trace_id, r.span_id, r.start_time,
               r.start_time + r.duration_us * interval '1 microsecond' AS end_time,
               traceprof.time_floor(r.start_time) AS minute,
               r.route_id, r.status_code,
               traceprof.duration_bucket(r.duration_us) AS duration_bucket
        FROM traceprof.requests r
        WHERE r.source_id = ANY ($1) AND r.start_time >= $2 AND r.start_time < $3
          AND ($4::int8multirange IS NULL OR r.duration_us <@ $4::int8multirange)
          AND ($5::int4multirange IS NULL OR r.status_code::integer <@ $5::int4multirange)
          AND ($6::bigint[] IS NULL OR r.route_id = ANY ($6))
    ), groups AS MATERIALIZED (
        SELECT q.minute, q.route_id, q.status_code, q.duration_bucket,
               count(*) AS requests, max(q.end_time) AS last_end
        FROM req q
        GROUP BY 1, 2, 3, 4
    ), hits AS MATERIALIZED (
        -- CPU ms and sample count per request and stack
        SELECT q.trace_id, q.span_id, q.minute, q.route_id, q.status_code, q.duration_bucket,
               u.stack_id, sum(traceprof.cpu_ms(coalesce(u.n, 1), s.hz)) AS w,
               sum(coalesce(u.n, 1))::bigint AS n
        FROM req q
        JOIN traceprof.samples s ON s.trace_id = q.trace_id AND s.span_id = q.span_id
        CROSS JOIN LATERAL unnest(s.stacks, s.counts) AS u(stack_id, n)
        WHERE s.source_id = ANY ($1)
          AND s.bucket >= $2 - $8 AND s.bucket <= (SELECT max(last_end) FROM groups) + $8
          AND s.bucket >= q.start_time - $8 AND s.bucket <= q.end_time + $8
        GROUP BY 1, 2, 3, 4, 5, 6, 7
    ), per_request AS MATERIALIZED (
        SELECT h.trace_id, h.span_id, h.minute, h.route_id, h.status_code, h.duration_bucket,
               sum(h.w) AS t, sum(h.n)::bigint AS samples, count(*) AS stacks
        FROM hits h
        GROUP BY 1, 2, 3, 4, 5, 6
    ), stack_functions AS MATERIALIZED (
        -- each distinct stack's functions, expanded in one set
        SELECT sf.stack_id, sf.function_id, sf.is_leaf AS is_self
        FROM traceprof._stack_functions_indexed((SELECT array_agg(DISTINCT h.stack_id) FROM hits h WHERE $7)) sf
    ), per_function AS (
        -- f and s of each request and function, with the request's t. A
        -- request with one distinct stack (most, at 19 Hz) needs no summing:
        -- a stack's functions are distinct.
        SELECT h.minute, h.route_id, h.status_code, h.duration_bucket, k.function_id, p.t,
               h.w AS f, CASE WHEN k.is_self THEN h.w END AS s
        FROM hits h
        JOIN per_request p USING (trace_id, span_id)
        JOIN stack_functions k USING (stack_id)
        WHERE p.stacks = 1
        UNION ALL
        SELECT h.minute, h.route_id, h.status_code, h.duration_bucket, k.function_id, p.t,
               sum(h.w), sum(h.w) FILTER (WHERE k.is_self)
        FROM hits h
        JOIN per_request p USING (trace_id, span_id)
        JOIN stack_functions k USING (stack_id)
        WHERE p.stacks > 1
        GROUP BY h.trace_id, h.span_id, h.minute, h.route_id, h.status_code, h.duration_bucket, k.function_id, p.t
    )
    SELECT g.minute, g.route_id, g.status_code, g.duration_bucket, NULL::bigint,
           g.requests, coalesce(p.sampled, 0), coalesce(p.samples, 0),
           p.sum_t, p.sum_tt, p.sum_tt, NULL::double precision, NULL::double precision, NULL::double precision
    FROM groups g
    LEFT JOIN (SELECT minute, route_id, status_code, duration_bucket,
                      count(*) AS sampled, sum(samples)::bigint AS samples,
                      sum(t) AS sum_t, sum(t * t) AS sum_tt
               FROM per_request GROUP BY 1, 2, 3, 4) p
           USING (minute, route_id, status_code, duration_bucket)
    UNION ALL
    SELECT f.minute, f.route_id, f.status_code, f.duration_bucket, f.function_id,
           NULL::bigint, count(*), NULL::bigint,
           sum(f.f), sum(f.f * f.f), sum(f.f * f.t),
           sum(f.s), sum(f.s * f.s), sum(f.s * f.t)
    FROM per_function f
    GROUP BY 1, 2, 3, 4, 5
    $q$ USING source_ids, from_time, until_time, durations, statuses, route_ids,
              coalesce(with_functions, true), slack;
END $fn$;

-- Rolls up requests that started in [from_time, until_time), widened to
-- whole minutes, for every service, replacing what the rollup held for that
-- time. Use it for late data: spans or samples that arrived after their
-- minute was rolled. Returns the number of minutes rolled.
CREATE OR REPLACE FUNCTION traceprof.refresh_rollups_range(from_time timestamptz, until_time timestamptz)
RETURNS integer
LANGUAGE plpgsql
SET work_mem = '64MB'
AS $$
DECLARE
    lo timestamptz := traceprof.time_floor(from_time);
    hi timestamptz := traceprof.time_ceil(until_time);
    chunk_lo timestamptz;
    chunk_hi timestamptz;
    svc text;
    widths smallint[] := traceprof.rollup_block_minutes();
    lvl integer;
    w interval;
    blk timestamptz;
BEGIN
    IF from_time IS NULL OR until_time IS NULL OR until_time < from_time THEN
        RAISE EXCEPTION 'refresh_rollups_range: invalid range % .. %', from_time, until_time
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF hi <= lo THEN
        RETURN 0;
    END IF;
    -- One refresh at a time; a second waits, then finds its work done.
    PERFORM pg_advisory_xact_lock(7353042127005);
    PERFORM traceprof.create_partitions(lo, hi);
    DELETE FROM traceprof.cohort_rollup WHERE minutes = 1 AND minute >= lo AND minute < hi;
    -- A few minutes at a time keeps the joins in memory.
    chunk_lo := lo;
    WHILE chunk_lo < hi LOOP
        chunk_hi := least(hi, chunk_lo + interval '10 minutes');
        FOR svc IN SELECT DISTINCT service FROM traceprof.sources ORDER BY 1 LOOP
            INSERT INTO traceprof.cohort_rollup
            SELECT m.minute, 1, svc, m.route_id, m.status_code, m.duration_bucket, m.function_id,
                   m.requests, m.sampled_requests, m.samples,
                   m.sum_w, m.sum_ww, m.sum_wt, m.sum_s, m.sum_ss, m.sum_st
            FROM traceprof._cohort_moments(traceprof.service_sources(svc), chunk_lo, chunk_hi) m;
        END LOOP;
        chunk_lo := chunk_hi;
    END LOOP;
    UPDATE traceprof.cohort_rollup_state
       SET rolled = rolled + tstzmultirange(tstzrange(lo, hi)), refreshed_at = now();
    -- The coarser blocks this touched, finest level first: rebuilt from the
    -- next finer level when wholly rolled.
    FOR lvl IN REVERSE cardinality(widths) - 1 .. 1 LOOP
        w := widths[lvl] * interval '1 minute';
        FOR blk IN SELECT generate_series(traceprof.time_floor(lo, w), hi - interval '1 minute', w) LOOP
            DELETE FROM traceprof.cohort_rollup WHERE minutes = widths[lvl] AND minute = blk;
            IF (SELECT st.rolled FROM traceprof.cohort_rollup_state st) @> tstzrange(blk, blk + w) THEN
                INSERT INTO traceprof.cohort_rollup
                SELECT blk, widths[lvl], c.service, c.route_id, c.status_code, c.duration_bucket, c.function_id,
                       sum(c.requests), sum(c.sampled_requests), sum(c.samples),
                       sum(c.sum_w), sum(c.sum_ww), sum(c.sum_wt), sum(c.sum_s), sum(c.sum_ss), sum(c.sum_st)
                FROM traceprof.cohort_rollup c
                WHERE c.minutes = widths[lvl + 1] AND c.minute >= blk AND c.minute < blk + w
                GROUP BY c.service, c.route_id, c.status_code, c.duration_bucket, c.function_id;
            END IF;
        END LOOP;
    END LOOP;
    RETURN (extract(epoch FROM hi - lo) / 60)::integer;
END $$;

-- Rolls up every complete minute not rolled yet, from the oldest request to
-- until_time (default: now() minus config 'rollup_settle', which leaves time
-- for late spans and samples; never past the current minute). Call it
-- every minute or so (cron, pg_cron). Returns the number of minutes rolled.
CREATE OR REPLACE FUNCTION traceprof.refresh_rollups(until_time timestamptz DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    hi timestamptz;
    lo timestamptz;
    todo tstzmultirange;
    r tstzrange;
    rolled integer := 0;
BEGIN
    hi := traceprof.time_floor(coalesce(until_time,
              now() - (SELECT value::interval FROM traceprof.config WHERE key = 'rollup_settle')));
    hi := least(hi, traceprof.time_floor(now()));  -- a minute still running is not complete
    -- The oldest request: one index probe per source.
    SELECT traceprof.time_floor(min(x.first))
      INTO lo
      FROM traceprof.sources s,
           LATERAL (SELECT min(q.start_time) AS first FROM traceprof.requests q
                    WHERE q.source_id = s.source_id) x;
    IF lo IS NULL OR lo >= hi THEN
        RETURN 0;
    END IF;
    PERFORM pg_advisory_xact_lock(7353042127005);
    todo := tstzmultirange(tstzrange(lo, hi)) - (SELECT st.rolled FROM traceprof.cohort_rollup_state st);
    FOR r IN SELECT unnest(todo) LOOP
        rolled := rolled + traceprof.refresh_rollups_range(lower(r), upper(r));
    END LOOP;
    RETURN rolled;
END $$;

-- The rollup blocks whose signed sum covers [lo, hi) (minute-aligned, all
-- rolled): whole blocks of the coarsest length that fits, then finer ones
-- at the ends. An end that covers more than half of a wholly rolled block
-- takes that block and subtracts the rest (sign -1), so at most half a
-- block of each length is read at each end. rolled is the rolled time.
CREATE OR REPLACE FUNCTION traceprof._rollup_blocks(
    lo timestamptz, hi timestamptz, rolled tstzmultirange, sgn integer DEFAULT 1, lvl integer DEFAULT 1)
RETURNS TABLE (block_minutes smallint, block_start timestamptz, block_sign integer)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    widths smallint[] := traceprof.rollup_block_minutes();
    w interval := widths[lvl] * interval '1 minute';
    a timestamptz := traceprof.time_ceil(lo, w);
    b timestamptz := traceprof.time_floor(hi, w);
    parts tstzrange[];
    p tstzrange;
    blk timestamptz;
BEGIN
    IF lo >= hi THEN
        RETURN;
    END IF;
    IF lvl = cardinality(widths) OR a > b THEN
        -- finest level, or [lo, hi) inside one block of this length
        parts := ARRAY[tstzrange(lo, hi)];
    ELSE
        RETURN QUERY SELECT widths[lvl], g, sgn FROM generate_series(a, b - w, w) g;
        parts := ARRAY[tstzrange(lo, a), tstzrange(b, hi)];
    END IF;
    IF lvl = cardinality(widths) THEN
        RETURN QUERY SELECT widths[lvl], g, sgn FROM generate_series(lo, hi - w, w) g;
        RETURN;
    END IF;
    FOREACH p IN ARRAY parts LOOP
        CONTINUE WHEN isempty(p);
        blk := traceprof.time_floor(lower(p), w);
        IF upper(p) - lower(p) > w / 2 AND rolled @> tstzrange(blk, blk + w) THEN
            RETURN QUERY SELECT widths[lvl], blk, sgn;
            RETURN QUERY SELECT * FROM traceprof._rollup_blocks(blk, lower(p), rolled, -sgn, lvl + 1);
            RETURN QUERY SELECT * FROM traceprof._rollup_blocks(upper(p), blk + w, rolled, -sgn, lvl + 1);
        ELSE
            RETURN QUERY SELECT * FROM traceprof._rollup_blocks(lower(p), upper(p), rolled, sgn, lvl + 1);
        END IF;
    END LOOP;
END $$;

-- Rollups run as the owner (cron, or traceprof-db); not the reader's.
REVOKE EXECUTE ON FUNCTION traceprof.refresh_rollups(timestamptz),
                           traceprof.refresh_rollups_range(timestamptz, timestamptz)
    FROM traceprof_reader;
