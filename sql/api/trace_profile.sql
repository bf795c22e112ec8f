-- trace_profile.sql: _trace_profile, _trace_folded, trace_profile, trace_folded, trace_folded_text, trace_flamegraph (taken from migration 004).
--
-- The functions users call to read profiles: one trace (per
-- service or all services), one service over a time range, as function
-- tables, folded stacks, Grafana flame graph rows and a JSON summary.
--
-- Workload: a person or a dashboard looks up one trace (a few samples rows
-- found through the trace_id hash index; target well under 5 ms on a store
-- of tens of millions of samples), or one service over minutes to hours
-- (found through the (source_id, bucket) index).
--
-- Data flow, the same for every function:
--   1. select the samples rows and aggregate them per stack id, keeping the
--      raw sample count and the CPU time (count * 1000 / hz per row, so rows
--      at 19 Hz and at 99 Hz add up correctly);
--   2. expand only the distinct stacks: into functions with
--      traceprof.stack_function_weights (stack_functions.sql), or into frame labels for
--      folded stacks and flame graphs.
--
-- Units and names (docs/sql.md has the reference):
--  * cpu_ms columns are milliseconds of CPU, double precision;
--  * the N of folded text and the value/self of flame graph rows are whole
--    microseconds of CPU, rounded once per folded stack, so they stay right
--    when frequencies differ and every flame graph node adds up exactly;
--  * a frame label is the function name; where one service's stacks hold two
--    functions of the same name from different modules, those read
--    "name [module]"; ';' and line breaks in names become ':' and ' ';
--  * text parameters are bound values, never SQL text. A required value that
--    is NULL or empty is an error naming the parameter; an unknown trace or
--    service is an empty result (NULL for the functions returning a value);
--  * what the dictionaries miss (a source, stack, frame or function an
--    agent has not written yet) reads "[unknown]", so totals stay right.

CREATE OR REPLACE FUNCTION traceprof._trace_profile(p_trace uuid, p_service text)
RETURNS TABLE (service text, function text, module text,
               self_samples bigint, total_samples bigint,
               self_cpu_ms double precision, total_cpu_ms double precision,
               self_pct double precision, total_pct double precision)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT g.service, p.function, p.module, p.self_samples, p.total_samples,
           p.self_cpu_ms, p.total_cpu_ms, p.self_pct, p.total_pct
      FROM (SELECT s.service, array_agg(s.stack_id) AS ids,
                   array_agg(s.samples) AS n, array_agg(s.cpu_ms) AS ms
              FROM traceprof._trace_stacks(p_trace, p_service) s
             GROUP BY s.service) g
     CROSS JOIN LATERAL traceprof._function_profile(g.ids, g.n, g.ms) p
     ORDER BY g.service COLLATE "C", traceprof._cpu_us(p.total_cpu_ms) DESC,
              traceprof._cpu_us(p.self_cpu_ms) DESC, p.function COLLATE "C", p.module COLLATE "C";
END $$;

CREATE OR REPLACE FUNCTION traceprof._trace_folded(p_trace uuid, p_service text)
RETURNS TABLE (service text, stack text, samples bigint, cpu_ms double precision)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT x.service, x.stack, x.samples, x.cpu_ms
      FROM (SELECT g.service,
                   CASE WHEN p_service IS NULL THEN traceprof._frame_label(g.service) || ';' ELSE '' END
                       || f.stack AS stack,
                   f.samples, f.cpu_ms
              FROM (SELECT s.service, array_agg(s.stack_id) AS ids,
                           array_agg(s.samples) AS n, array_agg(s.cpu_ms) AS ms
                      FROM traceprof._trace_stacks(p_trace, p_service) s
                     GROUP BY s.service) g
             CROSS JOIN LATERAL traceprof._folded(g.ids, g.n, g.ms) f) x
     ORDER BY x.service COLLATE "C", x.stack COLLATE "C";
END $$;

-- Per service and function of one trace: self (leaf) and total (anywhere on
-- the stack, recursion once) samples and CPU ms, and their percentage of the
-- service's CPU in the trace. Ordered by service, then total CPU descending.
CREATE OR REPLACE FUNCTION traceprof.trace_profile(trace_id text, service text DEFAULT NULL)
RETURNS TABLE (service text, function text, module text,
               self_samples bigint, total_samples bigint,
               self_cpu_ms double precision, total_cpu_ms double precision,
               self_pct double precision, total_pct double precision)
LANGUAGE sql STABLE AS $$
    SELECT * FROM traceprof._trace_profile(traceprof._arg_trace($1, 'trace_profile'),
                                           traceprof._arg_service($2, 'trace_profile'))
$$;

-- Folded stacks of one trace, one row per distinct stack. With service NULL
-- every stack starts with its service's name as the root frame.
CREATE OR REPLACE FUNCTION traceprof.trace_folded(trace_id text, service text DEFAULT NULL)
RETURNS TABLE (service text, stack text, samples bigint, cpu_ms double precision)
LANGUAGE sql STABLE AS $$
    SELECT * FROM traceprof._trace_folded(traceprof._arg_trace($1, 'trace_folded'),
                                          traceprof._arg_service($2, 'trace_folded'))
$$;

-- trace_folded as the text flamegraph.pl reads: "a;b;c N" lines, N in whole
-- microseconds of CPU, joined by newlines (no trailing one). NULL when the
-- trace has no samples.
CREATE OR REPLACE FUNCTION traceprof.trace_folded_text(trace_id text, service text DEFAULT NULL)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT string_agg(f.stack || ' ' || traceprof._cpu_us(f.cpu_ms), E'\n'
                      ORDER BY f.stack COLLATE "C")
      FROM traceprof._trace_folded(traceprof._arg_trace($1, 'trace_folded_text'),
                                   traceprof._arg_service($2, 'trace_folded_text')) f
$$;

-- Flame graph panel rows of one trace; value and self in microseconds of
-- CPU. With service NULL the services are the root's children.
CREATE OR REPLACE FUNCTION traceprof.trace_flamegraph(trace_id text, service text DEFAULT NULL)
RETURNS TABLE (level integer, value bigint, self bigint, label text)
LANGUAGE sql STABLE AS $$
    SELECT fg.*
      FROM (SELECT array_agg(f.stack) AS s, array_agg(traceprof._cpu_us(f.cpu_ms)) AS w
              FROM traceprof._trace_folded(traceprof._arg_trace($1, 'trace_flamegraph'),
                                           traceprof._arg_service($2, 'trace_flamegraph')) f) a
     CROSS JOIN LATERAL traceprof._flamegraph(a.s, a.w) fg
$$;
