-- folded.sql: _frame_label, _frame_display, _frame_labels, _stack_folded, _folded, _cpu_us
-- (taken from migration 004).

-- A function name made safe for folded stacks: ';' separates frames, a
-- line is one stack, byte 0x01 is the flame graph builder's sort separator;
-- a frame needs a name.
CREATE OR REPLACE FUNCTION traceprof._frame_label(name text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(nullif(translate($1, E';\n\r\x01', ':   '), ''), '[unknown]')
$$;

-- The one home of frame labels: a function's label is its name, or
-- "name [module]" where another function of that name shares its group
-- of stacks (shared) and it has a module; "[unknown]" when it has no name
-- or is missing from the dictionary. Folded stacks, flame graph rows and
-- the display names the traceprof command draws all come from here; a
-- scalar function, so the planner inlines it into its callers.
CREATE OR REPLACE FUNCTION traceprof._frame_display(name text, module text, shared boolean)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(traceprof._frame_label(
               CASE WHEN shared AND module <> '' THEN name || ' [' || module || ']' ELSE name END),
           '[unknown]')
$$;

-- The label of each function used in groups of stacks (aligned arrays:
-- the group of each use, then the function id; groups NULL is one group).
-- A function used in several groups gets its module where any group needs
-- it. For the traceprof command (cli/stackset_read.c, a group per
-- service).
CREATE OR REPLACE FUNCTION traceprof._frame_labels(groups integer[], function_ids bigint[])
RETURNS TABLE (function_id bigint, label text)
LANGUAGE sql STABLE AS $$
    SELECT d.function_id, traceprof._frame_display(d.name, d.module, bool_or(d.shared))
      FROM (SELECT u.function_id, f.name, f.module,
                   count(*) OVER (PARTITION BY u.grp, f.name) > 1 AS shared
              FROM (SELECT DISTINCT x.grp, x.function_id
                      FROM unnest($1, $2) AS x(grp, function_id)) u
              LEFT JOIN traceprof.functions f ON f.function_id = u.function_id) d
     GROUP BY d.function_id, d.name, d.module
$$;

-- The folded form ("root;...;leaf") of each distinct stack, its frames
-- labelled by _frame_display with these stacks as one group. Labels are
-- made once per distinct function, then strung together per stack.
CREATE OR REPLACE FUNCTION traceprof._stack_folded(stack_ids bigint[])
RETURNS TABLE (stack_id bigint, stack text)
LANGUAGE sql STABLE AS $$
    WITH st AS (
        SELECT u.id AS stack_id, coalesce(s.function_ids, ARRAY[0::bigint]) AS function_ids
          FROM (SELECT DISTINCT u.id FROM unnest($1) AS u(id)) u
          LEFT JOIN traceprof.stacks s ON s.stack_id = u.id
    ), fn AS (
        SELECT d.function_id,
               traceprof._frame_display(f.name, f.module,
                                        count(*) OVER (PARTITION BY f.name) > 1) AS label
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
