-- stack_function_weights: self goes to the leaf, total to each distinct
-- function once (recursion), unknown frames and stacks to function 0.
INSERT INTO traceprof.functions (function_id, name, module) VALUES
    (10, 'main', 'app'), (11, 'handle', 'app'), (12, 'parse', 'app');
INSERT INTO traceprof.frames (frame_id, function_id) VALUES
    (100, 10), (101, 11), (102, 12), (103, 11); -- 103: handle at another line
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES
    (1, '{100,101,102}'),      -- main;handle;parse
    (2, '{100,101}'),          -- main;handle
    (3, '{100,101,103,102}'),  -- main;handle;handle;parse (recursion)
    (4, '{100,999}');          -- main;<frame not in dictionary>

CREATE TEMP TABLE w AS
SELECT * FROM traceprof.stack_function_weights('{1,2,3,1,4,5}', '{10,20,40,5,7,3}');
-- stack 1 has 15, stack 2 has 20, stack 3 has 40, stack 4 has 7, stack 5 (missing) has 3.
SELECT t.near((SELECT total_weight FROM w WHERE function_id = 10), 82, 1e-9, 'main total (all but missing stack)');
SELECT t.near((SELECT self_weight FROM w WHERE function_id = 10), 0, 1e-9, 'main self');
SELECT t.near((SELECT total_weight FROM w WHERE function_id = 11), 75, 1e-9, 'handle total counts recursion once');
SELECT t.near((SELECT self_weight FROM w WHERE function_id = 11), 20, 1e-9, 'handle self');
SELECT t.near((SELECT self_weight FROM w WHERE function_id = 12), 55, 1e-9, 'parse self');
SELECT t.near((SELECT self_weight FROM w WHERE function_id = 0), 10, 1e-9, 'unknown frame and stack as self');
SELECT t.near((SELECT sum(self_weight) FROM w), 85, 1e-9, 'self weights add up to the input');
SELECT t.near(traceprof.cpu_ms(19, 19), 1000, 1e-9, '19 samples at 19 Hz are a second');
SELECT t.near(traceprof.cpu_ms(99, 99), 1000, 1e-9, '99 samples at 99 Hz are a second');
-- A frequency that is not positive has no CPU time (it was division_by_zero).
SELECT t.eq(traceprof.cpu_ms(5, 0), NULL::double precision, 'no CPU time at 0 Hz');
SELECT t.eq(traceprof.cpu_ms(5, -1), NULL::double precision, 'no CPU time at a negative frequency');

-- A stack written before one of its frames: the frame reads as unknown
-- until repair_stack_functions() mends it; mending twice does nothing.
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES (6, '{100,104}');  -- main;<104 not yet known>
SELECT t.eq((SELECT function_ids FROM traceprof.stacks WHERE stack_id = 6), '{10,0}'::bigint[], 'late frame reads as unknown');
INSERT INTO traceprof.frames (frame_id, function_id) VALUES (104, 12);
SELECT t.eq(traceprof.repair_stack_functions(), 1, 'one stack mended (stack 4 still has a frame that does not exist)');
SELECT t.eq((SELECT function_ids FROM traceprof.stacks WHERE stack_id = 6), '{10,12}'::bigint[], 'late frame resolved');
SELECT t.eq(traceprof.repair_stack_functions(), 0, 'nothing left to mend');
