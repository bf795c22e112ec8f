# A Python program using libtraceprof-sdk through ctypes (the FFI path
# sdk/README.md documents): it publishes its process context, attaches the
# context of one request parsed from a traceparent, burns CPU inside it,
# detaches and burns CPU outside any request.
# usage: python3 ffi_request.py LIBTRACEPROF_SDK_SO  (waits for a line on stdin)
import ctypes
import sys
import time

sdk = ctypes.CDLL(sys.argv[1])
assert sdk.tp_sdk_process_publish(b"py-checkout", None, 0) == 0
trace = (ctypes.c_uint8 * 16)()
span = (ctypes.c_uint8 * 8)()
flags = ctypes.c_uint8()
header = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
assert sdk.tp_sdk_traceparent_parse(header, len(header), trace, span, ctypes.byref(flags)) == 0


def burn(seconds):
    end = time.process_time() + seconds
    x = 0
    while time.process_time() < end:
        for i in range(10000):
            x = (x * 31 + i) % 1000003
    return x


print("ready", flush=True)
sys.stdin.readline()
assert sdk.tp_sdk_attach(trace, span, flags, None, 0) == 0
try:
    burn(1.5)
finally:
    assert sdk.tp_sdk_detach() == 0
burn(1.0)
print("done", flush=True)
