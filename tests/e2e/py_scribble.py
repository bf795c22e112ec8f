"""A CPython 3.11 process whose frame chain is broken while it is sampled
(e2e_agent_python): spin() points its own frame's `previous` link at
itself ("cycle") or at an address that is not mapped ("garbage") for
SECONDS seconds of busy looping, then puts it back before returning.
The offsets are CPython 3.11's (PyFrameObject.f_frame at 24,
_PyInterpreterFrame.previous at 48).

usage: python3.11 py_scribble.py cycle|garbage STOP SECONDS
"""
import ctypes
import os
import sys
import time


def spin(mode, stop, seconds):
    frame = ctypes.c_uint64.from_address(id(sys._getframe()) + 24).value
    previous = ctypes.c_uint64.from_address(frame + 48)
    saved = previous.value
    previous.value = frame if mode == "cycle" else 0x10
    end = time.time() + seconds
    x = 0
    while time.time() < end and not os.path.exists(stop):
        busy = time.time() + 0.002  # 2 ms busy, 8 ms asleep: sampled, not in the way
        while time.time() < busy:
            x += 1
        time.sleep(0.008)
    previous.value = saved
    return x


spin(sys.argv[1], sys.argv[2], float(sys.argv[3]))
print("ok")
