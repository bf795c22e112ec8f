# Load generator with ground truth for run_pysdk_gunicorn_test.sh: FAST
# requests to /fast and SLOW to /slow/MS, shuffled, CONCURRENCY at a time,
# each with a traceparent of a known random trace id and parent span id.
# Writes the truth CSV (the columns of lib.sh's load_truth); exits 1 when a
# request failed.
# usage: pysdk_load.py PORT OUT.csv FAST SLOW MS CONCURRENCY SEED
import csv
import http.client
import random
import sys
import threading
import time

port, out = int(sys.argv[1]), sys.argv[2]
n_fast, n_slow, slow_ms, conc, seed = (int(x) for x in sys.argv[3:8])
rnd = random.Random(seed)
jobs = [("/fast", "/fast")] * n_fast + [("/slow/%d" % slow_ms, "/slow/<int:cpu_ms>")] * n_slow
rnd.shuffle(jobs)
jobs = [(p, r, "%032x" % rnd.getrandbits(128), "%016x" % rnd.getrandbits(64)) for p, r in jobs]
rows, errors, lock = [], [], threading.Lock()
it = iter(jobs)


def worker():
    while True:
        with lock:
            job = next(it, None)
        if job is None:
            return
        path, route, trace, parent = job
        t0 = time.time()
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", path, headers={"traceparent": "00-%s-%s-01" % (trace, parent)})
            r = c.getresponse()
            r.read()
            dur = time.time() - t0
            c.close()
        except OSError as e:
            with lock:
                errors.append("%s: %s" % (path, e))
            continue
        with lock:
            rows.append([trace, parent, r.getheader("X-Span-Id", ""), "GET", route, path, r.status,
                         int(t0 * 1e6), int(dur * 1e6), r.getheader("X-Server-Cpu-Us", "0")])


threads = [threading.Thread(target=worker) for _ in range(conc)]
for t in threads:
    t.start()
for t in threads:
    t.join()
with open(out, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["trace_id", "parent_span_id", "server_span_id", "method", "route", "path", "status",
                "start_unix_us", "duration_us", "server_cpu_us"])
    w.writerows(rows)
print("requests %d errors %d" % (len(rows), len(errors)))
for e in errors[:5]:
    print(e)
sys.exit(1 if errors or any(r[6] != 200 for r in rows) else 0)
