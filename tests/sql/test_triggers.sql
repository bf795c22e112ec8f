-- Raised (trigger) samples: per-trace functions read a source's
-- trigger_samples rows when it has any and its samples rows otherwise;
-- service and cohort queries read samples only; partitions cover both
-- tables; trigger_requests_v lists what a trigger collected. Every answer
-- is worked out by hand next to its data. One 99 Hz sample is 1000/99 ms of
-- CPU, one 19 Hz sample 1000/19 = 52.6315789474 ms.
SET TimeZone = 'UTC';
SELECT traceprof.create_partitions('2030-01-01', '2030-01-03');

INSERT INTO traceprof.sources (source_id, service, pod) VALUES
    (1, 'payment-svc', 'payment-1'), (2, 'checkout-svc', 'checkout-1'), (3, 'payment-svc', 'payment-2');
INSERT INTO traceprof.functions (function_id, name, module) VALUES
    (1, 'main', 'payment'), (2, 'handlePayment', 'payment'), (3, 'validateSignature', 'payment'),
    (11, 'main', 'checkout'), (12, 'handleCheckout', 'checkout');
INSERT INTO traceprof.frames (frame_id, function_id) VALUES (10, 1), (20, 2), (30, 3), (110, 11), (120, 12);
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES
    (1, '{10,20,30}'),   -- main;handlePayment;validateSignature
    (2, '{10,20}'),      -- main;handlePayment
    (11, '{110,120}');   -- main;handleCheckout
INSERT INTO traceprof.routes (route_id, method, route) VALUES (1, 'POST', '/pay'), (2, 'POST', '/checkout');

-- Trace T (t.tid(20)): checkout-svc span 1 (3000 ms) calls payment-svc span 2
-- on pod payment-1 (2500 ms, the claimed request) and span 3 on pod
-- payment-2 (500 ms, not raised: its agent's claim failed).
-- Trace U (t.tid(21)): payment-svc span 4 (100 ms), never claimed.
-- Base rows (samples, 19 Hz):
--   T span 1 checkout-1: stack 11 x19                 = 1000 ms
--   T span 2 payment-1:  stack 1 x20, stack 2 x18      = 1052.63 + 947.37 ms (the base subsample)
--   T span 3 payment-2:  stack 1 x5                    = 263.1578947368 ms
--   U span 4 payment-1:  stack 2 x19                   = 1000 ms
--   untagged payment-1:  stack 2 x19                   = 1000 ms
-- Raised rows (trigger_samples, 99 Hz), trigger 'default/slow-pay':
--   T span 2 payment-1: stack 1 x50 (10:00:00), stack 1 x49 + stack 2 x99 (10:00:01)
--     validateSignature 99 samples = 1000 ms, handlePayment self 99 = 1000 ms
-- and the same samples again under trigger 'default/zz-other', which also
-- claimed T: only the smallest trigger id counts, so they add nothing.
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, parent_span_id, route_id,
                                duration_us, status_code) VALUES
    ('2030-01-02 10:00:00+00', 2, t.tid(20), 1, NULL, 2, 3000000, 200),
    ('2030-01-02 10:00:00.1+00', 1, t.tid(20), 2, 1, 1, 2500000, 200),
    ('2030-01-02 10:00:01.7+00', 3, t.tid(20), 3, 1, 1, 500000, 200),
    ('2030-01-02 10:05:00+00', 1, t.tid(21), 4, NULL, 1, 100000, 200);
INSERT INTO traceprof.samples (bucket, source_id, span_id, trace_id, hz, stacks, counts) VALUES
    ('2030-01-02 10:00:00+00', 2, 1, t.tid(20), 19, '{11}', '{19}'),
    ('2030-01-02 10:00:01+00', 1, 2, t.tid(20), 19, '{1,2}', '{20,18}'),
    ('2030-01-02 10:00:02+00', 3, 3, t.tid(20), 19, '{1}', '{5}'),
    ('2030-01-02 10:05:00+00', 1, 4, t.tid(21), 19, '{2}', '{19}'),
    ('2030-01-02 10:03:00+00', 1, NULL, NULL, 19, '{2}', '{19}');

-- What the service and cohort queries answer before any raised row exists;
-- they must answer the same afterwards.
-- payment-svc 10:00-11:00: validateSignature 20 + 5 = 25 @19 = 1315.7894736842 ms,
-- handlePayment self 18 + 19 + 19 = 56 @19 = 2947.3684210526 ms; 81 samples.
CREATE TEMP TABLE before_top AS
SELECT * FROM traceprof.service_top_functions('payment-svc', '2030-01-02 10:00+00', '2030-01-02 11:00+00');
SELECT t.near((SELECT self_cpu_ms FROM before_top WHERE function = 'validateSignature'), 25 * 1000 / 19.0, 1e-9,
              'continuous profile: validateSignature from samples');
SELECT t.eq((SELECT total_samples FROM before_top WHERE function = 'main'), 81::bigint,
            'continuous profile: 81 samples');
-- Cohorts by duration: a = at least 1 s (span 1 checkout is another
-- service; payment-svc span 2, 2500 ms): 38 samples, 2000 ms.
-- b = under 1 s: spans 3 (5 samples, 263.16 ms) and 4 (19, 1000 ms).
CREATE TEMP TABLE before_sizes AS
SELECT * FROM traceprof.cohort_sizes('payment-svc', '2030-01-02 10:00+00', '2030-01-02 11:00+00',
                                     '{"min_duration": "1s"}', '{"max_duration": "1s"}', false);
SELECT t.eq((SELECT array_agg(array[requests, sampled_requests, samples] ORDER BY cohort) FROM before_sizes),
            '{{1,1,38},{2,2,24}}'::bigint[], 'cohort sizes from samples');
SELECT t.near((SELECT cpu_ms FROM before_sizes WHERE cohort = 'a'), 2000, 1e-9, 'cohort a CPU at 19 Hz');
SELECT t.near((SELECT cpu_ms FROM before_sizes WHERE cohort = 'b'), 24 * 1000 / 19.0, 1e-9, 'cohort b CPU');
CREATE TEMP TABLE before_cmp AS
SELECT * FROM traceprof.compare_cohorts('payment-svc', '2030-01-02 10:00+00', '2030-01-02 11:00+00',
                                        '{"min_duration": "1s"}', '{"max_duration": "1s"}', false);
SELECT t.near((SELECT a_cpu_ms FROM before_cmp WHERE function = 'validateSignature'), 20 * 1000 / 19.0, 1e-9,
              'cohort a validateSignature: 20 base samples');

-- Before the trigger rows, trace T reads its base rows: payment-svc
-- 20 + 18 + 5 = 43 samples.
SELECT t.eq((SELECT total_samples FROM traceprof.trace_profile('00000000000000000000000000000014', 'payment-svc')
              WHERE function = 'main'), 43::bigint, 'before: trace read from samples');

-- Two triggers claim T (and slow-pay a trace V that has no rows yet).
INSERT INTO traceprof.trace_profile_triggers (trigger_id, namespace, name, service, phase, max_requests, deadline)
VALUES ('default/slow-pay', 'default', 'slow-pay', 'payment-svc', 'Active', 2, now() + interval '1 hour'),
       ('default/zz-other', 'default', 'zz-other', NULL, 'Active', 5, now() + interval '1 hour');
SELECT t.eq(traceprof.claim_request('default/slow-pay', t.tid(20)), 1, 'claim T');
SELECT t.eq(traceprof.claim_request('default/slow-pay', t.tid(22)), 2, 'claim V');
SELECT t.eq(traceprof.claim_request('default/zz-other', t.tid(20)), 1, 'the other trigger claims T too');
INSERT INTO traceprof.trigger_samples (bucket, source_id, span_id, trace_id, hz, stacks, counts, trigger_id) VALUES
    ('2030-01-02 10:00:00+00', 1, 2, t.tid(20), 99, '{1}', '{50}', 'default/slow-pay'),
    ('2030-01-02 10:00:01+00', 1, 2, t.tid(20), 99, '{1,2}', '{49,99}', 'default/slow-pay'),
    ('2030-01-02 10:00:00+00', 1, 2, t.tid(20), 99, '{1}', '{50}', 'default/zz-other'),
    ('2030-01-02 10:00:01+00', 1, 2, t.tid(20), 99, '{1,2}', '{49,99}', 'default/zz-other');

-- trace_profile of T --------------------------------------------------------
-- payment-svc = payment-1 raised (99 + 99 at 99 Hz = 2000 ms) + payment-2 base
-- (5 at 19 Hz = 263.1578947368 ms): 203 samples, 2263.1578947368 ms.
--   validateSignature: 99 + 5 = 104 samples, 1000 + 263.1578947368 = 1263.1578947368 ms
--   handlePayment self: 99 samples, 1000 ms (the 18 base samples are not read)
-- checkout-svc has no raised rows: 19 samples at 19 Hz = 1000 ms.
CREATE TEMP TABLE p AS SELECT * FROM traceprof.trace_profile('00000000000000000000000000000014');
SELECT t.eq((SELECT self_samples FROM p WHERE function = 'validateSignature'), 104::bigint,
            'validateSignature: 99 raised + 5 base of the other pod');
SELECT t.near((SELECT self_cpu_ms FROM p WHERE function = 'validateSignature'), 1263.1578947368, 1e-8,
              'validateSignature CPU: 99 at 99 Hz + 5 at 19 Hz');
SELECT t.eq((SELECT self_samples FROM p WHERE function = 'handlePayment'), 99::bigint,
            'handlePayment: raised rows only, not the base subsample');
SELECT t.near((SELECT self_cpu_ms FROM p WHERE function = 'handlePayment'), 1000, 1e-9,
              'handlePayment CPU: 99 at 99 Hz');
SELECT t.eq((SELECT total_samples FROM p WHERE service = 'payment-svc' AND function = 'main'), 203::bigint,
            'payment-svc samples: the duplicate trigger adds nothing');
SELECT t.near((SELECT total_cpu_ms FROM p WHERE service = 'payment-svc' AND function = 'main'),
              2263.1578947368, 1e-8, 'payment-svc CPU');
SELECT t.near((SELECT self_pct FROM p WHERE function = 'validateSignature'), 55.8139534884, 1e-8,
              'validateSignature share: 1263.16 / 2263.16');
SELECT t.eq((SELECT array[self_samples, total_samples] FROM p WHERE function = 'handleCheckout'), '{19,19}'::bigint[],
            'checkout-svc (no raised rows) from samples');
SELECT t.near((SELECT total_cpu_ms FROM p WHERE service = 'checkout-svc' AND function = 'main'), 1000, 1e-9,
              'checkout-svc CPU at 19 Hz');
SELECT t.eq((SELECT count(*) FROM traceprof.trace_profile('00000000000000000000000000000014', 'checkout-svc')),
            2::bigint, 'service filter');

-- Trace U has no raised rows: unchanged, 19 at 19 Hz.
SELECT t.eq((SELECT string_agg(function || ' ' || self_samples || ' ' || round(self_cpu_ms::numeric, 6), ', '
                                ORDER BY function)
               FROM traceprof.trace_profile('00000000000000000000000000000015')),
            'handlePayment 19 1000.000000, main 0 0.000000', 'trace without raised rows');

-- Folded stacks and flame graph ---------------------------------------------
-- payment-svc: stack 2 = 1000 ms -> 1000000 us; stack 1 = 1263.1578947 ms
-- -> 1263158 us; root 2263158 us.
SELECT t.eq(traceprof.trace_folded_text('00000000000000000000000000000014', 'payment-svc'),
            E'main;handlePayment 1000000\nmain;handlePayment;validateSignature 1263158',
            'folded text from raised rows');
SELECT t.eq((SELECT string_agg(level || ' ' || label || ' ' || value || ' ' || self, ', ')
               FROM traceprof.trace_flamegraph('00000000000000000000000000000014', 'payment-svc')),
            '0 total 2263158 0, 1 main 2263158 0, 2 handlePayment 2263158 1000000, '
            '3 validateSignature 1263158 1263158',
            'flame graph from raised rows');
SELECT t.eq((SELECT value FROM traceprof.trace_flamegraph('00000000000000000000000000000014') WHERE level = 0),
            3263158::bigint, 'flame graph of every service: 2263158 + 1000000');

-- trace_summary and trace_services ------------------------------------------
-- Verdicts (CPU / span): span 1 1000 / 3000 ms = 33 % mixed; span 2
-- 2000 / 2500 = 80 % cpu; span 3 263.16 / 500 = 53 % cpu.
CREATE TEMP TABLE s AS SELECT traceprof.trace_summary('00000000000000000000000000000014') AS j;
SELECT t.eq((SELECT j ->> 'samples' FROM s), '222', 'summary samples: 203 + 19');
SELECT t.eq((SELECT j ->> 'cpu_ms' FROM s), '3263.2', 'summary CPU: 2263.2 + 1000.0');
SELECT t.eq((SELECT x ->> 'cpu_ms' FROM s, jsonb_array_elements(j -> 'services') x
              WHERE x ->> 'service' = 'payment-svc'), '2263.2', 'summary payment-svc CPU');
SELECT t.eq((SELECT x ->> 'samples' FROM s, jsonb_array_elements(j -> 'services') x
              WHERE x ->> 'service' = 'checkout-svc'), '19', 'summary checkout-svc from samples');
SELECT t.eq((SELECT string_agg((x ->> 'span_id') || ' ' || (x ->> 'cpu_ms'), ', ' ORDER BY x ->> 'span_id')
               FROM s, jsonb_array_elements(j -> 'service_spans') x),
            '0000000000000001 1000.0, 0000000000000002 2000.0, 0000000000000003 263.2',
            'summary per span: span 2 from raised rows');
SELECT t.eq((SELECT string_agg(span_id || ' ' || samples || ' ' || round(cpu_ms::numeric, 3) || ' ' || verdict, ', '
                               ORDER BY span_id)
               FROM traceprof.trace_services('00000000000000000000000000000014')),
            '0000000000000001 19 1000.000 mixed, 0000000000000002 198 2000.000 cpu, '
            '0000000000000003 5 263.158 cpu',
            'trace_services: 198 raised samples for span 2');

-- Service and cohort queries read samples only ------------------------------
SELECT t.eq((SELECT count(*) FROM (
                SELECT * FROM traceprof.service_top_functions('payment-svc', '2030-01-02 10:00+00',
                                                              '2030-01-02 11:00+00')
                EXCEPT SELECT * FROM before_top) x), 0::bigint,
            'continuous profile unchanged by raised rows');
SELECT t.eq((SELECT count(*) FROM traceprof.service_top_functions('payment-svc', '2030-01-02 10:00+00',
                                                                  '2030-01-02 11:00+00')),
            (SELECT count(*) FROM before_top), 'continuous profile: same rows');
SELECT t.eq((SELECT count(*) FROM (
                SELECT * FROM traceprof.cohort_sizes('payment-svc', '2030-01-02 10:00+00', '2030-01-02 11:00+00',
                                                     '{"min_duration": "1s"}', '{"max_duration": "1s"}', false)
                EXCEPT SELECT * FROM before_sizes) x), 0::bigint,
            'cohort sizes unchanged by raised rows');
SELECT t.eq((SELECT count(*) FROM (
                SELECT * FROM traceprof.compare_cohorts('payment-svc', '2030-01-02 10:00+00', '2030-01-02 11:00+00',
                                                        '{"min_duration": "1s"}', '{"max_duration": "1s"}', false)
                EXCEPT SELECT * FROM before_cmp) x), 0::bigint,
            'cohort comparison unchanged by raised rows');
SELECT t.eq(traceprof.refresh_rollups_range('2030-01-02 10:00+00', '2030-01-02 11:00+00') > 0, true,
            'rollup refreshed with raised rows present');
SELECT t.eq((SELECT array_agg(array[requests, sampled_requests, samples] ORDER BY cohort)
               FROM traceprof.cohort_sizes('payment-svc', '2030-01-02 10:00+00', '2030-01-02 11:00+00',
                                           '{"min_duration": "1s"}', '{"max_duration": "1s"}', true)),
            '{{1,1,38},{2,2,24}}'::bigint[], 'rollup: base samples only');

-- trigger_requests_v --------------------------------------------------------
-- slow-pay (service payment-svc): T -> span 2 (payment-svc, and the source
--   with raised rows; span 3 is payment-svc too but has none), 198 raised
--   samples = 2000 ms at 99 Hz; V -> no span row and no samples yet.
-- zz-other (no service): T -> span 2, the span of the source with its raised
--   rows, not the earlier root span 1.
SELECT t.eq((SELECT string_agg(concat_ws(' ', trigger_id, claim_order, trace_id, coalesce(service, '-'),
                                         coalesce(span_id, '-'), coalesce(method || ' ' || route, '-'),
                                         coalesce(status_code::text, '-'), coalesce(duration_ms::text, '-'),
                                         raised_samples, round(raised_cpu_ms::numeric, 6),
                                         coalesce(raised_hz::text, '-')),
                               ' | ' ORDER BY trigger_id, claim_order)
               FROM traceprof.trigger_requests_v),
            'default/slow-pay 1 00000000000000000000000000000014 payment-svc 0000000000000002 POST /pay 200 '
            '2500.0000000000000000 198 2000.000000 99 | '
            'default/slow-pay 2 00000000000000000000000000000016 - - - - - 0 0.000000 - | '
            'default/zz-other 1 00000000000000000000000000000014 payment-svc 0000000000000002 POST /pay 200 '
            '2500.0000000000000000 198 2000.000000 99',
            'trigger_requests_v');
SELECT t.eq((SELECT phase FROM traceprof.trigger_requests_v WHERE trigger_id = 'default/slow-pay' LIMIT 1),
            'Completed', 'the view shows the trigger phase');

-- Constraints: a trigger id is required text of at most 200 bytes.
SELECT t.raises($$INSERT INTO traceprof.trigger_samples (bucket, source_id, span_id, trace_id, hz, stacks, trigger_id)
                  VALUES ('2030-01-02 10:00+00', 1, 2, t.tid(20), 99, '{1}', '')$$,
                'trigger_samples_trigger_id_check', 'empty trigger id refused');
SELECT t.raises($$INSERT INTO traceprof.trigger_samples (bucket, source_id, span_id, trace_id, hz, stacks, trigger_id)
                  VALUES ('2030-01-02 10:00+00', 1, 2, t.tid(20), 99, '{1}', repeat('x', 201))$$,
                'trigger_samples_trigger_id_check', '201-byte trigger id refused');
SELECT t.raises($$INSERT INTO traceprof.trigger_samples (bucket, source_id, span_id, trace_id, hz, stacks, trigger_id)
                  VALUES ('2030-01-02 10:00+00', 1, 2, NULL, 99, '{1}', 'x')$$,
                'null value in column "trace_id"', 'raised rows belong to a trace');

-- Partitions: created and dropped with samples -------------------------------
SELECT t.ok('trigger_samples' = ANY (traceprof._partitioned_tables())
            AND 'samples' = ANY (traceprof._partitioned_tables())
            AND 'cohort_rollup' = ANY (traceprof._partitioned_tables()),
            'trigger_samples registered, earlier tables kept');
SELECT t.ok(to_regclass('traceprof.trigger_samples_p' || to_char((now() AT TIME ZONE 'UTC') + interval '2 days', 'YYYYMMDD'))
            IS NOT NULL, 'trigger_samples partitions exist two days ahead');
SELECT t.ok(to_regclass('traceprof.trigger_samples_p20300102') IS NOT NULL, 'created with samples for 2030-01-02');
SELECT t.eq(traceprof.create_partitions(now() - interval '10 days', now() - interval '9 days'),
            2 * cardinality(traceprof._partitioned_tables()), 'old days: every table, trigger_samples too');
INSERT INTO traceprof.trigger_samples (bucket, source_id, span_id, trace_id, hz, stacks, trigger_id)
VALUES (now() - interval '10 days', 1, 2, t.tid(30), 99, '{1}', 'default/old'),
       (now(), 1, 2, t.tid(31), 99, '{1}', 'default/new');
INSERT INTO traceprof.samples (bucket, source_id, hz, stacks) VALUES (now() - interval '10 days', 1, 19, '{1}');
CREATE TEMP TABLE dropped AS SELECT * FROM traceprof.drop_partitions(interval '7 days') AS name;
SELECT t.ok((SELECT count(*) FROM dropped WHERE name LIKE 'trigger_samples_p%') = 2
            AND (SELECT count(*) FROM dropped WHERE name LIKE 'samples_p%') = 2,
            'retention drops trigger_samples days with samples days');
SELECT t.eq((SELECT array_agg(trigger_id ORDER BY trigger_id) FROM traceprof.trigger_samples
              WHERE trace_id IN (t.tid(30), t.tid(31))), '{default/new}'::text[], 'recent raised rows kept');
