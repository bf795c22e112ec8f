-- cpu_ms.sql: cpu_ms (taken from migration 011).

-- Weight in milliseconds of CPU of `count` samples taken at `hz`. Stored
-- rows always have a positive hz (samples.hz is checked), but the function
-- is called with user values too: a frequency that is not positive has no
-- CPU time, so the answer is NULL (not division_by_zero).
CREATE OR REPLACE FUNCTION traceprof.cpu_ms(count bigint, hz integer) RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT CASE WHEN hz > 0 THEN count * 1000.0 / hz END
$$;
