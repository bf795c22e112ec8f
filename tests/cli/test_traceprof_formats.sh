#!/usr/bin/env bash
# The traceprof command's SVG and pprof outputs on the golden dataset
# (tests/cli/dataset.sql), read by real readers:
#  - pprof: the real `go tool pprof` (Debian's golang-go): the CPU total of
#    every sample (-raw, exact nanoseconds) equals the SQL API's
#    (trace_folded, service_folded), the top function equals
#    trace_profile's, the labels are there (-tags), the builds of a
#    redeployment are the profile's mappings;
#  - SVG: a well-formed XML document (Python's parser) whose frames carry
#    the functions of the trace, a profile subtitle naming both builds, and
#    a differential graph of slow vs fast requests with validateSignature
#    red (hotter in the slow cohort) and serializeResponse blue.
# go is skipped (exit 77) only when it is missing and CI is not set.
# usage: test_traceprof_formats.sh TRACEPROF TRACEPROF_DB CLUSTER_DIR PYTHON3
set -euo pipefail
tp=$1 tpdb=$2 cluster=$3 py=${4:-python3}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

base=$("$tpdb" conninfo "$cluster" --dbname postgres)
conn=$(fresh_cli_db "$tpdb" "$cluster" tp_cli_formats)
psql "$conn" -qX -v ON_ERROR_STOP=1 -f "$here/dataset.sql" >/dev/null
q() { psql "$conn" -qXAt -v ON_ERROR_STOP=1 -c "$1"; }
# traceprof reads as the reader role, as users are told to
rconn=$("$tpdb" conninfo "$cluster" --dbname tp_cli_formats --role reader)
R=(--from "2030-01-02 10:00" --until 2030-01-02T11:00:00Z)
A=0000000000000000000000000000000a

# ---- SVG ----
"$tp" trace-profile "$A" --format svg -o "$work/trace.svg" --db "$rconn" || fail "trace-profile --format svg"
"$tp" profile --service payment-svc "${R[@]}" --format svg -o "$work/profile.svg" --db "$rconn" ||
	fail "profile --format svg"
"$tp" compare --service payment-svc "${R[@]}" --cohort-a 'duration > 1s' \
	--cohort-b 'duration < 100ms' --format svg -o "$work/diff.svg" --db "$rconn" || fail "compare --format svg"
"$py" - "$work" <<'PY' || fail "the SVG files"
import sys, xml.etree.ElementTree as ET
d = sys.argv[1]
NS = "{http://www.w3.org/2000/svg}"
def frames(path):
    root = ET.parse(path).getroot()          # well-formed XML, or an exception
    assert root.tag == NS + "svg", root.tag
    out = {}
    for g in root.iter(NS + "g"):
        rect, text = g.find(NS + "rect"), g.find(NS + "text")
        if rect is not None and text is not None and rect.get("fill", "").startswith("#"):
            out.setdefault(text.text, []).append((float(rect.get("width")), rect.get("fill")))
    return root, out
root, f = frames(d + "/trace.svg")
for name in ("payment-svc", "validateSignature", "handlePayment"):
    assert name in f, "trace.svg lacks %s: %s" % (name, sorted(f))
# checkout-svc (2 of the trace's 86 samples) is too narrow for a label, but
# the document knows it (the details shown on hover)
assert "checkout-svc" in ET.tostring(root, encoding="unicode"), "trace.svg lacks checkout-svc"
# payment-svc: 84 of 86 samples (4421 of 4526 ms) of the whole width
ratio = f["payment-svc"][0][0] / f["all"][0][0]
assert 0.97 < ratio < 0.98, "payment-svc is %.3f of the width" % ratio
root, f = frames(d + "/profile.svg")
text = "".join(root.itertext())
assert "aaaa1111" in text and "bbbb2222" in text, "profile.svg does not name both builds"
root, f = frames(d + "/diff.svg")
def rgb(fill): return tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5))
r, g, b = rgb(f["validateSignature"][0][1])
assert r > b + 40, "validateSignature not red in the comparison: %s" % f["validateSignature"]
r, g, b = rgb(f["serializeResponse"][0][1])
assert b > r + 40, "serializeResponse not blue in the comparison: %s" % f["serializeResponse"]
print("svg: trace, profile (2 builds), differential colours")
PY
ok "SVG outputs"

# ---- pprof, read by go tool pprof ----
if ! command -v go >/dev/null; then
	[ -n "${CI:-}" ] && fail "go is not installed (scripts/deps.sh installs golang-go)"
	echo "skip: no go (golang-go) for the pprof checks"
	exit 77
fi
mkdir -p "$work/home"
export HOME="$work/home" GOCACHE="$work/gocache" GOPATH="$work/gopath" GOENV=off GOFLAGS=
export GOPROXY=off GOTOOLCHAIN=local GOTELEMETRY=off PPROF_TMPDIR="$work" PPROF_BINARY_PATH="$work/none"
# cpu_ns FILE: the sum of the cpu values of every sample (-raw is exact)
cpu_ns() {
	go tool pprof -raw "$1" 2>/dev/null | awk '
		/^Samples:/ { s = 1; next }
		s && /^Locations/ { exit }
		s && $2 ~ /^[0-9]+:$/ { sub(":", "", $2); n += $2 }
		END { printf "%.0f\n", n }'
}
# near WHAT GOT_US WANT_US TOLERANCE_US
near() {
	awk -v a="$2" -v b="$3" -v t="$4" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }' ||
		fail "$1: got $2 us, the SQL API says $3 us"
	ok "$1: $2 us (SQL API $3 us)"
}

"$tp" trace-profile "$A" --format pprof -o "$work/trace.pb.gz" --db "$rconn" || fail "trace-profile --format pprof"
[ "$(head -c 2 "$work/trace.pb.gz" | od -An -tx1 | tr -d ' ')" = 1f8b ] || fail "not gzip"
got=$(($(cpu_ns "$work/trace.pb.gz") / 1000))
want=$(q "SELECT round(sum(cpu_ms) * 1000) FROM traceprof.trace_folded('$A')")
rows=$(q "SELECT count(*) FROM traceprof.trace_folded('$A')")
near "trace CPU total" "$got" "$want" "$rows"
top=$(go tool pprof -top -sample_index=cpu "$work/trace.pb.gz" 2>/dev/null |
	awk 'f { print $NF; exit } /flat%/ { f = 1 }')
want_top=$(q "SELECT function FROM traceprof.trace_profile('$A') ORDER BY self_cpu_ms DESC, function LIMIT 1")
[ "$top" = "$want_top" ] || fail "top function: go tool pprof says $top, trace_profile $want_top"
ok "top function $top"
tags=$(go tool pprof -tags "$work/trace.pb.gz" 2>/dev/null)
for t in "$A" payment-svc checkout-svc span_id; do
	grep -q -- "$t" <<<"$tags" || fail "-tags lacks $t: $tags"
done
ok "labels trace_id, span_id, service"
samples=$(go tool pprof -top -sample_index=samples "$work/trace.pb.gz" 2>/dev/null |
	sed -n 's/.*of \([0-9]*\) total.*/\1/p' | head -1)
[ "$samples" = "$(q "SELECT sum(samples) FROM traceprof.trace_folded('$A')")" ] ||
	fail "sample count $samples"
ok "samples $samples"

"$tp" profile --service payment-svc "${R[@]}" --format pprof -o "$work/profile.pb.gz" --db "$rconn" ||
	fail "profile --format pprof"
got=$(($(cpu_ns "$work/profile.pb.gz") / 1000))
want=$(q "SELECT round(sum(cpu_ms) * 1000) FROM traceprof.service_folded('payment-svc', '2030-01-02 10:00+00', '2030-01-02 11:00+00')")
rows=$(q "SELECT count(*) FROM traceprof.service_folded('payment-svc', '2030-01-02 10:00+00', '2030-01-02 11:00+00')")
near "profile CPU total" "$got" "$want" "$rows"
raw=$(go tool pprof -raw "$work/profile.pb.gz" 2>/dev/null)
grep -q aaaa1111 <<<"$raw" && grep -q bbbb2222 <<<"$raw" || fail "the mappings lack the two builds"
ok "both builds in the profile's mappings"

# binary output is never written to a terminal
if command -v script >/dev/null; then
	out=$(script -qec "$tp trace-profile $A --format pprof --db '$rconn'" /dev/null </dev/null || true)
	grep -q "pprof output is binary" <<<"$out" || fail "pprof to a terminal: $out"
	ok "pprof refused on a terminal"
fi
psql "$base" -qX -c "DROP DATABASE tp_cli_formats" >/dev/null
echo PASS
