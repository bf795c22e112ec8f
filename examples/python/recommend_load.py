"""Load for the demo's recommend-svc: RATE requests/s for SECONDS seconds
from two client threads, one in 20 for a "cold" user (the slow path),
each with a fresh W3C traceparent.

usage: python3 recommend_load.py PORT SECONDS RATE
"""
import http.client
import os
import sys
import threading
import time

port, seconds, rate = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
end = time.monotonic() + seconds
errors = 0


def client(k):
    global errors
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    i = 0
    while time.monotonic() < end:
        i += 1
        user = ("cold-%d-%d" if (i * 2 + k) % 20 == 0 else "user-%d-%d") % (k, i)
        tp = "00-%s-%s-01" % (os.urandom(16).hex(), os.urandom(8).hex())
        try:
            conn.request("GET", "/recommend/" + user, headers={"traceparent": tp})
            conn.getresponse().read()
        except OSError:
            errors += 1
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        time.sleep(2.0 / rate)


threads = [threading.Thread(target=client, args=(k,)) for k in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
sys.exit(1 if errors > 5 else 0)
