-- 009_cli_reader: what the traceprof command reads to build its weighted
-- stack sets (include/traceprof/stackset.h): the stacks of one trace per
-- span, of one service over a range, of one cohort of requests, the frames
-- of those stacks with their details, the builds of a service in a range,
-- and the requests of a service with their sample counts.
--
-- Every function reuses the rules of 004-007 rather than restating them:
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
CREATE FUNCTION traceprof.trace_stacks(trace_id text, service text DEFAULT NULL)
RETURNS TABLE (service text, span_id text, stack_id bigint, samples bigint, cpu_ms double precision)
LANGUAGE sql STABLE AS $$
    SELECT x.service, traceprof.span_id_text(x.span_id), x.stack_id, x.samples, x.cpu_ms
      FROM traceprof._trace_span_stacks(traceprof._arg_trace($1, 'trace_stacks')) x
     WHERE traceprof._arg_service($2, 'trace_stacks') IS NULL OR x.service = $2
     ORDER BY x.service COLLATE "C", x.span_id NULLS FIRST, x.stack_id
$$;

-- The stacks of one service in [from_time, until_time): raw samples and
-- CPU ms per stack id (samples only, as service_folded). Ordered by stack.
CREATE FUNCTION traceprof.service_stacks(service text, from_time timestamptz,
                                         until_time timestamptz, only_requests boolean DEFAULT false)
RETURNS TABLE (stack_id bigint, samples bigint, cpu_ms double precision)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    svc text := traceprof._arg_required($1, 'service_stacks', 'service');
BEGIN
    PERFORM traceprof._arg_range($2, $3, 'service_stacks');
    RETURN QUERY
    SELECT s.stack_id, s.samples, s.cpu_ms
      FROM traceprof._service_stacks(svc, $2, $3, coalesce($4, false)) s
     ORDER BY s.stack_id;
END $$;

-- The frames of the given stacks in two small answers: per stack its frame
-- and function ids, root first (a stack missing from the dictionary is the
-- one frame 0, read "[unknown]"), then frame_details for the distinct
-- frames. 10,000 stacks of 25 frames are 10,000 rows and a few thousand,
-- where one row per frame would be 250,000 rows of text.
CREATE FUNCTION traceprof.stack_frame_ids(stack_ids bigint[])
RETURNS TABLE (stack_id bigint, frame_ids bigint[], function_ids bigint[])
LANGUAGE sql STABLE AS $$
    SELECT d.s, coalesce(st.frame_ids, ARRAY[0::bigint]), coalesce(st.function_ids, ARRAY[0::bigint])
      FROM (SELECT DISTINCT u.s FROM unnest($1) AS u(s)) d
      LEFT JOIN traceprof.stacks st ON st.stack_id = d.s
$$;

-- Function and place of frames given as aligned (frame id, function id)
-- arrays; the function id stands in for a frame missing from frames.
CREATE FUNCTION traceprof.frame_details(frame_ids bigint[], function_ids bigint[])
RETURNS TABLE (frame_id bigint, function_id bigint, name text, module text, kind smallint,
               build_id text, file text, line integer, address bigint)
LANGUAGE sql STABLE AS $$
    SELECT x.frame_id, x.function_id, coalesce(fn.name, '[unknown]'), coalesce(fn.module, ''),
           coalesce(fn.kind, 0::smallint), coalesce(fr.build_id, ''), fr.file, fr.line, fr.address
      FROM unnest($1, $2) AS x(frame_id, function_id)
      LEFT JOIN traceprof.frames fr ON fr.frame_id = x.frame_id
      LEFT JOIN traceprof.functions fn ON fn.function_id = coalesce(fr.function_id, x.function_id)
$$;

-- The samples of one cohort of a service's requests that started in
-- [from_time, until_time), per stack: the rule of compare_cohorts (005):
-- a request's samples are the samples rows of the service with its
-- (trace_id, span_id) within request_sample_window of [start, end].
-- requests: how many requests of the cohort have samples on the stack.
CREATE FUNCTION traceprof.cohort_stacks(service text, from_time timestamptz, until_time timestamptz,
                                        cohort jsonb, cohort_name text DEFAULT 'cohort')
RETURNS TABLE (stack_id bigint, samples bigint, cpu_ms double precision, requests bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    svc text := traceprof._arg_required($1, 'cohort_stacks', 'service');
    f traceprof.cohort_filter := traceprof.parse_cohort($4, coalesce($5, 'cohort'));
    srcs bigint[];
    slack interval := (SELECT value::interval FROM traceprof.config WHERE key = 'request_sample_window');
BEGIN
    PERFORM traceprof._arg_range($2, $3, 'cohort_stacks');
    srcs := traceprof.service_sources(svc);
    RETURN QUERY
    SELECT u.stack_id, sum(coalesce(u.n, 1))::bigint,
           sum(traceprof.cpu_ms(coalesce(u.n, 1), s.hz)),
           count(DISTINCT (r.trace_id, r.span_id))
      FROM traceprof.requests r
      JOIN traceprof.samples s ON s.trace_id = r.trace_id AND s.span_id = r.span_id
     CROSS JOIN LATERAL unnest(s.stacks, s.counts) AS u(stack_id, n)
     WHERE r.source_id = ANY (srcs) AND r.start_time >= $2 AND r.start_time < $3
       AND (f.min_us IS NULL OR r.duration_us >= f.min_us)
       AND (f.max_us IS NULL OR r.duration_us < f.max_us)
       AND (f.statuses IS NULL OR r.status_code::integer <@ f.statuses)
       AND (f.route_ids IS NULL OR r.route_id = ANY (f.route_ids))
       AND s.source_id = ANY (srcs)
       AND s.bucket >= r.start_time - slack
       AND s.bucket <= r.start_time + r.duration_us * interval '1 microsecond' + slack
     GROUP BY u.stack_id
     ORDER BY u.stack_id;
END $$;

-- The builds (sources.build_id) of a service's samples in [from_time,
-- until_time): first and last sample bucket and raw samples of each,
-- in order of first appearance. '' is a build the agent could not read.
CREATE FUNCTION traceprof.service_builds(service text, from_time timestamptz, until_time timestamptz)
RETURNS TABLE (build_id text, first_bucket timestamptz, last_bucket timestamptz, samples bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    svc text := traceprof._arg_required($1, 'service_builds', 'service');
BEGIN
    PERFORM traceprof._arg_range($2, $3, 'service_builds');
    RETURN QUERY
    SELECT so.build_id, min(s.bucket), max(s.bucket),
           sum((SELECT sum(coalesce(u.n, 1)) FROM unnest(s.stacks, s.counts) AS u(id, n)))::bigint
      FROM traceprof.sources so
      JOIN traceprof.samples s ON s.source_id = so.source_id
     WHERE so.service = svc AND s.bucket >= $2 AND s.bucket < $3
     GROUP BY so.build_id
     ORDER BY min(s.bucket), so.build_id COLLATE "C";
END $$;

-- The requests (spans) of a service that started in [from_time,
-- until_time) and match a cohort spec (005's keys: min_duration,
-- max_duration, status, route, method), newest first, at most lim. samples:
-- the span's samples as the one-trace functions count them (raised rows
-- per source when the trace has any; _trace_rows, 007).
CREATE FUNCTION traceprof.service_requests(service text, from_time timestamptz, until_time timestamptz,
                                           filter jsonb DEFAULT '{}', lim integer DEFAULT 50)
RETURNS TABLE (start_time timestamptz, trace_id text, span_id text, duration_ms double precision,
               status_code smallint, method text, route text, samples bigint, cpu_ms double precision)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    svc text := traceprof._arg_required($1, 'service_requests', 'service');
    f traceprof.cohort_filter := traceprof.parse_cohort(coalesce($4, '{}'), 'filter');
    srcs bigint[];
BEGIN
    PERFORM traceprof._arg_range($2, $3, 'service_requests');
    IF $5 IS NULL OR $5 < 1 THEN
        RAISE EXCEPTION 'service_requests: lim must be a positive number, not %', coalesce($5::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    srcs := traceprof.service_sources(svc);
    RETURN QUERY
    SELECT r.start_time, traceprof.trace_id_text(r.trace_id), traceprof.span_id_text(r.span_id),
           r.duration_us / 1000.0::float8, r.status_code,
           coalesce(rt.method, ''), coalesce(rt.route, ''),
           coalesce(c.n, 0)::bigint, coalesce(c.ms, 0)
      FROM (SELECT q.* FROM traceprof.requests q
             WHERE q.source_id = ANY (srcs) AND q.start_time >= $2 AND q.start_time < $3
               AND (f.min_us IS NULL OR q.duration_us >= f.min_us)
               AND (f.max_us IS NULL OR q.duration_us < f.max_us)
               AND (f.statuses IS NULL OR q.status_code::integer <@ f.statuses)
               AND (f.route_ids IS NULL OR q.route_id = ANY (f.route_ids))
             ORDER BY q.start_time DESC, q.trace_id, q.span_id
             LIMIT $5) r
      LEFT JOIN traceprof.routes rt ON rt.route_id = r.route_id
      LEFT JOIN LATERAL (
            SELECT sum(coalesce(u.n, 1)) AS n, sum(traceprof.cpu_ms(coalesce(u.n, 1), t.hz)) AS ms
              FROM traceprof._trace_rows(r.trace_id) t
             CROSS JOIN LATERAL unnest(t.stacks, t.counts) AS u(stack_id, n)
             WHERE t.span_id = r.span_id AND t.source_id = ANY (srcs)) c ON true
     ORDER BY r.start_time DESC, 2, 3;
END $$;
