-- stack_function_ids.sql: _stacks_fill_function_ids, repair_stack_functions (taken from migration 003).

-- Fills stacks.function_ids from frames when a writer leaves it NULL.
-- Writers flush frames before the stacks that use them (in one transaction);
-- a frame still missing maps to the unknown function 0.
CREATE OR REPLACE FUNCTION traceprof._stacks_fill_function_ids() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NEW.function_ids IS NULL THEN
        SELECT array_agg(coalesce(f.function_id, 0) ORDER BY x.ord)
          INTO NEW.function_ids
          FROM unnest(NEW.frame_ids) WITH ORDINALITY AS x(frame_id, ord)
          LEFT JOIN traceprof.frames f ON f.frame_id = x.frame_id;
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER stacks_fill_function_ids BEFORE INSERT ON traceprof.stacks
    FOR EACH ROW EXECUTE FUNCTION traceprof._stacks_fill_function_ids();

-- Re-derives function_ids of stacks inserted before some of their frames
-- (their unknown frames read as function 0, which no real function has).
-- Returns how many stacks it mended; cheap when there is nothing to mend.
CREATE OR REPLACE FUNCTION traceprof.repair_stack_functions() RETURNS integer
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

-- The trigger runs as the owner (it reads frames, which the writer may not).
-- Both write: not the reader's.
REVOKE EXECUTE ON FUNCTION traceprof._stacks_fill_function_ids(), traceprof.repair_stack_functions()
    FROM traceprof_reader;
