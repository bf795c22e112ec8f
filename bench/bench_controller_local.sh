#!/usr/bin/env bash
# The controller's local mode on a large triggers directory: what a pass
# costs when nothing changes, and how fast a new manifest becomes Active.
#
# FILES manifests are written into a triggers directory before the
# controller starts: half valid (one service each, so every one is an
# Active row), half invalid (frequencyHz 500: reported as errors). Then:
# 1. start-up: the time from the controller's start to the first status
#    file that lists every file, trigger and error;
# 2. steady cost: the controller's CPU (utime + stime from /proc) and RSS
#    over STEADY seconds with nothing changing (a pass every second);
# 3. latency: ITERATIONS times, a new valid manifest is renamed into the
#    directory (t0) and the time the controller logs it Active (after the
#    row was committed) is taken from a timestamped copy of its log.
#
# Never fails on timing. usage: bench/bench_controller_local.sh
# environment: FILES (10000), ITERATIONS (20), STEADY (10), TRACEPROF_BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
files=${FILES:-10000} iterations=${ITERATIONS:-20} steady=${STEADY:-10}
. "$root/bench/lib.sh"
bench_setup ctl-local
trig="$work/triggers"
status="$trig/.traceprof-status.json"
mkdir "$trig"
awk -v d="$trig" -v n="$files" 'BEGIN {
	for (i = 0; i < n; i++) {
		f = sprintf("%s/m-%05d.yaml", d, i)
		printf "apiVersion: traceprof.dev/v1alpha1\nkind: TraceProfileTrigger\nmetadata:\n  name: m-%05d\nspec:\n  service: svc-%05d\n", i, i > f
		if (i % 2) printf "  sampling: {frequencyHz: 500}\n" > f
		close(f)
	}
}'
now() { echo "$EPOCHREALTIME"; }
t0=$(now)
"$build/controller/traceprof-controller" --triggers-dir "$trig" --db "$conn" --interval 1s \
	2> >(stamp >"$work/controller.log") &
pid=$!
want_err=$((files / 2)) want_trig=$((files - files / 2))
until jq -e --argjson f "$files" --argjson e "$want_err" --argjson t "$want_trig" \
	'.manifestFiles.files == $f and (.errors | length) == $e and (.triggers | length) == $t' \
	"$status" >/dev/null 2>&1; do sleep 0.05; done
startup=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')

cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
sleep 2
c0=$(cpu) s0=$(now)
sleep "$steady"
c1=$(cpu) s1=$(now)
hz=$(getconf CLK_TCK)
steady_cpu=$(awk -v c="$((c1 - c0))" -v hz="$hz" -v a="$s0" -v b="$s1" 'BEGIN { printf "%.1f", 100 * c / hz / (b - a) }')
rss=$(awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
parsed_last=$(jq '.manifestFiles.parsedLastPass' "$status")

lat=()
for i in $(seq "$iterations"); do
	name=$(printf 'new-%03d' "$i")
	printf 'apiVersion: traceprof.dev/v1alpha1\nkind: TraceProfileTrigger\nmetadata:\n  name: %s\nspec:\n  service: new-svc-%03d\n' \
		"$name" "$i" >"$work/new.tmp"
	t0=$(now)
	mv "$work/new.tmp" "$trig/$name.yaml"
	until grep -q "trigger Active id=default/$name/" "$work/controller.log"; do sleep 0.01; done
	t1=$(grep "trigger Active id=default/$name/" "$work/controller.log" | head -1 | cut -d' ' -f1)
	lat+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) * 1000 }')")
	sleep 0.$((RANDOM % 4 + 2))
done
kill -TERM "$pid"
wait "$pid" || true
pct() { printf '%s\n' "${lat[@]}" | sort -n | awk -v p="$1" '{ v[NR] = $1 } END { i = int((NR - 1) * p / 100 + 0.5) + 1; print v[i] }'; }
echo "### Local mode, $files manifests ($want_trig valid, $want_err invalid), $(date -u +%F)"
echo
echo "\`FILES=$files ITERATIONS=$iterations STEADY=$steady bench/bench_controller_local.sh\` on $(nproc) CPUs"
echo
echo "| | value |"
echo "|---|---:|"
echo "| start-up: every file in the status file | $startup s |"
echo "| steady: controller CPU, % of a core ($steady s, a pass a second) | $steady_cpu |"
echo "| steady: files parsed in the last pass | $parsed_last |"
echo "| steady: controller RSS | $rss MiB |"
echo "| new manifest renamed in -> Active, p50 | $(pct 50) ms |"
echo "| p90 | $(pct 90) ms |"
echo "| max | $(pct 100) ms |"
