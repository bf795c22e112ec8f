# recommend-svc: the demo's Python service (docs/demo.md), a Flask app
# served by gunicorn with sync workers. One line enables traceprof: the
# WSGI middleware of the Python package (sdk/python) attaches each
# request's trace context to its thread and exports its server span over
# OTLP to the agent. GET /recommend/<user> scores candidate items in pure
# Python; for some users (a "cold" profile, one request in 20 from the
# load) rank_candidates() scores ten times as many, the slow path the demo
# shows.
import os
import sys
import zlib

from flask import Flask

import traceprof

app = Flask(__name__)
app.wsgi_app = traceprof.WSGIMiddleware(app.wsgi_app, service_name="recommend-svc")
print("app loaded in %d, traceprof %s" % (os.getpid(), "on" if traceprof.library() else "off"),
      file=sys.stderr, flush=True)

ITEMS = [("item-%d" % i).encode() for i in range(4000)]


def score(user, item):
    h = zlib.crc32(item, zlib.crc32(user))
    s = 0
    for k in range(300):
        s = (s * 31 + (h >> (k % 24))) & 0xFFFF
    return s


def rank_candidates(user, n):
    scored = sorted(((score(user, item), item) for item in ITEMS[:n]), reverse=True)
    return [item.decode() for _, item in scored[:5]]


@app.route("/recommend/<user>")
def recommend(user):
    cold = user.startswith("cold")
    top = rank_candidates(user.encode(), 4000 if cold else 400)
    return {"user": user, "top": top}
