#!/usr/bin/env bash
# The traceprof command as a new user meets it, without a database: --help
# of every command (exit 0, usage and an example), wrong flags, missing and
# bad arguments (exit 2, the problem named), formats that are not there,
# an unreachable database (exit 3, host and database named, the password
# never shown).
# usage: test_traceprof_usage.sh TRACEPROF
set -u
tp=$1
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
refute() { # refute PATTERN -- command...: the output must not contain PATTERN
	local pattern=$1 out
	shift 2
	out=$("$@" 2>&1 </dev/null)
	if printf '%s' "$out" | grep -q -- "$pattern"; then
		fail=$((fail + 1))
		echo "FAIL: $* shows /$pattern/: $out"
	else
		pass=$((pass + 1))
	fi
}
A=0000000000000000000000000000000a
expect 0 "usage: traceprof COMMAND" -- "$tp" --help
expect 0 "trace-profile" -- "$tp" help
expect 2 "usage: traceprof COMMAND" -- "$tp"
expect 0 "^traceprof [0-9]" -- "$tp" --version
expect 2 "unknown command 'frobnicate'" -- "$tp" frobnicate
expect 0 "usage: traceprof trigger create" -- "$tp" help trigger
expect 2 "unknown subcommand \"frob\"" -- "$tp" trigger frob
expect 2 "unknown option '--verbose' before the command" -- "$tp" --verbose traces
for cmd in trace-profile traces profile compare; do
	expect 0 "usage: traceprof $cmd" -- "$tp" "$cmd" --help
	expect 0 "example:" -- "$tp" "$cmd" -h
	expect 0 "usage: traceprof $cmd" -- "$tp" help "$cmd"
	expect 2 "traceprof $cmd: unknown option '--no-such-flag'" -- "$tp" "$cmd" --no-such-flag
	expect 2 "try 'traceprof $cmd --help'" -- "$tp" "$cmd" --no-such-flag
	expect 2 "option '--db' needs a value" -- "$tp" "$cmd" --db
	expect 2 "unknown format 'flame'" -- "$tp" "$cmd" --format flame
done
expect 2 "unknown command 'nosuch'" -- "$tp" help nosuch
expect 2 "needs a TRACE_ID" -- "$tp" trace-profile
expect 2 "takes one TRACE_ID, not 2" -- "$tp" trace-profile "$A" "$A"
expect 2 "'xyz' is not a trace id: expected 32 hexadecimal digits" -- "$tp" trace-profile xyz
expect 2 "not all zero" -- "$tp" trace-profile 00000000000000000000000000000000
expect 2 "formats: text, folded, json, svg, pprof" -- "$tp" trace-profile "$A" --format flame
expect 2 "--min-pct 'lots' is not a percentage" -- "$tp" trace-profile "$A" --min-pct lots
expect 2 "needs --service S" -- "$tp" traces
expect 2 "needs --service S" -- "$tp" profile --since 1h
expect 2 "formats: text, json" -- "$tp" traces --service x --format folded
expect 2 "formats: text, folded, json, svg, pprof" -- "$tp" profile --service x --format svg2
expect 2 "formats: text, json" -- "$tp" traces --service x --format svg
for cmd in trace-profile profile compare; do
	expect 0 "svg" -- "$tp" "$cmd" --help
done
expect 0 "gzip profile.proto; needs -o or a pipe" -- "$tp" profile --help
expect 2 "formats: text, json, svg" -- "$tp" compare --service x --cohort-a all --cohort-b all --format pprof
expect 2 "--since 'yesterday' is not a span of time" -- "$tp" traces --service x --since yesterday
expect 2 "--from 'noon' is not a time" -- "$tp" profile --service x --from noon
expect 2 "--since and --from/--until exclude each other" -- "$tp" profile --service x --since 1h --from 2030-01-02T10:00:00Z
expect 2 "the time range is empty" -- "$tp" profile --service x --from 2030-01-02T11:00:00Z --until "2030-01-02 10:00"
expect 2 "--limit '0' is not a count" -- "$tp" traces --service x --limit 0
expect 2 "unexpected argument 'extra'" -- "$tp" traces --service x extra
expect 2 "needs --cohort-a EXPR and --cohort-b EXPR" -- "$tp" compare --service x --cohort-a all
expect 2 "expected >, >=, < or <= after 'duration'" -- "$tp" compare --service x --cohort-a 'duration = 1s' --cohort-b all
expect 2 "           ^" -- "$tp" compare --service x --cohort-a 'duration = 1s' --cohort-b all
expect 2 "--cohort-b: 'or' is not supported" -- "$tp" compare --service x --cohort-a all --cohort-b 'status = 5xx or duration > 1s'
# unreachable databases: exit 3, where it tried, never the password
nodb="host=/tmp/traceprof-no-such-dir dbname=shop user=u password=secret"
expect 3 "cannot connect to the database at /tmp/traceprof-no-such-dir:5432/shop" -- "$tp" trace-profile "$A" --db "$nodb"
refute "secret" -- "$tp" trace-profile "$A" --db "$nodb"
expect 3 "cannot connect to the database at 127.0.0.1:1/shop" -- "$tp" traces --service x --db "host=127.0.0.1 port=1 dbname=shop password=secret connect_timeout=2"
refute "secret" -- "$tp" traces --service x --db "host=127.0.0.1 port=1 dbname=shop password=secret connect_timeout=2"
refute "secret" -- "$tp" profile --service x --db "postgresql://u:secret@127.0.0.1:1/shop?connect_timeout=2"
refute "secret" -- "$tp" compare --service x --cohort-a all --cohort-b all --db "postgresql://u:secret@127.0.0.1:1/shop?connect_timeout=2"
expect 3 "cannot connect" -- env PGHOST=/tmp/traceprof-no-such-dir PGPASSWORD=secret "$tp" profile --service x
refute "secret" -- env PGHOST=/tmp/traceprof-no-such-dir PGPASSWORD=secret "$tp" profile --service x
refute "secret" -- "$tp" traces --service x --db "host=/tmp/x password=secret bogus_option=1"
expect 3 "invalid connection option" -- "$tp" traces --service x --db "host=/tmp/x password=secret bogus_option=1"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
