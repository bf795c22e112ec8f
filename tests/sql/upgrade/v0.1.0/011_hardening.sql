-- 011: functions that took hostile input badly.
--
-- glob_to_like built its result by appending one character at a time to a
-- text value, which copies the whole value each time: a 1 MiB route
-- pattern took more than 15 s of a backend. It now tokenizes the pattern
-- once and joins the pieces with string_agg, linear in the pattern's
-- length. Same rules: * matches any run of characters, ? one character, a
-- backslash makes the next character literal (a trailing backslash is a
-- literal backslash); everything else, % and _ included, is literal.
CREATE OR REPLACE FUNCTION traceprof.glob_to_like(glob text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT coalesce(string_agg(
           CASE
               WHEN m.t = '\' THEN '\\'
               WHEN length(m.t) = 2 THEN
                   CASE WHEN right(m.t, 1) IN ('\', '%', '_') THEN m.t ELSE right(m.t, 1) END
               WHEN m.t = '*' THEN '%'
               WHEN m.t = '?' THEN '_'
               WHEN m.t IN ('%', '_') THEN '\' || m.t
               ELSE m.t
           END, '' ORDER BY m.n), '')
  FROM regexp_matches(glob, '\\.|\\$|.', 'g') WITH ORDINALITY AS r(a, n),
       LATERAL (SELECT r.a[1] AS t, r.n) m
$$;

-- cpu_ms divided by hz and raised division_by_zero for a frequency of 0.
-- Stored rows cannot have one (samples.hz is checked), but the function is
-- called with user values too: a frequency that is not positive has no CPU
-- time, so the answer is NULL.
CREATE OR REPLACE FUNCTION traceprof.cpu_ms(count bigint, hz integer) RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT CASE WHEN hz > 0 THEN count * 1000.0 / hz END
$$;
