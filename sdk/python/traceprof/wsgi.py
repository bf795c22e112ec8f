"""The WSGI middleware: one server span per request, attached as the
serving thread's context from the request's first byte of app code to the
close() of its response (the end of the response body).
"""

import logging
from threading import get_ident

log = logging.getLogger("traceprof")

_names = {}  # str -> bytes for methods and route templates (bounded)
_codes = {}  # status line -> code (bounded)


def _bytes(s):
    b = _names.get(s)
    if b is None:
        try:
            b = s.encode("latin-1")  # what WSGI strings hold
        except UnicodeEncodeError:
            b = s.encode("utf-8", "replace")
        if len(_names) < 4096:
            _names[s] = b
    return b


def _end(lib, st):
    """Ends st's open span on the calling thread: detach, queue for export."""
    st.open = False
    st.sr.inner = None
    env, st.env = st.env, None
    method = env.get("REQUEST_METHOD") or "GET"
    method = _names.get(method) or _bytes(method)
    route = st.route
    if route is not None:
        route = _names.get(route) or _bytes(route)
    else:  # no template known: the path (cut to 127 bytes by the SDK)
        route = (env.get("PATH_INFO") or "/").encode("latin-1", "replace")
    lib.span_end(st.ref, method, route, st.status)


class _StartResponse:
    """start_response wrapper made once per thread: it records the status."""

    __slots__ = ("st", "inner")

    def __init__(self, st):
        self.st, self.inner = st, None

    def __call__(self, status, headers, exc_info=None):
        code = _codes.get(status)
        if code is None:
            try:
                code = int(status[:3])
            except ValueError:
                code = 0
            if len(_codes) < 1024:
                _codes[status] = code
        self.st.status = code
        if exc_info is None:
            return self.inner(status, headers)
        return self.inner(status, headers, exc_info)


class _Body:
    """The app's response iterable; close() ends the request's span."""

    __slots__ = ("body", "lib", "st", "env")

    def __init__(self, body, lib, st, env):
        self.body, self.lib, self.st, self.env = body, lib, st, env

    def __iter__(self):
        return iter(self.body)

    def close(self):
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            st = self.st
            # only the serving thread can detach its own context: closed
            # elsewhere, the span ends when that thread's next request starts
            if st.open and st.env is self.env and st.ident == get_ident():
                _end(self.lib, st)


def _hook_flask(app, lib):
    """Flask: a before_request function that records the matched rule
    ("/item/<int:id>") as the span's route instead of the path."""
    owner = app if hasattr(app, "url_map") else getattr(app, "__self__", None)
    if owner is None or not hasattr(owner, "url_map") or not hasattr(owner, "before_request"):
        return
    try:
        from flask import request
    except ImportError:
        return

    def traceprof_route():
        rule = request.url_rule
        if rule is not None:
            lib.thread().route = rule.rule

    try:
        owner.before_request(traceprof_route)
    except Exception as e:  # e.g. registered after the first request
        log.warning("traceprof: Flask routes not recorded (%s); spans carry paths", e)


class WSGIMiddleware:
    """Wraps a WSGI app: each request attaches the OTEP 4947 thread context
    (the trace of the incoming traceparent header, else a new trace; a new
    server span id) and detaches it when the response is closed, also when
    the app raises; the server span (method, route or path, status, start,
    duration) is exported over OTLP by libtraceprof-sdk.

    service_name, library, endpoint, attributes: see traceprof.enable(),
    which the first middleware calls. Without the library, requests pass
    through untouched (the error is logged once)."""

    def __init__(self, app, service_name=None, library=None, endpoint=None, attributes=None):
        from . import enable

        self.app = app
        self.lib = enable(service_name, library, endpoint, attributes)
        if self.lib is not None:
            _hook_flask(app, self.lib)

    def __call__(self, environ, start_response):
        lib = self.lib
        if lib is None:
            return self.app(environ, start_response)
        try:
            st = lib.tls.state
        except AttributeError:
            st = lib.thread()
        if st.in_app:  # a nested WSGI call: the outer request's context stays
            return self.app(environ, start_response)
        if st.open:  # the previous response was never closed on this thread
            _end(lib, st)
        tp = environ.get("HTTP_TRACEPARENT")
        if tp:
            b = tp.encode("latin-1", "replace")
            lib.span_begin(st.ref, b, len(b))  # invalid: a new trace
        else:
            lib.span_begin(st.ref, None, 0)
        st.open, st.status, st.route, st.env = True, 0, None, environ
        sr = st.sr
        sr.inner = start_response
        st.in_app = True
        try:
            body = self.app(environ, sr)
        except BaseException:
            st.in_app = False
            st.status = 500
            _end(lib, st)
            raise
        st.in_app = False
        return _Body(body, lib, st, environ)
