"""libtraceprof-sdk through ctypes: finding and loading the library, its
entry points with their argument types, and the per-thread buffers that the
request path reuses (no ctypes object is made per request).

The library is looked for, first match wins:
  1. the path given to enable() / WSGIMiddleware(library=...);
  2. the environment variable TRACEPROF_SDK_LIBRARY (a path);
  3. the package's own directory (libtraceprof-sdk.so.0 or libtraceprof-sdk.so
     copied next to this file when the package was installed);
  4. the dynamic loader's search path (libtraceprof-sdk.so.0, then
     libtraceprof-sdk.so: /etc/ld.so.conf, LD_LIBRARY_PATH).
An explicit path (1 or 2) is the only one tried: a wrong path is an error,
never a silent fall back to another copy.
"""

import ctypes
import os
import threading

ENV_LIBRARY = "TRACEPROF_SDK_LIBRARY"
SONAMES = ("libtraceprof-sdk.so.0", "libtraceprof-sdk.so")
RECORD_HEADER_SIZE = 28  # TP_SDK_RECORD_HEADER_SIZE


class LibraryNotFound(OSError):
    """libtraceprof-sdk could not be loaded from any candidate."""


class Span(ctypes.Structure):
    """struct tp_sdk_span (56 bytes on LP64)."""

    _fields_ = [
        ("trace_id", ctypes.c_uint8 * 16),
        ("span_id", ctypes.c_uint8 * 8),
        ("parent_span_id", ctypes.c_uint8 * 8),
        ("trace_flags", ctypes.c_uint8),
        ("start_unix_ns", ctypes.c_int64),
        ("start_mono_ns", ctypes.c_int64),
    ]


class ExportOpts(ctypes.Structure):
    """struct tp_sdk_export_opts."""

    _fields_ = [
        ("endpoint", ctypes.c_char_p),
        ("queue_spans", ctypes.c_uint32),
        ("batch_spans", ctypes.c_uint32),
        ("interval_ms", ctypes.c_uint32),
        ("timeout_ms", ctypes.c_uint32),
    ]


class ExportStats(ctypes.Structure):
    """struct tp_sdk_export_stats."""

    _fields_ = [
        (n, ctypes.c_uint64)
        for n in (
            "spans_ended",
            "spans_exported",
            "spans_dropped_full",
            "spans_dropped_error",
            "requests",
            "request_errors",
        )
    ]


class KV(ctypes.Structure):
    """struct tp_sdk_kv."""

    _fields_ = [("key", ctypes.c_char_p), ("value", ctypes.c_char_p)]


def candidates(path=None):
    """The paths load() tries, in order."""
    if path:
        return [os.fspath(path)]
    env = os.environ.get(ENV_LIBRARY)
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, n) for n in SONAMES] + list(SONAMES)


def _declare(dll):
    i, p, s, u8 = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint8
    # The two calls of every request are left without argtypes: converting
    # through declared types costs about 70 ns per argument. They are given
    # only objects ctypes passes as they are: the span's byref (made once
    # per thread), bytes or None for the strings, and Python ints for the
    # length and the status (passed as C int, widened to the 64-bit
    # register of size_t by the x86-64 and AArch64 calling conventions as
    # libffi implements them; a traceparent is under 2^31 bytes).
    for name in ("tp_sdk_span_begin", "tp_sdk_span_end"):
        getattr(dll, name).restype = i
    sigs = {
        "tp_sdk_attach": (i, [ctypes.c_char_p, ctypes.c_char_p, u8, p, s]),
        "tp_sdk_detach": (i, []),
        "tp_sdk_thread_register": (i, []),
        "tp_sdk_process_publish": (i, [ctypes.c_char_p, p, s]),
        "tp_sdk_export_start": (i, [p]),
        "tp_sdk_export_stop": (i, [i]),
        "tp_sdk_export_get_stats": (i, [p]),
        "tp_sdk_traceparent_format": (i, [p, p, u8, p, s]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(dll, name)
        f.restype, f.argtypes = res, args


class Library:
    """A loaded libtraceprof-sdk with its entry points declared."""

    def __init__(self, path=None):
        errors = []
        for c in candidates(path):
            try:
                self.dll = ctypes.CDLL(c)
                self.path = c
                break
            except OSError as e:
                errors.append(f"{c}: {e}")
        else:
            raise LibraryNotFound(
                "libtraceprof-sdk not found (set %s or pass library=...); tried %s"
                % (ENV_LIBRARY, "; ".join(errors))
            )
        try:
            _declare(self.dll)
        except AttributeError as e:
            raise LibraryNotFound(f"{self.path} is not libtraceprof-sdk: {e}") from None
        d = self.dll
        self.span_begin = d.tp_sdk_span_begin
        self.span_end = d.tp_sdk_span_end
        self.attach = d.tp_sdk_attach
        self.detach = d.tp_sdk_detach
        self.tls = threading.local()

    def thread(self):
        """The calling thread's reusable buffers (made on its first request)."""
        try:
            return self.tls.state
        except AttributeError:
            st = self.tls.state = ThreadState()
            return st

    def publish(self, service_name, attributes=None):
        """tp_sdk_process_publish; returns 0 or a negative errno."""
        attrs = list((attributes or {}).items())
        arr = (KV * max(len(attrs), 1))()
        for k, (key, value) in enumerate(attrs):
            arr[k].key = str(key).encode()
            arr[k].value = str(value).encode()
        return self.dll.tp_sdk_process_publish(
            service_name.encode(), ctypes.cast(arr, ctypes.c_void_p) if attrs else None, len(attrs)
        )

    def export_start(self, endpoint=None, interval_ms=0):
        o = ExportOpts(endpoint.encode() if endpoint else None, 0, 0, interval_ms, 0)
        return self.dll.tp_sdk_export_start(ctypes.byref(o))

    def export_stop(self, timeout_ms):
        return self.dll.tp_sdk_export_stop(timeout_ms)

    def export_stats(self):
        st = ExportStats()
        self.dll.tp_sdk_export_get_stats(ctypes.byref(st))
        return {n: getattr(st, n) for n, _ in ExportStats._fields_}

    def thread_context(self):
        """The calling thread's OTEP 4947 record as an agent reads it:
        (trace id hex, span id hex, trace flags) while valid, else None.
        Read from the record's bytes through otel_thread_ctx_v1 (dlsym of a
        TLS symbol gives the calling thread's copy), not from Python state."""
        slot = ctypes.c_void_p.in_dll(self.dll, "otel_thread_ctx_v1")
        if not slot.value:
            return None
        raw = ctypes.string_at(slot.value, RECORD_HEADER_SIZE)
        if raw[24] != 1:
            return None
        return raw[:16].hex(), raw[16:24].hex(), raw[25]


class ThreadState:
    """One thread's request state: the span buffer (and a byref of it made
    once, so a request passes it rather than making one), whether a
    span is open, whether the app is running (nested calls), the status and
    the route template of the request in flight."""

    __slots__ = ("span", "ref", "open", "in_app", "status", "route", "env", "sr", "ident", "otel")

    def __init__(self):
        self.span = Span()
        self.ref = ctypes.byref(self.span)  # what the request's two calls are given
        self.open = False
        self.in_app = False
        self.status = 0
        self.route = None
        self.env = None
        self.ident = threading.get_ident()
        from .wsgi import _StartResponse

        self.sr = _StartResponse(self)
        self.otel = []  # the OpenTelemetry server spans attached, innermost last
