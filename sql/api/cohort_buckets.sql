-- cohort_buckets.sql: duration_thresholds_us, duration_bucket, duration_bucket_range, time_floor, time_ceil, rollup_block_minutes (taken from migration 005).

-- ---------------------------------------------------------------------
-- Duration buckets: a 1-2-5 series of milliseconds. Bucket 0 is [0, 1 ms),
-- bucket 1 [1, 2 ms), 2 [2, 5 ms), 3 [5, 10 ms), ..., 9 [500 ms, 1 s),
-- 10 [1, 2 s), ..., 24 [50000 s, infinity). The small SQL functions from
-- here on are not STRICT, so that the planner can inline them.
CREATE OR REPLACE FUNCTION traceprof.duration_thresholds_us() RETURNS bigint[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT '{1000,2000,5000,10000,20000,50000,100000,200000,500000,
             1000000,2000000,5000000,10000000,20000000,50000000,
             100000000,200000000,500000000,1000000000,2000000000,5000000000,
             10000000000,20000000000,50000000000}'::bigint[]
$$;

CREATE OR REPLACE FUNCTION traceprof.duration_bucket(duration_us bigint) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT width_bucket(duration_us, traceprof.duration_thresholds_us())::smallint
$$;

-- The durations (microseconds, [lower, upper)) of one bucket.
CREATE OR REPLACE FUNCTION traceprof.duration_bucket_range(bucket integer) RETURNS int8range
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT int8range(CASE WHEN bucket = 0 THEN 0 ELSE th[bucket] END, th[bucket + 1])
    FROM (SELECT traceprof.duration_thresholds_us() AS th) x
    WHERE bucket BETWEEN 0 AND cardinality(th)
$$;

-- The start of the minute (or hour: any width that divides a day) that a
-- timestamp falls in, in UTC whatever the session's time zone, and the
-- first such boundary at or after it.
CREATE OR REPLACE FUNCTION traceprof.time_floor(ts timestamptz, width interval DEFAULT '1 minute') RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT date_bin(width, ts, timestamptz '2000-01-01 00:00:00+00')
$$;

CREATE OR REPLACE FUNCTION traceprof.time_ceil(ts timestamptz, width interval DEFAULT '1 minute') RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN traceprof.time_floor(ts, width) = ts THEN ts
                ELSE traceprof.time_floor(ts, width) + width END
$$;

-- The block lengths, coarsest first; each divides the one before it.
CREATE OR REPLACE FUNCTION traceprof.rollup_block_minutes() RETURNS smallint[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT '{60,10,1}'::smallint[] $$;
