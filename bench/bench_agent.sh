#!/usr/bin/env bash
# bench_agent.sh - what always-on profiling with traceprof-agent costs a
# machine, next to perf record: the slowdown of a CPU-bound workload, the
# agent's own CPU (user space + BPF program run time) and its memory.
#
# One run, interleaved: ROUNDS rounds, each runs every configuration once in
# an order rotated by one per round, so drift of the machine (other work,
# frequency, the host) spreads over all configurations; medians reported.
#
#   none        cpu_burn alone
#   agent-19    cpu_burn + traceprof-agent --target all --frequency 19
#   agent-99    the same at 99 Hz
#   perf-99     cpu_burn + perf record -F 99 -a -g (output discarded)
#   idle-19/99  the agent without cpu_burn (what an idle machine pays)
#
# cpu_burn runs 2 threads (one per CPU of the machine this was written
# for) for RUN_SECONDS. The profiler starts first; its CPU is measured over
# exactly the workload's interval: the sum of on-CPU ns of its threads
# (/proc/PID/task/*/schedstat) and, for the agent, the run time of its BPF
# programs (run_time_ns in /proc/PID/fdinfo of its program fds; the agent
# runs under bpf_stats_hold so the kernel counts it). Whole-life figures
# (start-up and exit included) come from the agent's --stats-file and from
# /usr/bin/time for perf. Memory: VmHWM from /proc/PID/status before the
# stop, max_rss_kb of the stats file after it.
#
# Then DEMO_ROUNDS runs at each frequency of the agent on the demo service
# under load (real symbolization with DWARF, tagged samples).
#
# The agent writes to a private PostgreSQL cluster created here in a
# temporary directory (traceprof-db create --fast), removed at the end.
# Prints a markdown section for bench/results.md on stdout, one line per run
# on stderr. Needs root. Reports numbers only: never fails on timing.
#
# usage: bench/bench_agent.sh
# environment: ROUNDS (7), RUN_SECONDS (10), THREADS (2), WINDOW (5s, the
# agent's --window), DEMO_ROUNDS (3), DEMO_SECONDS (20), DEMO_RATE (200),
# IDLE (1: include the idle configurations; 0: skip them),
# TRACEPROF_BUILD_DIR (build).
# shellcheck disable=SC2016 # awk programs are single-quoted on purpose
set -euo pipefail
shopt -s inherit_errexit
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
. "$root/bench/lib.sh" # bpf_map_kb
rounds=${ROUNDS:-7}
run_s=${RUN_SECONDS:-10}
threads=${THREADS:-2}
window=${WINDOW:-5s}
demo_rounds=${DEMO_ROUNDS:-3}
demo_s=${DEMO_SECONDS:-20}
demo_rate=${DEMO_RATE:-200}
idle=${IDLE:-1}

tpdb=$build/cli/traceprof-db
agent=$build/agent/traceprof-agent
burn=$build/bench/cpu_burn
hold=$build/bench/bpf_stats_hold
service=$build/examples/traceprof-demo-service
load=$build/examples/traceprof-demo-load

for b in "$tpdb" "$agent" "$burn" "$hold" "$service" "$load"; do
	if [ ! -x "$b" ]; then
		echo "bench_agent: $b not found; build first (cmake --build build)" >&2
		exit 1
	fi
done
if [ "$(id -u)" -ne 0 ]; then
	echo "bench_agent: needs root (the agent loads BPF programs)" >&2
	exit 1
fi
for t in perf /usr/bin/time; do
	if ! command -v "$t" >/dev/null; then
		echo "bench_agent: $t not found" >&2
		exit 1
	fi
done
if [ ! -r /proc/self/schedstat ]; then
	echo "bench_agent: /proc/PID/schedstat missing (kernel without CONFIG_SCHED_INFO)" >&2
	exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/tp-bench-agent.XXXXXX")
db=$(mktemp -d "${TMPDIR:-/tmp}/tp-bench-agent-db.XXXXXX")
running=() # pids this script started and has not waited for yet
forget() {
	local keep=() p
	for p in "${running[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	running=("${keep[@]}")
}
cleanup() {
	for p in "${running[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	"$tpdb" remove "$db" >/dev/null 2>&1 || rm -rf "$db"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$tpdb" create "$db" --fast >/dev/null
conn=$("$tpdb" conninfo "$db")

# On-CPU ns of all threads of PID (user + system).
task_ns() {
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%d\n", s }'
}
# "run_time_ns run_cnt" summed over the BPF program fds of PID.
bpf_ns() {
	cat /proc/"$1"/fdinfo/* 2>/dev/null |
		awk '$1 == "run_time_ns:" { t += $2 } $1 == "run_cnt:" { c += $2 }
		     END { printf "%d %d\n", t, c }'
}
now_ns() { date +%s%N; }
load1() { cut -d' ' -f1 /proc/loadavg; }
# Waits up to 60 s for PATTERN in FILE; 0 when seen.
wait_for() {
	for _ in $(seq 600); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
# Value of KEY in the agent's stats file FILE (0 when absent).
stat_of() {
	if [ -r "$1" ]; then
		awk -F= -v k="$2" '$1 == k { v = $2 } END { print v + 0 }' "$1"
	else
		echo 0
	fi
}

results=$work/results
: >"$results"
# One result line: config round units/s interval_s cpu_ns bpf_ns bpf_runs
# whole_cpu_s whole_s hwm_kb maxrss_kb samples/s tagged% stack_misses/s
# elf_loads elf_mb load1 new_processes/s, then units per CPU-second of
# cpu_burn (units/s x RUN_SECONDS / its user + system time).
record() {
	local per_cpu=0 u s
	if [ -r "$work/burn.time" ]; then
		read -r u s < <(tail -1 "$work/burn.time")
		per_cpu=$(awk -v n="$3" -v t="$run_s" -v u="$u" -v s="$s" \
			'BEGIN { printf "%.1f", (u + s > 0) ? n * t / (u + s) : 0 }')
		rm -f "$work/burn.time"
	fi
	echo "$*" "$per_cpu" >>"$results"
	echo "$*" "$per_cpu" >&2
}

# Runs the agent at HZ (target all) while COMMAND runs; records a line.
with_agent() {
	local config=$1 round=$2 hz=$3
	shift 3
	local log=$work/agent-$config-$round.log stats=$work/stats-$config-$round
	local pid t0 t1 c0 c1 b0 b1 units hwm l
	l=$(load1)
	"$hold" "$agent" --db "$conn" --target all --frequency "$hz" --window "$window" \
		--stats-file "$stats" >/dev/null 2>"$log" &
	pid=$!
	running+=("$pid")
	if ! wait_for "$log" 'sampling at'; then
		echo "bench_agent: the agent did not start; its log:" >&2
		cat "$log" >&2
		exit 1
	fi
	sleep 2 # the first look at every process is start-up, not steady state
	t0=$(now_ns) c0=$(task_ns "$pid") b0=$(bpf_ns "$pid")
	units=$("$@")
	t1=$(now_ns) c1=$(task_ns "$pid") b1=$(bpf_ns "$pid")
	hwm=$(awk '$1 == "VmHWM:" { print $2 }' /proc/"$pid"/status)
	echo "$config $round $(bpf_map_kb "$pid")" >>"$work/mapmem"
	kill -TERM "$pid"
	wait "$pid" || echo "bench_agent: the agent exited with status $?" >&2
	forget "$pid"
	local secs cpu_s whole_s
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
	cpu_s=$(awk -v u="$(stat_of "$stats" cpu_user_s)" -v s="$(stat_of "$stats" cpu_sys_s)" \
		'BEGIN { printf "%.3f", u + s }')
	whole_s=$(stat_of "$stats" elapsed_s)
	record "$config" "$round" "$units" "$secs" $((c1 - c0)) \
		$(($(cut -d' ' -f1 <<<"$b1") - $(cut -d' ' -f1 <<<"$b0"))) \
		$(($(cut -d' ' -f2 <<<"$b1") - $(cut -d' ' -f2 <<<"$b0"))) \
		"$cpu_s" "$whole_s" "$hwm" "$(stat_of "$stats" max_rss_kb)" \
		"$(awk -v n="$(stat_of "$stats" samples)" -v s="$whole_s" 'BEGIN { printf "%.1f", n / s }')" \
		"$(awk -v t="$(stat_of "$stats" tagged)" -v n="$(stat_of "$stats" samples)" \
			'BEGIN { printf "%.1f", n ? 100 * t / n : 0 }')" \
		"$(awk -v n="$(stat_of "$stats" stack_misses)" -v s="$whole_s" 'BEGIN { printf "%.2f", n / s }')" \
		"$(stat_of "$stats" sym_elf_loads)" \
		"$(awk -v n="$(stat_of "$stats" sym_elf_bytes)" 'BEGIN { printf "%.1f", n / 1048576 }')" \
		"$l" \
		"$(awk -v n="$(stat_of "$stats" processes)" -v s="$whole_s" \
			-v k="$(sed -n 's/.*sampling at .*, \([0-9]*\) processes known.*/\1/p' "$log")" \
			'BEGIN { printf "%.1f", (n - k) / s }')"
}

# Units/s of cpu_burn; its user + system time goes to burn.time for record.
burn_units() {
	/usr/bin/time -f "%U %S" -o "$work/burn.time" \
		"$burn" --threads "$threads" --seconds "$run_s" | awk '{ print $1 }'
}
idle_wait() {
	sleep "$run_s"
	echo 0
}

with_perf() {
	local round=$1 tpid pid t0 t1 c0 c1 units hwm l
	l=$(load1)
	/usr/bin/time -f "%e %U %S" -o "$work/perf.time" \
		perf record -F 99 -a -g -o "$work/perf.data" >/dev/null 2>"$work/perf.log" &
	tpid=$!
	running+=("$tpid")
	for _ in $(seq 100); do
		pid=$(pgrep -P "$tpid" -x perf || true)
		[ -n "$pid" ] && break
		sleep 0.1
	done
	sleep 2
	t0=$(now_ns) c0=$(task_ns "$pid")
	units=$(burn_units)
	t1=$(now_ns) c1=$(task_ns "$pid")
	hwm=$(awk '$1 == "VmHWM:" { print $2 }' /proc/"$pid"/status)
	kill -INT "$pid"
	wait "$tpid" || true
	forget "$tpid"
	rm -f "$work/perf.data"
	local secs whole_s cpu_s
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
	read -r whole_s u s < <(tail -1 "$work/perf.time")
	cpu_s=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.3f", u + s }')
	record perf-99 "$round" "$units" "$secs" $((c1 - c0)) 0 0 "$cpu_s" "$whole_s" "$hwm" 0 0 0 0 0 0 "$l" 0
}

run_config() {
	local config=$1 round=$2 l
	case $config in
	none)
		l=$(load1)
		record none "$round" "$(burn_units)" "$run_s" 0 0 0 0 0 0 0 0 0 0 0 0 "$l" 0
		;;
	agent-19) with_agent agent-19 "$round" 19 burn_units ;;
	agent-99) with_agent agent-99 "$round" 99 burn_units ;;
	idle-19) with_agent idle-19 "$round" 19 idle_wait ;;
	idle-99) with_agent idle-99 "$round" 99 idle_wait ;;
	perf-99) with_perf "$round" ;;
	esac
}

configs=(none agent-19 agent-99 perf-99)
[ "$idle" = 1 ] && configs+=(idle-19 idle-99)
start_load=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u +%Y-%m-%dT%H:%MZ)
echo "# config round units/s interval_s cpu_ns bpf_ns bpf_runs whole_cpu_s whole_s" \
	"hwm_kb maxrss_kb samples/s tagged% stack_misses/s elf_loads elf_mb load1 new_processes/s units/cpu_s" >&2
n=${#configs[@]}
for ((r = 1; r <= rounds; r++)); do
	for ((i = 0; i < n; i++)); do
		run_config "${configs[$(((i + r - 1) % n))]}" "$r"
	done
done

# The demo service under load, profiled at 19 and 99 Hz.
"$service" --port 0 --work-scale 0.5 >"$work/service.out" 2>"$work/service.log" &
svc_pid=$!
running+=("$svc_pid")
wait_for "$work/service.out" '^listening on' || {
	echo "bench_agent: the demo service did not start" >&2
	exit 1
}
port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/service.out")
demo_load() {
	"$load" --port "$port" --duration "$demo_s" --rate "$demo_rate" -q >/dev/null 2>&1 || true
	echo 0
}
for ((r = 1; r <= demo_rounds; r++)); do
	if ((r % 2)); then hzs=(19 99); else hzs=(99 19); fi
	for hz in "${hzs[@]}"; do
		with_agent "demo-$hz" "$r" "$hz" demo_load
	done
done
end_load=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- report ----
# "median min max" of field F (1-based) over the lines of CONFIG, computed
# by EXPR over the fields (awk), e.g. '$3' or '($5 + $6) / $4 / 1e7'.
summary() {
	awk -v c="$1" '$1 == c { print '"$2"' }' "$results" | sort -g |
		awk '{ v[NR] = $1 } END {
			if (NR == 0) { print "0 0 0"; exit }
			m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			print m, v[1], v[NR] }'
}
med() { summary "$1" "$2" | cut -d' ' -f1; }
fmt() { awk -v x="$1" -v f="$2" 'BEGIN { printf f, x }'; }
mmm() { # "median (min–max)" with printf format F
	local m lo hi
	read -r m lo hi < <(summary "$1" "$2")
	echo "$(fmt "$m" "$3") ($(fmt "$lo" "$3")–$(fmt "$hi" "$3"))"
}
# Per-round slowdown of CONFIG against the same round's none run, % (of
# field F, default 3: units/s).
paired() {
	awk -v c="$1" -v f="${2:-3}" '$1 == "none" { base[$2] = $f } $1 == c { v[$2] = $f }
		END { for (r in v) if (base[r] > 0) printf "%.4f\n", (1 - v[r] / base[r]) * 100 }' \
		"$results" | sort -g |
		awk '{ v[NR] = $1 } END {
			m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%.2f (%.2f–%.2f)", m, v[1], v[NR] }'
}

# Rows of a slowdown table for field F of the run lines (3: units/s,
# 19: units per CPU-second): median (min–max), slowdown of the median
# against the runs without a profiler, per-round slowdown.
slowdown_rows() {
	local f=$1 b c
	b=$(med none "\$$f")
	for c in none agent-19 agent-99 perf-99; do
		if [ "$c" = none ]; then
			echo "| none | $(mmm none "\$$f" %.0f) | — | — |"
		else
			echo "| $c | $(mmm "$c" "\$$f" %.0f) |" \
				"$(awk -v b="$b" -v m="$(med "$c" "\$$f")" 'BEGIN { printf "%.2f %%", (1 - m / b) * 100 }') |" \
				"$(paired "$c" "$f") % |"
		fi
	done
}

echo "## Agent overhead, cost and memory"
echo
echo "- date: $started"
echo "- machine: $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)," \
	"$(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo) GiB RAM," \
	"Linux $(uname -r); load average at start $start_load, at end $end_load" \
	"(median 1-min load at the start of a run: $(fmt "$(med none '$17')" %.2f) for cpu_burn alone)"
echo "- command: \`bench/bench_agent.sh\` (ROUNDS=$rounds RUN_SECONDS=$run_s THREADS=$threads" \
	"WINDOW=$window DEMO_ROUNDS=$demo_rounds DEMO_SECONDS=$demo_s DEMO_RATE=$demo_rate)"
echo "- perf: $(perf --version)"
echo
echo "### Workload slowdown: cpu_burn, $threads threads, ${run_s} s, $rounds interleaved rounds"
echo
echo "| profiler | units/s, median (min–max) | slowdown of the median | slowdown per round vs its none run, median (min–max) |"
echo "|---|---:|---:|---:|"
slowdown_rows 3
echo
echo "Per CPU-second of cpu_burn (units/s × $run_s s / its user + system time): what the"
echo "profiler costs the sampled task itself (the sample taken in its timer interrupt,"
echo "caches), whatever else runs on the machine."
echo
echo "| profiler | units per CPU-second, median (min–max) | slowdown of the median | slowdown per round, median (min–max) |"
echo "|---|---:|---:|---:|"
slowdown_rows 19
echo
echo "### Profiler CPU over the workload's interval, % of one core"
echo
echo "user + system of the profiler's threads; for the agent also the run time of"
echo "its BPF programs (on_cpu_clock runs in the interrupt of the sampled task)."
echo
echo "| profiler | samples/s | user+sys % | BPF % | BPF ns/run | total % | whole life: CPU s / s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for c in agent-19 agent-99 idle-19 idle-99 perf-99; do
	grep -q "^$c " "$results" || continue
	if [ "$c" = perf-99 ]; then
		echo "| perf record -F 99 -a -g | — | $(mmm "$c" '$5 / $4 / 1e7' %.3f) | (not measurable) | — |" \
			"$(mmm "$c" '$5 / $4 / 1e7' %.3f) | $(mmm "$c" '$8 / $9' %.4f) |"
	else
		echo "| agent $c | $(mmm "$c" '$12' %.0f) | $(mmm "$c" '$5 / $4 / 1e7' %.3f) |" \
			"$(mmm "$c" '$6 / $4 / 1e7' %.3f) | $(mmm "$c" '($7 ? $6 / $7 : 0)' %.0f) |" \
			"**$(mmm "$c" '($5 + $6) / $4 / 1e7' %.3f)** | $(mmm "$c" '$8 / $9' %.4f) |"
	fi
done
echo
echo "### Agent memory and symbolization"
echo
echo "| run | VmHWM MB | max_rss MB | samples/s | tagged % | stack misses/s | new processes/s | ELF loads | ELF MB held | user+sys % | BPF % |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for c in agent-19 agent-99 idle-19 idle-99 demo-19 demo-99; do
	grep -q "^$c " "$results" || continue
	echo "| $c | $(mmm "$c" '$10 / 1024' %.1f) | $(mmm "$c" '$11 / 1024' %.1f) |" \
		"$(fmt "$(med "$c" '$12')" %.0f) | $(fmt "$(med "$c" '$13')" %.0f) |" \
		"$(fmt "$(med "$c" '$14')" %.2f) | $(fmt "$(med "$c" '$18')" %.1f) |" \
		"$(fmt "$(med "$c" '$15')" %.0f) |" \
		"$(fmt "$(med "$c" '$16')" %.1f) | $(mmm "$c" '$5 / $4 / 1e7' %.3f) |" \
		"$(mmm "$c" '$6 / $4 / 1e7' %.3f) |"
done
echo
echo "BPF map memory of the agent (memlock of its maps), MB: $(
	results=$work/mapmem
	for c in agent-19 agent-99 demo-19 demo-99; do
		grep -q "^$c " "$results" 2>/dev/null && printf '%s %s; ' "$c" "$(mmm "$c" '$3 / 1024' %.1f)"
	done)"
echo "perf record's VmHWM: $(mmm perf-99 '$10 / 1024' %.1f) MB."
