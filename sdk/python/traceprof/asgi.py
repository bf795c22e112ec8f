"""The ASGI middleware: one server span per HTTP request, and the request's
context attached to the event loop's thread exactly while the request's own
code runs.

An event loop runs many requests on one thread, switching between them at
every await. The OTEP 4947 thread record names one request at a time, so
the middleware attaches the request's context each time the event loop
resumes the request's coroutine and detaches it each time the coroutine
suspends (an awaitable wrapped around the app's coroutine: its send() and
throw() attach, call the app's, and detach in a finally). Code the loop
runs between tasks (protocol callbacks, other requests' tasks) is never
tagged with this request. Tasks the request starts (asyncio.create_task
from inside it) carry its context too: a task factory, installed on the
loop at the first request, wraps a new task's coroutine the same way when
it is created inside a request (a context variable says which). Work sent
to threads (run_in_executor, Starlette's sync endpoints) is not tagged.

Cost: one attach and one detach per resumption of the request's coroutine
(about 1 us through ctypes; bench/results.md, "ASGI").
"""

import asyncio
import contextvars
import ctypes
import logging

from ._native import Span

log = logging.getLogger("traceprof")

# the request whose code is running, as seen by tasks created inside it
_current = contextvars.ContextVar("traceprof_request", default=None)


class _Request:
    """One request's context: what attach needs, and its span."""

    __slots__ = ("lib", "trace_id", "span_id", "flags", "span", "ref")

    def __init__(self, lib, span):
        self.lib = lib
        self.span = span
        self.ref = ctypes.byref(span)
        self.trace_id = bytes(span.trace_id)
        self.span_id = bytes(span.span_id)
        self.flags = span.trace_flags


class _Attached:
    """Awaiting it runs coro with req's context attached while it runs."""

    __slots__ = ("coro", "req")

    def __init__(self, coro, req):
        self.coro, self.req = coro, req

    def __await__(self):
        return self

    def __iter__(self):
        return self

    def __next__(self):
        return self.send(None)

    def send(self, value):
        r = self.req
        r.lib.attach(r.trace_id, r.span_id, r.flags, None, 0)
        try:
            return self.coro.send(value)
        finally:
            r.lib.detach()

    def throw(self, *exc):
        r = self.req
        r.lib.attach(r.trace_id, r.span_id, r.flags, None, 0)
        try:
            return self.coro.throw(*exc)
        finally:
            r.lib.detach()

    def close(self):
        return self.coro.close()


async def _run_attached(coro, req):
    return await _Attached(coro, req)


def _install_factory(loop):
    """Wraps the tasks created inside a request (once per loop)."""
    previous = loop.get_task_factory()
    if getattr(previous, "_traceprof", False):
        return

    def factory(loop, coro, **kwargs):
        req = _current.get()
        if req is not None and asyncio.iscoroutine(coro):
            coro = _run_attached(coro, req)
        if previous is not None:
            return previous(loop, coro, **kwargs)
        return asyncio.Task(coro, loop=loop, **kwargs)

    factory._traceprof = True
    loop.set_task_factory(factory)


def _header(scope, name):
    for k, v in scope.get("headers") or ():
        if k == name:
            return v
    return None


class ASGIMiddleware:
    """Wraps an ASGI app (Starlette, FastAPI, any ASGI 3 app): each HTTP
    request begins a server span (the trace of its traceparent header, else
    a new trace; a new span id), runs the app with that context attached
    while its coroutine runs, and ends the span (method, route or path,
    status, duration) when the app returns, also when it raises; the span is
    exported over OTLP by libtraceprof-sdk. Other scopes (lifespan,
    websocket) pass through untagged.

    service_name, library, endpoint, attributes: see traceprof.enable().
    Without the library, requests pass through untouched (logged once)."""

    def __init__(self, app, service_name=None, library=None, endpoint=None, attributes=None):
        from . import enable

        self.app = app
        self.lib = enable(service_name, library, endpoint, attributes)

    async def __call__(self, scope, receive, send):
        lib = self.lib
        if lib is None or scope.get("type") != "http" or _current.get() is not None:
            return await self.app(scope, receive, send)
        _install_factory(asyncio.get_running_loop())
        span = Span()
        req = _Request(lib, span)
        tp = _header(scope, b"traceparent")
        lib.span_begin(req.ref, tp, len(tp) if tp else 0)  # attaches: detached below
        lib.detach()
        req.trace_id, req.span_id, req.flags = bytes(span.trace_id), bytes(span.span_id), span.trace_flags
        status = [0]

        async def send_status(message):
            if message.get("type") == "http.response.start":
                status[0] = int(message.get("status") or 0)
            await send(message)

        token = _current.set(req)
        try:
            await _Attached(self.app(scope, receive, send_status), req)
        except BaseException:
            if not status[0]:
                status[0] = 500
            raise
        finally:
            _current.reset(token)
            route = scope.get("route")
            route = getattr(route, "path", None) or scope.get("path") or "/"
            method = (scope.get("method") or "GET").encode("latin-1", "replace")
            # span_end detaches the calling thread's record: attach first
            lib.attach(req.trace_id, req.span_id, req.flags, None, 0)
            lib.span_end(req.ref, method, route.encode("utf-8", "replace"), status[0])
