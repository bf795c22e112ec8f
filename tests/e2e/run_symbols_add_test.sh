#!/usr/bin/env bash
# Symbols added later: a C program built -O2 -g and stripped (its debug file
# kept elsewhere, where the agent does not look) is sampled; its frames are
# stored as "symtest+0xADDRESS". "traceprof-db symbols add" with the debug
# file (under a .build-id path) must name every one of them with the
# function, file and line addr2line gives for the unstripped copy; the
# folded profile, the flame graph and "traceprof compare" (on requests made
# up for its samples, rolled up before the naming) must show the names; a
# second run, and
# one with the unstripped copy, change nothing; the agent's later inserts
# keep the names. Refused with the documented status: a build id nothing
# has, no build id, not ELF, corrupt ELF files, a path that names another
# build id, the reader role; a symbol name that is not UTF-8 leaves its
# frames unnamed.
# usage: run_symbols_add_test.sh TRACEPROF_DB AGENT TRACEPROF CC SOURCE CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 tp=$3 cc=$4 src=$5 cluster=$6
. "$(dirname "$0")/lib.sh"
needs_bpf
needs_cgroup traceprof-symbols-test
command -v objcopy >/dev/null && command -v addr2line >/dev/null ||
	{ echo "skip: needs objcopy and addr2line (binutils)"; exit 77; }
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_symbols)

# The program, its debug file under /.build-id/xx/yyyy.debug, its stripped
# copy. Frame pointers on, so that the sampler's frame-pointer walk reaches
# main whatever unwinder this build has: the frames, not the walk, are tested.
mkdir -p "$work/bin" "$work/full"
"$cc" -O2 -g -fno-omit-frame-pointer -o "$work/full/symtest" "$src"
bid=$(readelf -n "$work/full/symtest" | sed -n 's/^ *Build ID: *//p')
[ -n "$bid" ] || fail "the test program has no build id"
dbg=$work/debug/.build-id/${bid:0:2}/${bid:2}.debug
mkdir -p "$(dirname "$dbg")"
objcopy --only-keep-debug "$work/full/symtest" "$dbg"
strip -o "$work/bin/symtest" "$work/full/symtest"

# sample_run SECONDS: the stripped program under the agent at 99 Hz
sample_run() {
	start_agent agent "$agent" --db "$(as_role writer)" --target "cgroup:$cg" --frequency 99 --window 1s \
		--control-listen '' --otlp-grpc '' --otlp-http ''
	(
		echo "$BASHPID" >"$cg/cgroup.procs"
		exec "$work/bin/symtest" "$1" >/dev/null
	) || fail "the test program failed"
	kill -TERM "$agent_pid"
	wait "$agent_pid" || fail "the agent exited with status $?"
}
folded() { "$tp" profile --db "$(as_role reader)" --service symtest --since 1h --format folded; }
# the profile's samples and CPU milliseconds in all: the folded text rounds
# each line to a microsecond, so its lines' sum moves when lines merge
total() {
	q "SELECT sum(samples) || ' ' || round(sum(cpu_ms)) FROM traceprof.service_folded('symtest', now() - interval '1 hour', now())"
}
# every stored frame of the build, as "address name file:line" (the file's
# basename; "UNKNOWN ?:0" while unnamed)
frames() {
	q "SELECT fr.address || ' ' || CASE WHEN fn.kind = 2 THEN 'UNKNOWN ?:0' ELSE
	          fn.name || ' ' || coalesce(regexp_replace(fr.file, '.*/', ''), '?') || ':' || coalesce(fr.line, 0) END
	     FROM traceprof.frames fr JOIN traceprof.functions fn USING (function_id)
	    WHERE fr.build_id = '$bid' ORDER BY fr.address"
}
# a digest of the dictionaries the command may change
digest() {
	q "SELECT md5((SELECT string_agg(frame_id || '|' || function_id || '|' || coalesce(file, '') || '|' || coalesce(line, 0), ',' ORDER BY frame_id) FROM traceprof.frames)
	              || (SELECT string_agg(stack_id || '|' || function_ids::text, ',' ORDER BY stack_id) FROM traceprof.stacks)
	              || (SELECT count(*) FROM traceprof.functions))"
}
# symbols EXPECTED_STATUS ARGS...: runs "traceprof-db symbols ARGS", its output in $out
symbols() {
	local want=$1 st=0
	shift
	out=$("$tpdb" symbols "$@" 2>&1) || st=$?
	echo "$out" | sed 's/^/   /'
	[ "$st" -eq "$want" ] || fail "symbols $*: exit status $st, expected $want"
}

sample_run 3
before=$(folded)
echo "$before" | head -3
grep -q 'symtest+0x' <<<"$before" || fail "the stripped program's frames are not stored unnamed"
! grep -q 'symtest_' <<<"$before" || fail "the stripped program's frames are named before the debug file is added"
unnamed=$(q "SELECT count(*) FROM traceprof.frames fr JOIN traceprof.functions fn USING (function_id)
              WHERE fr.build_id = '$bid' AND fn.kind = 2")
[ "$unnamed" -ge 2 ] || fail "only $unnamed unnamed frames of the build"
echo "ok: $unnamed frames of build $bid stored unnamed"

# Requests for a comparison (the program serves none): ten slow ones on
# the program's stacks, ten fast ones on its root frame alone, rolled up,
# so that naming must also un-roll the minutes that counted the old names.
q "WITH src AS (SELECT min(source_id) AS id FROM traceprof.sources WHERE service = 'symtest'),
        st AS (SELECT array_agg(DISTINCT u.s) AS ids FROM traceprof.samples sm
                 JOIN traceprof.sources so USING (source_id), unnest(sm.stacks) AS u(s)
                WHERE so.service = 'symtest'),
        root AS (INSERT INTO traceprof.stacks (stack_id, frame_ids)
                 SELECT 4242, ARRAY[min(frame_ids[1])] FROM traceprof.stacks
                 ON CONFLICT DO NOTHING RETURNING stack_id),
        req AS (INSERT INTO traceprof.requests (start_time, source_id, trace_id, span_id, duration_us, status_code)
                SELECT date_trunc('minute', now()) - interval '3 minutes' + i * interval '2 seconds', src.id,
                       md5('symtest' || i)::uuid, i, CASE WHEN i % 2 = 0 THEN 2000000 ELSE 10000 END, 200
                  FROM src, generate_series(1, 20) i RETURNING 1)
   INSERT INTO traceprof.samples (bucket, source_id, trace_id, span_id, hz, stacks)
   SELECT date_trunc('minute', now()) - interval '3 minutes' + i * interval '2 seconds', src.id,
          md5('symtest' || i)::uuid, i, 99, CASE WHEN i % 2 = 0 THEN st.ids ELSE '{4242}' END
     FROM src, st, generate_series(1, 20) i" >/dev/null
q "SELECT traceprof.refresh_rollups_range(now() - interval '10 minutes', date_trunc('minute', now()))" >/dev/null
compare() {
	"$tp" compare --db "$(as_role reader)" --service symtest --since 15m \
		--cohort-a 'duration > 1s' --cohort-b 'duration < 100ms' "$@"
}
before=$(folded)
total_before=$(total)
cmp_before=$(compare)
grep -q 'symtest+0x' <<<"$cmp_before" || fail "the comparison does not show the unnamed frames"

# Refusals first: none may change anything.
d0=$(digest)
"$tpdb" symbols --help | grep -q 'usage: traceprof-db symbols add' || fail "symbols --help"
symbols 2 add --db "$conn"
symbols 2 --db "$conn" remove "$dbg"
printf 'not an ELF file\n' >"$work/text"
symbols 1 add --db "$conn" "$work/text"
grep -q 'not an ELF file' <<<"$out" || fail "no 'not an ELF file' message"
head -c 200 "$work/full/symtest" >"$work/truncated"
symbols 1 add --db "$conn" "$work/truncated"
# section header table far past the end, then every header byte scrambled
cp "$dbg" "$work/bad-shoff"
printf '\xff\xff\xff\xff\xff\xff\x00\x00' | dd of="$work/bad-shoff" bs=1 seek=40 conv=notrunc status=none
symbols 1 add --db "$conn" "$work/bad-shoff"
cp "$dbg" "$work/scrambled"
head -c 4096 /dev/urandom | dd of="$work/scrambled" bs=1 seek=16 conv=notrunc status=none
st=0
"$tpdb" symbols add --db "$conn" "$work/scrambled" >/dev/null 2>&1 || st=$?
[ "$st" -eq 1 ] || [ "$st" -eq 4 ] || fail "a scrambled ELF header: status $st, expected 1 or 4 (no crash)"
"$cc" -O2 -g -DSYMTEST_OTHER_BUILD -o "$work/other" "$src"
symbols 4 add --db "$conn" "$work/other"
grep -q 'no stored frame has this build id' <<<"$out" || fail "no 'no stored frame' message"
"$cc" -O2 -g -Wl,--build-id=none -o "$work/noid" "$src"
symbols 1 add --db "$conn" "$work/noid"
grep -q 'no GNU build id' <<<"$out" || fail "no 'no GNU build id' message"
mkdir -p "$work/debug/.build-id/00"
cp "$dbg" "$work/debug/.build-id/00/0000.debug"
symbols 1 add --db "$conn" "$work/debug/.build-id/00/0000.debug"
symbols 3 add --db "$(as_role reader)" "$dbg"
[ "$(digest)" = "$d0" ] || fail "a refused run changed the store"
echo "ok: refusals change nothing"

# A symbol name the store would refuse (not UTF-8, on symtest_leaf's
# address, where it wins over the local symbol) leaves those frames
# unnamed; the others are named, and the file counts as done.
read -r leaf size < <(nm -S "$work/full/symtest" | awk '$4 == "symtest_leaf" { print $1, $2 }')
text=$(readelf -SW "$work/full/symtest" | awk '$2 == ".text" { print $4 }')
objcopy --add-symbol "$(printf 'bad\xffname')=.text:$(printf '0x%x' $((0x$leaf - 0x$text))),function,global" \
	"$work/full/symtest" "$work/badname"
symbols 0 add --db "$conn" "$work/badname"
in_leaf="fr.address >= $((0x$leaf)) AND fr.address < $((0x$leaf + 0x$size))"
check "frames in symtest_leaf, all still unnamed" "t" \
	"SELECT count(*) > 0 AND bool_and(fn.kind = 2) FROM traceprof.frames fr JOIN traceprof.functions fn USING (function_id)
	  WHERE fr.build_id = '$bid' AND $in_leaf"
check "frames elsewhere named" "0" \
	"SELECT count(*) FROM traceprof.frames fr JOIN traceprof.functions fn USING (function_id)
	  WHERE fr.build_id = '$bid' AND NOT ($in_leaf) AND fn.kind = 2"

# The debug file names every frame as addr2line does with the unstripped
# copy (the outermost function of an inlined chain, at the call's line; an
# address addr2line cannot name either, a PLT stub, stays unnamed; a
# function without line information, _start, is stored without a file). A file
# of no match among the files: status 4, the others still done. (Those
# outside symtest_leaf were named above, with the same names.)
symbols 4 add --db "$conn" "$dbg" "$work/other"
expect=$(frames | while read -r addr _; do
	printf '%s ' "$addr"
	addr2line -f -i -e "$work/full/symtest" "$(printf '0x%x' "$addr")" | tail -2 | tr '\n' ' ' |
		awk '$1 == "??" { print "UNKNOWN ?:0"; next }
		     { f = $2; sub(/.*\//, "", f); if (f ~ /^\?\?:/) f = "?:0"; print $1, f }'
done)
left=$(grep -c UNKNOWN <<<"$expect" || true)
grep -q " $left still unknown" <<<"$out" || fail "not every frame was named"
got=$(frames)
echo "$got" | sed 's/^/   /'
[ "$got" = "$expect" ] || fail "frames differ from addr2line: expected
$expect"
echo "ok: every frame named with addr2line's function, file and line"
after=$(folded)
echo "$after" | head -3
! grep -q 'symtest+0x' <<<"$after" || fail "the folded profile still has unnamed frames"
grep -q ';main;symtest_outer;symtest_' <<<"$after" || fail "the folded profile does not read main;symtest_outer;..."
[ "$(total)" = "$total_before" ] || fail "naming changed the profile's samples or CPU time: $total_before, now $(total)"
"$tp" profile --db "$(as_role reader)" --service symtest --since 1h --format svg -o "$work/fg.svg"
grep -q 'symtest_outer' "$work/fg.svg" || fail "the flame graph does not show symtest_outer"
cmp_after=$(compare)
echo "$cmp_after" | head -8
! grep -q 'symtest+0x' <<<"$cmp_after" || fail "the comparison still shows unnamed frames"
grep -q 'symtest_outer' <<<"$cmp_after" || fail "the comparison does not show symtest_outer"
[ "$(compare --exact | grep symtest_outer)" = "$(grep symtest_outer <<<"$cmp_after")" ] ||
	fail "the comparison from the rollup and from the raw tables differ"
q "SELECT traceprof.refresh_rollups_range(now() - interval '10 minutes', date_trunc('minute', now()))" >/dev/null
[ "$(compare | grep symtest_outer)" = "$(grep symtest_outer <<<"$cmp_after")" ] ||
	fail "the comparison differs once the minutes are rolled again"
echo "ok: the folded profile, the flame graph and the comparison show the names"

# Again, and with the unstripped binary: nothing changes.
d1=$(digest)
symbols 0 add --db "$conn" "$dbg" "$work/full/symtest"
grep -q '0 named now' <<<"$out" || fail "a second run named frames again"
[ "$(digest)" = "$d1" ] || fail "a second run changed the store"
echo "ok: a second run changes nothing"

# The agent goes on inserting the same frames (same ids) and new stacks:
# the names stay, and every stack's function ids agree with its frames.
named_ids=$(q "SELECT string_agg(frame_id::text, ',') FROM traceprof.frames fr JOIN traceprof.functions fn
                USING (function_id) WHERE fr.build_id = '$bid' AND fn.kind = 0")
sample_run 2
check "named frames still named after the agent ran again" 0 \
	"SELECT count(*) FROM traceprof.frames fr JOIN traceprof.functions fn USING (function_id)
	  WHERE fr.frame_id IN ($named_ids) AND fn.kind <> 0"
check "stacks whose function ids disagree with their frames" 0 \
	"SELECT count(*) FROM traceprof.stacks st
	  WHERE st.function_ids <> (SELECT array_agg(coalesce(f.function_id, 0) ORDER BY x.ord)
	                              FROM unnest(st.frame_ids) WITH ORDINALITY AS x(frame_id, ord)
	                              LEFT JOIN traceprof.frames f ON f.frame_id = x.frame_id)"
echo "ok: symbols add named the stripped build's frames"
