#!/usr/bin/env bash
# Stack completeness of the demo service (built with -O2, no frame
# pointers, calling libc and libcrypto): the share of samples whose user
# stack reaches the thread's root (_start, __libc_start_main, clone,
# clone3, start_thread), for the slow path (a frame of libcrypto or
# validateSignature) and for the rest, three ways on the same load:
#   cfi  traceprof-agent as it runs by default (.eh_frame tables)
#   fp   traceprof-agent with --unwind-table-bytes 0 (frame pointers only)
#   perf perf record --call-graph dwarf on the same process, as the
#        reference, at the same time as the cfi agent
# The agent samples at 99 Hz; samples of the first WARMUP seconds after
# the agent started (tables still being built) are counted apart.
# Needs root, kernel BTF and perf (Debian's linux-perf). Reports only.
# usage: bench/demo_stacks.sh [BUILD_DIR] [ROUNDS] [WARMUP_S]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build} rounds=${2:-3} warmup=${3:-15}
tpdb=$build/cli/traceprof-db agent=$build/agent/traceprof-agent
service=$build/examples/traceprof-demo-service load=$build/examples/traceprof-demo-load
[ "$(id -u)" -eq 0 ] || { echo "needs root (BPF, perf events)" >&2; exit 2; }
command -v perf >/dev/null || { echo "needs perf (linux-perf)" >&2; exit 2; }
work=$(mktemp -d)
pids=()
finish() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	"$tpdb" remove "$work/db" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap finish EXIT
chmod 755 "$work"
"$tpdb" create --fast "$work/db" >/dev/null

# rooted_sql T: phase|kind|samples|rooted: warm-up (buckets before epoch T)
# or steady, slow path or other
rooted_sql() {
	cat <<EOF
WITH s AS (SELECT sm.bucket, coalesce(sm.counts[u.i], 1) AS n, st.function_ids AS ids
             FROM traceprof.samples sm
            CROSS JOIN LATERAL unnest(sm.stacks) WITH ORDINALITY u(k, i)
             JOIN traceprof.stacks st ON st.stack_id = u.k),
     f AS (SELECT n, CASE WHEN bucket < to_timestamp($1) THEN 'warm-up' ELSE 'steady' END AS phase,
                  (SELECT name FROM traceprof.functions WHERE function_id = ids[1])
                     IN ('_start', '__libc_start_main', 'clone', 'clone3', 'start_thread') AS rooted,
                  EXISTS (SELECT 1 FROM unnest(ids) x JOIN traceprof.functions fn ON fn.function_id = x
                           WHERE fn.module = 'libcrypto.so.3' OR fn.name = 'validateSignature') AS slow
             FROM s)
SELECT phase, CASE WHEN slow THEN 'slow' ELSE 'other' END, sum(n), coalesce(sum(n) FILTER (WHERE rooted), 0)
  FROM f GROUP BY 1, 2 ORDER BY 1 DESC, 2 DESC
EOF
}

# perf_rooted FILE: slow|samples|rooted, other|samples|rooted of perf script output
perf_rooted() {
	python3 - "$1" <<'EOF'
import sys
roots = ('_start', '__libc_start_main', 'clone', 'clone3', 'start_thread')
count = {'slow': [0, 0], 'other': [0, 0]}
for block in open(sys.argv[1]).read().strip().split('\n\n'):
    frames = [l.split() for l in block.strip().split('\n')[1:]]
    frames = [f for f in frames if len(f) > 1]
    if not frames:
        continue
    root = frames[-1][1].split('+')[0]
    kind = 'slow' if 'libcrypto' in block or 'validateSignature' in block else 'other'
    count[kind][0] += 1
    count[kind][1] += any(root.startswith(r) for r in roots)
for k in ('slow', 'other'):
    print('%s|%d|%d' % (k, count[k][0], count[k][1]))
EOF
}

# run MODE ROUND: one service, one agent (and perf for cfi), the same load
run() {
	local mode=$1 n=$2 name conn extra=() svc agent_pid perf_pid=''
	name=tp_demo_stacks_${mode}_$n
	psql "$("$tpdb" conninfo "$work/db" --dbname postgres)" -qX -v ON_ERROR_STOP=1 \
		-c "SET client_min_messages TO warning" -c "DROP DATABASE IF EXISTS $name" \
		-c "CREATE DATABASE $name" >/dev/null
	conn=$("$tpdb" conninfo "$work/db" --dbname "$name")
	"$tpdb" migrate --db "$conn" >/dev/null
	[ "$mode" = fp ] && extra=(--unwind-table-bytes 0)
	"$service" --port 0 --threads 2 --work-scale 0.5 >"$work/svc.out" 2>/dev/null &
	svc=$!
	pids+=("$svc")
	for _ in $(seq 100); do grep -q '^listening on' "$work/svc.out" && break; sleep 0.1; done
	port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/svc.out")
	local t0
	t0=$(date +%s)
	"$agent" --db "$("$tpdb" conninfo "$work/db" --dbname "$name" --role writer)" \
		--target "pid:$svc" --frequency 99 --window 2s --otlp-http "" --otlp-grpc "" \
		--control-listen "" "${extra[@]}" 2>"$work/agent.log" &
	agent_pid=$!
	pids+=("$agent_pid")
	# the same load during warm-up and after: tables are built while it runs
	"$load" --port "$port" --duration $((warmup + 20)) --rate 20 --concurrency 2 --slow-fraction 0.2 \
		--error-fraction 0.04 --seed "$n" -q >/dev/null 2>&1 &
	local load_pid=$!
	sleep "$warmup"
	if [ "$mode" = cfi ]; then
		perf record -q -F 99 --call-graph dwarf,16384 -p "$svc" -o "$work/perf.data" \
			>/dev/null 2>&1 &
		perf_pid=$!
	fi
	wait "$load_pid" || true
	[ -z "$perf_pid" ] || { kill -INT "$perf_pid"; wait "$perf_pid" || true; }
	sleep 3
	kill -TERM "$agent_pid"
	wait "$agent_pid" || true
	kill -TERM "$svc"
	wait "$svc" || true
	pids=()
	echo "== round $n, $mode"
	psql "$conn" -qXAt -c "$(rooted_sql $((t0 + warmup)))" |
		awk -F'|' '{ printf "   %-7s %-5s %5d samples, %5d whole (%5.1f %%)\n", $1, $2, $3, $4, $3 ? 100 * $4 / $3 : 0 }'
	if [ "$mode" = cfi ]; then
		perf script -i "$work/perf.data" 2>/dev/null >"$work/perf.txt"
		perf_rooted "$work/perf.txt" |
			awk -F"|" '{ printf "   perf    %-5s %5d samples, %5d whole (%5.1f %%)\n", $1, $2, $3, $2 ? 100 * $3 / $2 : 0 }'
	fi
}

for n in $(seq "$rounds"); do
	run cfi "$n"
	run fp "$n"
done
