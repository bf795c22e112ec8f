-- Off-CPU rows on top of tests/cli/dataset.sql (loaded first), for the
-- traceprof command's off-CPU views (test_traceprof_offcpu.sh). The
-- expected numbers are worked out here by hand; one 19 Hz sample is
-- 1000/19 = 52.631579 ms of CPU.
--
--   trace ...0a: checkout-svc span 161, 5700 ms: CPU 2 samples = 105.3 ms;
--     blocked 5500 ms in recv <- http_call (stack 22); runqueue 20 ms
--     without a stack; other 5700 - 105.263 - 5500 - 20 = 74.7 ms.
--     payment-svc span 162, 5500 ms: CPU 84 samples = 4421.1 ms; blocked
--     900 ms in pthread_mutex_lock <- ledger_append (stack 21); runqueue
--     30 ms on validateSignature's stack (1); other 5500 - 4421.053 - 930
--     = 148.9 ms.
--   slow payments (> 1s: ...0a, ...0b, ...0j) block in pthread_mutex_lock
--     (900, 300, 400 ms); the fast ones ...0c-...0h in recv (10 ms each).
--   ...0i (503) has no off-CPU rows.
SET TimeZone = 'UTC';
INSERT INTO traceprof.functions (function_id, name, module, kind) VALUES
    (21, 'pthread_mutex_lock', 'libc.so.6', 0), (22, 'ledger_append', 'payment', 0),
    (23, 'recv', 'libc.so.6', 0), (24, 'http_call', 'checkout', 0), (25, 'schedule', '[kernel]', 1);
INSERT INTO traceprof.frames (frame_id, function_id) VALUES
    (210, 21), (220, 22), (230, 23), (240, 24), (250, 25);
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES
    (21, '{10,20,220,210,250}'),    -- main;handlePayment;ledger_append;pthread_mutex_lock;schedule
    (22, '{110,120,240,230,250}'),  -- main;handleCheckout;http_call;recv;schedule
    (23, '{10,20,230,250}');        -- main;handlePayment;recv;schedule
INSERT INTO traceprof.offcpu (bucket, source_id, span_id, trace_id, kind, stacks, us) VALUES
    ('2030-01-02 10:00:00+00', 3, 161, '0000000000000000000000000000000a', 1, '{22}', '{5500000}'),
    ('2030-01-02 10:00:00+00', 3, 161, '0000000000000000000000000000000a', 2, '{0}', '{20000}'),
    ('2030-01-02 10:00:00+00', 1, 162, '0000000000000000000000000000000a', 1, '{21}', '{900000}'),
    ('2030-01-02 10:00:00+00', 1, 162, '0000000000000000000000000000000a', 2, '{1}', '{30000}'),
    ('2030-01-02 10:05:00+00', 1, 177, '0000000000000000000000000000000b', 1, '{21}', '{300000}'),
    ('2030-01-02 10:40:00+00', 2, 305, '00000000000000000000000000000013', 1, '{21}', '{400000}'),
    ('2030-01-02 10:10:00+00', 1, 193, '0000000000000000000000000000000c', 1, '{23}', '{10000}'),
    ('2030-01-02 10:11:00+00', 1, 209, '0000000000000000000000000000000d', 1, '{23}', '{10000}'),
    ('2030-01-02 10:12:00+00', 1, 225, '0000000000000000000000000000000e', 1, '{23}', '{10000}'),
    ('2030-01-02 10:13:00+00', 1, 241, '0000000000000000000000000000000f', 1, '{23}', '{10000}'),
    ('2030-01-02 10:14:00+00', 1, 257, '00000000000000000000000000000010', 1, '{23}', '{10000}'),
    ('2030-01-02 10:15:00+00', 1, 273, '00000000000000000000000000000011', 1, '{23}', '{10000}');
