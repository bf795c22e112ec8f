-- 001_schema: dictionaries, samples, requests, triggers, configuration.
--
-- Workload: agents on every node stream trace-tagged CPU samples with COPY,
-- tens of thousands of rows per second per node; users look up one trace
-- (a handful of rows) or aggregate one service over minutes to hours.
--
-- Storage design (docs/storage.md explains the figures):
--  * dictionaries (functions, frames, stacks, sources, routes) are keyed by
--    64-bit content hashes that the writer computes, so agents insert with
--    ON CONFLICT DO NOTHING and never ask for an id; there are no foreign keys
--    on the hot tables for the same reason;
--  * one samples row holds every sample of one (time bucket, source, span,
--    frequency) as an array of stack ids, not one row per sample: the tuple
--    header is paid once per request instead of once per sample;
--  * trace ids are uuid (16 bytes, fixed width), span ids bigint;
--  * samples and requests are range-partitioned by day; retention drops
--    whole partitions (traceprof.drop_partitions).

CREATE SCHEMA IF NOT EXISTS traceprof;

CREATE TABLE traceprof.config (
    key         text PRIMARY KEY,
    value       text NOT NULL,
    description text NOT NULL
);
INSERT INTO traceprof.config (key, value, description) VALUES
    ('retention', '7 days', 'samples, requests and rollups older than this are dropped by traceprof.drop_partitions()'),
    ('partitions_ahead', '2 days', 'traceprof.create_partitions() keeps this much time ahead partitioned'),
    ('rollup_settle', '2 minutes', 'traceprof.refresh_rollups() leaves the newest minutes this long for late spans and samples')
ON CONFLICT (key) DO NOTHING;

-- Where samples and requests come from. build_id is the main executable's
-- GNU build id (hex), so a redeployment is a new source.
CREATE TABLE traceprof.sources (
    source_id  bigint PRIMARY KEY,
    service    text NOT NULL,
    namespace  text NOT NULL DEFAULT '',
    pod        text NOT NULL DEFAULT '',
    container  text NOT NULL DEFAULT '',
    node       text NOT NULL DEFAULT '',
    build_id   text NOT NULL DEFAULT '',
    first_seen timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sources_service_idx ON traceprof.sources (service);

-- A function: what flame graphs and top lists group by. kind 0 = user code,
-- 1 = kernel, 2 = unsymbolized (name is module+0xoffset).
CREATE TABLE traceprof.functions (
    function_id bigint PRIMARY KEY,
    name        text NOT NULL,
    module      text NOT NULL DEFAULT '',
    kind        smallint NOT NULL DEFAULT 0 CHECK (kind BETWEEN 0 AND 2)
);

-- A frame: a function at one place of one build.
CREATE TABLE traceprof.frames (
    frame_id    bigint PRIMARY KEY,
    function_id bigint NOT NULL,
    build_id    text NOT NULL DEFAULT '',
    file        text,
    line        integer,
    address     bigint
);

-- A stack: frame ids, root first (the order of folded stacks), and the
-- function id of each frame in the same order. function_ids is derived from
-- frames once, when the stack is inserted (a trigger in 003 fills it when the
-- writer leaves it NULL), so analyses expand a stack into functions without
-- a dictionary lookup per frame: three times faster for large profiles.
CREATE TABLE traceprof.stacks (
    stack_id     bigint PRIMARY KEY,
    frame_ids    bigint[] NOT NULL CHECK (cardinality(frame_ids) BETWEEN 1 AND 512),
    function_ids bigint[] NOT NULL,
    CHECK (cardinality(function_ids) = cardinality(frame_ids))
);

-- An endpoint: HTTP method and route template (or path when no route).
CREATE TABLE traceprof.routes (
    route_id bigint PRIMARY KEY,
    method   text NOT NULL DEFAULT '',
    route    text NOT NULL DEFAULT ''
);

-- CPU samples. One row = the samples of one span (or of no request, when
-- trace_id is NULL) from one source in one time bucket at one frequency.
-- stacks[i] was sampled counts[i] times (counts NULL: once each; a stack may
-- repeat). CPU time of one sample = 1000 / hz milliseconds.
CREATE TABLE traceprof.samples (
    bucket    timestamptz NOT NULL,
    source_id bigint NOT NULL,
    span_id   bigint,
    trace_id  uuid,
    hz        smallint NOT NULL CHECK (hz BETWEEN 1 AND 1000),
    stacks    bigint[] NOT NULL,
    counts    integer[],
    CHECK (counts IS NULL OR cardinality(counts) = cardinality(stacks))
) PARTITION BY RANGE (bucket);
-- Hash, not btree: equality is the only lookup, and a hash entry is 4 bytes
-- of key where a btree entry would carry the whole 16-byte uuid.
CREATE INDEX samples_trace_idx ON traceprof.samples USING hash (trace_id);
-- Btree deduplication stores one key per (source, bucket) and a list of row
-- pointers, so this costs about 6 bytes per row.
CREATE INDEX samples_source_idx ON traceprof.samples (source_id, bucket);

-- Requests: one row per server span.
CREATE TABLE traceprof.requests (
    start_time     timestamptz NOT NULL,
    source_id      bigint NOT NULL,
    trace_id       uuid NOT NULL,
    span_id        bigint NOT NULL,
    parent_span_id bigint,
    route_id       bigint NOT NULL DEFAULT 0,
    duration_us    bigint NOT NULL CHECK (duration_us >= 0),
    status_code    smallint NOT NULL DEFAULT 0
) PARTITION BY RANGE (start_time);
CREATE INDEX requests_trace_idx ON traceprof.requests USING hash (trace_id);
CREATE INDEX requests_source_idx ON traceprof.requests (source_id, start_time);

-- Triggers mirrored from TraceProfileTrigger resources (or trigger files).
-- collected_requests never exceeds max_requests: traceprof.claim_request()
-- is one UPDATE whose WHERE clause re-checks the count on the latest row
-- version, so concurrent agents serialise on the row.
CREATE TABLE traceprof.trace_profile_triggers (
    trigger_id         text PRIMARY KEY,
    namespace          text NOT NULL DEFAULT '',
    name               text NOT NULL,
    service            text,
    spec               jsonb NOT NULL DEFAULT '{}',
    phase              text NOT NULL DEFAULT 'Pending'
                       CHECK (phase IN ('Pending', 'Active', 'Completed', 'Expired', 'Rejected', 'Failed')),
    reason             text,
    frequency_hz       smallint NOT NULL DEFAULT 99 CHECK (frequency_hz BETWEEN 1 AND 100),
    max_requests       integer NOT NULL DEFAULT 10 CHECK (max_requests BETWEEN 1 AND 1000),
    collected_requests integer NOT NULL DEFAULT 0,
    trace_ids          uuid[] NOT NULL DEFAULT '{}',
    created_at         timestamptz NOT NULL DEFAULT now(),
    started_at         timestamptz,
    deadline           timestamptz NOT NULL,
    completed_at       timestamptz,
    generation         bigint NOT NULL DEFAULT 1,
    CHECK (collected_requests BETWEEN 0 AND max_requests),
    CHECK (cardinality(trace_ids) = collected_requests)
);
CREATE INDEX trace_profile_triggers_active_idx
    ON traceprof.trace_profile_triggers (service) WHERE phase = 'Active';
