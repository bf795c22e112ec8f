-- requests_v.sql: requests_v (taken from migration 002).

-- Readable forms for people and dashboards.
CREATE OR REPLACE VIEW traceprof.requests_v AS
SELECT traceprof.trace_id_text(r.trace_id) AS trace_id,
       traceprof.span_id_text(r.span_id) AS span_id,
       traceprof.span_id_text(r.parent_span_id) AS parent_span_id,
       s.service, s.namespace, s.pod, s.node,
       coalesce(rt.method, '') AS method, coalesce(rt.route, '') AS route,
       r.status_code, r.start_time, r.duration_us / 1000.0 AS duration_ms,
       CASE r.context_source WHEN 1 THEN 'otlp' WHEN 2 THEN 'zero-code-http' END
           AS context_source
FROM traceprof.requests r
JOIN traceprof.sources s USING (source_id)
LEFT JOIN traceprof.routes rt USING (route_id);
