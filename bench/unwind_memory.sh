#!/usr/bin/env bash
# unwind_memory.sh - the agent's memory when every distinct executable file
# of the machine gets sampled: batches of BATCH files (every 64-bit ELF
# shared object and executable under DIRS), each mapped by a process that
# keeps a CPU busy for BATCH_SECONDS (bench/unwind/map_files.c), one batch
# after another, while one agent samples the whole machine (all
# processes, FREQUENCY Hz, unwind-table-bytes TABLE_BYTES). So the agent
# builds and places the table of every file, and must evict the tables of
# batches that ended to make room for the next ones.
#
# Prints, at the end: the agent's peak RSS (VmHWM), its BPF map memory
# (memlock of its maps: the rows area is most of it), its CPU time, and
# its unwind counters (tables placed, evictions, no room, build failures).
# Never fails on the figures.
#
# usage: sudo bench/unwind_memory.sh
# environment: DIRS ("/usr/lib/x86_64-linux-gnu /usr/bin /usr/sbin"),
# BATCH (100), BATCH_SECONDS (2), FREQUENCY (99), TABLE_BYTES (30M),
# TRACEPROF_BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRACEPROF_BUILD_DIR:-$root/build}
dirs=${DIRS:-/usr/lib/x86_64-linux-gnu /usr/bin /usr/sbin}
batch=${BATCH:-100} secs=${BATCH_SECONDS:-2} hz=${FREQUENCY:-99} table=${TABLE_BYTES:-30M}
. "$root/bench/lib.sh"
bench_setup unwmem
# every 64-bit ELF file once (by device and inode), largest first does not matter
# shellcheck disable=SC2086
python3 - $dirs >"$work/files" <<'PY'
import os, sys
seen = set()
for d in sys.argv[1:]:
    for dp, _, fs in os.walk(d):
        for f in fs:
            p = os.path.join(dp, f)
            try:
                st = os.stat(p)
                if not os.path.isfile(p) or (st.st_dev, st.st_ino) in seen:
                    continue
                with open(p, "rb") as fh:
                    if fh.read(5) != b"\x7fELF\x02":
                        continue
            except OSError:
                continue
            seen.add((st.st_dev, st.st_ino))
            print(p)
PY
nfiles=$(wc -l <"$work/files")
ports=()
for _ in 1 2 3; do ports+=("$(free_port)"); done
"$build/agent/traceprof-agent" --db "$conn" --frequency "$hz" --unwind-table-bytes "$table" \
	--otlp-grpc "127.0.0.1:${ports[0]}" --otlp-http "127.0.0.1:${ports[1]}" \
	--control-listen "127.0.0.1:${ports[2]}" --stats-file "$work/stats" --spool-dir '' \
	2>"$work/agent.log" &
agent=$!
sleep 3
t0=$(date +%s)
split -l "$batch" "$work/files" "$work/batch."
for b in "$work"/batch.*; do
	"$build/bench/unwind_map_files" "$secs" <"$b" 2>>"$work/map.log"
done
t1=$(date +%s)
kill -USR1 "$agent"
sleep 1
rss=$(awk '/^VmHWM/ { print $2 }' /proc/"$agent"/status)
cur=$(awk '/^VmRSS/ { print $2 }' /proc/"$agent"/status)
maps=$(bpf_map_kb "$agent")
kill -TERM "$agent"
wait "$agent" || true
mapped=$(awk '{ m += $2; s += $5 } END { print m + 0, s + 0 }' "$work/map.log")
echo "unwind memory: $nfiles ELF files under $dirs, mapped (and skipped) $mapped, in batches of $batch for $secs s each ($((t1 - t0)) s); agent at $hz Hz, unwind-table-bytes $table"
echo
echo "| figure | value |"
echo "|---|---:|"
echo "| agent peak RSS (VmHWM) | $((rss / 1024)) MB |"
echo "| agent RSS at the end | $((cur / 1024)) MB |"
echo "| agent BPF map memory (rows area and the rest) | $((maps / 1024)) MB |"
grep -E '^(cpu_user_s|cpu_sys_s|unwind_tables_placed|unwind_tables|unwind_rows|unwind_rows_cap|unwind_evictions|unwind_no_room|unwind_too_large|unwind_maps_placed|unwind_maps_no_table|unwind_maps_dropped|unwind_gave_up|cfi_builds|cfi_build_failures|cfi_refused|cfi_queue_full|bpf_uw_stacks|bpf_uw_root)=' \
	"$work/stats" | awk -F= '{ printf "| %s | %s |\n", $1, $2 }'
