-- What a database's traceprof schema is, as rows to compare: relations with
-- their owner and privileges, columns, indexes, constraints, functions
-- (owner, definition digest, privileges, EXECUTE per role), views,
-- triggers, types, configuration and default privileges. Used by
-- run_upgrade_test.sh; names only, no oids, so two databases compare.
SELECT 'rel', c.relname, c.relkind, pg_get_userbyid(c.relowner), coalesce(array_to_string(c.relacl,','),'') FROM pg_class c JOIN pg_namespace n ON n.oid=c.relnamespace WHERE nspname='traceprof' ORDER BY 2;
SELECT 'col', c.relname, a.attname, format_type(a.atttypid,a.atttypmod), a.attnotnull, pg_get_expr(d.adbin,d.adrelid), a.attnum FROM pg_attribute a JOIN pg_class c ON c.oid=a.attrelid JOIN pg_namespace n ON n.oid=c.relnamespace LEFT JOIN pg_attrdef d ON d.adrelid=a.attrelid AND d.adnum=a.attnum WHERE nspname='traceprof' AND a.attnum>0 AND NOT a.attisdropped ORDER BY 2,3;
SELECT 'idx', indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index i JOIN pg_class c ON c.oid=i.indexrelid JOIN pg_namespace n ON n.oid=c.relnamespace WHERE nspname='traceprof' ORDER BY 2;
SELECT 'con', conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace='traceprof'::regnamespace ORDER BY 2,3;
SELECT 'fn', p.oid::regprocedure::text, pg_get_userbyid(p.proowner), pg_get_functiondef(p.oid), coalesce(array_to_string(p.proacl,','),'') FROM pg_proc p WHERE pronamespace='traceprof'::regnamespace ORDER BY 2;
SELECT 'priv', p.oid::regprocedure::text, r, has_function_privilege(r, p.oid, 'EXECUTE') FROM pg_proc p, unnest(ARRAY['traceprof_owner','traceprof_writer','traceprof_reader','traceprof_controller']) r WHERE pronamespace='traceprof'::regnamespace ORDER BY 2,3;
SELECT 'view', c.relname, pg_get_viewdef(c.oid) FROM pg_class c WHERE relnamespace='traceprof'::regnamespace AND relkind='v' ORDER BY 2;
SELECT 'trg', tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal AND tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace='traceprof'::regnamespace) ORDER BY 2,3;
SELECT 'type', t.typname, pg_get_userbyid(t.typowner) FROM pg_type t WHERE typnamespace='traceprof'::regnamespace AND typtype IN ('c','e','d','r') AND (t.typrelid = 0 OR (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c') ORDER BY 2;
SELECT 'cfg', key, value FROM traceprof.config ORDER BY 2;
SELECT 'def', defaclrole::regrole::text, defaclnamespace::regnamespace::text, defaclobjtype, array_to_string(defaclacl, ',') FROM pg_default_acl ORDER BY 2,3,4;
SELECT 'schema', nspname, pg_get_userbyid(nspowner), array_to_string(nspacl, ',') FROM pg_namespace WHERE nspname = 'traceprof';
