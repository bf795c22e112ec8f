-- 005_cohorts: cohort comparison. Which functions take a larger share of
-- the CPU of one set of requests (cohort A: say, slower than 1 s) than of
-- another (cohort B: faster than 100 ms), and is the difference more than
-- noise? docs/cohorts.md has the user's side; this header has the design.
--
-- The unit of observation is the request. Samples of one request are
-- correlated (a request that takes the slow path takes it for all of its
-- samples), so the test works on per-request sums: t_i = CPU ms of request
-- i, f_i = CPU ms of request i on stacks containing function f. The share
-- R = sum(f)/sum(t) is a ratio estimator with the cluster-robust variance
--   Var(R) = n/(n-1) * sum((f_i - R t_i)^2) / sum(t)^2
--          = n/(n-1) * (S_ff - 2 R S_ft + R^2 S_tt) / S_t^2
-- which needs only the moments n, S_t, S_tt (per cohort) and S_f, S_ff,
-- S_ft (per function). Moments add up, so they can be precomputed per
-- group and combined later: that is the rollup.
--
-- Workload: one service at 1,000 requests/s is 3.6 M requests an hour, of
-- which a few percent have a sample at 19 Hz. Joining requests to samples
-- and expanding stacks costs about a quarter of a second per minute of such
-- a service; reading the rollup of an hour costs tens of milliseconds. The
-- rollup is keyed by (minute, service, route_id, status_code, duration
-- bucket), the duration buckets following a 1-2-5 series, so a cohort whose
-- bounds lie on the series is a set of whole rollup rows; 10- and 60-minute
-- blocks summed from the minutes keep long ranges cheap. Whatever the
-- rollup does not cover exactly (minutes not yet rolled, partial minutes at
-- the ends of the time range, duration buckets cut by a bound off the
-- series) is computed from the raw tables by the same SQL that builds the
-- rollup (traceprof._cohort_moments), so both paths give the same numbers.

INSERT INTO traceprof.config (key, value, description) VALUES
    ('request_sample_window', '1 minute',
     'samples of a request are looked for in buckets from its start minus this to its end plus this (bucket width and clock skew)')
ON CONFLICT (key) DO NOTHING;

-- ---------------------------------------------------------------------
-- The normal tail.
--
-- erfc(x) for x >= 0 is computed as t * exp(-x^2 + P(t)), t = 2 / (2 + x),
-- where P is a degree-20 polynomial fitted (Chebyshev nodes on t in (0, 1],
-- 50-digit reference values) to log(erfc(x) / t) + x^2. That function is
-- analytic in t on [0, 1], including the tail t -> 0, so the fit holds its
-- accuracy everywhere: relative error below 6e-13 for all x where erfc(x)
-- is a normal double, measured in double arithmetic. erfc(x) is 0 past
-- x = 26.55, where the true value drops below the smallest normal double.
CREATE FUNCTION traceprof.erfc(x double precision) RETURNS double precision
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    ax double precision := abs(x);
    t double precision := 2.0 / (2.0 + abs(x));
    p double precision;
    r double precision;
BEGIN
    IF x = 'NaN'::double precision THEN
        RETURN x;
    END IF;
    IF ax > 26.55 THEN
        r := 0;
    ELSIF ax = 0 THEN
        r := 1;  -- exact, where the fit is 1e-13 off
    ELSE
        -- Horner, highest degree first.
        p := 0.13842798492384864;
        p := p * t - 1.5516810551526157;
        p := p * t + 7.903453498412299;
        p := p * t - 24.121285420494438;
        p := p * t + 48.928493577980085;
        p := p * t - 69.12595654794663;
        p := p * t + 69.40905627702548;
        p := p * t - 50.00718723559132;
        p := p * t + 26.369337277783313;
        p := p * t - 10.725293458254654;
        p := p * t + 3.3867148420548148;
        p := p * t - 0.6193021796619832;
        p := p * t + 0.15868109658432594;
        p := p * t - 0.10792827466771283;
        p := p * t - 0.14233433657229339;
        p := p * t - 0.08602015001829581;
        p := p * t + 0.08333628236320327;
        p := p * t + 0.37499994429949746;
        p := p * t + 1.00000000041813;
        p := p * t - 1.2655121234851678;
        r := t * exp(p - ax * ax);
    END IF;
    RETURN CASE WHEN x < 0 THEN 2.0 - r ELSE r END;
END $$;

-- Two-sided p-value of a standard normal statistic: P(|Z| >= |z|).
CREATE FUNCTION traceprof.normal_p_two_sided(z double precision) RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT traceprof.erfc(abs(z) / sqrt(2.0::double precision))
$$;

-- Cluster-robust variance of the ratio estimator R = sum_f / sum_t from
-- the moments of n clusters (requests). NULL when undefined: fewer than two
-- requests or no CPU. The residual sum of squares is computed from moments,
-- so rounding can leave a tiny value (even a negative one) where the exact
-- result is zero, e.g. for a function on every stack; a residual below
-- 1e-9 of the terms it came from is taken as zero.
CREATE FUNCTION traceprof.ratio_variance(
    n bigint, sum_t double precision, sum_tt double precision,
    sum_f double precision, sum_ff double precision, sum_ft double precision)
RETURNS double precision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    r double precision;
    ss double precision;
BEGIN
    IF n IS NULL OR n < 2 OR sum_t IS NULL OR sum_t <= 0 THEN
        RETURN NULL;
    END IF;
    sum_f := coalesce(sum_f, 0);
    sum_ff := coalesce(sum_ff, 0);
    sum_ft := coalesce(sum_ft, 0);
    r := sum_f / sum_t;
    ss := sum_ff - 2 * r * sum_ft + r * r * sum_tt;
    IF ss <= 1e-9 * (sum_ff + r * r * sum_tt) THEN
        ss := 0;
    END IF;
    RETURN n::double precision / (n - 1) * ss / (sum_t * sum_t);
END $$;

-- Two-sample z statistic of two independent estimates with variances.
-- NULL when a variance is undefined. When both variances are zero (every
-- request of each cohort has the same share) the test cannot scale the
-- difference: z is 0 if the shares agree (to 1e-12) and NULL otherwise.
CREATE FUNCTION traceprof.two_sample_z(
    a double precision, var_a double precision, b double precision, var_b double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN a IS NULL OR b IS NULL OR var_a IS NULL OR var_b IS NULL THEN NULL
        WHEN abs(a - b) <= 1e-12 THEN 0
        WHEN var_a + var_b = 0 THEN NULL
        ELSE (a - b) / sqrt(var_a + var_b)
    END
$$;

-- ---------------------------------------------------------------------
-- Duration buckets: a 1-2-5 series of milliseconds. Bucket 0 is [0, 1 ms),
-- bucket 1 [1, 2 ms), 2 [2, 5 ms), 3 [5, 10 ms), ..., 9 [500 ms, 1 s),
-- 10 [1, 2 s), ..., 24 [50000 s, infinity). The small SQL functions from
-- here on are not STRICT, so that the planner can inline them.
CREATE FUNCTION traceprof.duration_thresholds_us() RETURNS bigint[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT '{1000,2000,5000,10000,20000,50000,100000,200000,500000,
             1000000,2000000,5000000,10000000,20000000,50000000,
             100000000,200000000,500000000,1000000000,2000000000,5000000000,
             10000000000,20000000000,50000000000}'::bigint[]
$$;

CREATE FUNCTION traceprof.duration_bucket(duration_us bigint) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT width_bucket(duration_us, traceprof.duration_thresholds_us())::smallint
$$;

-- The durations (microseconds, [lower, upper)) of one bucket.
CREATE FUNCTION traceprof.duration_bucket_range(bucket integer) RETURNS int8range
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT int8range(CASE WHEN bucket = 0 THEN 0 ELSE th[bucket] END, th[bucket + 1])
    FROM (SELECT traceprof.duration_thresholds_us() AS th) x
    WHERE bucket BETWEEN 0 AND cardinality(th)
$$;

-- The start of the minute (or hour: any width that divides a day) that a
-- timestamp falls in, in UTC whatever the session's time zone, and the
-- first such boundary at or after it.
CREATE FUNCTION traceprof.time_floor(ts timestamptz, width interval DEFAULT '1 minute') RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT date_bin(width, ts, timestamptz '2000-01-01 00:00:00+00')
$$;

CREATE FUNCTION traceprof.time_ceil(ts timestamptz, width interval DEFAULT '1 minute') RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN traceprof.time_floor(ts, width) = ts THEN ts
                ELSE traceprof.time_floor(ts, width) + width END
$$;

-- ---------------------------------------------------------------------
-- The rollup. One row per (minute, service, route, status, duration bucket)
-- with function_id NULL holds the group's totals; one row per function seen
-- in the group holds that function's moments. w is t_i in a totals row and
-- f_i (inclusive) in a function row, so every row has the same meaning:
-- the moments of some per-request CPU figure w against the request's t.
-- Requests without samples count in `requests` and nowhere else.
--
-- Blocks of 10 and 60 minutes that are wholly rolled also get rows (minutes
-- = 10, 60), the sums of the rows of the next finer level. A busy service
-- has tens of thousands of function rows a minute but not many more an
-- hour, so a query reads the coarsest blocks that fit its range
-- (traceprof._rollup_blocks).
CREATE TABLE traceprof.cohort_rollup (
    minute           timestamptz NOT NULL,  -- requests that started in [minute, minute + minutes)
    minutes          smallint NOT NULL CHECK (minutes IN (1, 10, 60)),  -- the block's length
    service          text NOT NULL,
    route_id         bigint NOT NULL,
    status_code      smallint NOT NULL,
    duration_bucket  smallint NOT NULL,     -- traceprof.duration_bucket(duration_us)
    function_id      bigint,                -- NULL: the totals row of the group
    requests         integer,               -- totals row: requests in the group
    sampled_requests integer,               -- requests with a sample (function row: on the function)
    samples          integer,               -- totals row: samples of those requests
    sum_w            double precision,      -- sum over requests of w_i (ms)
    sum_ww           double precision,      -- sum of w_i^2
    sum_wt           double precision,      -- sum of w_i * t_i
    sum_s            double precision,      -- function row: sum of self ms s_i; NULL when 0
    sum_ss           double precision,      -- function row: sum of s_i^2
    sum_st           double precision       -- function row: sum of s_i * t_i
) PARTITION BY RANGE (minute);
-- Queries look up (service, block); refreshes delete and sum blocks of
-- every service by time, so time leads.
CREATE INDEX cohort_rollup_block_idx ON traceprof.cohort_rollup (minutes, minute, service);

-- The block lengths, coarsest first; each divides the one before it.
CREATE FUNCTION traceprof.rollup_block_minutes() RETURNS smallint[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT '{60,10,1}'::smallint[] $$;

-- Which time the rollup covers: minute-aligned ranges of request start
-- times whose rows are in cohort_rollup (for every service).
CREATE TABLE traceprof.cohort_rollup_state (
    singleton    boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    rolled       tstzmultirange NOT NULL DEFAULT '{}',  -- covered start times
    refreshed_at timestamptz                            -- last refresh
);
INSERT INTO traceprof.cohort_rollup_state DEFAULT VALUES;

-- Register the rollup with the partition manager, keeping whatever earlier
-- migrations registered.
DO $$
DECLARE
    tables text[] := traceprof._partitioned_tables();
BEGIN
    IF NOT 'cohort_rollup' = ANY (tables) THEN
        tables := tables || 'cohort_rollup'::text;
    END IF;
    EXECUTE format('CREATE OR REPLACE FUNCTION traceprof._partitioned_tables() RETURNS text[] '
                   'LANGUAGE sql IMMUTABLE AS $f$ SELECT %L::text[] $f$', tables);
END $$;

-- Partitions for every day that already has samples or requests, so a
-- database upgraded with data in it can roll that data up.
SELECT traceprof.create_partitions(
    least(now() - interval '1 day',
          (SELECT min(to_date(right(c.relname, 8), 'YYYYMMDD'))::timestamp AT TIME ZONE 'UTC'
           FROM pg_inherits i
           JOIN pg_class c ON c.oid = i.inhrelid
           JOIN pg_class p ON p.oid = i.inhparent
           JOIN pg_namespace n ON n.oid = p.relnamespace
           WHERE n.nspname = 'traceprof' AND p.relname IN ('samples', 'requests')
             AND c.relname ~ '_p[0-9]{8}$')),
    NULL);

-- ---------------------------------------------------------------------
-- Cohort specs. A spec is a jsonb object of parameters (docs/cohorts.md);
-- parsing turns it into a filter and never into SQL text.
CREATE TYPE traceprof.cohort_filter AS (
    min_us    bigint,          -- durations >= this (NULL: no lower bound)
    max_us    bigint,          -- durations < this (NULL: no upper bound)
    statuses  int4multirange,  -- status codes (NULL: any)
    route_ids bigint[]         -- routes matching route/method (NULL: any)
);

-- A duration value: a JSON number of milliseconds or a string such as
-- "250us", "100ms", "1.5s", "2m". Returns microseconds, rounded up (a
-- duration in whole microseconds is >= x exactly when it is >= ceil(x),
-- and < x exactly when it is < ceil(x)).
CREATE FUNCTION traceprof._cohort_duration_us(v jsonb, key text, cohort text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    m text[];
    ms numeric;
BEGIN
    IF jsonb_typeof(v) = 'number' THEN
        ms := (v #>> '{}')::numeric;
    ELSIF jsonb_typeof(v) = 'string' THEN
        m := regexp_match(v #>> '{}', '^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(us|µs|ms|s|m|min|h)?\s*$');
        IF m IS NOT NULL THEN
            ms := m[1]::numeric * CASE coalesce(m[2], 'ms')
                WHEN 'us' THEN 0.001 WHEN 'µs' THEN 0.001 WHEN 'ms' THEN 1
                WHEN 's' THEN 1000 WHEN 'm' THEN 60000 WHEN 'min' THEN 60000
                WHEN 'h' THEN 3600000 END;
        END IF;
    END IF;
    IF ms IS NULL OR ms < 0 OR ms > 1e12 THEN
        RAISE EXCEPTION 'invalid duration "%" for % in %',
            left(coalesce(v #>> '{}', 'null'), 80), key, cohort
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'a duration is a number of milliseconds or a string such as "250us", "100ms", "1.5s" or "2m"';
    END IF;
    RETURN ceil(ms * 1000)::bigint;
END $$;

-- A status value: "5xx", "404", "4xx,5xx", a JSON number, or an array of
-- those. Returns the matching codes as a multirange.
CREATE FUNCTION traceprof._cohort_statuses(v jsonb, cohort text) RETURNS int4multirange
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    items text[] := '{}';
    item text;
    e jsonb;
    code integer;
    result int4multirange := '{}';
BEGIN
    FOR e IN SELECT x FROM jsonb_array_elements(CASE WHEN jsonb_typeof(v) = 'array' THEN v
                                                     ELSE jsonb_build_array(v) END) x LOOP
        IF jsonb_typeof(e) = 'string' THEN
            items := items || string_to_array(e #>> '{}', ',');
        ELSE
            items := items || e::text;  -- a number; anything else fails below
        END IF;
    END LOOP;
    IF cardinality(items) = 0 THEN  -- "" or []
        items := ARRAY[CASE WHEN jsonb_typeof(v) = 'string' THEN v #>> '{}' ELSE v::text END];
    END IF;
    FOREACH item IN ARRAY items LOOP
        item := lower(btrim(item));
        IF item ~ '^[1-5]xx$' THEN
            code := left(item, 1)::integer * 100;
            result := result + int4multirange(int4range(code, code + 100));
        ELSIF item ~ '^[1-5][0-9][0-9]$' THEN
            result := result + int4multirange(int4range(item::integer, item::integer + 1));
        ELSE
            RAISE EXCEPTION 'invalid status "%" for status in %', left(item, 80), cohort
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'a status is a code such as 404 or "404", a class such as "5xx", a comma-separated list such as "4xx,5xx", or an array of those';
        END IF;
    END LOOP;
    RETURN result;
END $$;

-- A route glob: * matches any run of characters, ? one character, a
-- backslash makes the next character literal; everything else, % and _
-- included, is literal. Returns the equivalent LIKE pattern.
CREATE FUNCTION traceprof.glob_to_like(glob text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    out text := '';
    ch text;
    escaped boolean := false;
BEGIN
    FOREACH ch IN ARRAY regexp_split_to_array(glob, '') LOOP
        IF escaped THEN
            out := out || CASE WHEN ch IN ('\', '%', '_') THEN '\' || ch ELSE ch END;
            escaped := false;
        ELSIF ch = '\' THEN
            escaped := true;
        ELSIF ch = '*' THEN
            out := out || '%';
        ELSIF ch = '?' THEN
            out := out || '_';
        ELSIF ch IN ('%', '_') THEN
            out := out || '\' || ch;
        ELSE
            out := out || ch;
        END IF;
    END LOOP;
    IF escaped THEN
        out := out || '\\';
    END IF;
    RETURN out;
END $$;

-- A string or an array of strings; anything else is an error naming key.
CREATE FUNCTION traceprof._cohort_strings(v jsonb, key text, what text, cohort text) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF jsonb_typeof(v) = 'string' THEN
        RETURN ARRAY[v #>> '{}'];
    END IF;
    IF jsonb_typeof(v) = 'array' AND jsonb_array_length(v) > 0
       AND NOT EXISTS (SELECT FROM jsonb_array_elements(v) x WHERE jsonb_typeof(x) <> 'string') THEN
        RETURN ARRAY(SELECT x #>> '{}' FROM jsonb_array_elements(v) x);
    END IF;
    RAISE EXCEPTION 'invalid % % for % in %', what, left(v::text, 80), key, cohort
        USING ERRCODE = 'invalid_parameter_value',
              HINT = format('%s is a string or an array of strings', key);
END $$;

-- Parses one cohort spec; cohort names it in error messages ("cohort_a").
CREATE FUNCTION traceprof.parse_cohort(spec jsonb, cohort text DEFAULT 'cohort')
RETURNS traceprof.cohort_filter
LANGUAGE plpgsql STABLE AS $$
DECLARE
    f traceprof.cohort_filter;
    k text;
    patterns text[];
    methods text[];
BEGIN
    IF spec IS NULL OR jsonb_typeof(spec) <> 'object' THEN
        RAISE EXCEPTION '% must be a JSON object, not %', cohort, coalesce(left(spec::text, 80), 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use ''{}'' for all requests, or keys such as {"min_duration": "1s", "status": "5xx"}';
    END IF;
    FOR k IN SELECT jsonb_object_keys(spec) LOOP
        IF k NOT IN ('min_duration', 'max_duration', 'status', 'route', 'method') THEN
            RAISE EXCEPTION 'unknown cohort key "%" in %', left(k, 80), cohort
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'cohort keys are min_duration, max_duration, status, route and method';
        END IF;
    END LOOP;
    -- A JSON null means the key is not set.
    spec := jsonb_strip_nulls(spec);
    IF spec ? 'min_duration' THEN
        f.min_us := traceprof._cohort_duration_us(spec -> 'min_duration', 'min_duration', cohort);
    END IF;
    IF spec ? 'max_duration' THEN
        f.max_us := traceprof._cohort_duration_us(spec -> 'max_duration', 'max_duration', cohort);
    END IF;
    IF f.min_us >= f.max_us THEN
        RAISE EXCEPTION 'min_duration "%" is not below max_duration "%" in %',
            left(spec ->> 'min_duration', 80), left(spec ->> 'max_duration', 80), cohort
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'min_duration is inclusive and max_duration exclusive, so min_duration must be the smaller';
    END IF;
    IF spec ? 'status' THEN
        f.statuses := traceprof._cohort_statuses(spec -> 'status', cohort);
    END IF;
    IF spec ? 'route' THEN
        SELECT array_agg(traceprof.glob_to_like(g))
          INTO patterns
          FROM unnest(traceprof._cohort_strings(spec -> 'route', 'route', 'route pattern', cohort)) g;
    END IF;
    IF spec ? 'method' THEN
        SELECT array_agg(upper(m))
          INTO methods
          FROM unnest(traceprof._cohort_strings(spec -> 'method', 'method', 'method', cohort)) m;
    END IF;
    IF patterns IS NOT NULL OR methods IS NOT NULL THEN
        -- route_id 0 is the request without a route: method '' and route ''.
        SELECT coalesce(array_agg(r.route_id), '{}')
          INTO f.route_ids
          FROM (SELECT rt.route_id, rt.method, rt.route FROM traceprof.routes rt
                UNION ALL
                SELECT 0, '', '' WHERE NOT EXISTS (SELECT FROM traceprof.routes WHERE route_id = 0)) r
         WHERE (patterns IS NULL OR r.route LIKE ANY (patterns))
           AND (methods IS NULL OR upper(r.method) = ANY (methods));
    END IF;
    RETURN f;
END $$;

-- traceprof.stack_functions planned on its own, with nested loops allowed:
-- _cohort_moments runs with them off (its joins are bulk), but a few
-- thousand stacks are best found by index lookups in the stacks table, not
-- by reading all of it.
CREATE FUNCTION traceprof._stack_functions_indexed(stack_ids bigint[])
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
CREATE FUNCTION traceprof._cohort_moments(
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

-- ---------------------------------------------------------------------
-- Rolling up.

-- Rolls up requests that started in [from_time, until_time), widened to
-- whole minutes, for every service, replacing what the rollup held for that
-- time. Use it for late data: spans or samples that arrived after their
-- minute was rolled. Returns the number of minutes rolled.
CREATE FUNCTION traceprof.refresh_rollups_range(from_time timestamptz, until_time timestamptz)
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
CREATE FUNCTION traceprof.refresh_rollups(until_time timestamptz DEFAULT NULL)
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

-- ---------------------------------------------------------------------
-- Comparing.

-- The rollup blocks whose signed sum covers [lo, hi) (minute-aligned, all
-- rolled): whole blocks of the coarsest length that fits, then finer ones
-- at the ends. An end that covers more than half of a wholly rolled block
-- takes that block and subtracts the rest (sign -1), so at most half a
-- block of each length is read at each end. rolled is the rolled time.
CREATE FUNCTION traceprof._rollup_blocks(
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

-- The summed moments of both cohorts: per function_id (NULL: the totals)
-- the request counts and the moments of cohort a and of cohort b, from the
-- rollup where it covers the cohort exactly and from
-- traceprof._cohort_moments for the rest. use_rollup false computes
-- everything from the raw tables.
CREATE FUNCTION traceprof._cohort_sums(
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
CREATE FUNCTION traceprof.cohort_sizes(
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
CREATE FUNCTION traceprof.compare_cohorts(
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
