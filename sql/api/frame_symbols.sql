-- frame_symbols.sql: frames_to_name, name_frames: symbols added after the
-- samples (traceprof-db symbols add, docs/symbols.md).
--
-- A frame of a stripped binary whose debug file the agent could not find is
-- stored unnamed: function "module+0xADDRESS" (kind 2), the module's build
-- id and the ELF virtual address in frames. A debug file or an unstripped
-- copy of that build, matched by its build id, names it later. The frame
-- keeps its id (stacks and the agent's later inserts, which compute the
-- same id, still find it); its function, file and line change, and so do
-- the function ids of the stacks that hold it (stacks.function_ids is
-- derived from frames) and the cohort rollup minutes that counted the old
-- function. Every analysis reads names through function ids, so flame
-- graphs, profiles and comparisons show the names from then on.

-- The frames of one build that symbols can improve: unnamed (kind 2) or
-- named without a source line (kind 0, file NULL: named from .dynsym), with
-- the ELF address and the module of each. A plain SQL function: inlined
-- into a cursor over it, it streams (frames has no index on build_id: one
-- sequential scan of the frames dictionary per call).
CREATE OR REPLACE FUNCTION traceprof.frames_to_name(build_id text)
RETURNS TABLE (frame_id bigint, address bigint, module text, kind smallint)
LANGUAGE sql STABLE AS $$
    SELECT fr.frame_id, fr.address, fn.module, fn.kind
      FROM traceprof.frames fr
      JOIN traceprof.functions fn ON fn.function_id = fr.function_id
     WHERE fr.build_id = $1 AND fr.address IS NOT NULL
       AND (fn.kind = 2 OR (fn.kind = 0 AND fr.file IS NULL))
$$;

-- Names frames of build build_id (aligned arrays, one entry per frame):
-- function_ids[i] is the id writers compute for (modules[i], names[i])
-- (ids_function, docs/storage.md), files[i] and lines[i] the source place
-- (NULL when unknown). An entry with a NULL function id or name is skipped
-- (still unknown). Only frames frames_to_name would return are changed, and
-- only when something differs, so a second call with the same arrays
-- changes nothing. Returns the frames named (were kind 2), the frames given
-- a file, the stacks whose function ids changed and the cohort rollup
-- minutes un-rolled (refresh_rollups rolls them again; compare_cohorts
-- reads them from the raw tables until then).
--
-- Writers wait: it locks frames and stacks against inserts until the
-- transaction ends, so no stack is inserted with the old function ids
-- behind its back.
CREATE OR REPLACE FUNCTION traceprof.name_frames(
    build_id text, frame_ids bigint[], function_ids bigint[], names text[], modules text[],
    files text[], lines integer[])
RETURNS TABLE (named integer, lined integer, stacks integer, rollup_minutes integer)
LANGUAGE plpgsql AS $$
DECLARE
    n integer := coalesce(cardinality(frame_ids), 0);
    renamed jsonb;         -- {"frame id": new function id} of frames whose function changed
    old_functions bigint[];
    stale tstzmultirange;
BEGIN
    IF build_id IS NULL OR build_id !~ '^[0-9a-f]{2,128}$' THEN
        RAISE EXCEPTION 'name_frames: build_id must be a GNU build id in lower case hex, got %',
            coalesce(quote_literal(build_id), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(cardinality(function_ids), 0) <> n OR coalesce(cardinality(names), 0) <> n
       OR coalesce(cardinality(modules), 0) <> n OR coalesce(cardinality(files), 0) <> n
       OR coalesce(cardinality(lines), 0) <> n THEN
        RAISE EXCEPTION 'name_frames: the arrays must have one entry per frame (% frames)', n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    named := 0; lined := 0; stacks := 0; rollup_minutes := 0;
    IF n = 0 THEN
        RETURN NEXT;
        RETURN;
    END IF;
    -- Agents insert frames, then stacks (whose trigger reads frames): both
    -- wait until this commits. Same order as theirs: no deadlock.
    LOCK TABLE traceprof.frames, traceprof.stacks IN SHARE ROW EXCLUSIVE MODE;

    INSERT INTO traceprof.functions (function_id, name, module, kind)
    SELECT DISTINCT ON (x.fid) x.fid, x.name, coalesce(x.module, ''), 0
      FROM unnest(function_ids, names, modules) AS x(fid, name, module)
     WHERE x.fid IS NOT NULL AND x.fid <> 0 AND x.name IS NOT NULL AND x.name <> ''
    ON CONFLICT (function_id) DO NOTHING;

    WITH x AS (
        SELECT DISTINCT ON (u.frame_id) u.*
          FROM unnest(frame_ids, function_ids, names, files, lines)
               AS u(frame_id, fid, name, file, line)
         WHERE u.fid IS NOT NULL AND u.fid <> 0 AND u.name IS NOT NULL AND u.name <> ''
    ), cur AS (
        SELECT fr.frame_id, fr.function_id AS old_fid, fn.kind AS old_kind, fr.file AS old_file,
               x.fid, x.file, CASE WHEN x.file IS NULL THEN NULL ELSE x.line END AS line
          FROM x
          JOIN traceprof.frames fr ON fr.frame_id = x.frame_id
          JOIN traceprof.functions fn ON fn.function_id = fr.function_id
         WHERE fr.build_id = name_frames.build_id
           AND (fn.kind = 2 OR (fn.kind = 0 AND fr.file IS NULL))
           AND (fr.function_id, fr.file, fr.line) IS DISTINCT FROM
               (x.fid, x.file, CASE WHEN x.file IS NULL THEN NULL ELSE x.line END)
    ), upd AS (
        UPDATE traceprof.frames fr
           SET function_id = c.fid, file = c.file, line = c.line
          FROM cur c
         WHERE fr.frame_id = c.frame_id
        RETURNING fr.frame_id
    )
    SELECT jsonb_object_agg(c.frame_id::text, c.fid) FILTER (WHERE c.fid <> c.old_fid),
           array_agg(DISTINCT c.old_fid) FILTER (WHERE c.fid <> c.old_fid),
           count(*) FILTER (WHERE c.old_kind = 2),
           count(*) FILTER (WHERE c.file IS NOT NULL AND c.old_file IS NULL)
      INTO renamed, old_functions, named, lined
      FROM cur c;

    IF renamed IS NULL THEN
        RETURN NEXT;
        RETURN;
    END IF;
    -- The stacks that hold a renamed frame get its new function id at its
    -- places. No index on frame_ids: one sequential scan of stacks per call,
    -- each frame id looked up in the jsonb object (a binary search; the
    -- variable is detoasted once): 4x faster than joining frames per stack
    -- or testing frame_ids && array, which compares every pair.
    UPDATE traceprof.stacks st
       SET function_ids = ARRAY(SELECT coalesce((renamed ->> x.frame_id::text)::bigint, x.fn)
                                  FROM unnest(st.frame_ids, st.function_ids)
                                       WITH ORDINALITY AS x(frame_id, fn, ord)
                                 ORDER BY x.ord)
     WHERE EXISTS (SELECT 1 FROM unnest(st.frame_ids) AS y(frame_id) WHERE renamed ? y.frame_id::text);
    GET DIAGNOSTICS stacks = ROW_COUNT;

    -- Rolled minutes that counted an old function (every minute with a
    -- renamed stack did) hold moments of the wrong functions, which cannot
    -- be merged into the new one's: un-roll them. An old "module+0xOFF"
    -- function may be another build's too; its minutes are rolled again,
    -- which costs time, never a wrong answer.
    SELECT range_agg(tstzrange(m.minute, m.minute + interval '1 minute')), count(*)
      INTO stale, rollup_minutes
      FROM (SELECT DISTINCT c.minute FROM traceprof.cohort_rollup c
             WHERE c.minutes = 1 AND c.function_id = ANY (old_functions)) m;
    IF stale IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(7353042127005);  -- the rollup refresh's lock
        DELETE FROM traceprof.cohort_rollup c
         WHERE stale && tstzrange(c.minute, c.minute + c.minutes * interval '1 minute');
        UPDATE traceprof.cohort_rollup_state SET rolled = rolled - stale;
    END IF;
    RETURN NEXT;
END $$;

-- It writes: the owner's (traceprof-db symbols add), not the reader's.
REVOKE EXECUTE ON FUNCTION traceprof.name_frames(text, bigint[], bigint[], text[], text[], text[], integer[])
    FROM traceprof_reader;
