#!/usr/bin/env bash
# Per-request GPU queries, and what the GPU column costs
# trace_time_breakdown, on a store of traceprof-gen data with GPU rows.
#
# Creates a private cluster, fills it with traceprof-gen (RPS user
# requests/s for DURATION, services six times heavier than the demo's) and
# adds GPU rows as the agent writes them for the spans of one trace in ten
# and of every trace slower than 1 s: three launch stacks per row (two of
# the store's CPU stacks ending in one of eight [gpu] kernel frames, and a
# kernel frame alone), GPU time from the span's duration. Then, on the same
# traces: bench_queries of the GPU functions and trace_time_breakdown;
# trace_time_breakdown again with the form before GPU time (its text from
# git, GIT_BEFORE, default main) in place of the new one; and
# compare_gpu_cohorts over 10 minutes and one hour of payment-svc, warm.
# Nothing fails on timing.
# usage: bench/gpu_queries.sh    environment: RPS (1500), DURATION (3600s),
#   TRACES (1000), GIT_BEFORE (main), TRACEPROF_BUILD_DIR (build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
rps=${RPS:-1500} duration=${DURATION:-3600s} traces=${TRACES:-1000} before=${GIT_BEFORE:-main}
for b in "$build/cli/traceprof-db" "$build/tools/traceprof-gen" "$build/bench/bench_queries"; do
	[ -x "$b" ] || { echo "$0: $b is missing: build it first" >&2; exit 2; }
done
work=$(mktemp -d /var/tmp/traceprof-gpu-queries.XXXXXX)
chmod 755 "$work" # the database server runs as its own user
cleanup() {
	"$build/cli/traceprof-db" remove "$work/pg" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
"$build/cli/traceprof-db" create "$work/pg" -c shared_buffers=1GB >/dev/null
conn=$("$build/cli/traceprof-db" conninfo "$work/pg")
"$build/tools/traceprof-gen" --db "$conn" --rps "$rps" --duration "$duration" --work-scale 6 \
	--seed 42 >/dev/null
psql "$conn" -Xq -v ON_ERROR_STOP=1 <<'SQL'
-- ids above the generator's (the agent's dictionaries hash theirs)
INSERT INTO traceprof.functions (function_id, name, module)
SELECT (SELECT max(function_id) FROM traceprof.functions) + k, '[gpu] kernel_' || k, '[gpu]'
  FROM generate_series(1, 8) k;
INSERT INTO traceprof.frames (frame_id, function_id)
SELECT (SELECT max(frame_id) FROM traceprof.frames) + row_number() OVER (ORDER BY function_id), function_id
  FROM traceprof.functions WHERE module = '[gpu]';
CREATE TEMP TABLE kf AS
    SELECT row_number() OVER (ORDER BY frame_id) AS k, frame_id
      FROM traceprof.frames fr JOIN traceprof.functions f USING (function_id) WHERE f.module = '[gpu]';
-- 1,000 launch stacks: a store stack and a kernel; 8 stacks of a kernel alone
CREATE TEMP TABLE top AS SELECT max(stack_id) AS id FROM traceprof.stacks;
INSERT INTO traceprof.stacks (stack_id, frame_ids)
SELECT top.id + row_number() OVER (ORDER BY s.stack_id), s.frame_ids || kf.frame_id
  FROM (SELECT stack_id, frame_ids FROM traceprof.stacks ORDER BY stack_id LIMIT 1000) s
  JOIN kf ON kf.k = 1 + s.stack_id % 8, top;
INSERT INTO traceprof.stacks (stack_id, frame_ids) SELECT top.id + 1000 + kf.k, ARRAY[kf.frame_id] FROM kf, top;
CREATE TEMP TABLE st AS
    SELECT array_agg(s.stack_id ORDER BY s.stack_id) FILTER (WHERE cardinality(s.frame_ids) > 1) AS ids,
           array_agg(s.stack_id ORDER BY s.stack_id) FILTER (WHERE cardinality(s.frame_ids) = 1) AS alone
      FROM traceprof.stacks s
     WHERE s.frame_ids[cardinality(s.frame_ids)] IN (SELECT frame_id FROM kf);
INSERT INTO traceprof.gpu (bucket, source_id, span_id, trace_id, stacks, launches, gpu_ns)
SELECT date_trunc('second', r.start_time), r.source_id, r.span_id, r.trace_id,
       ARRAY[st.ids[1 + abs(hashint8(r.span_id)) % 1000], st.ids[1 + abs(hashint8(r.span_id + 1)) % 1000],
             st.alone[1 + abs(hashint8(r.span_id)) % 8]],
       ARRAY[4, 2, 1],
       ARRAY[r.duration_us * 400, r.duration_us * 200, 50000]::bigint[]
  FROM traceprof.requests r, st
 WHERE abs(hashtext(r.trace_id::text)) % 10 = 0 OR r.duration_us > 1000000;
VACUUM ANALYZE traceprof.samples, traceprof.requests, traceprof.gpu, traceprof.stacks, traceprof.frames,
    traceprof.functions;
SQL
psql "$conn" -XAtc "SELECT 'samples rows: ' || count(*) FROM traceprof.samples"
psql "$conn" -XAtc "SELECT 'requests: ' || count(*) FROM traceprof.requests"
psql "$conn" -XAtc "SELECT 'gpu rows: ' || count(*) FROM traceprof.gpu"
q=trace_gpu_kernels,trace_gpu_stacks,trace_gpu_folded,trace_time_breakdown
echo "== after: this build's API"
"$build/bench/bench_queries" "$conn" "$traces" any 42 "$q"
"$build/bench/bench_queries" "$conn" "$traces" slow 42 "$q"
echo "== before: trace_time_breakdown of $before (no GPU column)"
{
	echo "DROP FUNCTION traceprof.trace_time_breakdown(text);"
	git -C "$root" show "$before:sql/api/offcpu.sql"
} | psql "$conn" -Xq -v ON_ERROR_STOP=1 >/dev/null
"$build/bench/bench_queries" "$conn" "$traces" any 42 trace_time_breakdown
"$build/bench/bench_queries" "$conn" "$traces" slow 42 trace_time_breakdown
echo "== after again (migrate re-applies the API)"
"$build/cli/traceprof-db" migrate --db "$conn" >/dev/null
"$build/bench/bench_queries" "$conn" "$traces" any 42 trace_time_breakdown
"$build/bench/bench_queries" "$conn" "$traces" slow 42 trace_time_breakdown
echo "== compare_gpu_cohorts, payment-svc, slow (>= 1s) vs fast (< 100ms), warm"
for span in '10 minutes' '1 hour'; do
	for pass in warm timed; do
		out=$(psql "$conn" -XAt -v ON_ERROR_STOP=1 <<SQL
\\timing on
SELECT count(*) FROM traceprof.compare_gpu_cohorts('payment-svc',
    (SELECT min(start_time) FROM traceprof.requests),
    (SELECT min(start_time) FROM traceprof.requests) + interval '$span',
    '{"min_duration": "1s"}', '{"max_duration": "100ms"}');
SQL
)
		[ $pass = timed ] && echo "$span: $(tr '\n' ' ' <<<"$out")"
	done
done
