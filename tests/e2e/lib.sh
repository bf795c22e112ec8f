# Shared by the end-to-end scripts (sourced): skips without root or kernel
# BTF, a cgroup of the test's own, a work directory and background
# processes cleaned up on exit, a failure that shows the logs, free ports,
# a fresh migrated database, an agent with a time-stamped log and its stats
# snapshot, the load generator's ground truth as a table, checks of one
# query's result, checks counted for scripts that go on after a failure,
# and trigger manifests.

# needs_bpf: exit 77 (skipped) unless the agent can load its sampler here
needs_bpf() {
	if [ "$(id -u)" -ne 0 ]; then echo "skip: the agent needs root (BPF, perf events)"; exit 77; fi
	if [ ! -r /sys/kernel/btf/vmlinux ]; then echo "skip: the kernel has no BTF"; exit 77; fi
}

work=$(mktemp -d)
pids=()
cgroups=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for c in "${cgroups[@]}"; do rmdir "$c" 2>/dev/null || true; done
	# TRACEPROF_KEEP_WORK=DIR keeps the work folder (logs, stats) there
	if [ -n "${TRACEPROF_KEEP_WORK:-}" ]; then
		mkdir -p "$TRACEPROF_KEEP_WORK" && cp -r "$work" "$TRACEPROF_KEEP_WORK/" || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
# needs_cgroup NAME: a new cgroup v2 directory NAME-PID, removed at exit, in
# $cg; exit 77 (skipped) without a cgroup v2 hierarchy one can write to
needs_cgroup() {
	local root
	root=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
	[ -n "$root" ] || { echo "skip: no cgroup v2 hierarchy mounted"; exit 77; }
	cg=$root/$1-$$
	mkdir "$cg" 2>/dev/null || { echo "skip: cannot create a cgroup under $root"; exit 77; }
	cgroups+=("$cg")
}
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
# as_role ROLE: $conn (an embedded cluster's conninfo, owner) as ROLE: the
# least role of each part (writer: agents, controller: controllers, reader:
# the traceprof command)
as_role() {
	local c
	c=$(sed "s/ user=traceprof_owner / user=traceprof_$1 /; s|/auth/owner\.pgpass|/auth/$1.pgpass|" <<<"$conn")
	[ "$c" != "$conn" ] || fail "as_role $1: $conn is not an owner conninfo of traceprof-db"
	echo "$c"
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
# lines of stdin with the wall-clock time in front (seconds, microsecond digits)
stamp() { while IFS= read -r l; do echo "$EPOCHREALTIME $l"; done; }
# start_agent NAME AGENT ARGS...: runs the agent in the background with its
# log time-stamped in $work/NAME.log, waits until it samples; sets $agent_pid
start_agent() {
	local name=$1
	shift
	"$@" 2> >(stamp >"$work/$name.log") &
	agent_pid=$!
	pids+=("$agent_pid")
	for _ in $(seq 300); do grep -qs 'sampling at' "$work/$name.log" && break; sleep 0.1; done
	grep -q 'sampling at' "$work/$name.log" || fail "the agent $name did not start"
}
# snapshot FILE: SIGUSR1 to $agent_pid (it writes its stats to FILE and
# keeps running), waits up to 10 s for the file
snapshot() {
	rm -f "$1"
	kill -USR1 "$agent_pid"
	for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.05; done
	fail "no stats file within 10 s of SIGUSR1"
}
# q SQL: one query on $conn, unaligned, no header
q() { psql "$conn" -qXAt -v ON_ERROR_STOP=1 -c "$1"; }
# load_truth TABLE CSV: the load generator's ground truth (--out) as table TABLE of $conn
load_truth() {
	psql "$conn" -qX -v ON_ERROR_STOP=1 \
		-c "CREATE TABLE $1 (trace_id text, parent_span_id text, server_span_id text,
		    method text, route text, path text, status int, start_unix_us bigint,
		    duration_us bigint, server_cpu_us bigint)" \
		-c "\\copy $1 FROM '$2' WITH (FORMAT csv, HEADER)" >/dev/null
}
# check WHAT EXPECTED SQL: fails unless the query on $conn gives EXPECTED
check() {
	local got
	got=$(q "$3")
	[ "$got" = "$2" ] || fail "$1: expected $2, got $got"
	echo "ok: $1 ($got)"
}
# ok / bad MESSAGE: counts a check that passed / failed (and says which) in
# $pass / $fail, for scripts that go on after a failure and sum up at the end
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() {
	fail=$((fail + 1))
	echo "FAIL: $*"
}
now_ms() { date +%s%3N; }
# manifest NAME SERVICE [extra spec lines...]: a TraceProfileTrigger on stdout
manifest() {
	local n=$1 svc=$2
	shift 2
	printf 'apiVersion: traceprof.dev/v1alpha1\nkind: TraceProfileTrigger\nmetadata:\n  name: %s\nspec:\n  service: %s\n' "$n" "$svc"
	for l in "$@"; do printf '  %s\n' "$l"; done
}
# py_stacks_tsv OUT: every stored stack of $conn as "samples<TAB>frames", the
# frames root first, separated by \x1e, each "function\x1fmodule\x1fline"
# (what tests/e2e/py_check.py and py_churn_check.py read)
py_stacks_tsv() {
	psql "$conn" -qXAt -v ON_ERROR_STOP=1 -F $'\t' >"$1" <<'SQL'
WITH u AS (
    SELECT x.stack_id, sum(coalesce(x.c, 1)) AS n
      FROM traceprof.samples s
     CROSS JOIN LATERAL unnest(s.stacks, s.counts) AS x(stack_id, c)
     GROUP BY x.stack_id)
SELECT u.n, string_agg(coalesce(fn.name, '[unknown]') || chr(31) || coalesce(fn.module, '')
                       || chr(31) || coalesce(fr.line, 0), chr(30) ORDER BY f.ord)
  FROM u
  JOIN traceprof.stacks st ON st.stack_id = u.stack_id
 CROSS JOIN LATERAL unnest(st.frame_ids) WITH ORDINALITY AS f(frame_id, ord)
  LEFT JOIN traceprof.frames fr ON fr.frame_id = f.frame_id
  LEFT JOIN traceprof.functions fn ON fn.function_id = fr.function_id
 GROUP BY u.stack_id, u.n;
SQL
}
# py_server_modes PREFIX MODULE_LIKE NAME_RE MODE...: for a Python server
# run in several modes, each its own service PREFIX-MODE, checks that of
# each mode's samples taken while the interpreter runs (the native
# evaluation loop, or Python frames in its place) >= 99 % carry a frame of
# the application's file (module LIKE MODULE_LIKE), at least 200 of them,
# and that every such frame's name matches NAME_RE
py_server_modes() {
	local prefix=$1 like=$2 re=$3 mode inpy app bad
	shift 3
	psql "$conn" -qXAt -v ON_ERROR_STOP=1 -F ' ' -v prefix="$prefix-%" -v like="$like" -v re="$re" \
		>"$work/modes.txt" <<'SQL'
WITH u AS (
    SELECT so.service, x.stack_id, sum(coalesce(x.c, 1)) AS n
      FROM traceprof.samples s
      JOIN traceprof.sources so ON so.source_id = s.source_id
     CROSS JOIN LATERAL unnest(s.stacks, s.counts) AS x(stack_id, c)
     WHERE so.service LIKE :'prefix'
     GROUP BY 1, 2),
f AS (
    SELECT u.service, u.stack_id, u.n,
           bool_or(fn.name = '_PyEval_EvalFrameDefault' OR fn.module LIKE '%.py'
                   OR fn.module LIKE :'like') AS in_python,
           bool_or(fn.module LIKE :'like') AS app,
           bool_or(fn.module LIKE :'like' AND fn.name !~ :'re') AS misnamed
      FROM u
      JOIN traceprof.stacks st ON st.stack_id = u.stack_id
     CROSS JOIN LATERAL unnest(st.frame_ids) AS fi(frame_id)
      LEFT JOIN traceprof.frames fr ON fr.frame_id = fi.frame_id
      LEFT JOIN traceprof.functions fn ON fn.function_id = fr.function_id
     GROUP BY 1, 2, 3)
SELECT service, coalesce(sum(n) FILTER (WHERE in_python), 0), coalesce(sum(n) FILTER (WHERE app), 0),
       coalesce(sum(n) FILTER (WHERE misnamed), 0)
  FROM f GROUP BY service ORDER BY service;
SQL
	cat "$work/modes.txt"
	for mode in "$@"; do
		read -r _ inpy app bad < <(grep "^$prefix-$mode " "$work/modes.txt" || echo "x 0 0 0")
		echo "$prefix $mode: $app of $inpy samples in the interpreter carry the app's frames, $bad misnamed"
		[ "$inpy" -ge 200 ] || fail "$prefix $mode: only $inpy samples in the interpreter"
		[ $((app * 100)) -ge $((inpy * 99)) ] ||
			fail "$prefix $mode: $app of $inpy samples with the app's frames (99 % needed)"
		[ "$bad" -eq 0 ] || fail "$prefix $mode: $bad samples with a misnamed frame of the app"
	done
}
