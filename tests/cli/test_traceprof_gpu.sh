#!/usr/bin/env bash
# The traceprof command's GPU views on the golden dataset plus the GPU rows
# of tests/cli/gpu_dataset.sql (expected numbers worked out there by hand),
# read as the reader role:
#  - a trace without GPU rows keeps every output byte for byte (text, json,
#    folded, svg, pprof);
#  - text: GPU time per kernel (launches, ms, share) above the tree, which
#    stays as it was; json: the "gpu" object;
#  - folded: the CPU lines as they were, then the GPU stacks ending in their
#    [gpu] kernel frame, in microseconds;
#  - SVG: GPU-only frames (and only they) carry class "gpu" and a green
#    fill, CPU and GPU weighed alike (time);
#  - pprof (the real go tool pprof): a sample type gpu, its total the
#    hand-computed GPU ns, each sample either CPU or GPU; with off-CPU rows
#    too, four sample types;
#  - compare --metric gpu: the kernel that grew in the slow cohort.
# go is skipped (exit 77) only when it is missing and CI is not set.
# usage: test_traceprof_gpu.sh TRACEPROF TRACEPROF_DB CLUSTER_DIR PYTHON3
set -euo pipefail
tp=$1 tpdb=$2 cluster=$3 py=${4:-python3}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

base=$("$tpdb" conninfo "$cluster" --dbname postgres)
conn=$(fresh_cli_db "$tpdb" "$cluster" tp_cli_gpu)
rconn=$("$tpdb" conninfo "$cluster" --dbname tp_cli_gpu --role reader)
psql "$conn" -qX -v ON_ERROR_STOP=1 -f "$here/dataset.sql" >/dev/null
A=0000000000000000000000000000000a
I=00000000000000000000000000000012
# before the GPU rows: every format of a trace with and one without them
outputs() { # DIR: the outputs of both traces in every format
	mkdir -p "$1"
	for t in "$A" "$I"; do
		"$tp" trace-profile "$t" --db "$rconn" >"$1/$t.txt" || fail "trace-profile $t"
		for f in json folded svg pprof; do
			"$tp" trace-profile "$t" --format "$f" -o "$1/$t.$f" --db "$rconn" ||
				fail "trace-profile $t --format $f"
		done
	done
}
outputs "$work/before"
psql "$conn" -qX -v ON_ERROR_STOP=1 -f "$here/gpu_dataset.sql" >/dev/null
outputs "$work/after"
for f in txt json folded svg pprof; do
	cmp -s "$work/before/$I.$f" "$work/after/$I.$f" ||
		fail "--format $f of a trace without GPU rows changed"
done
ok "a trace without GPU rows: text, json, folded, svg and pprof byte for byte as before"

# ---- text ----
a="$work/after/$A.txt"
row() { printf '  %-40s %9s %10s %6s%%\n' "$@"; }
want=$(printf 'GPU time: 165.0 ms in 10 kernel launches (time on the GPU: it overlaps the spans,\nit is not part of them)\n'
	printf '  %-40s %9s %10s %7s\n' KERNEL LAUNCHES "GPU MS" "GPU %"
	row sgemm_128x64 5 150.0 90.9 # 150 / 165.0005
	row decode_step 3 9.0 5.5     # 9.0005 / 165.0005
	row softmax_fwd 2 6.0 3.6)    # 6 / 165.0005
got=$(sed -n '/^GPU time: /,/^$/p' "$a" | sed '$d')
[ "$got" = "$want" ] || fail "GPU time per kernel:
$got
expected:
$want"
sed -n '/^checkout-svc:/,$p' "$a" | diff - <(sed -n '/^checkout-svc:/,$p' "$work/before/$A.txt") ||
	fail "the tree changed"
"$tp" trace-profile "$A" --service checkout-svc --db "$rconn" >"$work/c.txt" || fail "--service"
grep -q "^GPU time: 9.0 ms in 3 kernel launches" "$work/c.txt" && ! grep -q sgemm "$work/c.txt" ||
	fail "--service checkout-svc: $(head -8 "$work/c.txt")"
ok "text: GPU time per kernel, the tree as before, --service"
# GPU time without CPU samples: shown, exit 0; neither: exit 1 as before
G=00000000000000000000000000000099
"$tp" trace-profile "$G" --db "$rconn" >"$work/g.txt" || fail "a trace with GPU time only"
grep -q "^GPU time: 2.5 ms in 1 kernel launches" "$work/g.txt" && grep -q "^no CPU samples" "$work/g.txt" ||
	fail "a trace with GPU time only: $(cat "$work/g.txt")"
[ "$("$tp" trace-profile "$G" --format folded --db "$rconn")" = \
	"payment-svc;main;handlePayment;cudaLaunchKernel;[gpu] softmax_fwd 2500" ] ||
	fail "folded of a trace with GPU time only"
"$tp" trace-profile "$G" --format svg -o "$work/g.svg" --db "$rconn" && grep -q 'class="gpu"' "$work/g.svg" ||
	fail "svg of a trace with GPU time only"
set +e
"$tp" trace-profile 000000000000000000000000000000ff --db "$rconn" >/dev/null 2>&1
rc=$?
set -e
[ $rc = 1 ] || fail "a trace with neither samples nor GPU time: exit $rc"
ok "a trace with GPU time only: text, folded, svg; with nothing: exit 1"

# ---- json ----
"$py" - "$work/after/$A.json" "$work/before/$A.json" <<'PY' || fail "json"
import json, sys
d, before = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
g = d["gpu"]  # ms with 3 decimals: the CLI's JSON numbers
assert abs(g["gpu_ms"] - 165.0005) <= 0.0006 and g["launches"] == 10, g
k = {x["kernel"]: x for x in g["kernels"]}
assert [x["kernel"] for x in g["kernels"]] == ["sgemm_128x64", "decode_step", "softmax_fwd"], g
assert k["sgemm_128x64"]["launches"] == 5 and abs(k["sgemm_128x64"]["gpu_ms"] - 150) < 1e-9, g
assert abs(k["decode_step"]["pct"] - 100 * 9.0005 / 165.0005) < 1e-3, g
assert "gpu" not in before and d["services"] == before["services"], "the rest changed"
print("json: gpu object, the services as before")
PY

# ---- folded ----
f="$work/after/$A.folded"
n=$(wc -l <"$work/before/$A.folded")
head -n "$n" "$f" | cmp -s - "$work/before/$A.folded" || fail "folded: the CPU lines changed"
want='checkout-svc;main;handleCheckout;cudaLaunchKernel;[gpu] decode_step 9001
payment-svc;[gpu] sgemm_128x64 30000
payment-svc;main;handlePayment;cudaLaunchKernel;[gpu] softmax_fwd 6000
payment-svc;main;handlePayment;validateSignature;cudaLaunchKernel;[gpu] sgemm_128x64 120000'
got=$(tail -n +"$((n + 1))" "$f")
[ "$got" = "$want" ] || fail "folded GPU lines:
$got"
ok "folded: CPU lines as before, then the GPU stacks in microseconds"

# ---- SVG ----
"$py" - "$work/after/$A.svg" <<'PY' || fail "the SVG"
import sys, xml.etree.ElementTree as ET
NS = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
drawn = []  # (label or None, width, fill, class) of every frame
for g in root.iter(NS + "g"):
    rect, text = g.find(NS + "rect"), g.find(NS + "text")
    if rect is not None and rect.get("fill", "").startswith("#"):
        drawn.append((text.text if text is not None else None, float(rect.get("width")),
                      rect.get("fill"), g.get("class")))
def rgb(fill): return tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5))
def green(fill): r, g, b = rgb(fill); return g > r + 60 and g > b + 60
# GPU time only: the kernels and the launch call under each launching frame
# (payment-svc: 2 cudaLaunchKernel, 2 sgemm_128x64, softmax_fwd;
# checkout-svc: cudaLaunchKernel, decode_step); labels may be cut ("cu..")
gpu_names = ("cudaLaunchKernel", "[gpu] sgemm_128x64", "[gpu] softmax_fwd", "[gpu] decode_step")
gpu = [d for d in drawn if d[3] == "gpu"]
assert len(gpu) == 7, "GPU frames: %s" % gpu
for label, w, fill, cls in gpu:
    assert green(fill), "%s: fill %s" % (label, fill)
    assert label is None or any(n == label or (label.endswith("..") and n.startswith(label[:-2]))
                                for n in gpu_names), "%s is drawn as GPU time" % label
for label, w, fill, cls in drawn:
    assert cls == "gpu" or not green(fill), "%s is green without class gpu" % label
full = {d[0]: d for d in drawn}
for name in ("all", "payment-svc", "main", "handlePayment", "validateSignature", "rsa_verify"):
    assert name in full, "the SVG lacks %s: %s" % (name, sorted(full, key=str))
for name in ("all", "payment-svc", "main", "handlePayment", "validateSignature", "rsa_verify"):
    assert full[name][3] is None, "%s is drawn as GPU time" % name
# width is time: payment-svc 4421.05 ms CPU + 156 ms GPU of 105.26 + 4421.05 + 165.0005
ratio = full["payment-svc"][1] / full["all"][1]
assert abs(ratio - 4577.05 / 4691.31) < 0.002, "payment-svc is %.4f of the width" % ratio
text = "".join(root.itertext())
assert "green: on the GPU" in text, "no legend"
print("svg: GPU frames green with class gpu, CPU frames without; width in time")
PY
ok "SVG"

# ---- pprof, read by go tool pprof ----
if ! command -v go >/dev/null; then
	[ -n "${CI:-}" ] && fail "go is not installed (scripts/deps.sh installs golang-go)"
	echo "skip: no go (golang-go) for the pprof checks"
	psql "$base" -qX -c "DROP DATABASE tp_cli_gpu" >/dev/null
	exit 77
fi
mkdir -p "$work/home"
export HOME="$work/home" GOCACHE="$work/gocache" GOPATH="$work/gopath" GOENV=off GOFLAGS=
export GOPROXY=off GOTOOLCHAIN=local GOTELEMETRY=off PPROF_TMPDIR="$work" PPROF_BINARY_PATH="$work/none"
p="$work/after/$A.pprof"
go tool pprof -raw "$p" >"$work/raw.txt" 2>/dev/null || fail "go tool pprof -raw"
grep -qx "samples/count cpu/nanoseconds\[dflt\] gpu/nanoseconds" "$work/raw.txt" ||
	fail "sample types: $(grep -m1 nanoseconds "$work/raw.txt")"
read -r gpu both < <(awk '/^Samples:/ { s = 1; next } s && /^Locations/ { exit }
	s && $3 ~ /^[0-9]+:$/ { sub(":", "", $3); g += $3; if ($2 > 0 && $3 > 0) b++ }
	END { printf "%.0f %d\n", g, b }' "$work/raw.txt")
[ "$both" = 0 ] || fail "$both samples have both CPU and GPU time"
[ "$gpu" = 165000500 ] || fail "gpu total $gpu ns, 165000500 by hand"
top=$(go tool pprof -top -sample_index=gpu "$p" 2>/dev/null |
	awk 'f { print; exit } /flat%/ { f = 1 }' | sed -E 's/^ *([^ ]+ +){5}//')
[ "$top" = "[gpu] sgemm_128x64" ] || fail "top GPU leaf: '$top'"
# with off-CPU rows as well: both extra sample types, off_cpu first
psql "$conn" -qX -v ON_ERROR_STOP=1 -f "$here/offcpu_dataset.sql" >/dev/null
"$tp" trace-profile "$A" --format pprof -o "$work/both.pb.gz" --db "$rconn" || fail "pprof with off-CPU"
go tool pprof -raw "$work/both.pb.gz" 2>/dev/null |
	grep -qx "samples/count cpu/nanoseconds\[dflt\] off_cpu/nanoseconds gpu/nanoseconds" ||
	fail "sample types with off-CPU and GPU time"
ok "pprof: gpu $gpu ns, no sample with CPU and GPU time, top GPU leaf $top; off_cpu and gpu together"

# ---- compare --metric gpu ----
C=(compare --service payment-svc --from "2030-01-02 10:00" --until 2030-01-02T11:00:00Z
	--cohort-a 'duration > 1s' --cohort-b 'duration < 100ms' --db "$rconn" --metric gpu)
"$tp" "${C[@]}" >"$work/cmp.txt" || fail "compare --metric gpu"
grep -q "^service payment-svc, requests started .*, GPU time$" "$work/cmp.txt" &&
	grep -qF "A: duration > 1s                3 requests, 617.0 ms on the GPU" "$work/cmp.txt" &&
	grep -qF "B: duration < 100ms             8 requests, 52.0 ms on the GPU" "$work/cmp.txt" ||
	fail "compare --metric gpu header: $(cat "$work/cmp.txt")"
line=$(awk '/^more GPU time in A/ { getline; getline; print; exit }' "$work/cmp.txt")
read -r k ams bms ash bsh _ <<<"$line"
[ "$k $ams $bms $ash $bsh" = "sgemm_128x64 200.0 5.0 97.2% 76.9%" ] ||
	fail "more GPU time in A: '$line'
$(cat "$work/cmp.txt")"
"$tp" "${C[@]}" --format json >"$work/cmp.json" || fail "compare --metric gpu json"
"$py" -c 'import json,sys; d = json.load(open(sys.argv[1]))
assert d["metric"] == "gpu" and d["more_gpu_in_a"][0]["kernel"] == "sgemm_128x64", d
assert d["more_gpu_in_a"][0]["a_ms_per_request"] == 200, d
assert d["more_gpu_in_b"][0]["kernel"] == "softmax_fwd" and d["cohort_b"]["gpu_ms"] == 52, d' \
	"$work/cmp.json" || fail "compare --metric gpu --format json"
ok "compare --metric gpu (text, json): sgemm_128x64 grew"
psql "$base" -qX -c "DROP DATABASE tp_cli_gpu" >/dev/null
echo PASS
