"""traceprof for Python services: the request context of OTEP 4947 from a
WSGI middleware or an OpenTelemetry SpanProcessor, over libtraceprof-sdk
through ctypes (no compiled extension).

One line in a Flask (or any WSGI) service:

    app.wsgi_app = traceprof.WSGIMiddleware(app.wsgi_app, service_name="shop")

or in an ASGI one (Starlette, FastAPI, on uvicorn):

    app = traceprof.ASGIMiddleware(app, service_name="shop")

See README.md next to this package for what it does and its limits.
"""

import atexit
import logging
import os
import sys
import threading

from . import _native
from ._native import ENV_LIBRARY, LibraryNotFound
from .asgi import ASGIMiddleware
from .wsgi import WSGIMiddleware

__all__ = [
    "ASGIMiddleware",
    "ENV_LIBRARY",
    "LibraryNotFound",
    "WSGIMiddleware",
    "enable",
    "library",
    "set_route",
    "thread_context",
    "SpanProcessor",
]

log = logging.getLogger("traceprof")

_lock = threading.Lock()
_lib = None  # the loaded Library, once enabled
_failed = None  # the error of a failed enable, logged once
_published = None  # (service_name, attributes) to publish again after fork


def _default_service():
    return os.environ.get("OTEL_SERVICE_NAME") or os.path.basename(sys.argv[0] or "python") or "python"


def _republish_in_child():
    # the process context is not inherited (MADV_DONTFORK): a forked worker
    # (gunicorn --preload, multiprocessing) publishes its own
    if _lib is not None and _published is not None:
        _lib.publish(*_published)


def enable(service_name=None, library=None, endpoint=None, attributes=None):
    """Loads libtraceprof-sdk and publishes the process context (service.name
    and attributes), once per process; later calls return the same result.
    endpoint: the OTLP/HTTP traces URL for server spans (default: the SDK's,
    from OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT, else
    http://127.0.0.1:4318/v1/traces). Returns the Library, or None when the
    library could not be loaded: the error is logged once and the service
    runs untagged."""
    global _lib, _failed, _published
    with _lock:
        if _lib is not None or _failed is not None:
            return _lib
        try:
            lib = _native.Library(library)
        except LibraryNotFound as e:
            _failed = e
            log.error("traceprof: requests are not tagged: %s", e)
            return None
        name = service_name or _default_service()
        rc = lib.publish(name, attributes)
        if rc:
            log.error("traceprof: publishing the process context failed (%s)", os.strerror(-rc))
        _published = (name, attributes)
        if endpoint:
            rc = lib.export_start(endpoint)
            if rc:
                log.error("traceprof: span export to %s not started (%s)", endpoint, os.strerror(-rc))
        os.register_at_fork(after_in_child=_republish_in_child)
        atexit.register(lib.export_stop, 1000)
        _lib = lib
        return lib


def library():
    """The loaded Library, or None before enable() (or after it failed)."""
    return _lib


def set_route(template):
    """Names the current request's route (the template, e.g. "/item/<id>"),
    for WSGI frameworks other than Flask (Flask's is found by itself).
    Call it inside the request, on its thread."""
    if _lib is not None:
        _lib.thread().route = template


def thread_context():
    """The calling thread's context as an agent reads it from the record:
    (trace id hex, span id hex, flags), or None when no request is attached."""
    return _lib.thread_context() if _lib is not None else None


def __getattr__(name):
    # the OpenTelemetry processor is imported on first use only
    if name == "SpanProcessor":
        from .otel import SpanProcessor

        return SpanProcessor
    raise AttributeError(name)
