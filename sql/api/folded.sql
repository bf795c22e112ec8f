-- folded.sql: _frame_label, _frame_labels, _stack_folded, _folded, _cpu_us (taken from migration 004).

-- A function name made safe for folded stacks: ';' separates frames, a
-- line is one stack, byte 0x01 is the flame graph builder's sort separator;
-- a frame needs a name.
CREATE OR REPLACE FUNCTION traceprof._frame_label(name text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(nullif(translate($1, E';\n\r\x01', ':   '), ''), '[unknown]')
$$;

-- The label of each function used in a group of stacks (aligned arrays:
-- the group of each use, then the function id; groups NULL is one group).
-- The label is the function name; a name that two functions of different
-- modules share within one group gets its module: "name [module]" (a
-- function used in several groups, where any group needs it). Functions
-- missing from the dictionary read "[unknown]". The one home of frame
-- labels: folded stacks and flame graph rows here, and the display names
-- the traceprof command draws (cli/stackset_read.c, a group per service).
CREATE OR REPLACE FUNCTION traceprof._frame_labels(groups integer[], function_ids bigint[])
RETURNS TABLE (function_id bigint, label text)
LANGUAGE sql STABLE AS $$
    SELECT d.function_id,
           coalesce(traceprof._frame_label(
                        CASE WHEN bool_or(d.clash) THEN d.name || ' [' || d.module || ']'
                             ELSE d.name END), '[unknown]')
      FROM (SELECT u.function_id, f.name, f.module,
                   f.module <> '' AND count(*) OVER (PARTITION BY u.grp, f.name) > 1 AS clash
              FROM (SELECT DISTINCT x.grp, x.function_id
                      FROM unnest($1, $2) AS x(grp, function_id)) u
              LEFT JOIN traceprof.functions f ON f.function_id = u.function_id) d
     GROUP BY d.function_id, d.name, d.module
$$;

-- The folded form ("root;...;leaf") of each distinct stack, its frames
-- labelled as _frame_labels says for these stacks as one group. Labels are
-- made once per distinct function, then strung together per stack.
CREATE OR REPLACE FUNCTION traceprof._stack_folded(stack_ids bigint[])
RETURNS TABLE (stack_id bigint, stack text)
LANGUAGE sql STABLE AS $$
    WITH st AS (
        SELECT u.id AS stack_id, coalesce(s.function_ids, ARRAY[0::bigint]) AS function_ids
          FROM (SELECT DISTINCT u.id FROM unnest($1) AS u(id)) u
          LEFT JOIN traceprof.stacks s ON s.stack_id = u.id
    ), fn AS (
        SELECT l.function_id, l.label
          FROM traceprof._frame_labels(NULL,
                   ARRAY(SELECT DISTINCT x.function_id
                           FROM st CROSS JOIN LATERAL unnest(st.function_ids) AS x(function_id))) l
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
