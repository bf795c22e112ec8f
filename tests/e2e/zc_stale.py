"""A server thread caught inside a request, for the stale-state check of
zero-code HTTP (run_agent_zerocode_stale_test.sh): listens on a free
loopback port (printed), accepts one connection, reads one request head
(recv: the zero-code capture opens a request on the thread), creates the
file MARK, then never answers:

- burn: spends CPU in Python, making no system call, until killed;
- exec: runs a new program (the interpreter again) that creates MARK.exec
  and spends CPU the same way.

usage: python3 zc_stale.py burn|exec MARK
"""
import os
import socket
import sys

mode, mark = sys.argv[1], sys.argv[2]
burn = "x = 0\nwhile True:\n    x = (x * 7 + 1) % 1000003\n"
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
c.recv(4096)
open(mark, "w").close()
if mode == "exec":
    os.execv(sys.executable, [sys.executable, "-c",
                              "open(%r, 'w').close()\n" % (mark + ".exec") + burn])
exec(burn)
