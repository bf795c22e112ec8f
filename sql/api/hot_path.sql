-- hot_path.sql: hot_path, _hot_path (taken from migration 004).

-- hot_path (below), ending at the first level whose share is below min_share (the
-- share only shrinks with depth, so the levels left out are all below it):
-- trace_summary needs the levels with at least 10 %. Each level is one
-- query over the stacks still on the path, which are fewer at every level.
CREATE OR REPLACE FUNCTION traceprof._hot_path(stack_ids bigint[], weights double precision[],
                                    min_share double precision)
RETURNS TABLE (depth integer, function_id bigint, weight double precision, share double precision)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_variable
DECLARE
    fns bigint[];          -- function ids of every stack, flattened
    starts integer[];      -- where each stack starts in fns
    lens integer[];        -- its length
    ws double precision[]; -- its weight
    alive integer[];       -- the stacks still on the chosen path
    total double precision;
    d integer := 1;
    best bigint;
    best_w double precision;
BEGIN
    SELECT array_agg(x.f ORDER BY x.i, x.ord)
      INTO fns
      FROM (SELECT u.i, f.f, f.ord
              FROM unnest(stack_ids) WITH ORDINALITY AS u(id, i)
              LEFT JOIN traceprof.stacks st ON st.stack_id = u.id
             CROSS JOIN LATERAL unnest(coalesce(st.function_ids, ARRAY[0::bigint]))
                   WITH ORDINALITY AS f(f, ord)) x;
    SELECT array_agg(x.len ORDER BY x.i), array_agg(x.w ORDER BY x.i),
           array_agg((x.start - x.len + 1)::integer ORDER BY x.i),
           array_agg(x.i::integer ORDER BY x.i) FILTER (WHERE x.w > 0), sum(x.w)
      INTO lens, ws, starts, alive, total
      FROM (SELECT u.i, coalesce(cardinality(st.function_ids), 1) AS len, coalesce(u.w, 0) AS w,
                   sum(coalesce(cardinality(st.function_ids), 1)) OVER (ORDER BY u.i) AS start
              FROM unnest(stack_ids, weights) WITH ORDINALITY AS u(id, w, i)
              LEFT JOIN traceprof.stacks st ON st.stack_id = u.id) x;
    IF total IS NULL OR total <= 0 THEN
        RETURN;
    END IF;
    LOOP
        SELECT c.f, sum(c.w) INTO best, best_w
          FROM (SELECT fns[starts[i] + d - 1] AS f, ws[i] AS w
                  FROM unnest(alive) AS i
                 WHERE lens[i] >= d) c
         GROUP BY c.f
         ORDER BY 2 DESC, 1
         LIMIT 1;
        EXIT WHEN best IS NULL OR best_w / total < min_share;
        depth := d;
        function_id := best;
        weight := best_w;
        share := best_w / total;
        RETURN NEXT;
        alive := ARRAY(SELECT i FROM unnest(alive) AS i
                        WHERE lens[i] >= d AND fns[starts[i] + d - 1] = best);
        d := d + 1;
        EXIT WHEN d > 512;
    END LOOP;
END $$;

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
