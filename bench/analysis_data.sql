-- analysis_data.sql - synthetic profile data for timing the analysis
-- functions of sql/api/ (trace_profile.sql, service_profile.sql). Run it with psql against a scratch
-- database that has the traceprof schema (it writes February 2030):
--
--   psql -v rows=5000000 -f bench/analysis_data.sql DBNAME
--
-- rows samples rows (default 5 000 000) of 10 samples each, over 7 days:
-- 8 services x 25 pods, 5 000 distinct stacks per service (depth 8-40,
-- shared prefixes), two rows per traced request, one row in ten untagged,
-- one trace in ten at 99 Hz (the rest 19 Hz). Trace i has the id md5(i),
-- i = 1 .. rows / 2, which bench/analysis.sh picks at random. Plus 1000
-- large traces of 450 samples each.
\set ON_ERROR_STOP 1
\if :{?rows}
\else
\set rows 5000000
\endif
SET synchronous_commit = off;
SELECT traceprof.create_partitions('2030-02-01', '2030-02-08');

INSERT INTO traceprof.sources (source_id, service, pod)
SELECT s * 100 + p, 'svc-' || s, 'svc-' || s || '-' || p
  FROM generate_series(1, 8) s, generate_series(1, 25) p
ON CONFLICT DO NOTHING;
INSERT INTO traceprof.functions (function_id, name, module)
SELECT f, 'fn_' || f, 'mod' || f % 20 FROM generate_series(1, 4000) f
ON CONFLICT DO NOTHING;
INSERT INTO traceprof.frames (frame_id, function_id)
SELECT f, f FROM generate_series(1, 4000) f
ON CONFLICT DO NOTHING;
-- Frame at depth d of a stack: one of three choices per level, so the upper
-- levels are shared by many stacks and the lower ones differ.
INSERT INTO traceprof.stacks (stack_id, frame_ids)
SELECT s * 100000 + k,
       ARRAY(SELECT 1 + (s * 487 + d * 13 + floor(random() * 3)::int * 1301 + k * 0) % 4000
               FROM generate_series(1, 8 + (k * 7919) % 33) d ORDER BY d)
  FROM generate_series(1, 8) s, generate_series(0, 4999) k
ON CONFLICT DO NOTHING;

-- Row i: trace (i + 1) / 2 unless untagged; service from the trace.
INSERT INTO traceprof.samples (bucket, source_id, span_id, trace_id, hz, stacks, counts)
SELECT b.bucket, b.svc * 100 + 1 + (b.tr % 25), b.tr,
       CASE WHEN b.i % 10 = 0 THEN NULL ELSE md5(b.tr::text)::uuid END,
       CASE WHEN b.tr % 10 = 0 THEN 99 ELSE 19 END,
       ARRAY[b.svc * 100000 + floor(random() * 5000)::int, b.svc * 100000 + floor(random() * 5000)::int,
             b.svc * 100000 + floor(random() * 5000)::int, b.svc * 100000 + floor(random() * 5000)::int,
             b.svc * 100000 + floor(random() * 5000)::int, b.svc * 100000 + floor(random() * 5000)::int,
             b.svc * 100000 + floor(random() * 5000)::int, b.svc * 100000 + floor(random() * 5000)::int,
             b.svc * 100000 + floor(random() * 5000)::int, b.svc * 100000 + floor(random() * 5000)::int],
       NULL
  FROM (SELECT i, (i + 1) / 2 AS tr, 1 + ((i + 1) / 2) % 8 AS svc,
               timestamptz '2030-02-01' + ((i + 1) / 2) * (interval '7 days' / (:rows / 2 + 1))
                   + (i % 2) * interval '1 second' AS bucket
          FROM generate_series(1, :rows) i) b;

INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, route_id, duration_us, status_code)
SELECT timestamptz '2030-02-01' + tr * (interval '7 days' / (:rows / 2 + 1)) - interval '200 ms',
       (1 + tr % 8) * 100 + 1 + tr % 25, md5(tr::text)::uuid, tr, 0,
       1500000, 200
  FROM generate_series(1, :rows / 2) tr;

-- 1000 large traces (a slow request at 99 Hz): 5 rows of 90 samples,
-- 450 samples of up to 300 distinct stacks each; ids md5('big' || i).
INSERT INTO traceprof.samples (bucket, source_id, span_id, trace_id, hz, stacks, counts)
SELECT timestamptz '2030-02-04' + t * interval '1 minute' + r * interval '1 second', 201, t,
       md5('big' || t)::uuid, 99,
       ARRAY(SELECT 200000 + floor(random() * 300)::int + t * 0 + r * 0 FROM generate_series(1, 90)), NULL
  FROM generate_series(1, 1000) t, generate_series(0, 4) r;
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, route_id, duration_us, status_code)
SELECT timestamptz '2030-02-04' + t * interval '1 minute', 201, md5('big' || t)::uuid, t, 0, 4500000, 200
  FROM generate_series(1, 1000) t;

ANALYZE traceprof.samples;
ANALYZE traceprof.requests;
ANALYZE traceprof.stacks;
SELECT count(*) AS sample_rows, sum(cardinality(stacks)) AS samples
  FROM traceprof.samples;
SELECT pg_size_pretty(sum(pg_total_relation_size(relid))) AS samples_size
  FROM pg_partition_tree('traceprof.samples');
