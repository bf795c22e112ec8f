-- The analysis functions of 004 on a small dataset whose answers are worked
-- out by hand below. One 99 Hz sample is 1000/99 = 10.1010... ms of CPU, one
-- 19 Hz sample 1000/19 = 52.6315... ms.
SET TimeZone = 'UTC';
SELECT traceprof.create_partitions('2030-01-01', '2030-01-03');

INSERT INTO traceprof.sources (source_id, service, pod) VALUES
    (1, 'payment-svc', 'payment-1'), (2, 'checkout-svc', 'checkout-1'),
    (3, 'gateway', 'gateway-1'), (4, 'worker-svc', 'worker-1');
INSERT INTO traceprof.functions (function_id, name, module) VALUES
    (1, 'main', 'payment'), (2, 'handlePayment', 'payment'), (3, 'validateSignature', 'payment'),
    (5, 'writeLog', 'payment'), (6, 'recurse', 'payment'),
    (11, 'main', 'checkout'), (12, 'handleCheckout', 'checkout'), (13, 'serializeJson', 'checkout'),
    (21, 'main', 'worker'), (22, 'consume', 'worker'), (23, 'poll', 'librdkafka'), (24, 'poll', 'worker');
INSERT INTO traceprof.frames (frame_id, function_id) VALUES
    (10, 1), (20, 2), (30, 3), (50, 5), (60, 6), (61, 6),
    (110, 11), (120, 12), (130, 13), (210, 21), (220, 22), (230, 23), (240, 24);
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES
    (1, '{10,20,30}'),       -- main;handlePayment;validateSignature
    (2, '{10,20,50}'),       -- main;handlePayment;writeLog
    (3, '{10,20}'),          -- main;handlePayment
    (4, '{10,20,60,61}'),    -- main;handlePayment;recurse;recurse
    (11, '{110,120,130}'),   -- main;handleCheckout;serializeJson
    (12, '{110,120}'),       -- main;handleCheckout
    (21, '{210,220}'),       -- main;consume
    (22, '{210,220,230}'),   -- main;consume;poll (librdkafka)
    (23, '{210,240}');       -- main;poll (worker)
INSERT INTO traceprof.routes (route_id, method, route) VALUES
    (1, 'POST', '/pay'), (2, 'POST', '/checkout'), (3, 'GET', '/api/checkout'),
    (4, 'GET', '''; DROP TABLE traceprof.samples; --');

-- Trace A (t.tid(10)), the slow one: gateway -> checkout-svc -> payment-svc.
--   gateway      span 1, 5800 ms, no samples
--   checkout-svc span 2, 5700 ms, 19 Hz: stacks 11 and 12 once each
--                (its row lies 4 minutes after the trace: inside the margin)
--   payment-svc  span 3, 5500 ms:
--       99 Hz {1,1,2,1,3} no counts  -> stack 1 x3, 2 x1, 3 x1
--       99 Hz {1,4,1} counts {390,3,3} -> stack 1 x393, 4 x3
--       19 Hz {1,2} counts {19,6}
--     stack 1 validateSignature: 396@99 + 19@19 = 4000 + 1000 = 5000 ms, 415 samples
--     stack 2 writeLog:          1@99 + 6@19 = 10.1010 + 315.7895 = 325.8904837852 ms, 7
--     stack 3 handlePayment:     1@99 = 10.1010101010 ms, 1
--     stack 4 recurse;recurse:   3@99 = 30.3030303030 ms, 3 (recurse total once)
--     service CPU = 5366.2945241893 ms, 426 samples; validateSignature 93.1741628690 %
--     its row a day later lies outside the margin and is not counted
--   worker-svc   no span row, 99 Hz stack 21 x99 = 1000 ms
-- Trace B (t.tid(11)): payment-svc span 4, 30 ms, status 500, route with SQL
--   in it; 99 Hz stack 3 x2 = 20.2020 ms.
-- Trace D (t.tid(13)): no request rows; worker-svc rows on 1 and 3 January:
--   99 Hz stack 21 x99; 19 Hz stacks 22, 23 and 999 (not in the dictionary).
-- Trace E (t.tid(14)), on 1 January: payment-svc spans 5 and 6 (100 ms and
--   200 ms), 19 Hz stack 3 x2 = 105.2631578947 ms; plus 19 Hz stack 3 x1
--   from source 99, which is not in the sources dictionary ("[unknown]").
-- Untagged: payment-svc 19 Hz stack 2 x19 = 1000 ms.
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, parent_span_id, route_id,
                                duration_us, status_code) VALUES
    ('2030-01-02 10:00:00+00', 3, t.tid(10), 1, NULL, 3, 5800000, 200),
    ('2030-01-02 10:00:00.05+00', 2, t.tid(10), 2, 1, 2, 5700000, 200),
    ('2030-01-02 10:00:00.2+00', 1, t.tid(10), 3, 2, 1, 5500000, 200),
    ('2030-01-02 10:01:00+00', 1, t.tid(11), 4, NULL, 4, 30000, 500),
    ('2030-01-01 11:00:00+00', 1, t.tid(14), 5, NULL, 1, 100000, 200),
    ('2030-01-01 11:00:01+00', 1, t.tid(14), 6, NULL, 1, 200000, 200);
INSERT INTO traceprof.samples (bucket, source_id, span_id, trace_id, hz, stacks, counts) VALUES
    ('2030-01-02 10:00:00+00', 1, 3, t.tid(10), 99, '{1,1,2,1,3}', NULL),
    ('2030-01-02 10:00:01+00', 1, 3, t.tid(10), 99, '{1,4,1}', '{390,3,3}'),
    ('2030-01-02 10:00:02+00', 1, 3, t.tid(10), 19, '{1,2}', '{19,6}'),
    ('2030-01-02 10:04:00+00', 2, 2, t.tid(10), 19, '{11,12}', NULL),
    ('2030-01-02 10:00:02+00', 4, 9, t.tid(10), 99, '{21}', '{99}'),
    ('2030-01-03 10:00:00+00', 1, 3, t.tid(10), 99, '{3}', '{99}'),
    ('2030-01-02 10:01:00+00', 1, 4, t.tid(11), 99, '{3}', '{2}'),
    ('2030-01-01 12:00:00+00', 4, 5, t.tid(13), 99, '{21}', '{99}'),
    ('2030-01-03 08:00:00+00', 4, 5, t.tid(13), 19, '{22,23,999}', NULL),
    ('2030-01-02 10:00:30+00', 1, NULL, NULL, 19, '{2}', '{19}'),
    ('2030-01-01 11:00:00+00', 1, 5, t.tid(14), 19, '{3}', '{2}'),
    ('2030-01-01 11:00:00+00', 99, 7, t.tid(14), 19, '{3}', NULL);

-- trace_profile -------------------------------------------------------------
CREATE TEMP TABLE p AS
SELECT row_number() OVER () AS i, * FROM traceprof.trace_profile('0000000000000000000000000000000a');

SELECT t.eq((SELECT string_agg(service || '/' || function, ' ' ORDER BY i) FROM p),
            'checkout-svc/handleCheckout checkout-svc/main checkout-svc/serializeJson '
            'payment-svc/handlePayment payment-svc/main payment-svc/validateSignature '
            'payment-svc/writeLog payment-svc/recurse worker-svc/consume worker-svc/main',
            'profile order: service, total desc, self desc, name');
SELECT t.near((SELECT self_cpu_ms FROM p WHERE function = 'validateSignature'), 5000, 1e-9,
              'validateSignature: 396 at 99 Hz + 19 at 19 Hz = 5000 ms');
SELECT t.eq((SELECT self_samples FROM p WHERE function = 'validateSignature'), 415::bigint,
            'validateSignature raw samples (counts and repeated stacks)');
SELECT t.near((SELECT self_pct FROM p WHERE function = 'validateSignature'), 93.1741628690, 1e-8,
              'validateSignature share of payment-svc CPU');
SELECT t.near((SELECT total_cpu_ms FROM p WHERE service = 'payment-svc' AND function = 'main'),
              5366.2945241893, 1e-8, 'payment-svc CPU mixes 19 and 99 Hz');
SELECT t.eq((SELECT total_samples FROM p WHERE service = 'payment-svc' AND function = 'main'), 426::bigint,
            'payment-svc samples');
SELECT t.near((SELECT total_pct FROM p WHERE service = 'payment-svc' AND function = 'main'), 100, 1e-9,
              'main is on every stack');
SELECT t.near((SELECT self_cpu_ms FROM p WHERE function = 'writeLog'), 325.8904837852, 1e-8,
              'writeLog: 1 at 99 Hz + 6 at 19 Hz');
SELECT t.near((SELECT self_cpu_ms FROM p WHERE function = 'handlePayment'), 10.1010101010, 1e-8,
              'handlePayment self');
SELECT t.near((SELECT total_cpu_ms FROM p WHERE function = 'recurse'), 30.3030303030, 1e-8,
              'recursion counted once in total');
SELECT t.eq((SELECT total_samples FROM p WHERE function = 'recurse'), 3::bigint, 'recursion samples once');
SELECT t.eq((SELECT module FROM p WHERE service = 'checkout-svc' AND function = 'main'), 'checkout',
            'module column');
SELECT t.near((SELECT sum(self_pct) FROM p WHERE service = 'checkout-svc'), 100, 1e-9,
              'self shares of a service add up to 100');
SELECT t.eq((SELECT array[self_samples, total_samples] FROM p WHERE function = 'handleCheckout'), '{1,2}'::bigint[],
            'samples of a service sampled at one frequency');
SELECT t.near((SELECT self_cpu_ms FROM p WHERE function = 'serializeJson'), 1000 / 19.0, 1e-9,
              'one sample at 19 Hz');
SELECT t.near((SELECT self_cpu_ms FROM p WHERE function = 'consume'), 1000, 1e-9,
              'service with samples but no span is profiled');
SELECT t.eq((SELECT count(*) FROM p WHERE service = 'gateway'), 0::bigint, 'span without samples: no functions');
SELECT t.eq((SELECT count(*) FROM traceprof.trace_profile('0000000000000000000000000000000A', 'payment-svc')),
            5::bigint, 'service filter, upper-case id');
SELECT t.eq((SELECT count(*) FROM traceprof.trace_profile('0000000000000000000000000000000a', 'no-such-svc')),
            0::bigint, 'unknown service: empty');
SELECT t.eq((SELECT count(*) FROM traceprof.trace_profile('00000000000000000000000000000063')),
            0::bigint, 'unknown trace: empty');
SELECT t.near((SELECT sum(self_cpu_ms) FROM traceprof.trace_profile('0000000000000000000000000000000d')),
              1000 + 3 * 1000 / 19.0, 1e-9, 'trace without requests: every partition');
SELECT t.eq((SELECT string_agg(service || ' ' || function || ' ' || self_samples, ', ')
               FROM traceprof.trace_profile('0000000000000000000000000000000e') WHERE self_samples > 0),
            '[unknown] handlePayment 1, payment-svc handlePayment 2', 'samples of an unknown source');
SELECT t.eq((SELECT count(*) FROM traceprof.trace_profile('0000000000000000000000000000000e', '[unknown]')),
            2::bigint, 'the unknown source as a service filter');
SELECT t.near((SELECT self_cpu_ms FROM traceprof.trace_profile('0000000000000000000000000000000b')
                WHERE function = 'handlePayment'), 20.2020202020, 1e-8, 'trace B: 2 samples at 99 Hz');

-- folded stacks --------------------------------------------------------------
-- N = whole microseconds: 5000 ms -> 5000000, 325.89048 -> 325890,
-- 10.10101 -> 10101, 30.30303 -> 30303, 52.63158 -> 52632.
SELECT t.eq(traceprof.trace_folded_text('0000000000000000000000000000000a', 'payment-svc'),
            E'main;handlePayment 10101\n'
            'main;handlePayment;recurse;recurse 30303\n'
            'main;handlePayment;validateSignature 5000000\n'
            'main;handlePayment;writeLog 325890',
            'folded text of one service');
SELECT t.eq(traceprof.trace_folded_text('0000000000000000000000000000000a'),
            E'checkout-svc;main;handleCheckout 52632\n'
            'checkout-svc;main;handleCheckout;serializeJson 52632\n'
            'payment-svc;main;handlePayment 10101\n'
            'payment-svc;main;handlePayment;recurse;recurse 30303\n'
            'payment-svc;main;handlePayment;validateSignature 5000000\n'
            'payment-svc;main;handlePayment;writeLog 325890\n'
            'worker-svc;main;consume 1000000',
            'folded text of all services: service as root frame');
-- Two functions named poll from different modules in one service: the
-- module tells them apart; "main" of three modules in three services does
-- not need it. The stack missing from the dictionary is [unknown].
SELECT t.eq(traceprof.trace_folded_text('0000000000000000000000000000000d'),
            E'worker-svc;[unknown] 52632\n'
            'worker-svc;main;consume 1000000\n'
            'worker-svc;main;consume;poll [librdkafka] 52632\n'
            'worker-svc;main;poll [worker] 52632',
            'labels: name [module] only where a name is ambiguous');
SELECT t.eq((SELECT string_agg(service || '|' || stack || '|' || samples, ' ' ORDER BY service, stack)
               FROM traceprof.trace_folded('0000000000000000000000000000000a', 'checkout-svc')),
            'checkout-svc|main;handleCheckout|1 checkout-svc|main;handleCheckout;serializeJson|1',
            'folded rows');
SELECT t.near((SELECT cpu_ms FROM traceprof.trace_folded('0000000000000000000000000000000a', 'payment-svc')
                WHERE stack = 'main;handlePayment;writeLog'), 325.8904837852, 1e-8, 'folded cpu_ms');
SELECT t.eq(traceprof.trace_folded_text('00000000000000000000000000000063'), NULL::text,
            'unknown trace: NULL text');

-- Grafana flame graph rows ---------------------------------------------------
SELECT t.eq((SELECT string_agg(level || ' ' || label || ' ' || value || ' ' || self, ', ' ORDER BY i)
               FROM traceprof.trace_flamegraph('0000000000000000000000000000000a', 'payment-svc')
                    WITH ORDINALITY AS f(level, value, self, label, i)),
            '0 total 5366294 0, 1 main 5366294 0, 2 handlePayment 5366294 10101, '
            '3 recurse 30303 0, 4 recurse 30303 30303, 3 validateSignature 5000000 5000000, '
            '3 writeLog 325890 325890',
            'flame graph of one service');
SELECT t.eq((SELECT string_agg(level || ' ' || label || ' ' || value || ' ' || self, ', ' ORDER BY i)
               FROM traceprof.trace_flamegraph('0000000000000000000000000000000a')
                    WITH ORDINALITY AS f(level, value, self, label, i)),
            '0 total 6471558 0, 1 checkout-svc 105264 0, 2 main 105264 0, '
            '3 handleCheckout 105264 52632, 4 serializeJson 52632 52632, '
            '1 payment-svc 5366294 0, 2 main 5366294 0, 3 handlePayment 5366294 10101, '
            '4 recurse 30303 0, 5 recurse 30303 30303, 4 validateSignature 5000000 5000000, '
            '4 writeLog 325890 325890, 1 worker-svc 1000000 0, 2 main 1000000 0, '
            '3 consume 1000000 1000000',
            'flame graph of all services');
SELECT t.eq((SELECT count(*) FROM traceprof.trace_flamegraph('00000000000000000000000000000063')),
            0::bigint, 'unknown trace: no flame graph rows');

-- one service over a time range ----------------------------------------------
-- payment-svc on 2 January: trace A (5366.2945 ms) + trace B (stack 3 x2 at
-- 99 Hz) + untagged (stack 2 x19 at 19 Hz = 1000 ms) = 6386.4965443913 ms.
--   validateSignature self 5000           78.2901856322 %
--   writeLog          self 1325.8904837852 20.7608424207 %, 26 samples
--   handlePayment     self 30.3030303030 (3 samples), recurse the same
CREATE TEMP TABLE s AS
SELECT row_number() OVER () AS i, *
  FROM traceprof.service_top_functions('payment-svc', '2030-01-02', '2030-01-03');
SELECT t.eq((SELECT string_agg(function, ' ' ORDER BY i) FROM s),
            'validateSignature writeLog handlePayment recurse main', 'top functions by self CPU');
SELECT t.near((SELECT self_pct FROM s WHERE function = 'validateSignature'), 78.2901856322, 1e-8,
              'share of the service CPU');
SELECT t.near((SELECT self_cpu_ms FROM s WHERE function = 'writeLog'), 1325.8904837852, 1e-8,
              'untagged samples count in the service profile');
SELECT t.eq((SELECT self_samples FROM s WHERE function = 'writeLog'), 26::bigint, 'writeLog samples');
SELECT t.near((SELECT total_cpu_ms FROM s WHERE function = 'main'), 6386.4965443913, 1e-8,
              'service CPU on 2 January');
SELECT t.near((SELECT total_cpu_ms FROM traceprof.service_top_functions(
                   'payment-svc', '2030-01-02', '2030-01-03', 50, true) WHERE function = 'main'),
              5386.4965443913, 1e-8, 'only_requests leaves out untagged samples');
SELECT t.eq((SELECT count(*) FROM traceprof.service_top_functions('payment-svc', '2030-01-02', '2030-01-03', 2)),
            2::bigint, 'lim');
-- 1 to 4 January adds trace A's late row (stack 3 x99 at 99 Hz) and trace E
-- (stack 3 x2 at 19 Hz): handlePayment self = 102 at 99 Hz + 2 at 19 Hz.
SELECT t.near((SELECT self_cpu_ms FROM traceprof.service_top_functions('payment-svc', '2030-01-01', '2030-01-04')
                WHERE function = 'handlePayment'), 1135.5661881978, 1e-8, 'wider range takes the late row');
SELECT t.eq((SELECT count(*) FROM traceprof.service_top_functions('no-such-svc', '2030-01-01', '2030-01-04')),
            0::bigint, 'unknown service: empty');
SELECT t.eq(traceprof.service_folded_text('payment-svc', '2030-01-02', '2030-01-03'),
            E'main;handlePayment 30303\n'
            'main;handlePayment;recurse;recurse 30303\n'
            'main;handlePayment;validateSignature 5000000\n'
            'main;handlePayment;writeLog 1325890',
            'service folded text');
SELECT t.eq((SELECT sum(samples) FROM traceprof.service_folded('payment-svc', '2030-01-02', '2030-01-03', true)),
            428::numeric, 'service folded rows, only requests: 426 + 2');
SELECT t.eq((SELECT string_agg(level || ' ' || label || ' ' || value || ' ' || self, ', ')
               FROM traceprof.service_flamegraph('checkout-svc', '2030-01-02', '2030-01-03')),
            '0 total 105264 0, 1 main 105264 0, 2 handleCheckout 105264 52632, 3 serializeJson 52632 52632',
            'service flame graph');
SELECT t.eq(traceprof.service_folded_text('payment-svc', '2031-01-01', '2031-01-02'), NULL::text,
            'range without data: NULL text');

-- trace_summary ---------------------------------------------------------------
CREATE TEMP TABLE j AS SELECT traceprof.trace_summary('0000000000000000000000000000000a') AS j;
SELECT t.eq((SELECT j->>'trace_id' FROM j), '0000000000000000000000000000000a', 'summary trace id');
SELECT t.eq((SELECT (j->>'start')::timestamptz FROM j), '2030-01-02 10:00:00+00'::timestamptz, 'summary start');
SELECT t.eq((SELECT (j->>'end')::timestamptz FROM j), '2030-01-02 10:00:05.8+00'::timestamptz, 'summary end');
SELECT t.eq((SELECT (j->>'duration_ms')::numeric FROM j), 5800::numeric, 'summary duration');
SELECT t.eq((SELECT (j->>'cpu_ms')::numeric FROM j), 6471.6, 'summary CPU: 5366.29 + 1000 + 105.26');
SELECT t.eq((SELECT (j->>'samples')::int FROM j), 527, 'summary samples: 426 + 99 + 2');
SELECT t.eq((SELECT j->>'verdict' FROM j),
            'payment-svc: 5500 ms span, validateSignature 93 % (5000 ms CPU); '
            'worker-svc: no span, consume 100 % (1000 ms CPU); '
            'checkout-svc: 5700 ms span, mostly waiting (105 ms CPU); '
            'gateway: 5800 ms span, no CPU samples',
            'summary verdict, services by CPU');
SELECT t.eq((SELECT jsonb_path_query_array(j, '$.services[*].service') FROM j),
            '["payment-svc", "worker-svc", "checkout-svc", "gateway"]'::jsonb,
            'every service: spans without samples and samples without spans');
SELECT t.eq((SELECT (j->'services'->0) - 'spans' - 'hotspots' FROM j),
            '{"service": "payment-svc", "span_ms": 5500.0, "cpu_ms": 5366.3, "samples": 426,
              "mostly_waiting": false,
              "hot_path": [{"function": "validateSignature", "total_pct": 93.2, "total_cpu_ms": 5000.0}],
              "verdict": "payment-svc: 5500 ms span, validateSignature 93 % (5000 ms CPU)"}'::jsonb,
            'payment-svc summary');
SELECT t.eq((SELECT j->'services'->0->'spans' FROM j),
            '[{"span_id": "0000000000000003", "parent_span_id": "0000000000000002", "method": "POST",
               "route": "/pay", "status": 200, "start": "2030-01-02T10:00:00.2+00:00",
               "duration_ms": 5500.0}]'::jsonb,
            'payment-svc span');
SELECT t.eq((SELECT j->'services'->0->'hotspots' FROM j),
            '[{"function": "validateSignature", "module": "payment", "self_cpu_ms": 5000.0,
               "total_cpu_ms": 5000.0, "self_pct": 93.2, "total_pct": 93.2},
              {"function": "writeLog", "module": "payment", "self_cpu_ms": 325.9,
               "total_cpu_ms": 325.9, "self_pct": 6.1, "total_pct": 6.1},
              {"function": "recurse", "module": "payment", "self_cpu_ms": 30.3,
               "total_cpu_ms": 30.3, "self_pct": 0.6, "total_pct": 0.6},
              {"function": "handlePayment", "module": "payment", "self_cpu_ms": 10.1,
               "total_cpu_ms": 5366.3, "self_pct": 0.2, "total_pct": 100.0}]'::jsonb,
            'payment-svc hotspots by self CPU');
SELECT t.eq((SELECT (j->'services'->2->>'mostly_waiting')::boolean FROM j), true,
            'checkout-svc: 105 ms CPU in a 5700 ms span is mostly waiting');
SELECT t.eq((SELECT j->'services'->1->'spans' FROM j), '[]'::jsonb, 'worker-svc has no span');
SELECT t.eq((SELECT j->'services'->1->'mostly_waiting' FROM j), 'null'::jsonb, 'no span: waiting unknown');
SELECT t.eq((SELECT (j->'services'->3) - 'spans' FROM j),
            '{"service": "gateway", "span_ms": 5800.0, "cpu_ms": 0, "samples": 0, "mostly_waiting": null,
              "hotspots": [], "hot_path": [], "verdict": "gateway: 5800 ms span, no CPU samples"}'::jsonb,
            'gateway: span without samples');
SELECT t.eq(traceprof.trace_summary('0000000000000000000000000000000e')->>'verdict',
            'payment-svc: 2 spans, 300 ms, handlePayment 100 % (105 ms CPU); '
            '[unknown]: no span, handlePayment 100 % (53 ms CPU)', 'summary with two spans of a service');
SELECT t.eq(traceprof.trace_summary('0000000000000000000000000000000d')->>'verdict',
            -- main;consume 1000 + main;consume;poll 52.63 of 1157.89 ms: consume holds 90.9 %
            -- (main, at 95 %, is an entry point and never the answer)
            'worker-svc: no span, consume 91 % (1053 ms CPU)', 'summary of a trace without spans');
SELECT t.eq(traceprof.trace_summary('0000000000000000000000000000000d')->'start', 'null'::jsonb,
            'no spans: no start');
SELECT t.eq(traceprof.trace_summary('00000000000000000000000000000063'), NULL::jsonb,
            'unknown trace: NULL summary');

-- bad arguments ----------------------------------------------------------------
SELECT t.raises($$SELECT * FROM traceprof.trace_profile('xyz')$$, 'invalid trace id "xyz"', 'malformed id named');
SELECT t.raises($$SELECT * FROM traceprof.trace_profile(NULL)$$, 'trace_profile: trace_id must not be null',
                'NULL trace id');
SELECT t.raises($$SELECT * FROM traceprof.trace_folded('')$$, 'trace_folded: trace_id must not be null or empty',
                'empty trace id');
SELECT t.raises($$SELECT traceprof.trace_folded_text('0000000000000000000000000000000a-')$$,
                'invalid trace id "0000000000000000000000000000000a-"', 'trailing junk');
SELECT t.raises($$SELECT traceprof.trace_summary('00000000000000000000000000000000')$$, 'all zeros', 'zero id');
SELECT t.raises($$SELECT * FROM traceprof.trace_flamegraph('0000000000000000000000000000000a', '')$$,
                'trace_flamegraph: service must not be empty', 'empty service filter');
SELECT t.raises($$SELECT * FROM traceprof.service_top_functions(NULL, '2030-01-02', '2030-01-03')$$,
                'service_top_functions: service must not be null', 'NULL service');
SELECT t.raises($$SELECT * FROM traceprof.service_folded('', '2030-01-02', '2030-01-03')$$,
                'service_folded: service must not be null or empty', 'empty service');
SELECT t.raises($$SELECT * FROM traceprof.service_top_functions('payment-svc', NULL, '2030-01-03')$$,
                'from_time must not be null', 'NULL from_time');
SELECT t.raises($$SELECT * FROM traceprof.service_flamegraph('payment-svc', '2030-01-02', NULL)$$,
                'until_time must not be null', 'NULL until_time');
SELECT t.raises($$SELECT * FROM traceprof.service_folded_text('payment-svc', '2030-01-03', '2030-01-02')$$,
                'until_time .* is not after from_time', 'reversed range');
SELECT t.raises($$SELECT * FROM traceprof.service_top_functions('payment-svc', '2030-01-02', '2030-01-03', 0)$$,
                'lim must be a positive number', 'lim 0');

-- injection attempts: every text parameter is a value -----------------------------
CREATE TEMP TABLE before AS SELECT count(*) AS n FROM traceprof.samples;
SELECT t.raises(format('SELECT * FROM traceprof.%s(%L)', f, '''; DROP TABLE traceprof.samples; --'),
                'invalid trace id "''; DROP TABLE traceprof.samples; --"', f || ': SQL as trace id')
  FROM unnest(ARRAY['trace_profile', 'trace_folded', 'trace_folded_text', 'trace_flamegraph',
                    'trace_summary']) AS f;
SELECT t.eq((SELECT count(*) FROM traceprof.trace_profile('0000000000000000000000000000000a',
                                                          '''; DROP TABLE traceprof.samples; --')),
            0::bigint, 'SQL as service of trace_profile: no match');
SELECT t.eq(traceprof.trace_folded_text('0000000000000000000000000000000a', ''' OR ''1''=''1'), NULL::text,
            'SQL as service of trace_folded_text: no match');
SELECT t.eq((SELECT count(*) FROM traceprof.trace_flamegraph('0000000000000000000000000000000a',
                                                             '''; DROP TABLE traceprof.samples; --')),
            0::bigint, 'SQL as service of trace_flamegraph: no match');
SELECT t.eq((SELECT count(*) FROM traceprof.service_top_functions('''; DROP TABLE traceprof.samples; --',
                                                                  '2030-01-01', '2030-01-04')),
            0::bigint, 'SQL as service of service_top_functions: no match');
SELECT t.eq(traceprof.service_folded_text('''; DROP TABLE traceprof.samples; --', '2030-01-01', '2030-01-04'),
            NULL::text, 'SQL as service of service_folded_text: no match');
SELECT t.eq((SELECT count(*) FROM traceprof.service_flamegraph('x''); DROP TABLE traceprof.samples; --',
                                                               '2030-01-01', '2030-01-04')),
            0::bigint, 'SQL as service of service_flamegraph: no match');
SELECT t.eq(traceprof.trace_summary('0000000000000000000000000000000b')->'services'->0->'spans'->0->>'route',
            '''; DROP TABLE traceprof.samples; --', 'SQL in a route is returned as text');
SELECT t.eq(traceprof.trace_summary('0000000000000000000000000000000b')->>'verdict',
            'payment-svc: 30 ms span, handlePayment 100 % (20 ms CPU)', 'trace B verdict');
SELECT t.ok(to_regclass('traceprof.samples') IS NOT NULL AND to_regclass('traceprof.requests') IS NOT NULL
            AND to_regclass('traceprof.routes') IS NOT NULL, 'tables still exist');
SELECT t.eq((SELECT count(*) FROM traceprof.samples), (SELECT n FROM before), 'samples untouched');

-- hot_path and the verdict of a deep chain. Stacks (root first) and CPU ms:
--   main;serve;verify;rsa;modexp  60
--   main;serve;verify;rsa;mul     20
--   main;serve;log                15
--   main;gc                        5       total 100
-- Heaviest path: main 100, serve 95, verify 80, rsa 80, modexp 60.
INSERT INTO traceprof.functions (function_id, name, module) VALUES
    (9001, 'main', 'h'), (9002, 'serve', 'h'), (9003, 'verify', 'h'), (9004, 'rsa', 'h'),
    (9005, 'modexp', 'h'), (9006, 'mul', 'h'), (9007, 'log', 'h'), (9008, 'gc', 'h');
INSERT INTO traceprof.frames (frame_id, function_id)
SELECT function_id + 100000, function_id FROM traceprof.functions WHERE function_id BETWEEN 9001 AND 9008;
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES
    (9101, '{109001,109002,109003,109004,109005}'), (9102, '{109001,109002,109003,109004,109006}'),
    (9103, '{109001,109002,109007}'), (9104, '{109001,109008}');
SELECT t.eq((SELECT array_agg(function_id ORDER BY depth) FROM traceprof.hot_path('{9101,9102,9103,9104}', '{60,20,15,5}')),
            '{9001,9002,9003,9004,9005}'::bigint[], 'hot path follows the heaviest child');
SELECT t.eq((SELECT array_agg(round(share::numeric, 2) ORDER BY depth) FROM traceprof.hot_path('{9101,9102,9103,9104}', '{60,20,15,5}')),
            '{1.00,0.95,0.80,0.80,0.60}'::numeric[], 'hot path shares');
SELECT t.eq((SELECT count(*) FROM traceprof.hot_path('{}', '{}')), 0::bigint, 'empty input, empty path');
-- A trace with exactly these samples (1 sample = 1000/hz ms at 20 Hz = 50 ms: weights 60:20:15:5 as 12:4:3:1 samples).
INSERT INTO traceprof.sources (source_id, service) VALUES (9200, 'deep-svc');
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, duration_us, status_code)
VALUES ('2030-01-02 11:00:00+00', 9200, t.tid(9300), 1, 2000000, 200);
INSERT INTO traceprof.samples (bucket, source_id, trace_id, span_id, hz, stacks, counts)
VALUES ('2030-01-02 11:00:00+00', 9200, t.tid(9300), 1, 20, '{9101,9102,9103,9104}', '{12,4,3,1}');
SELECT t.eq(traceprof.trace_summary(traceprof.trace_id_text(t.tid(9300)))->>'verdict',
            'deep-svc: 2000 ms span, serve 95 % (950 ms CPU) → modexp 60 %',
            'verdict names where the CPU narrows and the deepest function holding half of it');
SELECT t.eq(traceprof.trace_summary(traceprof.trace_id_text(t.tid(9300)))->'services'->0->'hot_path',
            '[{"function": "serve", "total_pct": 95.0, "total_cpu_ms": 950.0},
              {"function": "verify", "total_pct": 80.0, "total_cpu_ms": 800.0},
              {"function": "rsa", "total_pct": 80.0, "total_cpu_ms": 800.0},
              {"function": "modexp", "total_pct": 60.0, "total_cpu_ms": 600.0}]'::jsonb,
            'hot_path in the summary');
-- One stack cut short of the root (its own root: the unwinder lost its callers)
-- leaves the thread start below the whole; the path narrows where a level holds
-- less than its parent, at verify, not at the thread start:
--   thread;start;serve;verify  30 samples
--   thread;start;serve;log     12
--   verify (cut)                1
INSERT INTO traceprof.functions (function_id, name, module) VALUES
    (9011, 'thread', 'h'), (9012, 'start', 'h'), (9013, 'serve2', 'h'), (9014, 'verify2', 'h'),
    (9015, 'log2', 'h');
INSERT INTO traceprof.frames (frame_id, function_id)
SELECT function_id + 100000, function_id FROM traceprof.functions WHERE function_id BETWEEN 9011 AND 9015;
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES
    (9111, '{109011,109012,109013,109014}'), (9112, '{109011,109012,109013,109015}'), (9113, '{109014}');
INSERT INTO traceprof.sources (source_id, service) VALUES (9201, 'cut-svc');
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, duration_us, status_code)
VALUES ('2030-01-02 11:00:00+00', 9201, t.tid(9301), 1, 2000000, 200);
INSERT INTO traceprof.samples (bucket, source_id, trace_id, span_id, hz, stacks, counts)
VALUES ('2030-01-02 11:00:00+00', 9201, t.tid(9301), 1, 20, '{9111,9112,9113}', '{30,12,1}');
SELECT t.eq(traceprof.trace_summary(traceprof.trace_id_text(t.tid(9301)))->>'verdict',
            'cut-svc: 2000 ms span, verify2 70 % (1500 ms CPU)',
            'a stack cut short of the root does not make the thread start the narrowing point');
