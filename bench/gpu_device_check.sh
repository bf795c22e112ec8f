#!/bin/bash
# gpu_device_check.sh - the real-CUDA check of GPU time per request
# (docs/gpu.md, "Checked on a real GPU"): kernels that a CUDA program's
# requests launch, captured by libtraceprof-cuda and the agent, against the
# GPU's own measure of each kernel, taken by the program.
#
# A machine with a GPU rarely has PostgreSQL or traceprof's build
# dependencies, so the check runs in three steps:
#
#   stage DIR        here, after a build: the agent, the shared libraries it
#                    needs that are not the C library's, libtraceprof-sdk,
#                    copied into DIR, which travels to the GPU machine.
#   run DIR OUT      on the GPU machine, as root, from the source tree: builds
#                    libtraceprof-cuda (cmake -S cuda) and bench/gpu/
#                    gpu_requests.cu (nvcc) against its CUDA toolkit, starts
#                    the agent from DIR with a database it cannot reach (its
#                    windows wait in its spool), runs the program with
#                    CUDA_INJECTION64_PATH set, stops the agent and leaves in
#                    OUT: spool.tar, truth.txt (the program's lines),
#                    agent.log, agent-stats.txt, env.txt, build.log (and
#                    the programs' errors), bench.txt: the launch call's
#                    time (gpu_requests --bench, 5 rounds each) without
#                    libtraceprof-cuda, with it and no agent, with both;
#                    where PyTorch is installed, torch.txt: the requests
#                    of bench/gpu/torch_requests.py under the library and
#                    the agent, and what one of its passes launches by
#                    torch.profiler (CUPTI, without the library).
#   verify OUT       here: a private PostgreSQL whose connection string is
#                    the one the run used; an agent started on the spool
#                    delivers the windows; then each request's stored
#                    kernels (count, GPU time, name, launching function) are
#                    compared with the truth. Exit 0 when every check holds.
#
# `run` with STANDIN=1 (no GPU needed) uses the stand-in runtime and
# tests/cuda/gpu_workload from BUILD (default build/) instead: the same
# path end to end, for rehearsing the check anywhere.
set -u -o pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
PGDIR=/tmp/tp-gpucheck-pg
CONNINFO="host=$PGDIR/run port=5432 dbname=traceprof user=traceprof_writer passfile=$PGDIR/auth/writer.pgpass"
SPOOL=/tmp/tp-gpucheck-spool
BUILD=${BUILD:-$here/build}

die() {
	echo "gpu_device_check: $*" >&2
	exit 1
}

stage() {
	local dir=$1 agent=$BUILD/agent/traceprof-agent
	[ -x "$agent" ] || die "no agent at $agent: build first"
	rm -rf "$dir" && mkdir -p "$dir/lib" || die "cannot make $dir"
	cp "$agent" "$dir/" || die "copy"
	# Every library but the C library's own (the GPU machine's is newer).
	ldd "$agent" | awk '/=> \//{print $3}' |
		grep -vE '/(libc|libm|libresolv|libpthread|libdl|librt)\.so|ld-linux' |
		while read -r f; do cp -L "$f" "$dir/lib/"; done
	cp -L "$BUILD"/sdk/libtraceprof-sdk.so.0 "$dir/lib/" || die "no libtraceprof-sdk"
	ln -sf libtraceprof-sdk.so.0 "$dir/lib/libtraceprof-sdk.so"
	du -sh "$dir"
}

run() {
	local dir=$1 out=$2 work=/tmp/tp-gpucheck agent_pid rc prog lib
	# the windows must wait in the spool: no database where the run's conninfo points
	[ -S "$PGDIR/run/.s.PGSQL.5432" ] && die "a database listens at $PGDIR (an earlier verify): stop it first"
	mkdir -p "$out" "$work" || die "cannot make $out"
	export LD_LIBRARY_PATH=$dir/lib
	{
		uname -r
		nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
		nvcc --version 2>&1 | tail -1
	} >"$out/env.txt"
	if [ "${STANDIN:-0}" = 1 ]; then
		lib=$BUILD/tests/cuda/libtraceprof-cuda-test.so
		prog=("$BUILD/tests/cuda/gpu_workload" --requests 24 --threads 3 --graph --settle-ms 3000)
	else
		cmake -S "$here/cuda" -B "$work/build-cuda" -DTRACEPROF_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
			>"$out/build.log" 2>&1 && cmake --build "$work/build-cuda" >>"$out/build.log" 2>&1 ||
			{ tail -30 "$out/build.log"; die "libtraceprof-cuda did not build"; }
		lib=$work/build-cuda/libtraceprof-cuda.so
		nvcc -O2 -std=c++17 -I"$here/include" -o "$work/gpu_requests" "$here/bench/gpu/gpu_requests.cu" \
			-L"$dir/lib" -ltraceprof-sdk -lcuda >>"$out/build.log" 2>&1 ||
			{ tail -30 "$out/build.log"; die "gpu_requests did not build"; }
		prog=("$work/gpu_requests" 24 3 5000)
	fi
	bench_round() { # MODE [ENV...]: one timed round of launch calls into bench.txt
		local mode=$1
		shift
		[ "${STANDIN:-0}" = 1 ] && return 0
		env "$@" "$work/gpu_requests" --bench 20000 2>>"$out/build.log" |
			sed "s/^bench /mode=$mode /" >>"$out/bench.txt"
	}
	: >"$out/bench.txt"
	for _ in 1 2 3 4 5; do bench_round library_no_agent CUDA_INJECTION64_PATH="$lib"; done
	rm -rf "$SPOOL" && mkdir -p "$SPOOL"
	"$dir/traceprof-agent" --db "$CONNINFO" --spool-dir "$SPOOL" --frequency 19 --window 2s \
		--otlp-grpc '' --otlp-http '' --control-listen '' --control-token-generate '' \
		--stats-file "$out/agent-stats.txt" >"$out/agent.log" 2>&1 &
	agent_pid=$!
	sleep 3
	CUDA_INJECTION64_PATH=$lib "${prog[@]}" >"$out/truth.txt" 2>>"$out/build.log"
	rc=$?
	sleep 3
	for _ in 1 2 3 4 5; do
		bench_round plain
		bench_round library_and_agent CUDA_INJECTION64_PATH="$lib"
	done
	# PyTorch, where it is installed: its requests under the library and the agent
	local torch=0 trq=$here/bench/gpu/torch_requests.py
	if [ "${STANDIN:-0}" != 1 ] && python3 -c 'import torch' 2>/dev/null; then
		torch=1
		# the machine's own libraries for Python (the agent's are older)
		env -u LD_LIBRARY_PATH TRACEPROF_SDK_LIBRARY="$dir/lib/libtraceprof-sdk.so.0" \
			CUDA_INJECTION64_PATH="$lib" python3 "$trq" "$here/sdk/python" 12 \
			>"$out/torch.txt" 2>>"$out/build.log" || torch=0
		sleep 3
	fi
	kill -TERM "$agent_pid"
	wait "$agent_pid"
	echo "program exit $rc, agent exit $?" >>"$out/env.txt"
	# what one pass launches, from torch.profiler (CUPTI) without the library
	if [ $torch = 1 ]; then
		env -u LD_LIBRARY_PATH python3 "$trq" "$here/sdk/python" --profile >>"$out/torch.txt" \
			2>>"$out/build.log"
		grep -c '^request' "$out/torch.txt" | sed 's/^/PyTorch requests: /'
	fi
	tar -C "$SPOOL" -cf "$out/spool.tar" . || die "no spool"
	grep -c '^request' "$out/truth.txt" | sed 's/^/requests: /'
	grep -E '^gpu_' "$out/agent-stats.txt" || true
	bench_summary "$out/bench.txt"
	return $rc
}

bench_summary() { # BENCH_FILE: median ns per launch call of each mode
	[ -s "$1" ] || return 0
	awk '{split($1, m, "="); split($3, v, "="); n[m[2]]++; x[m[2], n[m[2]]] = v[2]}
	     END {for (k in n) {c = n[k]; for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++)
	              if (x[k, j] < x[k, i]) {t = x[k, i]; x[k, i] = x[k, j]; x[k, j] = t}
	          printf "launch call, %s: median %.0f ns of %d rounds\n", k, x[k, int((c + 1) / 2)], c}}' "$1"
}

verify() {
	local out=$1 db=$BUILD/cli/traceprof-db agent=$BUILD/agent/traceprof-agent reader
	[ -f "$out/spool.tar" ] && [ -f "$out/truth.txt" ] || die "no spool.tar or truth.txt in $out"
	"$db" remove "$PGDIR" >/dev/null 2>&1
	"$db" create "$PGDIR" --fast >/dev/null || die "cannot create the database"
	[ "$("$db" conninfo "$PGDIR" --role writer)" = "$CONNINFO" ] || die "the writer's conninfo is not the run's"
	rm -rf "$SPOOL" && mkdir -p "$SPOOL" && tar -C "$SPOOL" -xf "$out/spool.tar" || die "spool"
	"$agent" --db "$CONNINFO" --spool-dir "$SPOOL" --target "pid:$$" --duration 6s \
		--otlp-grpc '' --otlp-http '' --control-listen '' --control-token-generate '' \
		--stats-file "$out/verify-stats.txt" >"$out/verify.log" 2>&1 || die "the agent failed (verify.log)"
	bench_summary "$out/bench.txt"
	reader=$("$db" conninfo "$PGDIR" --role reader)
	python3 - "$reader" "$out/truth.txt" "$out/torch.txt" <<'EOF'
import os, subprocess, sys
conn, truth_file, torch_file = sys.argv[1], sys.argv[2], sys.argv[3]
def sql(q):
    r = subprocess.run(["psql", conn, "-XAtF\t", "-c", q], capture_output=True, text=True)
    if r.returncode:
        sys.exit("psql: " + r.stderr)
    return [l.split("\t") for l in r.stdout.splitlines() if l]
truth = {}
for line in open(truth_file):
    if not line.startswith("kernel "):
        continue
    head, name = line.rstrip("\n").split(" name=", 1)
    kv = dict(p.split("=", 1) for p in head.split()[1:])
    truth.setdefault(kv["trace"], {})[name] = (int(kv["count"]), float(kv["gpu_ns"]), kv["fn"])
rows = sql("""
SELECT replace(g.trace_id::text, '-', ''), substr(f.name, 7), sum(u.n), sum(u.ns),
       string_agg(DISTINCT (SELECT string_agg(f3.name, ';' ORDER BY y.o DESC)
                              FROM unnest(s.function_ids) WITH ORDINALITY AS y(fid, o)
                              JOIN traceprof.functions f3 ON f3.function_id = y.fid), ' | ')
FROM traceprof.gpu g
CROSS JOIN LATERAL unnest(g.stacks, g.launches, g.gpu_ns) AS u(stack, n, ns)
JOIN traceprof.stacks s ON s.stack_id = u.stack
JOIN traceprof.functions f ON f.function_id = s.function_ids[cardinality(s.function_ids)]
WHERE g.trace_id IS NOT NULL AND f.name LIKE '[gpu] %'
GROUP BY 1, 2""")
stored = {}
for trace, name, n, ns, stacks in rows:
    stored.setdefault(trace, {})[name] = (int(n), int(ns), stacks)
bad, errs, count_ok, fn_ok, total = 0, [], 0, 0, 0
for trace, kernels in truth.items():
    for name, (n, ns, fn) in kernels.items():
        total += 1
        got = stored.get(trace, {}).get(name)
        if not got:
            print(f"MISSING trace={trace} kernel={name}")
            bad += 1
            continue
        err = (got[1] - ns) / ns if ns else 0.0
        errs.append(abs(err))
        if got[0] == n:
            count_ok += 1
        else:
            print(f"COUNT trace={trace} kernel={name}: stored {got[0]}, truth {n}")
            bad += 1
        if abs(err) > 0.01:
            print(f"TIME trace={trace} kernel={name}: stored {got[1]} ns, truth {ns:.0f} ns ({err:+.2%})")
            bad += 1
        if fn in got[2]:
            fn_ok += 1
        else:
            print(f"STACK trace={trace} kernel={name}: {fn} not in {got[2][:300]}")
            bad += 1
torch_req, one_pass = {}, {}
if os.path.exists(torch_file):
    for line in open(torch_file):
        if line.startswith("request "):
            kv = dict(p.split("=", 1) for p in line.split()[1:])
            torch_req[kv["trace"]] = int(kv["passes"])
        elif line.startswith("profile "):
            head, ns = line.rstrip("\n").rsplit(" gpu_ns=", 1)
            head, count = head.rsplit(" count=", 1)
            # the agent keeps a kernel's name up to 256 bytes (docs/gpu.md)
            name = head.split(" kernel=", 1)[1].encode()[:256].decode("utf-8", "ignore")
            c0, t0 = one_pass.get(name, (0, 0.0))
            one_pass[name] = (c0 + int(count), t0 + float(ns))
if torch_req:
    pairs, exact, ratios = 0, 0, []
    for trace, passes in torch_req.items():
        got = stored.get(trace, {})
        for name in set(got) | set(one_pass):
            pairs += 1
            want = passes * one_pass.get(name, (0, 0.0))[0]
            have = got.get(name, (0, 0, ""))[0]
            if have == want:
                exact += 1
            else:
                print(f"TORCH COUNT trace={trace} kernel={name[:120]}: stored {have}, one pass x {passes} = {want}")
                bad += 1
        want_ns = passes * sum(ns * 1.0 for _, ns in one_pass.values())
        if want_ns:
            ratios.append(sum(v[1] for v in got.values()) / want_ns)
    ratios.sort()
    print(f"PyTorch: requests {len(torch_req)}, (request, kernel) pairs {pairs}: counts exact {exact} "
          f"({len(one_pass)} kernels a pass, names as torch.profiler gives them); GPU time per request "
          f"against one profiled pass in another process: median ratio {ratios[len(ratios) // 2]:.3f}, "
          f"range {ratios[0]:.3f}-{ratios[-1]:.3f}")
elif os.path.exists(torch_file):
    print("PyTorch: no requests")
    bad += 1
extra = sum(1 for t in stored if t not in truth and t not in torch_req)
errs.sort()
med = errs[len(errs) // 2] if errs else float("nan")
mx = errs[-1] if errs else float("nan")
print(f"requests {len(truth)}, (request, kernel) pairs {total}: counts exact {count_ok}, "
      f"launcher in stack {fn_ok}; GPU time vs the program's truth: median |error| {med:.4%}, "
      f"max {mx:.4%}; traces stored that are not requests: {extra}")
sys.exit(1 if bad or extra or not total else 0)
EOF
}

case "${1:-}" in
stage) [ $# = 2 ] || die "usage: $0 stage DIR"; stage "$2" ;;
run) [ $# = 3 ] || die "usage: $0 run DIR OUT"; run "$2" "$3" ;;
verify) [ $# = 2 ] || die "usage: $0 verify OUT"; verify "$2" ;;
*) sed -n '2,30p' "$0"; exit 2 ;;
esac
