-- 004_analysis: the trace window margin. The functions users call to read
-- profiles (trace and service profiles, folded stacks, flame graph rows,
-- the hot path, the trace summary) were first defined here; they live in
-- sql/api/ (the design notes are in sql/api/trace_profile.sql).

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
