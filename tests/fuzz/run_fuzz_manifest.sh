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
. "$here/lib.sh"
if [ ! -x "$fuzzer" ]; then
	echo "skip: $fuzzer not built (clang with -fsanitize=fuzzer unavailable; scripts/deps.sh installs it)"
	exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
cp "$here"/../../examples/triggers/*.yaml "$work/corpus/"
fuzz_run "$fuzzer" "$work/corpus" "$here/manifest.dict" 16384 "$seconds" fuzz_manifest
