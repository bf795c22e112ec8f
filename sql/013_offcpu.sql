-- 013_offcpu: off-CPU time per request (docs/offcpu.md).
--
-- One row = the off-CPU intervals of one kind of one span (or of no
-- request, trace_id NULL) from one source in one time bucket, aggregated by
-- the agent per stack: stacks[i] was off CPU for us[i] microseconds in
-- total. kind 1 = blocked (sleeping until woken: a lock, I/O, a sleep, a
-- downstream call), 2 = runqueue (runnable, waiting for a CPU). Stack id 0
-- is time without a stack (intervals below the capture threshold, summed,
-- or whose stack was not taken); it has no row in traceprof.stacks. A stack
-- may repeat in a row. The stacks are the same dictionary as samples'.
--
-- Workload: like samples, rows arrive by COPY from every agent, a handful
-- per request; users look up one trace (through the trace_id hash index)
-- or aggregate a service over a time range (through source_id, bucket).
-- Retention and partitions follow samples: the partition manager
-- (traceprof._partitioned_tables, sql/api/partitions.sql) creates and drops
-- them with the others. The checks are cheap (arrays of a few elements) and
-- keep a reader from ever dividing by a zero or summing a negative time.

CREATE TABLE IF NOT EXISTS traceprof.offcpu (
    bucket    timestamptz NOT NULL,
    source_id bigint NOT NULL,
    span_id   bigint,
    trace_id  uuid,
    kind      smallint NOT NULL CHECK (kind IN (1, 2)),
    stacks    bigint[] NOT NULL CHECK (cardinality(stacks) >= 1),
    us        integer[] NOT NULL CHECK (0 < ALL (us)),
    CHECK (cardinality(us) = cardinality(stacks))
) PARTITION BY RANGE (bucket);
-- Hash, as samples_trace_idx (001): equality lookups only.
CREATE INDEX IF NOT EXISTS offcpu_trace_idx ON traceprof.offcpu USING hash (trace_id);
-- For service-wide analyses over a time range, as samples_source_idx.
CREATE INDEX IF NOT EXISTS offcpu_source_idx ON traceprof.offcpu (source_id, bucket);

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
        EXECUTE format('CREATE TABLE IF NOT EXISTS traceprof.%I PARTITION OF traceprof.offcpu '
                       'FOR VALUES FROM (%L) TO (%L)', 'offcpu_p' || to_char(day, 'YYYYMMDD'),
                       (day::timestamp AT TIME ZONE 'UTC'), ((day + 1)::timestamp AT TIME ZONE 'UTC'));
    END LOOP;
END $$;

-- The writer inserts (lib/store/store_flush.c); the reader reads every
-- table of traceprof_owner by default privileges (010), granted here too
-- for a database whose migrations ran as another role.
GRANT INSERT ON traceprof.offcpu TO traceprof_writer;
GRANT SELECT ON traceprof.offcpu TO traceprof_reader;

-- The functions that read it: sql/api/offcpu.sql.
