#!/usr/bin/env bash
# Installs the Debian 12 packages traceprof needs to build, test and run its
# demo. Idempotent: packages already present are skipped, and apt-get runs
# only when something is missing. Usage: scripts/deps.sh
set -euo pipefail

packages=(
	build-essential cmake pkg-config
	libpq-dev postgresql-15 postgresql-client-15
	clang llvm libbpf-dev bpftool libelf-dev libdw-dev curl python3 python3-yaml openssl
	apache2 # Apache httpd and its mod_lua: the zero-code HTTP tests (tests/e2e, with gunicorn and Flask below)
	clang-format # the format_check test (one .clang-format for all C)
	libssl-dev # the demo payment service verifies signatures with libcrypto
	libclang-rt-dev # clang's libFuzzer and sanitizer runtimes (tests/fuzz)
	libgrpc-dev libprotobuf-c-dev protobuf-c-compiler
	libcurl4-openssl-dev libjansson-dev libyaml-dev
	zlib1g-dev golang-go
	xz-utils # the unwinding test compresses with Debian's xz
	chromium
	gunicorn python3-flask # the Python package's end-to-end test (sdk/python)
	uwsgi-core uwsgi-plugin-python3 # e2e_agent_python_uwsgi: Python frames in workers forked from C
	libapache2-mod-wsgi-py3 # e2e_agent_python_modwsgi: Python in Apache, in sub-interpreters
	python3-uvicorn python3-starlette # e2e_asgi: the ASGI middleware on a real event loop server
	debootstrap # root file systems of other Debian releases (Python 3.13, 3.14) for tests/e2e
	openjdk-17-jdk-headless # e2e_jit_java: Java's JIT frames named from its perf map
	bpftrace # benchmarks: an empty uprobe in bench/gpu_cost.sh, offcputime's stand-in in bench/offcpu_cost.sh
)
# Node.js runs the OpenTelemetry JavaScript SDK in the interoperability test;
# a node and npm already installed (from any source) are used as they are.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	packages+=(nodejs npm)
fi
# kubectl drives the Kubernetes API tests (tests/kube); Debian's
# kubernetes-client only when no kubectl (of any version) is on PATH.
if ! command -v kubectl >/dev/null; then
	packages+=(kubernetes-client)
fi

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}" >&2
sudo=()
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
	sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
