#!/usr/bin/env bash
# The agent's OTLP ports under connection floods, before any authentication
# (docs/agent.md, "Connection limits"): while an attacker holds 20,000 idle
# connections to the OTLP/gRPC port from 40 loopback addresses (each
# reopened as soon as the agent closes it), a well-behaved gRPC exporter
# from 127.0.0.1 must have every export accepted (retrying as OTLP
# exporters do, at most 1 export in 10 retried); while 200 slow senders
# from 200 addresses trickle half-sent requests to OTLP/HTTP, an exporter
# from 127.0.0.1 must get 200 on every export (the same retries). Then the
# attackers move to the exporter's own address, where only per-connection
# eviction can tell them apart: 200 slow HTTP senders and 200 idle gRPC
# connections from 127.0.0.1, and every export of the exporters beside them
# must still be answered (the slow and idle ones are evicted, counted by
# reason).
# Throughout, the agent keeps its database connection (the exporters' rows
# land while the floods go on, also after its sessions are ended
# mid-flood so that it must reconnect), its file descriptors and its
# memory stay bounded (peak RSS under 64 MB), and the refusals are counted.
# usage: run_agent_conn_limits_test.sh TRACEPROF_DB AGENT CLUSTER_DIR CONN_FLOOD
set -euo pipefail
tpdb=$1 agent=$2 cluster=$3 flood=$4
if [ "$(id -u)" -ne 0 ]; then echo "skip: the agent needs root (BPF, perf events)"; exit 77; fi
if [ ! -r /sys/kernel/btf/vmlinux ]; then echo "skip: the kernel has no BTF"; exit 77; fi

work=$(mktemp -d)
agent_pid='' watch_pid=''
cleanup() {
	[ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null || true
	[ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done; exit 1; }
stat_of() { sed -n "s/^$1=//p" "$work/stats"; }
field() { sed -n "s/.*\b$1=\([0-9]*\).*/\1/p" "$2"; }

name=tp_e2e_conn_limits
base=$("$tpdb" conninfo "$cluster" --dbname postgres)
psql "$base" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null
conn=$("$tpdb" conninfo "$cluster" --dbname "$name")
"$tpdb" migrate --db "$conn" >/dev/null
q() { psql "$conn" -qXAt -v ON_ERROR_STOP=1 -c "$1"; }

# Both receivers on free ports, control off; 128 connections per port so
# that 200 slow senders overfill the HTTP port too (the default is 256).
"$agent" --db "$conn" --target "pid:$$" --window 1s --otlp-grpc 127.0.0.1:0 \
	--otlp-http 127.0.0.1:0 --control-listen '' --max-conns 128 \
	--stats-file "$work/stats" >"$work/agent.out" 2>"$work/agent.log" &
agent_pid=$!
for _ in $(seq 300); do grep -qs 'otlp http: listening' "$work/agent.log" && break; sleep 0.1; done
gport=$(sed -n 's/.*otlp grpc: listening on .* port=\([0-9]*\).*/\1/p' "$work/agent.log")
hport=$(sed -n 's/.*otlp http: listening on .* port=\([0-9]*\).*/\1/p' "$work/agent.log")
[ -n "$gport" ] && [ -n "$hport" ] || fail "the agent's OTLP receivers did not start"

# peak resident memory and open descriptors of the agent, sampled every 0.2 s
(
	peak=0 fds=0
	while kill -0 "$agent_pid" 2>/dev/null; do
		r=$(awk '/^VmRSS:/ { print $2 }' "/proc/$agent_pid/status" 2>/dev/null || echo 0)
		f=$(ls "/proc/$agent_pid/fd" 2>/dev/null | wc -l)
		[ "${r:-0}" -gt "$peak" ] && peak=$r
		[ "$f" -gt "$fds" ] && fds=$f
		echo "rss_kb=$peak fds=$fds" >"$work/peak.tmp" && mv "$work/peak.tmp" "$work/peak"
		sleep 0.2
	done
) &
watch_pid=$!

# rows of SERVICE in the database reach N within 10 s
rows_land() {
	local got=0
	for _ in $(seq 50); do
		got=$(q "SELECT count(*) FROM traceprof.requests r JOIN traceprof.sources s
		         ON s.source_id = r.source_id WHERE s.service = '$1'" 2>/dev/null || echo 0)
		[ "$got" -ge "$2" ] && return 0
		sleep 0.2
	done
	echo "rows of $1: $got of $2"
	return 1
}

# mid-flood, the agent's database sessions are ended: it must reconnect
# (which needs a file descriptor while 20,000 connections knock) and
# deliver rows of exports made after that, before the flood ends
(
	sleep 6
	q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
	   WHERE datname = '$name' AND pid <> pg_backend_pid()" >"$work/terminated"
	t=$(q "SELECT now()")
	sleep 5
	q "SELECT count(*) FROM traceprof.requests r JOIN traceprof.sources s
	   ON s.source_id = r.source_id WHERE s.service = 'flood-grpc' AND r.start_time > '$t'" \
		>"$work/after_reconnect"
) &
probe=$!
"$flood" grpc "$gport" 20000 40 12 flood-grpc >"$work/grpc.out" 2>"$work/grpc.log" ||
	fail "the gRPC flood client"
wait $probe
echo "database sessions ended mid-flood: $(cat "$work/terminated"), rows delivered after" \
	"that during the flood: $(cat "$work/after_reconnect")"
[ "$(cat "$work/terminated")" -ge 1 ] || fail "no database session of the agent was ended"
[ "$(cat "$work/after_reconnect")" -ge 1 ] || fail "the agent did not reconnect to its database during the flood"
cat "$work/grpc.out"
kill -0 "$agent_pid" || fail "the agent died under the gRPC flood"
ok=$(field ok "$work/grpc.out") failed=$(field failed "$work/grpc.out")
retried=$(field retried "$work/grpc.out")
[ "$failed" -eq 0 ] || fail "$failed gRPC exports failed during the flood"
[ $((retried * 10)) -le "$ok" ] || fail "$retried gRPC exports had to be retried"
[ "$ok" -ge 20 ] || fail "only $ok gRPC exports"
rows_land flood-grpc "$ok" || fail "the gRPC exporter's rows did not land"
sleep 0.3
echo "after the gRPC flood: $(cat "$work/peak")"
rss=$(field rss_kb "$work/peak") fds=$(field fds "$work/peak")
[ "$rss" -lt 65536 ] || fail "the agent's resident memory peaked at $rss kB (budget 64 MB)"
[ "$fds" -lt 1000 ] || fail "the agent held $fds file descriptors (128 connections allowed per port)"

"$flood" http "$hport" 200 200 12 flood-http >"$work/http.out" 2>"$work/http.log" ||
	fail "the HTTP flood client"
cat "$work/http.out"
kill -0 "$agent_pid" || fail "the agent died under the slow senders"
ok=$(field ok "$work/http.out") failed=$(field failed "$work/http.out")
retried=$(field retried "$work/http.out")
[ "$failed" -eq 0 ] || fail "$failed HTTP exports did not get 200 during the flood"
[ $((retried * 10)) -le "$ok" ] || fail "$retried HTTP exports had to be retried"
[ "$ok" -ge 20 ] || fail "only $ok HTTP exports"
rows_land flood-http "$ok" || fail "the HTTP exporter's rows did not land"

# the attackers on the exporter's own address: one per-address cap for all
same() { # MODE PORT CONNS SECONDS SERVICE
	"$flood" "$1" "$2" "$3" 0 "$4" "$5" >"$work/$5.out" 2>"$work/$5.log" ||
		fail "the $1 flood client from the exporter's address"
	cat "$work/$5.out"
	kill -0 "$agent_pid" || fail "the agent died under the $1 flood from one address"
	local exports ok failed retried
	exports=$(field exports "$work/$5.out") ok=$(field ok "$work/$5.out")
	failed=$(field failed "$work/$5.out") retried=$(field retried "$work/$5.out")
	[ "$failed" -eq 0 ] && [ "$ok" -eq "$exports" ] ||
		fail "$5: $ok of $exports exports served beside the flood from their address"
	[ $((retried * 10)) -le "$ok" ] || fail "$5: $retried exports had to be retried"
	[ "$ok" -ge "$6" ] || fail "$5: only $ok exports"
	rows_land "$5" "$ok" || fail "the rows of $5 did not land"
}
same http "$hport" 200 12 flood-http-same 20
same grpc "$gport" 200 5 flood-grpc-same 10

cat "$work/peak"
rss=$(field rss_kb "$work/peak")
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
agent_pid=''
grep -E '_conns_|bodies_refused|^otlp_exports_ok|^flush_errors|^max_rss_kb' "$work/stats"
[ "$rss" -lt 65536 ] || fail "the agent's resident memory peaked at $rss kB (budget 64 MB)"
[ $(($(stat_of otlp_grpc_conns_refused_full) + $(stat_of otlp_grpc_conns_refused_peer) + \
	$(stat_of otlp_grpc_conns_evicted))) -ge 19000 ] || fail "the gRPC refusals were not counted"
# (slow senders that reopen at once evict each other long before their
# deadlines: test_otlp_grpc checks the deadlines one by one)
[ "$(stat_of otlp_http_conns_evicted)" -gt 0 ] || fail "no slow sender was evicted"
[ $(($(stat_of otlp_http_conns_evicted_slow_head) + $(stat_of otlp_http_conns_evicted_slow_body))) \
	-gt 0 ] || fail "no eviction of a slow sender counted by its reason"
[ "$(stat_of otlp_grpc_conns_evicted_idle)" -gt 0 ] || fail "no idle gRPC eviction counted"
echo "ok: exports served through 20,000 idle gRPC connections and 200 slow HTTP senders," \
	"also from the exporters' own address"
