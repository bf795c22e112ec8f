-- gpu.sql: _trace_gpu, _gpu_kernels, trace_gpu_kernels, _trace_gpu_stacks, trace_gpu_stacks,
-- _trace_gpu_folded, trace_gpu_folded.
--
-- A request's GPU time (traceprof.gpu, migration 015): the kernels its
-- launches ran on the GPU, per kernel and per launching CPU stack, and
-- folded stacks for flame graphs that end in the kernel's frame.
--
-- Workload: one trace, found through the trace_id hash index of gpu in the
-- partitions of the trace's window (a handful of rows); only the distinct
-- launch stacks are expanded, once.
--
-- GPU time is time on the GPU: it overlaps the request's wall time (the
-- launching thread goes on, on or off CPU, while the kernel runs; kernels
-- of one request may run side by side on several streams), so it is no
-- part of span = CPU + blocked + runqueue + other (trace_time_breakdown
-- shows it next to them, docs/gpu.md).
--
-- Units: *_ms columns are milliseconds of GPU time (double precision);
-- folded weights are whole microseconds, rounded once per folded stack
-- (the unit of trace_folded_text's N, so GPU and CPU lines of one flame
-- graph weigh alike), with the exact nanoseconds next to them.
--
-- A stack of traceprof.gpu ends in the kernel's frame: function name
-- '[gpu] ' || kernel, module '[gpu]'. The kernel of a stack is that leaf
-- function's name without the prefix ('[unknown]' when the leaf is not a
-- [gpu] frame or the stack is missing from the dictionary); its launch
-- stack is the folded CPU stack above it (frame labels as trace_folded's,
-- per service), '[no stack]' when the stack is the kernel's frame alone
-- (the launch's CPU stack was not taken).
-- Rows belong to the span row with their span id whatever their source
-- says; without a span row, to their source's service (as off-CPU rows).

-- The GPU time of one trace per (span, service of the source, stack id):
-- launches and nanoseconds, from the partitions of its window.
CREATE OR REPLACE FUNCTION traceprof._trace_gpu(p_trace uuid)
RETURNS TABLE (span_id bigint, service text, stack_id bigint, launches bigint, ns bigint)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    w record;
BEGIN
    SELECT * INTO w FROM traceprof._trace_window(p_trace);
    RETURN QUERY
    SELECT g.span_id, coalesce(src.service, '[unknown]'), u.stack_id, sum(u.n)::bigint,
           sum(u.ns)::bigint
      FROM traceprof.gpu g
     CROSS JOIN LATERAL unnest(g.stacks, g.launches, g.gpu_ns) AS u(stack_id, n, ns)
      LEFT JOIN traceprof.sources src ON src.source_id = g.source_id
     WHERE g.trace_id = p_trace
       AND g.bucket >= w.lo AND g.bucket <= w.hi
     GROUP BY g.span_id, 2, u.stack_id;
END $$;

-- The kernel of each distinct stack (the rule in the header of this file).
CREATE OR REPLACE FUNCTION traceprof._gpu_kernels(stack_ids bigint[])
RETURNS TABLE (stack_id bigint, kernel text)
-- nested loops on: a caller that turned them off for its bulk joins
-- (compare_gpu_cohorts) would otherwise have this read all of stacks
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET enable_nestloop = on AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT st.id,
           CASE WHEN f.module = '[gpu]' AND f.name LIKE '[gpu] _%'
                THEN traceprof._frame_label(substr(f.name, 7)) ELSE '[unknown]' END
      FROM (SELECT DISTINCT u.id FROM unnest(stack_ids) AS u(id) WHERE u.id IS NOT NULL) st
      LEFT JOIN traceprof.stacks s ON s.stack_id = st.id
      LEFT JOIN traceprof.functions f ON f.function_id = s.function_ids[cardinality(s.function_ids)];
END $$;

-- A request's GPU time per kernel, across the services of the trace (or
-- the one named): launches, GPU ms and the share of the trace's (that
-- service's) GPU time in %. Ordered by GPU time, then kernel.
CREATE OR REPLACE FUNCTION traceprof.trace_gpu_kernels(trace_id text, service text DEFAULT NULL)
RETURNS TABLE (kernel text, launches bigint, gpu_ms double precision, gpu_pct double precision)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    tid uuid := traceprof._arg_trace($1, 'trace_gpu_kernels');
    svc text := traceprof._arg_service($2, 'trace_gpu_kernels');
BEGIN
    RETURN QUERY
    WITH g AS MATERIALIZED (
        SELECT o.stack_id, o.launches, o.ns
          FROM traceprof._trace_gpu(tid) o
         WHERE svc IS NULL OR o.service = svc
    ), k AS (
        SELECT kk.kernel, sum(g.launches)::bigint AS launches, sum(g.ns) AS ns
          FROM g
          JOIN traceprof._gpu_kernels((SELECT array_agg(DISTINCT x.stack_id) FROM g x)) kk
            ON kk.stack_id = g.stack_id
         GROUP BY kk.kernel
    )
    SELECT k.kernel, k.launches, k.ns / 1e6::float8,
           100.0::float8 * k.ns / nullif(sum(k.ns) OVER (), 0)
      FROM k
     ORDER BY k.ns DESC, k.kernel COLLATE "C";
END $$;

-- A request's GPU time per service, launching CPU stack (folded, root
-- first, without the kernel's frame) and kernel. Ordered by GPU time.
-- (PL/pgSQL under an SQL function that names its arguments as users see
-- them: a PL/pgSQL function may not name a column as an argument.)
CREATE OR REPLACE FUNCTION traceprof._trace_gpu_stacks(tid uuid, svc text)
RETURNS TABLE (service text, launch_stack text, kernel text, launches bigint,
               gpu_ms double precision)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH g AS MATERIALIZED (
        SELECT o.service, o.stack_id, o.launches, o.ns
          FROM traceprof._trace_gpu(tid) o
         WHERE svc IS NULL OR o.service = svc
    ), fo AS (
        -- folded per service, as trace_gpu_folded labels frames
        SELECT sv.service, l.stack_id, l.stack
          FROM (SELECT g.service, array_agg(DISTINCT g.stack_id) AS ids FROM g GROUP BY g.service) sv
         CROSS JOIN LATERAL traceprof._stack_folded(sv.ids) l
    )
    SELECT x.service, x.launch_stack, x.kernel, x.launches, x.ns / 1e6::float8
      FROM (SELECT g.service,
                   CASE WHEN strpos(fo.stack, ';') > 0 THEN regexp_replace(fo.stack, ';[^;]*$', '')
                        WHEN kk.kernel = '[unknown]' THEN '[unknown]'
                        ELSE '[no stack]' END AS launch_stack,
                   kk.kernel, sum(g.launches)::bigint AS launches, sum(g.ns) AS ns
              FROM g
              JOIN traceprof._gpu_kernels((SELECT array_agg(DISTINCT y.stack_id) FROM g y)) kk
                ON kk.stack_id = g.stack_id
              LEFT JOIN fo ON fo.service = g.service AND fo.stack_id = g.stack_id
             GROUP BY 1, 2, 3) x
     ORDER BY x.ns DESC, x.service COLLATE "C", x.launch_stack COLLATE "C", x.kernel COLLATE "C";
END $$;

CREATE OR REPLACE FUNCTION traceprof.trace_gpu_stacks(trace_id text, service text DEFAULT NULL)
RETURNS TABLE (service text, launch_stack text, kernel text, launches bigint,
               gpu_ms double precision)
LANGUAGE sql STABLE AS $$
    SELECT * FROM traceprof._trace_gpu_stacks(traceprof._arg_trace($1, 'trace_gpu_stacks'),
                                              traceprof._arg_service($2, 'trace_gpu_stacks'))
$$;

-- Folded GPU stacks of one trace, one row per distinct folded stack and
-- service: "service;root;...;[gpu] kernel" with the frame labels of
-- trace_folded, weighted in whole microseconds of GPU time (us, rounded
-- once per row) and exact nanoseconds (ns), with the launches. A launch
-- without its CPU stack reads "service;[gpu] kernel".
CREATE OR REPLACE FUNCTION traceprof._trace_gpu_folded(tid uuid, svc text)
RETURNS TABLE (service text, stack text, launches bigint, us bigint, ns bigint)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT x.service, x.stack, x.launches, round(x.ns / 1000.0)::bigint, x.ns
      FROM (SELECT g.service, traceprof._frame_label(g.service) || ';' || f.stack AS stack,
                   sum(f.n)::bigint AS launches, sum(f.ns)::bigint AS ns
              FROM (SELECT o.service, array_agg(o.stack_id) AS ids, array_agg(o.launches) AS n,
                           array_agg(o.ns) AS ns
                      FROM traceprof._trace_gpu(tid) o
                     WHERE svc IS NULL OR o.service = svc
                     GROUP BY o.service) g
             CROSS JOIN LATERAL (
                SELECT coalesce(l.stack, '[unknown]') AS stack, u.n, u.ns
                  FROM unnest(g.ids, g.n, g.ns) AS u(id, n, ns)
                  LEFT JOIN traceprof._stack_folded(g.ids) l ON l.stack_id = u.id) f
             GROUP BY g.service, f.stack) x
     ORDER BY x.service COLLATE "C", x.stack COLLATE "C";
END $$;

CREATE OR REPLACE FUNCTION traceprof.trace_gpu_folded(trace_id text, service text DEFAULT NULL)
RETURNS TABLE (service text, stack text, launches bigint, us bigint, ns bigint)
LANGUAGE sql STABLE AS $$
    SELECT * FROM traceprof._trace_gpu_folded(traceprof._arg_trace($1, 'trace_gpu_folded'),
                                              traceprof._arg_service($2, 'trace_gpu_folded'))
$$;
