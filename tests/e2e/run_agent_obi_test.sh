#!/usr/bin/env bash
# OBI's trace map as a context source (docs/agent.md, "OBI's trace map"):
# a stand-in (obi_workload.c) pins a map of the layout OpenTelemetry eBPF
# Instrumentation pins (traces_ctx_v1) on a private BPF filesystem and
# sets its threads' entries while they serve requests, as OBI does. The
# agent, given the pin, must tag the samples of a thread without a thread
# context with the map's trace id, only while the entry is there; a thread
# that also has an OTEP 4947 context (the SDK) keeps the SDK's. A map of
# another layout is refused with a warning and a counter, and tags nothing.
# Without --obi-map the agent finds a pin in a directory of /sys/fs/bpf.
# usage: run_agent_obi_test.sh TRACEPROF_DB AGENT OBI_WORKLOAD CLUSTER_DIR
set -euo pipefail
tpdb=$1 agent=$2 workload=$3 cluster=$4
. "$(dirname "$0")/lib.sh"
needs_bpf
needs_cgroup traceprof-obi-test
mkdir "$work/bpf"
mount -t bpf bpf "$work/bpf" 2>/dev/null || { echo "skip: cannot mount a BPF filesystem"; exit 77; }
auto_dir=/sys/fs/bpf/traceprof-obi-test-$$ auto_mounted=
obi_cleanup() {
	rm -rf "$auto_dir" 2>/dev/null || true
	[ -z "$auto_mounted" ] || umount /sys/fs/bpf 2>/dev/null || true
	umount "$work/bpf" 2>/dev/null || true
	cleanup
}
trap obi_cleanup EXIT
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_agent_obi)
requests=10

# 1. A map of another layout (16-byte values): refused, counted, nothing tagged
mkdir "$work/bpf/bad"
"$workload" pin "$work/bpf/bad/traces_ctx_v1" bad || fail "cannot pin the map"
start_agent bad "$agent" --db "$(as_role writer)" --target "cgroup:$cg" --otlp-grpc "" \
	--otlp-http "" --control-listen "" --obi-map "$work/bpf/bad/traces_ctx_v1" \
	--stats-file "$work/bad.stats"
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $? with a map of another layout"
grep -q 'OBI trace map refused' "$work/bad.log" || fail "no warning about the refused map"
grep -qx 'obi_map_refused=1' "$work/bad.stats" || fail "the refused map is not counted"
grep -qx 'obi_map_installed=0' "$work/bad.stats" || fail "a map of another layout was installed"
echo "ok: a map of another layout is refused, with a warning and a counter"

# 2. OBI's layout: the threads' entries tag their samples
"$workload" pin "$work/bpf/traces_ctx_v1" || fail "cannot pin the map"
start_agent obi "$agent" --db "$(as_role writer)" --target "cgroup:$cg" --frequency 99 \
	--otlp-grpc "" --otlp-http "" --control-listen "" --obi-map "$work/bpf/traces_ctx_v1" \
	--stats-file "$work/obi.stats"
grep -q 'OBI trace map found' "$work/obi.log" || fail "the agent did not find the pinned map"
(
	echo "$BASHPID" >"$cg/cgroup.procs"
	exec "$workload" run "$work/bpf/traces_ctx_v1" "$requests" 7 >"$work/obi.out"
) || fail "the workload failed"
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
grep -E '^(obi_map_[a-z]*|bpf_ctx_obi|bpf_tagged)=' "$work/obi.stats" || true
grep -qx 'obi_map_installed=1' "$work/obi.stats" || fail "the map is not installed"
[ "$(sed -n 's/^bpf_ctx_obi=//p' "$work/obi.stats")" -gt 0 ] || fail "no sample tagged from the map"

psql "$conn" -qX -v ON_ERROR_STOP=1 -c "CREATE TABLE truth (obi text, sdk text)" >/dev/null
sed -n 's/^req obi=\([0-9a-f]*\) sdk=\([0-9a-f-]*\)$/\1,\2/p' "$work/obi.out" |
	psql "$conn" -qX -v ON_ERROR_STOP=1 -c "\\copy truth FROM STDIN WITH (FORMAT csv)" >/dev/null
[ "$(q "SELECT count(*) FROM truth")" = $((requests * 2)) ] || fail "the workload did not report every request"
# samples per trace id of the workload (byte 0 0x0b, byte 1 the tag 7)
per_trace="SELECT replace(trace_id::text, '-', '') AS h,
                  sum(coalesce((SELECT sum(c) FROM unnest(counts) c), cardinality(stacks)))::int AS n
             FROM traceprof.samples WHERE trace_id IS NOT NULL GROUP BY 1"
q "SELECT 'thread ' || substr(h, 6, 1) || ', ' || CASE substr(h, 8, 1) WHEN '1' THEN 'OBI' ELSE 'SDK' END
          || ' ids: ' || count(*) || ' traces, ' || sum(n) || ' samples'
     FROM ($per_trace) x WHERE h LIKE '0b07%' GROUP BY substr(h, 6, 1), substr(h, 8, 1) ORDER BY 1" |
	sed 's/^/   /'
missing=$(q "SELECT count(*) FROM truth t WHERE t.sdk = '-'
               AND NOT EXISTS (SELECT FROM ($per_trace) x WHERE x.h = t.obi)")
[ "$missing" = 0 ] || fail "$missing of thread 1's $requests requests have no sample tagged with OBI's trace id"
obi_n=$(q "SELECT coalesce(sum(x.n), 0) FROM ($per_trace) x JOIN truth t ON t.obi = x.h AND t.sdk = '-'")
# 80 ms of CPU a request at 99 Hz: about 8 samples each
[ "$obi_n" -ge $((requests * 5)) ] || fail "only $obi_n samples tagged from the map for $requests requests of 80 ms"
sdk_missing=$(q "SELECT count(*) FROM truth t WHERE t.sdk <> '-'
                   AND NOT EXISTS (SELECT FROM ($per_trace) x WHERE x.h = t.sdk)")
[ "$sdk_missing" = 0 ] || fail "$sdk_missing of thread 2's requests have no sample with the SDK's trace id"
shadowed=$(q "SELECT count(*) FROM ($per_trace) x JOIN truth t ON t.obi = x.h AND t.sdk <> '-'")
[ "$shadowed" = 0 ] || fail "$shadowed of thread 2's OBI trace ids tagged samples: the SDK's context must win"
stray=$(q "SELECT count(*) FROM ($per_trace) x WHERE NOT EXISTS
             (SELECT FROM truth t WHERE t.obi = x.h OR t.sdk = x.h)")
[ "$stray" = 0 ] || fail "$stray trace ids on samples that the workload never set"
untagged=$(q "SELECT coalesce(sum(coalesce((SELECT sum(c) FROM unnest(counts) c), cardinality(stacks))), 0)
                FROM traceprof.samples WHERE trace_id IS NULL")
# 40 ms between requests on each thread, and 2 s before them
[ "$untagged" -ge $((requests * 2 * 2)) ] || fail "only $untagged untagged samples: time outside requests was tagged"
echo "   untagged samples (outside requests): $untagged"
echo "ok: OBI's map tags threads without a thread context, only during their requests; the SDK's context wins"

# 3. The default (auto): a pin in a directory below /sys/fs/bpf is found
# (the BPF filesystem mounted there for the test when the machine has none)
if ! mountpoint -q /sys/fs/bpf; then
	mount -t bpf bpf /sys/fs/bpf || fail "cannot mount a BPF filesystem on /sys/fs/bpf"
	auto_mounted=1
fi
mkdir "$auto_dir"
"$workload" pin "$auto_dir/traces_ctx_v1" || fail "cannot pin the map under /sys/fs/bpf"
start_agent auto "$agent" --db "$(as_role writer)" --target "cgroup:$cg" --otlp-grpc "" \
	--otlp-http "" --control-listen "" --stats-file "$work/auto.stats"
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "the agent exited with status $?"
grep -q "OBI trace map found: .* path=$auto_dir/traces_ctx_v1 " "$work/auto.log" ||
	grep -q "OBI trace map found: .* path=/sys/fs/bpf/traces_ctx_v1 " "$work/auto.log" ||
	fail "the default obi-map did not find the pin under /sys/fs/bpf"
grep -qx 'obi_map_installed=1' "$work/auto.stats" || fail "the map found by default is not installed"
echo "ok: the default obi-map finds OBI's pin in a directory of /sys/fs/bpf"
