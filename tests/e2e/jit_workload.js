// A CPU-bound JavaScript function for the perf map test: hotLoopJs runs
// for the given milliseconds (argv[2]), in calls of about a millisecond
// each, so the optimizing compiler makes JIT code of it that the samples
// land in. Run with --perf-basic-prof (Node writes /tmp/perf-<pid>.map).
'use strict';
function hotLoopJs(n) {
	let x = 0;
	for (let i = 0; i < n; i++) {
		x = (x * 1103515245 + i) | 0;
		x ^= x >>> 13;
	}
	return x;
}
const end = Date.now() + Number(process.argv[2] || 3000);
let sum = 0;
while (Date.now() < end) sum += hotLoopJs(200000);
console.log('done', sum);
