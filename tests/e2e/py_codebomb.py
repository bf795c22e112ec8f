"""A Python process that attacks the agent's memory (e2e_agent_python_hostile).

Until the file STOP exists (SECONDS at most), it runs chains of 40 nested
calls whose code objects are all new each round, each with a location
table of about 64 KiB (the most the agent reads of one; all share one
table, so the attacker itself stays small): every sample of it names 40
code objects the agent has not seen, each asking to be cached with
64 KiB. An agent whose cache is bounded by entries only holds
16,384 of them (about 1 GiB). The tables are never read by the
interpreter itself (no exception, no tracing, no line lookup).

usage: python3.11 py_codebomb.py STOP SECONDS
"""
import collections
import os
import sys
import time
import types


def step(n, fs):
    x = 0
    for i in range(300):
        x += i
    if n:
        fs[n - 1](n - 1, fs)
    return x


def main():
    stop, seconds = sys.argv[1], float(sys.argv[2])
    base = step.__code__
    # one table for all (the attacker's memory stays small); every code
    # object is new, named anew, and lives for the next 100 rounds so that
    # the agent reads it whole
    table = base.co_linetable + bytes([0x80 | (15 << 3)]) * (65000 - len(base.co_linetable))
    end = time.time() + seconds
    rounds = 0
    alive = collections.deque(maxlen=100)
    while time.time() < end and not os.path.exists(stop):
        fs = []
        for k in range(40):
            name = "step_%d_%d" % (rounds, k)
            code = base.replace(co_name=name, co_qualname=name, co_linetable=table)
            fs.append(types.FunctionType(code, globals()))
        fs[-1](39, fs)
        alive.append(fs)
        rounds += 1
    print("rounds", rounds)


main()
