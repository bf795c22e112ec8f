"""What traceprof's ASGI middleware costs (bench/results.md, "ASGI").

Runs an ASGI app directly on an asyncio loop (no server), bare and under
traceprof.ASGIMiddleware, alternately each round: requests whose handler
awaits SWITCHES times (each await suspends the request and resumes it:
one detach and one attach under the middleware), and requests that do not
await at all. Reports, per round, CPU time of the loop's thread
(time.thread_time_ns) per request; prints medians over the rounds of the
middleware's overhead per request and per switch. Never fails on timing.

usage: /usr/bin/python3 bench/asgi_cost.py LIBTRACEPROF_SDK.so [--rounds 9] [--requests 20000] [--switches 10]
"""
import argparse
import asyncio
import os
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "sdk", "python"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("library")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--switches", type=int, default=10)
    a = ap.parse_args()
    import traceprof

    assert traceprof.enable(service_name="asgi-bench", library=a.library) is not None

    def make_app(switches):
        async def app(scope, receive, send):
            for _ in range(switches):
                await asyncio.sleep(0)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})
        return app

    scope = {"type": "http", "method": "GET", "path": "/x",
             "headers": [(b"traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")]}

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(m):
        pass

    def run(app, n):
        async def many():
            for _ in range(n):
                await app(scope, receive, send)
        t0 = time.thread_time_ns()
        asyncio.run(many())
        return (time.thread_time_ns() - t0) / n

    kinds = {
        "bare, no await": make_app(0),
        "middleware, no await": traceprof.ASGIMiddleware(make_app(0)),
        "bare, %d awaits" % a.switches: make_app(a.switches),
        "middleware, %d awaits" % a.switches: traceprof.ASGIMiddleware(make_app(a.switches)),
    }
    res = {k: [] for k in kinds}
    for _ in range(a.rounds):
        for k, app in kinds.items():
            res[k].append(run(app, a.requests))
    names = list(kinds)
    per_req = [m - b for b, m in zip(res[names[0]], res[names[1]])]
    per_sw = [((m2 - b2) - (m - b)) / a.switches
              for b, m, b2, m2 in zip(res[names[0]], res[names[1]], res[names[2]], res[names[3]])]
    for k in names:
        print("%-28s %8.0f ns per request (median of %d rounds)" % (k, statistics.median(res[k]), a.rounds))
    print("middleware per request (no await): %.0f ns" % statistics.median(per_req))
    print("middleware per switch (detach + attach): %.0f ns" % statistics.median(per_sw))


main()
