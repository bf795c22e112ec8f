"""torch_requests - PyTorch inference "requests" for the real-CUDA check
(bench/gpu_device_check.sh, docs/gpu.md): real-world kernels (cuBLAS,
PyTorch's elementwise and normalization kernels) attributed per request.

usage: python3 torch_requests.py SDK_PYTHON_DIR [--profile] [REQUESTS]

Without --profile (run with libtraceprof-cuda and the agent): a small
model in half precision answers REQUESTS requests (default 12), request i
running 1 + i % 3 forward passes, each request with its own thread
context through libtraceprof-sdk (TRACEPROF_SDK_LIBRARY, over the
traceprof Python package's ctypes layer); prints
    request trace=HEX passes=P

With --profile (run without libtraceprof-cuda: CUPTI takes one
subscriber): the same model and input, one forward pass at a time under
torch.profiler (CUPTI reporting to the program itself), prints what one
pass launches:
    profile kernel=NAME count=C gpu_ns=G
with G the mean over 10 passes. Each request's kernels are then P times
one pass's: the counts exactly (the passes are deterministic), the GPU
time as measured in another process (the same order, not to the
percent).
"""

import os
import secrets
import sys


def model_and_input(torch):
    torch.manual_seed(7)
    m = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096),
        torch.nn.GELU(),
        torch.nn.Linear(4096, 1024),
        torch.nn.LayerNorm(1024),
    )
    m = m.cuda().half().eval()
    x = torch.randn(256, 1024, device="cuda", dtype=torch.half)
    return m, x


def serve(torch, sdk_dir, n):
    sys.path.insert(0, sdk_dir)
    from traceprof import _native

    lib = _native.Library(os.environ.get("TRACEPROF_SDK_LIBRARY"))
    lib.publish("torch-requests")
    m, x = model_and_input(torch)
    with torch.no_grad():
        for _ in range(3):  # warm-up, outside any request: cuBLAS picks its kernels
            m(x)
        torch.cuda.synchronize()
        for i in range(n):
            trace, span = secrets.token_bytes(16), secrets.token_bytes(8)
            passes = 1 + i % 3
            if lib.dll.tp_sdk_attach(trace, span, 1, None, 0) != 0:
                sys.exit("torch_requests: cannot attach a context")
            for _ in range(passes):
                m(x)
            torch.cuda.synchronize()
            lib.dll.tp_sdk_detach()
            print(f"request trace={trace.hex()} passes={passes}", flush=True)


def profile(torch):
    from torch.profiler import ProfilerActivity, profile as prof

    m, x = model_and_input(torch)
    passes = 10
    with torch.no_grad():
        for _ in range(3):
            m(x)
        torch.cuda.synchronize()
        with prof(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(passes):
                m(x)
            torch.cuda.synchronize()
    kernels = {}
    for e in p.events():
        if getattr(e, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        if "memcpy" in e.name.lower() or "memset" in e.name.lower():
            continue
        c, t = kernels.get(e.name, (0, 0.0))
        kernels[e.name] = (c + 1, t + e.time_range.elapsed_us() * 1000.0)
    for name, (c, t) in sorted(kernels.items()):
        if c % passes:
            sys.exit(f"torch_requests: {name} ran {c} times in {passes} passes")
        print(f"profile kernel={name} count={c // passes} gpu_ns={t / passes:.0f}")


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    sdk_dir, rest = args[0], args[1:]
    import torch

    if rest and rest[0] == "--profile":
        profile(torch)
    else:
        serve(torch, sdk_dir, int(rest[0]) if rest else 12)


if __name__ == "__main__":
    main()
