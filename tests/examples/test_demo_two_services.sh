#!/usr/bin/env bash
# The two-service demo end to end: traceprof-demo-load drives
# traceprof-demo-frontend, which calls traceprof-demo-service for every
# checkout; both export their server spans over OTLP/HTTP to otlp_sink.
# Checked against the load generator's ground truth: every request has a
# frontend span (the trace and parent the load generator sent, the span id
# the frontend answered in traceresponse) and, for checkouts, one payment
# span that continues the trace as the frontend span's child, inside it in
# time (the payment's end may trail the frontend's a little: it ends its span
# after writing the answer); statuses, names and error flags; slow payments make long frontend
# spans; nothing dropped.
# usage: test_demo_two_services.sh DEMO_SERVICE DEMO_FRONTEND DEMO_LOAD OTLP_SINK
set -u
svc=$1 front=$2 load=$3 sink=$4
tmp=$(mktemp -d)
pass=0 fail=0 pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
check() { # check DESCRIPTION COMMAND...
	local what=$1
	shift
	if "$@"; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		echo "FAIL: $what"
	fi
}
eq() { [ "$1" = "$2" ] || { echo "  got '$1', want '$2'" && false; }; }
# start NAME COMMAND...: runs it, waits for "listening on 127.0.0.1:PORT", sets $port
start() {
	local name=$1
	shift
	"$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	pids+=($!)
	for _ in $(seq 100); do
		grep -q '^listening on ' "$tmp/$name.out" && break
		sleep 0.1
	done
	port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$tmp/$name.out")
	[ -n "$port" ] || { echo "FAIL: $name did not start" && cat "$tmp/$name.err" && exit 1; }
}
stop() { # stop PID: SIGTERM, wait, exit status in $?
	kill -TERM "$1"
	wait "$1"
}

start sink "$sink" "$tmp/spans.csv"
sink_port=$port sink_pid=${pids[-1]}
otlp=http://127.0.0.1:$sink_port/v1/traces
start payment "$svc" --port 0 --work-scale 0.05 --otlp-endpoint "$otlp"
pay_port=$port pay_pid=${pids[-1]}
start frontend "$front" --port 0 --work-scale 0.05 --payment "127.0.0.1:$pay_port" \
	--otlp-endpoint "$otlp"
front_port=$port front_pid=${pids[-1]}

"$load" --port "$front_port" --requests 200 --concurrency 4 --slow-fraction 0.1 \
	--error-fraction 0.1 --inventory-fraction 0.2 --seed 3 --out "$tmp/gt.csv" >"$tmp/summary"
check "load generator: every request got its path's status" eq "$?" 0

stop "$front_pid"
check "frontend exits 0" eq "$?" 0
stop "$pay_pid"
check "payment exits 0" eq "$?" 0
stop "$sink_pid"
check "sink decoded every body" eq "$?" 0
pids=()
check "frontend dropped no span" grep -q 'spans ended=200 exported=200 dropped_full=0 dropped_error=0' "$tmp/frontend.err"
check "payment dropped no span" grep -q 'dropped_full=0 dropped_error=0' "$tmp/payment.err"

# ground truth against the spans: one awk over both files
awk -F, '
FNR == NR { # spans.csv
	if ($1 == "frontend") { fspan[$3] = $0; nf++ }
	else if ($1 == "payment-svc") { pbyparent[$4] = $0; np++; pcount[$4]++ }
	next
}
FNR == 1 { next } # the ground truth header
{
	n++
	trace = $1; parent = $2; span = $3; path = $6; status = $7
	if (!(span in fspan)) { print "no frontend span " span; bad++; next }
	split(fspan[span], f, ",")
	if (f[2] != trace || f[4] != parent) { print "frontend span " span ": trace/parent " f[2] "/" f[4]; bad++ }
	want = path == "inventory" ? "GET /api/inventory" : "POST /api/checkout"
	if (f[5] != want || f[6] != 2 || f[7] != status) { print "frontend span " span ": " f[5] " kind " f[6] " status " f[7]; bad++ }
	if (f[8] != (status >= 500)) { print "frontend span " span ": error flag " f[8]; bad++ }
	fdur[path] += f[10] - f[9]; fcount[path]++
	if (path == "inventory") { if (span in pcount) { print "inventory called payment"; bad++ } ; next }
	checkouts++
	if (pcount[span] != 1) { print "frontend span " span ": " pcount[span] + 0 " payment spans"; bad++; next }
	split(pbyparent[span], p, ",")
	if (p[2] != trace || p[5] != "POST /api/pay" || p[7] != status) { print "payment span " p[3] ": " p[2] " " p[5] " " p[7]; bad++ }
	# the payment ends its span after writing its answer, so the frontend may
	# end first: its end is allowed 50 ms of slack (2 cores shared in tests)
	if (p[9] < f[9] || p[10] > f[10] + 50000000) { print "payment span " p[3] " not inside its parent"; bad++ }
}
END {
	if (n != 200 || nf != 200 || np != checkouts) { print "rows " n ", frontend spans " nf ", payment spans " np; bad++ }
	if (fdur["slow"] / fcount["slow"] < 4 * fdur["fast"] / fcount["fast"]) { print "slow frontend spans are not longer"; bad++ }
	exit bad > 0
}' "$tmp/spans.csv" "$tmp/gt.csv"
check "spans match the ground truth" eq "$?" 0

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
