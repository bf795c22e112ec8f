#!/usr/bin/env bash
# The demo service and its load generator, end to end over TCP: the ground
# truth the load generator writes (well-formed, the mix asked for, the status
# of each path, slow requests slower and costlier than fast ones), what curl
# and raw sockets see (trace context echoed, new traces, every error status,
# keep-alive and pipelining), garbage that must not kill the server, the
# command-line surface, and a clean exit on SIGTERM.
# usage: test_demo_service.sh TRACEPROF_DEMO_SERVICE TRACEPROF_DEMO_LOAD
set -u
svc=$1 load=$2
tmp=$(mktemp -d)
pass=0 fail=0 pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
check() { # check DESCRIPTION COMMAND...: passes when the command succeeds
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
hdr() { tr -d '\r' <"$1" | sed -n "s/^$2: //Ip" | head -1; } # hdr FILE NAME
is_hex() { [ "${#1}" -eq "$2" ] && [[ $1 =~ ^[0-9a-f]+$ ]] && [[ ! $1 =~ ^0+$ ]]; }

"$svc" --port 0 --work-scale 0.05 --threads 4 >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 100); do
	grep -q '^listening on ' "$tmp/out" && break
	sleep 0.1
done
port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$tmp/out")
if [ -z "$port" ]; then
	echo "FAIL: the service did not print 'listening on 127.0.0.1:PORT'"
	cat "$tmp/err"
	exit 1
fi
base=http://127.0.0.1:$port

# ---- the load generator and its ground truth ----
"$load" --port "$port" --requests 300 --concurrency 4 --slow-fraction 0.05 \
	--error-fraction 0.05 --inventory-fraction 0.2 --seed 7 --out "$tmp/gt.csv" >"$tmp/summary"
check "load generator exits 0 when every request got its status" eq "$?" 0
check "summary counts 300 requests" grep -q '^requests 300 in .* errors 0 ' "$tmp/summary"
check "summary has p50/p99 per path" grep -q '^slow .* 200 ' "$tmp/summary"
check "ground truth header" eq "$(head -1 "$tmp/gt.csv")" \
	"trace_id,parent_span_id,server_span_id,method,route,path,status,start_unix_us,duration_us,server_cpu_us"
now_us=$(($(date +%s) * 1000000))
awk -F, -v now="$now_us" '
function hex(s, n) { return length(s) == n && s ~ /^[0-9a-f]+$/ && s !~ /^0+$/ }
NR == 1 { next }
{
	where = "line " NR ": "
	if (NF != 10) { print where NF " fields"; next }
	if (!hex($1, 32)) print where "trace id " $1
	if (seen[$1]++) print where "trace id repeated " $1
	if (!hex($2, 16)) print where "parent span id " $2
	if (!hex($3, 16) || $3 == $2) print where "server span id " $3
	route = $6 == "inventory" ? "GET,/api/inventory" : "POST,/api/checkout"
	if ($6 !~ /^(fast|slow|fail|inventory)$/ || $4 "," $5 != route) print where "path " $4 " " $5 " " $6
	if ($7 != ($6 == "fail" ? 500 : 200)) print where "status " $7 " on path " $6
	if ($8 !~ /^[0-9]+$/ || $8 < now - 600000000 || $8 > now + 5000000) print where "start " $8
	if ($9 !~ /^[0-9]+$/ || $9 <= 0) print where "duration " $9
	if ($10 !~ /^[0-9]+$/) print where "server cpu " $10
	n++
}
END { if (n != 300) print "rows: " n }' "$tmp/gt.csv" >"$tmp/bad_rows"
check "every ground truth row is well-formed and has its path's status" eq "$(head -5 "$tmp/bad_rows")" ""
count() { awk -F, -v p="$1" 'NR > 1 && $6 == p' "$tmp/gt.csv" | wc -l; }
in_range() { [ "$1" -ge "$2" ] && [ "$1" -le "$3" ] || { echo "  $1 not in [$2, $3]" && false; }; }
check "about 5 % slow" in_range "$(count slow)" 5 30
check "about 5 % fail" in_range "$(count fail)" 5 30
check "about 20 % inventory" in_range "$(count inventory)" 35 90
check "the rest fast" in_range "$(count fast)" 150 240
stat() { # stat PATH COLUMN min|median|max
	awk -F, -v p="$1" -v c="$2" 'NR > 1 && $6 == p { print $c }' "$tmp/gt.csv" | sort -n |
		awk -v w="$3" '{ a[NR] = $1 } END { print w == "min" ? a[1] : w == "max" ? a[NR] : a[int((NR + 1) / 2)] }'
}
# At work scale 0.05 the slow path spends 20 ms of CPU in validateSignature alone,
# a fast checkout 0.15 ms, a failing one 1.6 ms: lower bounds by construction.
check "slow requests spend at least 20 ms of server CPU" in_range "$(stat slow 10 min)" 20000 10000000
check "failing requests spend at least 1.5 ms of server CPU" in_range "$(stat fail 10 min)" 1500 10000000
check "every slow request costs more CPU than any fast one" \
	in_range "$(stat fast 10 max)" 0 "$(($(stat slow 10 min) - 1))"
check "slow requests are slower than fast ones (median)" \
	in_range "$(stat fast 9 median)" 0 "$(($(stat slow 9 median) - 1))"
"$load" --port "$port" --duration 1 --rate 40 --concurrency 2 -q --out "$tmp/rate.csv"
check "--duration with --rate" in_range "$(($(wc -l <"$tmp/rate.csv") - 1))" 20 41

# ---- curl ----
tp=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
order='{"items":[{"sku":"SKU-0042","qty":2,"price_cents":500}]}'
curl -s -D "$tmp/h" -o "$tmp/b" -H "traceparent: $tp" --data "$order" "$base/api/checkout"
check "checkout 200" grep -q '^HTTP/1.1 200 OK' "$tmp/h"
resp=$(hdr "$tmp/h" traceresponse)
check "traceresponse keeps the trace and flags" eq "${resp%-*-*}-${resp##*-}" \
	"00-4bf92f3577b34da6a3ce929d0e0e4736-01"
span=${resp#00-*-}
span=${span%-*}
check "traceresponse has a new server span id" is_hex "$span" 16
check "server span differs from the parent" [ "$span" != 00f067aa0ba902b7 ]
check "X-Trace-Id is the incoming trace" eq "$(hdr "$tmp/h" x-trace-id)" 4bf92f3577b34da6a3ce929d0e0e4736
check "body names the trace" grep -q '"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"' "$tmp/b"
check "Server-Timing cpu" grep -qi '^server-timing: cpu;dur=[0-9.]*' "$tmp/h"

curl -s -D "$tmp/h" -o /dev/null -H "traceparent: ${tp^^}" --data "$order" "$base/api/checkout"
id=$(hdr "$tmp/h" x-trace-id)
check "invalid (upper case) traceparent: a new trace" is_hex "$id" 32
check "invalid traceparent: not the sent trace" [ "$id" != 4bf92f3577b34da6a3ce929d0e0e4736 ]
curl -s -D "$tmp/h2" -o /dev/null "$base/healthz"
id2=$(hdr "$tmp/h2" x-trace-id)
check "no traceparent: a new trace" is_hex "$id2" 32
check "new traces differ" [ "$id" != "$id2" ]
check "new traces are sampled" eq "$(hdr "$tmp/h2" traceresponse | sed 's/.*-//')" 01

code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
check "404 for an unknown path" eq "$(code "$base/nope")" 404
check "405 for a wrong method" eq "$(code "$base/api/checkout")" 405
curl -s -D "$tmp/h" -o /dev/null "$base/api/checkout"
check "405 names the allowed method" eq "$(hdr "$tmp/h" allow)" POST
check "slow path" eq "$(code -H 'X-Demo-Path: slow' --data "$order" "$base/api/checkout")" 200
check "fail path: 500" eq "$(code -H 'X-Demo-Path: fail' --data "$order" "$base/api/checkout")" 500
check "unknown X-Demo-Path: 400" eq "$(code -H 'X-Demo-Path: sideways' --data "$order" "$base/api/checkout")" 400
check "invalid order: 400" eq "$(code --data '{"items":' "$base/api/checkout")" 400
check "inventory" eq "$(code "$base/api/inventory?sku=SKU-0042")" 200
check "unknown sku: 404" eq "$(code "$base/api/inventory?sku=NOPE")" 404
head -c 100000 /dev/zero | tr '\0' ' ' >"$tmp/big"
check "413 for a too-large body" eq "$(code --data-binary @"$tmp/big" "$base/api/checkout")" 413
check "413 without 100-continue too" \
	eq "$(code -H 'Expect:' --data-binary @"$tmp/big" "$base/api/checkout")" 413
{ printf '%s' "$order" && head -c 3000 /dev/zero | tr '\0' ' '; } >"$tmp/padded"
check "Expect: 100-continue under the limit" \
	eq "$(code -H 'Expect: 100-continue' --data-binary @"$tmp/padded" "$base/api/checkout")" 200
check "431 for a too-large head" eq "$(code -H "X-Big: $(head -c 9000 /dev/zero | tr '\0' a)" "$base/healthz")" 431
check "keep-alive: 2 requests, 1 connection" \
	eq "$(curl -s -o /dev/null -o /dev/null -w '%{num_connects} ' "$base/healthz" "$base/healthz")" "1 0 "

# ---- raw sockets ----
raw() { # raw PRINTF-FORMAT: sends it on a new connection, prints the response's lines
	exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf "$1" >&3
	timeout 5 cat <&3 | tr -d '\r'
	exec 3<&- 3>&-
}
check "400 for a malformed request line" eq "$(raw 'GARBAGE\r\n\r\n' | head -1)" "HTTP/1.1 400 Bad Request"
check "400 without Host" eq "$(raw 'GET /healthz HTTP/1.1\r\n\r\n' | head -1)" "HTTP/1.1 400 Bad Request"
check "505 for HTTP/2.0" eq "$(raw 'GET / HTTP/2.0\r\nHost: a\r\n\r\n' | head -1)" \
	"HTTP/1.1 505 HTTP Version Not Supported"
check "501 for chunked bodies" \
	eq "$(raw 'POST /api/checkout HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n' | head -1)" \
	"HTTP/1.1 501 Not Implemented"
check "pipelined requests on one connection" \
	eq "$(raw 'GET /healthz HTTP/1.1\r\nHost: a\r\n\r\nGET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n' | grep -c '^HTTP/1.1 200 OK')" 2
check "HTTP/1.0 closes after the response" eq "$(raw 'GET /healthz HTTP/1.0\r\n\r\n' | grep -c '^ok$')" 1

# ---- garbage must not kill the server ----
for i in $(seq 40); do
	exec 3<>"/dev/tcp/127.0.0.1/$port" || break
	head -c $((RANDOM % 5000 + 1)) /dev/urandom >&3 2>/dev/null
	timeout 1 cat <&3 >/dev/null
	exec 3<&- 3>&-
done
for i in $(seq 10); do # valid heads cut short, bodies cut short
	exec 3<>"/dev/tcp/127.0.0.1/$port" || break
	printf 'POST /api/checkout HTTP/1.1\r\nHost: a\r\nContent-Length: 500\r\n\r\n{"ite' | head -c $((i * 7)) >&3
	exec 3<&- 3>&-
done
check "alive after garbage" kill -0 "$pid"
check "serving after garbage" eq "$(code "$base/healthz")" 200

# ---- command line ----
expect_exit() { # expect_exit CODE PATTERN COMMAND...
	local want=$1 pattern=$2 out rc
	shift 2
	out=$("$@" 2>&1 </dev/null)
	rc=$?
	[ "$rc" -eq "$want" ] && printf '%s' "$out" | grep -q -- "$pattern" ||
		{ echo "  exit $rc, output: $(printf '%s' "$out" | head -3)" && false; }
}
check "service --help" expect_exit 0 "usage: traceprof-demo-service" "$svc" --help
check "service --threads 0" expect_exit 2 "not a number in \[1, 64\]" "$svc" --threads 0
check "service on a busy port" expect_exit 1 "cannot listen on 127.0.0.1:$port" "$svc" --port "$port"
check "load --help" expect_exit 0 "usage: traceprof-demo-load" "$load" --help
check "load bad fraction" expect_exit 2 "not a number in \[0, 1\]" "$load" --slow-fraction 2
check "load fractions over 1" expect_exit 2 "add up to more than 1" "$load" --slow-fraction 0.6 --error-fraction 0.6
check "load with nothing listening" expect_exit 1 "cannot connect" "$load" --port 1 --requests 1

# ---- SIGTERM ----
kill -TERM "$pid"
for _ in $(seq 50); do
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
wait "$pid"
check "clean exit on SIGTERM" eq "$?" 0
pid=
check "no errors logged" eq "$(grep -c ': error: ' "$tmp/err")" 0
rejected=$(sed -n 's/.*stopped requests=[0-9]* rejected=\([0-9]*\)$/\1/p' "$tmp/err")
check "the garbage was answered as malformed" in_range "${rejected:-0}" 30 1000

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
