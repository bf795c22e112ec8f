-- trigger_requests_v.sql: trigger_requests_v (taken from migration 007).

-- Per trigger and claimed trace (in claim order): the claimed request and
-- the raised samples written for it. The request shown is the trace's span
-- of the trigger's service when it names one, else of a source with raised
-- rows of this trigger, else the earliest span; its columns are NULL while
-- no span row has arrived. raised_* sum the trigger's rows of the trace in
-- every partition; raised_samples 0: none written (yet).
CREATE OR REPLACE VIEW traceprof.trigger_requests_v AS
SELECT t.trigger_id, t.namespace, t.name, t.phase,
       c.claim_order,
       traceprof.trace_id_text(c.trace_id) AS trace_id,
       r.service, r.span_id, r.method, r.route, r.status_code, r.start_time, r.duration_ms,
       coalesce(x.raised_samples, 0) AS raised_samples,
       coalesce(x.raised_cpu_ms, 0) AS raised_cpu_ms,
       x.raised_hz
  FROM traceprof.trace_profile_triggers t
 CROSS JOIN LATERAL unnest(t.trace_ids) WITH ORDINALITY AS c(trace_id, claim_order)
  LEFT JOIN LATERAL (
        SELECT coalesce(so.service, '[unknown]') AS service,
               traceprof.span_id_text(q.span_id) AS span_id,
               coalesce(rt.method, '') AS method, coalesce(rt.route, '') AS route,
               q.status_code, q.start_time, q.duration_us / 1000.0 AS duration_ms
          FROM traceprof.requests q
          LEFT JOIN traceprof.sources so ON so.source_id = q.source_id
          LEFT JOIN traceprof.routes rt ON rt.route_id = q.route_id
         WHERE q.trace_id = c.trace_id
         ORDER BY (t.service IS NOT NULL AND so.service = t.service) DESC,
                  EXISTS (SELECT FROM traceprof.trigger_samples ts
                           WHERE ts.trace_id = c.trace_id AND ts.trigger_id = t.trigger_id
                             AND ts.source_id = q.source_id) DESC,
                  q.start_time, q.span_id
         LIMIT 1) r ON true
  LEFT JOIN LATERAL (
        SELECT sum(coalesce(u.n, 1))::bigint AS raised_samples,
               sum(coalesce(u.n, 1) * 1000.0::float8 / ts.hz) AS raised_cpu_ms,
               max(ts.hz)::integer AS raised_hz
          FROM traceprof.trigger_samples ts
         CROSS JOIN LATERAL unnest(ts.stacks, ts.counts) AS u(stack_id, n)
         WHERE ts.trace_id = c.trace_id AND ts.trigger_id = t.trigger_id) x ON true;
