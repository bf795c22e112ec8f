-- folded.sql: _frame_label, _stack_folded, _folded, _cpu_us (taken from migration 004).

-- A function name made safe for folded stacks: ';' separates frames, a
-- line is one stack, byte 0x01 is the flame graph builder's sort separator;
-- a frame needs a name.
CREATE OR REPLACE FUNCTION traceprof._frame_label(name text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(nullif(translate($1, E';\n\r\x01', ':   '), ''), '[unknown]')
$$;

-- The folded form ("root;...;leaf") of each distinct stack. Functions
-- missing from the dictionaries read "[unknown]", as in
-- stack_function_weights. A name that two functions of different modules
-- share within these stacks gets its module: "name [module]". Labels are
-- made once per distinct frame, then strung together per stack.
CREATE OR REPLACE FUNCTION traceprof._stack_folded(stack_ids bigint[])
RETURNS TABLE (stack_id bigint, stack text)
LANGUAGE sql STABLE AS $$
    WITH st AS (
        SELECT u.id AS stack_id, coalesce(s.function_ids, ARRAY[0::bigint]) AS function_ids
          FROM (SELECT DISTINCT u.id FROM unnest($1) AS u(id)) u
          LEFT JOIN traceprof.stacks s ON s.stack_id = u.id
    ), fn AS (
        SELECT d.function_id,
               traceprof._frame_label(
                   CASE WHEN f.module <> '' AND count(*) OVER (PARTITION BY f.name) > 1
                        THEN f.name || ' [' || f.module || ']'
                        ELSE f.name END) AS label
          FROM (SELECT DISTINCT x.function_id
                  FROM st CROSS JOIN LATERAL unnest(st.function_ids) AS x(function_id)) d
          LEFT JOIN traceprof.functions f ON f.function_id = d.function_id
    )
    SELECT st.stack_id, string_agg(coalesce(fn.label, '[unknown]'), ';' ORDER BY x.ord)
      FROM st
     CROSS JOIN LATERAL unnest(st.function_ids) WITH ORDINALITY AS x(function_id, ord)
      LEFT JOIN fn ON fn.function_id = x.function_id
     GROUP BY st.stack_id
$$;

-- Folded stacks of the given stacks (aligned arrays); stacks that read the
-- same are merged.
CREATE OR REPLACE FUNCTION traceprof._folded(stack_ids bigint[], samples bigint[], cpu_ms double precision[])
RETURNS TABLE (stack text, samples bigint, cpu_ms double precision)
LANGUAGE sql STABLE AS $$
    SELECT l.stack, sum(u.n)::bigint, sum(u.ms)
      FROM unnest($1, $2, $3) AS u(id, n, ms)
      JOIN traceprof._stack_folded($1) l ON l.stack_id = u.id
     GROUP BY l.stack
$$;

-- Whole microseconds of CPU: the unit of folded text and flame graph rows.
CREATE OR REPLACE FUNCTION traceprof._cpu_us(cpu_ms double precision) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT round($1 * 1000)::bigint $$;
