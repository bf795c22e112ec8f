"""A small Flask app traceprof knows nothing about, for the zero-code HTTP
checks: served by gunicorn's sync workers (zc_flask:app) or, run as a
script, by Werkzeug's threaded server (Python's ThreadingMixIn HTTPServer,
a thread per connection).

GET or POST /burn/MS spends MS ms of CPU in hashlib.pbkdf2_hmac (OpenSSL's
libcrypto: samples in it are taken inside a request) and answers 200;
anything else 404. Each process also runs a thread that serves no request
and spends about 10 % of a CPU in zlib (samples in libz are taken outside
every request and must stay untagged); ZC_FLASK_QUIET=1 leaves it out
(benchmarks).

usage: python3 zc_flask.py PORT   (prints "listening on 127.0.0.1:PORT")
"""
import hashlib
import os
import sys
import threading
import time
import zlib

from flask import Flask

app = Flask(__name__)
noise = os.urandom(1 << 16)


def background():
    while True:
        end = time.thread_time() + 0.003
        while time.thread_time() < end:
            zlib.compress(noise, 6)
        time.sleep(0.027)


if os.environ.get("ZC_FLASK_QUIET") != "1":
    threading.Thread(target=background, daemon=True).start()


@app.route("/burn/<int:ms>", methods=["GET", "POST"])
def burn(ms):
    end = time.thread_time() + ms / 1000.0
    while time.thread_time() < end:
        hashlib.pbkdf2_hmac("sha256", b"password", b"salt", 300)
    return "ok\n"


if __name__ == "__main__":
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = int(sys.argv[1])
    print("listening on 127.0.0.1:%d" % port, flush=True)
    app.run("127.0.0.1", port, threaded=True)
