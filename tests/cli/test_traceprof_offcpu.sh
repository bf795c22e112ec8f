#!/usr/bin/env bash
# The traceprof command's off-CPU views on the golden dataset plus the
# off-CPU rows of tests/cli/offcpu_dataset.sql (expected numbers worked out
# there by hand), read as the reader role:
#  - text: the breakdown above the tree, each span's parts adding up to it,
#    the top blocking function named; a trace without off-CPU rows keeps
#    the output it had;
#  - SVG: off-CPU frames (and only they) carry class "off" and a blue fill,
#    CPU and off-CPU weighed alike (time);
#  - pprof (the real go tool pprof): a third sample type off_cpu, its total
#    the SQL API's, each sample either CPU or off-CPU;
#  - compare --metric offcpu: the blocking function with more time in the
#    slow cohort; --metric wall the function the SQL API puts first; unknown
#    metrics refused.
# go is skipped (exit 77) only when it is missing and CI is not set.
# usage: test_traceprof_offcpu.sh TRACEPROF TRACEPROF_DB CLUSTER_DIR PYTHON3
set -euo pipefail
tp=$1 tpdb=$2 cluster=$3 py=${4:-python3}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

base=$("$tpdb" conninfo "$cluster" --dbname postgres)
conn=$(fresh_cli_db "$tpdb" "$cluster" tp_cli_offcpu)
# before the off-CPU rows: the text of a trace, to compare with after
rconn=$("$tpdb" conninfo "$cluster" --dbname tp_cli_offcpu --role reader)
psql "$conn" -qX -v ON_ERROR_STOP=1 -f "$here/dataset.sql" >/dev/null
A=0000000000000000000000000000000a
I=00000000000000000000000000000012
"$tp" trace-profile "$A" --db "$rconn" >"$work/a_before.txt" || fail "trace-profile before"
psql "$conn" -qX -v ON_ERROR_STOP=1 -f "$here/offcpu_dataset.sql" >/dev/null
q() { psql "$conn" -qXAt -v ON_ERROR_STOP=1 -c "$1"; }

# ---- text ----
"$tp" trace-profile "$A" --db "$rconn" >"$work/a.txt" || fail "trace-profile"
for want in \
	"  checkout-svc, span 00000000000000a1" \
	"    span 5700.0 ms = CPU 105.3 + blocked 5500.0 + runqueue 20.0 + other 74.7 ms" \
	"    blocked in: recv <- http_call 5500.0 ms (100.0 %)" \
	"  payment-svc, span 00000000000000a2" \
	"    span 5500.0 ms = CPU 4421.1 + blocked 900.0 + runqueue 30.0 + other 148.9 ms" \
	"    blocked in: pthread_mutex_lock <- ledger_append 900.0 ms (100.0 %)"; do
	grep -qxF -- "$want" "$work/a.txt" || fail "the breakdown lacks '$want':
$(cat "$work/a.txt")"
done
# every span's parts add up to it (0.1 ms rounding each)
awk '/^    span / { s = $2; sum = $6 + $9 + $12 + $15; d = s - sum; if (d < 0) d = -d
	if (d > 0.25) { print "span " s " != " sum; bad = 1 }; n++ }
	END { exit bad || n != 2 }' "$work/a.txt" || fail "the parts do not add up to the span"
# the bar: one line of 40 per span, CPU first
bar=$(grep -A1 -F "span 5500.0 ms" "$work/a.txt" | tail -1)
[[ "$bar" =~ ^\ \ \ \ \[(#+)(=+)(~*)(\.+)\]$ ]] || fail "payment-svc's bar: '$bar'"
[ "${#BASH_REMATCH[1]}" = 32 ] && [ "${#BASH_REMATCH[2]}" = 7 ] ||
	fail "payment-svc's bar: 4421/5500 of 40 is 32 '#', 900/5500 7 '=': '$bar'"
# the tree follows, as it was before the off-CPU rows
sed -n '/^checkout-svc:/,$p' "$work/a.txt" | diff - <(sed -n '/^checkout-svc:/,$p' "$work/a_before.txt") ||
	fail "the tree changed"
"$tp" trace-profile "$I" --db "$rconn" >"$work/i.txt" || fail "trace-profile of $I"
grep -q "time breakdown" "$work/i.txt" && fail "a breakdown for a trace without off-CPU rows"
# --service keeps that service's entry only
"$tp" trace-profile "$A" --service payment-svc --db "$rconn" >"$work/p.txt" || fail "--service"
[ "$(grep -c '^  [a-z-]*, span ' "$work/p.txt")" = 1 ] && grep -q "^  payment-svc, span " "$work/p.txt" ||
	fail "--service payment-svc: $(head -8 "$work/p.txt")"
ok "text breakdown: parts add up, bar, blocking functions; --service; none without off-CPU rows"

# ---- SVG ----
"$tp" trace-profile "$A" --format svg -o "$work/a.svg" --db "$rconn" || fail "trace-profile --format svg"
"$py" - "$work/a.svg" <<'PY' || fail "the SVG"
import sys, xml.etree.ElementTree as ET
NS = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
f = {}
for g in root.iter(NS + "g"):
    rect, text = g.find(NS + "rect"), g.find(NS + "text")
    if rect is not None and text is not None and rect.get("fill", "").startswith("#"):
        f.setdefault(text.text, []).append((float(rect.get("width")), rect.get("fill"),
                                            g.get("class")))
def rgb(fill): return tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5))
def frames(name):  # labels too long for their frame end with ".."
    got = [x for t, xs in f.items() for x in xs
           if t == name or (t.endswith("..") and name.startswith(t[:-2]))]
    assert got, "a.svg lacks %s: %s" % (name, sorted(f))
    return got
for name in ("http_call", "recv", "schedule", "ledger_append", "pthread_mutex_lock"):
    for w, fill, cls in frames(name):
        r, g, b = rgb(fill)
        assert cls == "off" and b > r + 80, "%s: class %s fill %s" % (name, cls, fill)
for name in ("all", "payment-svc", "checkout-svc", "main", "handlePayment", "validateSignature",
             "rsa_verify"):
    for w, fill, cls in frames(name):
        assert cls is None, "%s is drawn as off-CPU" % name
# width is time: payment-svc 4421.05 + 930 of 105.26 + 5520 + 4421.05 + 930 ms
ratio = f["payment-svc"][0][0] / f["all"][0][0]
assert abs(ratio - 5351.05 / 10976.32) < 0.002, "payment-svc is %.4f of the width" % ratio
text = "".join(root.itertext())
assert "blue: off CPU" in text, "no legend"
print("svg: off-CPU frames blue with class off, CPU frames without; width in time")
PY
ok "SVG"

# ---- pprof, read by go tool pprof ----
if ! command -v go >/dev/null; then
	[ -n "${CI:-}" ] && fail "go is not installed (scripts/deps.sh installs golang-go)"
	echo "skip: no go (golang-go) for the pprof checks"
	psql "$base" -qX -c "DROP DATABASE tp_cli_offcpu" >/dev/null
	exit 77
fi
mkdir -p "$work/home"
export HOME="$work/home" GOCACHE="$work/gocache" GOPATH="$work/gopath" GOENV=off GOFLAGS=
export GOPROXY=off GOTOOLCHAIN=local GOTELEMETRY=off PPROF_TMPDIR="$work" PPROF_BINARY_PATH="$work/none"
"$tp" trace-profile "$A" --format pprof -o "$work/a.pb.gz" --db "$rconn" || fail "--format pprof"
go tool pprof -raw "$work/a.pb.gz" >"$work/raw.txt" 2>/dev/null || fail "go tool pprof -raw"
grep -qx "samples/count cpu/nanoseconds\[dflt\] off_cpu/nanoseconds" "$work/raw.txt" ||
	fail "sample types: $(grep -m1 nanoseconds "$work/raw.txt")"
# per sample: samples, cpu ns, off-CPU ns; sums, and no sample with both
read -r cpu off both < <(awk '/^Samples:/ { s = 1; next } s && /^Locations/ { exit }
	s && $3 ~ /^[0-9]+:$/ { sub(":", "", $3); c += $2; o += $3; if ($2 > 0 && $3 > 0) b++ }
	END { printf "%.0f %.0f %d\n", c, o, b }' "$work/raw.txt")
[ "$both" = 0 ] || fail "$both samples have both CPU and off-CPU time"
want_off=$(q "SELECT sum(us) * 1000 FROM unnest(ARRAY['blocked', 'runqueue']) k,
	traceprof.trace_offcpu_folded('$A', k)")
[ "$off" = "$want_off" ] && [ "$off" = 6450000000 ] || fail "off_cpu total $off ns, the SQL API says $want_off"
want_cpu=$(q "SELECT round(sum(cpu_ms) * 1e6) FROM traceprof.trace_folded('$A')")
awk -v a="$cpu" -v b="$want_cpu" 'BEGIN { d = a - b; exit !(d < 10000 && d > -10000) }' ||
	fail "cpu total $cpu ns, the SQL API says $want_cpu"
top=$(go tool pprof -top -sample_index=off_cpu "$work/a.pb.gz" 2>/dev/null |
	awk 'f { print $NF; exit } /flat%/ { f = 1 }')
[ "$top" = schedule ] || fail "top off-CPU leaf: $top"
ok "pprof: off_cpu $off ns, cpu $cpu ns, no sample with both, top off-CPU leaf $top"

# ---- compare --metric ----
C=(compare --service payment-svc --from "2030-01-02 10:00" --until 2030-01-02T11:00:00Z
	--cohort-a 'duration > 1s' --cohort-b 'duration < 100ms' --db "$rconn")
"$tp" "${C[@]}" --metric offcpu >"$work/cmp.txt" || fail "compare --metric offcpu"
top=$(awk '/^more blocked in A/ { getline; getline; print $1; exit }' "$work/cmp.txt")
[ "$top" = pthread_mutex_lock ] || fail "more blocked in A: '$top'
$(cat "$work/cmp.txt")"
grep -qF "A: duration > 1s                3 requests, 1600.0 ms blocked" "$work/cmp.txt" ||
	fail "cohort A's blocked time: $(cat "$work/cmp.txt")"
"$tp" "${C[@]}" --metric offcpu --format json >"$work/cmp.json" || fail "compare --metric offcpu json"
"$py" -c 'import json,sys; d = json.load(open(sys.argv[1]))
assert d["metric"] == "offcpu" and d["more_blocked_in_a"][0]["function"] == "pthread_mutex_lock", d
assert d["more_blocked_in_b"][0]["function"] == "recv" and d["cohort_b"]["blocked_ms"] == 60, d' \
	"$work/cmp.json" || fail "compare --metric offcpu --format json"
"$tp" "${C[@]}" --metric cpu >"$work/cpu.txt" && "$tp" "${C[@]}" >"$work/default.txt" &&
	cmp -s "$work/cpu.txt" "$work/default.txt" || fail "--metric cpu is not the default"
# --metric wall: the report of compare_wall_cohorts (its figures are checked in sql_test_offcpu)
"$tp" "${C[@]}" --metric wall >"$work/wall.txt" || fail "compare --metric wall"
grep -q "^service payment-svc, requests started .*, wall time$" "$work/wall.txt" ||
	fail "--metric wall header: $(head -3 "$work/wall.txt")"
top=$(awk '/^more time in A/ { getline; getline; print $1; exit }' "$work/wall.txt")
want=$(q "SELECT function FROM traceprof.compare_wall_cohorts('payment-svc', '2030-01-02 10:00+00',
	'2030-01-02 11:00+00', '{\"min_duration\": \"1000001us\"}', '{\"max_duration\": \"100ms\"}')
	WHERE delta > 0 ORDER BY abs(delta) DESC, function COLLATE \"C\" LIMIT 1")
[ -n "$top" ] && [ "$top" = "$want" ] || fail "more time in A: '$top', the SQL API says '$want'
$(cat "$work/wall.txt")"
"$tp" "${C[@]}" --metric wall --format json >"$work/wall.json" || fail "compare --metric wall json"
"$py" -c 'import json,sys; d = json.load(open(sys.argv[1]))
assert d["metric"] == "wall" and d["more_time_in_a"][0]["function"] == sys.argv[2], d
assert all(0 <= r["a_share"] <= 1 for r in d["more_time_in_a"] + d["more_time_in_b"]), d' \
	"$work/wall.json" "$want" || fail "compare --metric wall --format json"
set +e
msg=$("$tp" "${C[@]}" --metric bogus 2>&1); rc=$?
[ $rc = 2 ] && grep -q "'bogus' is not one of cpu, offcpu, wall" <<<"$msg" || fail "--metric bogus: $rc $msg"
set -e
ok "compare --metric offcpu and wall (text, json), cpu the default, bogus refused"
psql "$base" -qX -c "DROP DATABASE tp_cli_offcpu" >/dev/null
echo PASS
