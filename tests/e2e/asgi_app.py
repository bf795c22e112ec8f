"""The ASGI service of e2e_asgi (Starlette on uvicorn, traceprof's ASGI
middleware): GET /work?kind=a|b serves a request in steps of about 2 ms
of CPU in burn_<kind>(), yielding to the event loop between steps, starts
a task that burns in child_<kind>(), answers, and then runs a Starlette
background task that burns in after_<kind>(). Requests of both kinds run
concurrently on one event loop thread: a sample in a function of kind a
must carry a trace of kind a (e2e_asgi's client gives each kind its own
trace ids)."""

import asyncio
import time

import traceprof
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.responses import PlainTextResponse
from starlette.routing import Route


def spin(ms):
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        x += 1
    return x


def burn_a(ms):
    return spin(ms)


def burn_b(ms):
    return spin(ms)


async def child_a():
    return spin(3)


async def child_b():
    return spin(3)


def after_a():
    spin(4)


def after_b():
    spin(4)


async def work(request):
    kind = request.query_params.get("kind", "a")
    burn, child, after = (burn_a, child_a, after_a) if kind == "a" else (burn_b, child_b, after_b)
    for _ in range(5):
        burn(2)
        await asyncio.sleep(0)  # other requests run here
    await asyncio.create_task(child())
    return PlainTextResponse("ok\n", background=BackgroundTask(_after, after))


async def _after(after):
    after()  # async, on the loop: a sync background function would go to a thread


app = traceprof.ASGIMiddleware(Starlette(routes=[Route("/work", work)]), service_name="asgi-svc")
