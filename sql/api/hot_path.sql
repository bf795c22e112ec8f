-- hot_path.sql: hot_path, _hot_path (taken from migration 004).

-- hot_path (below), ending at the first level whose share is below
-- min_share (the share only shrinks with depth, so the levels left out are
-- all below it): trace_summary needs the levels with at least 10 %. One
-- query: the weight of every node of the flame graph (a prefix of a stack:
-- its parent prefix and function), the heaviest child of every node (ties:
-- the smaller function id), and the walk from the root through the
-- heaviest children. A loop of one query per level, as before, cost a
-- query per level and up to 4 ms for a service of a hundred deep stacks.
CREATE OR REPLACE FUNCTION traceprof._hot_path(stack_ids bigint[], weights double precision[],
                                    min_share double precision)
RETURNS TABLE (depth integer, function_id bigint, weight double precision, share double precision)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE st AS (
        SELECT coalesce(s.function_ids, ARRAY[0::bigint]) AS fns, coalesce(u.w, 0) AS w
          FROM unnest(stack_ids, weights) AS u(id, w)
          LEFT JOIN traceprof.stacks s ON s.stack_id = u.id
    ), tot AS (
        SELECT sum(st.w) AS total FROM st
    ), node AS (
        SELECT x.d::integer AS d, st.fns[1:x.d - 1] AS parent, st.fns[x.d] AS f, sum(st.w) AS w
          FROM st CROSS JOIN LATERAL generate_series(1, cardinality(st.fns)) AS x(d)
         GROUP BY 1, 2, 3
    ), best AS (
        SELECT DISTINCT ON (n.d, n.parent) n.d, n.parent, n.f, n.w
          FROM node n
         ORDER BY n.d, n.parent, n.w DESC, n.f
    ), walk AS (
        SELECT b.d, b.parent || b.f AS path, b.f, b.w FROM best b WHERE b.d = 1
        UNION ALL
        SELECT b.d, w.path || b.f, b.f, b.w
          FROM walk w
          JOIN best b ON b.d = w.d + 1 AND b.parent = w.path
    )
    SELECT w.d, w.f, w.w, w.w / t.total
      FROM walk w, tot t
     WHERE t.total > 0 AND w.w / t.total >= min_share
     ORDER BY w.d
$$;

-- The heaviest path of a flame graph: from the root, the child with the most
-- weight at each level (ties: the smaller function id). Given the stacks
-- and their weights (aligned arrays), one row per level with the function
-- and its weight and share of the whole. The first level whose share drops
-- below the whole is where the CPU narrows into one subtree: the verdict of
-- trace_summary names it.
CREATE OR REPLACE FUNCTION traceprof.hot_path(stack_ids bigint[], weights double precision[])
RETURNS TABLE (depth integer, function_id bigint, weight double precision, share double precision)
LANGUAGE sql STABLE AS $$
    SELECT * FROM traceprof._hot_path($1, $2, 0)
$$;
