# Shared by the end-to-end scripts (sourced): skips without root or kernel
# BTF, a work directory and background processes cleaned up on exit, a
# failure that shows the logs, free ports, and a fresh migrated database.

# needs_bpf: exit 77 (skipped) unless the agent can load its sampler here
needs_bpf() {
	if [ "$(id -u)" -ne 0 ]; then echo "skip: the agent needs root (BPF, perf events)"; exit 77; fi
	if [ ! -r /sys/kernel/btf/vmlinux ]; then echo "skip: the kernel has no BTF"; exit 77; fi
}

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
# fail MESSAGE: says it, shows the tail of every log in $work, exits 1
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.log; do echo "--- $f" >&2; tail -25 "$f" >&2; done; exit 1; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# fresh_db TRACEPROF_DB CLUSTER NAME: (re)creates database NAME, migrated; prints its conninfo
fresh_db() {
	local base conn
	base=$("$1" conninfo "$2" --dbname postgres)
	psql "$base" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $3" -c "CREATE DATABASE $3" >/dev/null
	conn=$("$1" conninfo "$2" --dbname "$3")
	"$1" migrate --db "$conn" >/dev/null
	echo "$conn"
}
# start NAME COMMAND...: runs it in the background, waits for "listening on HOST:PORT", sets $port
start() {
	local name=$1
	shift
	"$@" >"$work/$name.out" 2>"$work/$name.log" &
	pids+=($!)
	for _ in $(seq 100); do grep -q '^listening on' "$work/$name.out" && break; sleep 0.1; done
	port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/$name.out")
	[ -n "$port" ] || fail "$name did not start"
}
