-- 015_gpu: GPU time per request (docs/gpu.md).
--
-- One row = the kernels that the launches of one span (or of no request,
-- trace_id NULL) caused, from one source in one time bucket, aggregated by
-- the agent per launch stack: stacks[i] launched launches[i] kernels that
-- ran gpu_ns[i] nanoseconds on the GPU in all. A stack here is the CPU
-- stack of the launching thread, root first as every stack, whose leaf
-- frame is the kernel: function name '[gpu] ' || kernel name, module
-- '[gpu]' (so flame graphs of GPU time end in the kernel). The stacks are
-- the same dictionary as samples'. A launch whose CPU stack was not taken
-- (its kernels' records came without the launch) has a stack of the
-- kernel's frame alone. A stack may repeat in a row.
--
-- bucket is when the agent joined the kernels to their launch (seconds
-- after the launch at most). Workload, indexes, retention and partitions
-- as samples and offcpu (013).

CREATE TABLE IF NOT EXISTS traceprof.gpu (
    bucket    timestamptz NOT NULL,
    source_id bigint NOT NULL,
    span_id   bigint,
    trace_id  uuid,
    stacks    bigint[] NOT NULL CHECK (cardinality(stacks) >= 1),
    launches  integer[] NOT NULL CHECK (0 < ALL (launches)),
    gpu_ns    bigint[] NOT NULL CHECK (0 <= ALL (gpu_ns)),
    CHECK (cardinality(launches) = cardinality(stacks)),
    CHECK (cardinality(gpu_ns) = cardinality(stacks))
) PARTITION BY RANGE (bucket);
CREATE INDEX IF NOT EXISTS gpu_trace_idx ON traceprof.gpu USING hash (trace_id);
CREATE INDEX IF NOT EXISTS gpu_source_idx ON traceprof.gpu (source_id, bucket);

-- Partitions for every day samples has (up to 397 days back, within
-- create_partitions' 400-day limit) and partitions_ahead, so an upgraded
-- database has the same days in both tables; the partition rule of
-- traceprof.create_partitions inlined, as in 007_triggers.sql.
DO $$
DECLARE
    lo timestamptz := greatest(now() - interval '397 days',
        least(now() - interval '1 day',
              (SELECT min(to_date(right(c.relname, 8), 'YYYYMMDD'))::timestamp AT TIME ZONE 'UTC'
                 FROM pg_inherits i
                 JOIN pg_class c ON c.oid = i.inhrelid
                 JOIN pg_class p ON p.oid = i.inhparent
                 JOIN pg_namespace n ON n.oid = p.relnamespace
                WHERE n.nspname = 'traceprof' AND p.relname = 'samples'
                  AND c.relname ~ '_p[0-9]{8}$')));
    hi timestamptz := now() + (SELECT value::interval FROM traceprof.config WHERE key = 'partitions_ahead');
    day date;
BEGIN
    FOR day IN SELECT generate_series((lo AT TIME ZONE 'UTC')::date, (hi AT TIME ZONE 'UTC')::date,
                                      interval '1 day')::date LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS traceprof.%I PARTITION OF traceprof.gpu '
                       'FOR VALUES FROM (%L) TO (%L)', 'gpu_p' || to_char(day, 'YYYYMMDD'),
                       (day::timestamp AT TIME ZONE 'UTC'), ((day + 1)::timestamp AT TIME ZONE 'UTC'));
    END LOOP;
END $$;

-- The writer inserts (lib/store/store_flush.c); the reader reads every
-- table of traceprof_owner by default privileges (010), granted here too
-- for a database whose migrations ran as another role.
GRANT INSERT ON traceprof.gpu TO traceprof_writer;
GRANT SELECT ON traceprof.gpu TO traceprof_reader;

-- The functions that read it: sql/api/gpu.sql.
