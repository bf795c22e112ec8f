-- trace_services and the service_spans of trace_summary (006) on a trace
-- across four services whose answers are worked out by hand below. One
-- 100 Hz sample is 10 ms of CPU, one 19 Hz sample 1000/19 ms.
SET TimeZone = 'UTC';
SELECT traceprof.create_partitions('2030-02-01', '2030-02-02');

INSERT INTO traceprof.sources (source_id, service, node) VALUES
    (1, 'frontend', 'node-a'), (2, 'payment-svc', 'node-b'), (3, 'inventory', 'node-c'), (4, 'batch', 'node-c');
INSERT INTO traceprof.functions (function_id, name, module) VALUES
    (1, 'main', 'frontend'), (2, 'handleRequest', 'frontend'), (3, 'render', 'frontend'),
    (11, 'main', 'payment'), (12, 'handlePayment', 'payment'), (13, 'validateSignature', 'payment'),
    (14, 'writeLog', 'payment'), (21, 'main', 'inventory'), (22, 'lookup', 'inventory'),
    (31, 'main', 'batch'), (32, 'consume', 'batch');
INSERT INTO traceprof.frames (frame_id, function_id) SELECT function_id + 100, function_id FROM traceprof.functions;
INSERT INTO traceprof.stacks (stack_id, frame_ids) VALUES
    (1, '{101,102}'),        -- main;handleRequest
    (2, '{101,102,103}'),    -- main;handleRequest;render
    (11, '{111,112,113}'),   -- main;handlePayment;validateSignature
    (12, '{111,112,114}'),   -- main;handlePayment;writeLog
    (13, '{111,112}'),       -- main;handlePayment
    (21, '{121,122}'),       -- main;lookup
    (31, '{131,132}');       -- main;consume
INSERT INTO traceprof.routes (route_id, method, route) VALUES
    (1, 'GET', '/checkout'), (2, 'POST', '/pay'), (3, 'GET', '/stock');

-- The trace (span ids in hex):
--   frontend    a1  root, GET /checkout, 4600 ms; 100 Hz stack 1 x10, stack 2 x20
--                   = 100 + 200 = 300 ms CPU, 6.522 % of the span: waiting;
--                   top render 200 / 300 = 66.667 %
--   payment-svc b2  parent a1, POST /pay, 4500 ms; 100 Hz stack 11 x300, 12 x20,
--                   13 x10 and (another node, another bucket) 19 Hz stack 11 x19:
--                   validateSignature 3000 + 1000 = 4000, writeLog 200,
--                   handlePayment 100 = 4300 ms CPU, 349 samples,
--                   95.556 % of the span: cpu; top 4000 / 4300 = 93.023 %
--   inventory   c3  parent a1, GET /stock 503, 200 ms, no samples, but inventory
--                   was sampled at 100 Hz within the minute (c4) and 200 ms is
--                   at least 5 periods (50 ms): waiting (unknown while no
--                   inventory samples are stored);
--                   its row is stored twice and counts once
--   inventory   c4  parent a1, GET /stock, 500 ms; 100 Hz stack 21 x15 = 150 ms,
--                   30 % of the span: mixed
--   batch       d5  no span row; 100 Hz stack 31 x5 = 50 ms: unknown
--   frontend    --  samples tagged with the trace but no span: 100 Hz stack 1 x3 = 30 ms
CREATE TEMP TABLE req (start_time timestamptz, source_id bigint, span_id bigint, parent_span_id bigint,
                       route_id bigint, duration_us bigint, status_code smallint);
INSERT INTO req VALUES
    ('2030-02-01 10:00:00+00', 1, x'a1'::int, NULL, 1, 4600000, 200),
    ('2030-02-01 10:00:00.05+00', 2, x'b2'::int, x'a1'::int, 2, 4500000, 200),
    ('2030-02-01 10:00:00.1+00', 3, x'c3'::int, x'a1'::int, 3, 200000, 503),
    ('2030-02-01 10:00:00.1+00', 3, x'c3'::int, x'a1'::int, 3, 200000, 503),
    ('2030-02-01 10:00:00.3+00', 3, x'c4'::int, x'a1'::int, 3, 500000, 200);
CREATE TEMP TABLE smp (bucket timestamptz, source_id bigint, span_id bigint, hz smallint,
                       stacks bigint[], counts integer[]);
INSERT INTO smp VALUES
    ('2030-02-01 10:00:00+00', 1, x'a1'::int, 100, '{1,2}', '{10,20}'),
    ('2030-02-01 10:00:00+00', 2, x'b2'::int, 100, '{11,12,13}', '{300,20,10}'),
    ('2030-02-01 10:00:03+00', 2, x'b2'::int, 19, '{11}', '{19}'),
    ('2030-02-01 10:00:00+00', 3, x'c4'::int, 100, '{21}', '{15}'),
    ('2030-02-01 10:00:01+00', 4, x'd5'::int, 100, '{31}', '{5}'),
    ('2030-02-01 10:00:04+00', 1, NULL, 100, '{1}', '{3}');

-- trace_services rows as text, one line per row, '-' for NULL.
CREATE FUNCTION pg_temp.rows(trace text) RETURNS text
LANGUAGE sql AS $$
    SELECT string_agg(concat_ws('|', service, coalesce(span_id, '-'), coalesce(parent_span_id, '-'),
                                coalesce(method, '-'), coalesce(route, '-'), coalesce(status::text, '-'),
                                coalesce(round(span_ms::numeric, 1)::text, '-'), samples,
                                round(cpu_ms::numeric, 3), coalesce(round(cpu_pct::numeric, 3)::text, '-'),
                                coalesce(top_function, '-'), coalesce(round(top_pct::numeric, 3)::text, '-'),
                                coalesce(round(top_cpu_ms::numeric, 3)::text, '-'), verdict), E'\n' ORDER BY i)
      FROM traceprof.trace_services(trace) WITH ORDINALITY AS x(service, span_id, parent_span_id, method, route,
                                                                status, start_time, span_ms, samples, cpu_ms,
                                                                cpu_pct, top_function, top_pct, top_cpu_ms,
                                                                verdict, i)
$$;

-- The whole trace, ordered by start, then the rows without a span (by service).
CREATE TEMP TABLE expected AS SELECT
    E'frontend|00000000000000a1|-|GET|/checkout|200|4600.0|30|300.000|6.522|render|66.667|200.000|waiting\n'
    'payment-svc|00000000000000b2|00000000000000a1|POST|/pay|200|4500.0|349|4300.000|95.556|validateSignature|93.023|4000.000|cpu\n'
    'inventory|00000000000000c3|00000000000000a1|GET|/stock|503|200.0|0|0.000|0.000|-|-|-|waiting\n'
    'inventory|00000000000000c4|00000000000000a1|GET|/stock|200|500.0|15|150.000|30.000|lookup|100.000|150.000|mixed\n'
    'batch|00000000000000d5|-|-|-|-|-|5|50.000|-|consume|100.000|50.000|unknown\n'
    'frontend|-|-|-|-|-|-|3|30.000|-|handleRequest|100.000|30.000|unknown'::text AS v;

-- Trace X (t.tid(100)): spans first ------------------------------------------
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, parent_span_id, route_id,
                                duration_us, status_code)
SELECT start_time, source_id, t.tid(100), span_id, parent_span_id, route_id, duration_us, status_code FROM req;
SELECT t.eq(pg_temp.rows('00000000000000000000000000000064'),
            E'frontend|00000000000000a1|-|GET|/checkout|200|4600.0|0|0.000|0.000|-|-|-|unknown\n'
            'payment-svc|00000000000000b2|00000000000000a1|POST|/pay|200|4500.0|0|0.000|0.000|-|-|-|unknown\n'
            'inventory|00000000000000c3|00000000000000a1|GET|/stock|503|200.0|0|0.000|0.000|-|-|-|unknown\n'
            'inventory|00000000000000c4|00000000000000a1|GET|/stock|200|500.0|0|0.000|0.000|-|-|-|unknown',
            'spans before their samples: every span, no CPU, unknown');
-- then the samples, from three nodes
INSERT INTO traceprof.samples (bucket, source_id, span_id, trace_id, hz, stacks, counts)
SELECT bucket, source_id, span_id, t.tid(100), hz, stacks, counts FROM smp;
SELECT t.eq(pg_temp.rows('00000000000000000000000000000064'), (SELECT v FROM expected),
            'spans then samples: cpu, waiting, mixed, a span without samples, samples without a span');

-- Trace Y (t.tid(101)): the same data, samples first -------------------------
INSERT INTO traceprof.samples (bucket, source_id, span_id, trace_id, hz, stacks, counts)
SELECT bucket, source_id, span_id, t.tid(101), hz, stacks, counts FROM smp;
-- Without span rows every group of samples is a row of its source's service,
-- no duration, verdict unknown; ordered by service, then span id.
SELECT t.eq(pg_temp.rows('00000000000000000000000000000065'),
            E'batch|00000000000000d5|-|-|-|-|-|5|50.000|-|consume|100.000|50.000|unknown\n'
            'frontend|00000000000000a1|-|-|-|-|-|30|300.000|-|render|66.667|200.000|unknown\n'
            'frontend|-|-|-|-|-|-|3|30.000|-|handleRequest|100.000|30.000|unknown\n'
            'inventory|00000000000000c4|-|-|-|-|-|15|150.000|-|lookup|100.000|150.000|unknown\n'
            'payment-svc|00000000000000b2|-|-|-|-|-|349|4300.000|-|validateSignature|93.023|4000.000|unknown',
            'samples before their spans: every sample group, unknown');
INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, parent_span_id, route_id,
                                duration_us, status_code)
SELECT start_time, source_id, t.tid(101), span_id, parent_span_id, route_id, duration_us, status_code FROM req;
SELECT t.eq(pg_temp.rows('00000000000000000000000000000065'), (SELECT v FROM expected),
            'samples then spans: the same answer as spans then samples');

SELECT t.eq((SELECT start_time FROM traceprof.trace_services('00000000000000000000000000000064') WHERE route = '/pay'),
            '2030-02-01 10:00:00.05+00'::timestamptz, 'span start');
SELECT t.near((SELECT cpu_pct FROM traceprof.trace_services('00000000000000000000000000000064')
                WHERE span_id = '00000000000000a1'), 100 * 300 / 4600.0, 1e-9, 'cpu_pct = cpu / duration');
SELECT t.eq((SELECT count(*) FROM traceprof.trace_services('0000000000000000000000000000006A')), 0::bigint,
            'unknown trace (upper-case id): empty, no error');

-- Verdict thresholds: cpu >= 50 %, waiting < 20 %, mixed between, unknown
-- without samples or without a duration.
SELECT t.eq(ARRAY[traceprof._span_verdict(100, 50), traceprof._span_verdict(100, 49.9),
                  traceprof._span_verdict(100, 20), traceprof._span_verdict(100, 19.9),
                  traceprof._span_verdict(100, 0), traceprof._span_verdict(NULL, 10),
                  traceprof._span_verdict(0, 10), traceprof._span_verdict(100, 250),
                  traceprof._span_verdict(50, 0, 100), traceprof._span_verdict(49.9, 0, 100),
                  traceprof._span_verdict(100, 0, NULL), traceprof._span_verdict(300, 0, 19)],
            ARRAY['cpu', 'mixed', 'mixed', 'waiting', 'unknown', 'unknown', 'unknown', 'cpu',
                  'waiting', 'unknown', 'unknown', 'waiting'],
            'verdict thresholds (no samples: waiting when profiled for 5 periods or more)');

-- trace_summary: the keys of 004 still there, plus service_spans -------------
CREATE TEMP TABLE j AS SELECT traceprof.trace_summary('00000000000000000000000000000064') AS j;
-- services by CPU: payment-svc 4300, frontend 300 + 30, inventory 150 (two
-- spans, 700 ms: 150 >= 20 % of 700, not waiting), batch 50.
SELECT t.eq((SELECT j->>'verdict' FROM j),
            'payment-svc: 4500 ms span, validateSignature 93 % (4000 ms CPU); '
            'frontend: 4600 ms span, mostly waiting (330 ms CPU); '
            'inventory: 2 spans, 700 ms, lookup 100 % (150 ms CPU); '
            'batch: no span, consume 100 % (50 ms CPU)',
            'summary verdict as before (a span stored twice counts once)');
SELECT t.eq((SELECT (j->>'cpu_ms')::numeric FROM j), 4830.0, 'summary CPU: 4300 + 330 + 150 + 50');
SELECT t.eq((SELECT (j->>'samples')::int FROM j), 402, 'summary samples: 349 + 33 + 15 + 5');
SELECT t.eq((SELECT (j->>'duration_ms')::numeric FROM j), 4600::numeric, 'summary duration');
SELECT t.eq((SELECT jsonb_path_query_array(j, '$.services[*].service') FROM j),
            '["payment-svc", "frontend", "inventory", "batch"]'::jsonb, 'services key unchanged');
SELECT t.eq((SELECT jsonb_path_query_array(j, '$.services[2].spans[*].span_id') FROM j),
            '["00000000000000c3", "00000000000000c4"]'::jsonb, 'a span stored twice is listed once');
SELECT t.eq((SELECT jsonb_path_query_array(j, '$.service_spans[*].verdict') FROM j),
            '["waiting", "cpu", "waiting", "mixed", "unknown", "unknown"]'::jsonb, 'one entry per span row');
-- writeLog 200 / 4300 = 4.651 %, handlePayment 100 / 4300 = 2.326 %
SELECT t.eq((SELECT j->'service_spans'->1 FROM j),
            '{"service": "payment-svc", "span_id": "00000000000000b2", "parent_span_id": "00000000000000a1",
              "method": "POST", "route": "/pay", "status": 200, "start": "2030-02-01T10:00:00.05+00:00",
              "span_ms": 4500.000, "cpu_ms": 4300.0, "cpu_pct": 95.6, "verdict": "cpu",
              "hotspots": [{"function": "validateSignature", "pct": 93.0, "ms": 4000.0},
                           {"function": "writeLog", "pct": 4.7, "ms": 200.0},
                           {"function": "handlePayment", "pct": 2.3, "ms": 100.0}]}'::jsonb,
            'payment-svc span: cpu, validateSignature 93 % / 4000 ms');
SELECT t.eq((SELECT (j->'service_spans'->0) - 'start' FROM j),
            '{"service": "frontend", "span_id": "00000000000000a1", "parent_span_id": null,
              "method": "GET", "route": "/checkout", "status": 200,
              "span_ms": 4600.000, "cpu_ms": 300.0, "cpu_pct": 6.5, "verdict": "waiting",
              "hotspots": [{"function": "render", "pct": 66.7, "ms": 200.0},
                           {"function": "handleRequest", "pct": 33.3, "ms": 100.0}]}'::jsonb,
            'frontend span: waiting');
SELECT t.eq((SELECT j->'service_spans'->2 FROM j),
            '{"service": "inventory", "span_id": "00000000000000c3", "parent_span_id": "00000000000000a1",
              "method": "GET", "route": "/stock", "status": 503, "start": "2030-02-01T10:00:00.1+00:00",
              "span_ms": 200.000, "cpu_ms": 0.0, "cpu_pct": 0.0, "verdict": "waiting", "hotspots": []}'::jsonb,
            'span without samples, its service profiled around it: waiting');
SELECT t.eq((SELECT j->'service_spans'->4 FROM j),
            '{"service": "batch", "span_id": "00000000000000d5", "parent_span_id": null,
              "method": null, "route": null, "status": null, "start": null,
              "span_ms": null, "cpu_ms": 50.0, "cpu_pct": null, "verdict": "unknown",
              "hotspots": [{"function": "consume", "pct": 100.0, "ms": 50.0}]}'::jsonb,
            'samples without a span row');
SELECT t.eq(traceprof.trace_summary('00000000000000000000000000000065')->'service_spans',
            (SELECT j->'service_spans' FROM j), 'summary: the same in either arrival order');
SELECT t.eq(traceprof.trace_summary('0000000000000000000000000000006a'), NULL::jsonb,
            'unknown trace: NULL summary');

-- bad ids ----------------------------------------------------------------------
SELECT t.raises($$SELECT * FROM traceprof.trace_services('xyz')$$, 'invalid trace id "xyz"', 'malformed id');
SELECT t.raises($$SELECT * FROM traceprof.trace_services(NULL)$$,
                'trace_services: trace_id must not be null', 'NULL id');
SELECT t.raises($$SELECT * FROM traceprof.trace_services('')$$,
                'trace_services: trace_id must not be null or empty', 'empty id');
SELECT t.raises($$SELECT * FROM traceprof.trace_services('00000000000000000000000000000000')$$,
                'all zeros', 'zero id');
SELECT t.raises($$SELECT * FROM traceprof.trace_services('00000000000000000000000000000064 ')$$,
                'invalid trace id', 'trailing space');
SELECT t.raises(format('SELECT * FROM traceprof.trace_services(%L)', '''; DROP TABLE traceprof.samples; --'),
                'invalid trace id "''; DROP TABLE traceprof.samples; --"', 'SQL as trace id');
SELECT t.ok(to_regclass('traceprof.samples') IS NOT NULL, 'samples table still exists');
