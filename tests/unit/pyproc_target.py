"""The Python process test_pyproc reads from outside (CPython 3.11).

Prints, from the interpreter's own view (ctypes and the code objects'
attributes), one line per fact, then waits in waiter() until stdin
closes:

  TSTATE <address of the main thread's PyThreadState> <native thread id> <pthread_self()>
  CODE <id(code)> <id(function)> <module>.<qualname> <co_firstlineno> <co_filename>
  LINE <id(code)> <byte offset> <line>    (one per co_lines() range)
  STACK <id(code)> ...                    (waiter's frames, innermost first)
  READY
"""
import ctypes
import sys
import threading


class Shop:
    def checkout(self, n):
        total = 0
        for i in range(n):
            total += i * 2
        return total


def nested(depth):
    if depth == 0:
        return Shop().checkout(3)
    return nested(depth - 1)


def café():
    return "ünïcode"


def waiter():
    sys.stdout.write("STACK %d %d\n" % (id(waiter.__code__), id(sys._getframe(1).f_code)))
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    sys.stdin.read()


api = ctypes.pythonapi
api.PyThreadState_Get.restype = ctypes.c_void_p
out = ["TSTATE %d %d %d" % (api.PyThreadState_Get(), threading.get_native_id(),
                            threading.get_ident())]
for fn in (Shop.checkout, nested, café, waiter):
    c = fn.__code__
    out.append("CODE %d %d %s.%s %d %s" % (id(c), id(fn), fn.__module__, c.co_qualname,
                                           c.co_firstlineno, c.co_filename))
    for start, end, line in c.co_lines():
        if line is not None:
            out.append("LINE %d %d %d" % (id(c), start, line))
print("\n".join(out), flush=True)
nested(2)
café()
waiter()
