"""A server traceprof knows nothing about: Python's ThreadingHTTPServer,
HTTP/1.1 keep-alive, no SDK, no OpenTelemetry. GET /burn/MS spends MS ms
of CPU in burn() on the handler's thread and answers 200; anything else
404. Prints its port on stdout once it listens.

usage: python3 zc_server.py
"""
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def burn(ms):
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        x += 1
    return x


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes

    def do_GET(self):
        parts = self.path.split("?")[0].split("/")
        if len(parts) == 3 and parts[1] == "burn" and parts[2].isdigit():
            burn(int(parts[2]))
            status, body = 200, b"ok\n"
        else:
            status, body = 404, b"no\n"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
