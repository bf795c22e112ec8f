-- partitions.sql: _partitioned_tables, create_partitions, drop_partitions (taken from migration 002).

-- Partitions are one UTC day each, named <table>_pYYYYMMDD. Creating one
-- that exists is a no-op, so every writer may call this before a COPY.
-- Defaults: from yesterday to now() + config 'partitions_ahead'.
CREATE OR REPLACE FUNCTION traceprof.create_partitions(
    from_time timestamptz DEFAULT NULL,
    until_time timestamptz DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    day date;
    parent text;
    part text;
    created integer := 0;
BEGIN
    from_time := coalesce(from_time, now() - interval '1 day');
    until_time := coalesce(until_time, now() + (SELECT value::interval FROM traceprof.config WHERE key = 'partitions_ahead'));
    IF until_time < from_time THEN
        RAISE EXCEPTION 'create_partitions: until_time % is before from_time %', until_time, from_time;
    END IF;
    IF until_time - from_time > interval '400 days' THEN
        RAISE EXCEPTION 'create_partitions: range % .. % is longer than 400 days', from_time, until_time
            USING HINT = 'check the timestamps of the data being written';
    END IF;
    FOR day IN SELECT generate_series((from_time AT TIME ZONE 'UTC')::date,
                                      (until_time AT TIME ZONE 'UTC')::date, interval '1 day')::date LOOP
        FOREACH parent IN ARRAY traceprof._partitioned_tables() LOOP
            part := parent || '_p' || to_char(day, 'YYYYMMDD');
            IF to_regclass('traceprof.' || part) IS NULL THEN
                BEGIN
                    EXECUTE format('CREATE TABLE traceprof.%I PARTITION OF traceprof.%I FOR VALUES FROM (%L) TO (%L)',
                                   part, parent,
                                   (day::timestamp AT TIME ZONE 'UTC'),
                                   ((day + 1)::timestamp AT TIME ZONE 'UTC'));
                    created := created + 1;
                EXCEPTION WHEN duplicate_table THEN
                    NULL; -- another writer created it concurrently
                END;
            END IF;
        END LOOP;
    END LOOP;
    RETURN created;
END $$;

-- Tables partitioned by day. A migration that adds one creates its first
-- partitions itself (sql/README.md) and adds it here.
CREATE OR REPLACE FUNCTION traceprof._partitioned_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$ SELECT ARRAY['samples', 'requests', 'cohort_rollup', 'trigger_samples', 'offcpu', 'gpu'] $$;

-- Drops every partition that lies wholly before now() - retention.
-- Call it from cron or pg_cron; returns the names dropped.
-- retention defaults to config 'retention'.
CREATE OR REPLACE FUNCTION traceprof.drop_partitions(retention interval DEFAULT NULL)
RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    cutoff date;
BEGIN
    retention := coalesce(retention, (SELECT value::interval FROM traceprof.config WHERE key = 'retention'));
    IF retention IS NULL OR retention < interval '1 hour' THEN
        RAISE EXCEPTION 'drop_partitions: retention % is too short (at least 1 hour)', retention;
    END IF;
    cutoff := ((now() - retention) AT TIME ZONE 'UTC')::date;
    FOR r IN
        SELECT c.relname
        FROM pg_inherits i
        JOIN pg_class c ON c.oid = i.inhrelid
        JOIN pg_class p ON p.oid = i.inhparent
        JOIN pg_namespace n ON n.oid = p.relnamespace
        WHERE n.nspname = 'traceprof'
          AND p.relname = ANY (traceprof._partitioned_tables())
          AND c.relname ~ '_p[0-9]{8}$'
          AND to_date(right(c.relname, 8), 'YYYYMMDD') < cutoff
        ORDER BY c.relname
    LOOP
        EXECUTE format('DROP TABLE traceprof.%I', r.relname);
        RETURN NEXT r.relname;
    END LOOP;
END $$;

-- create_partitions runs as the owner, so partitions belong to it; the
-- writer calls it before a COPY. Neither writes for the reader.
REVOKE EXECUTE ON FUNCTION traceprof.create_partitions(timestamptz, timestamptz),
                           traceprof.drop_partitions(interval)
    FROM traceprof_reader;
GRANT EXECUTE ON FUNCTION traceprof.create_partitions(timestamptz, timestamptz) TO traceprof_writer;
