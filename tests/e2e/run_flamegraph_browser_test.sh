#!/usr/bin/env bash
# The SVG flame graph in a real browser: test_flamegraph --write makes
# profile.svg and diff.svg in OUT_DIR, and flamegraph_browser.js drives
# Debian's headless Chromium through playwright-core over them (frames,
# hover, click to zoom, search, differential colors, nasty names); the
# screenshots stay in OUT_DIR.
# usage: run_flamegraph_browser_test.sh TEST_FLAMEGRAPH OUT_DIR NODE_DIR
# NODE_DIR is where playwright-core is installed (npm, cache inside it).
set -euo pipefail
gen=$1 out=$2 nodedir=$3
here=$(cd "$(dirname "$0")" && pwd)
version=1.65.1 # playwright-core; drives the installed Chromium, downloads none
chromium=${CHROMIUM:-/usr/bin/chromium}
command -v npm >/dev/null && command -v node >/dev/null || { echo "skip: no node/npm"; exit 77; }
[ -x "$chromium" ] || { echo "skip: no $chromium (scripts/deps.sh installs chromium)"; exit 77; }

mkdir -p "$out" "$nodedir"
pkg="$nodedir/node_modules/playwright-core/package.json"
if ! grep -qs "\"version\": \"$version\"" "$pkg"; then
	npm install --no-save --prefix "$nodedir" --cache "$nodedir/.npm-cache" --ignore-scripts \
		--no-audit --no-fund "playwright-core@$version" >"$out/npm.log" 2>&1 ||
		{ echo "FAIL: npm install playwright-core@$version" >&2; tail -20 "$out/npm.log" >&2; exit 1; }
fi
rm -f "$out"/*.svg "$out"/*.png
"$gen" --write "$out"
CHROMIUM=$chromium node "$here/flamegraph_browser.js" "$nodedir/node_modules/playwright-core" "$out"
