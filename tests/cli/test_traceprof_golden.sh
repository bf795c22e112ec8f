#!/usr/bin/env bash
# Golden tests of the traceprof command: tests/cli/dataset.sql is loaded into
# a fresh database of the test cluster, every command and format runs with
# explicit --from/--until (so "now" never matters), and stdout, stderr and
# the exit code must equal tests/cli/golden/NAME byte for byte.
# TRACEPROF_UPDATE_GOLDEN=1 rewrites the golden files instead (review the diff).
# Also: an empty store (every command exit 1 and says so), an unknown trace
# id (exit 1, where it looked), the folded output equal to the SQL API's.
# usage: test_traceprof_golden.sh TRACEPROF TRACEPROF_DB CLUSTER_DIR
set -u
tp=$1 tpdb=$2 cluster=$3
here=$(cd "$(dirname "$0")" && pwd)
golden=$here/golden
base=$("$tpdb" conninfo "$cluster" --dbname postgres)
pass=0 fail=0
export PGOPTIONS='-c client_min_messages=warning'
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

fresh() { # fresh NAME: a migrated database, its conninfo on stdout
	psql "$base" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null || exit 1
	local c
	c=$("$tpdb" conninfo "$cluster" --dbname "$1")
	"$tpdb" migrate --db "$c" >/dev/null || exit 1
	echo "$c"
}
conn=$(fresh tp_cli_golden)
psql "$conn" -qX -v ON_ERROR_STOP=1 -f "$here/dataset.sql" >/dev/null || exit 1
empty=$(fresh tp_cli_empty)
# traceprof reads as the reader role, as users are told to
conn=$("$tpdb" conninfo "$cluster" --dbname tp_cli_golden --role reader)
empty=$("$tpdb" conninfo "$cluster" --dbname tp_cli_empty --role reader)
R=(--from "2030-01-02 10:00" --until 2030-01-02T11:00:00Z)
A=0000000000000000000000000000000a
B=0000000000000000000000000000000b

golden() { # golden NAME -- traceprof args...
	local name=$1 out
	shift 2
	# the database's place depends on the build tree: shown as <db>
	out=$({ "$tp" "$@" --db "$conn" 2>&1; echo "exit $?"; } | sed -e 's|[^ ]*/tp_cli_golden|<db>|g')
	if [ "${TRACEPROF_UPDATE_GOLDEN:-}" = 1 ]; then
		printf '%s\n' "$out" >"$golden/$name"
		ok
	elif [ "$out" == "$(cat "$golden/$name" 2>/dev/null)" ]; then
		ok
	else
		bad "$name: traceprof $* differs from golden/$name:"
		diff <(printf '%s\n' "$out") "$golden/$name" | head -20
	fi
}
golden trace_text -- trace-profile "$A"
golden trace_service_text -- trace-profile "$A" --service payment-svc --min-pct 0
golden trace_folded -- trace-profile "$A" --format folded
golden trace_json -- trace-profile "$A" --format json
golden trace_raised_text -- trace-profile "$B" --service payment-svc
golden trace_raised_folded -- trace-profile "$B" --service payment-svc --format folded
golden traces_text -- traces --service payment-svc "${R[@]}"
golden traces_slow_json -- traces --service payment-svc "${R[@]}" --min-duration 1s --format json
golden traces_5xx_text -- traces --service payment-svc "${R[@]}" --status 5xx --route '/api/*'
golden traces_limit_text -- traces --service payment-svc "${R[@]}" --limit 2
golden profile_text -- profile --service payment-svc "${R[@]}"
golden profile_folded -- profile --service payment-svc "${R[@]}" --format folded
golden profile_json -- profile --service payment-svc "${R[@]}" --format json
golden profile_one_build_text -- profile --service checkout-svc "${R[@]}"
golden compare_text -- compare --service payment-svc "${R[@]}" --cohort-a 'duration > 1s' --cohort-b 'duration < 100ms'
golden compare_json -- compare --service payment-svc "${R[@]}" --cohort-a 'duration >= 1s and route ~ /api/pay*' --cohort-b 'duration < 100ms and status in (2xx, 503)' --format json --exact
golden trace_svg -- trace-profile "$A" --format svg
golden profile_svg -- profile --service payment-svc "${R[@]}" --format svg
golden compare_svg -- compare --service payment-svc "${R[@]}" --cohort-a 'duration > 1s' --cohort-b 'duration < 100ms' --format svg
golden compare_bad_spec -- compare --service payment-svc "${R[@]}" --cohort-a 'duration > 2s and duration < 1s' --cohort-b all
golden trace_unknown -- trace-profile 00000000000000000000000000000abc
golden trace_unknown_service -- trace-profile "$A" --service nosuch-svc
golden traces_none -- traces --service payment-svc --from 2031-01-01T00:00:00Z --until 2031-01-01T01:00:00Z
golden profile_unknown_service -- profile --service nosuch-svc "${R[@]}"

# folded output is byte for byte the SQL API's folded text plus a final
# newline: SQL folds, the command prints what it says
folded_is() { # folded_is SQL -- traceprof args...
	local sql=$1
	shift 2
	if cmp -s <(psql "$conn" -qXtA -v ON_ERROR_STOP=1 -c "SELECT $sql") <("$tp" "$@" --db "$conn"); then
		ok
	else
		bad "traceprof $* differs from $sql:"
		diff <(psql "$conn" -qXtA -c "SELECT $sql") <("$tp" "$@" --db "$conn") | head -20
	fi
}
folded_is "traceprof.trace_folded_text('$A')" -- trace-profile "$A" --format folded
folded_is "traceprof.trace_folded_text('$B', 'payment-svc')" -- trace-profile "$B" --service payment-svc --format folded
folded_is "traceprof.service_folded_text('payment-svc', '2030-01-02 10:00+00', '2030-01-02 11:00+00')" -- profile --service payment-svc "${R[@]}" --format folded
folded_is "traceprof.service_folded_text('checkout-svc', '2030-01-02 10:00+00', '2030-01-02 11:00+00')" -- profile --service checkout-svc "${R[@]}" --format folded

# -o FILE writes the same bytes as stdout
tmp=$(mktemp) && trap 'rm -f "$tmp"' EXIT
"$tp" trace-profile "$A" --format json -o "$tmp" --db "$conn" >/dev/null
cmp -s "$tmp" <("$tp" trace-profile "$A" --format json --db "$conn") && ok || bad "-o FILE differs from stdout"

# An empty store: every command says there is nothing, exit 1.
expect_empty() { # expect_empty PATTERN -- args...
	local pattern=$1 out rc
	shift 2
	out=$("$tp" "$@" --db "$empty" 2>&1)
	rc=$?
	if [ "$rc" -eq 1 ] && printf '%s' "$out" | grep -q -- "$pattern"; then ok; else
		bad "empty store: traceprof $* -> exit $rc, lacks /$pattern/: $out"; fi
}
expect_empty "no samples for trace $A" -- trace-profile "$A"
expect_empty "looked in samples and trigger_samples" -- trace-profile "$A"
expect_empty "looked in samples and trigger_samples" -- trace-profile "$A" --format folded
expect_empty "no samples or requests at all" -- traces --service payment-svc "${R[@]}"
expect_empty "no samples or requests at all" -- profile --service payment-svc "${R[@]}"
expect_empty "no samples or requests at all" -- profile --service payment-svc "${R[@]}" --format folded
expect_empty "no samples or requests at all" -- compare --service payment-svc "${R[@]}" --cohort-a all --cohort-b 'duration < 1s'

echo "$pass passed, $fail failed"
psql "$base" -qX -c "DROP DATABASE IF EXISTS tp_cli_golden" -c "DROP DATABASE IF EXISTS tp_cli_empty" >/dev/null
[ "$fail" -eq 0 ]
