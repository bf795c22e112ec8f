-- triggers_v.sql: triggers_v (taken from migration 002).

CREATE OR REPLACE VIEW traceprof.triggers_v AS
SELECT trigger_id, namespace, name, service, phase, reason,
       collected_requests || '/' || max_requests AS collected,
       (SELECT array_agg(traceprof.trace_id_text(t)) FROM unnest(trace_ids) t) AS trace_ids,
       deadline, created_at, completed_at
FROM traceprof.trace_profile_triggers;

-- The controller reads the trigger table through it.
GRANT SELECT ON traceprof.triggers_v TO traceprof_controller;
