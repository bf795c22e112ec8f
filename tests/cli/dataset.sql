-- The dataset of the traceprof command's golden tests (tests/cli/golden/):
-- fixed times on 2030-01-02 (UTC), so outputs never depend on "now".
-- One 19 Hz sample is 1000/19 = 52.631579 ms of CPU, one 99 Hz sample
-- 1000/99 = 10.101010 ms.
--
-- payment-svc runs build aaaa1111 until 10:30 (source 1), then build
-- bbbb2222 (source 2); checkout-svc calls it (source 3).
--   trace ...0a (slow checkout): checkout-svc span 5.7 s, 2 samples of
--     serializeJson; payment-svc span 5.5 s: 80 samples in
--     validateSignature (rsa_verify below it for 60 of them: 20 self in
--     validateSignature, 60 in rsa_verify), 3 writeLog, 1 handlePayment:
--     84 samples = 4421.05 ms, validateSignature 95.2 % total.
--   trace ...0b (claimed by trigger default/slow-payments): payment-svc
--     1.2 s; 4 base samples (19 Hz) and 115 raised ones (99 Hz: 110
--     validateSignature, 5 writeLog): the raised ones are read.
--   traces ...0c-...0h: fast payments (40-80 ms), one serializeResponse
--     sample each; ...0i: 30 ms, status 503, one writeLog sample.
--   build bbbb2222: ...0j 1.5 s, 20 validateSignature samples; ...0k 50 ms,
--     one serializeResponse sample.
--   untagged: 5 samples of payment-svc's poll (two modules share the name:
--     "poll [libev]" and "poll [payment]").
SET TimeZone = 'UTC';
SELECT traceprof.create_partitions('2030-01-01', '2030-01-03');

INSERT INTO traceprof.sources (source_id, service, pod, build_id) VALUES
    (1, 'payment-svc', 'payment-1', 'aaaa1111'), (2, 'payment-svc', 'payment-2', 'bbbb2222'),
    (3, 'checkout-svc', 'checkout-1', 'cccc3333');
INSERT INTO traceprof.functions (function_id, name, module) VALUES
    (1, 'main', 'payment'), (2, 'handlePayment', 'payment'), (3, 'validateSignature', 'payment'),
    (4, 'rsa_verify', 'libcrypto.so.3'), (5, 'writeLog', 'payment'),
    (6, 'serializeResponse', 'payment'), (7, 'poll', 'libev'), (8, 'poll', 'payment'),
    (11, 'main', 'checkout'), (12, 'handleCheckout', 'checkout'), (13, 'serializeJson', 'checkout');
INSERT INTO traceprof.frames (frame_id, function_id, build_id, file, line, address) VALUES
    (10, 1, 'aaaa1111', 'main.c', 10, 4096), (20, 2, 'aaaa1111', 'pay.c', 42, 8192),
    (30, 3, 'aaaa1111', 'sig.c', 7, 12288), (40, 4, '', NULL, NULL, NULL),
    (50, 5, 'aaaa1111', 'log.c', 3, 16384), (60, 6, 'aaaa1111', 'pay.c', 90, 20480),
    (70, 7, '', NULL, NULL, NULL), (80, 8, 'aaaa1111', 'loop.c', 5, 24576),
    (31, 3, 'bbbb2222', 'sig.c', 8, 12300),
    (110, 11, 'cccc3333', 'main.c', 1, 4096), (120, 12, 'cccc3333', 'checkout.c', 20, 8192),
    (130, 13, 'cccc3333', 'json.c', 55, 12288);
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES
    (1, '{10,20,30}'),       -- main;handlePayment;validateSignature
    (2, '{10,20,30,40}'),    -- ...;validateSignature;rsa_verify
    (3, '{10,20,50}'),       -- main;handlePayment;writeLog
    (4, '{10,20}'),          -- main;handlePayment
    (5, '{10,20,60}'),       -- main;handlePayment;serializeResponse
    (6, '{10,80,70}'),       -- main;poll [payment];poll [libev]
    (7, '{10,20,31}'),       -- validateSignature of build bbbb2222
    (11, '{110,120,130}'),   -- main;handleCheckout;serializeJson
    (12, '{110,120}');       -- main;handleCheckout
INSERT INTO traceprof.routes (route_id, method, route) VALUES
    (1, 'POST', '/api/pay'), (2, 'POST', '/api/checkout'), (3, 'GET', '/api/health');

INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, parent_span_id, route_id,
                                duration_us, status_code) VALUES
    ('2030-01-02 10:00:00+00', 3, '0000000000000000000000000000000a', 161, NULL, 2, 5700000, 200),
    ('2030-01-02 10:00:00.1+00', 1, '0000000000000000000000000000000a', 162, 161, 1, 5500000, 200),
    ('2030-01-02 10:05:00+00', 1, '0000000000000000000000000000000b', 177, NULL, 1, 1200000, 200),
    ('2030-01-02 10:10:00+00', 1, '0000000000000000000000000000000c', 193, NULL, 1, 40000, 200),
    ('2030-01-02 10:11:00+00', 1, '0000000000000000000000000000000d', 209, NULL, 1, 50000, 200),
    ('2030-01-02 10:12:00+00', 1, '0000000000000000000000000000000e', 225, NULL, 1, 60000, 200),
    ('2030-01-02 10:13:00+00', 1, '0000000000000000000000000000000f', 241, NULL, 1, 70000, 200),
    ('2030-01-02 10:14:00+00', 1, '00000000000000000000000000000010', 257, NULL, 1, 80000, 200),
    ('2030-01-02 10:15:00+00', 1, '00000000000000000000000000000011', 273, NULL, 1, 45000, 200),
    ('2030-01-02 10:20:00+00', 1, '00000000000000000000000000000012', 289, NULL, 1, 30000, 503),
    ('2030-01-02 10:40:00+00', 2, '00000000000000000000000000000013', 305, NULL, 1, 1500000, 200),
    ('2030-01-02 10:41:00+00', 2, '00000000000000000000000000000014', 321, NULL, 1, 50000, 200);

INSERT INTO traceprof.samples (bucket, source_id, span_id, trace_id, hz, stacks, counts) VALUES
    ('2030-01-02 10:00:00+00', 3, 161, '0000000000000000000000000000000a', 19, '{11}', '{2}'),
    ('2030-01-02 10:00:00+00', 1, 162, '0000000000000000000000000000000a', 19, '{1,2,3,4}', '{20,60,3,1}'),
    ('2030-01-02 10:05:00+00', 1, 177, '0000000000000000000000000000000b', 19, '{1}', '{4}'),
    ('2030-01-02 10:10:00+00', 1, 193, '0000000000000000000000000000000c', 19, '{5}', NULL),
    ('2030-01-02 10:11:00+00', 1, 209, '0000000000000000000000000000000d', 19, '{5}', NULL),
    ('2030-01-02 10:12:00+00', 1, 225, '0000000000000000000000000000000e', 19, '{5}', NULL),
    ('2030-01-02 10:13:00+00', 1, 241, '0000000000000000000000000000000f', 19, '{5}', NULL),
    ('2030-01-02 10:14:00+00', 1, 257, '00000000000000000000000000000010', 19, '{5}', NULL),
    ('2030-01-02 10:15:00+00', 1, 273, '00000000000000000000000000000011', 19, '{5}', NULL),
    ('2030-01-02 10:20:00+00', 1, 289, '00000000000000000000000000000012', 19, '{3}', NULL),
    ('2030-01-02 10:40:00+00', 2, 305, '00000000000000000000000000000013', 19, '{7}', '{20}'),
    ('2030-01-02 10:41:00+00', 2, 321, '00000000000000000000000000000014', 19, '{5}', NULL),
    ('2030-01-02 10:25:00+00', 1, NULL, NULL, 19, '{6}', '{5}');
INSERT INTO traceprof.trigger_samples (bucket, source_id, span_id, trace_id, hz, stacks, counts,
                                       trigger_id) VALUES
    ('2030-01-02 10:05:00+00', 1, 177, '0000000000000000000000000000000b', 99, '{1,3}', '{110,5}',
     'default/slow-payments');
