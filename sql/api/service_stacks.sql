-- service_stacks.sql: service_stacks (taken from migration 009).

-- The stacks of one service in [from_time, until_time): raw samples and
-- CPU ms per stack id (samples only, as service_folded). Ordered by stack.
CREATE OR REPLACE FUNCTION traceprof.service_stacks(service text, from_time timestamptz,
                                         until_time timestamptz, only_requests boolean DEFAULT false)
RETURNS TABLE (stack_id bigint, samples bigint, cpu_ms double precision)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    svc text := traceprof._arg_required($1, 'service_stacks', 'service');
BEGIN
    PERFORM traceprof._arg_range($2, $3, 'service_stacks');
    RETURN QUERY
    SELECT s.stack_id, s.samples, s.cpu_ms
      FROM traceprof._service_stacks(svc, $2, $3, coalesce($4, false)) s
     ORDER BY s.stack_id;
END $$;
