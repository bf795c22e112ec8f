-- Off-CPU time per request (013, sql/api/offcpu.sql): trace_time_breakdown,
-- trace_offcpu_folded and the breakdown and verdict of trace_summary, on a
-- trace whose answers are worked out by hand below. Samples at 1000 Hz are
-- 1 ms of CPU each, at 100 Hz 10 ms.
SET TimeZone = 'UTC';
SELECT traceprof.create_partitions('2030-03-01', '2030-03-02');

-- the table's checks
SELECT t.raises($$INSERT INTO traceprof.offcpu VALUES ('2030-03-01', 1, 1, NULL, 3, '{1}', '{1}')$$,
                'offcpu_kind_check', 'kind 3 refused');
SELECT t.raises($$INSERT INTO traceprof.offcpu VALUES ('2030-03-01', 1, 1, NULL, 1, '{1,2}', '{1}')$$,
                'offcpu_check', 'stacks and us of different lengths refused');
SELECT t.raises($$INSERT INTO traceprof.offcpu VALUES ('2030-03-01', 1, 1, NULL, 1, '{1}', '{0}')$$,
                'offcpu_us_check', 'a zero duration refused');
SELECT t.raises($$INSERT INTO traceprof.offcpu VALUES ('2030-03-01', 1, 1, NULL, 1, '{}', '{}')$$,
                'offcpu_stacks_check', 'no stacks refused');
SELECT t.ok('offcpu' = ANY (traceprof._partitioned_tables()), 'the partition manager covers offcpu');
SELECT t.ok(to_regclass('traceprof.offcpu_p20300301') IS NOT NULL, 'create_partitions made its partition');

INSERT INTO traceprof.sources (source_id, service, node) VALUES
    (1, 'frontend', 'node-a'), (2, 'payment-svc', 'node-b'), (3, 'ledger', 'node-c');
-- kind 0 user code, 1 kernel
INSERT INTO traceprof.functions (function_id, name, module, kind) VALUES
    (1, 'main', 'frontend', 0), (2, 'handleRequest', 'frontend', 0), (3, 'render', 'frontend', 0),
    (4, 'http_call', 'frontend', 0),
    (11, 'main', 'payment', 0), (12, 'handlePayment', 'payment', 0), (13, 'validateSignature', 'payment', 0),
    (14, 'ledger_append', 'payment', 0), (15, 'audit_write', 'payment', 0),
    (41, 'pthread_mutex_lock', 'libc.so.6', 0), (42, '__lll_lock_wait', 'libc.so.6', 0),
    (43, 'recv', 'libc.so.6', 0), (44, 'fsync', 'libc.so.6', 0),
    (51, 'do_syscall_64', '[kernel]', 1), (52, 'futex_wait', '[kernel]', 1), (53, 'schedule', '[kernel]', 1),
    (61, 'main', 'ledger', 0), (62, 'ledger_sleep', 'ledger', 0), (63, '__nanosleep_helper', 'ledger', 0);
INSERT INTO traceprof.frames (frame_id, function_id) SELECT function_id + 100, function_id FROM traceprof.functions;
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES
    (1, '{101,102}'),                              -- main;handleRequest
    (2, '{101,102,103}'),                          -- main;handleRequest;render
    (3, '{101,102,104,143,151,153}'),              -- ...;http_call;recv;[k]do_syscall_64;schedule
    (11, '{111,112,113}'),                         -- main;handlePayment;validateSignature
    (13, '{111,112}'),                             -- main;handlePayment
    (14, '{111,112,114,141,142,151,152,153}'),     -- ...;ledger_append;pthread_mutex_lock;__lll_lock_wait;[k]...
    (15, '{111,112,115,144,151,153}'),             -- ...;audit_write;fsync;[k]...
    (16, '{111,112,114,141,151,152,153}'),         -- ...;ledger_append;pthread_mutex_lock;[k]...
    (21, '{161,162,163,151,153}'),                 -- one module: main;ledger_sleep;__nanosleep_helper;[k]...
    (22, '{151,153}');                             -- kernel frames only
INSERT INTO traceprof.routes (route_id, method, route) VALUES (1, 'GET', '/checkout'), (2, 'POST', '/pay');

-- Trace 1 (t.tid(1)):
--   frontend    a1 root, 1000 ms; CPU 100 Hz stack 2 x5 = 50 ms (render);
--               blocked in stack 3 900 ms (recv ← http_call); runqueue 20 ms
--               without a stack: other 1000 - 50 - 900 - 20 = 30 ms
--   payment-svc b2 parent a1, 934 ms; CPU 1000 Hz stack 11 x400 + stack 13
--               x24 = 424 ms (validateSignature 400); blocked: stack 14
--               300 ms + stack 16 180 ms (both pthread_mutex_lock ←
--               ledger_append: 480 ms), stack 15 6 ms (fsync ← audit_write),
--               4 ms without a stack = 490 ms; runqueue on stack 11 5 ms;
--               other 934 - 424 - 490 - 5 = 15 ms
--   ledger      c3 parent b2, 100 ms; no samples; blocked stack 21 150 ms
--               and stack 22 1 ms: 151 ms, more than the span (excess
--               51 ms, other clamped to 0)
--   ledger      -- off-CPU rows without a span: runqueue 2 ms (no stack)
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, parent_span_id, route_id,
                                duration_us, status_code) VALUES
    ('2030-03-01 10:00:00+00', 1, t.tid(1), x'a1'::int, NULL, 1, 1000000, 200),
    ('2030-03-01 10:00:00.03+00', 2, t.tid(1), x'b2'::int, x'a1'::int, 2, 934000, 200),
    ('2030-03-01 10:00:00.5+00', 3, t.tid(1), x'c3'::int, x'b2'::int, 0, 100000, 200);
INSERT INTO traceprof.samples (bucket, source_id, span_id, trace_id, hz, stacks, counts) VALUES
    ('2030-03-01 10:00:00+00', 1, x'a1'::int, t.tid(1), 100, '{2}', '{5}'),
    ('2030-03-01 10:00:00+00', 2, x'b2'::int, t.tid(1), 1000, '{11,13}', '{400,24}');
INSERT INTO traceprof.offcpu (bucket, source_id, span_id, trace_id, kind, stacks, us) VALUES
    ('2030-03-01 10:00:00+00', 1, x'a1'::int, t.tid(1), 1, '{3}', '{900000}'),
    ('2030-03-01 10:00:00+00', 1, x'a1'::int, t.tid(1), 2, '{0}', '{20000}'),
    ('2030-03-01 10:00:00+00', 2, x'b2'::int, t.tid(1), 1, '{14,15,0,14}', '{200000,6000,4000,100000}'),
    ('2030-03-01 10:00:01+00', 2, x'b2'::int, t.tid(1), 1, '{16}', '{180000}'),
    ('2030-03-01 10:00:00+00', 2, x'b2'::int, t.tid(1), 2, '{11}', '{5000}'),
    ('2030-03-01 10:00:00+00', 3, x'c3'::int, t.tid(1), 1, '{21,22}', '{150000,1000}'),
    ('2030-03-01 10:00:00+00', 3, NULL, t.tid(1), 2, '{0}', '{2000}'),
    -- another trace's row: not counted
    ('2030-03-01 10:00:00+00', 2, x'b2'::int, t.tid(2), 1, '{14}', '{777000}');

-- trace_time_breakdown ----------------------------------------------------------
CREATE FUNCTION pg_temp.rows(trace text) RETURNS text
LANGUAGE sql AS $$
    SELECT string_agg(concat_ws('|', service, coalesce(span_id, '-'), coalesce(round(span_ms::numeric, 1)::text, '-'),
                                round(cpu_ms::numeric, 1), round(blocked_ms::numeric, 1),
                                round(runq_ms::numeric, 1), coalesce(round(other_ms::numeric, 1)::text, '-'),
                                coalesce(round(excess_ms::numeric, 1)::text, '-'),
                                coalesce(top_function, '-'), blocked_by::text), E'\n' ORDER BY i)
      FROM traceprof.trace_time_breakdown(trace) WITH ORDINALITY AS x(service, span_id, parent_span_id, start_time,
                                                                      span_ms, cpu_ms, blocked_ms, runq_ms,
                                                                      other_ms, excess_ms, top_function,
                                                                      blocked_by, gpu_ms, i)
$$;
SELECT t.eq(pg_temp.rows('00000000000000000000000000000001'),
    E'frontend|00000000000000a1|1000.0|50.0|900.0|20.0|30.0|0.0|render|'
     '[{"ms": 900.0, "pct": 100.0, "caller": "http_call", "function": "recv"}]\n'
    'payment-svc|00000000000000b2|934.0|424.0|490.0|5.0|15.0|0.0|validateSignature|'
     '[{"ms": 480.0, "pct": 98.0, "caller": "ledger_append", "function": "pthread_mutex_lock"}, '
     '{"ms": 6.0, "pct": 1.2, "caller": "audit_write", "function": "fsync"}, '
     '{"ms": 4.0, "pct": 0.8, "caller": null, "function": "[no stack]"}]\n'
    'ledger|00000000000000c3|100.0|0.0|151.0|0.0|0.0|51.0|-|'
     '[{"ms": 150.0, "pct": 99.3, "caller": "main", "function": "ledger_sleep"}, '
     '{"ms": 1.0, "pct": 0.7, "caller": null, "function": "schedule"}]\n'
    'ledger|-|-|0.0|0.0|2.0|-|-|-|[]',
    'breakdown per span: blocked by function and caller, runqueue, other, the clamp shown as excess');
-- the parts add up to the span where nothing was clamped
SELECT t.near((SELECT cpu_ms + blocked_ms + runq_ms + other_ms - excess_ms
                 FROM traceprof.trace_time_breakdown('00000000000000000000000000000001')
                WHERE span_id = '00000000000000b2'), 934, 1e-9, 'cpu + blocked + runq + other = span');
SELECT t.near((SELECT cpu_ms + blocked_ms + runq_ms + other_ms - excess_ms
                 FROM traceprof.trace_time_breakdown('00000000000000000000000000000001')
                WHERE span_id = '00000000000000c3'), 100, 1e-9, 'with the clamp: the sum less excess = span');
SELECT t.eq((SELECT count(*) FROM traceprof.trace_time_breakdown('000000000000000000000000000000ff')), 0::bigint,
            'unknown trace: empty');

-- the blocking function rule, stack by stack
SELECT t.eq((SELECT string_agg(stack_id || '=' || function || '<' || coalesce(caller, '-'), ' ' ORDER BY stack_id)
               FROM traceprof._offcpu_blockers('{0,3,14,15,16,21,22,999}')),
            '0=[no stack]<- 3=recv<http_call 14=pthread_mutex_lock<ledger_append 15=fsync<audit_write '
            '16=pthread_mutex_lock<ledger_append 21=ledger_sleep<main 22=schedule<- 999=[unknown]<-',
            'blocking function: entry into the leaf module, its caller; one module: leaf-most public name');

-- trace_offcpu_folded ------------------------------------------------------------
SELECT t.eq((SELECT string_agg(stack || ' ' || us, E'\n' ORDER BY service, stack COLLATE "C")
               FROM traceprof.trace_offcpu_folded('00000000000000000000000000000001')),
    E'frontend;main;handleRequest;http_call;recv;do_syscall_64;schedule 900000\n'
    'ledger;do_syscall_64;schedule 1000\n'
    'ledger;main;ledger_sleep;__nanosleep_helper;do_syscall_64;schedule 150000\n'
    'payment-svc;[no stack] 4000\n'
    'payment-svc;main;handlePayment;audit_write;fsync;do_syscall_64;schedule 6000\n'
    'payment-svc;main;handlePayment;ledger_append;pthread_mutex_lock;__lll_lock_wait;do_syscall_64;futex_wait;schedule 300000\n'
    'payment-svc;main;handlePayment;ledger_append;pthread_mutex_lock;do_syscall_64;futex_wait;schedule 180000',
    'folded blocked stacks, root first, µs, the service as root frame');
SELECT t.eq((SELECT string_agg(stack || ' ' || us, E'\n' ORDER BY service, stack COLLATE "C")
               FROM traceprof.trace_offcpu_folded('00000000000000000000000000000001', 'runqueue')),
    E'frontend;[no stack] 20000\n'
    'ledger;[no stack] 2000\n'
    'payment-svc;main;handlePayment;validateSignature 5000',
    'folded runqueue stacks');
SELECT t.eq((SELECT count(*) FROM traceprof.trace_offcpu_folded('000000000000000000000000000000ff')), 0::bigint,
            'unknown trace: no folded stacks');

-- trace_summary ------------------------------------------------------------------
CREATE TEMP TABLE j AS SELECT traceprof.trace_summary('00000000000000000000000000000001') AS j;
SELECT t.eq((SELECT j->>'verdict' FROM j),
            'payment-svc: 934 ms span: 424 ms CPU in validateSignature, 490 ms blocked, 480 ms in '
            'pthread_mutex_lock ← ledger_append; '
            'frontend: 1000 ms span: 50 ms CPU in render, 900 ms blocked in recv ← http_call; '
            'ledger: 100 ms span: no CPU samples, 151 ms blocked, 150 ms in ledger_sleep ← main',
            'summary verdict names the dominant wait');
SELECT t.eq((SELECT j->'services'->0->'breakdown' FROM j),
            '{"span_ms": 934.0, "cpu_ms": 424.0, "blocked_ms": 490.0, "runq_ms": 5.0, "other_ms": 15.0,
              "excess_ms": 0.0,
              "blocked_by": [{"function": "pthread_mutex_lock", "caller": "ledger_append", "ms": 480.0},
                             {"function": "fsync", "caller": "audit_write", "ms": 6.0},
                             {"function": "[no stack]", "caller": null, "ms": 4.0}]}'::jsonb,
            'summary: per service breakdown');
SELECT t.eq((SELECT j->'services'->2->'breakdown'->>'runq_ms' FROM j), '2.0',
            'ledger: the runqueue time without a span counts for its service');
SELECT t.eq((SELECT (j->'service_spans'->1) - 'start' - 'hotspots' FROM j),
            '{"service": "payment-svc", "span_id": "00000000000000b2", "parent_span_id": "00000000000000a1",
              "method": "POST", "route": "/pay", "status": 200, "span_ms": 934.000, "cpu_ms": 424.0,
              "cpu_pct": 45.4, "verdict": "mixed", "blocked_ms": 490.0, "runq_ms": 5.0, "other_ms": 15.0,
              "excess_ms": 0.0,
              "blocked_by": [{"ms": 480.0, "pct": 98.0, "caller": "ledger_append", "function": "pthread_mutex_lock"},
                             {"ms": 6.0, "pct": 1.2, "caller": "audit_write", "function": "fsync"},
                             {"ms": 4.0, "pct": 0.8, "caller": null, "function": "[no stack]"}]}'::jsonb,
            'summary: per span breakdown');
SELECT t.eq((SELECT jsonb_array_length(j->'service_spans') FROM j), 4, 'the span-less off-CPU row is listed');

-- a wait for a CPU longer than the blocked time; one function holding all of it
SELECT t.eq(traceprof._service_wait_verdict('s', 1, 100, 10, 'f', 20, 30, 'g ← h', 20),
            's: 100 ms span: 10 ms CPU in f, 30 ms waiting for a CPU', 'runqueue dominant');
SELECT t.eq(traceprof._service_wait_verdict('s', 2, 100, 0, NULL, 20, 0, NULL, NULL),
            's: 2 spans, 100 ms: no CPU samples, 20 ms blocked', 'blocked without a named function');
SELECT t.eq(traceprof._service_wait_verdict('s', NULL, NULL, 5, 'f', 0, 0, NULL, NULL),
            's: no span: 5 ms CPU in f', 'no wait');

-- a trace without off-CPU rows: no breakdown keys, the verdict of before
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, parent_span_id, route_id,
                                duration_us, status_code) VALUES
    ('2030-03-01 11:00:00+00', 2, t.tid(3), x'b3'::int, NULL, 2, 934000, 200);
INSERT INTO traceprof.samples (bucket, source_id, span_id, trace_id, hz, stacks, counts) VALUES
    ('2030-03-01 11:00:00+00', 2, x'b3'::int, t.tid(3), 1000, '{11,13}', '{400,24}');
SELECT t.eq(traceprof.trace_summary('00000000000000000000000000000003')->>'verdict',
            'payment-svc: 934 ms span, validateSignature 94 % (400 ms CPU)', 'no off-CPU rows: verdict as before');
SELECT t.ok(NOT (traceprof.trace_summary('00000000000000000000000000000003')::text ~ 'breakdown|blocked'),
            'no off-CPU rows: no breakdown keys');
SELECT t.eq((SELECT blocked_ms + runq_ms FROM traceprof.trace_time_breakdown('00000000000000000000000000000003')),
            0::float8, 'no off-CPU rows: zero off-CPU time');
SELECT t.eq((SELECT round(other_ms) FROM traceprof.trace_time_breakdown('00000000000000000000000000000003')),
            510::float8, 'no off-CPU rows: the rest is other');

-- bad input --------------------------------------------------------------------
SELECT t.raises($$SELECT * FROM traceprof.trace_time_breakdown('xyz')$$, 'invalid trace id "xyz"', 'malformed id');
SELECT t.raises($$SELECT * FROM traceprof.trace_time_breakdown(NULL)$$,
                'trace_time_breakdown: trace_id must not be null', 'NULL id');
SELECT t.raises($$SELECT * FROM traceprof.trace_offcpu_folded('xyz')$$, 'invalid trace id "xyz"',
                'folded: malformed id');
SELECT t.raises($$SELECT * FROM traceprof.trace_offcpu_folded('00000000000000000000000000000001', 'cpu')$$,
                'trace_offcpu_folded: unknown off-CPU kind ''cpu''', 'unknown kind');
SELECT t.raises($$SELECT * FROM traceprof.trace_offcpu_folded('00000000000000000000000000000001', NULL)$$,
                'trace_offcpu_folded: unknown off-CPU kind NULL', 'NULL kind');
SELECT t.raises($$SELECT * FROM traceprof.trace_offcpu_folded('00000000000000000000000000000001', 'Blocked')$$,
                'unknown off-CPU kind', 'kinds are exact');

-- a trace with off-CPU rows only (its spans and samples not stored yet)
INSERT INTO traceprof.offcpu (bucket, source_id, span_id, trace_id, kind, stacks, us) VALUES
    ('2030-03-01 12:00:00+00', 2, x'b4'::int, t.tid(4), 1, '{14}', '{70000}');
SELECT t.eq(pg_temp.rows('00000000000000000000000000000004'),
            'payment-svc|00000000000000b4|-|0.0|70.0|0.0|-|-|-|'
            '[{"ms": 70.0, "pct": 100.0, "caller": "ledger_append", "function": "pthread_mutex_lock"}]',
            'off-CPU rows only: a row of their source''s service, no span');
SELECT t.eq(traceprof.trace_summary('00000000000000000000000000000004')->>'verdict',
            'payment-svc: no span: no CPU samples, 70 ms blocked in pthread_mutex_lock ← ledger_append',
            'off-CPU rows only: the summary names the wait');

-- compare_offcpu_cohorts ----------------------------------------------------------
-- payment-svc from 13:00: cohort a (>= 500 ms) A1, A2 and A3 (no off-CPU
-- rows), cohort b (< 500 ms) B1, B2; blocked ms per request:
--   A1 lock 300 recv 100 (and 50 ms runqueue: not blocked), A2 lock 500 recv 100,
--   B1 lock 10 recv 90, B2 lock 30 recv 70.
-- a: t = {400, 600}, lock f = {300, 500}: share 0.8, residuals -20, 20,
--    variance 2 * 800 / 1000^2 = 0.0016; b: t = {100, 100}, lock {10, 30}:
--    share 0.2, residuals -10, 10, variance 2 * 200 / 200^2 = 0.01;
--    z = 0.6 / sqrt(0.0116) = 5.57086; recv the mirror image.
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, parent_span_id, route_id,
                                duration_us, status_code) VALUES
    ('2030-03-01 13:00:00+00', 2, t.tid(11), 11, NULL, 2, 800000, 200),
    ('2030-03-01 13:00:01+00', 2, t.tid(12), 12, NULL, 2, 900000, 200),
    ('2030-03-01 13:00:02+00', 2, t.tid(13), 13, NULL, 2, 600000, 200),
    ('2030-03-01 13:00:03+00', 2, t.tid(21), 21, NULL, 2, 200000, 200),
    ('2030-03-01 13:00:04+00', 2, t.tid(22), 22, NULL, 2, 300000, 200);
INSERT INTO traceprof.offcpu (bucket, source_id, span_id, trace_id, kind, stacks, us) VALUES
    ('2030-03-01 13:00:00+00', 2, 11, t.tid(11), 1, '{14,3}', '{300000,100000}'),
    ('2030-03-01 13:00:00+00', 2, 11, t.tid(11), 2, '{14}', '{50000}'),
    ('2030-03-01 13:00:01+00', 2, 12, t.tid(12), 1, '{14,3,14}', '{200000,100000,300000}'),
    ('2030-03-01 13:00:03+00', 2, 21, t.tid(21), 1, '{3,14}', '{90000,10000}'),
    ('2030-03-01 13:00:04+00', 2, 22, t.tid(22), 1, '{14,3}', '{30000,70000}');
SELECT t.eq((SELECT string_agg(concat_ws('|', function, round(a_blocked_ms::numeric, 1), round(b_blocked_ms::numeric, 1),
                                         round(a_ms_per_request::numeric, 3), round(b_ms_per_request::numeric, 3),
                                         round(a_share::numeric, 3), round(b_share::numeric, 3),
                                         round(delta::numeric, 3), round(z::numeric, 4)), E'\n' ORDER BY i)
               FROM traceprof.compare_offcpu_cohorts('payment-svc', '2030-03-01 12:59', '2030-03-01 13:10',
                                                     '{"min_duration": "500ms"}', '{"max_duration": "500ms"}')
                    WITH ORDINALITY AS x(function, a_blocked_ms, b_blocked_ms, a_ms_per_request, b_ms_per_request,
                                         a_share, b_share, delta, z, p_value, i)),
            E'pthread_mutex_lock|800.0|40.0|266.667|20.000|0.800|0.200|0.600|5.5709\n'
            'recv|200.0|160.0|66.667|80.000|0.200|0.800|-0.600|-5.5709',
            'cohorts by blocked time per blocking function: shares, means per request, z');
SELECT t.near((SELECT p_value FROM traceprof.compare_offcpu_cohorts('payment-svc', '2030-03-01 12:59', '2030-03-01 13:10',
                                   '{"min_duration": "500ms"}', '{"max_duration": "500ms"}') LIMIT 1),
              traceprof.normal_p_two_sided(0.6 / sqrt(0.0116)), 1e-12, 'p-value of z');
SELECT t.eq((SELECT count(*) FROM traceprof.compare_offcpu_cohorts('payment-svc', '2030-03-01 14:00', '2030-03-01 15:00',
                                   '{}', '{}')), 0::bigint, 'no requests: no rows');
SELECT t.raises($$SELECT * FROM traceprof.compare_offcpu_cohorts('payment-svc', '2030-03-01', '2030-03-02',
                                   '{"slow": true}', '{}')$$, 'unknown cohort key "slow" in cohort_a', 'bad cohort key');
SELECT t.raises($$SELECT * FROM traceprof.compare_offcpu_cohorts('nope', '2030-03-01', '2030-03-02', '{}', '{}')$$,
                'unknown service "nope"', 'unknown service');
SELECT t.raises($$SELECT * FROM traceprof.compare_offcpu_cohorts('payment-svc', '2030-03-02', '2030-03-01', '{}', '{}')$$,
                'need a time range', 'reversed range');

-- compare_wall_cohorts -------------------------------------------------------------
-- payment-svc from 16:00, CPU at 10 Hz (a sample = 100 ms), stack 11
-- main;handlePayment;validateSignature, 13 main;handlePayment, 14 through
-- ledger_append; runqueue time without a stack (0):
--   a (>= 500 ms): W1 CPU 2 samples on 11, blocked 300 on 14, runqueue 50: t = 550
--                  W2 CPU 4 samples on 11, blocked 100 on 14:              t = 500
--   b (< 500 ms):  V1 CPU 1 sample on 13, blocked 100 on 14:              t = 200
--                  V2 CPU 1 sample on 11, blocked 50 on 14:               t = 150
-- validateSignature: a 600 of 1050 (0.571), b 100 of 350 (0.286), 300 and 50 ms a request;
-- ledger_append: a 400 (0.381), b 150 (0.429); main: a 1000 (0.952: not the runqueue), b 350 (1).
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, parent_span_id, route_id,
                                duration_us, status_code) VALUES
    ('2030-03-01 16:00:00+00', 2, t.tid(31), 31, NULL, 2, 800000, 200),
    ('2030-03-01 16:00:01+00', 2, t.tid(32), 32, NULL, 2, 900000, 200),
    ('2030-03-01 16:00:02+00', 2, t.tid(41), 41, NULL, 2, 200000, 200),
    ('2030-03-01 16:00:03+00', 2, t.tid(42), 42, NULL, 2, 300000, 200);
INSERT INTO traceprof.samples (bucket, source_id, trace_id, span_id, hz, stacks, counts) VALUES
    ('2030-03-01 16:00:00+00', 2, t.tid(31), 31, 10, '{11}', '{2}'),
    ('2030-03-01 16:00:01+00', 2, t.tid(32), 32, 10, '{11}', '{4}'),
    ('2030-03-01 16:00:02+00', 2, t.tid(41), 41, 10, '{13}', '{1}'),
    ('2030-03-01 16:00:03+00', 2, t.tid(42), 42, 10, '{11}', '{1}');
INSERT INTO traceprof.offcpu (bucket, source_id, span_id, trace_id, kind, stacks, us) VALUES
    ('2030-03-01 16:00:00+00', 2, 31, t.tid(31), 1, '{14}', '{300000}'),
    ('2030-03-01 16:00:00+00', 2, 31, t.tid(31), 2, '{0}', '{50000}'),
    ('2030-03-01 16:00:01+00', 2, 32, t.tid(32), 1, '{14}', '{100000}'),
    ('2030-03-01 16:00:02+00', 2, 41, t.tid(41), 1, '{14}', '{100000}'),
    ('2030-03-01 16:00:03+00', 2, 42, t.tid(42), 1, '{14}', '{50000}');
SELECT t.eq((SELECT string_agg(concat_ws('|', function, round(a_ms::numeric, 1), round(b_ms::numeric, 1),
                                         round(a_ms_per_request::numeric, 1), round(b_ms_per_request::numeric, 1),
                                         round(a_share::numeric, 3), round(b_share::numeric, 3),
                                         round(delta::numeric, 3)), E'\n' ORDER BY function)
               FROM traceprof.compare_wall_cohorts('payment-svc', '2030-03-01 15:59', '2030-03-01 16:10',
                                                   '{"min_duration": "500ms"}', '{"max_duration": "500ms"}')
              WHERE function IN ('validateSignature', 'ledger_append', 'main')),
            E'ledger_append|400.0|150.0|200.0|75.0|0.381|0.429|-0.048\n'
            'main|1000.0|350.0|500.0|175.0|0.952|1.000|-0.048\n'
            'validateSignature|600.0|100.0|300.0|50.0|0.571|0.286|0.286',
            'cohorts by wall time: CPU, blocked and runqueue time through each function');
SELECT t.eq((SELECT function FROM traceprof.compare_wall_cohorts('payment-svc', '2030-03-01 15:59', '2030-03-01 16:10',
                                   '{"min_duration": "500ms"}', '{"max_duration": "500ms"}') LIMIT 1),
            'validateSignature', 'wall: the function with the largest share difference first');
SELECT t.raises($$SELECT * FROM traceprof.compare_wall_cohorts('nope', '2030-03-01', '2030-03-02', '{}', '{}')$$,
                'unknown service "nope"', 'wall: unknown service');
