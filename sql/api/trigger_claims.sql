-- trigger_claims.sql: claim_request, expire_triggers (taken from migration 002).

-- Claims one finished request for a trigger. One UPDATE: under concurrency
-- PostgreSQL re-evaluates the WHERE clause against the newest row version
-- after the competing update commits, so collected_requests can never pass
-- max_requests and a trace is never claimed twice. Returns the new count, or
-- NULL when the trigger is not active, is full, has expired, or already has
-- this trace. The trigger turns Completed with its last claim.
CREATE OR REPLACE FUNCTION traceprof.claim_request(p_trigger_id text, p_trace_id uuid)
RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
CREATE OR REPLACE FUNCTION traceprof.expire_triggers() RETURNS integer
LANGUAGE sql AS $$
    WITH e AS (
        UPDATE traceprof.trace_profile_triggers
           SET phase = 'Expired', completed_at = now(), reason = 'deadline passed'
         WHERE phase IN ('Active', 'Pending') AND deadline <= now()
        RETURNING 1)
    SELECT count(*)::integer FROM e
$$;

-- The writer claims (claim_request runs as the owner: the writer cannot
-- rewrite a trigger), the controller expires; the reader does neither.
REVOKE EXECUTE ON FUNCTION traceprof.claim_request(text, uuid), traceprof.expire_triggers()
    FROM traceprof_reader;
GRANT EXECUTE ON FUNCTION traceprof.claim_request(text, uuid) TO traceprof_writer;
GRANT EXECUTE ON FUNCTION traceprof.expire_triggers() TO traceprof_controller;
