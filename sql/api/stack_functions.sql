-- stack_functions.sql: stack_functions, stack_function_weights, service_sources (taken from migration 003).
--
-- The primitives every analysis function builds on.
--
-- Analyses aggregate first by stack (few distinct stacks even for millions of
-- samples), then expand only the distinct stacks into functions. That second
-- step is this file: given stack ids and a weight for each, the self weight
-- (the stack's leaf function) and total weight (every distinct function on
-- the stack; recursion counted once) of every function.

-- Every distinct (stack, function) of the given stacks, and whether the
-- function is the stack's leaf. A function that recurs in a stack is one row
-- (recursion counts once). Stacks missing from the dictionary read as the
-- unknown function 0. The one definition of "the functions of a stack" that
-- every analysis uses.
-- A plain SQL function, so the planner inlines it into the caller's query
-- (a SET clause or plpgsql would make every call plan a query of its own:
-- that tripled the time of a trace profile).
CREATE OR REPLACE FUNCTION traceprof.stack_functions(stack_ids bigint[])
RETURNS TABLE (stack_id bigint, function_id bigint, is_leaf boolean)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT d.s, x.fn, bool_or(x.ord = cardinality(fns.ids))
    FROM (SELECT DISTINCT u.s FROM unnest(stack_ids) AS u(s)) d
    LEFT JOIN traceprof.stacks st ON st.stack_id = d.s
    CROSS JOIN LATERAL (SELECT coalesce(st.function_ids, ARRAY[0::bigint]) AS ids) fns
    CROSS JOIN LATERAL unnest(fns.ids) WITH ORDINALITY AS x(fn, ord)
    GROUP BY d.s, x.fn
$$;

-- stack_ids[i] has weights[i] (duplicates allowed; they add up).
CREATE OR REPLACE FUNCTION traceprof.stack_function_weights(stack_ids bigint[], weights double precision[])
RETURNS TABLE (function_id bigint, self_weight double precision, total_weight double precision)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    WITH sw AS (
        SELECT u.s, sum(u.w) AS w
        FROM unnest(stack_ids, weights) AS u(s, w)
        GROUP BY u.s
    )
    SELECT sf.function_id,
           coalesce(sum(sw.w) FILTER (WHERE sf.is_leaf), 0) AS self_weight,
           sum(sw.w) AS total_weight
    FROM sw
    JOIN traceprof.stack_functions(stack_ids) sf ON sf.stack_id = sw.s
    GROUP BY sf.function_id
$$;

-- Source ids of a service (all pods, nodes and builds).
CREATE OR REPLACE FUNCTION traceprof.service_sources(p_service text) RETURNS bigint[]
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(source_id), '{}') FROM traceprof.sources WHERE service = p_service
$$;
