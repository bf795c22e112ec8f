-- The request-level test on larger deterministic data: a planted
-- difference is highly significant; two cohorts drawn from one
-- distribution are not, although a per-sample test says they are.

-- Deterministic uniform numbers in [0, 1) from a seed and an index.
CREATE FUNCTION pg_temp.rnd(seed text, i bigint) RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$
    SELECT ('x' || substr(md5(seed || ':' || i), 1, 8))::bit(32)::bigint / 4294967296.0
$$;

SELECT traceprof.create_partitions('2024-06-01 00:00+00', '2024-06-01 12:00+00');
INSERT INTO traceprof.sources (source_id, service) VALUES (1, 'planted'), (2, 'noise');
INSERT INTO traceprof.functions (function_id, name, module) VALUES
    (1, 'main', 'app'), (2, 'handler', 'app'), (3, 'validateSignature', 'libcrypto'), (4, 'parse', 'app'),
    (5, 'handlerX', 'app'), (6, 'handlerY', 'app');
INSERT INTO traceprof.frames (frame_id, function_id) VALUES (11, 1), (12, 2), (13, 3), (14, 4), (15, 5), (16, 6);
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES
    (101, '{11,12}'), (102, '{11,12,13}'), (103, '{11,12,14}'),  -- handler, validateSignature, parse
    (201, '{11,15}'), (202, '{11,16}');                          -- handlerX, handlerY
INSERT INTO traceprof.routes (route_id, method, route) VALUES (1, 'GET', '/checkout'), (2, 'POST', '/login');

-- ---------------------------------------------------------------------
-- Planted: 300 slow requests (1-3 s, 10-29 samples at 19 Hz, each sample
-- in validateSignature with probability 0.8) and 600 fast ones (20-80 ms,
-- 1-2 samples, validateSignature with probability 0.1, parse 0.3).
CREATE TEMP TABLE planted AS
SELECT i, i <= 300 AS slow,
       CASE WHEN i <= 300 THEN 1000000 + (pg_temp.rnd('dur', i) * 2000000)::bigint
            ELSE 20000 + (pg_temp.rnd('dur', i) * 60000)::bigint END AS duration_us,
       CASE WHEN i <= 300 THEN 10 + (pg_temp.rnd('n', i) * 20)::int
            ELSE 1 + (pg_temp.rnd('n', i) * 2)::int END AS n
FROM generate_series(1, 900) i;
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, route_id, duration_us, status_code)
SELECT timestamptz '2024-06-01 10:00:00+00' + i * interval '2 second', 1, t.tid(i), i, 1, duration_us, 200
FROM planted;
INSERT INTO traceprof.samples (bucket, source_id, trace_id, span_id, hz, stacks)
SELECT timestamptz '2024-06-01 10:00:00+00' + i * interval '2 second', 1, t.tid(i), i, 19,
       ARRAY(SELECT CASE WHEN slow THEN CASE WHEN pg_temp.rnd('s' || i, k) < 0.8 THEN 102 ELSE 101 END
                         ELSE CASE WHEN pg_temp.rnd('s' || i, k) < 0.1 THEN 102
                                   WHEN pg_temp.rnd('s' || i, k) < 0.4 THEN 103 ELSE 101 END END
             FROM generate_series(1, n) k)
FROM planted;

CREATE TEMP TABLE pl AS
SELECT * FROM traceprof.compare_cohorts('planted', '2024-06-01 10:00+00', '2024-06-01 11:00+00',
                                        '{"min_duration": "1s"}', '{"max_duration": "100ms"}');
SELECT t.eq((SELECT function FROM pl LIMIT 1), 'validateSignature', 'planted function on top');
SELECT t.near((SELECT delta FROM pl WHERE function = 'validateSignature'), 0.7, 0.05, 'planted delta about 0.8 - 0.1');
SELECT t.ok((SELECT p_value FROM pl WHERE function = 'validateSignature') < 1e-12, 'planted difference: tiny p');
SELECT t.ok((SELECT z FROM pl WHERE function = 'validateSignature') > 10, 'planted difference: large z');
SELECT t.ok((SELECT p_value_self FROM pl WHERE function = 'handler') < 1e-12, 'handler self share differs too');
SELECT t.ok((SELECT b_self_share FROM pl WHERE function = 'handler') > 0.5, 'fast requests are mostly in handler');
SELECT t.eq((SELECT p_value FROM pl WHERE function = 'main'), 1::double precision, 'main is on every stack');
SELECT t.eq((SELECT array_agg(sampled_requests ORDER BY cohort) FROM traceprof.cohort_sizes(
                'planted', '2024-06-01 10:00+00', '2024-06-01 11:00+00',
                '{"min_duration": "1s"}', '{"max_duration": "100ms"}')),
            '{300,600}'::bigint[], 'every request sampled');

-- ---------------------------------------------------------------------
-- Noise: 400 requests, even ones GET /checkout (cohort A), odd ones
-- POST /login (cohort B), all from one distribution. Each request has 10
-- samples, all in handlerX or all in handlerY (probability 1/2 each): the
-- samples of a request are perfectly correlated. With seed 'noise1' the
-- realised shares of handlerX are 0.45 and 0.52: a request-level z of
-- -1.40 (p = 0.16), which is noise. A per-sample test, treating the 2,000
-- samples of each cohort as independent, gets z = -4.43 (p = 1e-5).
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, route_id, duration_us, status_code)
SELECT timestamptz '2024-06-01 10:00:00+00' + i * interval '5 second', 2, t.tid(10000 + i), i,
       CASE WHEN i % 2 = 0 THEN 1 ELSE 2 END, 600000, 200
FROM generate_series(1, 400) i;
INSERT INTO traceprof.samples (bucket, source_id, trace_id, span_id, hz, stacks, counts)
SELECT timestamptz '2024-06-01 10:00:00+00' + i * interval '5 second', 2, t.tid(10000 + i), i, 19,
       ARRAY[CASE WHEN pg_temp.rnd('noise1', i) < 0.5 THEN 201 ELSE 202 END], '{10}'
FROM generate_series(1, 400) i;

CREATE TEMP TABLE nz AS
SELECT * FROM traceprof.compare_cohorts('noise', '2024-06-01 10:00+00', '2024-06-01 11:00+00',
                                        '{"route": "/checkout"}', '{"route": "/login"}');
SELECT t.near((SELECT a_share FROM nz WHERE function = 'handlerX'), 0.45, 1e-12, 'noise: share in A');
SELECT t.near((SELECT b_share FROM nz WHERE function = 'handlerX'), 0.52, 1e-12, 'noise: share in B');
SELECT t.near((SELECT z FROM nz WHERE function = 'handlerX'), -1.401, 0.001, 'noise: request-level z');
SELECT t.ok((SELECT p_value FROM nz WHERE function = 'handlerX') > 0.05, 'noise: not significant');
SELECT t.ok((SELECT p_value FROM nz WHERE function = 'handlerY') > 0.05, 'noise: handlerY not significant');
-- The per-sample test on the same data (two proportions, pooled variance)
-- would call it significant: the reason the unit is the request.
SELECT t.ok(traceprof.normal_p_two_sided((pa - pb) / sqrt(pp * (1 - pp) * (1.0 / na + 1.0 / nb))) < 1e-4,
            'a per-sample test would wrongly reject')
FROM (SELECT sum(c) FILTER (WHERE a AND x)::float8 / sum(c) FILTER (WHERE a) AS pa,
             sum(c) FILTER (WHERE NOT a AND x)::float8 / sum(c) FILTER (WHERE NOT a) AS pb,
             sum(c) FILTER (WHERE x)::float8 / sum(c) AS pp,
             sum(c) FILTER (WHERE a) AS na, sum(c) FILTER (WHERE NOT a) AS nb
      FROM (SELECT s.span_id % 2 = 0 AS a, s.stacks[1] = 201 AS x, s.counts[1] AS c
            FROM traceprof.samples s WHERE s.source_id = 2) x) y;
