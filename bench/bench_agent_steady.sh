#!/usr/bin/env bash
# The agent's cost once it runs, side by side with perf record.
#
# bench_agent.sh starts a fresh profiler for every 10 s run, so its figures
# include start-up (BPF load, the /proc scan, kallsyms, the first DWARF
# loads). Here the profilers run for WARMUP + MEASURE seconds and only the
# last MEASURE seconds count:
#
#  - process CPU: on-CPU time of all threads of the profiler's process
#    (/proc/PID/task/*/schedstat, ns);
#  - in-kernel sample cost: the time the kernel spends in the CPU-clock
#    events' hrtimer callback, where perf record's callchain walk and copy
#    and the agent's BPF program both run, charged to whatever task was
#    interrupted (swevent_cost; "output" = perf, "bpf" = the agent). A
#    callback that comes right after the other profiler's (< 0.5 ms) finds
#    the path warm and costs less; which profiler follows which depends on
#    when each started, so the table also gives each one's mean over the
#    other callbacks, and the totals at that rate.
#
# swevent_cost is itself a new process that both profilers sample (and the
# agent looks at, symbolizes and stores): it starts with the profilers and
# lets the warm-up pass uncounted before it says "measuring", so its
# start-up, like every process's, is in the warm-up, not the window. The
# script reads the CPU figures with shell builtins only: a command run at
# the window's edges would be a new process for the agent to look at.
#
# Each round runs three configurations, each next to cpu_burn:
#   side-2: agent at 99 Hz and perf record -F 99 -a -g at the same time,
#           cpu_burn on both CPUs: the two measured under the same
#           conditions, so their ratio is not blurred by run-to-run noise;
#   side-1: the same with cpu_burn on one CPU (the other mostly idle);
#   side-2-req: as side-2, but cpu_burn's threads work inside requests
#           (--attach-units 300: a fresh trace context attached for every
#           ~20 ms of work, nothing exported), as a traced service does:
#           every sample is tagged, and the thread context the agent reads
#           is in memory the thread itself uses;
#   agent-19: the agent alone at its always-on 19 Hz, cpu_burn on both CPUs.
# Also the agent's memory at the end of the window: VmHWM and the BPF map
# memory it holds (bpf_map_kb of lib.sh: where the unwind tables will be).
# The agent writes into a local PostgreSQL (its CPU is not the agent's).
# Prints one line per round and configuration, then a markdown table of
# medians over the rounds. Never fails on timing.
#
# usage: bench/bench_agent_steady.sh
# environment: ROUNDS (3), WARMUP (30), MEASURE (60), TRACEPROF_BUILD_DIR,
#              CONFIGS (the configurations to run, of the four above; default all)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
rounds=${ROUNDS:-3} warmup=${WARMUP:-30} measure=${MEASURE:-60}
configs=" ${CONFIGS:-side-2 side-1 side-2-req agent-19} "
command -v perf >/dev/null || { echo "needs perf (linux-perf)" >&2; exit 1; }
. "$root/bench/lib.sh"
bench_setup steady

# on-CPU ns of all threads of process $1 into $CPU (builtins only: no new process)
cpu_ns() {
	local t l
	CPU=0
	for t in /proc/"$1"/task/*; do
		read -r l _ <"$t/schedstat" 2>/dev/null || continue
		CPU=$((CPU + l))
	done
}
# A pipe nobody writes to: "read -t" on it is a sleep without a new process.
exec {sleeper}<> <(:)
# The agent's counters now (SIGUSR1 makes it rewrite its stats file) into the
# associative array SNAP; builtins only.
declare -A SNAP
snap() {
	local before="" now="" k v i
	[ ! -f "$work/stats" ] || { IFS= read -r -d '' before <"$work/stats" || true; }
	kill -USR1 "$agent"
	for ((i = 0; i < 50; i++)); do
		read -r -t 0.1 -u "$sleeper" _ || true
		[ ! -f "$work/stats" ] || { IFS= read -r -d '' now <"$work/stats" || true; }
		[ -z "$now" ] || [ "$now" = "$before" ] || break
	done
	SNAP=()
	while IFS="=" read -r k v; do [ -z "$k" ] || SNAP[$k]=$v; done <<<"$now"
}
# field F of the swevent_cost line of class C in file
sw() { sed -n "/class=$2 /s/.* $3=\([0-9.]*\).*/\1/p" "$1"; }
pct() { awk -v ns="$1" -v s="$measure" 'BEGIN { printf "%.4f", 100 * ns / 1e9 / s }'; }

results="$work/results"
: >"$results"
run() { # config threads agent_hz with_perf [cpu_burn option...]
	local cfg=$1 threads=$2 hz=$3 with_perf=$4 total agent perfpid=0 a0 a1 p0=0 p1=0 line
	shift 4
	# the profilers outlast the window: warm-up, the window, a margin
	total=$((warmup + measure + 6))
	"$build/bench/cpu_burn" --threads "$threads" --seconds "$total" "$@" >/dev/null &
	"$build/agent/traceprof-agent" --db "$conn" --frequency "$hz" \
		--duration $((total - 2)) --stats-file "$work/stats" 2>"$work/agent.log" &
	agent=$!
	if [ "$with_perf" = 1 ]; then
		perf record -q -F 99 -a -g -o "$work/perf.data" -- sleep $((total - 2)) \
			>/dev/null 2>"$work/perf.log" &
		perfpid=$!
	fi
	exec 3< <("$build/bench/swevent_cost" --settle "$warmup" --seconds "$measure")
	IFS= read -r line <&3 || true
	[ "$line" = "swevent_cost measuring" ] || { echo "swevent_cost did not start: $line" >&2; exit 1; }
	cpu_ns "$agent"
	a0=$CPU
	[ "$perfpid" = 0 ] || { cpu_ns "$perfpid"; p0=$CPU; }
	snap
	local -A s0
	for k in "${!SNAP[@]}"; do s0[$k]=${SNAP[$k]}; done
	IFS= read -r -d '' line <&3 || true
	exec 3<&-
	cpu_ns "$agent"
	a1=$CPU
	snap
	[ "$perfpid" = 0 ] || { cpu_ns "$perfpid"; p1=$CPU; }
	printf '%s\n' "$line" >"$work/sw"
	local hwm maps
	hwm=$(awk '$1 == "VmHWM:" { print $2 }' "/proc/$agent/status")
	maps=$(bpf_map_kb "$agent")
	echo "$cfg $hwm $maps" >>"$work/memory"
	wait
	local bk bn bs bf bx bo pk pn ps pf px po k
	bn=$(sw "$work/sw" bpf callbacks) bk=$(sw "$work/sw" bpf total_ns)
	pn=$(sw "$work/sw" output callbacks) pk=$(sw "$work/sw" output total_ns)
	bs=$(sw "$work/sw" bpf mean_ns) ps=$(sw "$work/sw" output mean_ns)
	bf=$(sw "$work/sw" bpf far_mean_ns) pf=$(sw "$work/sw" output far_mean_ns)
	bx=$(sw "$work/sw" bpf near_callbacks) px=$(sw "$work/sw" output near_callbacks)
	bo=$(sw "$work/sw" bpf overlap_callbacks) po=$(sw "$work/sw" output overlap_callbacks)
	# fields: cfg who hz process% in-kernel% mean_ns callbacks in-kernel%-at-far-mean far_mean_ns near
	echo "$cfg agent $hz $(pct $((a1 - a0))) $(pct "$bk") $bs $bn $(pct $((bf * bn))) $bf $bx" >>"$results"
	echo "round: $cfg agent memory: VmHWM $((hwm / 1024)) MB, BPF maps $((maps / 1024)) MB"
	echo "round: $cfg agent ${hz} Hz: process $(pct $((a1 - a0))) %, in-kernel $(pct "$bk") % ($bs ns x $bn; $bx right after perf's; the rest $bf ns; $bo while another CPU took one)"
	# where the agent's main thread went in the window (its stats file, docs/agent.md)
	d() { echo $((${SNAP[$1]:-0} - ${s0[$1]:-0})); }
	echo "round: $cfg agent main thread $(pct "$(d main_cpu_ns)") %: ring $(pct "$(d main_cpu_poll_ns)") % (symbolizing $(pct "$(d main_cpu_symbolize_ns)") %), looking at processes $(pct "$(d main_cpu_inspect_ns)") %, windows $(pct "$(d main_cpu_window_ns)") %; $(d samples) samples, $(d stack_misses) new stacks, $(d inspections) processes looked at, $(d sym_elf_loads) ELF files loaded, $(d execs) execs, $(d forks) forks"
	if [ "$with_perf" = 1 ]; then
		echo "$cfg perf 99 $(pct $((p1 - p0))) $(pct "$pk") $ps $pn $(pct $((pf * pn))) $pf $px" >>"$results"
		echo "round: $cfg perf 99 Hz: process $(pct $((p1 - p0))) %, in-kernel $(pct "$pk") % ($ps ns x $pn; $px right after the agent's; the rest $pf ns; $po while another CPU took one)"
	fi
}

for r in $(seq "$rounds"); do
	echo "round $r of $rounds"
	[[ $configs != *" side-2 "* ]] || run side-2 2 99 1
	[[ $configs != *" side-1 "* ]] || run side-1 1 99 1
	[[ $configs != *" side-2-req "* ]] || run side-2-req 2 99 1 --attach-units 300
	[[ $configs != *" agent-19 "* ]] || run agent-19 2 19 0
done

echo
echo "Medians over $rounds rounds of $measure s (after $warmup s of warm-up):"
echo
echo "| run | profiler | process CPU % of a core | in-kernel sample cost % of a core | ns per sample (mean) | ns per sample, not right after the other's | samples in $measure s | **total %** | total % at that rate |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
for cfg in side-2 side-1 side-2-req agent-19; do
	for who in agent perf; do
		grep -q "^$cfg $who " "$results" || continue
		grep "^$cfg $who " "$results" | awk -v cfg="$cfg" -v who="$who" '
			function med(a, n,   i, j, t) {
				for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
				return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
			}
			{ n++; hz = $3; p[n] = $4; k[n] = $5; s[n] = $6; c[n] = $7; t[n] = $4 + $5; f[n] = $9; tf[n] = $4 + $8 }
			END {
				name = who == "agent" ? "traceprof-agent, " hz " Hz" : "perf record -F 99 -a -g"
				printf "| %s | %s | %.4f | %.4f | %.0f | %.0f | %.0f | **%.4f** | %.4f |\n", cfg, name, med(p, n), med(k, n), med(s, n), med(f, n), med(c, n), med(t, n), med(tf, n)
			}'
	done
done
echo
echo "Agent memory at the end of the window, median over the rounds: $(
	for cfg in side-2 side-1 side-2-req agent-19; do
		grep "^$cfg " "$work/memory" 2>/dev/null | sort -k2,2n | awk -v c="$cfg" '
			{ h[NR] = $2; m[NR] = $3 }
			END { if (NR) printf "%s VmHWM %.1f MB, BPF maps %.1f MB; ", c, h[int((NR + 1) / 2)] / 1024, m[int((NR + 1) / 2)] / 1024 }'
	done)"
echo
echo "Agent total over perf total, per round (side by side), as measured and with"
echo "each profiler's in-kernel cost at its mean when not right after the other's:"
for cfg in side-2 side-1 side-2-req; do
	grep -q "^$cfg agent " "$results" || continue
	paste <(grep "^$cfg agent " "$results") <(grep "^$cfg perf " "$results") |
		awk -v cfg="$cfg" '{ printf "%s %.2f %.2f\n", cfg, ($4 + $5) / ($14 + $15), ($4 + $8) / ($14 + $18) }'
done
