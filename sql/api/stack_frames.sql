-- stack_frames.sql: stack_frame_ids, frame_details (taken from migration 009).

-- The frames of the given stacks in two small answers: per stack its frame
-- and function ids, root first (a stack missing from the dictionary is the
-- one frame 0, read "[unknown]"), then frame_details for the distinct
-- frames. 10,000 stacks of 25 frames are 10,000 rows and a few thousand,
-- where one row per frame would be 250,000 rows of text.
CREATE OR REPLACE FUNCTION traceprof.stack_frame_ids(stack_ids bigint[])
RETURNS TABLE (stack_id bigint, frame_ids bigint[], function_ids bigint[])
LANGUAGE sql STABLE AS $$
    SELECT d.s, coalesce(st.frame_ids, ARRAY[0::bigint]), coalesce(st.function_ids, ARRAY[0::bigint])
      FROM (SELECT DISTINCT u.s FROM unnest($1) AS u(s)) d
      LEFT JOIN traceprof.stacks st ON st.stack_id = d.s
$$;

-- Function and place of frames given as aligned (frame id, function id)
-- arrays; the function id stands in for a frame missing from frames.
CREATE OR REPLACE FUNCTION traceprof.frame_details(frame_ids bigint[], function_ids bigint[])
RETURNS TABLE (frame_id bigint, function_id bigint, name text, module text, kind smallint,
               build_id text, file text, line integer, address bigint)
LANGUAGE sql STABLE AS $$
    SELECT x.frame_id, x.function_id, coalesce(fn.name, '[unknown]'), coalesce(fn.module, ''),
           coalesce(fn.kind, 0::smallint), coalesce(fr.build_id, ''), fr.file, fr.line, fr.address
      FROM unnest($1, $2) AS x(frame_id, function_id)
      LEFT JOIN traceprof.frames fr ON fr.frame_id = x.frame_id
      LEFT JOIN traceprof.functions fn ON fn.function_id = coalesce(fr.function_id, x.function_id)
$$;
