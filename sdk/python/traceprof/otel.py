"""An OpenTelemetry SpanProcessor that attaches the thread context while a
server span runs: for services already traced with the OpenTelemetry Python
SDK (and its Flask/Django/WSGI instrumentations).

    from opentelemetry import trace
    import traceprof
    trace.get_tracer_provider().add_span_processor(traceprof.SpanProcessor(service_name="shop"))

Written against the documented interface of
opentelemetry.sdk.trace.SpanProcessor (on_start(span, parent_context),
on_end(span), shutdown(), force_flush(timeout_millis)); the opentelemetry
packages are not part of Debian 12, so the tests drive it with spans that
have the same attributes (kind, get_span_context() / context with
trace_id, span_id, trace_flags), not with the real SDK.

The OpenTelemetry SDK exports the spans itself: this processor only
attaches and detaches (no OTLP export through libtraceprof-sdk).
"""

import logging

from . import enable

log = logging.getLogger("traceprof")

try:  # the base class and SpanKind when the SDK is importable
    from opentelemetry.sdk.trace import SpanProcessor as _Base
except ImportError:  # duck-typed: TracerProvider only calls the methods
    _Base = object


def _is_server(span):
    kind = getattr(span, "kind", None)
    return getattr(kind, "name", kind) == "SERVER"


def _ids(ctx):
    return (
        ctx.trace_id.to_bytes(16, "big"),
        ctx.span_id.to_bytes(8, "big"),
        int(ctx.trace_flags) & 0xFF,
    )


class SpanProcessor(_Base):
    """Attaches each SERVER span's trace and span ids as the thread context
    when it starts and detaches it when it ends (re-attaching an enclosing
    server span of the same thread, if any). Spans of other kinds are left
    alone: the thread keeps serving the request of its server span.

    Spans must end on the thread that started them (true of the WSGI and
    threaded server instrumentations); one ended on another thread is
    forgotten on that thread's next server span."""

    def __init__(self, service_name=None, library=None, attributes=None):
        self.lib = enable(service_name, library, None, attributes)

    def on_start(self, span, parent_context=None):
        lib = self.lib
        if lib is None or not _is_server(span):
            return
        ctx = span.get_span_context()
        if not ctx.trace_id or not ctx.span_id:
            return
        ids = _ids(ctx)
        lib.thread().otel.append((ctx.span_id, ids))
        lib.attach(ids[0], ids[1], ids[2], None, 0)

    def on_end(self, span):
        lib = self.lib
        if lib is None or not _is_server(span):
            return
        stack = lib.thread().otel
        sid = span.context.span_id
        for k in range(len(stack) - 1, -1, -1):
            if stack[k][0] == sid:
                del stack[k:]  # and any inner span that never ended here
                break
        else:
            return  # started on another thread: not ours to detach
        if stack:
            ids = stack[-1][1]
            lib.attach(ids[0], ids[1], ids[2], None, 0)
        else:
            lib.detach()

    def shutdown(self):
        pass

    def force_flush(self, timeout_millis=30000):
        return True
