-- The rollup gives the same results as the raw tables, at every edge: time
-- ranges that start or end inside a minute, minutes not rolled yet,
-- duration bounds inside a bucket (off the 1-2-5 series), status, route
-- and method filters. And refresh_rollups rolls each minute once, re-rolls
-- on request, and leaves late data to refresh_rollups_range.

CREATE FUNCTION pg_temp.rnd(seed text, i bigint) RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$
    SELECT ('x' || substr(md5(seed || ':' || i), 1, 8))::bit(32)::bigint / 4294967296.0
$$;

SELECT traceprof.create_partitions('2024-07-01 00:00+00', '2024-07-01 12:00+00');
INSERT INTO traceprof.sources (source_id, service) VALUES (1, 'edge'), (2, 'edge'), (3, 'bystander');
INSERT INTO traceprof.functions (function_id, name, module) VALUES
    (1, 'main', 'app'), (2, 'handler', 'app'), (3, 'validateSignature', 'libcrypto'), (4, 'parse', 'app');
INSERT INTO traceprof.frames (frame_id, function_id) VALUES (11, 1), (12, 2), (13, 3), (14, 4), (15, 4);
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES
    (101, '{11,12}'), (102, '{11,12,13}'), (103, '{11,12,14}'),
    (104, '{11,14,12,15}'),  -- recursion: parse twice
    (105, '{11,999}');       -- a frame missing from the dictionary
    -- stack 106 is missing altogether: [unknown]
INSERT INTO traceprof.routes (route_id, method, route) VALUES
    (1, 'GET', '/checkout'), (2, 'POST', '/api/login'), (3, 'GET', '/api/100%_off');

-- 12 minutes from 11:00, a request every 1.5 s (480), durations around
-- and on the bucket bounds, statuses and routes mixed; 70 % have samples
-- at 19 or 99 Hz, some in two rows; the bystander service has its own.
CREATE TEMP TABLE reqs AS
SELECT i, CASE WHEN i % 7 = 0 THEN 2 ELSE 1 END AS src,
       timestamptz '2024-07-01 11:00:00+00' + i * interval '1500 millisecond' + (i % 5) * interval '17 millisecond' AS start_time,
       (ARRAY[500, 1000, 1500, 75000, 99999, 100000, 150000, 199999, 200000, 250000,
              999999, 1000000, 1500000, 2500000, 4999, 60000000])[1 + (pg_temp.rnd('d', i) * 16)::int % 16] AS duration_us,
       (ARRAY[200, 200, 200, 201, 404, 500, 503])[1 + (pg_temp.rnd('st', i) * 7)::int % 7] AS status,
       1 + (pg_temp.rnd('rt', i) * 3)::int % 3 AS route,
       CASE WHEN pg_temp.rnd('hz', i) < 0.5 THEN 19 ELSE 99 END AS hz,
       pg_temp.rnd('sampled', i) < 0.7 AS sampled
FROM generate_series(0, 479) i;
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, route_id, duration_us, status_code)
SELECT start_time, src, t.tid(i), 5000 + i, route, duration_us, status FROM reqs;
INSERT INTO traceprof.samples (bucket, source_id, trace_id, span_id, hz, stacks, counts)
SELECT date_trunc('second', start_time) + part * interval '1 second', src, t.tid(i), 5000 + i,
       CASE WHEN part = 1 AND i % 3 = 0 THEN 19 ELSE hz END,
       ARRAY(SELECT 101 + (pg_temp.rnd('stk' || i || ':' || part, k) * 6)::int % 6 FROM generate_series(1, 3) k),
       CASE WHEN i % 2 = 0 THEN ARRAY(SELECT 1 + (pg_temp.rnd('c' || i || ':' || part, k) * 4)::int % 4
                                      FROM generate_series(1, 3) k) END
FROM reqs, generate_series(0, 1) part
WHERE sampled AND (part = 0 OR i % 4 = 0);
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, route_id, duration_us, status_code)
SELECT timestamptz '2024-07-01 11:00:00+00' + i * interval '10 second', 3, t.tid(90000 + i), i, 1, 2000000, 200
FROM generate_series(0, 71) i;
INSERT INTO traceprof.samples (bucket, source_id, trace_id, span_id, hz, stacks)
SELECT timestamptz '2024-07-01 11:00:00+00' + i * interval '10 second', 3, t.tid(90000 + i), i, 19, '{102,102}'
FROM generate_series(0, 71) i;

-- Compares compare_cohorts and cohort_sizes with and without the rollup.
CREATE FUNCTION pg_temp.same(f timestamptz, u timestamptz, a jsonb, b jsonb, what text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    bad record;
    n integer;
BEGIN
    SELECT count(*) INTO n FROM traceprof.compare_cohorts('edge', f, u, a, b, false);
    IF n < 3 THEN
        RAISE EXCEPTION 'FAIL %: only % functions: the case tests nothing', what, n;
    END IF;
    SELECT * INTO bad
    FROM traceprof.compare_cohorts('edge', f, u, a, b, true) r
    FULL JOIN traceprof.compare_cohorts('edge', f, u, a, b, false) x USING (function, module)
    WHERE r.a_cpu_ms IS NULL OR x.a_cpu_ms IS NULL
       OR abs(r.a_cpu_ms - x.a_cpu_ms) > 1e-9 * greatest(1, x.a_cpu_ms)
       OR abs(r.b_cpu_ms - x.b_cpu_ms) > 1e-9 * greatest(1, x.b_cpu_ms)
       OR (r.a_share IS NULL) <> (x.a_share IS NULL) OR abs(r.a_share - x.a_share) > 1e-12
       OR (r.b_share IS NULL) <> (x.b_share IS NULL) OR abs(r.b_share - x.b_share) > 1e-12
       OR abs(r.a_self_share - x.a_self_share) > 1e-12 OR abs(r.b_self_share - x.b_self_share) > 1e-12
       OR (r.z IS NULL) <> (x.z IS NULL) OR abs(r.z - x.z) > 1e-9 * greatest(1, abs(x.z))
       OR (r.p_value IS NULL) <> (x.p_value IS NULL) OR abs(r.p_value - x.p_value) > 1e-9
       OR (r.p_value_self IS NULL) <> (x.p_value_self IS NULL) OR abs(r.p_value_self - x.p_value_self) > 1e-9
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'FAIL %: rollup and raw differ: %', what, bad;
    END IF;
    SELECT * INTO bad
    FROM traceprof.cohort_sizes('edge', f, u, a, b, true) r
    JOIN traceprof.cohort_sizes('edge', f, u, a, b, false) x USING (cohort)
    WHERE (r.requests, r.sampled_requests, r.samples) <> (x.requests, x.sampled_requests, x.samples)
       OR abs(r.cpu_ms - x.cpu_ms) > 1e-9 * greatest(1, x.cpu_ms)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'FAIL %: cohort sizes differ: %', what, bad;
    END IF;
END $$;

CREATE FUNCTION pg_temp.all_cases(what text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_temp.same('2024-07-01 11:00:30+00', '2024-07-01 11:10:15+00',
                         '{"min_duration": "1s"}', '{"max_duration": "100ms"}', what || ': partial minutes, on the series');
    PERFORM pg_temp.same('2024-07-01 11:00+00', '2024-07-01 11:08+00',
                         '{"min_duration": "150ms"}', '{"max_duration": "75ms", "status": "2xx"}', what || ': off the series');
    PERFORM pg_temp.same('2024-07-01 11:01+00', '2024-07-01 11:05+00', '{}', '{"status": "5xx"}', what || ': status');
    PERFORM pg_temp.same('2024-07-01 10:59+00', '2024-07-01 11:20+00',
                         '{"min_duration": "99.9999ms", "max_duration": "1.5s"}', '{"route": "/api/*", "method": "post"}',
                         what || ': sub-millisecond bound, route and method');
    PERFORM pg_temp.same('2024-07-01 11:03:17.5+00', '2024-07-01 11:03:45+00', '{}', '{"min_duration": 1}',
                         what || ': inside one minute');
    PERFORM pg_temp.same('2024-07-01 11:02+00', '2024-07-01 11:07+00',
                         '{"min_duration": "1ms", "max_duration": "2s"}', '{"route": "/api/100%_off", "status": [200, 201, "4xx"]}',
                         what || ': whole buckets, literal %');
    PERFORM pg_temp.same('2024-07-01 10:58:30+00', '2024-07-01 12:00:30+00',
                         '{"min_duration": "100ms"}', '{"max_duration": "100ms"}', what || ': a whole hour');
END $$;

-- No rollup at all: both paths are the raw path.
SELECT pg_temp.all_cases('no rollup');

-- Minutes 11:00 to 11:08 rolled: ranges reach past them on both sides.
SELECT t.eq(traceprof.refresh_rollups_range('2024-07-01 11:00+00', '2024-07-01 11:07:30+00'), 8, 'range widened to whole minutes');
SELECT t.eq((SELECT rolled FROM traceprof.cohort_rollup_state),
            '{["2024-07-01 11:00:00+00","2024-07-01 11:08:00+00")}'::tstzmultirange, 'state records the range');
SELECT t.eq((SELECT sum(requests) FROM traceprof.cohort_rollup WHERE service = 'edge' AND function_id IS NULL),
            (SELECT count(*) FROM reqs WHERE start_time < '2024-07-01 11:08+00'), 'every request of the range rolled once');
SELECT t.eq((SELECT sum(requests) FROM traceprof.cohort_rollup WHERE service = 'bystander' AND function_id IS NULL),
            48::bigint, 'every service rolled');
SELECT pg_temp.all_cases('partly rolled');

-- Re-rolling replaces: same rows, same results.
CREATE TEMP TABLE before AS SELECT * FROM traceprof.cohort_rollup;
SELECT traceprof.refresh_rollups_range('2024-07-01 11:02+00', '2024-07-01 11:05+00');
SELECT t.eq((SELECT count(*) FROM traceprof.cohort_rollup), (SELECT count(*) FROM before), 're-roll keeps the row count');
SELECT t.ok(NOT EXISTS (SELECT minute, service, route_id, status_code, duration_bucket, function_id, requests, sampled_requests, samples
                        FROM traceprof.cohort_rollup
                        EXCEPT
                        SELECT minute, service, route_id, status_code, duration_bucket, function_id, requests, sampled_requests, samples
                        FROM before), 're-roll gives the same rows');

-- refresh_rollups rolls what is missing up to its argument, once.
SELECT t.eq(traceprof.refresh_rollups('2024-07-01 11:10:30+00'), 2, 'refresh rolls 11:08 and 11:09');
SELECT t.eq(traceprof.refresh_rollups('2024-07-01 11:10:30+00'), 0, 'nothing left to roll');
SELECT t.eq((SELECT rolled FROM traceprof.cohort_rollup_state),
            '{["2024-07-01 11:00:00+00","2024-07-01 11:10:00+00")}'::tstzmultirange, 'state merged');
SELECT t.eq(traceprof.refresh_rollups('2024-07-01 12:00+00'), 50, 'refresh rolls to its argument');
-- The hour 11:00 is now wholly rolled: it has hour rows, the sums of its minutes.
SELECT t.ok(NOT EXISTS (
    SELECT service, route_id, status_code, duration_bucket, function_id,
           sum(requests), sum(samples), round(sum(sum_w)::numeric, 6), round(sum(sum_st)::numeric, 6)
    FROM traceprof.cohort_rollup WHERE minutes = 1 GROUP BY 1, 2, 3, 4, 5
    EXCEPT
    SELECT service, route_id, status_code, duration_bucket, function_id,
           requests, samples, round(sum_w::numeric, 6), round(sum_st::numeric, 6)
    FROM traceprof.cohort_rollup WHERE minutes = 60 AND minute = '2024-07-01 11:00+00'),
    'hour rows sum the minute rows');
SELECT t.ok(EXISTS (SELECT FROM traceprof.cohort_rollup WHERE minutes = 60), 'hour rows exist');
SELECT pg_temp.all_cases('fully rolled');

-- Late data: a request that arrives after its minute was rolled is in the
-- raw path at once, in the rollup after refresh_rollups_range.
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, route_id, duration_us, status_code)
VALUES ('2024-07-01 11:03:20+00', 1, t.tid(77777), 77777, 1, 3000000, 500);
INSERT INTO traceprof.samples (bucket, source_id, trace_id, span_id, hz, stacks, counts)
VALUES ('2024-07-01 11:03:21+00', 1, t.tid(77777), 77777, 19, '{104}', '{40}');
SELECT t.ok((SELECT requests FROM traceprof.cohort_sizes('edge', '2024-07-01 11:00+00', '2024-07-01 11:08+00', '{}', '{}', true) WHERE cohort = 'a')
            < (SELECT requests FROM traceprof.cohort_sizes('edge', '2024-07-01 11:00+00', '2024-07-01 11:08+00', '{}', '{}', false) WHERE cohort = 'a'),
            'late request not in the rollup yet');
SELECT traceprof.refresh_rollups_range('2024-07-01 11:03+00', '2024-07-01 11:04+00');
SELECT pg_temp.all_cases('after late data');

-- _rollup_blocks: the signed blocks add up to exactly the range, minute by
-- minute, and read at most half a block of each length at each end.
CREATE FUNCTION pg_temp.check_blocks(lo timestamptz, hi timestamptz, rolled tstzmultirange, max_blocks integer)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    bad timestamptz;
    n integer;
BEGIN
    SELECT m INTO bad
    FROM generate_series(lo - interval '2 hours', hi + interval '2 hours', interval '1 minute') m
    LEFT JOIN traceprof._rollup_blocks(lo, hi, rolled) b
           ON m >= b.block_start AND m < b.block_start + b.block_minutes * interval '1 minute'
    GROUP BY m
    HAVING coalesce(sum(b.block_sign), 0) <> CASE WHEN m >= lo AND m < hi THEN 1 ELSE 0 END
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'FAIL blocks for % .. %: minute % covered wrongly', lo, hi, bad;
    END IF;
    SELECT count(*) INTO n FROM traceprof._rollup_blocks(lo, hi, rolled);
    IF n > max_blocks THEN
        RAISE EXCEPTION 'FAIL blocks for % .. %: % blocks, expected at most %', lo, hi, n, max_blocks;
    END IF;
END $$;
SELECT pg_temp.check_blocks('2024-07-01 10:07+00', '2024-07-01 11:52+00', '{[2024-07-01 10:00+00, 2024-07-01 12:00+00)}', 10);
SELECT pg_temp.check_blocks('2024-07-01 10:07+00', '2024-07-01 11:52+00', '{[2024-07-01 10:05+00, 2024-07-01 11:55+00)}', 30);
SELECT pg_temp.check_blocks('2024-07-01 09:00+00', '2024-07-01 14:00+00', '{[2024-07-01 00:00+00, 2024-07-02 00:00+00)}', 5);
SELECT pg_temp.check_blocks('2024-07-01 10:03+00', '2024-07-01 10:04+00', '{[2024-07-01 00:00+00, 2024-07-02 00:00+00)}', 1);
SELECT pg_temp.check_blocks('2024-07-01 10:01+00', '2024-07-01 10:59+00', '{[2024-07-01 00:00+00, 2024-07-02 00:00+00)}', 5);
SELECT pg_temp.check_blocks('2024-07-01 10:16+00', '2024-07-01 10:44+00', '{[2024-07-01 00:00+00, 2024-07-02 00:00+00)}', 12);
SELECT t.eq((SELECT array_agg(block_minutes || '@' || to_char(block_start AT TIME ZONE 'UTC', 'HH24:MI') || ':' || block_sign
                              ORDER BY block_start, block_minutes DESC)
             FROM traceprof._rollup_blocks('2024-07-01 10:01+00', '2024-07-01 10:59+00',
                                           '{[2024-07-01 00:00+00, 2024-07-02 00:00+00)}')),
            '{60@10:00:1,1@10:00:-1,1@10:59:-1}'::text[], 'an hour less two minutes');
