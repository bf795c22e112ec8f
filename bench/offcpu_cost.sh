#!/usr/bin/env bash
# offcpu_cost.sh - what off-CPU capture costs a context-switch-heavy
# workload (docs/offcpu.md, issue 26): bench/offcpu/pingpong's hand-overs
# per second alone, under the sampler with capture off, with capture on
# for request threads (all of its threads carry a request context), and
# under an offcputime-style bpftrace script (what bcc's offcputime does:
# the kernel and user stack at every switch of the process's threads,
# the interval summed per stack when the thread runs again)
# on the same process, in rotating order per round (bpftrace needs
# tracefs: mounted at /sys/kernel/tracing for the run when it is not).
# Prints a markdown
# section for bench/results.md: medians, ratios to the workload alone,
# the off-CPU programs' run time per run. Never fails on timing.
#
#   sudo bench/offcpu_cost.sh                  # 5 rounds of 4 runs of 3 s
#   ROUNDS=3 WORK=15000 PAIRS=2 SECS=3 BUILD=build sudo bench/offcpu_cost.sh
#
# offcputime-bpfcc itself (Debian's bpfcc-tools) is tried first; it needs
# the running kernel's headers, and without them the bpftrace script
# stands in for it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
rounds=${ROUNDS:-5}
work=${WORK:-15000}
pairs=${PAIRS:-2}
secs=${SECS:-3}
pp="$build/bench/pingpong"
cap="$build/bench/offcpu_capture"
tmp=$(mktemp -d)
stats_was=$(sysctl -n kernel.bpf_stats_enabled)
mounted_tracefs=
if [ ! -e /sys/kernel/tracing/events ] && mount -t tracefs nodev /sys/kernel/tracing; then
	mounted_tracefs=1
fi
cleanup() {
	sysctl -qw kernel.bpf_stats_enabled="$stats_was" || true
	[ -n "$mounted_tracefs" ] && umount /sys/kernel/tracing
	rm -rf "$tmp"
}
trap cleanup EXIT
[ -x "$pp" ] && [ -x "$cap" ] || { echo "build pingpong and offcpu_capture first" >&2; exit 2; }
args=(--wait --pairs "$pairs" --seconds "$secs" --work "$work")

field() { sed -n "s/.*\\b$1=\\([0-9.]*\\).*/\\1/p" <<<"$2"; }

# The comparison tool on process $1, started in the background; its pid in $tool_pid.
start_tool() {
	local pid=$1
	if [ "$tool" = offcputime-bpfcc ]; then
		offcputime-bpfcc -p "$pid" -f >"$tmp/tool.out" 2>"$tmp/tool.err" &
		tool_pid=$!
	else
		sed "s/@PID@/$pid/" >"$tmp/offcpu.bt" <<'BT'
tracepoint:sched:sched_switch {
	if (pid == @PID@) {
		@start[tid] = nsecs;
		@k[tid] = kstack;
		@u[tid] = ustack;
	}
	$s = @start[args->next_pid];
	if ($s) {
		@us[@k[args->next_pid], @u[args->next_pid]] = sum((nsecs - $s) / 1000);
		delete(@start[args->next_pid]);
	}
}
BT
		bpftrace "$tmp/offcpu.bt" >"$tmp/tool.out" 2>"$tmp/tool.err" &
		tool_pid=$!
	fi
	# attached: bpftrace says so; bcc's tool compiles for a few seconds
	for _ in $(seq 100); do
		grep -q "Attaching" "$tmp/tool.out" 2>/dev/null && return 0
		kill -0 "$tool_pid" 2>/dev/null || break
		[ "$tool" = offcputime-bpfcc ] && [ "$SECONDS" -ge "$tool_deadline" ] && return 0
		sleep 0.1
	done
}

run_mode() {
	local mode=$1 line
	case $mode in
	none) line=$(echo go | "$pp" "${args[@]}" | tail -1) ;;
	off | requests) line=$("$cap" "$mode" 1000 "$pp" "${args[@]}") ;;
	tool)
		mkfifo "$tmp/go"
		"$pp" "${args[@]}" <"$tmp/go" >"$tmp/pp.out" &
		local ppid=$!
		exec 3>"$tmp/go"
		tool_deadline=$((SECONDS + 8))
		start_tool "$ppid"
		echo go >&3
		exec 3>&-
		wait "$ppid" || true
		kill -INT "$tool_pid" 2>/dev/null || true
		wait "$tool_pid" 2>/dev/null || true
		rm -f "$tmp/go"
		line="$(tail -1 "$tmp/pp.out") stacks=$(grep -c '^@us\[' "$tmp/tool.out" || true)"
		;;
	esac
	echo "$line"
}

# offcputime-bpfcc compiles its program with the running kernel's headers:
# where that fails, the bpftrace script stands in for it
tool=bpftrace
if command -v offcputime-bpfcc >/dev/null; then
	if timeout 60 offcputime-bpfcc -p $$ 1 >/dev/null 2>"$tmp/bcc.err"; then
		tool=offcputime-bpfcc
	else
		echo "offcputime-bpfcc does not run here ($(tail -1 "$tmp/bcc.err")): bpftrace" >&2
	fi
fi
command -v "$tool" >/dev/null || { echo "neither offcputime-bpfcc nor bpftrace" >&2; exit 2; }

sysctl -qw kernel.bpf_stats_enabled=1
modes=(none off requests tool)
for r in $(seq "$rounds"); do
	for i in 0 1 2 3; do
		m=${modes[$(((i + r) % 4))]}
		line=$(run_mode "$m")
		echo "round $r $m: $line" >&2
		echo "$(field handoffs_per_s "$line")" >>"$tmp/$m.h"
		echo "$(field switches_per_s "$line")" >>"$tmp/$m.s"
		if [ "$m" = requests ]; then
			rn=$(field bpf_run_ns "$line")
			rc=$(field bpf_runs "$line")
			echo "$(awk -v a="$rn" -v b="$rc" 'BEGIN{ if (b > 0) printf "%.0f", a / b; else print 0 }')" >>"$tmp/ns_per_run"
			echo "$(awk -v a="$rc" -v s="$secs" 'BEGIN{ printf "%.0f", a / s }')" >>"$tmp/runs_per_s"
			echo "$(field records "$line") $(field short "$line") $(field reader_cpu_ms "$line")" >>"$tmp/req.extra"
		fi
	done
done

median() { sort -n "$1" | awk '{a[NR]=$1} END{ if (NR % 2) print a[(NR+1)/2]; else printf "%.0f\n", (a[NR/2]+a[NR/2+1])/2 }'; }
base=$(median "$tmp/none.h")
echo "### Off-CPU capture cost ($(date -u +%Y-%m-%d), $(nproc) CPUs, kernel $(uname -r))"
echo
echo "pingpong --pairs $pairs --work $work --seconds $secs, $rounds rounds, medians; comparison tool: $tool"
echo
echo "| run | hand-overs/s | switches/s | vs alone |"
echo "|---|---|---|---|"
for m in none off requests tool; do
	h=$(median "$tmp/$m.h")
	s=$(median "$tmp/$m.s")
	label=$m
	[ "$m" = none ] && label="workload alone"
	[ "$m" = off ] && label="sampler loaded, capture off"
	[ "$m" = requests ] && label="capture on (request threads: all)"
	[ "$m" = tool ] && label="$tool offcputime-style"
	echo "| $label | $h | $s | $(awk -v a="$h" -v b="$base" 'BEGIN{ printf "%.3f", a / b }') |"
done
echo
echo "Off-CPU programs with capture on: median $(median "$tmp/ns_per_run") ns per run, $(median "$tmp/runs_per_s") runs/s"
echo "(records, short records, reader CPU ms per run: $(tr '\n' ';' <"$tmp/req.extra"))"
