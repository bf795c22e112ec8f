-- Partitions are created ahead and dropped past retention; trace and span
-- ids parse strictly and round-trip.
SELECT t.ok(traceprof.create_partitions(now() - interval '10 days', now() - interval '9 days')
            = 2 * cardinality(traceprof._partitioned_tables()),
            'two days x every partitioned table created');
SELECT t.eq(traceprof.create_partitions(now() - interval '10 days', now() - interval '9 days'), 0,
            'creating again is a no-op');
SELECT t.ok(to_regclass('traceprof.samples_p' || to_char((now() AT TIME ZONE 'UTC') + interval '2 days', 'YYYYMMDD')) IS NOT NULL,
            'partitions exist two days ahead');
INSERT INTO traceprof.samples (bucket, source_id, hz, stacks)
VALUES (now() - interval '10 days', 1, 19, '{1}'), (now(), 1, 19, '{1}');
SELECT t.eq((SELECT count(*) FROM traceprof.drop_partitions(interval '7 days')),
            2::bigint * cardinality(traceprof._partitioned_tables()),
            'old partitions dropped');
SELECT t.eq((SELECT count(*) FROM traceprof.samples), 1::bigint, 'recent data kept');
SELECT t.raises($$SELECT traceprof.drop_partitions(interval '5 minutes')$$, 'too short',
                'tiny retention refused');
SELECT t.raises($$SELECT traceprof.create_partitions(now(), now() + interval '3 years')$$, 'longer than 400 days',
                'absurd range refused');
SELECT t.raises($$INSERT INTO traceprof.samples (bucket, source_id, hz, stacks) VALUES (now() + interval '30 days', 1, 19, '{1}')$$,
                'no partition', 'rows outside partitions are refused');

SELECT t.eq(traceprof.trace_id_text(traceprof.parse_trace_id('4BF92F3577B34DA6A3CE929D0E0E4736')),
            '4bf92f3577b34da6a3ce929d0e0e4736', 'trace id round trip');
SELECT t.raises($$SELECT traceprof.parse_trace_id('00000000000000000000000000000000')$$, 'all zeros', 'zero trace id');
SELECT t.raises($$SELECT traceprof.parse_trace_id('4bf92f35-77b3-4da6-a3ce-929d0e0e4736')$$, '32 hexadecimal', 'dashes refused');
SELECT t.raises($$SELECT traceprof.parse_trace_id('''; DROP TABLE traceprof.samples; --')$$, 'invalid trace id', 'injection is just a bad id');
SELECT t.ok(to_regclass('traceprof.samples') IS NOT NULL, 'samples still there');
SELECT t.eq(traceprof.span_id_text(traceprof.parse_span_id('ffffffffffffffff')), 'ffffffffffffffff', 'span high bit');
SELECT t.eq(traceprof.parse_span_id('00f067aa0ba902b7'), x'00f067aa0ba902b7'::bigint, 'span id value');
SELECT t.raises($$SELECT traceprof.parse_span_id('0000000000000000')$$, 'not all zero', 'zero span');
