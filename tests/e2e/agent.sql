-- Checks of the agent end-to-end test (run_agent_test.sh): the samples the
-- agent stored against the load generator's ground truth (table truth).
\set ON_ERROR_STOP 1

-- One row per stored sample occurrence: its trace, span, stack functions
-- and whether a frame of libcrypto is among them.
CREATE TEMP TABLE s AS
SELECT sm.trace_id, sm.span_id, u.stack_id, coalesce(sm.counts[u.i], 1) AS n,
       (SELECT array_agg(f.name) FROM unnest(st.function_ids) AS x(fid)
          JOIN traceprof.functions f ON f.function_id = x.fid) AS fns,
       EXISTS (SELECT 1 FROM unnest(st.function_ids) AS x(fid)
                 JOIN traceprof.functions f ON f.function_id = x.fid
                WHERE f.module = 'libcrypto.so.3') AS libcrypto
  FROM traceprof.samples sm
 CROSS JOIN LATERAL unnest(sm.stacks) WITH ORDINALITY AS u(stack_id, i)
  JOIN traceprof.stacks st ON st.stack_id = u.stack_id;

CREATE TEMP TABLE t AS
SELECT traceprof.parse_trace_id(trace_id) AS trace_id,
       traceprof.parse_span_id(nullif(server_span_id, '')) AS span_id, path, status
  FROM truth;

-- Functions that only one kind of request runs. The slow path is also the
-- only caller of libcrypto (BN_mod_exp_mont and the rest): a frame of
-- libcrypto.so.3 counts as a slow-path function.
CREATE TEMP TABLE exclusive(fn text, path text);
INSERT INTO exclusive VALUES
  ('validateSignature', 'slow'), ('rsa_verify', 'slow'), ('sha256_of', 'slow'),
  ('BN_mod_exp_mont', 'slow'), ('RSA_verify', 'slow'),
  ('chargeCard', 'fail'), ('gatewayTimeout', 'fail'),
  ('handle_inventory', 'inventory'), ('lookupInventory', 'inventory');

SELECT t.ok((SELECT count(*) FROM t) = 400, 'the load generator recorded 400 requests');
SELECT t.ok((SELECT sum(n) FROM s WHERE trace_id IS NOT NULL) >= 200,
            'at least 200 trace-tagged samples');
SELECT t.ok((SELECT count(*) FROM traceprof.requests) > 0
            AND NOT EXISTS (SELECT FROM traceprof.requests WHERE context_source IS DISTINCT FROM 1),
            'request rows from spans received over OTLP say so (context_source 1)');

-- Attribution: a tagged sample is right when its trace and span are the
-- request's (ground truth) and its stack runs nothing exclusive to another
-- kind of request.
CREATE TEMP TABLE verdict AS
SELECT s.n,
       t.trace_id IS NOT NULL AS known_trace,
       t.span_id = s.span_id AS right_span,
       NOT EXISTS (SELECT 1 FROM exclusive e
                    WHERE e.fn = ANY (s.fns) AND e.path <> t.path)
           AND (NOT s.libcrypto OR t.path = 'slow') AS consistent
  FROM s LEFT JOIN t ON t.trace_id = s.trace_id
 WHERE s.trace_id IS NOT NULL;

SELECT sum(n) AS tagged,
       sum(n) FILTER (WHERE known_trace AND right_span AND consistent) AS right,
       round(100.0 * sum(n) FILTER (WHERE known_trace AND right_span AND consistent) / sum(n), 2)
           AS right_pct
  FROM verdict;
SELECT t.ok((SELECT sum(n) FILTER (WHERE known_trace AND right_span AND consistent)::numeric
                    / sum(n) FROM verdict) >= 0.99,
            'at least 99 % of tagged samples are attributed to the right trace and span');

-- A slow-path function never appears in the profile of a request that did not take it.
SELECT t.eq((SELECT coalesce(sum(s.n), 0) FROM s JOIN t USING (trace_id)
              WHERE t.path <> 'slow'
                AND (s.libcrypto OR s.fns && ARRAY['validateSignature', 'rsa_verify', 'sha256_of'])),
            0::bigint, 'no slow-path function in a fast, failing or inventory trace');

-- The top hotspot (self time) of every slow trace with enough samples is on
-- the slow path: one of its functions, libcrypto, which only it calls, or a
-- function that ran under validateSignature or libcrypto for at least half
-- of its samples in that trace (libc or the kernel below them, the clock
-- read of the CPU budget). libcrypto's unsymbolized leaf is one name per
-- address, so the top is often a tie of functions with a sample or two:
-- one of those tied on top must be on the slow path.
CREATE TEMP TABLE slow_top AS
SELECT tt.trace_id, p.function AS top, p.module AS top_module,
       (SELECT sum(n) FROM s WHERE s.trace_id = tt.trace_id) AS samples
  FROM t tt
 CROSS JOIN LATERAL (SELECT q.function, q.module, q.self_samples,
                            max(q.self_samples) OVER () AS most
                       FROM traceprof.trace_profile(traceprof.trace_id_text(tt.trace_id)) q) p
 WHERE tt.path = 'slow' AND p.self_samples = p.most;
SELECT t.ok((SELECT count(DISTINCT trace_id) FROM slow_top WHERE samples >= 10) >= 5,
            'at least 5 slow traces with 10 samples or more');
SELECT t.eq((SELECT count(*) FROM (
               SELECT trace_id FROM slow_top WHERE samples >= 10 GROUP BY trace_id
               HAVING NOT bool_or(top IN ('rsa_verify', 'sha256_of', 'validateSignature')
                                  OR top_module = 'libcrypto.so.3'
                                  OR coalesce((SELECT 2 * coalesce(sum(s.n) FILTER (
                                                              WHERE 'validateSignature' = ANY (s.fns)
                                                                 OR s.libcrypto), 0) >= sum(s.n)
                                                 FROM s WHERE s.trace_id = slow_top.trace_id
                                                  AND top = ANY (s.fns)), false))) x),
            0::bigint, 'every slow trace''s top self function is on the slow path');

-- Work outside any request carries no trace id.
SELECT t.ok((SELECT sum(n) FROM s WHERE 'refreshCache' = ANY (fns) AND trace_id IS NULL) > 0,
            'background refreshCache samples were taken');
SELECT t.eq((SELECT coalesce(sum(n), 0) FROM s
              WHERE 'refreshCache' = ANY (fns) AND trace_id IS NOT NULL),
            0::bigint, 'background samples are untagged');

-- Names: the service from its process context, the demo's functions from its symbols.
SELECT t.ok(EXISTS (SELECT 1 FROM traceprof.sources WHERE service = 'payment-svc'),
            'service name from the process context');
SELECT t.eq((SELECT count(DISTINCT name) FROM traceprof.functions
              WHERE name IN ('parseOrder', 'computeTotal', 'serializeResponse',
                             'validateSignature', 'rsa_verify', 'BN_mod_exp_mont', 'refreshCache',
                             'handle_checkout', 'worker_main')),
            9::bigint, 'the demo''s function names (BN_mod_exp_mont: libcrypto''s)');
SELECT t.ok((SELECT count(*) FROM traceprof.functions WHERE kind = 1) > 0, 'kernel frames');
