"""What the Python package (sdk/python) costs per request, in ns of the
thread's CPU time, median of rounds: the ctypes calls alone and the whole WSGI middleware against the
bare app. The exporter runs and sends to a local OTLP sink (another
process), as in a service; the queue is large enough that no span is
dropped (printed), and each round waits for the previous one's export.

usage: python3 bench/python_sdk.py LIBTRACEPROF_SDK_SO [--rounds 9] [--requests 50000]
Never fails on timing.
"""

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "sdk", "python"))
import traceprof  # noqa: E402
from traceprof import _native  # noqa: E402

SINK = r"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""

# the calling thread's CPU time: on a shared machine, time on the CPU is
# what a request costs; wall-clock time would add whatever else ran
clock = time.thread_time_ns

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]


def sr(status, headers, exc_info=None):
    return None


def env():
    return {"REQUEST_METHOD": "GET", "PATH_INFO": "/api/items", "HTTP_TRACEPARENT": TP}


def run_bare(n):
    e = env()
    t = clock()
    for _ in range(n):
        body = app(e, sr)
        for _chunk in body:
            pass
        close = getattr(body, "close", None)
        if close is not None:
            close()
    return clock() - t


def run_middleware(mw, n):
    e = env()
    t = clock()
    for _ in range(n):
        body = mw(e, sr)
        for _chunk in body:
            pass
        close = getattr(body, "close", None)
        if close is not None:
            close()
    return clock() - t


def run_span(lib, n):
    st = lib.thread()
    begin, end = lib.span_begin, lib.span_end
    addr = st.ref if hasattr(st, "ref") else st.addr  # (the first version: an int)
    tp = TP.encode()
    ln = len(tp)
    t = clock()
    for _ in range(n):
        begin(addr, tp, ln)
        end(addr, b"GET", b"/api/items", 200)
    return clock() - t


def run_attach(lib, n):
    attach, detach = lib.attach, lib.detach
    tid, sid = bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736"), bytes.fromhex("00f067aa0ba902b7")
    t = clock()
    for _ in range(n):
        attach(tid, sid, 1, None, 0)
        detach()
    return clock() - t


def run_loop(n):
    t = clock()
    for _ in range(n):
        pass
    return clock() - t


def drain(lib):
    for _ in range(500):
        s = lib.export_stats()
        if s["spans_exported"] + s["spans_dropped_error"] + s["spans_dropped_full"] >= s["spans_ended"]:
            return
        time.sleep(0.01)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("library")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--requests", type=int, default=50000)
    a = ap.parse_args()
    sink = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
    try:
        port = int(sink.stdout.readline())
        lib = traceprof.enable("bench", library=a.library)
        lib.export_stop(100)
        o = _native.ExportOpts(b"http://127.0.0.1:%d/v1/traces" % port, 65536, 4096, 100, 5000)
        assert lib.dll.tp_sdk_export_start(ctypes.byref(o)) == 0
        mw = traceprof.WSGIMiddleware(app)
        n = a.requests
        kinds = {
            "empty loop": lambda: run_loop(n),
            "bare WSGI app (call, iterate, close)": lambda: run_bare(n),
            "tp_sdk_attach + tp_sdk_detach through ctypes": lambda: run_attach(lib, n),
            "tp_sdk_span_begin + tp_sdk_span_end through ctypes": lambda: run_span(lib, n),
            "app under WSGIMiddleware": lambda: run_middleware(mw, n),
        }
        res = {k: [] for k in kinds}
        for _ in range(a.rounds):  # interleaved: each round runs every kind
            for k, f in kinds.items():
                res[k].append(f() / n)
                drain(lib)
        print("python %s, %d rounds of %d requests, ns of thread CPU time per request"
              % (sys.version.split()[0], a.rounds, n))
        print("%-55s %10s %18s" % ("what", "ns median", "fastest-slowest"))
        for k, v in res.items():
            print("%-55s %10.0f %8.0f-%-8.0f" % (k, statistics.median(v), min(v), max(v)))
        over = [m - b for m, b in zip(res["app under WSGIMiddleware"], res["bare WSGI app (call, iterate, close)"])]
        print("%-55s %10.0f" % ("middleware overhead per request (paired rounds)", statistics.median(over)))
        print("export:", lib.export_stats())
    finally:
        sink.kill()
        sink.wait()


if __name__ == "__main__":
    main()
