"""The Python package against the real libtraceprof-sdk: what an agent reads
from the thread record (through otel_thread_ctx_v1, not the package's own
state) during and after requests, under a threaded WSGI server, and the
spans exported over OTLP/HTTP.

usage: TRACEPROF_SDK_LIBRARY=.../libtraceprof-sdk.so python3 -m unittest test_traceprof
(the package directory, sdk/python, on PYTHONPATH)
"""

import asyncio
import http.server
import io
import os
import socketserver
import subprocess
import sys
import threading
import unittest
import urllib.request
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

import traceprof

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def traceparent(trace, parent=PARENT):
    return f"00-{trace}-{parent}-01"


class Sink(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint keeping the bodies it was sent."""

    bodies = []
    got = threading.Event()

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        Sink.bodies.append(self.rfile.read(n))
        Sink.got.set()
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def call(mw, environ=None, app_seen=None):
    """One request through the middleware as a WSGI server does it."""
    env = {"REQUEST_METHOD": "GET", "PATH_INFO": "/x", "wsgi.input": io.BytesIO()}
    env.update(environ or {})
    status = []
    body = mw(env, lambda s, h, e=None: status.append(s))
    try:
        out = b"".join(body)
    finally:
        body.close()
    return status, out


class Recorder:
    """A WSGI app that records the thread context it runs under."""

    def __init__(self, fail=False):
        self.seen, self.fail = [], fail

    def __call__(self, environ, start_response):
        self.seen.append(traceprof.thread_context())
        if self.fail:
            raise RuntimeError("the app failed")
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]


SINK = None


def setUpModule():
    # one enable per process (later calls return the first's result): the
    # spans go to this sink from the start
    global SINK
    SINK = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=SINK.serve_forever, daemon=True).start()
    endpoint = "http://127.0.0.1:%d/v1/traces" % SINK.server_address[1]
    assert traceprof.enable(service_name="py-unit", endpoint=endpoint) is not None, "libtraceprof-sdk did not load"


def tearDownModule():
    SINK.shutdown()


class Middleware(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lib = traceprof.library()
        cls.sink = SINK

    def test_traceparent_trace_attached_then_detached(self):
        app = Recorder()
        mw = traceprof.WSGIMiddleware(app)
        self.assertIsNone(traceprof.thread_context())
        call(mw, {"HTTP_TRACEPARENT": traceparent(TRACE)})
        trace, span, flags = app.seen[0]
        self.assertEqual(trace, TRACE)
        self.assertNotIn(span, (PARENT, "0" * 16))  # the server span's own id
        self.assertEqual(flags, 1)
        self.assertIsNone(traceprof.thread_context())

    def test_fresh_trace_without_or_with_malformed_traceparent(self):
        app = Recorder()
        mw = traceprof.WSGIMiddleware(app)
        bad = [
            None,
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace
            "ff-" + TRACE + "-" + PARENT + "-01",  # version ff
            TRACE,
            "00-" + TRACE + "-" + PARENT + "-0",  # short
            "\u00e9" * 55,
            "",
        ]
        for tp in bad:
            call(mw, {} if tp is None else {"HTTP_TRACEPARENT": tp})
        traces = [s[0] for s in app.seen]
        self.assertTrue(all(s is not None for s in app.seen), app.seen)
        self.assertNotIn(TRACE, traces)
        self.assertEqual(len(set(traces)), len(bad), "each request a new trace")
        self.assertIsNone(traceprof.thread_context())

    def test_detached_when_the_app_raises(self):
        app = Recorder(fail=True)
        mw = traceprof.WSGIMiddleware(app)
        before = self.lib.export_stats()["spans_ended"]
        with self.assertRaises(RuntimeError):
            call(mw, {"HTTP_TRACEPARENT": traceparent(TRACE)})
        self.assertEqual(app.seen[0][0], TRACE)
        self.assertIsNone(traceprof.thread_context())
        self.assertEqual(self.lib.export_stats()["spans_ended"], before + 1)
        # and the next request on the thread starts clean
        ok = Recorder()
        call(traceprof.WSGIMiddleware(ok))
        self.assertNotEqual(ok.seen[0][0], TRACE)
        self.assertIsNone(traceprof.thread_context())

    def test_detached_when_the_body_raises(self):
        def app(environ, start_response):
            start_response("200 OK", [])
            yield traceprof.thread_context()[0].encode()
            raise ValueError("mid-body")

        mw = traceprof.WSGIMiddleware(app)
        env = {"REQUEST_METHOD": "GET", "PATH_INFO": "/g", "HTTP_TRACEPARENT": traceparent(TRACE)}
        body = mw(env, lambda s, h, e=None: None)
        it = iter(body)
        self.assertEqual(next(it), TRACE.encode())
        with self.assertRaises(ValueError):
            next(it)
        self.assertEqual(traceprof.thread_context()[0], TRACE)  # until the server closes
        body.close()
        self.assertIsNone(traceprof.thread_context())

    def test_unclosed_response_ends_at_the_next_request(self):
        app = Recorder()
        mw = traceprof.WSGIMiddleware(app)
        mw({"REQUEST_METHOD": "GET", "HTTP_TRACEPARENT": traceparent(TRACE)}, lambda s, h: None)
        self.assertEqual(traceprof.thread_context()[0], TRACE)
        call(mw)
        self.assertNotEqual(app.seen[1][0], TRACE)
        self.assertIsNone(traceprof.thread_context())

    def test_threaded_server_each_thread_its_own_request(self):
        n = 8
        barrier = threading.Barrier(n, timeout=10)

        def app(environ, start_response):
            first = traceprof.thread_context()
            barrier.wait()  # all n requests are in flight at once here
            second = traceprof.thread_context()
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [("%s %s %s %s" % (first[0], first[1], second[0], second[1])).encode()]

        class Server(socketserver.ThreadingMixIn, WSGIServer):
            daemon_threads = True

        class Quiet(WSGIRequestHandler):
            def log_message(self, *a):
                pass

        srv = Server(("127.0.0.1", 0), Quiet)
        srv.set_app(traceprof.WSGIMiddleware(app))
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        traces = ["%032x" % (0x1000 + k) for k in range(n)]
        got = {}

        def client(t):
            req = urllib.request.Request(
                "http://127.0.0.1:%d/t" % srv.server_address[1],
                headers={"traceparent": traceparent(t)},
            )
            with urllib.request.urlopen(req, timeout=10) as r:
                got[t] = r.read().decode().split()

        threads = [threading.Thread(target=client, args=(t,)) for t in traces]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        srv.shutdown()
        srv.server_close()
        self.assertEqual(sorted(got), sorted(traces))
        spans = set()
        for t, (t1, s1, t2, s2) in got.items():
            self.assertEqual((t1, t2), (t, t), "a thread saw another request's trace")
            self.assertEqual(s1, s2)
            spans.add(s1)
        self.assertEqual(len(spans), n, "each request its own server span")

    def test_spans_exported_over_otlp(self):
        endpoint = "http://127.0.0.1:%d/v1/traces" % self.sink.server_address[1]
        self.lib.export_stop(2000)
        self.assertEqual(self.lib.export_start(endpoint, interval_ms=50), 0)
        Sink.bodies.clear()
        Sink.got.clear()
        trace = "%032x" % 0xABCDEF

        def app(environ, start_response):
            traceprof.set_route("/item/{id}")
            start_response("404 Not Found", [])
            return [b""]

        call(traceprof.WSGIMiddleware(app), {"HTTP_TRACEPARENT": traceparent(trace), "PATH_INFO": "/item/7"})
        self.assertTrue(Sink.got.wait(10), "no export request")
        body = b"".join(Sink.bodies)
        self.assertIn(bytes.fromhex(trace), body)
        self.assertIn(bytes.fromhex(PARENT), body)  # the parent span id
        self.assertIn(b"GET /item/{id}", body)
        self.assertIn(b"py-unit", body)


class Fork(unittest.TestCase):
    def test_forked_child_publishes_its_process_context(self):
        self.assertIsNotNone(traceprof.library())
        with open("/proc/self/maps") as f:
            self.assertIn("OTEL_CTX", f.read())
        pid = os.fork()
        if pid == 0:  # the mapping is not inherited (MADV_DONTFORK): published again
            with open("/proc/self/maps") as f:
                os._exit(0 if "OTEL_CTX" in f.read() else 3)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, "no process context in the child")


class FakeKind:
    def __init__(self, name):
        self.name = name


class FakeCtx:
    def __init__(self, trace_id, span_id, flags=1):
        self.trace_id, self.span_id, self.trace_flags = trace_id, span_id, flags


class FakeSpan:
    """What the processor uses of opentelemetry.sdk.trace.Span."""

    def __init__(self, kind, trace_id, span_id):
        self.kind = FakeKind(kind)
        self.context = FakeCtx(trace_id, span_id)

    def get_span_context(self):
        return self.context


class OpenTelemetryProcessor(unittest.TestCase):
    def test_server_spans_attach_and_detach(self):
        p = traceprof.SpanProcessor(service_name="py-unit")
        outer = FakeSpan("SERVER", 0x11, 0x22)
        inner = FakeSpan("SERVER", 0x33, 0x44)
        internal = FakeSpan("INTERNAL", 0x55, 0x66)
        p.on_start(outer, None)
        self.assertEqual(traceprof.thread_context(), ("%032x" % 0x11, "%016x" % 0x22, 1))
        p.on_start(internal, None)
        self.assertEqual(traceprof.thread_context()[0], "%032x" % 0x11)
        p.on_start(inner, None)
        self.assertEqual(traceprof.thread_context()[1], "%016x" % 0x44)
        p.on_end(internal)
        p.on_end(inner)
        self.assertEqual(traceprof.thread_context()[1], "%016x" % 0x22)
        p.on_end(outer)
        self.assertIsNone(traceprof.thread_context())

    def test_span_ended_on_another_thread_is_left_alone(self):
        p = traceprof.SpanProcessor()
        s = FakeSpan("SERVER", 0x77, 0x88)
        p.on_start(s, None)
        t = threading.Thread(target=p.on_end, args=(s,))
        t.start()
        t.join()
        self.assertEqual(traceprof.thread_context()[0], "%032x" % 0x77)
        p.on_end(s)
        self.assertIsNone(traceprof.thread_context())


class MissingLibrary(unittest.TestCase):
    def test_service_runs_untagged_and_logs_once(self):
        code = """
import io, logging, traceprof
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
calls = []
def app(environ, start_response):
    calls.append(traceprof.thread_context())
    start_response("200 OK", [])
    return [b"ok"]
for _ in range(2):
    mw = traceprof.WSGIMiddleware(app, service_name="x")
    body = mw({"REQUEST_METHOD": "GET", "PATH_INFO": "/"}, lambda s, h, e=None: None)
    assert b"".join(body) == b"ok"
assert calls == [None, None], calls
print("served", len(calls))
"""
        env = dict(os.environ, TRACEPROF_SDK_LIBRARY="/nonexistent/libtraceprof-sdk.so")
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("served 2", r.stdout)
        self.assertEqual(r.stderr.count("requests are not tagged"), 1, r.stderr)
        self.assertIn("/nonexistent/libtraceprof-sdk.so", r.stderr)


class ASGI(unittest.TestCase):
    """The ASGI middleware on a real asyncio loop: requests interleaved at
    every await, each seeing its own trace exactly while its code runs, a
    task it creates carrying its trace, nothing attached between them."""

    def run_requests(self, app, traces):
        mw = traceprof.ASGIMiddleware(app)
        sent = {}

        async def one(trace):
            scope = {"type": "http", "method": "GET", "path": "/a",
                     "headers": [(b"traceparent", traceparent(trace).encode())]}
            msgs = []

            async def receive():
                return {"type": "http.request", "body": b""}

            async def send(m):
                msgs.append(m)

            await mw(scope, receive, send)
            sent[trace] = msgs

        async def main():
            between = []

            async def watcher():  # a task of no request, running between them
                for _ in range(20):
                    between.append(traceprof.thread_context())
                    await asyncio.sleep(0)

            w = asyncio.ensure_future(watcher())
            await asyncio.gather(*(one(t) for t in traces))
            await w
            return between

        between = asyncio.run(main())
        return sent, between

    def test_interleaved_requests_each_their_own_trace(self):
        seen = []

        async def app(scope, receive, send):
            mine = scope["headers"][0][1].decode().split("-")[1]
            for _ in range(10):
                ctx = traceprof.thread_context()
                seen.append((mine, ctx[0] if ctx else None))
                await asyncio.sleep(0)  # another request runs here

            async def child():
                ctx = traceprof.thread_context()
                seen.append((mine, ctx[0] if ctx else None))

            await asyncio.create_task(child())
            await send({"type": "http.response.start", "status": 201, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})

        traces = ["%032x" % (0x1000 + i) for i in range(5)]
        sent, between = self.run_requests(app, traces)
        self.assertEqual(len(seen), 5 * 11)
        wrong = [(m, got) for m, got in seen if m != got]
        self.assertEqual(wrong, [], "each step and each created task under its own request's trace")
        self.assertEqual([c for c in between if c is not None], [], "nothing attached between requests")
        self.assertIsNone(traceprof.thread_context(), "detached after the loop")
        self.assertEqual(sorted(sent), sorted(traces))

    def test_detached_when_the_app_raises(self):
        async def app(scope, receive, send):
            await asyncio.sleep(0)
            raise RuntimeError("the app failed")

        with self.assertRaises(RuntimeError):
            self.run_requests(app, ["%032x" % 0x2000])
        self.assertIsNone(traceprof.thread_context())

    def test_other_scopes_pass_untagged(self):
        seen = []

        async def app(scope, receive, send):
            seen.append(traceprof.thread_context())

        mw = traceprof.ASGIMiddleware(app)
        asyncio.run(mw({"type": "lifespan"}, None, None))
        self.assertEqual(seen, [None])


if __name__ == "__main__":
    unittest.main()
