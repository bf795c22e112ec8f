#!/usr/bin/env bash
# End to end: traceprof-controller in local mode against a real PostgreSQL.
# A user drops, edits and removes manifests in a directory and reads the
# trigger table and the status file: a new file is an Active row within a
# second; an edit keeps the id and updates the spec; a removed file ends its
# trigger ('manifest removed'); a 1 s timeout expires; a fourth and fifth
# trigger for one service are Rejected; an invalid file is reported while
# the others work; claims show up as collected/max and trace ids.
# usage: run_controller_local_test.sh TRACEPROF_DB TRACEPROF_CONTROLLER CLUSTER_DIR
set -euo pipefail
tpdb=$1 ctl=$2 cluster=$3
. "$(dirname "$0")/lib.sh"
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_controller)
# the controller works as the controller role; checks read as the owner
ctl_conn=$(as_role controller)
dir=$work
log="$dir/controller.log"
mkdir "$dir/triggers"
status="$dir/triggers/.traceprof-status.json"
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$dir"
}
trap cleanup EXIT
ms() { awk -v s="$1" 'BEGIN { printf "%d", s * 1000 }'; } # seconds (may be fractional) -> ms
# wait_for SECONDS SQL EXPECTED: polls until the query gives EXPECTED.
wait_for() {
	local until=$(($(now_ms) + $(ms "$1"))) got
	while :; do
		got=$(q "$2")
		[ "$got" = "$3" ] && return 0
		[ "$(now_ms)" -gt "$until" ] && {
			echo "  last value: '$got' (want '$3') for: $2"
			return 1
		}
		sleep 0.05
	done
}
# wait_json SECONDS [jq options] FILTER: polls until FILTER holds on the status file.
wait_json() {
	local until=$(($(now_ms) + $(ms "$1")))
	shift
	while ! jq -e "$@" "$status" >/dev/null 2>&1; do
		[ "$(now_ms)" -gt "$until" ] && return 1
		sleep 0.1
	done
}
put() { # put FILE < content: written elsewhere and renamed in, as editors and git do
	cat >"$dir/tmp.yaml"
	mv "$dir/tmp.yaml" "$dir/triggers/$1"
}
phase() { q "SELECT phase FROM traceprof.trace_profile_triggers WHERE name = '$1' ORDER BY created_at DESC LIMIT 1"; }
tid() { q "SELECT trigger_id FROM traceprof.trace_profile_triggers WHERE name = '$1' ORDER BY created_at DESC LIMIT 1"; }

# Usage errors name the problem and exit 2.
usage() { # usage WANT_EXIT PATTERN args...
	local want=$1 pattern=$2 out rc=0
	shift 2
	out=$("$ctl" "$@" 2>&1 </dev/null) || rc=$?
	if [ "$rc" -eq "$want" ] && grep -q -- "$pattern" <<<"$out"; then ok; else bad "$* -> exit $rc, output: $out"; fi
}
usage 0 "usage: traceprof-controller" --help
usage 2 "usage: traceprof-controller"
usage 2 "'/nonexistent-dir' is not a directory" --triggers-dir /nonexistent-dir
usage 2 "--interval 'soon' is not a duration" --triggers-dir "$dir/triggers" --interval soon
usage 2 "--agent 'localhost' is not host:port" --triggers-dir "$dir/triggers" --agent localhost
usage 2 "unexpected argument 'extra'" --triggers-dir "$dir/triggers" extra
usage 1 "database unreachable" --triggers-dir "$dir/triggers" --db "host=/nonexistent-socket-dir" --once

# --once on an empty directory: nothing to do, exit 0.
if "$ctl" --triggers-dir "$dir/triggers" --db "$ctl_conn" --once 2>>"$log"; then ok; else bad "--once on an empty directory failed"; fi

"$ctl" --triggers-dir "$dir/triggers" --db "$ctl_conn" --interval 1s -v 2>>"$log" &
pid=$!
sleep 1.5 # started and idle

# 1. A new manifest is an Active row within a second (1.5 s with the polling here).
t0=$(now_ms)
manifest slow-payments payment-svc "match: {minDuration: 200ms, status: 5xx, route: /api/pay*}" \
	"maxRequests: 3" | put slow-payments.yaml
if wait_for 1.5 "SELECT phase FROM traceprof.trace_profile_triggers WHERE name = 'slow-payments'" Active; then
	ok
	echo "new manifest -> Active row in $(($(now_ms) - t0)) ms"
else bad "new manifest not Active within 1.5 s"; fi
id1=$(tid slow-payments)
[[ "$id1" =~ ^default/slow-payments/[0-9a-f]{8}$ ]] && ok || bad "trigger id '$id1' is not namespace/name/8 hex"
[ "$(q "SELECT spec->'match'->>'minDuration' || ' ' || (spec->>'maxRequests') || ' ' || frequency_hz || ' ' || (deadline - created_at)::text FROM traceprof.trace_profile_triggers WHERE trigger_id = '$id1'")" = "200ms 3 99 00:05:00" ] &&
	ok || bad "spec, defaults and deadline of the new row"

# 2. Claims: collected/max and the trace ids in the status file.
q "SELECT traceprof.claim_request('$id1', '0123456789abcdef0123456789abcdef')" >/dev/null
if wait_json 3 --arg id "$id1" '.triggers[] | select(.id == $id) |
	.collectedRequests == 1 and .maxRequests == 3 and .traceIDs == ["0123456789abcdef0123456789abcdef"] and .phase == "Active" and .file == "slow-payments.yaml"'; then
	ok
else bad "status file lacks the claim: $(cat "$status")"; fi

# 3. An edit keeps the id and the progress and updates the spec.
manifest slow-payments payment-svc "match: {minDuration: 500ms, status: 5xx, route: /api/pay*}" \
	"maxRequests: 5" | put slow-payments.yaml
if wait_for 2 "SELECT spec->'match'->>'minDuration' || ' ' || max_requests || ' ' || collected_requests FROM traceprof.trace_profile_triggers WHERE trigger_id = '$id1'" "500ms 5 1"; then ok; else bad "edit not applied in place"; fi
[ "$(q "SELECT count(*) FROM traceprof.trace_profile_triggers WHERE name = 'slow-payments'")" = 1 ] && ok || bad "an edit made a second row"

# 4. maxRequests may not drop below what was collected: it completes instead.
q "SELECT traceprof.claim_request('$id1', '0123456789abcdef0123456789abcde2')" >/dev/null
manifest slow-payments payment-svc "match: {minDuration: 500ms, status: 5xx, route: /api/pay*}" \
	"maxRequests: 1" | put slow-payments.yaml
if wait_for 2 "SELECT phase || ' ' || collected_requests || '/' || max_requests FROM traceprof.trace_profile_triggers WHERE trigger_id = '$id1'" "Completed 2/2"; then ok; else bad "lowered maxRequests"; fi

# 5. Removing the file of an Active trigger fails it; re-adding is a new trigger.
manifest checkout checkout-svc | put checkout.yaml
wait_for 2 "SELECT phase FROM traceprof.trace_profile_triggers WHERE name = 'checkout'" Active && ok || bad "checkout not Active"
id2=$(tid checkout)
rm "$dir/triggers/checkout.yaml"
if wait_for 2 "SELECT phase || ':' || reason FROM traceprof.trace_profile_triggers WHERE trigger_id = '$id2'" "Failed:manifest removed"; then ok; else bad "removed manifest"; fi
manifest checkout checkout-svc | put checkout.yaml
if wait_for 2 "SELECT count(*) || ' ' || count(*) FILTER (WHERE phase = 'Active') FROM traceprof.trace_profile_triggers WHERE name = 'checkout'" "2 1"; then ok; else bad "re-added manifest is not a new Active trigger"; fi
[ "$(tid checkout)" != "$id2" ] && ok || bad "re-added manifest kept the old id"
# A Completed trigger's file removed: the row keeps its phase and data.
rm "$dir/triggers/slow-payments.yaml"
if wait_for 2 "SELECT phase || ':' || reason || ':' || cardinality(trace_ids) FROM traceprof.trace_profile_triggers WHERE trigger_id = '$id1'" "Completed:manifest removed:2"; then ok; else bad "completed trigger's row after removal"; fi

# 6. A 1 s timeout expires (expire_triggers on the controller's tick).
manifest quick quick-svc "timeout: 1s" | put quick.yaml
if wait_for 4 "SELECT phase || ':' || reason FROM traceprof.trace_profile_triggers WHERE name = 'quick'" "Expired:deadline passed"; then ok; else bad "1s timeout did not expire"; fi

# 7. Five triggers for one service at once: three Active, two Rejected.
for i in 1 2 3 4 5; do manifest "flood-$i" flood-svc >"$dir/triggers/flood-$i.yaml"; done
if wait_for 3 "SELECT string_agg(name || '=' || phase, ' ' ORDER BY name) FROM traceprof.trace_profile_triggers WHERE service = 'flood-svc'" \
	"flood-1=Active flood-2=Active flood-3=Active flood-4=Rejected flood-5=Rejected"; then ok; else bad "per-service limit"; fi
[ "$(q "SELECT DISTINCT reason FROM traceprof.trace_profile_triggers WHERE phase = 'Rejected' AND service = 'flood-svc'")" = "service flood-svc already has 3 active triggers" ] &&
	ok || bad "rejection reason"

# 8. An invalid file next to valid ones: reported with file, field and why; the others work.
{
	manifest broken broken-svc "sampling: {frequencyHz: 500}"
	echo "---"
	manifest also-good good-svc
} | put broken.yaml
manifest good good-svc | put good.yaml
if wait_for 2 "SELECT string_agg(name || '=' || phase, ' ' ORDER BY name) FROM traceprof.trace_profile_triggers WHERE service IN ('good-svc', 'broken-svc')" "also-good=Active good=Active"; then ok; else bad "valid manifests next to an invalid one"; fi
sleep 1.2
if jq -e '.errors | length == 1 and (.[0].file == "broken.yaml") and (.[0].document == 1) and (.[0].message | contains("spec.sampling.frequencyHz: must be between 1 and 100, got 500"))' "$status" >/dev/null; then ok; else bad "status file errors: $(jq -c .errors "$status")"; fi
grep -q 'invalid manifest: broken.yaml: document 1: spec.sampling.frequencyHz' "$log" && ok || bad "invalid manifest not logged"
[ "$(grep -c 'invalid manifest: broken.yaml' "$log")" = 1 ] && ok || bad "the same error logged more than once"
# An invalid edit of an Active trigger keeps the trigger as it was.
manifest good good-svc "maxRequests: many" | put good.yaml
sleep 1.5
[ "$(q "SELECT phase || ' ' || max_requests FROM traceprof.trace_profile_triggers WHERE name = 'good'")" = "Active 10" ] && ok || bad "an invalid edit changed the trigger"
manifest good good-svc | put good.yaml
# A file that is not YAML at all: nothing is removed while it cannot be read.
printf 'apiVersion: [unclosed\n' | put garbage.yaml
rm "$dir/triggers/good.yaml"
sleep 1.5
[ "$(phase good)" = Active ] && ok || bad "a trigger was removed while a manifest file was unreadable"
rm "$dir/triggers/garbage.yaml"
if wait_for 2 "SELECT phase FROM traceprof.trace_profile_triggers WHERE name = 'good' ORDER BY created_at DESC LIMIT 1" Failed; then ok; else bad "removal after the unreadable file is gone"; fi

# 9. The status file: valid JSON, one entry per current trigger, phases as in the table.
if jq -e '(.database.reachable == true) and ([.triggers[] | select(.service == "flood-svc") | .phase] | sort == ["Active","Active","Active","Rejected","Rejected"]) and ([.triggers[] | select(.name == "quick")][0].phase == "Expired")' "$status" >/dev/null; then ok; else bad "status file content: $(cat "$status")"; fi
grep -q 'trigger Rejected id=default/flood-4/' "$log" && ok || bad "transition to Rejected not logged"

# 10. --once with an invalid manifest reports it and exits 1; SIGTERM stops the daemon.
if "$ctl" --triggers-dir "$dir/triggers" --db "$ctl_conn" --once --status-file "$dir/once.json" 2>"$dir/once.log"; then
	bad "--once with an invalid manifest exited 0"
else ok; fi
grep -q 'broken.yaml: document 1: spec.sampling.frequencyHz' "$dir/once.log" && ok || bad "--once did not report the invalid manifest"
kill -TERM "$pid"
if wait "$pid"; then ok; else bad "controller exit status $? on SIGTERM"; fi
pid=

echo "$pass passed, $fail failed"
if [ "$fail" -ne 0 ]; then
	echo "--- controller log"
	tail -50 "$log"
fi
[ "$fail" -eq 0 ]
