-- Checks of run_xservice_test.sh: the two-service demo's spans (OTLP) and
-- samples (BPF) in the store, against the load generator's ground truth
-- (table truth: one row per request the load generator sent to the
-- frontend; server_span_id is the frontend's span).
\set ON_ERROR_STOP on

CREATE TEMP TABLE req AS
SELECT traceprof.trace_id_text(r.trace_id) AS trace_id, traceprof.span_id_text(r.span_id) AS span_id,
       traceprof.span_id_text(r.parent_span_id) AS parent_span_id, s.service, r.status_code,
       r.duration_us
  FROM traceprof.requests r JOIN traceprof.sources s USING (source_id);

-- Spans: every answered request has its frontend span; every checkout that
-- reached the payment service has a payment span, child of the frontend's.
SELECT t.eq((SELECT count(*) FROM truth tr
              WHERE tr.status > 0
                AND NOT EXISTS (SELECT 1 FROM req r WHERE r.service = 'frontend'
                                   AND r.trace_id = tr.trace_id AND r.span_id = tr.server_span_id)),
            0::bigint, 'every request has its frontend span, with the frontend''s span id');
SELECT t.eq((SELECT count(*) FROM truth tr
              WHERE tr.status > 0 AND tr.path IN ('fast', 'slow')
                AND NOT EXISTS (SELECT 1 FROM req r WHERE r.service = 'payment-svc'
                                   AND r.trace_id = tr.trace_id
                                   AND r.parent_span_id = tr.server_span_id)),
            0::bigint, 'every checkout has a payment span, child of the frontend span');
SELECT t.eq((SELECT count(*) FROM req r JOIN truth tr USING (trace_id)
              WHERE r.service = 'frontend' AND r.status_code <> tr.status),
            0::bigint, 'frontend span statuses are the statuses the client got');

-- The slow path's functions: validateSignature and what it calls, down to
-- libcrypto, which nothing else in the demo calls.
CREATE TEMP TABLE slow_fn AS
SELECT name FROM traceprof.functions WHERE module = 'libcrypto.so.3'
UNION SELECT unnest(ARRAY['validateSignature', 'rsa_verify', 'sha256_of']);
-- The payment stacks of each slow checkout, as arrays of function names
-- (folded frames of a name two modules share carry " [module]").
CREATE TEMP TABLE slow_stacks AS
SELECT tr.trace_id, string_to_array(regexp_replace(f.stack, ' \[[^;]*\]', '', 'g'), ';') AS fns,
       f.samples
  FROM truth tr CROSS JOIN LATERAL traceprof.trace_folded(tr.trace_id, 'payment-svc') f
 WHERE tr.path = 'slow' AND tr.status = 200;
-- fn is on the slow path of trace: a slow-path function, or one that ran
-- under slow-path functions there for at least half of its samples (libc
-- or the kernel below libcrypto, the clock read of the CPU budget; a kernel
-- function may also show up once in the response's send). libcrypto's
-- unsymbolized leaf is one name per address, so a slow trace's top self
-- function can be such a function with one or two samples.
CREATE FUNCTION pg_temp.on_slow_path(trace text, fn text) RETURNS boolean
LANGUAGE sql AS $$
    SELECT fn IN (SELECT name FROM slow_fn)
        OR coalesce((SELECT 2 * coalesce(sum(s.samples) FILTER (
                                             WHERE s.fns && ARRAY(SELECT name FROM slow_fn)), 0)
                            >= sum(s.samples)
                       FROM slow_stacks s WHERE s.trace_id = trace AND fn = ANY (s.fns)), false)
$$;

-- The cross-service view of each slow checkout.
CREATE TEMP TABLE slow_view AS
SELECT tr.trace_id, v.*
  FROM truth tr CROSS JOIN LATERAL traceprof.trace_services(tr.trace_id) v
 WHERE tr.path = 'slow' AND tr.status = 200;
CREATE TEMP TABLE slow_pay AS
SELECT * FROM slow_view WHERE service = 'payment-svc' AND span_id IS NOT NULL;
CREATE TEMP TABLE slow_front AS
SELECT * FROM slow_view WHERE service = 'frontend' AND span_id IS NOT NULL;

SELECT t.ok((SELECT count(*) FROM slow_pay WHERE samples >= 10) >= 5,
            'at least 5 slow traces with 10 payment samples or more');
-- payment-svc's self time in each slow trace: the functions tied on top
-- (one name per address for libcrypto's leaf makes ties of a sample or two
-- common); one of them must be on the slow path
CREATE TEMP TABLE pay_top AS
SELECT p.trace_id, q.function
  FROM slow_pay p
 CROSS JOIN LATERAL (SELECT f.function, f.self_samples, max(f.self_samples) OVER () AS most
                       FROM traceprof.trace_profile(p.trace_id) f
                      WHERE f.service = 'payment-svc') q
 WHERE p.samples >= 10 AND q.self_samples = q.most;
SELECT t.eq((SELECT count(*) FROM slow_pay p
              WHERE p.samples >= 10
                AND NOT EXISTS (SELECT 1 FROM pay_top x
                                 WHERE x.trace_id = p.trace_id
                                   AND pg_temp.on_slow_path(p.trace_id, x.function))),
            0::bigint, 'the payment span of every slow trace has a slow-path function on top');
-- The cause: payment-svc holds the trace's CPU. (Its verdict is 'cpu' on a
-- quiet machine; on a loaded one its 200 ms of CPU take longer than 200 ms,
-- time spent waiting for a CPU, so its share of its own span can drop to
-- 'mixed' or 'waiting': the verdict is not what this checks.)
SELECT t.eq((SELECT count(*) FROM slow_pay p
              WHERE p.samples >= 10
                AND p.cpu_ms <= 5 * coalesce((SELECT sum(v.cpu_ms) FROM slow_view v
                                               WHERE v.trace_id = p.trace_id
                                                 AND v.service <> 'payment-svc'), 0)),
            0::bigint, 'payment-svc is the cause: its CPU, over 5 times the rest of the trace''s');
SELECT verdict, count(*) AS payment_spans FROM slow_pay WHERE samples >= 10 GROUP BY verdict ORDER BY 1;
SELECT t.eq((SELECT count(*) FROM slow_front f JOIN slow_pay p USING (trace_id)
              WHERE p.samples >= 10 AND (f.verdict <> 'waiting' OR f.span_ms < 0.95 * p.span_ms)),
            0::bigint, 'the frontend only waits: a span as long (the payment ends its span after '
                       'writing the answer), little CPU');
SELECT t.eq((SELECT count(*) FROM slow_pay p
              WHERE p.samples >= 10
                AND NOT EXISTS (SELECT 1
                                  FROM jsonb_array_elements(traceprof.trace_summary(p.trace_id)
                                                            -> 'service_spans') e
                                 WHERE e ->> 'service' = 'payment-svc')),
            0::bigint, 'trace_summary lists the payment span of every slow trace');

-- Fast checkouts never show the slow path in any service.
SELECT t.eq((SELECT count(*) FROM truth tr CROSS JOIN LATERAL traceprof.trace_services(tr.trace_id) v
              WHERE tr.path = 'fast'
                AND v.top_function IN (SELECT name FROM slow_fn)),
            0::bigint, 'no slow-path hotspot in a fast trace');

SELECT service, count(*) AS spans, round(avg(span_ms)::numeric, 1) AS avg_span_ms,
       round(avg(cpu_ms)::numeric, 1) AS avg_cpu_ms, min(verdict) AS verdict
  FROM slow_view WHERE span_id IS NOT NULL GROUP BY service ORDER BY service;
