-- 010_roles: least-privilege roles (docs/storage.md, "Roles").
--
-- Four NOLOGIN group roles; a deployment grants them to its login roles
-- (the embedded cluster of traceprof-db logs in with them directly):
--  * traceprof_owner: owns the schema and every object in it; migrations,
--    retention (drop_partitions) and rollups (refresh_rollups) run as it;
--  * traceprof_writer: what the agent's store writes: INSERT (and so COPY
--    and ON CONFLICT DO NOTHING) on the data and dictionary tables, the
--    claim of a request for a trigger, the phase of a trigger, partitions
--    through create_partitions(); it cannot read back samples, requests or
--    dictionaries and cannot create, alter or drop anything;
--  * traceprof_reader: SELECT on every table and view, EXECUTE on the
--    functions that only read; nothing it can write;
--  * traceprof_controller: the trigger table (read, insert, update) and
--    expire_triggers().
--
-- The functions a writer needs on rows it may not touch directly run as
-- the owner (SECURITY DEFINER, search_path fixed): create_partitions (so
-- partitions belong to the owner), claim_request (the writer claims, it
-- cannot rewrite a trigger) and the stacks trigger (it reads frames). A
-- migration that replaces one of them with CREATE OR REPLACE must say
-- SECURITY DEFINER and SET search_path again.
--
-- Idempotent and safe on any PostgreSQL: roles that exist are kept (a
-- managed PostgreSQL's administrator may create them beforehand), objects
-- of an upgraded database (data included) are handed to traceprof_owner,
-- and privileges are granted on what exists and, by default privileges, on
-- what traceprof_owner creates later (daily partitions, new functions).
-- Later migrations run as traceprof_owner (lib/migrate.c sets the role).

DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['traceprof_owner', 'traceprof_writer', 'traceprof_reader',
                             'traceprof_controller'] LOOP
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'role % does not exist and % may not create roles', r, current_user
                    USING HINT = 'have an administrator run: CREATE ROLE traceprof_owner NOLOGIN; '
                                 'CREATE ROLE traceprof_writer NOLOGIN; CREATE ROLE traceprof_reader NOLOGIN; '
                                 'CREATE ROLE traceprof_controller NOLOGIN; GRANT traceprof_owner TO '
                                 || quote_ident(current_user) || '; then migrate again';
            END;
        END IF;
    END LOOP;
    -- The migrating role must be able to act as the owner to hand it objects.
    IF current_user <> 'traceprof_owner'
       AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
       AND NOT pg_has_role(current_user, 'traceprof_owner', 'MEMBER') THEN
        EXECUTE format('GRANT traceprof_owner TO %I', current_user);
    END IF;
END $$;

-- Ownership of the schema and of every object in it. The schema itself only
-- when the owner may create in the database (ALTER SCHEMA needs that);
-- otherwise it keeps its owner and traceprof_owner gets USAGE and CREATE.
DO $$
DECLARE
    o record;
BEGIN
    IF (SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'traceprof')
           <> 'traceprof_owner' THEN
        IF has_database_privilege('traceprof_owner', current_database(), 'CREATE') THEN
            ALTER SCHEMA traceprof OWNER TO traceprof_owner;
        ELSE
            GRANT USAGE, CREATE ON SCHEMA traceprof TO traceprof_owner;
        END IF;
    END IF;
    -- Tables, partitions, views, sequences not owned by a column; indexes
    -- and owned sequences follow their table.
    FOR o IN
        SELECT c.oid::regclass AS name, c.relkind
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'traceprof'
          AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
          AND c.relowner <> 'traceprof_owner'::regrole
          AND NOT EXISTS (SELECT FROM pg_depend d
                          WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                            AND d.deptype IN ('a', 'i') AND c.relkind = 'S')
        ORDER BY c.oid
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO traceprof_owner',
                       CASE o.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                                      WHEN 'S' THEN 'SEQUENCE' WHEN 'f' THEN 'FOREIGN TABLE'
                                      ELSE 'TABLE' END,
                       o.name);
    END LOOP;
    FOR o IN
        SELECT p.oid::regprocedure AS name, p.prokind
        FROM pg_proc p
        JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'traceprof' AND p.proowner <> 'traceprof_owner'::regrole
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO traceprof_owner',
                       CASE o.prokind WHEN 'a' THEN 'AGGREGATE' WHEN 'p' THEN 'PROCEDURE'
                                      ELSE 'FUNCTION' END,
                       o.name);
    END LOOP;
    -- Standalone types (composite types of tables follow their table).
    FOR o IN
        SELECT t.oid::regtype AS name
        FROM pg_type t
        JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname = 'traceprof' AND t.typowner <> 'traceprof_owner'::regrole
          AND t.typtype IN ('c', 'e', 'd', 'r')
          AND (t.typrelid = 0 OR (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c')
    LOOP
        EXECUTE format('ALTER TYPE %s OWNER TO traceprof_owner', o.name);
    END LOOP;
END $$;

-- The functions a writer calls on rows it may not touch run as the owner.
ALTER FUNCTION traceprof.create_partitions(timestamptz, timestamptz)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION traceprof.claim_request(text, uuid)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION traceprof._stacks_fill_function_ids()
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Nobody but the roles below: functions are executable by PUBLIC unless
-- revoked, tables and the schema are not.
REVOKE ALL ON SCHEMA traceprof FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA traceprof FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA traceprof FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA traceprof FROM PUBLIC;
GRANT USAGE ON SCHEMA traceprof TO traceprof_writer, traceprof_reader, traceprof_controller;
-- Everyone checks the schema version before working.
GRANT SELECT ON traceprof.schema_migrations
    TO traceprof_writer, traceprof_reader, traceprof_controller;

-- Reader: every table and view, every function but the ones that write.
GRANT SELECT ON ALL TABLES IN SCHEMA traceprof TO traceprof_reader;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA traceprof TO traceprof_reader;
REVOKE EXECUTE ON FUNCTION
    traceprof.create_partitions(timestamptz, timestamptz),
    traceprof.drop_partitions(interval),
    traceprof.claim_request(text, uuid),
    traceprof.expire_triggers(),
    traceprof.repair_stack_functions(),
    traceprof.refresh_rollups(timestamptz),
    traceprof.refresh_rollups_range(timestamptz, timestamptz),
    traceprof._stacks_fill_function_ids()
    FROM traceprof_reader;

-- Writer: the agent's store (lib/store_flush.c) and trigger claims
-- (agent/triggers.c).
GRANT INSERT ON traceprof.samples, traceprof.requests, traceprof.trigger_samples,
                traceprof.functions, traceprof.frames, traceprof.stacks,
                traceprof.sources, traceprof.routes
    TO traceprof_writer;
GRANT SELECT ON traceprof.config TO traceprof_writer;
GRANT SELECT (trigger_id, phase) ON traceprof.trace_profile_triggers TO traceprof_writer;
GRANT EXECUTE ON FUNCTION traceprof.create_partitions(timestamptz, timestamptz),
                          traceprof.claim_request(text, uuid)
    TO traceprof_writer;

-- Controller: the trigger mirror (controller/triggers_db.c).
GRANT SELECT, INSERT, UPDATE ON traceprof.trace_profile_triggers TO traceprof_controller;
GRANT SELECT ON traceprof.triggers_v TO traceprof_controller;
GRANT EXECUTE ON FUNCTION traceprof.expire_triggers(),
                          traceprof.trace_id_text(uuid),
                          traceprof.parse_trace_id(text)
    TO traceprof_controller;

-- What traceprof_owner creates later: daily partitions (create_partitions
-- runs as it) and the objects of later migrations. Functions are not
-- executable by PUBLIC; the reader reads every new table and may call every
-- new function (one that writes fails for lack of table privileges). A
-- migration that adds a table the agent or the controller writes grants it.
ALTER DEFAULT PRIVILEGES FOR ROLE traceprof_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
ALTER DEFAULT PRIVILEGES FOR ROLE traceprof_owner IN SCHEMA traceprof
    GRANT SELECT ON TABLES TO traceprof_reader;
ALTER DEFAULT PRIVILEGES FOR ROLE traceprof_owner IN SCHEMA traceprof
    GRANT EXECUTE ON FUNCTIONS TO traceprof_reader;
