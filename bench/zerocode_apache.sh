#!/usr/bin/env bash
# zerocode_apache.sh - what zero-code HTTP capture (docs/zero-code-http.md)
# costs the servers it follows, side by side in one run: requests/s of
# Apache httpd (prefork MPM, the mod_lua handler of the tests, keep-alive)
# and of gunicorn (2 sync workers, the tests' Flask app; a connection per
# request, as sync workers close after each answer) answering GET /burn/0
# under a saturating loopback load (`ab` of apache2-utils, CONC concurrent
# connections, SECONDS_PER_RUN each), with an agent targeting their cgroup
# at its default 19 Hz, --zero-code-http off and on, in alternating order;
# ROUNDS rounds, medians and the ratio on/off (goal: >= 0.98), and the
# agent's own CPU during each run (utime + stime of its process).
#
# Never fails on the figures. usage: sudo bench/zerocode_apache.sh
# environment: ROUNDS (5), SECONDS_PER_RUN (5), CONC (8), TRACEPROF_BUILD_DIR,
# ON_MODE (on: the libc hook; syscalls: the tracepoint hook), BASE_AGENT
# (another traceprof-agent binary, e.g. an earlier build: a third column,
# "base", capture on with that agent, in the same rounds)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
rounds=${ROUNDS:-5} secs=${SECONDS_PER_RUN:-5} conc=${CONC:-8}
. "$root/tests/e2e/lib.sh"
. "$root/tests/e2e/zc_servers.sh"
needs_bpf
needs_cgroup traceprof-zc-apache-bench
export ZC_FLASK_QUIET=1
zc_start_apache prefork || fail "Apache did not start"
aport=$port
zc_start_gunicorn 2 || fail "gunicorn did not start"
gport=$port

base=${BASE_AGENT:-}
agent() { # agent on|off [BINARY]: an agent on the cgroup, zero-code as asked, no database
	"${2:-$build/agent/traceprof-agent}" --db "host=/nonexistent" --spool-dir "" --target "cgroup:$cg" \
		--zero-code-http "$1" --otlp-grpc "" --otlp-http "" --control-listen "" \
		--log-level error 2>/dev/null &
	agent_pid=$!
	pids+=("$agent_pid")
	sleep 2
}
stop_agent() {
	kill -TERM "$agent_pid"
	wait "$agent_pid" 2>/dev/null || true
}
agent_cpu_ms() { awk '{ print ($14 + $15) * 10 }' "/proc/$agent_pid/stat"; } # at 100 ticks/s
rps() { # rps PORT [-k]: requests/s of ab against GET /burn/0
	# ab exits non-zero when a connection breaks (gunicorn's workers close
	# each one); its figure is still printed
	{ ab -q -t "$secs" -n 10000000 -c "$conc" ${2:-} "http://127.0.0.1:$1/burn/0" 2>/dev/null || true; } |
		awk '/^Requests per second/ { print $4 }'
}
modes="on off${base:+ base}"
for s in apache gunicorn; do for m in $modes; do : >"$work/${s}_$m" >"$work/${s}_${m}_cpu"; done; done
for r in $(seq "$rounds"); do
	# the order turns each round
	set -- $modes
	for _ in $(seq $(((r - 1) % $#))); do set -- "${@:2}" "$1"; done
	for mode in "$@"; do
		case $mode in
		on) agent "${ON_MODE:-on}" ;;
		base) agent "${ON_MODE:-on}" "$base" ;;
		*) agent off ;;
		esac
		for s in apache gunicorn; do
			c0=$(agent_cpu_ms)
			if [ $s = apache ]; then rps "$aport" -k; else rps "$gport"; fi >>"$work/${s}_$mode"
			echo $(($(agent_cpu_ms) - c0)) >>"$work/${s}_${mode}_cpu"
		done
		stop_agent
	done
	echo "round $r: apache $(tail -1 "$work/apache_off") / $(tail -1 "$work/apache_on")${base:+ / $(tail -1 "$work/apache_base")}," \
		"gunicorn $(tail -1 "$work/gunicorn_off") / $(tail -1 "$work/gunicorn_on")${base:+ / $(tail -1 "$work/gunicorn_base")}" \
		"requests/s (off / on${base:+ / base})" >&2
done
med() { sort -g "$1" | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
echo "zero-code HTTP on real servers, $rounds rounds of ${secs} s, ab -c $conc, medians"
echo
if [ -z "$base" ]; then
	echo "| server, GET /burn/0 | requests/s, zero-code off | on | ratio on/off | agent CPU (ms per s of load), off | on |"
	echo "|---|---:|---:|---:|---:|---:|"
else
	echo "| server, GET /burn/0 | requests/s, zero-code off | on | ratio on/off | on, base agent | ratio base/off | agent CPU (ms per s of load), off | on | base |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
fi
for s in apache gunicorn; do
	o=$(med "$work/${s}_off") n=$(med "$work/${s}_on")
	co=$(med "$work/${s}_off_cpu") cn=$(med "$work/${s}_on_cpu")
	if [ -z "$base" ]; then
		printf '| %s | %.0f | %.0f | %.3f | %.0f | %.0f |\n' "$s" "$o" "$n" "$(echo "$n / $o" | bc -l)" \
			"$(echo "$co / $secs" | bc -l)" "$(echo "$cn / $secs" | bc -l)"
	else
		b=$(med "$work/${s}_base") cb=$(med "$work/${s}_base_cpu")
		printf '| %s | %.0f | %.0f | %.3f | %.0f | %.3f | %.0f | %.0f | %.0f |\n' "$s" "$o" "$n" \
			"$(echo "$n / $o" | bc -l)" "$b" "$(echo "$b / $o" | bc -l)" "$(echo "$co / $secs" | bc -l)" \
			"$(echo "$cn / $secs" | bc -l)" "$(echo "$cb / $secs" | bc -l)"
	fi
done
