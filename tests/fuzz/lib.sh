# Sourced by the run_fuzz_*.sh scripts: one way to run a libFuzzer target
# for a bounded time and report a finding.

# fuzz_run FUZZER CORPUS DICT MAX_LEN SECONDS NAME: runs the target over
# CORPUS with DICT, inputs up to MAX_LEN bytes, for SECONDS; a crash, leak,
# sanitizer report or abort() fails with the log's tail and the reproducer
# in hex; -rss_limit_mb bounds the target's memory (plus ASan's own)
fuzz_run() {
	local fuzzer=$1 corpus=$2 dict=$3 max_len=$4 seconds=$5 name=$6 out
	out=$(dirname "$corpus")
	mkdir -p "$out/artifacts"
	"$fuzzer" "$corpus" -dict="$dict" -max_total_time="$seconds" -max_len="$max_len" \
		-timeout=10 -rss_limit_mb=1024 -artifact_prefix="$out/artifacts/" -print_final_stats=1 \
		>"$out/fuzz.log" 2>&1 || {
		tail -60 "$out/fuzz.log" >&2
		for f in "$out"/artifacts/*; do
			[ -e "$f" ] && { echo "--- reproducer $(basename "$f") (hex):" >&2; od -An -tx1 "$f" | head -20 >&2; }
		done
		exit 1
	}
	grep -E '^stat::(number_of_executed_units|peak_rss_mb)|^Done' "$out/fuzz.log" || tail -3 "$out/fuzz.log"
	echo "ok: $name ran ${seconds}s without a finding"
}
