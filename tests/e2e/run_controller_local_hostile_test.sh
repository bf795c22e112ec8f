#!/usr/bin/env bash
# End to end: the controller's local mode on a triggers directory that holds
# hostile entries, against a real PostgreSQL.
# - A symbolic link to /etc/shadow (and to a secret file) is refused and
#   never read: no byte of the target reaches the status file or the log.
# - A hard link to a secret file (not the user's own manifest) is parsed,
#   but its messages quote nothing of it; the user's own invalid manifest
#   is quoted as a short escaped excerpt.
# - A FIFO does not block the controller: a new manifest next to it is
#   Active within 2 s, and the FIFO never had a reader.
# - File names that are not UTF-8, with control characters, quotes or a
#   newline, give a status file that a JSON parser accepts and log lines
#   that stay one line.
# - A link planted at the status file's temporary name is not written
#   through.
# - A selector is kept in the stored spec.
# - 10,000 manifests (valid and invalid) in the directory: a new valid one
#   dropped in is Active within 2 s, and an unchanged file is not parsed
#   again.
# usage: run_controller_local_hostile_test.sh TRACEPROF_DB TRACEPROF_CONTROLLER CLUSTER_DIR
set -euo pipefail
tpdb=$1 ctl=$2 cluster=$3
. "$(dirname "$0")/lib.sh"
base=$("$tpdb" conninfo "$cluster" --dbname postgres)
dir=$work
pid=
export PGOPTIONS="-c client_min_messages=warning"
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$dir"
	for db in tp_e2e_hostile tp_e2e_scale; do
		psql "$base" -qX -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
	done
}
trap cleanup EXIT
# wait_for SECONDS SQL EXPECTED: polls until the query gives EXPECTED.
wait_for() {
	local until=$(($(now_ms) + $1 * 1000)) got
	while :; do
		got=$(psql "$conn" -qAtX -c "$2" 2>/dev/null || true)
		[ "$got" = "$3" ] && return 0
		[ "$(now_ms)" -gt "$until" ] && {
			echo "  last value: '$got' (want '$3') for: $2"
			return 1
		}
		sleep 0.02
	done
}
# wait_json SECONDS FILTER: polls until FILTER holds on the status file.
wait_json() {
	local until=$(($(now_ms) + $1 * 1000))
	while ! jq -e "$2" "$status" >/dev/null 2>&1; do
		[ "$(now_ms)" -gt "$until" ] && return 1
		sleep 0.1
	done
}

# ---- Part 1: hostile entries -------------------------------------------
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_hostile)
trig="$dir/triggers"
status="$trig/.traceprof-status.json"
log="$dir/controller.log"
mkdir "$trig"
chmod 755 "$dir" "$trig"
secret="$dir/secret.txt"
printf 'apiVersion: SECRET-%s\nkind: x\n' "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$secret"
chmod 600 "$secret"
secret_word=$(sed -n 's/^apiVersion: //p' "$secret")

# links planted where the status file and its temporary file go: never written through
printf 'victim\n' >"$dir/victim"
ln -s "$dir/victim" "$trig/.traceprof-status.json.tmp"
ln -s /etc/shadow "$trig/shadow.yaml"
ln -s "$secret" "$trig/secret-link.yaml"
ln "$secret" "$trig/secret-hardlink.yaml"
mkfifo "$trig/pipe.yaml"
mkdir "$trig/subdir.yaml"
# the user's own manifest with a bad key (BEL characters, 160 bytes): quoted
# as an escaped excerpt of at most 60 bytes
{
	manifest own own-svc
	printf '"%s": 1\n' "$(printf 'v1\\aX%.0s' {1..40})"
} >"$trig/own.yaml"
# names that are not UTF-8, with control characters, quotes, a newline
weird_bad=$'bad\xff\x01"q\nx.yaml'
weird_good=$'g\xc3(ood\t\\.yaml'
printf 'not: [valid\n' >"$trig/$weird_bad"
manifest weird weird-svc >"$trig/$weird_good"
# a selector next to the service: stored with the spec
manifest picky picky-svc "selector:" "  matchLabels: {app: pay, tier: \"\"}" \
	"  matchExpressions: [{key: zone, operator: In, values: [a, b]}, {key: gpu, operator: Exists}]" \
	>"$trig/picky.yaml"

"$ctl" --triggers-dir "$trig" --db "$conn" --interval 1s -v 2>"$log" &
pid=$!
if wait_for 5 "SELECT string_agg(name || '=' || phase, ' ' ORDER BY name) FROM traceprof.trace_profile_triggers" "picky=Active weird=Active"; then ok; else bad "valid manifests next to hostile entries"; fi
wait_json 3 '.manifestFiles.refusedNow == 4' && ok || bad "refusals not counted: $(jq -c .manifestFiles "$status" 2>&1)"

# the status file is valid JSON for a real parser
if python3 -m json.tool "$status" >/dev/null; then ok; else bad "status file is not valid JSON: $(head -c 2000 "$status")"; fi
err_of() { jq -r --arg f "$1" '.errors[] | select(.file == $f) | .message' "$status"; }
for f in shadow.yaml secret-link.yaml; do
	[[ "$(err_of "$f")" == "$f: refused: a symbolic link, not a regular file (never read)" ]] && ok || bad "$f: '$(err_of "$f")'"
done
[[ "$(err_of pipe.yaml)" == "pipe.yaml: refused: a FIFO, not a regular file (never read)" ]] && ok || bad "pipe.yaml: '$(err_of pipe.yaml)'"
[[ "$(err_of subdir.yaml)" == "subdir.yaml: refused: a directory, not a regular file (never read)" ]] && ok || bad "subdir.yaml: '$(err_of subdir.yaml)'"
# the hard link is parsed, but nothing of it is quoted
[[ "$(err_of secret-hardlink.yaml)" == 'secret-hardlink.yaml: apiVersion: must be traceprof.dev/v1alpha1, got (not shown)' ]] &&
	ok || bad "hard link: '$(err_of secret-hardlink.yaml)'"
# the user's own file: an escaped excerpt of at most 60 bytes
own_msg=$(err_of own.yaml)
want_own="own.yaml: (document).$(printf 'v1\\x07X%.0s' {1..15})...: unknown field (known: apiVersion, kind, metadata, spec, status)"
[[ "$own_msg" == "$want_own" ]] && ok || bad "own manifest excerpt: '$own_msg' (want '$want_own')"
# escaped names: in the errors, in the trigger's file, in the log
[[ "$(jq -r '.errors[] | select(.file | startswith("bad")) | .file' "$status")" == 'bad\xff\x01\"q\x0ax.yaml' ]] && ok ||
	bad "escaped name in errors: $(jq -c '.errors[].file' "$status")"
[[ "$(jq -r '.triggers[] | select(.name == "weird") | .file' "$status")" == 'g\xc3(ood\x09\\.yaml' ]] && ok ||
	bad "escaped name of a valid manifest: $(jq -c '.triggers[].file' "$status")"
# the selector in the stored spec
if wait_for 2 "SELECT spec->'selector' = '{\"matchLabels\": {\"app\": \"pay\", \"tier\": \"\"}, \"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"In\", \"values\": [\"a\", \"b\"]}, {\"key\": \"gpu\", \"operator\": \"Exists\"}]}'::jsonb FROM traceprof.trace_profile_triggers WHERE name = 'picky'" t; then ok; else bad "selector not in the stored spec: $(psql "$conn" -qAtX -c "SELECT spec FROM traceprof.trace_profile_triggers WHERE name = 'picky'")"; fi

# a FIFO does not block: a new manifest next to it is Active within 2 s
t0=$(now_ms)
manifest fresh fresh-svc >"$dir/fresh.tmp"
mv "$dir/fresh.tmp" "$trig/fresh.yaml"
if wait_for 2 "SELECT phase FROM traceprof.trace_profile_triggers WHERE name = 'fresh'" Active; then
	ok
	echo "new manifest next to a FIFO -> Active in $(($(now_ms) - t0)) ms"
else bad "a new manifest next to a FIFO was not Active within 2 s"; fi
# nobody ever opened the FIFO for reading: a writer finds no reader
if timeout 1 bash -c "printf x >\"$trig/pipe.yaml\"" 2>/dev/null; then
	bad "the FIFO had a reader"
else ok; fi

# nothing of /etc/shadow or of the secret in the status file or the log
sleep 1.2 # one more tick: the log and the status file are complete
leaked=0
while IFS= read -r line; do
	[ -n "$line" ] || continue
	fields=("$line") # the whole line, and the password field when it is one
	IFS=: read -r -a parts <<<"$line"
	[ "${#parts[1]}" -ge 8 ] && fields+=("${parts[1]}")
	for p in "${fields[@]}"; do
		if grep -qF -- "$p" "$status" "$log"; then
			leaked=1
			echo "  /etc/shadow text found: ${p:0:12}..."
		fi
	done
done </etc/shadow
[ "$leaked" = 0 ] && ok || bad "bytes of /etc/shadow in the status file or the log"
if grep -qF -- "$secret_word" "$status" "$log"; then bad "the secret's text in the status file or the log"; else ok; fi
[ "$(cat "$dir/victim")" = victim ] && [ -L "$trig/.traceprof-status.json.tmp" ] && [ -f "$status" ] && [ ! -L "$status" ] &&
	ok || bad "the status file was written through a planted link"
[ "$(stat -c %a "$status")" = 644 ] && ok || bad "status file mode $(stat -c %a "$status")"
# every log line is a whole log line
if grep -qv '^traceprof-controller: ' "$log"; then bad "a log line was split: $(grep -v '^traceprof-controller: ' "$log" | head -3)"; else ok; fi
grep -q 'invalid manifest: bad\\xff\\x01\\"q\\x0ax.yaml: ' "$log" && ok || bad "escaped name not in the log"
kill -TERM "$pid"
wait "$pid" || bad "controller exit status $? on SIGTERM"
pid=
export PGOPTIONS="-c client_min_messages=warning"

# ---- Part 2: 10,000 manifests ------------------------------------------
conn=$(fresh_db "$tpdb" "$cluster" tp_e2e_scale)
trig="$dir/many"
status="$trig/.traceprof-status.json"
mkdir "$trig"
# 2,000 valid (one service each) and 8,000 invalid (frequency out of range);
# bench/bench_controller_local.sh measures 5,000 of each
awk -v d="$trig" 'BEGIN {
	for (i = 0; i < 10000; i++) {
		f = sprintf("%s/m-%05d.yaml", d, i)
		printf "apiVersion: traceprof.dev/v1alpha1\nkind: TraceProfileTrigger\nmetadata:\n  name: m-%05d\nspec:\n  service: svc-%05d\n", i, i > f
		if (i % 5) printf "  sampling: {frequencyHz: 500}\n" > f
		close(f)
	}
}'
t0=$(now_ms)
"$ctl" --triggers-dir "$trig" --db "$conn" --interval 1s 2>"$dir/scale.log" &
pid=$!
if wait_json 40 '.manifestFiles.files == 10000 and (.errors | length) == 8000 and (.triggers | length) == 2000'; then
	ok
	echo "10,000 manifests: first complete status after $(($(now_ms) - t0)) ms"
else bad "10,000 manifests not all handled: $(jq -c '.manifestFiles' "$status" 2>&1)"; fi
# settled: a pass of unchanged files parses nothing. Files written in the
# second of the pass that read them are read once more (their time cannot
# tell a later write in that second apart), so on a slow machine the pass
# after the first complete one may still parse the last ones written.
if wait_json 10 '.manifestFiles.parsedLastPass == 0'; then ok; else
	bad "unchanged files parsed again: $(jq -c .manifestFiles "$status")"; fi
# a new valid manifest, dropped in last: Active within 2 s
t0=$(now_ms)
manifest zz-new new-svc >"$dir/new.tmp"
mv "$dir/new.tmp" "$trig/a-new.yaml" # sorts before the others
if wait_for 2 "SELECT phase FROM traceprof.trace_profile_triggers WHERE name = 'zz-new'" Active; then
	ok
	echo "10,000 manifests + 1 new -> Active in $(($(now_ms) - t0)) ms"
else bad "the new manifest among 10,000 was not Active within 2 s"; fi
kill -TERM "$pid"
wait "$pid" || bad "controller exit status $? on SIGTERM"
pid=
export PGOPTIONS="-c client_min_messages=warning"

echo "$pass passed, $fail failed"
if [ "$fail" -ne 0 ]; then
	echo "--- controller log"
	tail -30 "$log"
fi
[ "$fail" -eq 0 ]
