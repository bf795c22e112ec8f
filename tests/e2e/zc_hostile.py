"""Hostile input with ground truth for the zero-code HTTP checks on real
servers (run after zc_load.py, in the same agent run): each item on a new
connection, ONE AT A TIME, a valid request with a known traceparent
(kind ok) between the hostile ones, so that what the garbage does to the
requests around it shows. Items:

- malformed request lines (version HTTP/9.9, a word after the version, no
  version, an unknown method): no row (bad_line / not_head counted);
- a 64 KiB header block whose traceparent comes last: a row, a new trace
  (the traceparent is past the bytes looked at; head_cut counted);
- a traceparent with upper-case hex, one with a non-hex digit, one with
  version ff: a row each, a new trace, no parent (never the bad trace id);
- 4 KiB of binary garbage: no row;
- a head half sent then the connection closed: a row, status 0
  (unanswered); a request line cut in its middle, then closed: no row;
- two requests in one write (pipelining): no row (pipelined counted);
- a request line split over writes with pauses: no row (split counted);
  a head whose traceparent comes in a second write: a row, a new trace.

Writes one CSV line an item, with a header:
kind,trace_id,parent_span_id,method,path,status,start_ns,end_ns
kind: ok (a row with this trace, parent, path and status), fresh (a row
with this path and status, a new trace), unanswered (a row with this path,
status 0), none (no row). start_ns, end_ns: CLOCK_REALTIME around the
item (sent to answer read, or to 0.1 s after the close).

usage: python3 zc_hostile.py PORT > hostile.csv
"""
import random
import socket
import sys
import time

port = int(sys.argv[1])
seq = 0


def ids():
    global seq
    seq += 1
    return "0b%030x" % (0x5000 + seq), "%016x" % (0x9000 + seq)


def talk(chunks, pause=0.0, close_early=False):
    """Sends chunks (pause seconds apart) on a new connection; returns the
    status of the first answer (0 when none) and the times around it."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    t0 = time.time_ns()
    for i, c in enumerate(chunks):
        if i and pause:
            time.sleep(pause)
        s.sendall(c)
    if close_early:
        s.close()
        time.sleep(0.1)
        return 0, t0, time.time_ns()
    s.shutdown(socket.SHUT_WR)
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except (socket.timeout, ConnectionResetError):
        pass
    t1 = time.time_ns()
    s.close()
    status = 0
    if data.startswith(b"HTTP/1.") and len(data) >= 12 and data[9:12].isdigit():
        status = int(data[9:12])
    return status, t0, t1


def out(kind, trace, parent, method, path, status, t0, t1):
    print("%s,%s,%s,%s,%s,%d,%d,%d" % (kind, trace, parent, method, path, status, t0, t1), flush=True)
    time.sleep(0.02)


def head(path, extra=b"", method=b"GET"):
    return method + b" " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra


def ok():
    trace, parent = ids()
    tp = ("traceparent: 00-%s-%s-01\r\n" % (trace, parent)).encode()
    st, t0, t1 = talk([head("/burn/0", tp + b"Connection: close\r\n\r\n")])
    out("ok", trace, parent, "GET", "/burn/0", st, t0, t1)


def none(chunks, trace="", **kw):
    st, t0, t1 = talk(chunks, **kw)
    out("none", trace, "", "", "", st, t0, t1)


def fresh(path, chunks, trace, **kw):
    st, t0, t1 = talk(chunks, **kw)
    out("fresh", trace, "", "GET", path, st, t0, t1)


print("kind,trace_id,parent_span_id,method,path,status,start_ns,end_ns")
close = b"Connection: close\r\n\r\n"
ok()
none([b"GET /missing HTTP/9.9\r\nHost: 127.0.0.1\r\n" + close])
ok()
none([b"GET /missing HTTP/1.1 junk\r\nHost: 127.0.0.1\r\n" + close])
none([b"BREW /missing HTTP/1.1\r\nHost: 127.0.0.1\r\n" + close])
none([b"GET /missing\r\n\r\n"])
ok()
# 64 KiB of headers (60 fields: under the servers' field count limits), then
# a traceparent
trace, parent = ids()
pad = b"".join(b"X-Pad-%02d: %s\r\n" % (i, b"p" * 1100) for i in range(60))
tp = ("traceparent: 00-%s-%s-01\r\n" % (trace, parent)).encode()
fresh("/burn/0", [head("/burn/0", pad + tp + close)], trace)
ok()
for bad in ("00-%s-%s-01" % (trace.upper(), parent),
            "00-%s-%szz-01" % (trace[:30], parent),
            "ff-%s-%s-01" % (trace, parent)):
    fresh("/burn/0", [head("/burn/0", ("traceparent: %s\r\n" % bad).encode() + close)], trace)
ok()
none([bytes(random.Random(27).getrandbits(8) | 0x80 for _ in range(4096))])
ok()
st, t0, t1 = talk([head("/burn/0")], close_early=True)
out("unanswered", "", "", "GET", "/burn/0", 0, t0, t1)
none([b"GET /bur"], close_early=True)
ok()
trace, parent = ids()
tp = ("traceparent: 00-%s-%s-01\r\n" % (trace, parent)).encode()
none([head("/burn/0", tp + b"\r\n") + head("/missing", close)], trace)
ok()
none([b"GET /bu", b"rn/0 HTTP/1.1\r\nHost: 127.0.0.1\r\n", tp + close], trace, pause=0.05)
fresh("/burn/0", [head("/burn/0"), tp + close], trace, pause=0.05)
ok()
