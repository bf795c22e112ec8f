#!/usr/bin/env bash
# Hostile OTLP against a real traceprof-agent, over OTLP/HTTP and OTLP/gRPC:
# - exports whose span attribute is an AnyValue array nested 4,300 deep
#   (29 KB), 20,000 deep, and a kvlist nested 4,300 deep (the last two
#   overflow the stack inside protobuf-c's recursive unpacker and kill an
#   agent without the depth limit; how deep it takes depends on the
#   thread's stack) are refused (400 / INVALID_ARGUMENT, "nested deeper")
#   and counted (otlp_exports_too_deep), and ordinary exports are accepted
#   right after them;
# - a gzip bomb (1 MB inflating to 1 GiB of zeros) is refused within 5 s
#   (413 / RESOURCE_EXHAUSTED) and counted (otlp_exports_too_large), where
#   the gRPC core used to inflate all of it first (1.1 GB resident);
# - a plain export flagged compressed without grpc-encoding is answered
#   INTERNAL (it was stored as if the flag were not set) and counted;
# - HTTP refusals from the headers (413 from Content-Length, 415, 431) and
#   gRPC's own receive limit are answered and counted;
# - the agent stays up, its peak RSS (VmHWM) stays under 64 MB, and
#   ordinary exports, plain and gzip, are accepted afterwards and stored.
# The counters are read live (a SIGUSR1 snapshot of the stats file).
# usage: run_otlp_hostile_test.sh TRACEPROF_DB AGENT OTLP_GRPC_SEND CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 send=$3 cluster=$4
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
needs_bpf
hostile=$here/otlp_hostile.py
max_hwm_kb=65536

conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_otlp_hostile)
"$agent" --db "$conn" --target "pid:$$" --window 1s --otlp-grpc 127.0.0.1:0 \
	--otlp-http 127.0.0.1:0 --stats-file "$work/stats" >"$work/agent.out" 2>"$work/agent.log" &
agent_pid=$!
pids+=("$agent_pid")
for _ in $(seq 100); do
	grep -qs 'otlp grpc: listening' "$work/agent.log" && grep -qs 'otlp http: listening' "$work/agent.log" && break
	sleep 0.1
done
gport=$(sed -n 's/.*otlp grpc: listening on .* port=\([0-9]*\).*/\1/p' "$work/agent.log")
hport=$(sed -n 's/.*otlp http: listening on .* port=\([0-9]*\).*/\1/p' "$work/agent.log")
[ -n "$gport" ] && [ -n "$hport" ] || fail "the agent's OTLP receivers did not start"

alive() { kill -0 "$agent_pid" 2>/dev/null || fail "the agent died ($1)"; }
hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$agent_pid/status"; }
# counter NAME: its value in a fresh SIGUSR1 snapshot of the stats file
counter() {
	rm -f "$work/stats"
	kill -USR1 "$agent_pid"
	for _ in $(seq 50); do [ -s "$work/stats" ] && break; sleep 0.1; done
	sed -n "s/^$1=//p" "$work/stats"
}
expect() { # expect WHAT GOT PATTERN
	[[ $2 == $3 ]] || fail "$1: got '$2', expected '$3'"
	echo "ok: $1: $2"
}
ms_of() { sed -n 's/.* ms=\([0-9]*\).*/\1/p' <<<"$1"; }

python3 "$hostile" deep "$work/deep_array.pb" 4300
python3 "$hostile" deep "$work/deep_array_20k.pb" 20000
python3 "$hostile" deep "$work/deep_kvlist.pb" 4300 kvlist
python3 "$hostile" bomb "$work/bomb.gz" 1024
python3 "$hostile" export "$work/ok1.pb" hostile-svc /after-deep 11
python3 "$hostile" export "$work/ok2.pb" hostile-svc /after-deep 12
python3 "$hostile" export "$work/ok3.pb" hostile-svc /gzip 13
python3 "$hostile" export "$work/ok4.pb" hostile-svc /gzip 14
python3 "$hostile" gzip "$work/ok3.pb" "$work/ok3.gz"
python3 "$hostile" gzip "$work/ok4.pb" "$work/ok4.gz"
echo "deep export: $(wc -c <"$work/deep_array.pb") bytes; bomb: $(wc -c <"$work/bomb.gz") bytes of gzip for 1 GiB"
hwm0=$(hwm_kb)

# 1. nesting: refused before protobuf-c recurses
for f in deep_array deep_array_20k deep_kvlist; do
	out=$("$send" "127.0.0.1:$gport" "$work/$f.pb")
	expect "gRPC $f" "$out" "code=3 name=INVALID_ARGUMENT *nested deeper than 32 levels*"
	alive "gRPC $f"
	out=$(python3 "$hostile" post "$hport" "$work/$f.pb")
	expect "HTTP $f" "$out" "status=400 *nested deeper than 32 levels*"
	alive "HTTP $f"
done
expect "otlp_exports_too_deep" "$(counter otlp_exports_too_deep)" 6
out=$("$send" "127.0.0.1:$gport" "$work/ok1.pb")
expect "gRPC export after the deep ones" "$out" "code=0 name=OK*"
out=$(python3 "$hostile" post "$hport" "$work/ok2.pb")
expect "HTTP export after the deep ones" "$out" "status=200 *"

# 2. gzip bombs: inflated with a running limit, refused as soon as it passes 4 MiB
out=$("$send" "127.0.0.1:$gport" "$work/bomb.gz" gzip)
expect "gRPC gzip bomb" "$out" "code=8 name=RESOURCE_EXHAUSTED *inflates past the limit*"
[ "$(ms_of "$out")" -lt 5000 ] || fail "the gRPC bomb took $(ms_of "$out") ms to refuse"
alive "gRPC bomb"
out=$(python3 "$hostile" post "$hport" "$work/bomb.gz" gzip)
expect "HTTP gzip bomb" "$out" "status=413 *inflates past the limit*"
[ "$(ms_of "$out")" -lt 5000 ] || fail "the HTTP bomb took $(ms_of "$out") ms to refuse"
alive "HTTP bomb"
expect "otlp_exports_too_large" "$(counter otlp_exports_too_large)" 2
out=$("$send" "127.0.0.1:$gport" "$work/ok3.gz" gzip)
expect "gRPC gzip export" "$out" "code=0 name=OK*"
out=$(python3 "$hostile" post "$hport" "$work/ok4.gz" gzip)
expect "HTTP gzip export" "$out" "status=200 *"
expect "otlp_compressed" "$(counter otlp_compressed)" 4
# a plain export flagged compressed without grpc-encoding: INTERNAL, as the spec says
out=$("$send" "127.0.0.1:$gport" "$work/ok3.pb" noenc)
expect "gRPC compressed flag without grpc-encoding" "$out" "code=13 name=INTERNAL *grpc-encoding*"
expect "otlp_grpc_calls_no_encoding" "$(counter otlp_grpc_calls_no_encoding)" 1

# 3. refusals from the headers and from gRPC's receive limit, each counted
head -c $((5 << 20)) /dev/zero >"$work/big.bin"
out=$("$send" "127.0.0.1:$gport" "$work/big.bin")
expect "gRPC over the receive limit" "$out" "code=8 name=RESOURCE_EXHAUSTED*"
expect "otlp_refused_grpc_too_large" "$(counter otlp_refused_grpc_too_large)" 1
python3 - "$hport" >"$work/http_refusals.out" <<'EOF'
import socket, sys
port = int(sys.argv[1])
def ask(raw):
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            s.sendall(raw)
            while chunk := s.recv(65536):
                data += chunk
        except ConnectionResetError:  # the agent closes on a body it did not read
            pass
    return data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/1.") else "none"
base = b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
print(ask(base + b"Content-Length: 99999999\r\n\r\n"),
      ask(b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"),
      ask(base + b"Content-Encoding: br\r\nContent-Length: 2\r\n\r\nxx"),
      ask(base + b"X-Filler: " + b"a" * 20000 + b"\r\n\r\n"))
EOF
expect "HTTP 413 415 415 431" "$(cat "$work/http_refusals.out")" "413 415 415 431"
expect "otlp_refused_http_413" "$(counter otlp_refused_http_413)" 1
expect "otlp_refused_http_415" "$(counter otlp_refused_http_415)" 2
expect "otlp_refused_http_431" "$(counter otlp_refused_http_431)" 1
alive "header refusals"

# 4. memory: the peak through every probe
hwm=$(hwm_kb)
echo "agent VmHWM: $hwm0 kB before the probes, $hwm kB after (limit $max_hwm_kb kB)"
[ "$hwm" -lt "$max_hwm_kb" ] || fail "agent peak RSS $hwm kB is over $max_hwm_kb kB"

# 5. the four accepted exports are stored, nothing else
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
expect "otlp_exports_ok" "$(sed -n 's/^otlp_exports_ok=//p' "$work/stats")" 4
expect "stored requests" "$(q "SELECT count(*) FROM traceprof.requests q JOIN traceprof.sources s
	USING (source_id) WHERE s.service = 'hostile-svc'")" 4
echo "ok: hostile OTLP refused and counted, the agent stayed up under $((max_hwm_kb / 1024)) MB"
