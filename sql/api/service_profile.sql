-- service_profile.sql: service_top_functions, service_folded, service_folded_text, service_flamegraph (taken from migration 004).

-- The lim functions of a service with the most self CPU in [from_time,
-- until_time): every sample, or only_requests those taken while serving a
-- traced request. Percentages are of the service's CPU in the range.
CREATE OR REPLACE FUNCTION traceprof.service_top_functions(service text, from_time timestamptz,
                                                until_time timestamptz, lim integer DEFAULT 50,
                                                only_requests boolean DEFAULT false)
RETURNS TABLE (function text, module text,
               self_samples bigint, total_samples bigint,
               self_cpu_ms double precision, total_cpu_ms double precision,
               self_pct double precision, total_pct double precision)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    svc text := traceprof._arg_required($1, 'service_top_functions', 'service');
BEGIN
    PERFORM traceprof._arg_range($2, $3, 'service_top_functions');
    IF $4 IS NULL OR $4 < 1 THEN
        RAISE EXCEPTION 'service_top_functions: lim must be a positive number, not %', coalesce($4::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT p.function, p.module, p.self_samples, p.total_samples,
           p.self_cpu_ms, p.total_cpu_ms, p.self_pct, p.total_pct
      FROM (SELECT array_agg(s.stack_id) AS ids, array_agg(s.samples) AS n, array_agg(s.cpu_ms) AS ms
              FROM traceprof._service_stacks(svc, $2, $3, coalesce($5, false)) s) g
     CROSS JOIN LATERAL traceprof._function_profile(g.ids, g.n, g.ms) p
     ORDER BY traceprof._cpu_us(p.self_cpu_ms) DESC, traceprof._cpu_us(p.total_cpu_ms) DESC,
              p.function COLLATE "C", p.module COLLATE "C"
     LIMIT $4;
END $$;

-- Folded stacks of a service over [from_time, until_time), one row per
-- distinct stack (no service root frame).
CREATE OR REPLACE FUNCTION traceprof.service_folded(service text, from_time timestamptz,
                                         until_time timestamptz, only_requests boolean DEFAULT false)
RETURNS TABLE (stack text, samples bigint, cpu_ms double precision)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    svc text := traceprof._arg_required($1, 'service_folded', 'service');
BEGIN
    PERFORM traceprof._arg_range($2, $3, 'service_folded');
    RETURN QUERY
    SELECT f.stack, f.samples, f.cpu_ms
      FROM (SELECT array_agg(s.stack_id) AS ids, array_agg(s.samples) AS n, array_agg(s.cpu_ms) AS ms
              FROM traceprof._service_stacks(svc, $2, $3, coalesce($4, false)) s) g
     CROSS JOIN LATERAL traceprof._folded(g.ids, g.n, g.ms) f
     ORDER BY f.stack COLLATE "C";
END $$;

-- service_folded as flamegraph.pl text (N in microseconds of CPU).
CREATE OR REPLACE FUNCTION traceprof.service_folded_text(service text, from_time timestamptz,
                                              until_time timestamptz, only_requests boolean DEFAULT false)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT string_agg(f.stack || ' ' || traceprof._cpu_us(f.cpu_ms), E'\n' ORDER BY f.stack COLLATE "C")
      FROM traceprof.service_folded($1, $2, $3, $4) f
$$;

-- Flame graph panel rows of a service over [from_time, until_time).
CREATE OR REPLACE FUNCTION traceprof.service_flamegraph(service text, from_time timestamptz,
                                             until_time timestamptz, only_requests boolean DEFAULT false)
RETURNS TABLE (level integer, value bigint, self bigint, label text)
LANGUAGE sql STABLE AS $$
    SELECT fg.*
      FROM (SELECT array_agg(f.stack) AS s, array_agg(traceprof._cpu_us(f.cpu_ms)) AS w
              FROM traceprof.service_folded($1, $2, $3, $4) f) a
     CROSS JOIN LATERAL traceprof._flamegraph(a.s, a.w) fg
$$;
