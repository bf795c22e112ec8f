"""The load with ground truth for e2e_agent_zerocode: requests to
zc_server.py, some with a traceparent (known trace and parent span ids),
some without, invalid ones (version ff, version 00 with a field after
the flags, two traceparent headers: none adopted, W3C Trace Context) and
one of a later version with more fields (adopted by its first four), over
kept-alive connections and new ones; then hostile input: binary garbage on a
connection, a request whose traceparent comes after 60 KiB of headers
(beyond what the agent looks at), and a request target with bytes that are
not ASCII. Prints one CSV line a request (and one for the garbage):
kind,trace_id,parent_span_id,path,status,client_ms

usage: python3 zc_client.py PORT N MS
"""
import http.client
import socket
import sys
import time

port, n, ms = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
keep = http.client.HTTPConnection("127.0.0.1", port)


def get(conn, path, headers):
    t0 = time.monotonic()
    conn.request("GET", path, headers=headers)
    r = conn.getresponse()
    r.read()
    return r.status, (time.monotonic() - t0) * 1000


for i in range(n):
    trace = "0c%030x" % (i + 1)
    parent = "%016x" % (0x5000 + i)
    conn = keep if i % 2 == 0 else http.client.HTTPConnection("127.0.0.1", port)
    st, t = get(conn, "/burn/%d?i=%d" % (ms, i), {"traceparent": "00-%s-%s-01" % (trace, parent)})
    print("tp,%s,%s,/burn/%d,%d,%.3f" % (trace, parent, ms, st, t), flush=True)
    if conn is not keep:
        conn.close()
    conn = keep if i % 2 == 1 else http.client.HTTPConnection("127.0.0.1", port)
    st, t = get(conn, "/burn/%d" % ms, {})
    print("new,,,/burn/%d,%d,%.3f" % (ms, st, t), flush=True)
    if conn is not keep:
        conn.close()
bad = "ff-0d%030x-%016x-01" % (1, 1)
st, t = get(keep, "/burn/%d" % ms, {"traceparent": bad})
print("bad,0d%030x,,/burn/%d,%d,%.3f" % (1, ms, st, t), flush=True)
extra = "00-0d%030x-%016x-01-extra" % (2, 2)
st, t = get(keep, "/burn/%d" % ms, {"traceparent": extra})
print("bad,0d%030x,,/burn/%d,%d,%.3f" % (2, ms, st, t), flush=True)
future = "cc-0f%030x-%016x-01-what-the-future" % (1, 0x6001)
st, t = get(keep, "/burn/%d" % ms, {"traceparent": future})
print("future,0f%030x,%016x,/burn/%d,%d,%.3f" % (1, 0x6001, ms, st, t), flush=True)
st, t = get(keep, "/missing", {})
print("new,,,/missing,%d,%.3f" % (st, t), flush=True)
keep.close()


def raw(data):
    """data on a new connection; the status of the answer (0: none)"""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        answer = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    parts = answer.split(b" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return status, (time.monotonic() - t0) * 1000


st, t = raw(bytes(range(256)) * 16 + b"\r\n\r\n")
print("garbage,,,-,%d,%.3f" % (st, t), flush=True)
big = "0e%030x" % 1
conn = http.client.HTTPConnection("127.0.0.1", port)
st, t = get(conn, "/burn/%d" % ms, {"X-Pad": "a" * 60000,
                                    "traceparent": "00-%s-%016x-01" % (big, 1)})
conn.close()
print("big,%s,,/burn/%d,%d,%.3f" % (big, ms, st, t), flush=True)
st, t = raw(b"GET /burn/%d/\xff\xfe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % ms)
print("nonascii,,,/burn/%d/??,%d,%.3f" % (ms, st, t), flush=True)
two = "traceparent: 00-0d%030x-%016x-01\r\n" % (3, 3)
st, t = raw(b"GET /burn/%d HTTP/1.1\r\nHost: x\r\n%s%sConnection: close\r\n\r\n" % (ms, two.encode(), two.encode()))
print("bad,0d%030x,,/burn/%d,%d,%.3f" % (3, ms, st, t), flush=True)
