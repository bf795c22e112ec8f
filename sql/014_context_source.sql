-- 014_context_source: which source tagged a request (docs/zero-code-http.md,
-- "In the agent and the store").
--
-- A request row comes either from a server span received over OTLP (an
-- SDK, a collector or OBI exporting it: 1) or from the agent's zero-code
-- HTTP/1.x capture, which found the request in the server's system calls
-- (2). NULL: not recorded (rows written before this migration, or by a
-- writer that does not say). The column is nullable so that adding it to a
-- large partitioned table rewrites nothing; the check keeps unknown codes
-- out. Users read it as text through requests_v.context_source.
ALTER TABLE traceprof.requests
    ADD COLUMN IF NOT EXISTS context_source smallint
    CHECK (context_source IN (1, 2));
