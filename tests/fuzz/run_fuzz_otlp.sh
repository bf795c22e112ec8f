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
. "$here/lib.sh"
if [ ! -x "$fuzzer" ]; then
	echo "skip: $fuzzer not built (clang with -fsanitize=fuzzer unavailable; scripts/deps.sh installs it)"
	exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
python3 "$here/../e2e/otlp_hostile.py" seeds "$work/corpus"
python3 "$here/../e2e/otlp_hostile.py" deep "$work/corpus/deep40" 40
python3 "$here/../e2e/otlp_hostile.py" deep "$work/corpus/deep_kvlist40" 40 kvlist
python3 "$here/../e2e/otlp_hostile.py" gzip "$work/corpus/export" "$work/corpus/export.gz"
fuzz_run "$fuzzer" "$work/corpus" "$here/otlp.dict" 65536 "$seconds" fuzz_otlp
