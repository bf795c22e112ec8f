-- Synthetic data for bench/bench_cohort.sh: :minutes minutes of service
-- 'checkout' at :rate requests/s and of service 'inventory' at a fifth of
-- that as background. psql variables: minutes, rate.
--
-- Requests: 8 routes; lognormal durations (median 20 ms) with a 1 % slow
-- tail (median 1.5 s); status mostly 2xx, some 404 and 5xx (more 5xx among
-- slow requests). CPU is 15 % of the duration for fast requests (a few ms)
-- and 60 % for slow ones, turned into samples at 19 Hz by randomised
-- rounding: most fast requests have 0 or 1 sample, slow ones a dozen or
-- more. Stacks come from a pool of 400 (50 per route, 10-20 frames); slow
-- requests spend most samples in stacks through validateSignature.
-- Pseudo-random numbers are hashes of the row number with fixed seeds.

\set ON_ERROR_STOP 1
SET client_min_messages = warning;

CREATE FUNCTION pg_temp.u(i bigint, seed bigint) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ((hashint8extended(i, seed) & 2147483647) + 0.5) / 2147483648.0
$$;

SELECT traceprof.create_partitions(timestamptz '2024-03-01 00:00+00', timestamptz '2024-03-02 00:00+00');

INSERT INTO traceprof.sources (source_id, service, pod)
SELECT s, CASE WHEN s <= 8 THEN 'checkout' ELSE 'inventory' END, 'pod-' || s
FROM generate_series(1, 12) s;

-- Functions: 1 main, 2-9 one handler per route, 10 validateSignature,
-- 11-13 the crypto under it, 20-219 everything else. One frame each.
INSERT INTO traceprof.functions (function_id, name, module)
SELECT 1, 'main', 'app'
UNION ALL SELECT 1 + r, 'handle_route_' || r, 'app' FROM generate_series(1, 8) r
UNION ALL SELECT 10, 'validateSignature', 'libcrypto'
UNION ALL SELECT 10 + k, (ARRAY['bn_mul_mont', 'sha256_block', 'ec_point_mul'])[k], 'libcrypto' FROM generate_series(1, 3) k
UNION ALL SELECT f, 'fn_' || f, (ARRAY['app', 'libc', 'libpq', 'json'])[1 + f % 4] FROM generate_series(20, 219) f;
INSERT INTO traceprof.frames (frame_id, function_id) SELECT function_id + 1000, function_id FROM traceprof.functions;

-- Stack k = r + 8 j (route r 1-8, j 0-49) starts main;handle_route_r and
-- has 10-20 frames; those with j >= 44 end in validateSignature;<crypto>.
INSERT INTO traceprof.stacks (stack_id, frame_ids)
SELECT k, ARRAY[1001, 1001 + r]
          || ARRAY(SELECT 1020 + (hashint8extended(k * 100 + d, 7) & 2147483647) % 200
                   FROM generate_series(1, 8 + k % 11 - CASE WHEN j >= 44 THEN 2 ELSE 0 END) d)
          || CASE WHEN j >= 44 THEN ARRAY[1010, 1011 + k % 3]::bigint[] ELSE '{}' END
FROM generate_series(1, 400) k, LATERAL (SELECT 1 + (k - 1) % 8 AS r, (k - 1) / 8 AS j) x;

CREATE TEMP TABLE gen AS
SELECT i, svc,
       pg_temp.u(i, svc * 10 + 1) < 0.01 AS slow,
       pg_temp.u(i, svc * 10 + 2) AS u_route,
       pg_temp.u(i, svc * 10 + 3) AS u_status,
       sqrt(-2 * ln(pg_temp.u(i, svc * 10 + 4))) * cos(2 * pi() * pg_temp.u(i, svc * 10 + 5)) AS normal,
       pg_temp.u(i, svc * 10 + 6) AS u_round
FROM (SELECT 1 AS svc, i FROM generate_series(0, :minutes * 60 * :rate - 1) i
      UNION ALL
      SELECT 2, i FROM generate_series(0, :minutes * 60 * :rate / 5 - 1) i) x;

CREATE TEMP TABLE req AS
SELECT i, svc,
       timestamptz '2024-03-01 10:00+00' + i * interval '1 second' * (CASE svc WHEN 1 THEN 1 ELSE 5 END) / :rate AS start_time,
       CASE svc WHEN 1 THEN 1 + i % 8 ELSE 9 + i % 4 END AS source_id,
       1 + (u_route * 8)::int % 8 AS route,
       slow,
       greatest(50, CASE WHEN slow THEN exp(ln(1500000) + 0.5 * normal) ELSE exp(ln(20000) + 0.8 * normal) END)::bigint AS duration_us,
       CASE WHEN slow AND u_status < 0.10 THEN 503
            WHEN u_status < 0.90 THEN 200 WHEN u_status < 0.93 THEN 201 WHEN u_status < 0.96 THEN 404
            WHEN u_status < 0.985 THEN 500 ELSE 503 END AS status,
       u_round
FROM gen;

INSERT INTO traceprof.routes (route_id, method, route)
SELECT r, (ARRAY['GET', 'POST'])[1 + r % 2], '/api/v1/' || (ARRAY['cart', 'checkout', 'pay', 'items', 'search', 'user', 'login', 'orders'])[r]
FROM generate_series(1, 8) r;

INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, route_id, duration_us, status_code)
SELECT start_time, source_id,
       (lpad(to_hex(svc), 16, '0') || lpad(to_hex(i), 16, '0'))::uuid, hashint8extended(i, svc), route, duration_us, status
FROM req;

-- Samples: expected count = CPU ms * 19 / 1000, rounded at random.
INSERT INTO traceprof.samples (bucket, source_id, trace_id, span_id, hz, stacks)
SELECT date_bin('10 seconds', start_time, timestamptz '2024-01-01'), source_id,
       (lpad(to_hex(svc), 16, '0') || lpad(to_hex(i), 16, '0'))::uuid, hashint8extended(i, svc), 19,
       ARRAY(SELECT route + 8 * CASE
                    WHEN slow AND pg_temp.u(i * 64 + k, 91) < 0.7 THEN 44 + (pg_temp.u(i * 64 + k, 92) * 6)::int % 6
                    WHEN NOT slow AND pg_temp.u(i * 64 + k, 91) < 0.05 THEN 44 + (pg_temp.u(i * 64 + k, 92) * 6)::int % 6
                    ELSE (pg_temp.u(i * 64 + k, 93) * 44)::int % 44 END
             FROM generate_series(1, n) k)
FROM (SELECT *, floor(e + u_round)::int AS n
      FROM (SELECT *, duration_us / 1000.0 * CASE WHEN slow THEN 0.6 ELSE 0.15 END * 19 / 1000 AS e FROM req) x) y
WHERE n > 0;

-- Samples outside any request (idle, background threads).
INSERT INTO traceprof.samples (bucket, source_id, hz, stacks)
SELECT b, s, 19, ARRAY(SELECT 1 + (hashint8extended(extract(epoch FROM b)::bigint * 100 + s * 10 + k, 5) & 2147483647) % 400
                      FROM generate_series(1, 20) k)
FROM generate_series(timestamptz '2024-03-01 10:00+00', timestamptz '2024-03-01 10:00+00' + (:minutes - 1) * interval '1 minute', interval '10 seconds') b,
     generate_series(1, 12) s;

ANALYZE;
