-- cpu_ms.sql: cpu_ms (first defined in 011).

-- cpu_ms divided by hz and raised division_by_zero for a frequency of 0.
-- Stored rows cannot have one (samples.hz is checked), but the function is
-- called with user values too: a frequency that is not positive has no CPU
-- time, so the answer is NULL.
CREATE OR REPLACE FUNCTION traceprof.cpu_ms(count bigint, hz integer) RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT CASE WHEN hz > 0 THEN count * 1000.0 / hz END
$$;
