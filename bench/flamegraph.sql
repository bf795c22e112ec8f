-- flamegraph.sql - time the flame graph builder (traceprof._flamegraph, used
-- by trace_flamegraph and service_flamegraph) on synthetic folded stacks.
-- Needs only a database with the traceprof schema; writes nothing.
--
--   psql -v stacks=10000 -f bench/flamegraph.sql DBNAME
--
-- Two shapes of stacks -v stacks (default 10 000) distinct stacks, depth
-- 10-40:
--   shared:   frames drawn with a strong skew, so stacks share long
--             prefixes as real profiles do (framework, runtime, handler);
--   diverse:  three equally likely frames per level, so stacks part early
--             and the tree has many more nodes (a hard case).
-- Prints the tree size and the best and median of 5 runs in ms.
\set ON_ERROR_STOP 1
\if :{?stacks}
\else
\set stacks 10000
\endif
SELECT setseed(0.17);

CREATE TEMP TABLE fg_input AS
WITH gen AS (
    SELECT shape, g,
           (SELECT string_agg('fn_' || CASE shape
                                  WHEN 'shared' THEN d * 100 + floor(random() ^ 4 * (2 + d / 4))::int
                                  ELSE d * 100 + floor(random() * 3)::int END, ';' ORDER BY d)
              FROM generate_series(1, 10 + (g * 7919) % 31) AS d) AS stack
      FROM unnest(ARRAY['shared', 'diverse']) AS shape, generate_series(1, :stacks * 4) AS g
)
SELECT shape, stack, (1 + floor(random() * 1000))::bigint AS w
  FROM (SELECT DISTINCT ON (shape, stack) shape, stack FROM gen) d
 ORDER BY random()
 LIMIT :stacks * 2;

CREATE FUNCTION pg_temp.time_builder(p_shape text) RETURNS TABLE (shape text, stacks bigint, nodes bigint,
                                                                 best_ms numeric, median_ms numeric)
LANGUAGE plpgsql AS $$
DECLARE
    s text[];
    w bigint[];
    t0 timestamptz;
    runs double precision[] := '{}';
    n bigint;
BEGIN
    SELECT array_agg(i.stack), array_agg(i.w) INTO s, w
      FROM (SELECT * FROM fg_input i WHERE i.shape = p_shape LIMIT current_setting('fg.stacks')::int) i;
    FOR r IN 1 .. 5 LOOP
        t0 := clock_timestamp();
        SELECT count(*) INTO n FROM traceprof._flamegraph(s, w);
        runs := runs || extract(epoch FROM clock_timestamp() - t0) * 1000;
    END LOOP;
    RETURN QUERY
    SELECT p_shape, cardinality(s)::bigint, n,
           round(min(x)::numeric, 1), round((percentile_cont(0.5) WITHIN GROUP (ORDER BY x))::numeric, 1)
      FROM unnest(runs) AS x;
END $$;

SELECT set_config('fg.stacks', :'stacks', false) IS NOT NULL AS configured;
SELECT * FROM pg_temp.time_builder('shared')
UNION ALL
SELECT * FROM pg_temp.time_builder('diverse');
