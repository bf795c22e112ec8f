"""Short-lived functions of two modules under churn (e2e_agent_python).

Writes moda.py and modb.py into DIR and runs them in two threads until
the file STOP exists (SECONDS seconds at most): moda's thread calls a lambda through a generator
expression and closures made per call; modb's thread makes lambdas,
functions defined per call, classes created at run time and code
compiled at run time, and drops them at once, so their memory is freed
and reused while moda's frames are sampled. Each frame the agent stores
for these files must be named with its own module: py_churn_check.py
holds the names each file may have.

With GO, it waits (asleep) until the file GO exists before it starts:
the tests start it beside a workload whose shares of CPU time they check,
and let it churn only once that workload is done, so that it does not
compete with it for the CPUs.

usage: python3 py_churn.py DIR STOP SECONDS [GO]
"""
import os
import sys
import threading
import time

MODA = '''
def lam(n):
    f = lambda v: v * 3 + 1
    return sum(f(i) for i in range(n))


def closure_maker(k):
    def inner(x):
        return x + k
    return inner


def run(n):
    t = 0
    for _ in range(n):
        t += lam(2000)
        g = closure_maker(3)
        t += sum(g(i) for i in range(500))
    return t
'''

MODB = '''
def churn(n):
    t = 0
    for i in range(n):
        f = lambda v: v + i

        def per_call(x, i=i):
            return x * i
        C = type("Dyn", (), {"m": lambda self, x: x + 1})
        t += sum(f(j) + per_call(j) for j in range(200))
        t += C().m(i)
        ns = {"__name__": "modb"}
        exec(compile("def made(x):\\n    return x * 2\\n", "modb_gen", "exec"), ns)
        t += sum(ns["made"](j) for j in range(50))
    return t
'''


def main():
    where, stop, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    go = sys.argv[4] if len(sys.argv) > 4 else None
    for name, text in (("moda", MODA), ("modb", MODB)):
        with open(os.path.join(where, name + ".py"), "w") as f:
            f.write(text)
    sys.path.insert(0, where)
    import moda
    import modb

    end = time.time() + seconds
    while go and not os.path.exists(go) and not os.path.exists(stop) and time.time() < end:
        time.sleep(0.05)
    if go:
        end = min(end, time.time() + 4)  # 4 s of churn: thousands of samples at 997 Hz

    def loop(fn):
        while time.time() < end and not os.path.exists(stop):
            fn(20)

    threads = [threading.Thread(target=loop, args=(moda.run,)),
               threading.Thread(target=loop, args=(modb.churn,))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


main()
