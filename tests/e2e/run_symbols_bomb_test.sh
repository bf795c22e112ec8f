#!/usr/bin/env bash
# Compressed-section bombs given to "traceprof-db symbols add": a 1 MB file
# whose .zdebug_line (GNU) or SHF_COMPRESSED .debug_line declares 1 GiB is
# refused with status 1 and a message naming the section and the limit,
# before anything is inflated (peak RSS under 64 MB, /usr/bin/time); one
# that declares 1 MiB but holds 1 GiB of zlib data is inflated by libelf
# only up to what it declares; raised limits are honoured (a 32 MiB bomb
# passes --max-inflate-section 64M and is refused by --max-inflate 16M).
# usage: run_symbols_bomb_test.sh TRACEPROF_DB CC CLUSTER_DIR
set -euo pipefail
tpdb=$1 cc=$2 cluster=$3
. "$(dirname "$0")/lib.sh"
command -v objcopy >/dev/null && [ -x /usr/bin/time ] ||
	{ echo "skip: needs objcopy (binutils) and /usr/bin/time"; exit 77; }
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_symbols_bomb)
here=$(cd "$(dirname "$0")" && pwd)

printf 'int leaf(void) { return 1; }\nint main(void) { return leaf(); }\n' >"$work/p.c"
"$cc" -O0 -o "$work/p" "$work/p.c"
for kind in zdebug gabi liar; do python3 "$here/elf_bomb.py" "$kind" "$work/p" "$work/$kind"; done
python3 "$here/elf_bomb.py" gabi "$work/p" "$work/small" 32
# symbols_rss WANT_STATUS FILE ARGS...: runs symbols add, its output in $out, its peak RSS (KiB) in $rss
symbols_rss() {
	local want=$1 file=$2 st=0
	shift 2
	out=$(/usr/bin/time -f 'maxrss_kib=%M' "$tpdb" symbols add --db "$conn" "$@" "$file" 2>&1) || st=$?
	rss=$(sed -n 's/^maxrss_kib=//p' <<<"$out")
	echo "$out" | sed 's/^/   /'
	[ "$st" -eq "$want" ] || fail "$file: exit status $st, expected $want"
}
for kind in zdebug gabi; do
	size=$(stat -c %s "$work/$kind")
	symbols_rss 1 "$work/$kind"
	grep -q "refused: compressed section .*debug_line inflates to 1073741824 bytes, over the limit of 67108864 (--max-inflate-section)" <<<"$out" ||
		fail "$kind: no refusal naming the section and the limit"
	[ "$rss" -lt 65536 ] || fail "$kind: peak RSS $rss KiB, 64 MB or more"
	echo "ok: $kind bomb of $size bytes refused, peak RSS $rss KiB"
done
# declared 1 MiB: within the limits, inflated by libelf into 1 MiB at most
symbols_rss 4 "$work/liar"
[ "$rss" -lt 65536 ] || fail "liar: peak RSS $rss KiB, 64 MB or more"
echo "ok: a section that declares less than it holds is inflated no further (peak RSS $rss KiB)"
symbols_rss 4 "$work/small"
symbols_rss 1 "$work/small" --max-inflate 16M
grep -q "inflate to 33554432 bytes together (up to .debug_line), over the limit of 16777216 (--max-inflate)" <<<"$out" ||
	fail "small: --max-inflate 16M not applied"
echo "ok: the limits are the flags'"
