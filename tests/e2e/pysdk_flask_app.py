# The Flask service of the Python package's end-to-end test
# (run_pysdk_gunicorn_test.sh), served by gunicorn: one line enables
# traceprof. /slow/<ms> spends ms of its thread's CPU time in
# slow_checkout_work, hashing with SHA-256 (libcrypto: the only native code
# no other part of the service runs, so its frames mark in-request samples);
# /fast does a little pure Python. Each answer says the server span id
# (read back from the thread record) and the view's CPU time, for the load
# generator's ground truth.
import hashlib
import os
import sys
import time

from flask import Flask

import traceprof

app = Flask(__name__)
app.wsgi_app = traceprof.WSGIMiddleware(app.wsgi_app, service_name="py-flask")

BLOCK = b"traceprof" * 7282  # 64 KiB
print("app loaded in %d, traceprof %s" % (os.getpid(), "on" if traceprof.library() else "off"),
      file=sys.stderr, flush=True)


def slow_checkout_work(cpu_ms):
    end = time.thread_time() + cpu_ms / 1000
    h = hashlib.sha256()
    while time.thread_time() < end:
        for _ in range(8):
            h.update(BLOCK)
    return h.hexdigest()


def fast_work():
    return str(sum(i * i for i in range(2000)))


def answer(body, cpu0):
    ctx = traceprof.thread_context()
    cpu_us = int((time.thread_time() - cpu0) * 1e6)
    return body, 200, {"X-Span-Id": ctx[1] if ctx else "", "X-Server-Cpu-Us": str(cpu_us)}


@app.route("/slow/<int:cpu_ms>")
def slow(cpu_ms):
    cpu0 = time.thread_time()
    return answer(slow_checkout_work(min(cpu_ms, 2000)), cpu0)


@app.route("/fast")
def fast():
    cpu0 = time.thread_time()
    return answer(fast_work(), cpu0)
