-- GPU time per request (015, sql/api/gpu.sql, gpu_cohorts.sql):
-- trace_gpu_kernels, trace_gpu_stacks, trace_gpu_folded, the gpu_ms of
-- trace_time_breakdown and compare_gpu_cohorts, on data whose answers are
-- worked out by hand below. Samples at 1000 Hz are 1 ms of CPU each.
SET TimeZone = 'UTC';
SELECT traceprof.create_partitions('2030-03-01', '2030-03-02');

-- the table's checks
SELECT t.raises($$INSERT INTO traceprof.gpu VALUES ('2030-03-01', 1, 1, NULL, '{1,2}', '{1}', '{1,1}')$$,
                'gpu_check', 'stacks and launches of different lengths refused');
SELECT t.raises($$INSERT INTO traceprof.gpu VALUES ('2030-03-01', 1, 1, NULL, '{1}', '{0}', '{1}')$$,
                'gpu_launches_check', 'zero launches refused');
SELECT t.ok('gpu' = ANY (traceprof._partitioned_tables()), 'the partition manager covers gpu');

INSERT INTO traceprof.sources (source_id, service, node) VALUES
    (1, 'frontend', 'node-a'), (2, 'infer-svc', 'node-b'), (3, 'infer-svc', 'node-c');
-- a kernel's frame: name '[gpu] ' || kernel, module '[gpu]'
INSERT INTO traceprof.functions (function_id, name, module, kind) VALUES
    (1, 'main', 'frontend', 0), (2, 'handle', 'frontend', 0), (3, 'call_infer', 'frontend', 0),
    (11, 'main', 'infer', 0), (12, 'serve', 'infer', 0), (13, 'forward', 'infer', 0),
    (14, 'cudaLaunchKernel', 'libcudart.so.12', 0),
    (31, '[gpu] gemm_kernel', '[gpu]', 0), (32, '[gpu] softmax', '[gpu]', 0),
    (33, '[gpu] layernorm', '[gpu]', 0), (35, '[gpu] resize', '[gpu]', 0);
INSERT INTO traceprof.frames (frame_id, function_id) SELECT function_id + 100, function_id FROM traceprof.functions;
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES
    (1, '{101,102}'),                   -- frontend main;handle
    (11, '{111,112,113}'),              -- infer main;serve;forward
    (21, '{111,112,113,114,131}'),      -- ...;forward;cudaLaunchKernel;[gpu] gemm_kernel
    (22, '{111,112,113,114,132}'),      -- ...;forward;cudaLaunchKernel;[gpu] softmax
    (23, '{131}'),                      -- [gpu] gemm_kernel alone: no CPU stack taken
    (24, '{111,112,114,133}'),          -- main;serve;cudaLaunchKernel;[gpu] layernorm
    (25, '{101,102,103,135}');          -- frontend main;handle;call_infer;[gpu] resize

-- Trace 1 (t.tid(1)):
--   frontend  a1 root, 100 ms; CPU 10 samples on stack 1 = 10 ms;
--             GPU: resize 2 launches, 3 ms (stack 25)
--   infer-svc b2 parent a1, 80 ms; CPU 30 samples on stack 11 = 30 ms;
--             GPU in two rows: gemm 3 + 2 launches 30 + 20 ms (stack 21),
--             softmax 1 launch 2 ms (22), gemm 1 launch 10 ms without its
--             CPU stack (23), layernorm 4 launches 4.0005 ms (24):
--             66.0005 ms on the GPU in a span of 80
--   infer-svc rows without a span (source 3): softmax 1 launch 1 ms
-- Per kernel: gemm 6 launches 60 ms, layernorm 4 / 4.0005, resize 2 / 3,
-- softmax 2 / 3; 70.0005 ms in all.
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, parent_span_id, route_id,
                                duration_us, status_code) VALUES
    ('2030-03-01 10:00:00+00', 1, t.tid(1), x'a1'::int, NULL, 0, 100000, 200),
    ('2030-03-01 10:00:00.01+00', 2, t.tid(1), x'b2'::int, x'a1'::int, 0, 80000, 200);
INSERT INTO traceprof.samples (bucket, source_id, span_id, trace_id, hz, stacks, counts) VALUES
    ('2030-03-01 10:00:00+00', 1, x'a1'::int, t.tid(1), 1000, '{1}', '{10}'),
    ('2030-03-01 10:00:00+00', 2, x'b2'::int, t.tid(1), 1000, '{11}', '{30}');
INSERT INTO traceprof.gpu (bucket, source_id, span_id, trace_id, stacks, launches, gpu_ns) VALUES
    ('2030-03-01 10:00:00+00', 1, x'a1'::int, t.tid(1), '{25}', '{2}', '{3000000}'),
    ('2030-03-01 10:00:00+00', 2, x'b2'::int, t.tid(1), '{21,22,21}', '{3,1,2}', '{30000000,2000000,20000000}'),
    ('2030-03-01 10:00:01+00', 2, x'b2'::int, t.tid(1), '{23,24}', '{1,4}', '{10000000,4000500}'),
    ('2030-03-01 10:00:01+00', 3, NULL, t.tid(1), '{22}', '{1}', '{1000000}'),
    -- another trace's row: not counted
    ('2030-03-01 10:00:00+00', 2, x'b2'::int, t.tid(2), '{21}', '{7}', '{777000000}');

-- trace_gpu_kernels ----------------------------------------------------------------
SELECT t.eq((SELECT string_agg(concat_ws('|', kernel, launches, round(gpu_ms::numeric, 4),
                                         round(gpu_pct::numeric, 3)), E'\n' ORDER BY i)
               FROM traceprof.trace_gpu_kernels('00000000000000000000000000000001')
                    WITH ORDINALITY AS x(kernel, launches, gpu_ms, gpu_pct, i)),
            concat_ws(E'\n',
                      'gemm_kernel|6|60.0000|' || round(100 * 60 / 70.0005, 3),
                      'layernorm|4|4.0005|' || round(100 * 4.0005 / 70.0005, 3),
                      'resize|2|3.0000|' || round(100 * 3 / 70.0005, 3),
                      'softmax|2|3.0000|' || round(100 * 3 / 70.0005, 3)),
            'per kernel across services: launches, GPU ms, share of the trace''s GPU time; by time, then name');
SELECT t.eq((SELECT sum(launches)::bigint FROM traceprof.trace_gpu_kernels('00000000000000000000000000000001')),
            14::bigint, 'every launch counted once');
SELECT t.eq((SELECT string_agg(kernel || '|' || launches || '|' || round(gpu_pct::numeric, 1), ' ')
               FROM traceprof.trace_gpu_kernels('00000000000000000000000000000001', 'frontend')),
            'resize|2|100.0', 'one service: its kernels, its share');
SELECT t.eq((SELECT count(*) FROM traceprof.trace_gpu_kernels('000000000000000000000000000000ff')), 0::bigint,
            'unknown trace: empty');

-- trace_gpu_stacks ------------------------------------------------------------------
SELECT t.eq((SELECT string_agg(concat_ws('|', service, launch_stack, kernel, launches, round(gpu_ms::numeric, 4)),
                               E'\n' ORDER BY i)
               FROM traceprof.trace_gpu_stacks('00000000000000000000000000000001')
                    WITH ORDINALITY AS x(service, launch_stack, kernel, launches, gpu_ms, i)),
            E'infer-svc|main;serve;forward;cudaLaunchKernel|gemm_kernel|5|50.0000\n'
             'infer-svc|[no stack]|gemm_kernel|1|10.0000\n'
             'infer-svc|main;serve;cudaLaunchKernel|layernorm|4|4.0005\n'
             'frontend|main;handle;call_infer|resize|2|3.0000\n'
             'infer-svc|main;serve;forward;cudaLaunchKernel|softmax|2|3.0000',
            'per launching CPU stack (without the kernel frame) and kernel; no CPU stack reads [no stack]');

-- trace_gpu_folded ------------------------------------------------------------------
SELECT t.eq((SELECT string_agg(stack || ' ' || launches || ' ' || us || ' ' || ns, E'\n' ORDER BY i)
               FROM traceprof.trace_gpu_folded('00000000000000000000000000000001')
                    WITH ORDINALITY AS x(service, stack, launches, us, ns, i)),
            E'frontend;main;handle;call_infer;[gpu] resize 2 3000 3000000\n'
             'infer-svc;[gpu] gemm_kernel 1 10000 10000000\n'
             'infer-svc;main;serve;cudaLaunchKernel;[gpu] layernorm 4 4001 4000500\n'
             'infer-svc;main;serve;forward;cudaLaunchKernel;[gpu] gemm_kernel 5 50000 50000000\n'
             'infer-svc;main;serve;forward;cudaLaunchKernel;[gpu] softmax 2 3000 3000000',
            'folded GPU stacks ending in the kernel frame, µs rounded once per stack, exact ns');
SELECT t.eq((SELECT count(*) FROM traceprof.trace_gpu_folded('00000000000000000000000000000001', 'infer-svc')),
            4::bigint, 'folded: one service');

-- trace_time_breakdown: gpu_ms next to the parts, not one of them --------------------
SELECT t.eq((SELECT string_agg(concat_ws('|', service, coalesce(span_id, '-'), coalesce(span_ms::text, '-'),
                                         round(cpu_ms::numeric, 1), coalesce(round(other_ms::numeric, 1)::text, '-'),
                                         round(gpu_ms::numeric, 4)), E'\n' ORDER BY i)
               FROM traceprof.trace_time_breakdown('00000000000000000000000000000001')
                    WITH ORDINALITY AS x(service, span_id, parent_span_id, start_time, span_ms, cpu_ms,
                                         blocked_ms, runq_ms, other_ms, excess_ms, top_function,
                                         blocked_by, gpu_ms, i)),
            E'frontend|00000000000000a1|100|10.0|90.0|3.0000\n'
             'infer-svc|00000000000000b2|80|30.0|50.0|66.0005\n'
             'infer-svc|-|-|0.0|-|1.0000',
            'breakdown: GPU ms per span (other unchanged: GPU time overlaps); rows without a span too');
SELECT t.eq((SELECT gpu_ms FROM traceprof.trace_time_breakdown('00000000000000000000000000000002')),
            777::float8, 'GPU rows only: a row of their source''s service');

-- bad input --------------------------------------------------------------------------
SELECT t.raises($$SELECT * FROM traceprof.trace_gpu_kernels('xyz')$$, 'invalid trace id "xyz"', 'malformed id');
SELECT t.raises($$SELECT * FROM traceprof.trace_gpu_kernels(NULL)$$,
                'trace_gpu_kernels: trace_id must not be null', 'NULL id');
SELECT t.raises($$SELECT * FROM traceprof.trace_gpu_stacks('')$$,
                'trace_gpu_stacks: trace_id must not be null or empty', 'empty id');
SELECT t.raises($$SELECT * FROM traceprof.trace_gpu_folded('00000000000000000000000000000001', '')$$,
                'trace_gpu_folded: service must not be empty', 'empty service');
SELECT t.raises($$SELECT * FROM traceprof.trace_gpu_folded(repeat('f', 100000))$$,
                'invalid trace id', 'a huge id');
SELECT t.raises($$SELECT * FROM traceprof.trace_gpu_folded('00000000000000000000000000000000')$$,
                'invalid trace id', 'the all-zero id');

-- hostile names and missing stacks: a kernel named with ';' and a line break
-- is one frame; a stack missing from the dictionary reads [unknown]; a leaf
-- that is not a [gpu] frame names no kernel
INSERT INTO traceprof.functions (function_id, name, module, kind) VALUES
    (36, E'[gpu] evil;kernel\nname', '[gpu]', 0);
INSERT INTO traceprof.frames (frame_id, function_id) VALUES (136, 36);
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES (26, '{111,136}'), (27, '{111,112}');
INSERT INTO traceprof.gpu (bucket, source_id, span_id, trace_id, stacks, launches, gpu_ns) VALUES
    ('2030-03-01 11:00:00+00', 2, 5, t.tid(5), '{26,999,27}', '{1,2,3}', '{5000,6000,7000}');
SELECT t.eq((SELECT string_agg(kernel || '|' || launches, ' ' ORDER BY kernel COLLATE "C")
               FROM traceprof.trace_gpu_kernels('00000000000000000000000000000005')),
            '[unknown]|5 evil:kernel name|1', 'kernel names made safe; unknown stacks and leaves');
SELECT t.eq((SELECT string_agg(launch_stack || '|' || kernel, ' ' ORDER BY launch_stack COLLATE "C", kernel COLLATE "C")
               FROM traceprof.trace_gpu_stacks('00000000000000000000000000000005')),
            '[unknown]|[unknown] main|[unknown] main|evil:kernel name',
            'launch stacks: the missing stack [unknown], a non-kernel leaf''s caller kept');
SELECT t.eq((SELECT string_agg(stack || ' ' || ns, E'\n' ORDER BY stack COLLATE "C")
               FROM traceprof.trace_gpu_folded('00000000000000000000000000000005')),
            E'infer-svc;[unknown] 6000\ninfer-svc;main;[gpu] evil:kernel name 5000\ninfer-svc;main;serve 7000',
            'folded: one frame per kernel name, [unknown] for a missing stack');

-- compare_gpu_cohorts ----------------------------------------------------------------
-- infer-svc from 13:00: cohort a (>= 500 ms) S1, S2; cohort b (< 500 ms)
-- F1, F2 and F3 (no GPU rows); GPU ms per request:
--   S1 gemm 300 softmax 100, S2 gemm 500 softmax 100,
--   F1 gemm 60 softmax 40, F2 gemm 40 softmax 60.
-- a: t = {400, 600}, gemm f = {300, 500}: share 0.8, residuals -20, 20,
--    variance 2 * 800 / 1000^2 = 0.0016; b: t = {100, 100}, gemm {60, 40}:
--    share 0.5, residuals 10, -10, variance 2 * 200 / 200^2 = 0.01;
--    z = 0.3 / sqrt(0.0116) = 2.78543; softmax the mirror image.
-- Per request: gemm a 800 / 2 = 400, b 100 / 3 = 33.333 (it grew);
-- softmax a 100, b 33.333. S1's off-CPU row is no GPU time.
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, parent_span_id, route_id,
                                duration_us, status_code) VALUES
    ('2030-03-01 13:00:00+00', 2, t.tid(11), 11, NULL, 0, 800000, 200),
    ('2030-03-01 13:00:01+00', 3, t.tid(12), 12, NULL, 0, 900000, 200),
    ('2030-03-01 13:00:02+00', 2, t.tid(21), 21, NULL, 0, 100000, 200),
    ('2030-03-01 13:00:03+00', 2, t.tid(22), 22, NULL, 0, 120000, 200),
    ('2030-03-01 13:00:04+00', 2, t.tid(23), 23, NULL, 0, 110000, 200);
INSERT INTO traceprof.gpu (bucket, source_id, span_id, trace_id, stacks, launches, gpu_ns) VALUES
    ('2030-03-01 13:00:00+00', 2, 11, t.tid(11), '{21,22}', '{3,1}', '{300000000,100000000}'),
    ('2030-03-01 13:00:01+00', 3, 12, t.tid(12), '{21,23,22}', '{4,1,1}', '{400000000,100000000,100000000}'),
    ('2030-03-01 13:00:02+00', 2, 21, t.tid(21), '{21,22}', '{1,1}', '{60000000,40000000}'),
    ('2030-03-01 13:00:03+00', 2, 22, t.tid(22), '{22,21}', '{2,1}', '{60000000,40000000}'),
    -- frontend's source: not infer-svc's time
    ('2030-03-01 13:00:02+00', 1, 21, t.tid(21), '{25}', '{1}', '{999000000}');
INSERT INTO traceprof.offcpu (bucket, source_id, span_id, trace_id, kind, stacks, us) VALUES
    ('2030-03-01 13:00:00+00', 2, 11, t.tid(11), 1, '{11}', '{500000}');
SELECT t.eq((SELECT string_agg(concat_ws('|', kernel, round(a_gpu_ms::numeric, 1), round(b_gpu_ms::numeric, 1),
                                         round(a_ms_per_request::numeric, 3), round(b_ms_per_request::numeric, 3),
                                         round(a_share::numeric, 3), round(b_share::numeric, 3),
                                         round(delta::numeric, 3), round(z::numeric, 4)), E'\n' ORDER BY i)
               FROM traceprof.compare_gpu_cohorts('infer-svc', '2030-03-01 12:59', '2030-03-01 13:10',
                                                  '{"min_duration": "500ms"}', '{"max_duration": "500ms"}')
                    WITH ORDINALITY AS x(kernel, a_gpu_ms, b_gpu_ms, a_ms_per_request, b_ms_per_request,
                                         a_share, b_share, delta, z, p_value, i)),
            concat_ws(E'\n',
                      'gemm_kernel|800.0|100.0|400.000|33.333|0.800|0.500|0.300|' || round(0.3 / sqrt(0.0116), 4),
                      'softmax|200.0|100.0|100.000|33.333|0.200|0.500|-0.300|' || round(-0.3 / sqrt(0.0116), 4)),
            'cohorts by GPU time per kernel: totals, means per request (all requests), shares, z');
SELECT t.near((SELECT p_value FROM traceprof.compare_gpu_cohorts('infer-svc', '2030-03-01 12:59', '2030-03-01 13:10',
                                   '{"min_duration": "500ms"}', '{"max_duration": "500ms"}') LIMIT 1),
              traceprof.normal_p_two_sided(0.3 / sqrt(0.0116)), 1e-12, 'p-value of z');
-- the other metrics do not read GPU rows
SELECT t.eq((SELECT count(*) FROM traceprof.compare_offcpu_cohorts('infer-svc', '2030-03-01 12:59', '2030-03-01 13:10',
                                   '{"min_duration": "500ms"}', '{"max_duration": "500ms"}')
              WHERE function ~ 'gemm|softmax'), 0::bigint, 'compare_offcpu_cohorts: no kernels');
SELECT t.eq((SELECT count(*) FROM traceprof.compare_gpu_cohorts('infer-svc', '2030-03-01 14:00', '2030-03-01 15:00',
                                   '{}', '{}')), 0::bigint, 'no requests: no rows');
SELECT t.raises($$SELECT * FROM traceprof.compare_gpu_cohorts('infer-svc', '2030-03-01', '2030-03-02',
                                   '{"slow": true}', '{}')$$, 'unknown cohort key "slow" in cohort_a', 'bad cohort key');
SELECT t.raises($$SELECT * FROM traceprof.compare_gpu_cohorts('nope', '2030-03-01', '2030-03-02', '{}', '{}')$$,
                'unknown service "nope"', 'unknown service');
SELECT t.raises($$SELECT * FROM traceprof.compare_gpu_cohorts(NULL, '2030-03-01', '2030-03-02', '{}', '{}')$$,
                'need a time range', 'NULL service');
SELECT t.raises($$SELECT * FROM traceprof.compare_gpu_cohorts('infer-svc', '2030-03-02', '2030-03-01', '{}', '{}')$$,
                'need a time range', 'reversed range');
