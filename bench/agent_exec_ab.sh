#!/usr/bin/env bash
# Two agent builds side by side under an exec storm: both sample every
# process at 99 Hz while a loop runs /bin/true and sleep 0.02, and another
# starts a sleep 0.4 every 100 ms (~100 execs a second). Prints, per
# agent, what its stats file counted over SECONDS (SIGUSR1 at both ends):
# main thread CPU, CPU in looks at processes, looks, looks cut short,
# looks brought by maps records, exec records, maps records. No database
# (the agents keep their windows queued); needs root.
#
# usage: sudo bench/agent_exec_ab.sh OLD_AGENT NEW_AGENT [SECONDS]
# Example (bench/results.md, "Libraries loaded late"): OLD is this tree
# built with the loader uprobe's attach left out of proctable.c.
set -u
old=$1 new=$2 secs=${3:-30}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
run() {
	"$1" --db "host=127.0.0.1 port=1 connect_timeout=1" --target all --frequency 99 \
		--otlp-grpc "" --otlp-http "" --control-listen "" --stats-file "$w/$2.st" \
		>/dev/null 2>"$w/$2.log" &
	echo $!
}
a=$(run "$old" old)
b=$(run "$new" new)
sleep 3
kill -USR1 "$a" "$b"
sleep 0.5
cp "$w/old.st" "$w/old0.st"
cp "$w/new.st" "$w/new0.st"
end=$((SECONDS + secs))
(while [ $SECONDS -lt $end ]; do /bin/true; sleep 0.02; done) &
(while [ $SECONDS -lt $end ]; do sleep 0.4 & sleep 0.1; done; wait) &
sleep $((secs + 1))
kill -USR1 "$a" "$b"
sleep 0.5
kill -9 "$a" "$b" # nothing to flush: no database
wait "$a" "$b" 2>/dev/null
for n in old new; do
	printf '%s' "$n"
	for k in main_cpu_ns main_cpu_inspect_ns inspections rechecks_unchanged maps_looks execs bpf_maps; do
		v0=$(sed -n "s/^$k=//p" "$w/${n}0.st")
		v1=$(sed -n "s/^$k=//p" "$w/$n.st")
		printf ' %s=%s' "$k" $((${v1:-0} - ${v0:-0}))
	done
	echo
done
