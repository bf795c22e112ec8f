"""The load for e2e_trigger_zerocode: requests to zc_server.py, one at a
time, until the trigger completes (the file STOP appears) or LIMIT
requests were sent. Every third request is slow (GET /burn/SLOW, SLOW ms
of CPU), the others fast (GET /burn/1); every request carries a
traceparent with a fresh trace id, so that a claimed trace id names the
request. Prints one CSV line a request: trace_id,path,status,client_ms

usage: python3 zc_trigger_client.py PORT SLOW LIMIT STOP
"""
import http.client
import os
import sys
import time

port, slow, limit, stop = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
conn = http.client.HTTPConnection("127.0.0.1", port)
for i in range(limit):
    if os.path.exists(stop):
        break
    trace = "1d%030x" % (i + 1)
    path = "/burn/%d" % (slow if i % 3 == 2 else 1)
    t0 = time.monotonic()
    conn.request("GET", path, headers={"traceparent": "00-%s-%016x-01" % (trace, i + 1)})
    r = conn.getresponse()
    r.read()
    print("%s,%s,%d,%.3f" % (trace, path, r.status, (time.monotonic() - t0) * 1000), flush=True)
conn.close()
