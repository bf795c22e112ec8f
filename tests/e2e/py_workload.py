"""A Python workload with ground truth for e2e_agent_python (docs/python.md).

Two threads for SECONDS seconds of CPU each:
- main: rounds of 10 ms of its CPU time split 40/30/30 between burn_a()
  (a loop), recurse(5) -> burn_b() (recursion), and via_json(), where
  json.dumps (a C extension) calls json_cb() back for each object and
  json_cb() runs burn_c();
- worker: worker_hash(), sha256 of 256 KiB in C with the GIL released.
Each function's inclusive CPU time is measured with time.thread_time()
around its calls; at the end it prints one line per function:
  TRUTH <name> <cpu seconds>
and LINES <first> <last> of burn_a's loop body, then THREADCPU <seconds>
per thread.

usage: python3.11 py_workload.py SECONDS [GO]
"""
import hashlib
import os
import json
import sys
import threading
import time

cpu = {}


def add(name, t):
    cpu[name] = cpu.get(name, 0.0) + t


def burn_a():
    x = 0
    for i in range(3000):  # hot: burn_a
        x += i * i % 7  # hot: burn_a
    return x


def burn_b():
    x = 0
    for i in range(3000):
        x ^= i * 3
    return x


def recurse(n):
    if n == 0:
        return burn_b()
    return recurse(n - 1)


def burn_c():
    # long next to json_cb's own timing (a thread_time() system call and a
    # dict update, which its samples include and its truth cannot): at 600
    # rounds that overhead was about 4 % of json_cb, a point of its share
    x = 1
    for i in range(3000):
        x = (x * 31 + i) % 1000003
    return x


def json_cb(o):
    t = time.thread_time()
    r = burn_c()
    add("json_cb", time.thread_time() - t)
    return r


class Opaque:
    pass


def via_json():
    return json.dumps([Opaque() for _ in range(4)], default=json_cb)


def timed(name, fn, *args):
    t = time.thread_time()
    fn(*args)
    add(name, time.thread_time() - t)


def main_loop(seconds, done):
    shares = (("burn_a", 0.4, burn_a, ()), ("recurse", 0.3, recurse, (5,)),
              ("via_json", 0.3, via_json, ()))
    start = time.thread_time()
    while not done.is_set() and time.thread_time() - start < seconds:
        for name, share, fn, args in shares:
            end = time.thread_time() + 0.010 * share
            while time.thread_time() < end:
                timed(name, fn, *args)
    add("main_thread", time.thread_time() - start)


data = b"x" * (256 << 10)


def worker_hash():
    return hashlib.sha256(data).digest()


def worker(seconds, done):
    start = time.thread_time()
    while not done.is_set() and time.thread_time() - start < seconds:
        timed("worker_hash", worker_hash)
    add("worker_thread", time.thread_time() - start)


seconds = float(sys.argv[1])
# with GO: asleep until the file GO exists (the tests start the agent in
# between, so that it samples the whole measured run), at most a minute
go_end = time.time() + 60
while len(sys.argv) > 2 and not os.path.exists(sys.argv[2]) and time.time() < go_end:
    time.sleep(0.05)
done = threading.Event()
w = threading.Thread(target=worker, args=(seconds, done), name="worker")
w.start()
main_loop(seconds, done)
w.join()
with open(__file__) as f:
    lines = [i for i, text in enumerate(f, 1) if text.rstrip().endswith("# hot: burn_a")]
for name, t in sorted(cpu.items()):
    print("TRUTH %s %.6f" % (name, t))
print("LINES %d %d" % (lines[-2], lines[-1]))
