-- 007_triggers: the raised-rate samples of requests claimed by a trigger,
-- and the per-trace functions that prefer them (docs/triggers.md, "Raised
-- sampling without counting a sample twice").
--
-- While a trigger is active the agent samples its target processes at the
-- raised rate (99 Hz by default) and keeps the raised samples of each
-- in-flight request until the request's fate is known. A base-rate
-- subsample of them (exactly base_hz / raised_hz of them) goes into
-- traceprof.samples as usual, so the continuous profile is unchanged. When a
-- request is claimed, all its raised samples are written here, with the
-- raised hz and the trigger id. The same CPU is therefore present twice:
-- once at the base rate in samples, once at the raised rate here. Every
-- query reads exactly one of the two:
--  * queries over one trace (trace_profile, trace_folded[_text],
--    trace_flamegraph, trace_summary, trace_services) read, per source of
--    the trace, its trigger_samples rows when it has any and its samples
--    rows otherwise. A source is one process image of one pod (service,
--    pod, container, node, build id): the agent holds and writes the raised
--    samples of a trace per process, so a service with several pods may
--    have raised rows from the pod whose agent claimed the request and base
--    rows from another, and each pod is counted once. Per source also means
--    per service: a service without raised rows comes from samples;
--  * queries over services and time ranges (service_*, cohorts, rollups,
--    _service_profiled_hz) read samples only.
-- A trace claimed by two triggers may have had its raised samples written
-- once per trigger; per source only the rows of one trigger are read (the
-- smallest trigger id in byte order), so it still counts once.
--
-- Workload: a trigger collects tens of requests (max_requests <= 1000);
-- each claimed request brings a few hundred raised samples. The table is
-- small next to samples; it is found through the trace_id hash index, in
-- the same one or two daily partitions as the trace's samples.
--
-- No foreign key to trace_profile_triggers: agents write raised samples on
-- their own connection and must not depend on the controller's row (it may
-- lag, or be deleted with its resource while samples are in flight), and
-- the hot tables have no foreign keys (001). A row whose trigger is gone is
-- still a sample of its trace.

CREATE TABLE traceprof.trigger_samples (
    bucket     timestamptz NOT NULL,
    source_id  bigint NOT NULL,
    span_id    bigint,
    trace_id   uuid NOT NULL,
    hz         smallint NOT NULL CHECK (hz BETWEEN 1 AND 1000),
    stacks     bigint[] NOT NULL,
    counts     integer[],
    trigger_id text NOT NULL CHECK (trigger_id <> '' AND octet_length(trigger_id) <= 200),
    CHECK (counts IS NULL OR cardinality(counts) = cardinality(stacks))
) PARTITION BY RANGE (bucket);
-- Hash, as samples_trace_idx (001): equality lookups only.
CREATE INDEX trigger_samples_trace_idx ON traceprof.trigger_samples USING hash (trace_id);

-- The partition manager covers the table (traceprof._partitioned_tables,
-- sql/api/partitions.sql): create_partitions() and drop_partitions() treat
-- it together with samples, so retention drops both alike. Partitions for
-- every day samples has (up to 397 days back, within create_partitions'
-- 400-day limit), so an upgraded database has the same days in both tables.
-- Functions are not defined in migrations (sql/README.md): this block is
-- the partition rule of traceprof.create_partitions (sql/api/partitions.sql)
-- inlined, one UTC day per partition, <table>_pYYYYMMDD.
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
    t text;
BEGIN
    FOR day IN SELECT generate_series((lo AT TIME ZONE 'UTC')::date, (hi AT TIME ZONE 'UTC')::date,
                                      interval '1 day')::date LOOP
        FOREACH t IN ARRAY ARRAY['samples', 'requests', 'cohort_rollup', 'trigger_samples'] LOOP
            EXECUTE format('CREATE TABLE IF NOT EXISTS traceprof.%I PARTITION OF traceprof.%I '
                           'FOR VALUES FROM (%L) TO (%L)', t || '_p' || to_char(day, 'YYYYMMDD'), t,
                           (day::timestamp AT TIME ZONE 'UTC'), ((day + 1)::timestamp AT TIME ZONE 'UTC'));
        END LOOP;
    END LOOP;
END $$;

-- The per-trace functions that read these rows (_trace_window, _trace_rows,
-- _trace_span_stacks, _trace_stacks) live in sql/api/trace_rows.sql, the
-- view of what a trigger collected in sql/api/trigger_requests_v.sql.
