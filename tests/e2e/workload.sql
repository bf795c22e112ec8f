-- End-to-end checks on the traceprof-gen workload (see run_workload_test.sh):
-- the model plants facts that the SQL API must find. The generator's model
-- (tools/traceprof_gen.c): payment-svc's slow tail (>= 1 s) spends ~93 % of
-- its CPU under validateSignature -> rsa_verify; its 5xx requests run
-- retry_with_backoff / handle_decline; frontend waits for payment-svc; the
-- two frontend routes /api/products and /api/cart share one CPU model.

CREATE TEMP TABLE slow AS
SELECT trace_id FROM traceprof.requests_v
 WHERE service = 'payment-svc' ORDER BY duration_ms DESC LIMIT 1;

-- 1. The slowest checkout, explained.
SELECT t.ok((SELECT total_pct FROM traceprof.trace_profile((SELECT trace_id FROM slow), 'payment-svc')
              WHERE function = 'validateSignature') > 80,
            'slowest payment-svc request: validateSignature holds > 80 % of its CPU');
SELECT t.eq((SELECT traceprof.trace_summary(trace_id)->'services'->0->>'service' FROM slow),
            'payment-svc', 'the summary lists the service that burned the CPU first');
SELECT t.eq((SELECT traceprof.trace_summary(trace_id)->'services'->0->'hot_path'->0->>'function' FROM slow),
            'validateSignature', 'the hot path starts at validateSignature');
SELECT t.ok((SELECT traceprof.trace_summary(trace_id)->>'verdict' FROM slow) ~ '^payment-svc: [0-9]+ ms span, validateSignature',
            'the verdict names payment-svc and validateSignature');
SELECT t.ok((SELECT (s->>'mostly_waiting') IS DISTINCT FROM 'false'
               FROM slow, jsonb_array_elements(traceprof.trace_summary(trace_id)->'services') s
              WHERE s->>'service' = 'frontend'),
            'frontend only waited for payment-svc');

-- 2. CPU time is weighted by each row's frequency: the profile's total equals
--    the sum over the trace's rows of samples x 1000 / hz.
SELECT t.near((SELECT sum(self_cpu_ms) FROM traceprof.trace_profile((SELECT trace_id FROM slow))),
              (SELECT sum(coalesce((SELECT sum(c) FROM unnest(s.counts) c), cardinality(s.stacks)) * 1000.0 / s.hz)
                 FROM traceprof.samples s WHERE s.trace_id = (SELECT trace_id::uuid FROM slow)),
              1e-6, 'trace CPU = sum of samples x 1000 / hz');
SELECT t.ok((SELECT count(DISTINCT hz) FROM traceprof.samples) = 2, 'the workload mixes 19 and 99 Hz rows');

-- 3. Slow vs fast requests of payment-svc: validateSignature's subtree is the
--    effect, and it is significant.
SELECT traceprof.refresh_rollups();
CREATE TEMP TABLE slow_fast AS
SELECT * FROM traceprof.compare_cohorts('payment-svc', now() - interval '1 hour', now(),
                                        '{"min_duration": "1s"}', '{"max_duration": "100ms"}');
SELECT t.ok((SELECT function FROM slow_fast ORDER BY abs(delta) DESC LIMIT 1) IN ('validateSignature', 'rsa_verify'),
            'the largest effect is validateSignature or rsa_verify');
SELECT t.ok((SELECT delta > 0.5 AND p_value < 1e-9 FROM slow_fast WHERE function = 'rsa_verify'),
            'rsa_verify: +50 points or more in slow requests, p < 1e-9');
SELECT t.ok((SELECT delta < 0 AND p_value < 1e-6 FROM slow_fast WHERE function = 'serialize_request'),
            'serialize_request is relatively hotter in fast requests');
-- The rollup and the raw tables give the same answer (a window with edges
-- inside minutes; the raw path costs a fraction of a second per minute).
SELECT t.near((SELECT max(abs(r.delta - w.delta)) + max(abs(r.p_value - w.p_value))
                 FROM traceprof.compare_cohorts('payment-svc', now() - interval '25 min 30 s', now() - interval '13 min 10 s',
                                                '{"min_duration": "1s"}', '{"max_duration": "100ms"}') r
                 JOIN traceprof.compare_cohorts('payment-svc', now() - interval '25 min 30 s', now() - interval '13 min 10 s',
                                                '{"min_duration": "1s"}', '{"max_duration": "100ms"}', false) w
                   USING (function, module)), 0, 1e-9, 'rollup = raw');

-- 4. 5xx vs 2xx: the error path.
SELECT t.ok((SELECT bool_and(delta > 0 AND p_value < 1e-3)
               FROM traceprof.compare_cohorts('payment-svc', now() - interval '1 hour', now(),
                                              '{"status": "5xx"}', '{"status": "2xx"}')
              WHERE function IN ('retry_with_backoff', 'handle_decline')),
            '5xx requests run retry_with_backoff and handle_decline');

-- 5. Noise: two routes with one CPU model show no significant difference.
SELECT t.ok((SELECT min(p_value) FROM traceprof.compare_cohorts('frontend', now() - interval '1 hour', now(),
                                        '{"route": "/api/products", "status": "2xx"}',
                                        '{"route": "/api/cart", "status": "2xx"}')) > 1e-3,
            'same model on two routes: no function significant at 1e-3');

-- 6. Continuous profile: background CPU is in the service profile, and not
--    in the requests-only view.
SELECT t.ok(EXISTS (SELECT 1 FROM traceprof.service_top_functions('payment-svc', now() - interval '1 hour', now(), 100)
                     WHERE function = 'gc_collect'), 'background GC in the continuous profile');
SELECT t.ok(NOT EXISTS (SELECT 1 FROM traceprof.service_top_functions('payment-svc', now() - interval '1 hour', now(), 100, true)
                         WHERE function = 'gc_collect'), 'no GC inside requests');
