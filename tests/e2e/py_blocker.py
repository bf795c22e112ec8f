"""A Python thread that blocks in known functions (e2e_agent_python).

blocked_caller() calls wait_here(), which sleeps 4 ms at a time, until the
file STOP exists (SECONDS at most): its off-CPU intervals should carry
both Python frames, above the native frames of the sleep.

usage: python3 py_blocker.py STOP SECONDS
"""
import os
import sys
import time


def wait_here():
    time.sleep(0.004)


def blocked_caller(stop, end):
    while time.time() < end and not os.path.exists(stop):
        wait_here()


blocked_caller(sys.argv[1], time.time() + float(sys.argv[2]))
