-- 003_core_functions: the unknown function. The primitives every analysis
-- function builds on (stack_functions, stack_function_weights, cpu_ms,
-- service_sources) and the stacks trigger that fills each stack's function
-- ids were first defined here; they live in sql/api/.

-- The unknown function: frames or stacks missing from the dictionaries are
-- attributed here, so totals stay right while a writer catches up.
INSERT INTO traceprof.functions (function_id, name, module, kind)
VALUES (0, '[unknown]', '', 2) ON CONFLICT DO NOTHING;
