-- 002_partitions_ids_claims: the first daily partitions of samples and
-- requests.
--
-- Partition management, the trace/span id text forms, the atomic trigger
-- claim and the readable views were first defined here; they live in
-- sql/api/ (partitions, ids, trigger_claims, requests_v, triggers_v).

-- Yesterday to now() + config 'partitions_ahead', as create_partitions()
-- with its defaults. The tables are new (001): none of these exists yet.
-- Functions are not defined in migrations (sql/README.md): this block is
-- the partition rule of traceprof.create_partitions (sql/api/partitions.sql)
-- inlined, one UTC day per partition, <table>_pYYYYMMDD.
DO $$
DECLARE
    lo timestamptz := now() - interval '1 day';
    hi timestamptz := now() + (SELECT value::interval FROM traceprof.config WHERE key = 'partitions_ahead');
    day date;
    t text;
BEGIN
    FOR day IN SELECT generate_series((lo AT TIME ZONE 'UTC')::date, (hi AT TIME ZONE 'UTC')::date,
                                      interval '1 day')::date LOOP
        FOREACH t IN ARRAY ARRAY['samples', 'requests'] LOOP
            EXECUTE format('CREATE TABLE traceprof.%I PARTITION OF traceprof.%I '
                           'FOR VALUES FROM (%L) TO (%L)', t || '_p' || to_char(day, 'YYYYMMDD'), t,
                           (day::timestamp AT TIME ZONE 'UTC'), ((day + 1)::timestamp AT TIME ZONE 'UTC'));
        END LOOP;
    END LOOP;
END $$;
