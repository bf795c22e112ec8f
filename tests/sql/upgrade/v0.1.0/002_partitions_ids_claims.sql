-- 002_partitions_ids_claims: partition management, trace/span id text forms,
-- the atomic trigger claim, and readable views.

-- Partitions are one UTC day each, named <table>_pYYYYMMDD. Creating one
-- that exists is a no-op, so every writer may call this before a COPY.
-- Defaults: from yesterday to now() + config 'partitions_ahead'.
CREATE FUNCTION traceprof.create_partitions(
    from_time timestamptz DEFAULT NULL,
    until_time timestamptz DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql AS $$
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

-- Tables partitioned by day; later migrations add theirs here.
CREATE FUNCTION traceprof._partitioned_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$ SELECT ARRAY['samples', 'requests'] $$;

-- Drops every partition that lies wholly before now() - retention.
-- Call it from cron or pg_cron; returns the names dropped.
-- retention defaults to config 'retention'.
CREATE FUNCTION traceprof.drop_partitions(retention interval DEFAULT NULL)
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

SELECT traceprof.create_partitions();

-- Trace ids: 32 hex digits, not all zero (W3C trace context). Anything else
-- is an error that quotes the input.
CREATE FUNCTION traceprof.parse_trace_id(t text) RETURNS uuid
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    IF t !~ '^[0-9a-fA-F]{32}$' THEN
        RAISE EXCEPTION 'invalid trace id "%": expected 32 hexadecimal digits', left(t, 80)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF t ~ '^0{32}$' THEN
        RAISE EXCEPTION 'invalid trace id "%": all zeros', t
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN t::uuid;
END $$;

CREATE FUNCTION traceprof.trace_id_text(id uuid) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT replace(id::text, '-', '') $$;

CREATE FUNCTION traceprof.parse_span_id(t text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    IF t !~ '^[0-9a-fA-F]{16}$' OR t ~ '^0{16}$' THEN
        RAISE EXCEPTION 'invalid span id "%": expected 16 hexadecimal digits, not all zero', left(t, 80)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN ('x' || t)::bit(64)::bigint;
END $$;

CREATE FUNCTION traceprof.span_id_text(id bigint) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT lpad(to_hex(id), 16, '0') $$;

-- Claims one finished request for a trigger. One UPDATE: under concurrency
-- PostgreSQL re-evaluates the WHERE clause against the newest row version
-- after the competing update commits, so collected_requests can never pass
-- max_requests and a trace is never claimed twice. Returns the new count, or
-- NULL when the trigger is not active, is full, has expired, or already has
-- this trace. The trigger turns Completed with its last claim.
CREATE FUNCTION traceprof.claim_request(p_trigger_id text, p_trace_id uuid)
RETURNS integer
LANGUAGE sql AS $$
    UPDATE traceprof.trace_profile_triggers
       SET collected_requests = collected_requests + 1,
           trace_ids = trace_ids || p_trace_id,
           phase = CASE WHEN collected_requests + 1 >= max_requests THEN 'Completed' ELSE phase END,
           completed_at = CASE WHEN collected_requests + 1 >= max_requests THEN now() ELSE completed_at END
     WHERE trigger_id = p_trigger_id
       AND phase = 'Active'
       AND collected_requests < max_requests
       AND deadline > now()
       AND NOT (p_trace_id = ANY (trace_ids))
    RETURNING collected_requests
$$;

-- Moves active triggers past their deadline to Expired; returns how many.
CREATE FUNCTION traceprof.expire_triggers() RETURNS integer
LANGUAGE sql AS $$
    WITH e AS (
        UPDATE traceprof.trace_profile_triggers
           SET phase = 'Expired', completed_at = now(), reason = 'deadline passed'
         WHERE phase IN ('Active', 'Pending') AND deadline <= now()
        RETURNING 1)
    SELECT count(*)::integer FROM e
$$;

-- Readable forms for people and dashboards.
CREATE VIEW traceprof.requests_v AS
SELECT traceprof.trace_id_text(r.trace_id) AS trace_id,
       traceprof.span_id_text(r.span_id) AS span_id,
       traceprof.span_id_text(r.parent_span_id) AS parent_span_id,
       s.service, s.namespace, s.pod, s.node,
       coalesce(rt.method, '') AS method, coalesce(rt.route, '') AS route,
       r.status_code, r.start_time, r.duration_us / 1000.0 AS duration_ms
FROM traceprof.requests r
JOIN traceprof.sources s USING (source_id)
LEFT JOIN traceprof.routes rt USING (route_id);

CREATE VIEW traceprof.triggers_v AS
SELECT trigger_id, namespace, name, service, phase, reason,
       collected_requests || '/' || max_requests AS collected,
       (SELECT array_agg(traceprof.trace_id_text(t)) FROM unnest(trace_ids) t) AS trace_ids,
       deadline, created_at, completed_at
FROM traceprof.trace_profile_triggers;
