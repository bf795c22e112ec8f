-- offcpu.sql: _arg_offcpu_kind, _trace_offcpu, _offcpu_blockers, _trace_breakdown,
-- trace_time_breakdown (with the GPU time of gpu.sql), trace_offcpu_folded.
--
-- Where a request's time went: on CPU (estimated from its samples, as
-- trace_services counts them: raised rows per source when it has any) and
-- off CPU (traceprof.offcpu, migration 013: blocked, or runnable and
-- waiting for a CPU, measured by the scheduler), per span of the trace.
--
-- Workload: one trace, found through the trace_id hash indexes of samples,
-- trigger_samples and offcpu in the partitions of the trace's window (a
-- handful of rows each); only the distinct blocked stacks are expanded into
-- functions, once.
--
-- Units: *_ms columns are milliseconds (double precision); off-CPU weights
-- of folded stacks are whole microseconds (as stored), the unit of
-- trace_folded_text's N.
--
-- Off-CPU rows belong to the span row with their span id whatever their
-- source says; without a span row, to their source's service (the rule of
-- _trace_spans for samples).
--
-- The blocking function of a blocked stack (docs/offcpu.md, "Reading it"),
-- from its user frames (functions.kind other than 1, kernel): the frames
-- at the leaf end that share the leaf-most user frame's module are the
-- library (or code) the thread blocked in; the blocking function is the
-- root-most of them, the one the rest of the program called
-- (pthread_mutex_lock, read, poll, nanosleep), and its caller is the frame
-- just above it, in another module: the program's own code that waited
-- (ledger_append). When every user frame is of one module (a static
-- binary), the blocking function is the leaf-most user frame whose name
-- does not start with '_' (internal helpers such as __lll_lock_wait), its
-- caller the frame above it. A stack without user frames names its leaf
-- frame; stack id 0 (intervals recorded without a stack) reads
-- '[no stack]'; a stack missing from the dictionary '[unknown]'.

-- An off-CPU kind by name: 'blocked' = 1, 'runqueue' = 2.
CREATE OR REPLACE FUNCTION traceprof._arg_offcpu_kind(value text, fn text) RETURNS smallint
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF value = 'blocked' THEN
        RETURN 1;
    ELSIF value = 'runqueue' THEN
        RETURN 2;
    END IF;
    RAISE EXCEPTION '%: unknown off-CPU kind %', fn, coalesce(quote_literal(value), 'NULL')
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'kind is ''blocked'' or ''runqueue''';
END $$;

-- The off-CPU time of one trace per (span, service of the source, kind,
-- stack id), in microseconds, from the partitions of its window.
CREATE OR REPLACE FUNCTION traceprof._trace_offcpu(p_trace uuid)
RETURNS TABLE (span_id bigint, service text, kind smallint, stack_id bigint, us bigint)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    w record;
BEGIN
    SELECT * INTO w FROM traceprof._trace_window(p_trace);
    RETURN QUERY
    SELECT o.span_id, coalesce(src.service, '[unknown]'), o.kind, u.stack_id, sum(u.us)::bigint
      FROM traceprof.offcpu o
     CROSS JOIN LATERAL unnest(o.stacks, o.us) AS u(stack_id, us)
      LEFT JOIN traceprof.sources src ON src.source_id = o.source_id
     WHERE o.trace_id = p_trace
       AND o.bucket >= w.lo AND o.bucket <= w.hi
     GROUP BY o.span_id, 2, o.kind, u.stack_id;
END $$;

-- The blocking function and its caller of each distinct stack (the rule in
-- the header of this file).
CREATE OR REPLACE FUNCTION traceprof._offcpu_blockers(stack_ids bigint[])
RETURNS TABLE (stack_id bigint, function text, caller text)
-- nested loops on: a caller that turned them off for its bulk joins
-- (compare_offcpu_cohorts) would otherwise have this read all of stacks
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET enable_nestloop = on AS $$
#variable_conflict use_column
BEGIN
    -- PL/pgSQL, not SQL: its plan is made once per session, where an SQL
    -- function that cannot be inlined is planned at every call (0.5 ms)
    RETURN QUERY
    WITH st AS (
        SELECT DISTINCT u.id FROM unnest(stack_ids) AS u(id) WHERE u.id IS NOT NULL
    ), fr AS (
        SELECT st.id AS stack_id, x.ord, coalesce(f.name, '[unknown]') AS name,
               coalesce(f.module, '') AS module, coalesce(f.kind, 2) AS kind
          FROM st
          JOIN traceprof.stacks s ON s.stack_id = st.id
         CROSS JOIN LATERAL unnest(s.function_ids) WITH ORDINALITY AS x(function_id, ord)
          LEFT JOIN traceprof.functions f ON f.function_id = x.function_id
    ), usr AS (
        SELECT fr.*, first_value(fr.module) OVER (PARTITION BY fr.stack_id ORDER BY fr.ord DESC) AS leaf_module,
               lag(fr.name) OVER (PARTITION BY fr.stack_id ORDER BY fr.ord) AS parent
          FROM fr
         WHERE fr.kind <> 1
    ), edge AS (
        SELECT u.stack_id, max(u.ord) FILTER (WHERE u.module <> u.leaf_module) AS b
          FROM usr u
         GROUP BY u.stack_id
    ), pick AS (
        SELECT DISTINCT ON (u.stack_id) u.stack_id, u.ord, u.name, u.parent
          FROM usr u
          JOIN edge e ON e.stack_id = u.stack_id
         WHERE CASE WHEN e.b IS NOT NULL THEN u.ord > e.b ELSE u.name !~ '^_' END
         ORDER BY u.stack_id, CASE WHEN e.b IS NOT NULL THEN u.ord ELSE -u.ord END
    ), leaf AS (
        SELECT DISTINCT ON (fr.stack_id) fr.stack_id, fr.name
          FROM fr
         ORDER BY fr.stack_id, fr.ord DESC
    )
    SELECT st.id,
           CASE WHEN st.id = 0 THEN '[no stack]' ELSE coalesce(p.name, l.name, '[unknown]') END,
           p.parent -- the user frame above it
      FROM st
      LEFT JOIN pick p ON p.stack_id = st.id
      LEFT JOIN leaf l ON l.stack_id = st.id;
END $$;

-- Per span of one trace (the rows of _trace_spans, given the trace's
-- samples as its aligned arrays), with the span's off-CPU time: blocked_ms,
-- runq_ms, other_ms = span - cpu - blocked - runq clamped at 0 (time the
-- threads did not carry the request's context, or that was not seen: a
-- span served by no profiled thread, intervals below no threshold lost),
-- excess_ms = what cpu + blocked + runq exceed the span by (the sampling
-- error of the CPU estimate, intervals that began before the span), so
-- nothing is hidden by the clamp. has_offcpu: the span has off-CPU rows.
-- blocked_by: the top_n blocking functions of the span by blocked time,
-- [{function, caller, ms, pct}] (pct of the span's blocked time; caller:
-- the one with most time for that function; top_blocked of them, top_n
-- when NULL). A span with off-CPU rows but
-- neither a span row nor samples is a row too (verdict 'unknown').
CREATE OR REPLACE FUNCTION traceprof._trace_breakdown(p_trace uuid, p_spans bigint[], p_services text[],
                                           p_stacks bigint[], p_samples bigint[],
                                           p_cpu_ms double precision[], top_n integer,
                                           top_blocked integer DEFAULT NULL)
RETURNS TABLE (service text, span_id bigint, parent_span_id bigint, method text, route text,
               status integer, start_time timestamptz, span_ms double precision,
               samples bigint, cpu_ms double precision, cpu_pct double precision,
               top_function text, top_pct double precision, top_cpu_ms double precision,
               verdict text, hotspots jsonb, blocked_ms double precision, runq_ms double precision,
               other_ms double precision, excess_ms double precision, has_offcpu boolean,
               blocked_by jsonb)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH sp AS MATERIALIZED (
        SELECT * FROM traceprof._trace_spans(p_trace, p_spans, p_services, p_stacks, p_samples, p_cpu_ms, top_n)
    ), off AS MATERIALIZED (
        -- owned by the span row's service when the span has a row
        SELECT o.span_id, coalesce(r.service, o.service) AS service, o.kind, o.stack_id, o.us
          FROM traceprof._trace_offcpu(p_trace) o
          LEFT JOIN (SELECT DISTINCT s.span_id, s.service FROM sp s WHERE s.start_time IS NOT NULL) r
                 ON r.span_id = o.span_id
    ), tot AS (
        SELECT coalesce(o.span_id, 0) AS sid, o.span_id, o.service,
               coalesce(sum(o.us) FILTER (WHERE o.kind = 1), 0) / 1000.0::float8 AS blocked_ms,
               coalesce(sum(o.us) FILTER (WHERE o.kind = 2), 0) / 1000.0::float8 AS runq_ms,
               sum(o.us) FILTER (WHERE o.kind = 1) AS blocked_us
          FROM off o
         GROUP BY o.span_id, o.service
    ), fn AS (
        SELECT coalesce(o.span_id, 0) AS sid, o.service, b.function,
               sum(o.us) AS us, (array_agg(b.caller ORDER BY o.us DESC, b.caller COLLATE "C"))[1] AS caller
          FROM off o
          JOIN traceprof._offcpu_blockers((SELECT array_agg(DISTINCT x.stack_id) FROM off x WHERE x.kind = 1)) b
            ON b.stack_id = o.stack_id
         WHERE o.kind = 1
         GROUP BY 1, o.service, b.function
    ), tops AS (
        SELECT r.sid, r.service,
               jsonb_agg(jsonb_build_object('function', r.function, 'caller', r.caller,
                                            'ms', round(r.us / 1000.0, 1),
                                            'pct', round(100.0 * r.us / t.blocked_us, 1))
                         ORDER BY r.rank) FILTER (WHERE r.rank <= coalesce(top_blocked, top_n)) AS list
          FROM (SELECT fn.*, row_number() OVER (PARTITION BY fn.sid, fn.service
                                                ORDER BY fn.us DESC, fn.function COLLATE "C") AS rank
                  FROM fn) r
          JOIN tot t ON t.sid = r.sid AND t.service = r.service
         GROUP BY r.sid, r.service
    )
    SELECT coalesce(s.service, t.service), coalesce(s.span_id, t.span_id), s.parent_span_id,
           s.method, s.route, s.status, s.start_time, s.span_ms,
           coalesce(s.samples, 0), coalesce(s.cpu_ms, 0), s.cpu_pct,
           s.top_function, s.top_pct, s.top_cpu_ms, coalesce(s.verdict, 'unknown'),
           coalesce(s.hotspots, '[]'),
           coalesce(t.blocked_ms, 0), coalesce(t.runq_ms, 0),
           -- greatest() ignores NULLs: without a span row both stay NULL
           CASE WHEN s.span_ms IS NOT NULL
                THEN greatest(s.span_ms - coalesce(s.cpu_ms, 0) - coalesce(t.blocked_ms, 0)
                              - coalesce(t.runq_ms, 0), 0) END,
           CASE WHEN s.span_ms IS NOT NULL
                THEN greatest(coalesce(s.cpu_ms, 0) + coalesce(t.blocked_ms, 0) + coalesce(t.runq_ms, 0)
                              - s.span_ms, 0) END,
           t.service IS NOT NULL,
           coalesce(tp.list, '[]')
      FROM sp s
      FULL JOIN tot t ON t.sid = coalesce(s.span_id, 0) AND t.service = s.service
      LEFT JOIN tops tp ON tp.sid = t.sid AND tp.service = t.service
     ORDER BY s.start_time NULLS LAST, coalesce(s.service, t.service) COLLATE "C",
              coalesce(s.span_id, t.span_id) NULLS LAST;
END $$;

-- Per span of one trace, across services: where its time went. gpu_ms is
-- the GPU time of the span's kernel launches (gpu.sql): it overlaps the
-- span's wall time and is no part of cpu + blocked + runq + other. A span
-- with GPU rows only is a row too (cpu, blocked, runq 0, the rest NULL).
-- The form before gpu_ms is dropped first (its columns differ).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_proc p
                WHERE p.oid = to_regprocedure('traceprof.trace_time_breakdown(text)')
                  AND NOT ('gpu_ms' = ANY (p.proargnames))) THEN
        DROP FUNCTION traceprof.trace_time_breakdown(text);
    END IF;
END $$;
CREATE OR REPLACE FUNCTION traceprof.trace_time_breakdown(trace_id text)
RETURNS TABLE (service text, span_id text, parent_span_id text, start_time timestamptz,
               span_ms double precision, cpu_ms double precision, blocked_ms double precision,
               runq_ms double precision, other_ms double precision, excess_ms double precision,
               top_function text, blocked_by jsonb, gpu_ms double precision)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    tid uuid := traceprof._arg_trace($1, 'trace_time_breakdown');
BEGIN
    RETURN QUERY
    WITH x AS MATERIALIZED (
        SELECT b.*
          FROM (SELECT array_agg(s.span_id) AS spans, array_agg(s.service) AS svcs,
                       array_agg(s.stack_id) AS ids, array_agg(s.samples) AS n,
                       array_agg(s.cpu_ms) AS ms
                  FROM traceprof._trace_span_stacks(tid) s) g
         CROSS JOIN LATERAL traceprof._trace_breakdown(tid, g.spans, g.svcs, g.ids, g.n, g.ms, 3)
               WITH ORDINALITY AS b
    ), gpu AS (
        -- owned by the span row's service when the span has a row
        SELECT coalesce(o.span_id, 0) AS sid, o.span_id, coalesce(r.service, o.service) AS service,
               sum(o.ns) / 1e6::float8 AS ms
          FROM traceprof._trace_gpu(tid) o
          LEFT JOIN (SELECT DISTINCT x.span_id, x.service FROM x WHERE x.start_time IS NOT NULL) r
                 ON r.span_id = o.span_id
         GROUP BY 1, 2, 3
    )
    SELECT coalesce(x.service, u.service), traceprof.span_id_text(coalesce(x.span_id, u.span_id)),
           traceprof.span_id_text(x.parent_span_id), x.start_time, x.span_ms,
           coalesce(x.cpu_ms, 0), coalesce(x.blocked_ms, 0), coalesce(x.runq_ms, 0), x.other_ms,
           x.excess_ms, x.top_function, coalesce(x.blocked_by, '[]'), coalesce(u.ms, 0)
      FROM x
      FULL JOIN gpu u ON u.sid = coalesce(x.span_id, 0) AND u.service = x.service
     ORDER BY x.ordinality NULLS LAST, u.service COLLATE "C", u.span_id NULLS LAST;
END $$;

-- Folded off-CPU stacks of one trace, one row per distinct folded stack
-- and service: "service;root;...;leaf" with the frame labels of
-- trace_folded, weighted in whole microseconds off CPU of the kind asked
-- for ('blocked' or 'runqueue'). Time without a stack reads
-- "service;[no stack]".
CREATE OR REPLACE FUNCTION traceprof.trace_offcpu_folded(trace_id text, kind text DEFAULT 'blocked')
RETURNS TABLE (service text, stack text, us bigint)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    tid uuid := traceprof._arg_trace($1, 'trace_offcpu_folded');
    k smallint := traceprof._arg_offcpu_kind($2, 'trace_offcpu_folded');
BEGIN
    RETURN QUERY
    SELECT x.service, x.stack, x.us
      FROM (SELECT g.service, traceprof._frame_label(g.service) || ';' || f.stack AS stack,
                   sum(f.us)::bigint AS us
              FROM (SELECT o.service, array_agg(o.stack_id) AS ids, array_agg(o.us) AS us
                      FROM traceprof._trace_offcpu(tid) o
                     WHERE o.kind = k
                     GROUP BY o.service) g
             CROSS JOIN LATERAL (
                SELECT CASE WHEN u.id = 0 THEN '[no stack]' ELSE coalesce(l.stack, '[unknown]') END AS stack,
                       u.us
                  FROM unnest(g.ids, g.us) AS u(id, us)
                  LEFT JOIN traceprof._stack_folded(g.ids) l ON l.stack_id = u.id) f
             GROUP BY g.service, f.stack) x
     ORDER BY x.service COLLATE "C", x.stack COLLATE "C";
END $$;
