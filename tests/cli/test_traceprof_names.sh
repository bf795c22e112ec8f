#!/usr/bin/env bash
# Names that would act on a terminal, inserted into the store directly (as
# a hostile agent or a bug could): a function named with ESC, U+009B (CSI,
# C1) and U+202E (right-to-left override), and a module with DEL. Every
# format of traceprof profile and trace-profile must show them escaped:
# text and folded as \uXXXX with none of those bytes left, JSON valid with
# them as \uXXXX escapes (and the original name when decoded), SVG
# well-formed XML without them.
# usage: test_traceprof_names.sh TRACEPROF TRACEPROF_DB CLUSTER_DIR PYTHON3
set -euo pipefail
tp=$1 tpdb=$2 cluster=$3 py=$4
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
conn=$(fresh_cli_db "$tpdb" "$cluster" tp_cli_names)
psql "$conn" -qX -v ON_ERROR_STOP=1 -f "$here/dataset.sql" >/dev/null
psql "$conn" -qX -v ON_ERROR_STOP=1 -c "UPDATE traceprof.functions
	SET name = E'rsa\\u001b[2J\\u009b31m_verify\\u202Egnp.exe', module = E'libcrypto\\u007f.so'
	WHERE name = 'rsa_verify'" >/dev/null
reader=$("$tpdb" conninfo "$cluster" --dbname tp_cli_names --role reader)
R=(--from 2030-01-02T10:00:00Z --until 2030-01-02T11:00:00Z)
A=0000000000000000000000000000000a
want='rsa\u001b[2J\u009b31m_verify\u202egnp.exe'

# raw FILE: whether FILE holds ESC, DEL, U+009B or U+202E as bytes
raw() { LC_ALL=C grep -q $'\x1b\\|\x7f\\|\xc2\x9b\\|\xe2\x80\xae' "$1"; }
for cmd in "profile --service payment-svc ${R[*]}" "trace-profile $A"; do
	for fmt in text folded json svg; do
		out=$work/out.$fmt
		# shellcheck disable=SC2086 # cmd is words
		"$tp" $cmd --db "$reader" --format "$fmt" >"$out" 2>"$work/err" ||
			fail "traceprof $cmd --format $fmt: exit status $?"
		! raw "$out" || fail "traceprof $cmd --format $fmt: raw control or bidi bytes in the output"
		case $fmt in
		text | folded)
			grep -qF "$want" "$out" || fail "traceprof $cmd --format $fmt: the name is not shown as $want"
			;;
		json)
			"$py" - "$out" <<'PY' || fail "traceprof $cmd --format json: not the name, or not JSON"
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
names = []
def walk(v):
    if isinstance(v, dict):
        names.extend(str(x) for x in v.values() if isinstance(x, str))
        for x in v.values(): walk(x)
    elif isinstance(v, list):
        for x in v: walk(x)
walk(json.loads(text))
assert "rsa\x1b[2J\x9b31m_verify\u202egnp.exe" in names, "decoded name missing"
assert "libcrypto\x7f.so" in names, "decoded module missing"
assert "\\u009b" in text and "\\u202e" in text and "\\u007f" in text, "not escaped as \\uXXXX"
PY
			;;
		svg)
			"$py" -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$out" ||
				fail "traceprof $cmd --format svg: not well-formed XML"
			grep -q 'rsa' "$out" || fail "traceprof $cmd --format svg: the function is missing"
			;;
		esac
		ok "traceprof $cmd --format $fmt: the name escaped"
	done
done
