-- trace_stacks.sql: trace_stacks (taken from migration 009).
--
-- What the traceprof command reads to build its weighted
-- stack sets (include/traceprof/stackset.h): the stacks of one trace per
-- span, of one service over a range, of one cohort of requests, the frames
-- of those stacks with their details, the builds of a service in a range,
-- and the requests of a service with their sample counts.
--
-- Every function reuses the rules of the API rather than restating them:
-- trace_stacks reads _trace_span_stacks (raised rows per source, 007),
-- service_stacks reads _service_stacks (samples only), cohort_stacks
-- selects requests with parse_cohort (005) and their samples with the
-- request_sample_window rule of _cohort_moments. Arguments are values,
-- never SQL; bad ones raise the errors of the functions they reuse.
--
-- Workload: one call per command run; the stacks of a trace (tens of rows)
-- or of an hour of a service (up to some 10^4 distinct stacks).

-- The stacks of one trace per span: service, span id (NULL: samples tagged
-- with the trace but no span), stack id, raw samples and CPU ms. Per
-- source, raised rows when it has any (as trace_profile). Ordered by
-- service, span, stack.
CREATE OR REPLACE FUNCTION traceprof.trace_stacks(trace_id text, service text DEFAULT NULL)
RETURNS TABLE (service text, span_id text, stack_id bigint, samples bigint, cpu_ms double precision)
LANGUAGE sql STABLE AS $$
    SELECT x.service, traceprof.span_id_text(x.span_id), x.stack_id, x.samples, x.cpu_ms
      FROM traceprof._trace_span_stacks(traceprof._arg_trace($1, 'trace_stacks')) x
     WHERE traceprof._arg_service($2, 'trace_stacks') IS NULL OR x.service = $2
     ORDER BY x.service COLLATE "C", x.span_id NULLS FIRST, x.stack_id
$$;
