-- Checks for run_otlp_node_test.sh: traceprof.requests holds exactly the
-- SERVER spans the OpenTelemetry JS SDK exported (table truth, written by
-- otlp-node/export_spans.js), each with its service, pod, route, method,
-- status, start, duration and parent.
CREATE TEMP VIEW stored AS
SELECT replace(q.trace_id::text, '-', '') AS trace_id,
       lpad(to_hex(q.span_id), 16, '0') AS span_id,
       coalesce(lpad(to_hex(q.parent_span_id), 16, '0'), '') AS parent_span_id,
       s.service, s.namespace, s.pod, s.node, r.method, r.route, q.status_code,
       (extract(epoch FROM q.start_time) * 1000000)::bigint AS start_us, q.duration_us
FROM traceprof.requests q
JOIN traceprof.sources s USING (source_id)
LEFT JOIN traceprof.routes r USING (route_id);

SELECT t.eq((SELECT count(*) FROM truth), 5::bigint, 'the exporter reported 5 server spans');
SELECT t.eq((SELECT count(*) FROM stored), 5::bigint, 'exactly 5 request rows (no client span)');
SELECT t.eq((SELECT count(*) FROM stored JOIN truth t USING (trace_id, span_id)), 5::bigint,
            'every stored row is one of the exported server spans');
SELECT t.eq((SELECT count(*) FROM stored x JOIN truth t USING (trace_id, span_id)
             WHERE x.service = 'node-e2e' AND x.namespace = 'shop' AND x.pod = 'node-e2e-0'
               AND x.node = 'e2e-host'), 5::bigint, 'service, namespace, pod, node');
SELECT t.eq((SELECT count(*) FROM stored x JOIN truth t USING (trace_id, span_id)
             WHERE x.route = t.route AND x.method = t.method AND x.status_code = t.status),
            5::bigint, 'route, method and status (new and old conventions)');
SELECT t.eq((SELECT count(*) FROM stored x JOIN truth t USING (trace_id, span_id)
             WHERE x.start_us = t.start_us AND x.duration_us = t.duration_us),
            5::bigint, 'start and duration to the microsecond');
SELECT t.eq((SELECT count(*) FROM stored x JOIN truth t USING (trace_id, span_id)
             WHERE x.parent_span_id = coalesce(t.parent_span_id, '')), 5::bigint,
            'parent span ids (one remote parent, the rest roots)');
