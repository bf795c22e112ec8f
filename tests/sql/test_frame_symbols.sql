-- Symbols added later (api/frame_symbols.sql): frames_to_name finds the
-- frames of a build that symbols can improve; name_frames renames them in
-- place, re-derives the stacks' function ids, leaves other builds alone,
-- un-rolls the rollup minutes that counted the old functions (so
-- compare_cohorts shows the new name, with and without the rollup), and a
-- second call changes nothing.
SET TimeZone = 'UTC';
SELECT traceprof.create_partitions('2030-01-01', '2030-01-03');

INSERT INTO traceprof.sources (source_id, service) VALUES (1, 'app');
-- build aa of "app" is stripped: two addresses of one function (0x1000,
-- 0x1010), one address no symbol covers (0x2000), main named from .dynsym
-- without a line; build bb shares the name "app+0x1000" (same module and
-- offset) but is another build.
INSERT INTO traceprof.functions (function_id, name, module, kind) VALUES
    (1, 'main', 'app', 0), (100, 'app+0x1000', 'app', 2), (101, 'app+0x1010', 'app', 2),
    (102, 'app+0x2000', 'app', 2), (103, 'libc.so.6+0x99', 'libc.so.6', 2);
INSERT INTO traceprof.frames (frame_id, function_id, build_id, address) VALUES
    (10, 1, 'aa', 100), (11, 100, 'aa', 4096), (12, 101, 'aa', 4112), (14, 102, 'aa', 8192),
    (13, 100, 'bb', 4096), (15, 103, 'cc', 153);
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES
    (1, '{10,11}'), (2, '{10,12}'), (3, '{10,14}'), (4, '{10,13}'), (5, '{15,10,11,12}');

-- Slow requests (2 s) run stacks 1 and 2, fast ones (50 ms) stack 3.
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, route_id, duration_us, status_code)
SELECT timestamptz '2030-01-02 10:00:00+00' + i * interval '5 second', 1, t.tid(i), i, 0,
       CASE WHEN i % 2 = 0 THEN 2000000 ELSE 50000 END, 200
FROM generate_series(1, 20) i;
INSERT INTO traceprof.samples (bucket, source_id, trace_id, span_id, hz, stacks, counts)
SELECT timestamptz '2030-01-02 10:00:00+00' + i * interval '5 second', 1, t.tid(i), i, 99,
       CASE WHEN i % 2 = 0 THEN '{1,2}'::bigint[] ELSE '{3}'::bigint[] END,
       CASE WHEN i % 2 = 0 THEN '{3,1}'::integer[] ELSE '{2}'::integer[] END
FROM generate_series(1, 20) i;
SELECT traceprof.refresh_rollups_range('2030-01-02 10:00+00', '2030-01-02 10:02+00');

CREATE FUNCTION pg_temp.names(use_rollup boolean) RETURNS text
LANGUAGE sql AS $$
    SELECT string_agg(function || '=' || round(a_share::numeric, 3), ' ' ORDER BY function)
      FROM traceprof.compare_cohorts('app', '2030-01-02 10:00+00', '2030-01-02 10:02+00',
                                     '{"min_duration": "1s"}', '{"max_duration": "100ms"}', use_rollup)
     WHERE a_share > 0
$$;
SELECT t.eq(pg_temp.names(true), 'app+0x1000=0.750 app+0x1010=0.250 main=1.000', 'compare before, rollup');
SELECT t.eq(pg_temp.names(false), pg_temp.names(true), 'compare before, raw');

-- What symbols can improve in build aa: the unnamed frames and main (no line).
SELECT t.eq((SELECT string_agg(frame_id || ':' || address || ':' || module || ':' || kind, ' ' ORDER BY frame_id)
               FROM traceprof.frames_to_name('aa')),
            '10:100:app:0 11:4096:app:2 12:4112:app:2 14:8192:app:2', 'frames_to_name');

-- Bad arguments.
SELECT t.raises($$SELECT traceprof.name_frames('AA', '{11}', '{500}', '{hot}', '{app}', '{a.c}', '{1}')$$,
                'build_id must be', 'upper case build id');
SELECT t.raises($$SELECT traceprof.name_frames(NULL, '{11}', '{500}', '{hot}', '{app}', '{a.c}', '{1}')$$,
                'build_id must be', 'NULL build id');
SELECT t.raises($$SELECT traceprof.name_frames('aa', '{11,12}', '{500}', '{hot}', '{app}', '{a.c}', '{1}')$$,
                'one entry per frame', 'arrays of different lengths');

-- Name them: 0x1000 and 0x1010 are "hot" (function id 500, as a writer
-- would compute it), main gets a line, 0x2000 stays unknown (NULL), frame 13
-- of build bb passed under aa is not touched.
CREATE TEMP TABLE r1 AS
SELECT * FROM traceprof.name_frames('aa', '{11,12,10,14,13}', '{500,500,1,NULL,500}',
                                    '{hot,hot,main,NULL,hot}', '{app,app,app,app,app}',
                                    '{/src/app.c,/src/app.c,/src/main.c,NULL,/src/app.c}',
                                    '{10,11,5,0,10}');
SELECT t.eq((SELECT named || ' ' || lined || ' ' || stacks FROM r1), '2 3 3', 'named, lined, stacks');
SELECT t.ok((SELECT rollup_minutes FROM r1) >= 1, 'rollup minutes un-rolled');
SELECT t.eq((SELECT string_agg(frame_id || ':' || function_id || ':' || coalesce(file, '-') || ':' || coalesce(line, 0), ' '
                               ORDER BY frame_id) FROM traceprof.frames),
            '10:1:/src/main.c:5 11:500:/src/app.c:10 12:500:/src/app.c:11 13:100:-:0 14:102:-:0 15:103:-:0',
            'frames after');
SELECT t.eq((SELECT name || ':' || module || ':' || kind FROM traceprof.functions WHERE function_id = 500),
            'hot:app:0', 'the new function');
SELECT t.eq((SELECT string_agg(stack_id || '=' || function_ids::text, ' ' ORDER BY stack_id) FROM traceprof.stacks),
            '1={1,500} 2={1,500} 3={1,102} 4={1,100} 5={103,1,500,500}', 'stacks after');
SELECT t.eq((SELECT string_agg(frame_id::text, ' ' ORDER BY frame_id) FROM traceprof.frames_to_name('aa')),
            '14', 'frames_to_name after');

-- Comparisons show the new name: the un-rolled minutes come from the raw
-- tables, and again from the rollup once refreshed.
SELECT t.ok(NOT (SELECT rolled FROM traceprof.cohort_rollup_state)
                @> tstzrange('2030-01-02 10:00+00', '2030-01-02 10:02+00'), 'minutes un-rolled');
SELECT t.eq(pg_temp.names(true), 'hot=1.000 main=1.000', 'compare after, rollup state');
SELECT t.eq(pg_temp.names(false), 'hot=1.000 main=1.000', 'compare after, raw');
SELECT traceprof.refresh_rollups_range('2030-01-02 10:00+00', '2030-01-02 10:02+00');
SELECT t.eq(pg_temp.names(true), 'hot=1.000 main=1.000', 'compare after, rolled again');
SELECT t.eq((SELECT count(*) FROM traceprof.cohort_rollup WHERE function_id IN (100, 101)), 0::bigint,
            'no rollup row of the old functions');
SELECT t.eq((SELECT stack FROM traceprof._stack_folded('{1}')), 'main;hot', 'folded stack');

-- Again: nothing changes.
CREATE TEMP TABLE before AS SELECT * FROM traceprof.frames;
SELECT t.eq((SELECT named || ' ' || lined || ' ' || stacks || ' ' || rollup_minutes
               FROM traceprof.name_frames('aa', '{11,12,10,14,13}', '{500,500,1,NULL,500}',
                                          '{hot,hot,main,NULL,hot}', '{app,app,app,app,app}',
                                          '{/src/app.c,/src/app.c,/src/main.c,NULL,/src/app.c}',
                                          '{10,11,5,0,10}')),
            '0 0 0 0', 'second call');
SELECT t.eq((SELECT count(*) FROM (SELECT * FROM traceprof.frames EXCEPT SELECT * FROM before) d), 0::bigint,
            'frames unchanged by the second call');
SELECT t.eq((SELECT named || ' ' || stacks FROM traceprof.name_frames('aa', '{}', '{}', '{}', '{}', '{}', '{}')),
            '0 0', 'empty arrays');

-- The reader may look but not name.
SELECT t.ok(has_function_privilege('traceprof_reader', 'traceprof.frames_to_name(text)', 'EXECUTE'),
            'reader may call frames_to_name');
SELECT t.ok(NOT has_function_privilege('traceprof_reader',
                'traceprof.name_frames(text, bigint[], bigint[], text[], text[], text[], integer[])', 'EXECUTE'),
            'reader may not call name_frames');
