#!/usr/bin/env bash
# Runs the manifest parser's libFuzzer target (AddressSanitizer and
# UndefinedBehaviorSanitizer) for a bounded time: the example triggers as
# seeds, manifest.dict, inputs up to 16 KiB; every crash, leak, sanitizer
# report or abort() of the target a failure. Exit 77 (skipped) only when
# the fuzzer was not built because clang's fuzzer runtime is missing.
# usage: run_fuzz_manifest.sh FUZZER SECONDS
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
cp "$here"/../../examples/triggers/*.yaml "$work/corpus/"
"$fuzzer" "$work/corpus" -dict="$here/manifest.dict" -max_total_time="$seconds" -max_len=16384 \
	-timeout=10 -rss_limit_mb=1024 -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
	>"$work/fuzz.log" 2>&1 || {
	tail -60 "$work/fuzz.log" >&2
	for f in "$work"/artifacts/*; do
		[ -e "$f" ] && { echo "--- reproducer $(basename "$f") (hex):" >&2; od -An -tx1 "$f" | head -20 >&2; }
	done
	exit 1
}
grep -E '^stat::(number_of_executed_units|peak_rss_mb)|^Done' "$work/fuzz.log" || tail -3 "$work/fuzz.log"
echo "ok: fuzz_manifest ran ${seconds}s without a finding"
