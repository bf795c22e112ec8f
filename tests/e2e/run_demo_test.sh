#!/usr/bin/env bash
# The README's first command end to end: scripts/demo on this build tree
# (no rebuild), with its database in a fresh private cluster. Real BPF, real
# OTLP, real gRPC, real PostgreSQL. Checked from what the demo prints, and
# against the database it leaves behind:
#  - the trigger of examples/triggers/next-slow-payments.yaml reaches
#    Completed with 5/5 requests, all POST /api/pay, 200, >= 200 ms, raised
#    samples at 99 Hz;
#  - the collected trace it explains has its payment-svc part at 99 Hz
#    (about 99 samples per CPU-second, several times its 19 Hz samples),
#    and the numbers it prints are the stored ones;
#  - the cross-service view and the verdict name payment-svc's slow path
#    (validateSignature -> rsa_verify -> libcrypto), the frontend waiting;
#    the cohort comparison at the base rate puts validateSignature on top;
#  - where the time went (trace_time_breakdown): per service, CPU +
#    blocked + runqueue + other adds up to the span; payment-svc's span is
#    its CPU and a real wait, blocked in pthread_cond_wait under
#    ledger_append; the frontend's span is blocked in its HTTP client
#    (recv under pay_exchange, called by callPayment); the verdict lines
#    name both waits;
#  - the explained trace's stacks are whole (built without frame pointers):
#    90 % or more of payment-svc's samples reach the thread's root, and its
#    flame graph runs from the root through handle_pay and
#    validateSignature down to a leaf in libcrypto.so.3;
#  - the Python service (Flask under gunicorn): its slowest request's
#    flame graph runs through the view into rank_candidates;
#  - nothing it started is left running, also after a Ctrl-C mid-run.
# usage: run_demo_test.sh SOURCE_DIR BUILD_DIR TRACEPROF_DB
set -euo pipefail
src=$1 build=$2 tpdb=$3
. "$(dirname "$0")/lib.sh"
needs_bpf
chmod 755 "$work" # the postgres user must reach the demo's cluster
db=$work/db
demo_pid=""
finish() {
	[ -z "$demo_pid" ] || kill -TERM -- "-$demo_pid" 2>/dev/null || true
	"$tpdb" remove "$db" >/dev/null 2>&1 || true
	cleanup
}
trap finish EXIT

# run_demo OUT: the demo in its own process group (as a terminal would run
# it), in the background; sets $demo_pid (also the group id). A background
# command of a script starts with SIGINT ignored, which the demo could not
# trap: it gets SIGINT's default back, as in a terminal.
run_demo() {
	TRACEPROF_BUILD_DIR=$build TRACEPROF_DEMO_DB=$db TRACEPROF_DEMO_NO_BUILD=1 \
		python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.setsid()
os.execv(sys.argv[1], sys.argv[1:])' "$src/scripts/demo" >"$1" 2>"$work/demo.log" &
	demo_pid=$!
}
# leftovers: fails when a process of the demo's group is still running
leftovers() {
	local left
	sleep 0.5
	left=$(pgrep -g "$demo_pid" -a || true)
	[ -z "$left" ] || fail "processes left running after the demo: $left"
	demo_pid=""
}

start_s=$SECONDS
run_demo "$work/demo.out"
rc=0
wait "$demo_pid" || rc=$?
cat "$work/demo.out"
[ "$rc" -eq 0 ] || fail "the demo exited with status $rc"
echo "the demo took $((SECONDS - start_s)) s"
leftovers
# what a user sees on the terminal's error stream: notes, never a shell's
# or a tool's error line
errs=$(grep -Ev '^note: ' "$work/demo.log" || true)
[ -z "$errs" ] || fail "the demo printed error lines: $errs"
grep -q "traceprof-db stop $db" "$work/demo.out" || fail "the demo does not say how to stop its database"
out=$work/demo.out
conn=$("$tpdb" conninfo "$db")
q() { psql "$conn" -qXAt -v ON_ERROR_STOP=1 -c "$1"; }

# the Python service: its slowest request's flame graph runs through the
# Flask view into the function that ranks (Python frames, sdk/python)
grep -q '^== The slowest recommend-svc request (Python)' "$out" || fail "no recommend-svc section"
grep -A4 '^== The slowest recommend-svc request' "$out" |
	grep -q 'recommend_app\.recommend;recommend_app\.rank_candidates' ||
	fail "recommend-svc's flame graph lacks recommend -> rank_candidates: $(grep -A4 'slowest recommend-svc' "$out")"
grep -Eq '^ next-slow-payments \| payment-svc \| Completed \| 5/5 +\| 99 \|' "$out" ||
	fail "no Completed 5/5 trigger row at 99 Hz in the output"
echo "ok: the trigger completed with 5/5 at 99 Hz"
# the collected requests: n | trace | method | route | status | ms | raised | hz
# Each is a POST /api/pay of 200 ms or more at 99 Hz. A 200 of 400 ms or
# more is the slow path (400 ms of CPU: 20 raised samples at least); on a
# busy machine an error answer, or a fast payment kept off the CPUs, can
# also take 200 ms, is rightly collected, and computed little (no raised
# sample at all: no rate in the row either).
rows=$(awk -F'|' '$1 ~ /^ [1-9] $/ && $2 ~ /^ [0-9a-f]+ $/ && length($2) == 34 && $3 ~ /POST/ && $4 ~ /\/api\/pay/ &&
	$6 + 0 >= 200 && ($8 + 0 == 99 || ($7 + 0 == 0 && $8 ~ /^ *$/)) &&
	($5 + 0 != 200 || $7 + 0 >= 20 || $6 + 0 < 400)' "$out" | wc -l)
[ "$rows" -eq 5 ] || fail "expected 5 collected slow payments at 99 Hz in the output, found $rows"
cpu_rows=$(awk -F'|' '$1 ~ /^ [1-9] $/ && length($2) == 34 && $5 + 0 == 200 && $7 + 0 >= 20' "$out" | wc -l)
[ "$cpu_rows" -ge 1 ] || fail "no collected payment on the CPU-bound slow path"
echo "ok: 5 collected requests, each a slow POST /api/pay at 99 Hz ($cpu_rows on the slow path with raised samples)"

line=$(grep -E "^   payment-svc's part: [0-9]+ samples at 99 Hz" "$out") ||
	fail "no 99 Hz line for the chosen trace"
trace=$(sed -n 's/^== A collected payment, trace \([0-9a-f]\{32\}\), .*/\1/p' "$out")
raised=$(sed -E 's/.* ([0-9]+) samples at 99 Hz.*/\1/' <<<"$line")
base=$(sed -E 's/.* vs ([0-9]+) in the always-on 19 Hz.*/\1/' <<<"$line")
[ -n "$trace" ] || fail "the output names no collected trace"
[ "$raised" -ge 30 ] && [ "$raised" -ge $((3 * base)) ] ||
	fail "the chosen trace has $raised samples at 99 Hz and $base at 19 Hz"
stored=$(q "SELECT sum(coalesce(u.n, 1)) FROM traceprof.trigger_samples s, unnest(s.stacks, s.counts) u(k, n)
	WHERE s.trace_id = traceprof.parse_trace_id('$trace') AND s.hz = 99")
[ "$stored" = "$raised" ] || fail "the demo printed $raised raised samples, trigger_samples holds $stored"
claimed=$(q "SELECT count(*) FROM traceprof.trace_profile_triggers
	WHERE name = 'next-slow-payments' AND traceprof.parse_trace_id('$trace') = ANY (trace_ids)")
[ "$claimed" = 1 ] || fail "the explained trace $trace is not one the trigger claimed"
echo "ok: the explained trace was claimed; payment-svc at 99 Hz: $raised samples (vs $base at 19 Hz)"

# The whole stack of the slow request, through libcrypto, with no frame
# pointers anywhere (the walk follows .eh_frame): 90 % or more of
# payment-svc's 99 Hz samples have a stack that reaches the thread's root
# (the rest: tables not built yet, a walk cut short), and stacks run from
# the root through handle_pay and validateSignature to a leaf in
# libcrypto.so.3. With frame pointers only, none does.
IFS='|' read -r all rooted whole < <(q "
	WITH smp AS (SELECT u.k, coalesce(u.n, 1) AS n
	               FROM traceprof.trigger_samples ts JOIN traceprof.sources so USING (source_id),
	                    unnest(ts.stacks, ts.counts) u(k, n)
	              WHERE ts.trace_id = traceprof.parse_trace_id('$trace') AND ts.hz = 99
	                AND so.service = 'payment-svc'),
	     st AS (SELECT smp.n,
	                   (SELECT array_agg(f.name ORDER BY x.o) FROM unnest(s.function_ids)
	                           WITH ORDINALITY x(id, o) JOIN traceprof.functions f ON f.function_id = x.id) AS fns,
	                   (SELECT f.module FROM traceprof.functions f
	                     WHERE f.function_id = s.function_ids[cardinality(s.function_ids)]) AS leaf_module
	              FROM smp JOIN traceprof.stacks s ON s.stack_id = smp.k),
	     r AS (SELECT n, fns, leaf_module,
	                  fns[1] IN ('_start', '__libc_start_main', 'clone', 'clone3', 'start_thread') AS rooted
	             FROM st)
	SELECT sum(n), coalesce(sum(n) FILTER (WHERE rooted), 0),
	       coalesce(sum(n) FILTER (WHERE rooted AND leaf_module = 'libcrypto.so.3'
	                    AND array_position(fns, 'handle_pay') < array_position(fns, 'validateSignature')), 0)
	  FROM r")
echo "   payment-svc's samples in the trace: $all, whole (to the thread's root) $rooted," \
	"root -> handle_pay -> validateSignature -> libcrypto.so.3 $whole"
[ "${all:-0}" -gt 0 ] || fail "no 99 Hz sample of payment-svc in the explained trace"
[ "$((100 * rooted))" -ge "$((90 * all))" ] ||
	fail "only $rooted of the slow request's $all samples have a whole stack (90 % expected)"
[ "$whole" -ge 1 ] ||
	fail "no stack of the slow request goes from the thread's root through handle_pay and validateSignature into libcrypto.so.3"
echo "ok: the slow request's stacks are whole: root -> handle_pay -> validateSignature -> libcrypto.so.3"

# on_slow_path FN: FN is payment-svc's slow path in the explained trace:
# validateSignature, what it calls down to libcrypto (which only it calls),
# or a function that ran under validateSignature or libcrypto for at least
# half of its samples in the trace (libc or the kernel below them:
# libcrypto's unsymbolized leaf is one name per address, so the top can be
# such a function with a sample or two)
on_slow_path() {
	# (folded frames of a name two modules share carry " [module]")
	[ "$(q "WITH st AS (SELECT string_to_array(regexp_replace(stack, ' \\[[^;]*\\]', '', 'g'), ';') AS fns,
	                           samples
	                     FROM traceprof.trace_folded('$trace', 'payment-svc'))
	SELECT \$f\$$1\$f\$ IN ('validateSignature', 'rsa_verify', 'sha256_of')
	    OR EXISTS (SELECT 1 FROM traceprof.functions
	                WHERE name = \$f\$$1\$f\$ AND module = 'libcrypto.so.3')
	    OR coalesce((SELECT 2 * coalesce(sum(samples) FILTER (
	                                 WHERE fns && ARRAY(SELECT name FROM traceprof.functions
	                                                     WHERE module = 'libcrypto.so.3'
	                                                     UNION SELECT 'validateSignature')), 0) >= sum(samples)
	                   FROM st WHERE \$f\$$1\$f\$ = ANY (fns)), false)")" = t ]
}
# payment-svc's span is its CPU and its wait for the ledger (400 ms of CPU,
# 480 ms or more blocked: "mixed"; "cpu" when the CPU estimate comes out
# high; "waiting" on a machine so busy that it waited for a CPU longer than
# it ran, checked below); the frontend only waited for it
pay_row=$(grep -E "^ payment-svc +\| /api/pay +\| +200 \|.*\| (cpu|mixed|waiting) *\$" "$out") &&
	grep -Eq '^ frontend +\| /api/checkout +\| +200 \|.*\| waiting *$' "$out" ||
	fail "trace_services: payment-svc on CPU (cpu or mixed) and the frontend waiting expected"
pay_verdict=$(awk -F'|' '{gsub(/ /, "", $9); print $9}' <<<"$pay_row")
# its top function, or one tied with it (libcrypto's leaf, one name per
# address, makes ties of a sample or two common), is on the slow path
top=$(awk -F'|' '{gsub(/^ +| +$/, "", $7); print $7}' <<<"$pay_row")
found=''
while IFS= read -r fn; do
	[ -n "$fn" ] && on_slow_path "$fn" && { found=$fn; break; }
done < <(printf '%s\n' "$top"; q "SELECT function FROM (SELECT function, self_samples,
	max(self_samples) OVER () AS most FROM traceprof.trace_profile('$trace')
	WHERE service = 'payment-svc') x WHERE self_samples = most")
[ -n "$found" ] || fail "trace_services: payment-svc's top function $top (and those tied) not on its slow path"
echo "ok: trace_services: payment-svc on CPU in its slow path ($found), the frontend waiting"
# One line per service: "payment-svc: 1159 ms span: 444 ms CPU in F, 689 ms
# blocked in pthread_cond_wait ← ledger_append" (or "N ms blocked, M ms in
# ..." when other stacks blocked too), F on the slow path; the wait for a
# CPU instead when it was longer (a busy machine), checked below
verdict=$(sed -n '/^== In one line/,/^$/{/^payment-svc: /p}' "$out")
named=$(sed -nE 's/^payment-svc: [0-9]+ ms span: [0-9]+ ms CPU in (.+), [0-9]+ ms (blocked|waiting for a CPU).*/\1/p' <<<"$verdict")
[ -n "$named" ] && on_slow_path "$named" ||
	fail "the verdict does not name payment-svc's slow path: $verdict"
grep -Eq ' ms (blocked(, [0-9]+ ms)? in pthread_cond_wait ← ledger_append|waiting for a CPU)$' <<<"$verdict" ||
	fail "the verdict does not name payment-svc's wait (pthread_cond_wait ← ledger_append): $verdict"
echo "ok: verdict: $verdict"
fverdict=$(sed -n '/^== In one line/,/^$/{/^frontend: /p}' "$out")
grep -Eq '^frontend: [0-9]+ ms span: .* [0-9]+ ms blocked(, [0-9]+ ms)? in (__libc_)?recv ← pay_exchange$' \
	<<<"$fverdict" || fail "the verdict does not have the frontend blocked in its HTTP client: $fverdict"
echo "ok: verdict: $fverdict"

# Where the time went, per service of the explained trace (from the store,
# and the same figures in the output). The measured parts add up: CPU (an
# estimate from 99 Hz samples: +- 1 period per sample drawn, so a margin of
# 15 % of the span) + blocked + runqueue + other = the span, excess (what
# they exceed it by) small; blocked and runqueue time are measured, so
# they alone never exceed the span by more than 2 %.
IFS='|' read -r p_span p_cpu p_blocked p_runq p_other p_excess p_fn p_caller p_ms < <(q "
	SELECT round(span_ms), round(cpu_ms), round(blocked_ms), round(runq_ms), round(other_ms),
	       round(excess_ms), blocked_by->0->>'function', blocked_by->0->>'caller',
	       round((blocked_by->0->>'ms')::numeric)
	  FROM traceprof.trace_time_breakdown('$trace') WHERE service = 'payment-svc'")
IFS='|' read -r f_span f_cpu f_blocked f_runq f_other f_excess f_fn f_caller f_ms < <(q "
	SELECT round(span_ms), round(cpu_ms), round(blocked_ms), round(runq_ms), round(other_ms),
	       round(excess_ms), blocked_by->0->>'function', blocked_by->0->>'caller',
	       round((blocked_by->0->>'ms')::numeric)
	  FROM traceprof.trace_time_breakdown('$trace') WHERE service = 'frontend'")
echo "   payment-svc: span $p_span ms = CPU $p_cpu + blocked $p_blocked ($p_ms in $p_fn ← $p_caller)" \
	"+ runqueue $p_runq + other $p_other - excess $p_excess"
echo "   frontend: span $f_span ms = CPU $f_cpu + blocked $f_blocked ($f_ms in $f_fn ← $f_caller)" \
	"+ runqueue $f_runq + other $f_other - excess $f_excess"
[ "${p_span:-0}" -gt 0 ] && [ "${f_span:-0}" -gt 0 ] || fail "trace_time_breakdown: no span of payment-svc or frontend"
grep -Eq "^ payment-svc +\| +$p_span \| +$p_cpu \| +$p_blocked \| +$p_runq \| +$p_other \| +$p_excess \| pthread_cond_wait +\| ledger_append +\| +$p_ms *\$" "$out" &&
	grep -Eq "^ frontend +\| +$f_span \| +$f_cpu \| +$f_blocked \| +$f_runq \| +$f_other \| +$f_excess \| " "$out" ||
	fail "the breakdown printed is not the stored one"
for who in p f; do
	eval "span=\$${who}_span cpu=\$${who}_cpu blocked=\$${who}_blocked runq=\$${who}_runq other=\$${who}_other excess=\$${who}_excess"
	# six figures each rounded to the ms: their sum is within 3 ms of the rounded span
	[ "$((cpu + blocked + runq + other - excess))" -ge "$((span - 3))" ] &&
		[ "$((cpu + blocked + runq + other - excess))" -le "$((span + 3))" ] ||
		fail "$who: the breakdown does not add up to the span"
	[ "$((100 * excess))" -le "$((15 * span))" ] ||
		fail "$who: CPU + blocked + runqueue exceed the span by $excess ms of $span"
	[ "$((100 * (blocked + runq)))" -le "$((102 * span))" ] ||
		fail "$who: blocked + runqueue ($blocked + $runq ms) exceed the span ($span ms)"
done
# payment-svc: its CPU and a real wait, for the ledger; the wait is one
# write of 480 ms at least (the writer sleeps: never shorter), and a fifth
# of the span at least once the time spent waiting for a CPU (which a busy
# machine adds, and the breakdown shows as runqueue) is left out
[ "$p_fn" = pthread_cond_wait ] && [ "$p_caller" = ledger_append ] ||
	fail "payment-svc's top blocking function is $p_fn ← $p_caller, not pthread_cond_wait ← ledger_append"
[ "$p_ms" -ge 400 ] && [ "$((100 * p_ms))" -ge "$((20 * (p_span - p_runq)))" ] && [ "$p_cpu" -ge 250 ] ||
	fail "payment-svc's span ($p_span ms) is not CPU ($p_cpu ms) and a real wait ($p_ms ms in ledger_append)"
grep -q ' waiting for a CPU$' <<<"$verdict" && [ "$p_runq" -le "$p_blocked" ] &&
	fail "the verdict names the wait for a CPU ($p_runq ms), shorter than the blocked time ($p_blocked ms)"
[ "$pay_verdict" != waiting ] || [ "$p_runq" -gt "$p_cpu" ] ||
	fail "trace_services: payment-svc 'waiting' although it waited for a CPU ($p_runq ms) less than it ran ($p_cpu ms)"
echo "ok: payment-svc's span is its CPU and $p_ms ms blocked in pthread_cond_wait ← ledger_append, adding up"
# the frontend: its span is its wait on payment-svc, blocked in its HTTP
# client, with the stack through callPayment
[[ "$f_fn" =~ ^(__libc_)?recv$ ]] && [ "$f_caller" = pay_exchange ] ||
	fail "the frontend's top blocking function is $f_fn ← $f_caller, not recv ← pay_exchange"
[ "$((100 * f_ms))" -ge "$((85 * f_span))" ] ||
	fail "the frontend's span ($f_span ms) is not mostly blocked in its HTTP client ($f_ms ms)"
grep -Eq '^   frontend;.*;handle_checkout_frontend;callPayment;pay_exchange;(__libc_)?recv;.* [0-9]+$' "$out" ||
	fail "no blocked stack of the frontend through callPayment and pay_exchange into recv in the output"
grep -Eq '^   payment-svc;.*;handle_pay;serve_order;ledger_append;pthread_cond_wait;.* [0-9]+$' "$out" ||
	fail "no blocked stack of payment-svc through handle_pay and ledger_append in the output"
echo "ok: the frontend's span is $f_ms ms of $f_span blocked in recv ← pay_exchange (callPayment)"

grep -Eq '^ validateSignature +\| +(9[0-9]|100)\.[0-9] \|' "$out" ||
	fail "the cohort comparison does not show validateSignature in the slow requests"
echo "ok: the cohort comparison at the base rate shows validateSignature in the slow requests"
[ "$(q "SELECT count(*) FROM traceprof.samples WHERE hz <> 19")" = 0 ] ||
	fail "the continuous profile is not at the base rate"
echo "ok: the continuous profile stays at 19 Hz"

# Ctrl-C while the trigger is being applied: everything stops, nothing stays
run_demo "$work/interrupted.out"
for _ in $(seq 300); do grep -q '^== After 5 s' "$work/interrupted.out" && break; sleep 0.1; done
grep -q '^== After 5 s' "$work/interrupted.out" || fail "the second run did not reach the trigger"
int_s=$SECONDS
kill -INT -- "-$demo_pid"
rc=0
wait "$demo_pid" || rc=$?
# 130: its INT trap ran (not a later failure of its own, such as its
# 60 s wait for the trigger running out)
[ "$rc" -eq 130 ] || fail "the interrupted demo exited $rc, not 130 (128 + SIGINT)"
leftovers
echo "ok: interrupted (status $rc, stopped in $((SECONDS - int_s)) s), nothing left running"
