#!/usr/bin/env bash
# The command-line surface a new user meets: --help succeeds and says what
# the command does; wrong usage fails with exit 2 and a message naming the
# problem; nothing crashes.
# usage: test_cli_usage.sh TRACEPROF_DB TRACEPROF_GEN
set -u
tpdb=$1 gen=$2
pass=0 fail=0
expect() { # expect EXIT PATTERN -- command...
	local want=$1 pattern=$2 out rc
	shift 3
	out=$("$@" 2>&1 </dev/null)
	rc=$?
	if [ "$rc" -eq "$want" ] && printf '%s' "$out" | grep -q -- "$pattern"; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		echo "FAIL: $* -> exit $rc (want $want), output lacks /$pattern/:"
		printf '%s\n' "$out" | head -5
	fi
}
expect 0 "usage: traceprof-db" -- "$tpdb" --help
expect 2 "usage: traceprof-db" -- "$tpdb"
expect 2 "unknown command 'frobnicate'" -- "$tpdb" frobnicate
expect 2 "needs exactly one argument" -- "$tpdb" create
expect 2 "not a port number" -- "$tpdb" create /tmp/x --port 99999
expect 2 "unrecognized option" -- "$tpdb" --no-such-flag
expect 4 "absent" -- "$tpdb" status /tmp/traceprof-no-such-cluster
expect 2 "cannot connect" -- "$tpdb" migrate --db "host=/tmp/traceprof-no-such-dir"
expect 2 "--role: 'root' is not one of owner, writer, reader, controller, admin" -- "$tpdb" conninfo /tmp/x --role root
expect 4 "no cluster in /tmp/traceprof-no-such-cluster" -- "$tpdb" conninfo /tmp/traceprof-no-such-cluster --role reader
expect 0 "usage: traceprof-db symbols add" -- "$tpdb" symbols --help
expect 0 "exit status: 0 every FILE matched" -- "$tpdb" symbols add --help
expect 2 "which subcommand" -- "$tpdb" symbols
expect 2 "unknown subcommand 'remove'" -- "$tpdb" symbols remove x.debug
expect 2 "which FILE" -- "$tpdb" symbols add
expect 2 "unrecognized option" -- "$tpdb" symbols add --no-such-flag x.debug
expect 3 "cannot connect" -- "$tpdb" symbols add --db "host=/tmp/traceprof-no-such-dir" /bin/true
expect 0 "usage: traceprof-gen" -- "$gen" --help
expect 2 "not a fraction" -- "$gen" --slow-fraction 2
expect 2 "unexpected argument 'parsecs'" -- "$gen" --duration 5 parsecs
expect 2 "not a duration" -- "$gen" --duration fortnight
expect 1 "cannot connect" -- "$gen" --db "host=/tmp/traceprof-no-such-dir" --duration 1m
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
