#!/usr/bin/env bash
# Two agent builds at once, side by side in one run: both sample the same
# machine (same processes, same new stacks, same load), next to cpu_burn
# on every CPU, so their CPU time compares even when the machine is not
# quiet. Prints each one's CPU per second by thread over MEASURE seconds
# after WARMUP seconds, and where the second one's main thread spent it
# (its stats file, read with SIGUSR1 at both ends), and each one's
# in-kernel cost per sample (bench/swevent_cost with --prog-b: the new
# agent's sampling program is a class of its own).
#
# usage: bench/agent_ab.sh OLD_AGENT [NEW_AGENT]   (NEW defaults to this build's agent)
# environment: WARMUP (20), MEASURE (60), HZ (99), TRACEPROF_BUILD_DIR, WORKLOAD (a
# command run once per CPU instead of cpu_burn, e.g. a program built without
# frame pointers: "build/bench/unwind_libc_chain 90")
# Example: build the previous commit in its own tree, then
#   bench/agent_ab.sh ../prev/build/agent/traceprof-agent
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
[ $# -ge 1 ] || { echo "usage: $0 OLD_AGENT [NEW_AGENT]" >&2; exit 2; }
old=$1 new=${2:-$build/agent/traceprof-agent}
warmup=${WARMUP:-20} measure=${MEASURE:-60} hz=${HZ:-99}
. "$root/bench/lib.sh"
bench_setup ab
if [ -n "${WORKLOAD:-}" ]; then # one per CPU, killed with the run's process group
	for _ in $(seq "$(nproc)"); do $WORKLOAD >/dev/null & done
else
	"$build/bench/cpu_burn" --seconds $((warmup + measure + 5)) >/dev/null &
fi
ports=()
for _ in 1 2 3 4 5 6; do ports+=("$(free_port)"); done
run() { # binary node port-offset extra...
	local bin=$1 node=$2 o=$3
	shift 3
	"$bin" --db "$conn" --node "$node" --frequency "$hz" --duration $((warmup + measure + 3)) \
		--otlp-grpc "127.0.0.1:${ports[o]}" --otlp-http "127.0.0.1:${ports[o + 1]}" \
		--control-listen "127.0.0.1:${ports[o + 2]}" "$@" 2>"$work/$node.log" &
}
run "$old" old 0
a_old=$!
run "$new" new 3 --stats-file "$work/st"
a_new=$!
[ "$warmup" -gt 3 ] || { echo "WARMUP must be more than 3 s" >&2; exit 2; }
sleep 3
# the new agent's on_cpu_clock program: of the programs by that name, the
# one whose id is in the new agent's descriptors (/proc/PID/fdinfo)
prog_b=$(awk '/^prog_id:/ { print $2 }' /proc/"$a_new"/fdinfo/* 2>/dev/null | sort -u |
	grep -Fxf - <(bpftool prog show name on_cpu_clock 2>/dev/null | sed -n 's/^\([0-9]*\):.*/\1/p') |
	head -1)
[ -n "$prog_b" ] || { echo "cannot find the new agent's sampling program (bpftool)" >&2; exit 1; }
exec 3< <("$build/bench/swevent_cost" --prog-b "$prog_b" --settle $((warmup - 3)) --seconds "$measure")
IFS= read -r line <&3 || true
[ "$line" = "swevent_cost measuring" ] || { echo "swevent_cost did not start: $line" >&2; exit 1; }
# tid name cpu_ns, one line per thread
snap() { for t in /proc/"$1"/task/*; do printf '%s %s %s\n' "${t##*/}" "$(tr ' ' _ <"$t/comm")" "$(cut -d' ' -f1 "$t/schedstat")"; done 2>/dev/null | sort; }
snap $a_old >"$work/o0"; snap $a_new >"$work/n0"; kill -USR1 $a_new; sleep 0.3; cp "$work/st" "$work/s0"
IFS= read -r -d '' sw <&3 || true
exec 3<&-
snap $a_old >"$work/o1"; snap $a_new >"$work/n1"; kill -USR1 $a_new; sleep 0.3; cp "$work/st" "$work/s1"
echo "two agents at $hz Hz side by side, next to ${WORKLOAD:-cpu_burn} on every CPU, $measure s after $warmup s; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| thread | old µs/s | new µs/s |"
echo "|---|---:|---:|"
join -1 2 -2 2 <(join "$work/o0" "$work/o1" | awk -v s="$measure" '{c[$2] += ($5 - $3) / s / 1000} END {for (n in c) print 0, n, c[n]}' | sort -k2) \
	<(join "$work/n0" "$work/n1" | awk -v s="$measure" '{c[$2] += ($5 - $3) / s / 1000} END {for (n in c) print 0, n, c[n]}' | sort -k2) |
	awk '{printf "| %s | %.0f | %.0f |\n", $1, $3, $5; o += $3; n += $5} END {printf "| **all** | **%.0f** (%.4f %%) | **%.0f** (%.4f %%) |\n", o, o / 1e4, n, n / 1e4}'
awk -F= -v m="$measure" 'NR == FNR {a[$1] = $2; next} {v[$1] = $2 - a[$1]} END {
	printf "new main thread, µs/s: reading the ring %.0f (of which symbolizing %.0f for %.1f new stacks/s), ", v["main_cpu_poll_ns"] / m / 1000, v["main_cpu_symbolize_ns"] / m / 1000, v["stack_misses"] / m
	printf "looking at processes %.0f (%.1f looks/s, %.1f cut short), closing windows %.0f; %.0f samples/s\n", v["main_cpu_inspect_ns"] / m / 1000, v["inspections"] / m, v["rechecks_unchanged"] / m, v["main_cpu_window_ns"] / m / 1000, v["samples"] / m
	if ("unwind_note_ns" in v) printf "new unwind tables, µs/s: writing mapping lists %.0f (placing tables %.0f), %.1f tables placed/s, %.1f evicted/s; walks: %.1f %% rooted, %.1f frames a stack\n", v["unwind_note_ns"] / m / 1000, v["unwind_place_ns"] / m / 1000, v["unwind_tables_placed"] / m, v["unwind_evictions"] / m, v["bpf_uw_stacks"] ? 100 * v["bpf_uw_root"] / v["bpf_uw_stacks"] : 0, v["bpf_uw_stacks"] ? (v["bpf_uw_frames_cfi"] + v["bpf_uw_frames_fp"]) / v["bpf_uw_stacks"] + 1 : 0 }' "$work/s0" "$work/s1"
# the new agent's CFI build thread (the old one has none)
join "$work/n0" "$work/n1" | awk -v s="$measure" '$2 == "tp-cfi" {printf "new tp-cfi thread (CFI table builds): %.0f µs/s\n", ($5 - $3) / s / 1000}'
# in-kernel: class bpf is the old agent's program, bpf-b the new one's
field() { printf '%s\n' "$sw" | sed -n "/class=$1 /s/.* $2=\([0-9.]*\).*/\1/p"; }
echo "in-kernel per sample, ns: old mean $(field bpf mean_ns) (not right after the new's: $(field bpf far_mean_ns), $(field bpf near_callbacks) of $(field bpf callbacks) right after it), new mean $(field bpf-b mean_ns) (not right after the old's: $(field bpf-b far_mean_ns), $(field bpf-b near_callbacks) of $(field bpf-b callbacks) right after it)"
wait $a_old $a_new || true
