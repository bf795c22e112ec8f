#!/usr/bin/env bash
# Runs the OTLP decoder's libFuzzer target for a bounded time: seeds made by
# tests/e2e/otlp_hostile.py (ordinary exports and nested attributes), the
# nesting dictionary otlp.dict, inputs up to 64 KiB (deep enough to nest
# thousands of levels), every crash, leak or abort() of the target a
# failure. Exit 77 (skipped) only when the fuzzer was not built because
# clang's fuzzer runtime is missing.
# usage: run_fuzz_otlp.sh FUZZER SECONDS
set -euo pipefail
fuzzer=$1 seconds=$2
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x "$fuzzer" ]; then
	echo "skip: $fuzzer not built (clang with -fsanitize=fuzzer unavailable; scripts/deps.sh installs it)"
	exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/artifacts"
python3 "$here/../e2e/otlp_hostile.py" seeds "$work/corpus"
python3 "$here/../e2e/otlp_hostile.py" deep "$work/corpus/deep40" 40
python3 "$here/../e2e/otlp_hostile.py" deep "$work/corpus/deep_kvlist40" 40 kvlist
python3 "$here/../e2e/otlp_hostile.py" gzip "$work/corpus/export" "$work/corpus/export.gz"
# -rss_limit_mb bounds the target's memory like the agent's budget (plus ASan's own)
"$fuzzer" "$work/corpus" -dict="$here/otlp.dict" -max_total_time="$seconds" -max_len=65536 \
	-timeout=10 -rss_limit_mb=1024 -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
	>"$work/fuzz.log" 2>&1 || {
	tail -60 "$work/fuzz.log" >&2
	for f in "$work"/artifacts/*; do
		[ -e "$f" ] && { echo "--- reproducer $(basename "$f") (hex):" >&2; od -An -tx1 "$f" | head -20 >&2; }
	done
	exit 1
}
grep -E '^stat::(number_of_executed_units|peak_rss_mb)|^Done' "$work/fuzz.log" || tail -3 "$work/fuzz.log"
echo "ok: fuzz_otlp ran ${seconds}s without a finding"
