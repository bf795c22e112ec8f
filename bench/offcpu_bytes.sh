#!/usr/bin/env bash
# Bytes on disk per traceprof.offcpu row (heap, trace_id hash index,
# (source_id, bucket) btree), for rows of the shape the agent writes: one
# per (bucket, source, span, kind), trace-tagged, 1-5 stacks (uniform),
# 85 % blocked and 15 % runqueue, durations 0.1-500 ms; 10 sources
# writing 100 rows a second each (a process serving ~80 requests/s).
# usage: bench/offcpu_bytes.sh [ROWS]   (default 100000; a private cluster)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
rows=${1:-100000}
work=$(mktemp -d /tmp/tp-bench-offcpu.XXXXXX)
chmod 755 "$work"
trap '"$build/cli/traceprof-db" remove "$work/db" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$build/cli/traceprof-db" create "$work/db" --fast >/dev/null
conn=$("$build/cli/traceprof-db" conninfo "$work/db")
psql "$conn" -qX -v ON_ERROR_STOP=1 >/dev/null <<SQL
SELECT setseed(0.42);
INSERT INTO traceprof.offcpu (bucket, source_id, span_id, trace_id, kind, stacks, us)
SELECT date_trunc('day', now()) + interval '1 hour' + (i / 1000) * interval '1 second',
       1 + i % 10, (random() * 9e18)::bigint, md5(i::text)::uuid,
       CASE WHEN random() < 0.85 THEN 1 ELSE 2 END,
       (SELECT array_agg((random() * 9e18)::bigint) FROM generate_series(1, n)),
       (SELECT array_agg(100 + (random() * 500000)::int) FROM generate_series(1, n))
  FROM (SELECT i, 1 + floor(random() * 5)::int AS n FROM generate_series(1, $rows) i) g;
VACUUM ANALYZE traceprof.offcpu;
SQL
psql "$conn" -qXAt -F ' ' <<'SQL'
WITH p AS (
    SELECT c.oid FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'traceprof.offcpu'::regclass AND c.reltuples > 0  -- the day written
), n AS (SELECT count(*) AS rows, avg(cardinality(stacks)) AS stacks FROM traceprof.offcpu)
SELECT 'rows ' || n.rows || ', stacks/row ' || round(n.stacks, 2) FROM n
UNION ALL
SELECT format('heap %s bytes/row', round(sum(pg_table_size(p.oid))::numeric / n.rows, 1)) FROM p, n GROUP BY n.rows
UNION ALL
SELECT format('%s %s bytes/row', regexp_replace(ic.relname, '^offcpu_p[0-9]+_', ''),
              round(sum(pg_relation_size(ic.oid))::numeric / n.rows, 1))
  FROM p JOIN pg_index x ON x.indrelid = p.oid JOIN pg_class ic ON ic.oid = x.indexrelid, n
 GROUP BY regexp_replace(ic.relname, '^offcpu_p[0-9]+_', ''), n.rows
UNION ALL
SELECT format('total %s bytes/row', round(sum(pg_total_relation_size(p.oid))::numeric / n.rows, 1)) FROM p, n GROUP BY n.rows;
SQL
