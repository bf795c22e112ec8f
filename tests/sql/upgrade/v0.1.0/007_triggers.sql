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

-- Register the table with the partition manager, keeping whatever earlier
-- migrations registered: create_partitions() and drop_partitions() then
-- cover it together with samples, so retention drops both alike.
DO $$
DECLARE
    tables text[] := traceprof._partitioned_tables();
BEGIN
    IF NOT 'trigger_samples' = ANY (tables) THEN
        tables := tables || 'trigger_samples'::text;
    END IF;
    EXECUTE format('CREATE OR REPLACE FUNCTION traceprof._partitioned_tables() RETURNS text[] '
                   'LANGUAGE sql IMMUTABLE AS $f$ SELECT %L::text[] $f$', tables);
END $$;

-- Partitions for every day samples has (up to create_partitions' 400-day
-- limit), so an upgraded database has the same days in both tables.
SELECT traceprof.create_partitions(
    greatest(now() - interval '397 days',
             least(now() - interval '1 day',
                   (SELECT min(to_date(right(c.relname, 8), 'YYYYMMDD'))::timestamp AT TIME ZONE 'UTC'
                      FROM pg_inherits i
                      JOIN pg_class c ON c.oid = i.inhrelid
                      JOIN pg_class p ON p.oid = i.inhparent
                      JOIN pg_namespace n ON n.oid = p.relnamespace
                     WHERE n.nspname = 'traceprof' AND p.relname = 'samples'
                       AND c.relname ~ '_p[0-9]{8}$'))),
    NULL);

-- One trace's rows ----------------------------------------------------------

-- Where a trace's samples are looked for: from its first request start minus
-- config trace_window_margin to its last request end plus the margin;
-- (-infinity, infinity) when it has no request rows (as in 004).
CREATE FUNCTION traceprof._trace_window(p_trace uuid, OUT lo timestamptz, OUT hi timestamptz)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    margin interval;
BEGIN
    SELECT min(r.start_time), max(r.start_time + r.duration_us * interval '1 microsecond')
      INTO lo, hi
      FROM traceprof.requests r
     WHERE r.trace_id = p_trace;
    IF lo IS NULL THEN
        lo := '-infinity';
        hi := 'infinity';
    ELSE
        margin := coalesce((SELECT c.value::interval FROM traceprof.config c
                             WHERE c.key = 'trace_window_margin'), interval '5 minutes');
        lo := lo - margin;
        hi := hi + margin;
    END IF;
END $$;

-- The sample rows of one trace that per-trace queries count: per source,
-- its trigger_samples rows (of one trigger, the smallest id) when it has
-- any in the trace's window, else its samples rows. raised tells which.
-- Two hash index lookups in the partitions of the window.
CREATE FUNCTION traceprof._trace_rows(p_trace uuid)
RETURNS TABLE (source_id bigint, span_id bigint, hz smallint, stacks bigint[], counts integer[],
               raised boolean)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    w record;
BEGIN
    SELECT * INTO w FROM traceprof._trace_window(p_trace);
    RETURN QUERY
    WITH up AS MATERIALIZED (
        SELECT t.source_id, t.span_id, t.hz, t.stacks, t.counts, t.trigger_id
          FROM traceprof.trigger_samples t
         WHERE t.trace_id = p_trace
           AND t.bucket >= w.lo AND t.bucket <= w.hi
    ), pick AS (
        SELECT u.source_id, min(u.trigger_id COLLATE "C") AS trigger_id
          FROM up u
         GROUP BY u.source_id
    )
    SELECT u.source_id, u.span_id, u.hz, u.stacks, u.counts, true
      FROM up u
      JOIN pick p ON p.source_id = u.source_id AND p.trigger_id = u.trigger_id COLLATE "C"
    UNION ALL
    SELECT s.source_id, s.span_id, s.hz, s.stacks, s.counts, false
      FROM traceprof.samples s
     WHERE s.trace_id = p_trace
       AND s.bucket >= w.lo AND s.bucket <= w.hi
       AND NOT EXISTS (SELECT FROM pick p WHERE p.source_id = s.source_id);
END $$;

-- _trace_span_stacks (006) over _trace_rows, keeping the span: what
-- trace_services and trace_summary read.
CREATE OR REPLACE FUNCTION traceprof._trace_span_stacks(p_trace uuid)
RETURNS TABLE (span_id bigint, service text, stack_id bigint, samples bigint, cpu_ms double precision)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN QUERY
    SELECT x.span_id, coalesce(src.service, '[unknown]'), x.stack_id, sum(x.n)::bigint,
           sum(x.n * 1000.0::float8 / x.hz)
      FROM (SELECT s.span_id, s.source_id, s.hz, u.stack_id, sum(coalesce(u.n, 1)) AS n
              FROM traceprof._trace_rows(p_trace) s
              CROSS JOIN LATERAL unnest(s.stacks, s.counts) AS u(stack_id, n)
             GROUP BY s.span_id, s.source_id, s.hz, u.stack_id) x
      LEFT JOIN traceprof.sources src ON src.source_id = x.source_id
     GROUP BY x.span_id, 2, x.stack_id;
END $$;

-- _trace_stacks (004), the same rows without the span: per (service, stack
-- id) of one trace, the raw count and CPU ms, each row weighted by its hz.
CREATE OR REPLACE FUNCTION traceprof._trace_stacks(p_trace uuid, p_service text)
RETURNS TABLE (service text, stack_id bigint, samples bigint, cpu_ms double precision)
LANGUAGE sql STABLE AS $$
    SELECT x.service, x.stack_id, sum(x.samples)::bigint, sum(x.cpu_ms)
      FROM traceprof._trace_span_stacks(p_trace) x
     WHERE p_service IS NULL OR x.service = p_service
     GROUP BY x.service, x.stack_id
$$;

-- What a trigger collected ---------------------------------------------------

-- Per trigger and claimed trace (in claim order): the claimed request and
-- the raised samples written for it. The request shown is the trace's span
-- of the trigger's service when it names one, else of a source with raised
-- rows of this trigger, else the earliest span; its columns are NULL while
-- no span row has arrived. raised_* sum the trigger's rows of the trace in
-- every partition; raised_samples 0: none written (yet).
CREATE VIEW traceprof.trigger_requests_v AS
SELECT t.trigger_id, t.namespace, t.name, t.phase,
       c.claim_order,
       traceprof.trace_id_text(c.trace_id) AS trace_id,
       r.service, r.span_id, r.method, r.route, r.status_code, r.start_time, r.duration_ms,
       coalesce(x.raised_samples, 0) AS raised_samples,
       coalesce(x.raised_cpu_ms, 0) AS raised_cpu_ms,
       x.raised_hz
  FROM traceprof.trace_profile_triggers t
 CROSS JOIN LATERAL unnest(t.trace_ids) WITH ORDINALITY AS c(trace_id, claim_order)
  LEFT JOIN LATERAL (
        SELECT coalesce(so.service, '[unknown]') AS service,
               traceprof.span_id_text(q.span_id) AS span_id,
               coalesce(rt.method, '') AS method, coalesce(rt.route, '') AS route,
               q.status_code, q.start_time, q.duration_us / 1000.0 AS duration_ms
          FROM traceprof.requests q
          LEFT JOIN traceprof.sources so ON so.source_id = q.source_id
          LEFT JOIN traceprof.routes rt ON rt.route_id = q.route_id
         WHERE q.trace_id = c.trace_id
         ORDER BY (t.service IS NOT NULL AND so.service = t.service) DESC,
                  EXISTS (SELECT FROM traceprof.trigger_samples ts
                           WHERE ts.trace_id = c.trace_id AND ts.trigger_id = t.trigger_id
                             AND ts.source_id = q.source_id) DESC,
                  q.start_time, q.span_id
         LIMIT 1) r ON true
  LEFT JOIN LATERAL (
        SELECT sum(coalesce(u.n, 1))::bigint AS raised_samples,
               sum(coalesce(u.n, 1) * 1000.0::float8 / ts.hz) AS raised_cpu_ms,
               max(ts.hz)::integer AS raised_hz
          FROM traceprof.trigger_samples ts
         CROSS JOIN LATERAL unnest(ts.stacks, ts.counts) AS u(stack_id, n)
         WHERE ts.trace_id = c.trace_id AND ts.trigger_id = t.trigger_id) x ON true;
