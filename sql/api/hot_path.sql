-- hot_path.sql: hot_path (taken from migration 004).

-- The heaviest path of a flame graph: from the root, the child with the most
-- weight at each level (ties: the smaller function id). Given the stacks
-- and their weights (aligned arrays), one row per level with the function
-- and its weight and share of the whole. The first level whose share drops
-- below the whole is where the CPU narrows into one subtree: the verdict of
-- trace_summary names it.
CREATE OR REPLACE FUNCTION traceprof.hot_path(stack_ids bigint[], weights double precision[])
RETURNS TABLE (depth integer, function_id bigint, weight double precision, share double precision)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    fns bigint[];        -- function ids of every stack, flattened
    starts integer[];    -- where each stack starts in fns
    lens integer[];      -- its length
    ws double precision[]; -- its weight
    alive boolean[];     -- still on the chosen path
    total double precision;
    n integer;
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
    SELECT array_agg(coalesce(cardinality(st.function_ids), 1) ORDER BY u.i),
           array_agg(coalesce(u.w, 0) ORDER BY u.i)
      INTO lens, ws
      FROM unnest(stack_ids, weights) WITH ORDINALITY AS u(id, w, i)
      LEFT JOIN traceprof.stacks st ON st.stack_id = u.id;
    n := coalesce(cardinality(lens), 0);
    IF n = 0 THEN
        RETURN;
    END IF;
    starts := array_fill(0, ARRAY[n]);
    alive := array_fill(true, ARRAY[n]);
    total := 0;
    FOR i IN 1 .. n LOOP
        starts[i] := CASE WHEN i = 1 THEN 1 ELSE starts[i - 1] + lens[i - 1] END;
        total := total + ws[i];
    END LOOP;
    IF total <= 0 THEN
        RETURN;
    END IF;
    LOOP
        SELECT c.f, sum(c.w) INTO best, best_w
          FROM (SELECT fns[starts[i] + d - 1] AS f, ws[i] AS w
                  FROM generate_series(1, n) AS i
                 WHERE alive[i] AND lens[i] >= d) c
         GROUP BY c.f
         ORDER BY 2 DESC, 1
         LIMIT 1;
        EXIT WHEN best IS NULL;
        depth := d;
        function_id := best;
        weight := best_w;
        share := best_w / total;
        RETURN NEXT;
        FOR i IN 1 .. n LOOP
            alive[i] := alive[i] AND lens[i] >= d AND fns[starts[i] + d - 1] = best;
        END LOOP;
        d := d + 1;
        EXIT WHEN d > 512;
    END LOOP;
END $$;
