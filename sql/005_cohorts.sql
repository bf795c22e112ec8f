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
--
-- The functions live in sql/api/: cohort_statistics.sql (the test),
-- cohort_buckets.sql (duration buckets, minutes, block lengths),
-- cohort_spec.sql (parsing a spec), cohort_rollup.sql (rolling up),
-- compare_cohorts.sql (comparing).

INSERT INTO traceprof.config (key, value, description) VALUES
    ('request_sample_window', '1 minute',
     'samples of a request are looked for in buckets from its start minus this to its end plus this (bucket width and clock skew)')
ON CONFLICT (key) DO NOTHING;

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

-- Which time the rollup covers: minute-aligned ranges of request start
-- times whose rows are in cohort_rollup (for every service).
CREATE TABLE traceprof.cohort_rollup_state (
    singleton    boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    rolled       tstzmultirange NOT NULL DEFAULT '{}',  -- covered start times
    refreshed_at timestamptz                            -- last refresh
);
INSERT INTO traceprof.cohort_rollup_state DEFAULT VALUES;

-- The partition manager covers the rollup (traceprof._partitioned_tables,
-- sql/api/partitions.sql). Partitions for every day that already has
-- samples or requests, so a database upgraded with data in it can roll that
-- data up.
-- Functions are not defined in migrations (sql/README.md): this block is
-- the partition rule of traceprof.create_partitions (sql/api/partitions.sql)
-- inlined, one UTC day per partition, <table>_pYYYYMMDD.
DO $$
DECLARE
    lo timestamptz := least(now() - interval '1 day',
          (SELECT min(to_date(right(c.relname, 8), 'YYYYMMDD'))::timestamp AT TIME ZONE 'UTC'
           FROM pg_inherits i
           JOIN pg_class c ON c.oid = i.inhrelid
           JOIN pg_class p ON p.oid = i.inhparent
           JOIN pg_namespace n ON n.oid = p.relnamespace
           WHERE n.nspname = 'traceprof' AND p.relname IN ('samples', 'requests')
             AND c.relname ~ '_p[0-9]{8}$'));
    hi timestamptz := now() + (SELECT value::interval FROM traceprof.config WHERE key = 'partitions_ahead');
    day date;
    t text;
BEGIN
    FOR day IN SELECT generate_series((lo AT TIME ZONE 'UTC')::date, (hi AT TIME ZONE 'UTC')::date,
                                      interval '1 day')::date LOOP
        FOREACH t IN ARRAY ARRAY['samples', 'requests', 'cohort_rollup'] LOOP
            EXECUTE format('CREATE TABLE IF NOT EXISTS traceprof.%I PARTITION OF traceprof.%I '
                           'FOR VALUES FROM (%L) TO (%L)', t || '_p' || to_char(day, 'YYYYMMDD'), t,
                           (day::timestamp AT TIME ZONE 'UTC'), ((day + 1)::timestamp AT TIME ZONE 'UTC'));
        END LOOP;
    END LOOP;
END $$;

-- ---------------------------------------------------------------------
-- Cohort specs. A spec is a jsonb object of parameters (docs/cohorts.md);
-- parsing turns it into a filter and never into SQL text.
CREATE TYPE traceprof.cohort_filter AS (
    min_us    bigint,          -- durations >= this (NULL: no lower bound)
    max_us    bigint,          -- durations < this (NULL: no upper bound)
    statuses  int4multirange,  -- status codes (NULL: any)
    route_ids bigint[]         -- routes matching route/method (NULL: any)
);
