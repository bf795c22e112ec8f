-- 003_core_functions: the primitives every analysis function builds on.
--
-- Analyses aggregate first by stack (few distinct stacks even for millions of
-- samples), then expand only the distinct stacks into functions. That second
-- step is this file: given stack ids and a weight for each, the self weight
-- (the stack's leaf function) and total weight (every distinct function on
-- the stack; recursion counted once) of every function.

-- Weight in milliseconds of CPU of `count` samples taken at `hz`.
CREATE FUNCTION traceprof.cpu_ms(count bigint, hz integer) RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT count * 1000.0 / hz $$;

-- The unknown function: frames or stacks missing from the dictionaries are
-- attributed here, so totals stay right while a writer catches up.
INSERT INTO traceprof.functions (function_id, name, module, kind)
VALUES (0, '[unknown]', '', 2) ON CONFLICT DO NOTHING;

-- Fills stacks.function_ids from frames when a writer leaves it NULL.
-- Writers flush frames before the stacks that use them (in one transaction);
-- a frame still missing maps to the unknown function 0.
CREATE FUNCTION traceprof._stacks_fill_function_ids() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.function_ids IS NULL THEN
        SELECT array_agg(coalesce(f.function_id, 0) ORDER BY x.ord)
          INTO NEW.function_ids
          FROM unnest(NEW.frame_ids) WITH ORDINALITY AS x(frame_id, ord)
          LEFT JOIN traceprof.frames f ON f.frame_id = x.frame_id;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER stacks_fill_function_ids BEFORE INSERT ON traceprof.stacks
    FOR EACH ROW EXECUTE FUNCTION traceprof._stacks_fill_function_ids();

-- Re-derives function_ids of stacks inserted before some of their frames
-- (their unknown frames read as function 0, which no real function has).
-- Returns how many stacks it mended; cheap when there is nothing to mend.
CREATE FUNCTION traceprof.repair_stack_functions() RETURNS integer
LANGUAGE sql AS $$
    WITH mended AS (
        UPDATE traceprof.stacks st
           SET function_ids = (SELECT array_agg(coalesce(f.function_id, 0) ORDER BY x.ord)
                                 FROM unnest(st.frame_ids) WITH ORDINALITY AS x(frame_id, ord)
                                 LEFT JOIN traceprof.frames f ON f.frame_id = x.frame_id)
         WHERE 0 = ANY (st.function_ids)
           AND EXISTS (SELECT 1 FROM unnest(st.frame_ids) AS y(frame_id)
                        JOIN traceprof.frames f ON f.frame_id = y.frame_id
                        WHERE f.function_id <> 0
                          AND st.function_ids[array_position(st.frame_ids, y.frame_id)] = 0)
        RETURNING 1)
    SELECT count(*)::integer FROM mended
$$;

-- Every distinct (stack, function) of the given stacks, and whether the
-- function is the stack's leaf. A function that recurs in a stack is one row
-- (recursion counts once). Stacks missing from the dictionary read as the
-- unknown function 0. The one definition of "the functions of a stack" that
-- every analysis uses.
-- A plain SQL function, so the planner inlines it into the caller's query
-- (a SET clause or plpgsql would make every call plan a query of its own:
-- that tripled the time of a trace profile).
CREATE FUNCTION traceprof.stack_functions(stack_ids bigint[])
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
CREATE FUNCTION traceprof.stack_function_weights(stack_ids bigint[], weights double precision[])
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
CREATE FUNCTION traceprof.service_sources(p_service text) RETURNS bigint[]
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(source_id), '{}') FROM traceprof.sources WHERE service = p_service
$$;
