"""A sequential load with ground truth for the zero-code HTTP checks on real
servers: N requests sent ONE AT A TIME, so that whatever a server thread
does between a request's client-side start and end is that request's work.
Request i: with a traceparent (known trace and parent span ids) when i is
even; slow (/burn/MS: MS ms of the handler's CPU) or fast (/burn/0) by
i // 2; on the kept-alive connection or a new one closed after it
("Connection: close") by i // 4; POST with a 64-byte body every third,
GET otherwise; every ninth is a 404 (/missing). A 5 ms pause separates
requests. Writes one CSV line a request, with a header:
trace_id,parent_span_id,method,path,status,start_ns,end_ns,keep
(trace ids empty when none was sent; start and end: CLOCK_REALTIME in ns,
before the request is written and after the whole answer was read).

usage: python3 zc_load.py PORT N MS > truth.csv
"""
import http.client
import sys
import time

port, n, ms = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
keep = http.client.HTTPConnection("127.0.0.1", port)
print("trace_id,parent_span_id,method,path,status,start_ns,end_ns,keep")
for i in range(n):
    traced, slow, kept = i % 2 == 0, (i // 2) % 2 == 0, (i // 4) % 2 == 0
    method = "POST" if i % 3 == 0 else "GET"
    path = "/missing" if i % 9 == 8 else "/burn/%d" % (ms if slow else 0)
    headers, trace, parent = {}, "", ""
    if traced:
        trace, parent = "0a%030x" % (0x1000 + i), "%016x" % (0x7000 + i)
        headers["traceparent"] = "00-%s-%s-01" % (trace, parent)
    conn = keep if kept else http.client.HTTPConnection("127.0.0.1", port)
    if not kept:
        headers["Connection"] = "close"
    body = b"b" * 64 if method == "POST" else None
    t0 = time.time_ns()
    conn.request(method, "%s?i=%d" % (path, i), body=body, headers=headers)
    r = conn.getresponse()
    r.read()
    t1 = time.time_ns()
    if not kept:
        conn.close()
    print("%s,%s,%s,%s,%d,%d,%d,%d" % (trace, parent, method, path, r.status, t0, t1, kept), flush=True)
    time.sleep(0.005)
keep.close()
