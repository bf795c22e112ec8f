#!/usr/bin/env bash
# pprof_go: the real go tool pprof (Debian's golang-go) reads what
# tp_pprof_write writes. test_pprof --write writes the known set of
# tests/unit/test_pprof.c; every figure below comes from that set by hand:
#   cpu: 3 s bigint_mul (60 samples, leaf under validateSignature, trace T1),
#        0.5 s validateSignature self (10, T1), 1 s json_encode (20, T2),
#        0.3 s ksys_write under write and two kernel frames (6, no trace),
#        0.2 s libfoo.so+0x1a2b (4, service frontend, T3);
#   total 5 s, 100 samples; T1 3.5 s; checkout 4.8 s, frontend 0.2 s.
# Usage: test_pprof_go.sh TEST_PPROF WORKDIR
# Exits 77 (skipped) when go is not installed, unless CI is set: under CI
# scripts/deps.sh installs golang-go, so a missing go is a failure.
set -euo pipefail

gen=$1
work=$2
T1=0af7651916cd43dd8448eb211c80319c

if ! command -v go >/dev/null; then
	if [ -n "${CI:-}" ] && [ "${CI}" != false ]; then
		echo "FAIL: go not installed (CI=$CI): run scripts/deps.sh" >&2
		exit 1
	fi
	echo "SKIP: go not installed (Debian: golang-go, scripts/deps.sh)"
	exit 77
fi

rm -rf "$work"
mkdir -p "$work/home"
# go writes only under $work and never reaches the network
export HOME="$work/home" GOCACHE="$work/gocache" GOPATH="$work/gopath" GOENV=off GOFLAGS=
export GOPROXY=off GOTOOLCHAIN=local GOTELEMETRY=off
export PPROF_TMPDIR="$work" PPROF_BINARY_PATH="$work/no-binaries"

failed=0
fail() {
	echo "FAIL: $*" >&2
	failed=1
}
pprof() {
	go tool pprof "$@" 2>"$work/stderr" || {
		cat "$work/stderr" >&2
		fail "go tool pprof $* exited $?"
	}
}
# to_ns "3.50s" -> 3500000000 (the units go tool pprof prints durations in)
to_ns() {
	awk -v v="$1" 'BEGIN {
		n = v + 0; u = v; sub(/^[-0-9.]+/, "", u)
		m["ns"] = 1; m["us"] = 1e3; m["ms"] = 1e6; m["s"] = 1e9; m["mins"] = 60e9; m["hrs"] = 3600e9
		if (!(u in m)) { print "bad:" v; exit }
		printf "%.0f\n", n * m[u] }'
}
# expect NAME GOT WANT
expect() {
	if [ "$2" = "$3" ]; then
		echo "ok: $1 = $3"
	else
		fail "$1: got '$2', want '$3'"
	fi
}
# the "Showing nodes accounting for X, P of Y total" line of a -top output: "X Y"
shown_total() {
	sed -n 's/^Showing nodes accounting for \([^,]*\), [^ ]* of \([^ ]*\) total$/\1 \2/p' "$1"
}
# flat and cum of FUNCTION in a -top output: "FLAT FLAT% CUM CUM%"
row_of() {
	awk -v f="$2" '$6 == f { print $1, $2, $4, $5 }' "$1"
}

f="$work/known.pb.gz"
"$gen" --write "$f"
expect "gzip magic" "$(head -c 2 "$f" | od -An -tx1 | tr -d ' \n')" 1f8b

# CPU, the default sample type
pprof -top -sample_index=cpu "$f" >"$work/cpu.txt"
read -r shown total < <(shown_total "$work/cpu.txt") || true
expect "cpu total (ns)" "$(to_ns "${total:-none}")" 5000000000
expect "cpu shown (ns)" "$(to_ns "${shown:-none}")" 5000000000
read -r flat flatp _ cum cump name < <(awk 'f { print; exit } /flat%/ { f = 1 }' "$work/cpu.txt") ||
	true
expect "top function" "${name:-}" bigint_mul
expect "bigint_mul flat (ns)" "$(to_ns "${flat:-none}")" 3000000000
expect "bigint_mul flat%" "${flatp:-}" 60.00%
expect "bigint_mul cum (ns)" "$(to_ns "${cum:-none}")" 3000000000
read -r flat flatp cum cump < <(row_of "$work/cpu.txt" validateSignature) || true
expect "validateSignature flat (ns)" "$(to_ns "${flat:-none}")" 500000000
expect "validateSignature cum (ns)" "$(to_ns "${cum:-none}")" 3500000000
expect "validateSignature cum%" "${cump:-}" 70.00%
read -r flat flatp cum cump < <(row_of "$work/cpu.txt" main) || true
expect "main cum (ns)" "$(to_ns "${cum:-none}")" 5000000000
read -r flat flatp cum cump < <(row_of "$work/cpu.txt" ksys_write) || true
expect "kernel leaf ksys_write flat (ns)" "$(to_ns "${flat:-none}")" 300000000
read -r flat flatp cum cump < <(row_of "$work/cpu.txt" libfoo.so+0x1a2b) || true
expect "unsymbolized libfoo.so+0x1a2b flat (ns)" "$(to_ns "${flat:-none}")" 200000000

# sample counts
pprof -top -sample_index=samples "$f" >"$work/samples.txt"
expect "samples shown/total" "$(shown_total "$work/samples.txt")" "100 100"
read -r flat flatp cum cump < <(row_of "$work/samples.txt" bigint_mul) || true
expect "bigint_mul flat samples" "${flat:-}" 60
read -r flat flatp cum cump < <(row_of "$work/samples.txt" handle) || true
expect "handle cum samples" "${cum:-}" 96

# labels
pprof -tags "$f" >"$work/tags.txt"
for key in trace_id span_id service; do
	grep -q "^ *$key: Total" "$work/tags.txt" || fail "-tags has no $key"
done
grep -qE "3\.5s +\(74\.47%\): $T1\$" "$work/tags.txt" || fail "-tags: $T1 not 3.5s"
grep -qE "4\.8s +\(96\.00%\): checkout\$" "$work/tags.txt" || fail "-tags: checkout not 4.8s"
grep -qE "200\.0ms +\( 4\.00%\): frontend\$" "$work/tags.txt" || fail "-tags: frontend not 200ms"

pprof -top -tagfocus="trace_id=$T1" "$f" >"$work/focus.txt"
read -r shown total < <(shown_total "$work/focus.txt") || true
expect "trace $T1 shown (ns)" "$(to_ns "${shown:-none}")" 3500000000
row_of "$work/focus.txt" json_encode | grep -q . && fail "tagfocus kept json_encode (trace T2)"
pprof -top -sample_index=samples -tagfocus=service=frontend "$f" >"$work/frontend.txt"
expect "service frontend samples" "$(shown_total "$work/frontend.txt" | cut -d' ' -f1)" 4

# no -sample_index: CPU time, the default sample type
pprof -top "$f" >"$work/default.txt"
grep -qx "Type: cpu" "$work/default.txt" || fail "-top without -sample_index is not cpu"

# the raw view: default sample type, period, comment
pprof -raw "$f" >"$work/raw.txt"
grep -qx "samples/count cpu/nanoseconds\[dflt\]" "$work/raw.txt" || fail "-raw: cpu is not the default"
grep -qx "PeriodType: cpu nanoseconds" "$work/raw.txt" || fail "-raw: period type"
grep -qx "Period: 50000000" "$work/raw.txt" || fail "-raw: period"
grep -qx "Comment: traceprof profile" "$work/raw.txt" || fail "-raw: comment"

if [ "$failed" -ne 0 ]; then
	echo "outputs kept in $work" >&2
	exit 1
fi
rm -rf "$work"
echo "pprof_go: all checks passed"
