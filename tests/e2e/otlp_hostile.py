#!/usr/bin/env python3
"""Hostile and ordinary OTLP exports for the end-to-end tests, encoded by
hand (the protobuf wire format, Python's standard library only), and a raw
OTLP/HTTP client.

usage:
  otlp_hostile.py export OUT SERVICE ROUTE [ID]  one SERVER span, a valid export
  otlp_hostile.py deep OUT LEVELS [kvlist]       one span whose attribute is an
                                                 AnyValue array (or kvlist) nested
                                                 LEVELS deep
  otlp_hostile.py gzip IN OUT                    IN gzip-compressed into OUT
  otlp_hostile.py bomb OUT MIB                   gzip of MIB MiB of zero bytes
  otlp_hostile.py post PORT FILE [gzip]          POST /v1/traces to 127.0.0.1:PORT;
                                                 prints "status=N ms=T body=..."
  otlp_hostile.py seeds DIR                      a few exports as fuzzing seeds
"""
import gzip
import os
import socket
import sys
import time
import zlib


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(field, payload):
    """A length-delimited field (wire type 2)."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def vi(field, n):
    return varint(field << 3) + varint(n)


def fixed64(field, n):
    return varint(field << 3 | 1) + n.to_bytes(8, "little")


def any_string(s):
    return ld(1, s.encode())  # AnyValue.string_value


def kv(key, value_any):
    return ld(1, key.encode()) + ld(2, value_any)  # KeyValue{key, value}


def span(ident, attrs):
    now = time.time_ns()
    trace = bytes([0x4B]) + ident.to_bytes(15, "big")
    return (ld(1, trace) + ld(2, (ident or 1).to_bytes(8, "big")) + ld(5, b"GET")
            + vi(6, 2)  # kind SERVER
            + fixed64(7, now - 5_000_000) + fixed64(8, now)
            + b"".join(ld(9, a) for a in attrs))


def export(service, spans):
    resource = ld(1, kv("service.name", any_string(service)))  # Resource.attributes
    scope_spans = b"".join(ld(2, s) for s in spans)  # ScopeSpans.spans
    resource_spans = ld(1, resource) + ld(2, scope_spans)
    return ld(1, resource_spans)  # ExportTraceServiceRequest.resource_spans


def nested(levels, kvlist=False):
    """An AnyValue holding an array (or kvlist) nested levels deep, built from
    the inside out without recursion."""
    v = any_string("bottom")
    for _ in range(levels):
        if kvlist:  # AnyValue.kvlist_value = KeyValueList{values: KeyValue{key, value}}
            v = ld(6, ld(1, kv("k", v)))
        else:  # AnyValue.array_value = ArrayValue{values: AnyValue}
            v = ld(5, ld(1, v))
    return v


def post(port, body, encoding=None):
    head = ("POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: application/x-protobuf\r\nConnection: close\r\n"
            f"Content-Length: {len(body)}\r\n")
    if encoding:
        head += f"Content-Encoding: {encoding}\r\n"
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head.encode() + b"\r\n" + body)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    ms = int((time.monotonic() - t0) * 1000)
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.") else 0
    body = data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in data else b""
    text = "".join(chr(c) if 32 <= c < 127 else "." for c in body)
    return f"status={status} ms={ms} body={text}"


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "export":
        ident = int(argv[5]) if len(argv) > 5 else 1
        msg = export(argv[3], [span(ident, [kv("http.route", any_string(argv[4]))])])
        open(argv[2], "wb").write(msg)
    elif cmd == "deep":
        attr = kv("deep", nested(int(argv[3]), len(argv) > 4 and argv[4] == "kvlist"))
        open(argv[2], "wb").write(export("deep-svc", [span(7, [attr])]))
    elif cmd == "gzip":
        open(argv[3], "wb").write(gzip.compress(open(argv[2], "rb").read()))
    elif cmd == "bomb":
        c = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip header
        zeros = bytes(1 << 20)
        with open(argv[2], "wb") as f:
            for _ in range(int(argv[3])):
                f.write(c.compress(zeros))
            f.write(c.flush())
    elif cmd == "post":
        body = open(argv[3], "rb").read()
        print(post(int(argv[2]), body, "gzip" if len(argv) > 4 and argv[4] == "gzip" else None))
    elif cmd == "seeds":
        os.makedirs(argv[2], exist_ok=True)
        seeds = {
            "export": export("svc", [span(1, [kv("http.route", any_string("/a")),
                                              kv("http.response.status_code", vi(3, 200))])]),
            "array": export("svc", [span(2, [kv("a", nested(3))])]),
            "kvlist": export("svc", [span(3, [kv("k", nested(3, True))])]),
            "two": export("svc", [span(4, []), span(5, [kv("http.method", any_string("GET"))])]),
        }
        for name, data in seeds.items():
            open(os.path.join(argv[2], name), "wb").write(data)
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
