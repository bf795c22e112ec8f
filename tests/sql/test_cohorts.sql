-- compare_cohorts and cohort_sizes on a dataset small enough to check by
-- hand, plus the cohort spec grammar: errors, injection attempts, status
-- classes, route globs, Hz weighting, and the normal tail.

-- The normal tail against 17-digit reference values.
SELECT t.near(traceprof.normal_p_two_sided(0), 1, 1e-12, 'p(z=0) = 1');
SELECT t.near(traceprof.normal_p_two_sided(1.96), 0.049995790296440868, 1e-12, 'p(z=1.96)');
SELECT t.near(traceprof.normal_p_two_sided(-1.96), 0.049995790296440868, 1e-12, 'p(z=-1.96)');
SELECT t.near(traceprof.normal_p_two_sided(3) / 0.0026997960632601891, 1, 1e-10, 'p(z=3) relative');
SELECT t.near(traceprof.normal_p_two_sided(6) / 1.9731752900753963e-9, 1, 1e-10, 'p(z=6) relative');
SELECT t.near(traceprof.normal_p_two_sided(10) / 1.5239706048321052e-23, 1, 1e-10, 'p(z=10) relative');
SELECT t.near(traceprof.normal_p_two_sided(20) / 5.5072482372124674e-89, 1, 1e-10, 'p(z=20) relative');
SELECT t.near(traceprof.normal_p_two_sided(37) / 1.1451142445049154e-299, 1, 1e-10, 'p(z=37) relative');
SELECT t.eq(traceprof.normal_p_two_sided(40), 0::double precision, 'p(z=40) underflows to 0');
SELECT t.near(traceprof.erfc(0.5), 0.47950012218695346, 1e-12, 'erfc(0.5)');
SELECT t.near(traceprof.erfc(-1), 1.8427007929497149, 1e-12, 'erfc(-1) = 2 - erfc(1)');

-- Duration buckets: a 1-2-5 series of milliseconds.
SELECT t.eq(traceprof.duration_bucket(999), 0::smallint, 'under 1 ms is bucket 0');
SELECT t.eq(traceprof.duration_bucket(1000), 1::smallint, '1 ms starts bucket 1');
SELECT t.eq(traceprof.duration_bucket(99999), 6::smallint, '99.999 ms is in [50, 100 ms)');
SELECT t.eq(traceprof.duration_bucket(100000), 7::smallint, '100 ms starts [100, 200 ms)');
SELECT t.eq(traceprof.duration_bucket_range(10), '[1000000,2000000)'::int8range, 'bucket 10 is [1 s, 2 s)');

-- ---------------------------------------------------------------------
-- The hand-computed dataset. One sample at 100 Hz is 10 ms.
SELECT traceprof.create_partitions('2024-05-01 00:00+00', '2024-05-01 12:00+00');
INSERT INTO traceprof.sources (source_id, service, pod) VALUES
    (1, 'shop', 'shop-1'), (2, 'shop', 'shop-2'), (3, 'other', 'other-1');
INSERT INTO traceprof.functions (function_id, name, module) VALUES
    (1, 'main', 'shop'), (2, 'handler', 'shop'), (3, 'validateSignature', 'libcrypto'), (4, 'parse', 'shop');
INSERT INTO traceprof.frames (frame_id, function_id) VALUES (11, 1), (12, 2), (13, 3), (14, 4);
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES
    (101, '{11,12}'),      -- S1 main;handler
    (102, '{11,12,13}'),   -- S2 main;handler;validateSignature
    (103, '{11,12,14}');   -- S3 main;handler;parse
INSERT INTO traceprof.routes (route_id, method, route) VALUES
    (1, 'GET', '/checkout'), (2, 'POST', '/login');

-- request i: trace t.tid(i), span 1000 + i, started at 10:00:00 + i s.
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, route_id, duration_us, status_code)
SELECT timestamptz '2024-05-01 10:00:00+00' + i * interval '1 second', src, t.tid(i), 1000 + i, route, dur, status
FROM (VALUES
    -- cohort A: slow, >= 1 s
    (1, 1, 1, 1500000, 200),   -- r1: S2 x3, S1 x1  t=40 f(vS)=30
    (2, 2, 1, 1200000, 200),   -- r2: S2, S1        t=20 f(vS)=10
    (3, 1, 2, 2000000, 500),   -- r3: S2 x2         t=20 f(vS)=20
    (8, 2, 1, 2000000, 200),   -- r8: no samples
    -- cohort B: fast, < 100 ms
    (4, 1, 1, 50000, 200),     -- r4: S1 x2         t=20 f(vS)=0
    (5, 2, 2, 20000, 404),     -- r5: S2, S1        t=20 f(vS)=10
    (6, 1, 1, 10000, 200),     -- r6: S3            t=10 f(vS)=0
    (7, 2, 1, 80000, 503),     -- r7: S2            t=10 f(vS)=10
    (9, 1, 2, 5000, 200),      -- r9: no samples
    -- neither
    (10, 1, 1, 500000, 200)    -- r10: S2 x5
) AS r(i, src, route, dur, status);

INSERT INTO traceprof.samples (bucket, source_id, trace_id, span_id, hz, stacks, counts) VALUES
    ('2024-05-01 10:00:01+00', 1, t.tid(1), 1001, 100, '{102,101}', '{3,1}'),
    ('2024-05-01 10:00:02+00', 2, t.tid(2), 1002, 100, '{102,101}', NULL),
    ('2024-05-01 10:00:03+00', 1, t.tid(3), 1003, 100, '{102}', NULL),
    ('2024-05-01 10:00:04+00', 1, t.tid(3), 1003, 100, '{102}', NULL),   -- same request, next bucket
    ('2024-05-01 10:00:04+00', 1, t.tid(4), 1004, 100, '{101,101}', NULL),
    ('2024-05-01 10:00:05+00', 2, t.tid(5), 1005, 100, '{101,102}', '{1,1}'),
    ('2024-05-01 10:00:06+00', 1, t.tid(6), 1006, 100, '{103}', NULL),
    ('2024-05-01 10:00:07+00', 2, t.tid(7), 1007, 100, '{102}', NULL),
    ('2024-05-01 10:00:10+00', 1, t.tid(10), 1010, 100, '{102}', '{5}'),
    -- not part of any request above:
    ('2024-05-01 10:00:01+00', 1, t.tid(1), 7777, 100, '{103}', '{50}'),   -- a child span of r1
    ('2024-05-01 10:00:04+00', 3, t.tid(4), 1004, 100, '{103}', '{50}'),   -- another service
    ('2024-05-01 10:09:05+00', 2, t.tid(5), 1005, 100, '{103}', '{50}'),   -- long after r5 ended
    ('2024-05-01 10:00:05+00', 1, NULL, NULL, 100, '{103}', '{50}');       -- no request

CREATE TEMP TABLE hand AS
SELECT * FROM traceprof.compare_cohorts('shop', '2024-05-01 10:00+00', '2024-05-01 11:00+00',
                                        '{"min_duration": "1s"}', '{"max_duration": "100ms"}');

-- validateSignature. A: n=3, sum t=80, share 60/80 = 0.75; residuals
-- f - 0.75 t = 0, -5, 5, so Var = 3/2 * 50 / 80^2 = 0.01171875.
-- B: n=4, sum t=60, share 20/60 = 1/3; residuals -20/3, 10/3, -10/3, 20/3,
-- sum of squares 1000/9, Var = 4/3 * (1000/9) / 60^2 = 0.0411522633744856.
-- delta = 5/12, z = (5/12) / sqrt(0.0528710133744856) = 1.8120907396955155,
-- p = erfc(z / sqrt 2) = 0.06997217700194873 (it is a leaf: self the same).
SELECT t.eq((SELECT function FROM hand LIMIT 1), 'validateSignature', 'largest |delta| first');
SELECT t.eq((SELECT module FROM hand WHERE function = 'validateSignature'), 'libcrypto', 'module');
SELECT t.near((SELECT a_cpu_ms FROM hand WHERE function = 'validateSignature'), 60, 1e-9, 'vS a_cpu_ms');
SELECT t.near((SELECT b_cpu_ms FROM hand WHERE function = 'validateSignature'), 20, 1e-9, 'vS b_cpu_ms');
SELECT t.near((SELECT a_share FROM hand WHERE function = 'validateSignature'), 0.75, 1e-12, 'vS a_share');
SELECT t.near((SELECT b_share FROM hand WHERE function = 'validateSignature'), 1.0 / 3, 1e-12, 'vS b_share');
SELECT t.near((SELECT delta FROM hand WHERE function = 'validateSignature'), 5.0 / 12, 1e-12, 'vS delta');
SELECT t.near((SELECT a_self_share FROM hand WHERE function = 'validateSignature'), 0.75, 1e-12, 'vS a_self_share');
SELECT t.near((SELECT z FROM hand WHERE function = 'validateSignature'), 1.8120907396955155, 1e-9, 'vS z');
SELECT t.near((SELECT p_value FROM hand WHERE function = 'validateSignature'), 0.06997217700194873, 1e-9, 'vS p');
SELECT t.near((SELECT p_value_self FROM hand WHERE function = 'validateSignature'), 0.06997217700194873, 1e-9, 'vS p self');
SELECT t.near(traceprof.ratio_variance(3, 80, 2400, 60, 1400, 1800), 0.01171875, 1e-15, 'Var A from moments');
SELECT t.near(traceprof.ratio_variance(4, 60, 1000, 20, 200, 300), 0.0411522633744856, 1e-15, 'Var B from moments');
SELECT t.eq(traceprof.ratio_variance(1, 60, 3600, 20, 400, 1200), NULL, 'Var needs two requests');

-- parse: only in B (r6, t=10, f=10): share 1/6, Var_A = 0,
-- Var_B = 4/3 * (100 - 2/6*100 + 1000/36) / 3600 = 0.03497942386831276,
-- z = -(1/6) / sqrt(Var_B) = -0.8911327886790069, p = 0.3728579363951833.
SELECT t.eq((SELECT function FROM hand OFFSET 1 LIMIT 1), 'parse', 'parse second');
SELECT t.near((SELECT a_share FROM hand WHERE function = 'parse'), 0, 1e-12, 'parse a_share');
SELECT t.near((SELECT delta FROM hand WHERE function = 'parse'), -1.0 / 6, 1e-12, 'parse delta');
SELECT t.near((SELECT z FROM hand WHERE function = 'parse'), -0.8911327886790069, 1e-9, 'parse z');
SELECT t.near((SELECT p_value FROM hand WHERE function = 'parse'), 0.3728579363951833, 1e-9, 'parse p');

-- handler is on every stack: share 1 in both, no variation, p = 1. Its
-- self share: A s = 10, 10, 0 of t = 40, 20, 20 -> 0.25, Var 0.01171875;
-- B s = 20, 10, 0, 0 of t = 20, 20, 10, 10 -> 0.5, Var 0.0555...;
-- z = -0.25 / sqrt(0.0672743...) = -0.9638631946829987, p = 0.3351145185269776.
SELECT t.near((SELECT a_share FROM hand WHERE function = 'handler'), 1, 1e-12, 'handler a_share');
SELECT t.near((SELECT delta FROM hand WHERE function = 'handler'), 0, 1e-12, 'handler delta');
SELECT t.eq((SELECT z FROM hand WHERE function = 'handler'), 0::double precision, 'handler z = 0');
SELECT t.eq((SELECT p_value FROM hand WHERE function = 'handler'), 1::double precision, 'handler p = 1');
SELECT t.near((SELECT a_self_share FROM hand WHERE function = 'handler'), 0.25, 1e-12, 'handler a_self_share');
SELECT t.near((SELECT b_self_share FROM hand WHERE function = 'handler'), 0.5, 1e-12, 'handler b_self_share');
SELECT t.near((SELECT p_value_self FROM hand WHERE function = 'handler'), 0.3351145185269776, 1e-9, 'handler p self');
SELECT t.eq((SELECT count(*) FROM hand), 4::bigint, 'four functions');
SELECT t.eq((SELECT array_agg(function) FROM hand), '{validateSignature,parse,handler,main}'::text[], 'order');

-- How much data backs it: r8 and r9 match but have no samples.
CREATE TEMP TABLE hand_sizes AS
SELECT * FROM traceprof.cohort_sizes('shop', '2024-05-01 10:00+00', '2024-05-01 11:00+00',
                                     '{"min_duration": "1s"}', '{"max_duration": "100ms"}');
SELECT t.eq((SELECT (requests, sampled_requests, samples) FROM hand_sizes WHERE cohort = 'a'),
            (4::bigint, 3::bigint, 8::bigint), 'cohort a sizes');
SELECT t.near((SELECT cpu_ms FROM hand_sizes WHERE cohort = 'a'), 80, 1e-9, 'cohort a cpu');
SELECT t.eq((SELECT (requests, sampled_requests, samples) FROM hand_sizes WHERE cohort = 'b'),
            (5::bigint, 4::bigint, 6::bigint), 'cohort b sizes');
SELECT t.near((SELECT cpu_ms FROM hand_sizes WHERE cohort = 'b'), 60, 1e-9, 'cohort b cpu');
SELECT t.eq((SELECT array_agg(requests ORDER BY cohort) FROM traceprof.cohort_sizes(
                'shop', '2024-05-01 11:00+00', '2024-05-01 12:00+00', '{}', '{}')),
            '{0,0}'::bigint[], 'an empty range reports zeros');
SELECT t.eq((SELECT count(*) FROM traceprof.compare_cohorts(
                'shop', '2024-05-01 11:00+00', '2024-05-01 12:00+00', '{}', '{}')),
            0::bigint, 'an empty range compares nothing');

-- The same numbers from the rollup.
SELECT t.eq(traceprof.refresh_rollups_range('2024-05-01 10:00+00', '2024-05-01 10:01+00'), 1, 'one minute rolled');
SELECT t.ok(EXISTS (SELECT FROM traceprof.cohort_rollup WHERE service = 'shop'), 'rollup has rows');
CREATE TEMP TABLE hand_rolled AS
SELECT * FROM traceprof.compare_cohorts('shop', '2024-05-01 10:00+00', '2024-05-01 10:01+00',
                                        '{"min_duration": "1s"}', '{"max_duration": "100ms"}');
SELECT t.ok(NOT EXISTS (
    SELECT FROM hand h FULL JOIN hand_rolled r USING (function)
    WHERE r.function IS NULL OR h.function IS NULL
       OR abs(h.a_share - r.a_share) > 1e-12 OR abs(h.b_share - r.b_share) > 1e-12
       OR abs(h.z - r.z) > 1e-9 OR abs(h.p_value - r.p_value) > 1e-12
       OR abs(h.p_value_self - r.p_value_self) > 1e-12),
    'rollup gives the hand-computed numbers');

-- ---------------------------------------------------------------------
-- Status classes and lists (cohort_sizes counts requests, sampled or not).
CREATE FUNCTION pg_temp.n_requests(spec jsonb) RETURNS bigint
LANGUAGE sql AS $$
    SELECT requests FROM traceprof.cohort_sizes('shop', '2024-05-01 10:00+00', '2024-05-01 11:00+00', spec, '{}')
    WHERE cohort = 'a'
$$;
SELECT t.eq(pg_temp.n_requests('{}'), 10::bigint, 'all requests');
SELECT t.eq(pg_temp.n_requests('{"status": "5xx"}'), 2::bigint, '5xx');
SELECT t.eq(pg_temp.n_requests('{"status": "5XX"}'), 2::bigint, '5XX');
SELECT t.eq(pg_temp.n_requests('{"status": "2xx"}'), 7::bigint, '2xx');
SELECT t.eq(pg_temp.n_requests('{"status": "404"}'), 1::bigint, '"404"');
SELECT t.eq(pg_temp.n_requests('{"status": 503}'), 1::bigint, '503 as a number');
SELECT t.eq(pg_temp.n_requests('{"status": "4xx,5xx"}'), 3::bigint, '4xx,5xx');
SELECT t.eq(pg_temp.n_requests('{"status": "404, 500"}'), 2::bigint, 'list with spaces');
SELECT t.eq(pg_temp.n_requests('{"status": [404, "5xx"]}'), 3::bigint, 'array');
SELECT t.eq(pg_temp.n_requests('{"status": null}'), 10::bigint, 'null means not set');
SELECT t.eq(pg_temp.n_requests('{"status": "3xx"}'), 0::bigint, 'no 3xx');
SELECT t.eq(pg_temp.n_requests('{"min_duration": "1.5s"}'), 3::bigint, 'min_duration inclusive');
SELECT t.eq(pg_temp.n_requests('{"max_duration": 50}'), 3::bigint, 'max_duration exclusive, number = ms');
SELECT t.eq(pg_temp.n_requests('{"min_duration": "20000us", "max_duration": "0.08s"}'), 2::bigint, 'us and s');
SELECT t.eq(pg_temp.n_requests('{"min_duration": "0.02m"}'), 4::bigint, 'minutes: 0.02m = 1.2 s');
SELECT t.eq(pg_temp.n_requests('{"max_duration": "5001us"}'), 1::bigint, 'microseconds');
SELECT t.eq(pg_temp.n_requests('{"max_duration": "5001µs"}'), 1::bigint, 'microseconds as µs');
SELECT t.eq(pg_temp.n_requests('{"min_duration": "0.0005h"}'), 2::bigint, 'hours: 0.0005h = 1.8 s');
SELECT t.eq(pg_temp.n_requests('{"min_duration": " 2 s "}'), 2::bigint, 'spaces around and inside');
SELECT t.eq(pg_temp.n_requests('{"route": "/checkout", "method": "get"}'), 7::bigint, 'route and method');
SELECT t.eq(pg_temp.n_requests('{"method": ["POST", "PUT"]}'), 3::bigint, 'method list');

-- ---------------------------------------------------------------------
-- Route globs: % and _ in a route are literal, * and ? are the wildcards.
INSERT INTO traceprof.routes (route_id, method, route) VALUES
    (21, 'GET', '/api/100%_off'), (22, 'GET', '/api/100x_off'), (23, 'GET', '/api/1000_off'),
    (24, 'GET', '/api/100%xoff'), (25, 'GET', '/api/a*b');
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, route_id, duration_us, status_code)
SELECT timestamptz '2024-05-01 10:30:00+00' + r * interval '1 second', 1, t.tid(r), 2000 + r, r, 1000, 200
FROM generate_series(21, 25) r;
SELECT t.eq(pg_temp.n_requests('{"route": "/api/100%_off"}'), 1::bigint, '% and _ literal');
SELECT t.eq(pg_temp.n_requests('{"route": "/api/100?_off"}'), 3::bigint, '? is one character, _ literal');
SELECT t.eq(pg_temp.n_requests('{"route": "/api/100%?off"}'), 2::bigint, '% literal, ? wildcard');
SELECT t.eq(pg_temp.n_requests('{"route": "/api/*"}'), 5::bigint, '* wildcard');
SELECT t.eq(pg_temp.n_requests('{"route": "/api/100_*"}'), 0::bigint, '_ never matches a digit');
SELECT t.eq(pg_temp.n_requests('{"route": "/api/a\\*b"}'), 1::bigint, 'backslash escapes *');
SELECT t.eq(pg_temp.n_requests('{"route": ["/login", "/api/1000*"]}'), 4::bigint, 'route list');
SELECT t.eq(traceprof.glob_to_like('a%b_c*d?e\f'), 'a\%b\_c%d_ef', 'glob to LIKE');
SELECT t.eq(traceprof.glob_to_like(''), '', 'empty glob');
SELECT t.eq(traceprof.glob_to_like('\*\?\\\%\_'), '*?\\\%\_', 'escaped specials');
SELECT t.eq(traceprof.glob_to_like('ab\'), 'ab\\', 'a trailing backslash is literal');
SELECT t.eq(traceprof.glob_to_like(E'a\nb*'), E'a\nb%', 'newlines are literal');
SELECT t.eq(traceprof.glob_to_like('é*ü?'), 'é%ü_', 'multibyte characters');
-- Linear in the pattern's length: a 1 MiB pattern (it took over 15 s when
-- the result grew one character at a time) converts in well under that.
DO $$
DECLARE
    t0 timestamptz := clock_timestamp();
    g text := repeat('a*b?', 262144);
    l text;
BEGIN
    l := traceprof.glob_to_like(g);
    PERFORM t.eq(length(l), 1048576, '1 MiB glob converted whole');
    PERFORM t.eq(left(l, 8), 'a%b_a%b_', '1 MiB glob converted right');
    PERFORM t.ok(clock_timestamp() - t0 < interval '10 s', '1 MiB glob converted in under 10 s, took ' || (clock_timestamp() - t0));
END $$;

-- ---------------------------------------------------------------------
-- Errors name the key and the value.
SELECT t.raises($$SELECT * FROM traceprof.compare_cohorts('shop', now() - interval '1 hour', now(), '{"duraton": "1s"}', '{}')$$,
                'unknown cohort key "duraton" in cohort_a', 'unknown key');
SELECT t.raises($$SELECT * FROM traceprof.compare_cohorts('shop', now() - interval '1 hour', now(), '{}', '{"min_duration": "fast"}')$$,
                'invalid duration "fast" for min_duration in cohort_b', 'bad duration');
SELECT t.raises($$SELECT * FROM traceprof.compare_cohorts('shop', now() - interval '1 hour', now(), '{"max_duration": -5}', '{}')$$,
                'invalid duration "-5" for max_duration in cohort_a', 'negative duration');
SELECT t.raises($$SELECT * FROM traceprof.compare_cohorts('shop', now() - interval '1 hour', now(), '{"max_duration": "5 parsecs"}', '{}')$$,
                'invalid duration "5 parsecs" for max_duration in cohort_a', 'unknown unit');
SELECT t.raises($$SELECT * FROM traceprof.compare_cohorts('shop', now() - interval '1 hour', now(), '{"max_duration": true}', '{}')$$,
                'invalid duration "true" for max_duration in cohort_a', 'boolean duration');
SELECT t.raises($$SELECT * FROM traceprof.compare_cohorts('shop', now() - interval '1 hour', now(), '{}', '{"min_duration": "2s", "max_duration": "1s"}')$$,
                'min_duration "2s" is not below max_duration "1s" in cohort_b', 'min > max');
SELECT t.raises($$SELECT * FROM traceprof.cohort_sizes('shop', now() - interval '1 hour', now(), '{"status": "6xx"}', '{}')$$,
                'invalid status "6xx" for status in cohort_a', 'bad status class');
SELECT t.raises($$SELECT * FROM traceprof.cohort_sizes('shop', now() - interval '1 hour', now(), '{"status": "4xx,,5xx"}', '{}')$$,
                'invalid status "" for status in cohort_a', 'empty status item');
SELECT t.raises($$SELECT * FROM traceprof.cohort_sizes('shop', now() - interval '1 hour', now(), '{"status": 200.5}', '{}')$$,
                'invalid status "200.5" for status in cohort_a', 'fractional status');
SELECT t.raises($$SELECT * FROM traceprof.cohort_sizes('shop', now() - interval '1 hour', now(), '{"route": 42}', '{}')$$,
                'invalid route pattern 42 for route in cohort_a', 'route not a string');
SELECT t.raises($$SELECT * FROM traceprof.cohort_sizes('shop', now() - interval '1 hour', now(), '{}', '[]')$$,
                'cohort_b must be a JSON object', 'spec not an object');
SELECT t.raises($$SELECT * FROM traceprof.cohort_sizes('shop', now(), now() - interval '1 hour', '{}', '{}')$$,
                'from_time before until_time', 'reversed time range');
SELECT t.raises($$SELECT * FROM traceprof.compare_cohorts('shopp', now() - interval '1 hour', now(), '{}', '{}')$$,
                'unknown service "shopp"', 'unknown service');
SELECT t.raises($$SELECT * FROM traceprof.compare_cohorts('shop''; DROP TABLE traceprof.samples; --', now() - interval '1 hour', now(), '{}', '{}')$$,
                'unknown service', 'injection in the service');

-- Injection attempts are errors or literal no-matches; nothing runs.
SELECT t.raises($$SELECT * FROM traceprof.cohort_sizes('shop', now() - interval '1 hour', now(), '{"min_duration": "1s''; DROP TABLE traceprof.requests; --"}', '{}')$$,
                'invalid duration', 'injection in a duration');
SELECT t.raises($$SELECT * FROM traceprof.cohort_sizes('shop', now() - interval '1 hour', now(), '{"status": "5xx) OR (1=1"}', '{}')$$,
                'invalid status', 'injection in a status');
SELECT t.raises($$SELECT * FROM traceprof.cohort_sizes('shop', now() - interval '1 hour', now(), '{"min_duration) OR true --": 1}', '{}')$$,
                'unknown cohort key "min_duration\) OR true --" in cohort_a', 'injection in a key');
SELECT t.eq(pg_temp.n_requests('{"route": "''; DROP TABLE traceprof.samples; --"}'), 0::bigint, 'injection in a route');
SELECT t.eq(pg_temp.n_requests($${"route": "x' OR '1'='1"}$$), 0::bigint, 'quote injection in a route');
SELECT t.eq(pg_temp.n_requests($${"method": "GET' OR 'a'='a"}$$), 0::bigint, 'injection in a method');
SELECT t.eq(pg_temp.n_requests($${"route": "*') OR route LIKE ('%"}$$), 0::bigint, 'LIKE injection in a route');
SELECT t.ok(to_regclass('traceprof.samples') IS NOT NULL AND to_regclass('traceprof.requests') IS NOT NULL,
            'tables survive');
SELECT t.eq((SELECT count(*) FROM traceprof.samples), 13::bigint, 'samples untouched');

-- ---------------------------------------------------------------------
-- Hz weighting: a sample at 19 Hz weighs 1000/19 ms, at 99 Hz 1000/99 ms.
-- Each request of service hz has 99 samples at 99 Hz in handler (S1: 1 s)
-- and 19 at 19 Hz in validateSignature (S2: 1 s): vS has half of the CPU,
-- though it has only 19 of 118 samples.
INSERT INTO traceprof.sources (source_id, service) VALUES (40, 'hz');
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, route_id, duration_us, status_code)
SELECT timestamptz '2024-05-01 10:40:00+00' + i * interval '3 second', 40, t.tid(4000 + i), i, 1, 2500000,
       CASE WHEN i <= 2 THEN 200 ELSE 500 END
FROM generate_series(1, 4) i;
INSERT INTO traceprof.samples (bucket, source_id, trace_id, span_id, hz, stacks, counts)
SELECT timestamptz '2024-05-01 10:40:00+00' + i * interval '3 second', 40, t.tid(4000 + i), i, hz,
       ARRAY[CASE hz WHEN 99 THEN 101 ELSE 102 END], ARRAY[CASE WHEN i <= 2 THEN hz ELSE 2 * hz END]
FROM generate_series(1, 4) i, unnest('{99,19}'::int[]) hz
WHERE i <= 2 OR hz = 19;   -- the 5xx requests: only 2 s in vS at 19 Hz
CREATE TEMP TABLE hz AS
SELECT * FROM traceprof.compare_cohorts('hz', '2024-05-01 10:00+00', '2024-05-01 11:00+00',
                                        '{"status": "2xx"}', '{"status": "5xx"}');
SELECT t.near((SELECT a_cpu_ms FROM hz WHERE function = 'validateSignature'), 2000, 1e-9, '19 Hz samples weigh 1000/19 ms');
SELECT t.near((SELECT a_cpu_ms FROM hz WHERE function = 'handler'), 4000, 1e-9, 'both frequencies add up');
SELECT t.near((SELECT a_share FROM hz WHERE function = 'validateSignature'), 0.5, 1e-12, 'share by CPU, not by samples');
SELECT t.near((SELECT b_share FROM hz WHERE function = 'validateSignature'), 1, 1e-12, '5xx all in vS');
SELECT t.near((SELECT b_cpu_ms FROM hz WHERE function = 'validateSignature'), 4000, 1e-9, '5xx vS CPU');
SELECT t.eq((SELECT (samples, sampled_requests) FROM traceprof.cohort_sizes(
                'hz', '2024-05-01 10:00+00', '2024-05-01 11:00+00', '{"status": "2xx"}', '{}') WHERE cohort = 'a'),
            (236::bigint, 2::bigint), 'sample counts');
-- No variation within either cohort while the shares differ: z undefined.
SELECT t.eq((SELECT z FROM hz WHERE function = 'validateSignature'), NULL::double precision, 'zero variance: z NULL');
SELECT t.eq((SELECT p_value FROM hz WHERE function = 'validateSignature'), NULL::double precision, 'zero variance: p NULL');

-- A cohort with one request has no variance: z and p are NULL.
SELECT t.eq((SELECT p_value FROM traceprof.compare_cohorts('shop', '2024-05-01 10:00+00', '2024-05-01 11:00+00',
                '{"min_duration": "500ms", "max_duration": "1s"}', '{"max_duration": "100ms"}')
             WHERE function = 'validateSignature'), NULL::double precision, 'one request: p NULL');

-- The rollup is a partitioned table that the partition manager handles.
SELECT t.ok('cohort_rollup' = ANY (traceprof._partitioned_tables()), 'cohort_rollup registered');
SELECT t.ok(to_regclass('traceprof.cohort_rollup_p20240501') IS NOT NULL, 'rollup partition for the data');
