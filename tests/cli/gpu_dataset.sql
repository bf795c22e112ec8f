-- GPU rows on top of tests/cli/dataset.sql (loaded first), for the
-- traceprof command's GPU views (test_traceprof_gpu.sh). The expected
-- numbers are worked out here by hand. A stack of traceprof.gpu ends in the
-- kernel's frame: function '[gpu] ' || kernel, module '[gpu]'.
--
--   trace ...0a: payment-svc span 162 launched sgemm_128x64 4 times from
--     validateSignature (120 ms on the GPU) and once without a CPU stack
--     (30 ms): 5 launches, 150 ms; softmax_fwd twice from handlePayment,
--     6 ms. checkout-svc span 161: decode_step 3 times, 9.0005 ms (9001 us
--     folded, rounded once). In all 10 launches, 165.0005 ms: sgemm 90.9 %,
--     decode_step 5.5 %, softmax_fwd 3.6 %.
--   payment-svc cohorts (10:00-11:00), GPU ms per request:
--     slow (> 1s: ...0a, ...0b, ...0j): sgemm 150, 200, 250 = 600 (200 a
--       request), softmax 6, 6, 5 = 17; 617 ms on the GPU;
--     fast (< 100ms: 8 requests, ...0c and ...0d with GPU rows): sgemm
--       20 + 20 = 40 (5 a request), softmax 6 + 6 = 12; 52 ms.
--     sgemm grew: share 600/617 = 97.2 % against 40/52 = 76.9 %.
--   ...99: GPU rows only (a short request no CPU sample fell in, its span
--     not stored): softmax_fwd once from handlePayment, 2.5 ms.
--   ...0i (503) and the other traces have no GPU rows.
SET TimeZone = 'UTC';
INSERT INTO traceprof.functions (function_id, name, module, kind) VALUES
    (31, 'cudaLaunchKernel', 'libcudart.so.12', 0),
    (41, '[gpu] sgemm_128x64', '[gpu]', 0), (42, '[gpu] softmax_fwd', '[gpu]', 0),
    (43, '[gpu] decode_step', '[gpu]', 0);
INSERT INTO traceprof.frames (frame_id, function_id) VALUES
    (310, 31), (410, 41), (420, 42), (430, 43);
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES
    (31, '{10,20,30,310,410}'),  -- main;handlePayment;validateSignature;cudaLaunchKernel;[gpu] sgemm_128x64
    (32, '{10,20,310,420}'),     -- main;handlePayment;cudaLaunchKernel;[gpu] softmax_fwd
    (33, '{410}'),               -- [gpu] sgemm_128x64 alone: the launch's CPU stack was not taken
    (34, '{110,120,310,430}'),   -- main;handleCheckout;cudaLaunchKernel;[gpu] decode_step
    (35, '{10,20,31,310,410}');  -- validateSignature of build bbbb2222;...;[gpu] sgemm_128x64
INSERT INTO traceprof.gpu (bucket, source_id, span_id, trace_id, stacks, launches, gpu_ns) VALUES
    ('2030-01-02 10:00:00+00', 1, 162, '0000000000000000000000000000000a', '{31,32}', '{4,2}',
     '{120000000,6000000}'),
    ('2030-01-02 10:00:01+00', 1, 162, '0000000000000000000000000000000a', '{33}', '{1}', '{30000000}'),
    ('2030-01-02 10:00:00+00', 3, 161, '0000000000000000000000000000000a', '{34}', '{3}', '{9000500}'),
    ('2030-01-02 10:05:00+00', 1, 177, '0000000000000000000000000000000b', '{31,32}', '{4,2}',
     '{200000000,6000000}'),
    ('2030-01-02 10:40:00+00', 2, 305, '00000000000000000000000000000013', '{35,32}', '{5,1}',
     '{250000000,5000000}'),
    ('2030-01-02 10:10:00+00', 1, 193, '0000000000000000000000000000000c', '{31,32}', '{1,2}',
     '{20000000,6000000}'),
    ('2030-01-02 10:11:00+00', 1, 209, '0000000000000000000000000000000d', '{32,31}', '{2,1}',
     '{6000000,20000000}'),
    ('2030-01-02 10:50:00+00', 1, 999, '00000000000000000000000000000099', '{32}', '{1}', '{2500000}');
