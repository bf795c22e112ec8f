-- cli_data.sql - a store for timing the traceprof command: one service,
-- bench-svc, with -v stacks (default 10 000) distinct stacks sampled over
-- one hour (2030-01-02 10:00-11:00 UTC, one samples row per minute at
-- 19 Hz), and one request (trace 0000000000000000000000000000be5c) whose
-- -v trace_stacks (default 2 000) distinct stacks were sampled at 99 Hz.
--
--   psql -v stacks=10000 -f bench/cli_data.sql DBNAME
--
-- Stacks are 10-40 frames deep, drawn with a skew so that they share long
-- prefixes as real profiles do (runtime, framework, handler), over about
-- 1,500 functions in three modules. Function, frame and stack ids are
-- small synthetic numbers, which the schema allows (they are opaque keys).
\set ON_ERROR_STOP 1
\if :{?stacks}
\else
\set stacks 10000
\endif
\if :{?trace_stacks}
\else
\set trace_stacks 2000
\endif
SELECT setseed(0.42);
SELECT traceprof.create_partitions('2030-01-01', '2030-01-03');

INSERT INTO traceprof.sources (source_id, service, pod, build_id)
VALUES (7001, 'bench-svc', 'bench-svc-0', 'b00c0ffee0000000000000000000000000000001');

-- the distinct stacks, as arrays of function numbers (level * 100 + choice)
CREATE TEMP TABLE bench_stacks AS
SELECT row_number() OVER (ORDER BY random()) AS n, fns
  FROM (SELECT DISTINCT fns
          FROM (SELECT g, array_agg(d * 100 + floor(random() ^ 3 * (3 + d))::int ORDER BY d) AS fns
                  FROM generate_series(1, :stacks * 6) AS g,
                       LATERAL generate_series(1, 10 + (g * 7919) % 31) AS d
                 GROUP BY g) x) y
 LIMIT :stacks;

INSERT INTO traceprof.functions (function_id, name, module, kind)
SELECT DISTINCT f, CASE WHEN f % 100 = 0 THEN 'runtime_' ELSE 'fn_' END || f
                   || CASE WHEN f < 500 THEN '_dispatch' WHEN f < 2500 THEN '_handle' ELSE '_compute' END,
       CASE WHEN f < 500 THEN 'libruntime.so' ELSE 'bench-svc' END, 0
  FROM bench_stacks, unnest(fns) AS f;
INSERT INTO traceprof.frames (frame_id, function_id, build_id, file, line)
SELECT function_id, function_id, 'b00c0ffee0000000000000000000000000000001',
       'src/' || module || '.c', (function_id % 997)::int
  FROM traceprof.functions WHERE function_id < 100000;
INSERT INTO traceprof.stacks (stack_id, frame_ids)
SELECT 100000 + n, fns::bigint[] FROM bench_stacks;

-- one hour of the continuous profile: every stack lands in one of the 60
-- minutes, each sampled 1-50 times
INSERT INTO traceprof.samples (bucket, source_id, span_id, trace_id, hz, stacks, counts)
SELECT timestamptz '2030-01-02 10:00:00+00' + (n % 60) * interval '1 minute', 7001, NULL, NULL, 19,
       array_agg(100000 + n ORDER BY n), array_agg(1 + (n * 37) % 50 ORDER BY n)
  FROM bench_stacks
 GROUP BY n % 60;

-- one request at 99 Hz over :trace_stacks of those stacks
INSERT INTO traceprof.routes (route_id, method, route) VALUES (7001, 'POST', '/api/bench');
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, route_id, duration_us, status_code)
VALUES ('2030-01-02 10:30:00+00', 7001, '00000000-0000-0000-0000-00000000be5c', 4242, 7001, 45000000, 200);
INSERT INTO traceprof.samples (bucket, source_id, span_id, trace_id, hz, stacks, counts)
SELECT timestamptz '2030-01-02 10:30:00+00', 7001, 4242, '00000000-0000-0000-0000-00000000be5c', 99,
       array_agg(100000 + n ORDER BY n), array_agg(1 + (n * 13) % 5 ORDER BY n)
  FROM bench_stacks WHERE n <= :trace_stacks;

ANALYZE traceprof.functions;
ANALYZE traceprof.frames;
ANALYZE traceprof.stacks;
ANALYZE traceprof.samples;
ANALYZE traceprof.requests;
SELECT (SELECT count(*) FROM traceprof.stacks) AS stacks,
       (SELECT count(*) FROM traceprof.functions) AS functions,
       (SELECT sum(cardinality(stacks)) FROM traceprof.samples) AS sample_entries;
