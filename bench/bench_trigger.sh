#!/usr/bin/env bash
# Trace-triggered profiling: how fast a trigger takes effect, and what raised
# sampling costs the process it targets.
#
# Real parts throughout: traceprof-agent (eBPF, always-on 19 Hz over every
# process, OTLP/HTTP receiver, AgentControl with a bearer token),
# traceprof-controller in local mode on a triggers directory, a private
# PostgreSQL, and cpu_burn as the target: a CPU-bound process built with the
# traceprof SDK whose threads are inside a server span (service burn-svc)
# nearly all the time, as a trigger's targets are.
#
# 1. Latency, trigger file -> 99 Hz sampling active on the agent. A manifest
#    is renamed into the triggers directory (t0, as git checkouts and most
#    tools write files) and the time the agent logs "sampling raised", after
#    the perf events are enabled, is taken from a timestamped copy of its
#    log. Then the file is removed and the time to "sampling back at the
#    base rate" is taken the same way. ITERATIONS times, 0.2-0.5 s apart,
#    after one warm-up (the controller's first connection to the agent).
# 2. Slowdown of the CPU-bound target. Each round runs cpu_burn on every
#    CPU for MEASURE seconds (after 2 s not counted) three times:
#      none:   no agent at all;
#      base:   the agent at 19 Hz, no trigger;
#      raised: a trigger for burn-svc at 99 Hz whose criteria never match
#              (status 5xx; every span is a 200), so the target stays raised
#              the whole time and only the sampling itself is measured.
#    The agent is restarted for every round (its stats file, written at
#    exit, gives the raised samples of that round). The trigger file is in
#    place before the target starts; a round whose target was raised only
#    after counting began (2 s) is reported and left out. Medians over
#    ROUNDS.
#
# Never fails on timing. usage: bench/bench_trigger.sh
# environment: ITERATIONS (50), ROUNDS (7), MEASURE (8), TRACEPROF_BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
iterations=${ITERATIONS:-50} rounds=${ROUNDS:-7} measure=${MEASURE:-8}
. "$root/bench/lib.sh"
bench_setup trigger
agent_pid=0
otlp_port=$(free_port) ctl_port=$(free_port)
export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$otlp_port
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
mkdir "$work/triggers"
ncpu=$(nproc)

start_agent() {
	"$build/agent/traceprof-agent" --db "$conn" --frequency 19 --window 2s \
		--otlp-http "127.0.0.1:$otlp_port" --otlp-grpc "" \
		--control-listen "127.0.0.1:$ctl_port" --control-token-file "$work/token" \
		--stats-file "$work/stats" 2> >(stamp >"$work/agent.log") &
	agent_pid=$!
	for _ in $(seq 200); do grep -qs 'sampling at' "$work/agent.log" && return; sleep 0.05; done
	cat "$work/agent.log" >&2
	exit 1
}
stop_agent() {
	kill -TERM "$agent_pid"
	wait "$agent_pid" || true
	agent_pid=0
}
# wait_line PATTERN N: waits until the agent log has N lines matching PATTERN; prints the Nth's time
wait_line() {
	local t
	for _ in $(seq 2000); do
		t=$(grep "$1" "$work/agent.log" | sed -n "$2{s/ .*//p}")
		[ -n "$t" ] && { echo "$t"; return; }
		sleep 0.005
	done
	echo "no '$1' line $2 in the agent's log" >&2
	tail -5 "$work/agent.log" >&2
	exit 1
}
manifest() { # name
	cat <<EOF
apiVersion: traceprof.dev/v1alpha1
kind: TraceProfileTrigger
metadata:
  name: $1
  namespace: bench
spec:
  service: burn-svc
  match:
    status: "5xx"
  sampling:
    frequencyHz: 99
  maxRequests: 10
  timeout: 10m
EOF
}
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) * 1000 }'; }
# stats LIST: "median p90 p99 max" of the numbers in LIST
stats() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 }
	function q(p) { i = int(p * NR + 0.999999); if (i < 1) i = 1; return v[i] }
	END { printf "%s %s %s %s", v[int((NR + 1) / 2)], q(0.90), q(0.99), v[NR] }'; }

"$build/controller/traceprof-controller" --triggers-dir "$work/triggers" \
	--agent "127.0.0.1:$ctl_port" --agent-token-file "$work/token" --db "$conn" \
	--status-file "$work/status.json" 2>"$work/controller.log" &

echo "== 1. trigger file -> 99 Hz sampling active ($iterations times)"
start_agent
"$build/bench/cpu_burn" --threads 1 --seconds 100000 --service burn-svc >/dev/null &
burn=$!
sleep 3 # the agent has found the target and its service
on="" off=""
for i in $(seq 0 "$iterations"); do
	manifest "lat-$i" >"$work/lat.yaml"
	t0=$EPOCHREALTIME
	mv "$work/lat.yaml" "$work/triggers/lat.yaml"
	t1=$(wait_line 'sampling raised' $((i + 1)))
	sleep 0.2
	t2=$EPOCHREALTIME
	rm "$work/triggers/lat.yaml"
	t3=$(wait_line 'sampling back at the base rate' $((i + 1)))
	[ "$i" = 0 ] || { on+=" $(ms "$t0" "$t1")" off+=" $(ms "$t2" "$t3")"; }
	sleep "0.$((RANDOM % 3 + 2))"
done
kill "$burn"
wait "$burn" 2>/dev/null || true
stop_agent
read -r on50 on90 on99 onmax <<<"$(stats "$on")"
read -r off50 off90 off99 offmax <<<"$(stats "$off")"
echo "file written -> raised:      p50 $on50 ms, p90 $on90 ms, p99 $on99 ms, max $onmax ms"
echo "file removed -> base rate:   p50 $off50 ms, p90 $off90 ms, p99 $off99 ms, max $offmax ms"

echo "== 2. slowdown of a CPU-bound target ($ncpu threads, $measure s, $rounds rounds)"
burn() { "$build/bench/cpu_burn" --threads "$ncpu" --skip 2 --seconds "$measure" --service burn-svc | awk '{ print $1 }'; }
none="" base="" raised="" rate=""
for r in $(seq "$rounds"); do
	n=$(burn)
	start_agent
	sleep 1
	b=$(burn)
	nraised=$(grep -c 'sampling raised' "$work/agent.log" || true)
	manifest "burn-$r" >"$work/burn.yaml"
	mv "$work/burn.yaml" "$work/triggers/burn.yaml"
	t_start=$EPOCHREALTIME
	"$build/bench/cpu_burn" --threads "$ncpu" --skip 2 --seconds "$measure" --service burn-svc \
		>"$work/burn.out" &
	burn_pid=$!
	t_raised=$(wait_line 'sampling raised' $((nraised + 1)))
	lag=$(ms "$t_start" "$t_raised")
	wait "$burn_pid"
	t_end=$EPOCHREALTIME
	x=$(awk '{ print $1 }' "$work/burn.out")
	rm "$work/triggers/burn.yaml"
	wait_line 'sampling back at the base rate' $((nraised + 1)) >/dev/null
	stop_agent
	sr=$(sed -n 's/^bpf_raised=//p' "$work/stats")
	hz=$(awk -v s="$sr" -v a="$t_raised" -v b="$t_end" -v c="$ncpu" 'BEGIN { printf "%.0f", s / (b - a) / c }')
	if awk -v l="$lag" 'BEGIN { exit !(l < 2000) }'; then
		none+=" $n" base+=" $b" raised+=" $x" rate+=" $hz"
		echo "round $r: none $n, base $b, raised $x units/s; raised $lag ms after the target started," \
			"$hz raised samples per thread-second"
	else # raised after counting began: that run was partly at the base rate
		echo "round $r: raised $lag ms after the target started, after counting began: not counted"
	fi
done
[ -n "$raised" ] || { echo "no round was raised in time" >&2; exit 1; }
med() { stats "$1" | awk '{ print $1 }'; }
mn=$(med "$none") mb=$(med "$base") mr=$(med "$raised") mhz=$(med "$rate")
awk -v n="$mn" -v b="$mb" -v r="$mr" -v hz="$mhz" 'BEGIN {
	printf "medians: none %.1f, base %.1f, raised %.1f units/s; raised samples %s per thread-second\n", n, b, r, hz
	printf "slowdown while raised: %.2f %% against no agent, %.2f %% against the base rate\n",
		100 * (n - r) / n, 100 * (b - r) / b
	printf "slowdown at the base rate: %.2f %% against no agent\n", 100 * (n - b) / n }'
