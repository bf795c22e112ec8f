#!/usr/bin/env bash
# Time of "traceprof-db symbols add FILE": naming every function of a big
# binary after the fact. Stores one unnamed frame ("module+0xADDRESS", kind
# 2, FILE's build id) in the middle of every function symbol of FILE
# (.symtab and .dynsym, sized), STACKS stacks of 16 random such frames, and
# as many frames of another build (untouched, but scanned), in a throwaway
# cluster; then times, on a fresh copy of that database each run, the first
# run (names everything) and a second run (changes nothing). Prints medians.
# Never fails on timing.
# usage: bench/bench_symbols_add.sh [--runs N] [--stacks N] FILE...
#   (default: 5 runs, 20000 stacks, /usr/bin/python3.11 and libcrypto.so.3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
tpdb=$build/cli/traceprof-db
runs=5 stacks=20000
while [ $# -gt 0 ]; do
	case $1 in
	--runs) runs=$2; shift 2 ;;
	--stacks) stacks=$2; shift 2 ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || set -- /usr/bin/python3.11 /usr/lib/x86_64-linux-gnu/libcrypto.so.3
[ -x "$tpdb" ] || cmake --build "$build" -j1 --target traceprof-db >/dev/null
dir=$(mktemp -d)
chmod 0711 "$dir" # the cluster runs as postgres when started by root
trap '"$tpdb" remove "$dir/db" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
"$tpdb" create "$dir/db" --fast >/dev/null
base=$("$tpdb" conninfo "$dir/db" --dbname postgres)
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }

for file in "$@"; do
	bid=$(readelf -n "$file" | sed -n 's/^ *Build ID: *//p' | head -1)
	mod=$(basename "$file")
	# the middle of every sized function symbol, one per address
	readelf -Ws --dyn-syms "$file" 2>/dev/null |
		awk '$4 == "FUNC" && $3 + 0 > 1 && $7 != "UND" { print $2 "\t" $3 }' | sort -u >"$dir/syms"
	n=$(cut -f1 "$dir/syms" | sort -u | wc -l)
	psql "$base" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS tpl" -c "CREATE DATABASE tpl" >/dev/null
	conn=$("$tpdb" conninfo "$dir/db" --dbname tpl)
	"$tpdb" migrate --db "$conn" >/dev/null
	psql "$conn" -qX -v ON_ERROR_STOP=1 >/dev/null <<-SQL
		CREATE TEMP TABLE sym (hex text, size bigint);
		\copy sym FROM '$dir/syms'
		CREATE TEMP TABLE a AS
		SELECT DISTINCT ON (v) v + min(size) / 2 AS address
		  FROM (SELECT ('x' || lpad(hex, 16, '0'))::bit(64)::bigint AS v, size FROM sym) x GROUP BY v;
		INSERT INTO traceprof.functions (function_id, name, module, kind)
		SELECT 1000000 + address, '$mod+0x' || to_hex(address), '$mod', 2 FROM a;
		INSERT INTO traceprof.frames (frame_id, function_id, build_id, address)
		SELECT 1000000 + address, 1000000 + address, '$bid', address FROM a
		UNION ALL
		SELECT 5000000000 + address, 1000000 + address, 'ffff', address FROM a;
		SELECT setseed(0.5);
		CREATE TEMP TABLE arr AS SELECT array_agg(address ORDER BY address) AS v FROM a;
		INSERT INTO traceprof.stacks (stack_id, frame_ids)
		SELECT s, ARRAY(SELECT 1000000 + (SELECT v FROM arr)[1 + floor(random() * $n)::int]
		                  FROM generate_series(1, 16) k WHERE s > 0)
		  FROM generate_series(1, $stacks) s;
		ANALYZE traceprof.functions; ANALYZE traceprof.frames; ANALYZE traceprof.stacks;
	SQL
	first=() second=()
	for r in $(seq "$runs"); do
		psql "$base" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS run" -c "CREATE DATABASE run TEMPLATE tpl" >/dev/null
		rc=$("$tpdb" conninfo "$dir/db" --dbname run)
		t=$(date +%s%N)
		out=$("$tpdb" symbols add --db "$rc" "$file")
		first+=("$(ms "$t")")
		t=$(date +%s%N)
		"$tpdb" symbols add --db "$rc" "$file" >/dev/null
		second+=("$(ms "$t")")
	done
	echo "$out"
	printf '%s: %d function symbols, %d unnamed frames (+%d of another build), %d stacks of 16: first run median %s ms (runs: %s), second run median %s ms\n' \
		"$mod" "$n" "$n" "$n" "$stacks" "$(printf '%s\n' "${first[@]}" | median)" "${first[*]}" \
		"$(printf '%s\n' "${second[@]}" | median)"
done
