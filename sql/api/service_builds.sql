-- service_builds.sql: service_builds (taken from migration 009).

-- The builds (sources.build_id) of a service's samples in [from_time,
-- until_time): first and last sample bucket and raw samples of each,
-- in order of first appearance. '' is a build the agent could not read.
CREATE OR REPLACE FUNCTION traceprof.service_builds(service text, from_time timestamptz, until_time timestamptz)
RETURNS TABLE (build_id text, first_bucket timestamptz, last_bucket timestamptz, samples bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    svc text := traceprof._arg_required($1, 'service_builds', 'service');
BEGIN
    PERFORM traceprof._arg_range($2, $3, 'service_builds');
    RETURN QUERY
    SELECT so.build_id, min(s.bucket), max(s.bucket),
           sum((SELECT sum(coalesce(u.n, 1)) FROM unnest(s.stacks, s.counts) AS u(id, n)))::bigint
      FROM traceprof.sources so
      JOIN traceprof.samples s ON s.source_id = so.source_id
     WHERE so.service = svc AND s.bucket >= $2 AND s.bucket < $3
     GROUP BY so.build_id
     ORDER BY min(s.bucket), so.build_id COLLATE "C";
END $$;
