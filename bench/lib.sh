# Shared by the agent benchmarks (sourced after set -euo pipefail and $build):
# bench_setup NAME needs root, makes $work (mode 755, so the postgres user
# can reach it), starts a private PostgreSQL cluster in $work/db (--fast)
# and sets $conn; on exit the script's children are stopped, the cluster
# removed and $work deleted.
bench_setup() {
	[ "$(id -u)" -eq 0 ] || { echo "needs root (eBPF, perf events)" >&2; exit 1; }
	work=$(mktemp -d "/tmp/tp-bench-$1.XXXXXX")
	chmod 755 "$work"
	trap bench_cleanup EXIT
	"$build/cli/traceprof-db" create "$work/db" --fast >/dev/null
	conn=$("$build/cli/traceprof-db" conninfo "$work/db")
}
bench_cleanup() {
	pkill -P $$ 2>/dev/null || true
	wait 2>/dev/null || true
	"$build/cli/traceprof-db" remove "$work/db" >/dev/null 2>&1 || true
	rm -rf "$work"
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# lines of stdin with the wall-clock time in front (seconds, µs resolution)
stamp() { while IFS= read -r l; do echo "$EPOCHREALTIME $l"; done; }
# bpf_map_kb PID: KB of BPF map memory (memlock of its map fds) PID holds:
# the agent's sampler maps, and its unwind tables once it walks with CFI
bpf_map_kb() {
	cat /proc/"$1"/fdinfo/* 2>/dev/null |
		awk '$1 == "map_type:" { m = 1 } $1 == "memlock:" && m { t += $2; m = 0 }
		     END { printf "%d\n", t / 1024 }'
}
