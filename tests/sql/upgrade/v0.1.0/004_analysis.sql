-- 004_analysis: the functions users call to read profiles: one trace (per
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
--      traceprof.stack_function_weights (003), or into frame labels for
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

-- A trace's samples are looked for between the earliest start of its
-- requests minus this margin and the latest end plus this margin, so that
-- only one or two daily partitions are probed. The margin covers the sample
-- time bucket, clock skew between nodes and work that outlives the spans by
-- a little; tagged samples further away are not counted. A trace without
-- request rows is looked up in every partition.
INSERT INTO traceprof.config (key, value, description) VALUES
    ('trace_window_margin', '5 minutes',
     'trace functions look for a trace''s samples this long before its first request starts and after its last one ends')
ON CONFLICT (key) DO NOTHING;

-- Argument checks -----------------------------------------------------------

-- Returns value, or raises an error naming fn and param when it is NULL or
-- empty.
CREATE FUNCTION traceprof._arg_required(value text, fn text, param text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF value IS NULL OR value = '' THEN
        RAISE EXCEPTION '%: % must not be null or empty', fn, param
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN value;
END $$;

-- An optional service filter: NULL means every service; '' is refused
-- rather than silently matching nothing.
CREATE FUNCTION traceprof._arg_service(value text, fn text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF value = '' THEN
        RAISE EXCEPTION '%: service must not be empty', fn
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'pass NULL for every service';
    END IF;
    RETURN value;
END $$;

-- A required trace id in text form, parsed (the parse error quotes it).
CREATE FUNCTION traceprof._arg_trace(value text, fn text) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT traceprof.parse_trace_id(traceprof._arg_required($1, $2, 'trace_id'))
$$;

-- Checks a time range [from_time, until_time).
CREATE FUNCTION traceprof._arg_range(from_time timestamptz, until_time timestamptz, fn text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    IF from_time IS NULL THEN
        RAISE EXCEPTION '%: from_time must not be null', fn USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF until_time IS NULL THEN
        RAISE EXCEPTION '%: until_time must not be null', fn USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF until_time <= from_time THEN
        RAISE EXCEPTION '%: until_time % is not after from_time %', fn, until_time, from_time
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END $$;

-- Step 1: samples per stack -------------------------------------------------

-- The samples of one trace per (service, stack id): raw count and CPU ms.
-- service NULL: every service. Both queries are hash index lookups whatever
-- the trace, so one generic plan serves every call; the partitions outside
-- the time window are pruned when it starts. (Planning afresh at each call
-- cost more than running it.)
CREATE FUNCTION traceprof._trace_stacks(p_trace uuid, p_service text)
RETURNS TABLE (service text, stack_id bigint, samples bigint, cpu_ms double precision)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    lo timestamptz;
    hi timestamptz;
    margin interval;
BEGIN
    SELECT min(r.start_time), max(r.start_time + r.duration_us * interval '1 microsecond')
      INTO lo, hi
      FROM traceprof.requests r
     WHERE r.trace_id = p_trace;
    IF lo IS NULL THEN
        lo := '-infinity';
        hi := 'infinity';
    ELSE
        margin := coalesce((SELECT c.value::interval FROM traceprof.config c
                             WHERE c.key = 'trace_window_margin'), interval '5 minutes');
        lo := lo - margin;
        hi := hi + margin;
    END IF;
    -- Aggregate per (source, hz, stack) in integers first; one division per
    -- group keeps the CPU time exact up to rounding of the final sum.
    -- A source not (yet) in the dictionary counts as service "[unknown]".
    RETURN QUERY
    SELECT coalesce(src.service, '[unknown]'), x.stack_id, sum(x.n)::bigint,
           sum(x.n * 1000.0::float8 / x.hz)
      FROM (SELECT s.source_id, s.hz, u.stack_id, sum(coalesce(u.n, 1)) AS n
              FROM traceprof.samples s
              CROSS JOIN LATERAL unnest(s.stacks, s.counts) AS u(stack_id, n)
             WHERE s.trace_id = p_trace
               AND s.bucket >= lo AND s.bucket <= hi
             GROUP BY s.source_id, s.hz, u.stack_id) x
      LEFT JOIN traceprof.sources src ON src.source_id = x.source_id
     WHERE p_service IS NULL OR coalesce(src.service, '[unknown]') = p_service
     GROUP BY 1, x.stack_id;
END $$;

-- The samples of one service in [from_time, until_time) per stack id, all
-- of them or (only_requests) those tagged with a trace.
CREATE FUNCTION traceprof._service_stacks(p_service text, from_time timestamptz,
                                          until_time timestamptz, only_requests boolean)
RETURNS TABLE (stack_id bigint, samples bigint, cpu_ms double precision)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    srcs bigint[] := traceprof.service_sources(p_service);
BEGIN
    IF cardinality(srcs) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT x.stack_id, sum(x.n)::bigint, sum(x.n * 1000.0::float8 / x.hz)
      FROM (SELECT s.hz, u.stack_id, sum(coalesce(u.n, 1)) AS n
              FROM traceprof.samples s
              CROSS JOIN LATERAL unnest(s.stacks, s.counts) AS u(stack_id, n)
             WHERE s.source_id = ANY (srcs)
               AND s.bucket >= from_time AND s.bucket < until_time
               AND (NOT only_requests OR s.trace_id IS NOT NULL)
             GROUP BY s.hz, u.stack_id) x
     GROUP BY x.stack_id;
END $$;

-- Step 2: expanding distinct stacks -----------------------------------------

-- Per function of the given stacks: self and total samples and CPU ms, and
-- the percentages of all the CPU of the given stacks. Inputs are aligned
-- arrays (one entry per stack id).
--
-- Expanding stacks into functions is the costly step. When every stack has
-- the same CPU per sample (one frequency, the common case) the sample counts
-- follow from the CPU weights and one expansion does; otherwise (19 Hz and
-- 99 Hz samples mixed) samples and CPU are expanded separately.
CREATE FUNCTION traceprof._function_profile(stack_ids bigint[], samples bigint[], cpu_ms double precision[])
RETURNS TABLE (function_id bigint, function text, module text,
               self_samples bigint, total_samples bigint,
               self_cpu_ms double precision, total_cpu_ms double precision,
               self_pct double precision, total_pct double precision)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    total_ms double precision;
    ms_per_sample double precision;
    lo double precision;
    hi double precision;
BEGIN
    SELECT sum(u.ms), sum(u.ms) / sum(u.n), min(u.ms / u.n), max(u.ms / u.n)
      INTO total_ms, ms_per_sample, lo, hi
      FROM unnest(samples, cpu_ms) AS u(n, ms)
     WHERE u.n > 0;
    IF total_ms IS NULL OR total_ms <= 0 THEN
        RETURN;
    END IF;
    IF hi - lo <= 1e-9 * hi THEN
        RETURN QUERY
        SELECT w.function_id, coalesce(f.name, '[unknown]'), coalesce(f.module, ''),
               round(w.self_weight / ms_per_sample)::bigint, round(w.total_weight / ms_per_sample)::bigint,
               w.self_weight, w.total_weight,
               100 * w.self_weight / total_ms, 100 * w.total_weight / total_ms
          FROM traceprof.stack_function_weights(stack_ids, cpu_ms) w
          LEFT JOIN traceprof.functions f ON f.function_id = w.function_id;
    ELSE
        RETURN QUERY
        SELECT w.function_id, coalesce(f.name, '[unknown]'), coalesce(f.module, ''),
               round(n.self_weight)::bigint, round(n.total_weight)::bigint,
               w.self_weight, w.total_weight,
               100 * w.self_weight / total_ms, 100 * w.total_weight / total_ms
          FROM traceprof.stack_function_weights(stack_ids, cpu_ms) w
          JOIN traceprof.stack_function_weights(stack_ids, samples::double precision[]) n
            ON n.function_id = w.function_id
          LEFT JOIN traceprof.functions f ON f.function_id = w.function_id;
    END IF;
END $$;

-- A function name made safe for folded stacks: ';' separates frames, a
-- line is one stack, byte 0x01 is the flame graph builder's sort separator;
-- a frame needs a name.
CREATE FUNCTION traceprof._frame_label(name text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(nullif(translate($1, E';\n\r\x01', ':   '), ''), '[unknown]')
$$;

-- The folded form ("root;...;leaf") of each distinct stack. Functions
-- missing from the dictionaries read "[unknown]", as in
-- stack_function_weights. A name that two functions of different modules
-- share within these stacks gets its module: "name [module]". Labels are
-- made once per distinct frame, then strung together per stack.
CREATE FUNCTION traceprof._stack_folded(stack_ids bigint[])
RETURNS TABLE (stack_id bigint, stack text)
LANGUAGE sql STABLE AS $$
    WITH st AS (
        SELECT u.id AS stack_id, coalesce(s.function_ids, ARRAY[0::bigint]) AS function_ids
          FROM (SELECT DISTINCT u.id FROM unnest($1) AS u(id)) u
          LEFT JOIN traceprof.stacks s ON s.stack_id = u.id
    ), fn AS (
        SELECT d.function_id,
               traceprof._frame_label(
                   CASE WHEN f.module <> '' AND count(*) OVER (PARTITION BY f.name) > 1
                        THEN f.name || ' [' || f.module || ']'
                        ELSE f.name END) AS label
          FROM (SELECT DISTINCT x.function_id
                  FROM st CROSS JOIN LATERAL unnest(st.function_ids) AS x(function_id)) d
          LEFT JOIN traceprof.functions f ON f.function_id = d.function_id
    )
    SELECT st.stack_id, string_agg(coalesce(fn.label, '[unknown]'), ';' ORDER BY x.ord)
      FROM st
     CROSS JOIN LATERAL unnest(st.function_ids) WITH ORDINALITY AS x(function_id, ord)
      LEFT JOIN fn ON fn.function_id = x.function_id
     GROUP BY st.stack_id
$$;

-- Folded stacks of the given stacks (aligned arrays); stacks that read the
-- same are merged.
CREATE FUNCTION traceprof._folded(stack_ids bigint[], samples bigint[], cpu_ms double precision[])
RETURNS TABLE (stack text, samples bigint, cpu_ms double precision)
LANGUAGE sql STABLE AS $$
    SELECT l.stack, sum(u.n)::bigint, sum(u.ms)
      FROM unnest($1, $2, $3) AS u(id, n, ms)
      JOIN traceprof._stack_folded($1) l ON l.stack_id = u.id
     GROUP BY l.stack
$$;

-- Whole microseconds of CPU: the unit of folded text and flame graph rows.
CREATE FUNCTION traceprof._cpu_us(cpu_ms double precision) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT round($1 * 1000)::bigint $$;

-- Flame graph rows from folded stacks and their weights (aligned arrays):
-- the nested set that Grafana's flame graph panel reads. One root "total"
-- at level 0; a node's children follow it (depth-first pre-order), siblings
-- sorted by label (byte order); value = own weight + children's values,
-- self = own weight. _flamegraph_arrays returns the rows' columns as arrays
-- in that order; _flamegraph streams them as rows (RETURN QUERY from
-- PL/pgSQL would copy them into a tuplestore first).
--
-- The stacks are sorted as label arrays, so the stacks under a node are
-- adjacent. (They are sorted as strings with byte 0x01 in place of ';',
-- which gives the same order at a third of the cost; labels must not
-- contain ';' or 0x01, which _frame_label sees to.) One pass keeps the path
-- of open nodes: a stack closes the nodes
-- it leaves and opens its new ones. With cum the weight of the stacks seen
-- so far, a node's value is cum at its close minus cum at its open. The
-- nodes one stack opens are consecutive rows and share that opening cum,
-- so the open path is kept as a few segments (first depth, row offset,
-- cum), and a node costs two array writes when opened and one when closed.
CREATE FUNCTION traceprof._flamegraph_arrays(stacks text[], weights bigint[],
                                             OUT levels integer[], OUT vals bigint[],
                                             OUT selfs bigint[], OUT labels text[])
LANGUAGE plpgsql STABLE AS $$
DECLARE
    st record;
    fr text[];                       -- the current stack's labels
    n integer;                       -- its frames
    c integer;                       -- frames it shares with the open path
    k integer := 0;                  -- depth of the open path
    lo integer;
    b integer;
    v bigint;
    rows integer := 1;               -- output rows so far; row 1 is the root
    cum bigint := 0;                 -- weight of the stacks seen so far
    path text[] := '{}';             -- labels of the open path, by depth
    m integer := 0;                  -- segments of the open path
    seg_lo integer[] := '{}';        -- first depth of a segment
    seg_base integer[] := '{}';      -- row of depth d in it: seg_base + d
    seg_cum bigint[] := '{}';        -- cum when it was opened
    o_level integer[] := '{0}';
    o_value bigint[] := '{0}';
    o_self bigint[] := '{0}';        -- NULL or missing: no own weight
    o_label text[] := '{total}';
BEGIN
    FOR st IN
        SELECT string_to_array(u.s, ';') AS fr, u.w
          FROM unnest(stacks, weights) AS u(s, w)
         WHERE u.s IS NOT NULL AND u.w IS NOT NULL
         ORDER BY replace(u.s, ';', E'\x01') COLLATE "C"
    LOOP
        fr := st.fr;
        n := cardinality(fr);
        c := 0;
        WHILE c < k AND c < n AND fr[c + 1] = path[c + 1] LOOP
            c := c + 1;
        END LOOP;
        WHILE k > c LOOP                     -- close the nodes the stack leaves
            lo := greatest(seg_lo[m], c + 1);
            b := seg_base[m];
            v := cum - seg_cum[m];
            FOR d IN lo .. k LOOP
                o_value[b + d] := v;
            END LOOP;
            IF lo = seg_lo[m] THEN
                m := m - 1;
            END IF;
            k := lo - 1;
        END LOOP;
        IF n > c THEN                        -- open its new ones
            m := m + 1;
            seg_lo[m] := c + 1;
            seg_base[m] := rows - c;
            seg_cum[m] := cum;
            FOR d IN c + 1 .. n LOOP
                o_level[rows - c + d] := d;
                o_label[rows - c + d] := fr[d];
            END LOOP;
            rows := rows + n - c;
        END IF;
        k := n;
        path := fr;
        b := CASE WHEN n = 0 THEN 1 ELSE seg_base[m] + n END;  -- an empty stack is the root's own
        o_self[b] := coalesce(o_self[b], 0) + st.w;
        cum := cum + st.w;
    END LOOP;
    IF NOT FOUND THEN                        -- no stacks: NULLs, no rows
        RETURN;
    END IF;
    WHILE m > 0 LOOP
        FOR d IN seg_lo[m] .. k LOOP
            o_value[seg_base[m] + d] := cum - seg_cum[m];
        END LOOP;
        k := seg_lo[m] - 1;
        m := m - 1;
    END LOOP;
    o_value[1] := cum;
    levels := o_level;
    vals := o_value;
    selfs := o_self;
    labels := o_label;
END $$;

-- Set-returning functions in the select list stream their rows; in FROM
-- each would be copied into a tuplestore first.
CREATE FUNCTION traceprof._flamegraph(stacks text[], weights bigint[])
RETURNS TABLE (level integer, value bigint, self bigint, label text)
LANGUAGE sql STABLE AS $$
    SELECT x.level, x.value, coalesce(x.self, 0), x.label
      FROM (SELECT unnest(g.levels) AS level, unnest(g.vals) AS value,
                   unnest(g.selfs) AS self, unnest(g.labels) AS label
              FROM traceprof._flamegraph_arrays($1, $2) g) x
$$;

-- Internal forms of the trace functions, taking a parsed trace id. PL/pgSQL
-- with generic plans, so that a session plans their queries once: the trace
-- id only reaches the functions they call, and re-planning each call took
-- longer than running the query.

CREATE FUNCTION traceprof._trace_profile(p_trace uuid, p_service text)
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

CREATE FUNCTION traceprof._trace_folded(p_trace uuid, p_service text)
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

-- One trace -----------------------------------------------------------------

-- Per service and function of one trace: self (leaf) and total (anywhere on
-- the stack, recursion once) samples and CPU ms, and their percentage of the
-- service's CPU in the trace. Ordered by service, then total CPU descending.
CREATE FUNCTION traceprof.trace_profile(trace_id text, service text DEFAULT NULL)
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
CREATE FUNCTION traceprof.trace_folded(trace_id text, service text DEFAULT NULL)
RETURNS TABLE (service text, stack text, samples bigint, cpu_ms double precision)
LANGUAGE sql STABLE AS $$
    SELECT * FROM traceprof._trace_folded(traceprof._arg_trace($1, 'trace_folded'),
                                          traceprof._arg_service($2, 'trace_folded'))
$$;

-- trace_folded as the text flamegraph.pl reads: "a;b;c N" lines, N in whole
-- microseconds of CPU, joined by newlines (no trailing one). NULL when the
-- trace has no samples.
CREATE FUNCTION traceprof.trace_folded_text(trace_id text, service text DEFAULT NULL)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT string_agg(f.stack || ' ' || traceprof._cpu_us(f.cpu_ms), E'\n'
                      ORDER BY f.stack COLLATE "C")
      FROM traceprof._trace_folded(traceprof._arg_trace($1, 'trace_folded_text'),
                                   traceprof._arg_service($2, 'trace_folded_text')) f
$$;

-- Flame graph panel rows of one trace; value and self in microseconds of
-- CPU. With service NULL the services are the root's children.
CREATE FUNCTION traceprof.trace_flamegraph(trace_id text, service text DEFAULT NULL)
RETURNS TABLE (level integer, value bigint, self bigint, label text)
LANGUAGE sql STABLE AS $$
    SELECT fg.*
      FROM (SELECT array_agg(f.stack) AS s, array_agg(traceprof._cpu_us(f.cpu_ms)) AS w
              FROM traceprof._trace_folded(traceprof._arg_trace($1, 'trace_flamegraph'),
                                           traceprof._arg_service($2, 'trace_flamegraph')) f) a
     CROSS JOIN LATERAL traceprof._flamegraph(a.s, a.w) fg
$$;

-- One service over a time range ---------------------------------------------

-- The lim functions of a service with the most self CPU in [from_time,
-- until_time): every sample, or only_requests those taken while serving a
-- traced request. Percentages are of the service's CPU in the range.
CREATE FUNCTION traceprof.service_top_functions(service text, from_time timestamptz,
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
CREATE FUNCTION traceprof.service_folded(service text, from_time timestamptz,
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
CREATE FUNCTION traceprof.service_folded_text(service text, from_time timestamptz,
                                              until_time timestamptz, only_requests boolean DEFAULT false)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT string_agg(f.stack || ' ' || traceprof._cpu_us(f.cpu_ms), E'\n' ORDER BY f.stack COLLATE "C")
      FROM traceprof.service_folded($1, $2, $3, $4) f
$$;

-- Flame graph panel rows of a service over [from_time, until_time).
CREATE FUNCTION traceprof.service_flamegraph(service text, from_time timestamptz,
                                             until_time timestamptz, only_requests boolean DEFAULT false)
RETURNS TABLE (level integer, value bigint, self bigint, label text)
LANGUAGE sql STABLE AS $$
    SELECT fg.*
      FROM (SELECT array_agg(f.stack) AS s, array_agg(traceprof._cpu_us(f.cpu_ms)) AS w
              FROM traceprof.service_folded($1, $2, $3, $4) f) a
     CROSS JOIN LATERAL traceprof._flamegraph(a.s, a.w) fg
$$;

-- The heaviest path of a flame graph: from the root, the child with the most
-- weight at each level (ties: the smaller function id). Given the stacks
-- and their weights (aligned arrays), one row per level with the function
-- and its weight and share of the whole. The first level whose share drops
-- below the whole is where the CPU narrows into one subtree: the verdict of
-- trace_summary names it.
CREATE FUNCTION traceprof.hot_path(stack_ids bigint[], weights double precision[])
RETURNS TABLE (depth integer, function_id bigint, weight double precision, share double precision)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    fns bigint[];        -- function ids of every stack, flattened
    starts integer[];    -- where each stack starts in fns
    lens integer[];      -- its length
    ws double precision[]; -- its weight
    alive boolean[];     -- still on the chosen path
    total double precision;
    n integer;
    d integer := 1;
    best bigint;
    best_w double precision;
BEGIN
    SELECT array_agg(x.f ORDER BY x.i, x.ord)
      INTO fns
      FROM (SELECT u.i, f.f, f.ord
              FROM unnest(stack_ids) WITH ORDINALITY AS u(id, i)
              LEFT JOIN traceprof.stacks st ON st.stack_id = u.id
             CROSS JOIN LATERAL unnest(coalesce(st.function_ids, ARRAY[0::bigint]))
                   WITH ORDINALITY AS f(f, ord)) x;
    SELECT array_agg(coalesce(cardinality(st.function_ids), 1) ORDER BY u.i),
           array_agg(coalesce(u.w, 0) ORDER BY u.i)
      INTO lens, ws
      FROM unnest(stack_ids, weights) WITH ORDINALITY AS u(id, w, i)
      LEFT JOIN traceprof.stacks st ON st.stack_id = u.id;
    n := coalesce(cardinality(lens), 0);
    IF n = 0 THEN
        RETURN;
    END IF;
    starts := array_fill(0, ARRAY[n]);
    alive := array_fill(true, ARRAY[n]);
    total := 0;
    FOR i IN 1 .. n LOOP
        starts[i] := CASE WHEN i = 1 THEN 1 ELSE starts[i - 1] + lens[i - 1] END;
        total := total + ws[i];
    END LOOP;
    IF total <= 0 THEN
        RETURN;
    END IF;
    LOOP
        SELECT c.f, sum(c.w) INTO best, best_w
          FROM (SELECT fns[starts[i] + d - 1] AS f, ws[i] AS w
                  FROM generate_series(1, n) AS i
                 WHERE alive[i] AND lens[i] >= d) c
         GROUP BY c.f
         ORDER BY 2 DESC, 1
         LIMIT 1;
        EXIT WHEN best IS NULL;
        depth := d;
        function_id := best;
        weight := best_w;
        share := best_w / total;
        RETURN NEXT;
        FOR i IN 1 .. n LOOP
            alive[i] := alive[i] AND lens[i] >= d AND fns[starts[i] + d - 1] = best;
        END LOOP;
        d := d + 1;
        EXIT WHEN d > 512;
    END LOOP;
END $$;

-- Trace summary for people and LLM tools ------------------------------------

-- One line about one service of a trace. span_ms NULL: no span row;
-- cpu_ms 0: no samples.
CREATE FUNCTION traceprof._service_verdict(service text, span_count bigint, span_ms numeric,
                                           cpu_ms double precision, mostly_waiting boolean,
                                           top_function text, top_pct double precision,
                                           top_cpu_ms double precision, deepest text)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT $1 || ': '
        || CASE WHEN $2 IS NULL OR $2 = 0 THEN 'no span'
                WHEN $2 = 1 THEN round($3) || ' ms span'
                ELSE $2 || ' spans, ' || round($3) || ' ms' END
        || ', '
        || CASE WHEN coalesce($4, 0) = 0 THEN 'no CPU samples'
                WHEN $5 THEN 'mostly waiting (' || round($4) || ' ms CPU)'
                ELSE $6 || ' ' || round($7) || ' % (' || round($8) || ' ms CPU)'
                     || coalesce(' → ' || $9, '') END
$$;

-- A JSON object describing one trace: its time span, and per service its
-- spans, CPU, samples, top 5 self-CPU hotspots, the heaviest path below the
-- point where its CPU narrows (hot_path: functions with at least 10 % of the
-- service's CPU), whether it mostly waited (CPU under 20 % of its spans'
-- duration) and a one-line verdict. The verdict names the first function of
-- the hot path holding at least half of the service's CPU (the subtree that
-- took the time) and, when it goes deeper, the last one that still does:
-- "validateSignature 94 % (4105 ms CPU) → bn_mod_exp 83 %". Without such a
-- path it names the top self hotspot.
-- NULL when the trace has neither spans nor samples.
CREATE FUNCTION traceprof.trace_summary(trace_id text) RETURNS jsonb
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    tid uuid := traceprof._arg_trace($1, 'trace_summary');
BEGIN
    RETURN (
    WITH span AS (
        SELECT coalesce(s.service, '[unknown]') AS service, r.span_id, r.parent_span_id, r.start_time,
               r.duration_us, r.status_code, coalesce(rt.method, '') AS method, coalesce(rt.route, '') AS route
          FROM traceprof.requests r
          LEFT JOIN traceprof.sources s ON s.source_id = r.source_id
          LEFT JOIN traceprof.routes rt ON rt.route_id = r.route_id
         WHERE r.trace_id = tid
    ), stacks AS MATERIALIZED (
        -- the trace's samples per service, read once for the profile and the hot path
        SELECT t.service, array_agg(t.stack_id) AS ids, array_agg(t.samples) AS n,
               array_agg(t.cpu_ms) AS ms
          FROM traceprof._trace_stacks(tid, NULL) t
         GROUP BY t.service
    ), prof AS (
        SELECT g.service, p.*,
               row_number() OVER (PARTITION BY g.service
                                  ORDER BY traceprof._cpu_us(p.self_cpu_ms) DESC,
                                           p.function COLLATE "C") AS rank
          FROM stacks g
         CROSS JOIN LATERAL traceprof._function_profile(g.ids, g.n, g.ms) p
    ), hot AS (
        -- per service, the heaviest path below the point where it narrows
        SELECT h.service, jsonb_agg(jsonb_build_object(
                   'function', coalesce(f.name, '[unknown]'),
                   'total_cpu_ms', round(h.weight::numeric, 1),
                   'total_pct', round((100 * h.share)::numeric, 1)) ORDER BY h.depth)
                   FILTER (WHERE h.narrowed AND h.share >= 0.1) AS path,
               (array_agg(coalesce(f.name, '[unknown]') ORDER BY h.depth)
                   FILTER (WHERE h.narrowed AND h.share >= 0.5))[1] AS cause,
               (array_agg(100 * h.share ORDER BY h.depth)
                   FILTER (WHERE h.narrowed AND h.share >= 0.5))[1] AS cause_pct,
               (array_agg(h.weight ORDER BY h.depth)
                   FILTER (WHERE h.narrowed AND h.share >= 0.5))[1] AS cause_ms,
               (array_agg(coalesce(f.name, '[unknown]') || ' ' || round(100 * h.share) || ' %'
                          ORDER BY h.depth DESC)
                   FILTER (WHERE h.narrowed AND h.share >= 0.5))[1] AS deepest,
               count(*) FILTER (WHERE h.narrowed AND h.share >= 0.5) AS path_len
          -- the root level is skipped: entry points (main, thread starts) are never the answer
          FROM (SELECT g.service, hp.*, hp.depth > 1 AND hp.share < 0.9995 AS narrowed
                  FROM stacks g
                 CROSS JOIN LATERAL traceprof.hot_path(g.ids, g.ms) hp) h
          LEFT JOIN traceprof.functions f ON f.function_id = h.function_id
         GROUP BY h.service
    ), cpu AS (
        SELECT p.service, sum(p.self_cpu_ms) AS cpu_ms, sum(p.self_samples) AS samples,
               jsonb_agg(jsonb_build_object(
                   'function', p.function, 'module', p.module,
                   'self_cpu_ms', round(p.self_cpu_ms::numeric, 1),
                   'total_cpu_ms', round(p.total_cpu_ms::numeric, 1),
                   'self_pct', round(p.self_pct::numeric, 1),
                   'total_pct', round(p.total_pct::numeric, 1)) ORDER BY p.rank)
                   FILTER (WHERE p.rank <= 5 AND p.self_cpu_ms > 0) AS hotspots,
               min(p.function) FILTER (WHERE p.rank = 1) AS top_function,
               min(p.self_pct) FILTER (WHERE p.rank = 1) AS top_pct,
               min(p.self_cpu_ms) FILTER (WHERE p.rank = 1) AS top_cpu_ms
          FROM prof p
         GROUP BY p.service
    ), spans AS (
        SELECT sp.service, count(*) AS span_count, round(sum(sp.duration_us) / 1000.0, 3) AS span_ms,
               jsonb_agg(jsonb_build_object(
                   'span_id', traceprof.span_id_text(sp.span_id),
                   'parent_span_id', traceprof.span_id_text(sp.parent_span_id),
                   'method', sp.method, 'route', sp.route, 'status', sp.status_code,
                   'start', sp.start_time, 'duration_ms', round(sp.duration_us / 1000.0, 3))
                   ORDER BY sp.start_time, sp.span_id) AS list
          FROM span sp
         GROUP BY sp.service
    ), svc AS (
        SELECT coalesce(sp.service, c.service) AS service, sp.span_count, sp.span_ms, sp.list,
               coalesce(c.cpu_ms, 0) AS cpu_ms, coalesce(c.samples, 0) AS samples, c.hotspots,
               coalesce(hot.cause, c.top_function) AS top_function,
               coalesce(hot.cause_pct, c.top_pct) AS top_pct,
               coalesce(hot.cause_ms, c.top_cpu_ms) AS top_cpu_ms, hot.path AS hot_path,
               CASE WHEN hot.path_len > 1 THEN hot.deepest END AS deepest,
               CASE WHEN sp.span_ms IS NULL OR c.cpu_ms IS NULL THEN NULL
                    ELSE c.cpu_ms < 0.2 * sp.span_ms::float8 END AS mostly_waiting
          FROM spans sp
          FULL JOIN cpu c ON c.service = sp.service
          LEFT JOIN hot ON hot.service = coalesce(sp.service, c.service)
    ), out AS (
        SELECT svc.*,
               traceprof._service_verdict(svc.service, svc.span_count, svc.span_ms, svc.cpu_ms,
                                          svc.mostly_waiting, svc.top_function, svc.top_pct,
                                          svc.top_cpu_ms, svc.deepest) AS verdict,
               row_number() OVER (ORDER BY svc.cpu_ms DESC, svc.span_ms DESC NULLS LAST,
                                  svc.service COLLATE "C") AS ord
          FROM svc
    ), bounds AS (
        SELECT min(sp.start_time) AS t0,
               max(sp.start_time + sp.duration_us * interval '1 microsecond') AS t1
          FROM span sp
    )
    SELECT jsonb_build_object(
               'trace_id', traceprof.trace_id_text(tid),
               'start', b.t0,
               'end', b.t1,
               'duration_ms', round(extract(epoch FROM b.t1 - b.t0) * 1000, 3),
               'cpu_ms', round(sum(o.cpu_ms)::numeric, 1),
               'samples', sum(o.samples),
               'verdict', string_agg(o.verdict, '; ' ORDER BY o.ord),
               'services', jsonb_agg(jsonb_build_object(
                   'service', o.service,
                   'spans', coalesce(o.list, '[]'),
                   'span_ms', o.span_ms,
                   'cpu_ms', round(o.cpu_ms::numeric, 1),
                   'samples', o.samples,
                   'mostly_waiting', o.mostly_waiting,
                   'hotspots', coalesce(o.hotspots, '[]'),
                   'hot_path', coalesce(o.hot_path, '[]'),
                   'verdict', o.verdict) ORDER BY o.ord))
      FROM bounds b, out o
     GROUP BY b.t0, b.t1);
END $$;
