"""PyTorch peer of kernels.ts: reads one JSON case per line on stdin, answers one JSON line
{"seconds": mean per run} on stdout, timed as kernels.ts times its own (one warm-up, then
runs until `seconds` have passed, at least 2). Cases:
  {"op": "matmul", "m", "n", "k", "ta", "tb", "threads", "seconds"}: op(A) @ op(B), A/B stored
      transposed when ta/tb, as tf.matMul(a, b, ta, tb);
  {"op": "conv", "pass": "forward|backward", "n", "h", "w", "ci", "co", "kernel", "stride", "pad", "dx",
      "threads", "seconds"}: F.conv2d with a bias, and the backward autograd runs for it:
      aten.convolution_backward for dW, db and (where "dx") dx in one call (NCHW, PyTorch's layout);
  {"op": "layerNorm|gelu|softmax", "pass": "forward|backward", "rows", "cols", "threads", "seconds"}:
      ATen's kernels over the last axis (native_layer_norm, gelu, _softmax and their backward).
"""
import ctypes
import json
import sys
import time

import torch
import torch.nn.functional as F


def time_it(fn, seconds):
    fn()
    runs, start = 0, time.perf_counter()
    while runs < 2 or time.perf_counter() - start < seconds:
        fn()
        runs += 1
    return (time.perf_counter() - start) / runs


def matmul(c):
    a = torch.randn(*((c["k"], c["m"]) if c["ta"] else (c["m"], c["k"])))
    b = torch.randn(*((c["n"], c["k"]) if c["tb"] else (c["k"], c["n"])))
    a, b = (a.t() if c["ta"] else a), (b.t() if c["tb"] else b)
    return lambda: torch.mm(a, b)


def conv(c):
    x = torch.randn(c["n"], c["ci"], c["h"], c["w"])
    w = torch.randn(c["co"], c["ci"], c["kernel"], c["kernel"])
    b = torch.randn(c["co"])
    s, p = c["stride"], c["pad"]
    dy = torch.randn(F.conv2d(x, w, b, stride=s, padding=p).shape)
    mask = [c["dx"], True, True]
    backward = lambda: torch.ops.aten.convolution_backward(dy, x, w, [c["co"]], [s, s], [p, p], [1, 1], False, [0, 0], 1, mask)
    return (lambda: F.conv2d(x, w, b, stride=s, padding=p)) if c["pass"] == "forward" else backward


def fused(c):
    x, dy = torch.randn(c["rows"], c["cols"]), torch.randn(c["rows"], c["cols"])
    w, b = torch.ones(c["cols"]), torch.zeros(c["cols"])
    aten = torch.ops.aten
    if c["op"] == "layerNorm":
        _, mean, rstd = torch.native_layer_norm(x, [c["cols"]], w, b, 1e-5)
        forward = lambda: torch.native_layer_norm(x, [c["cols"]], w, b, 1e-5)
        backward = lambda: aten.native_layer_norm_backward(dy, x, [c["cols"]], mean, rstd, w, b, [True, True, True])
    elif c["op"] == "gelu":
        forward, backward = (lambda: F.gelu(x)), (lambda: aten.gelu_backward(dy, x))
    else:
        y = torch.softmax(x, -1)
        forward, backward = (lambda: torch.softmax(x, -1)), (lambda: aten._softmax_backward_data(dy, y, -1, torch.float32))
    return forward if c["pass"] == "forward" else backward


def openblas():
    """Debian's torch runs its matmuls on the system OpenBLAS (pthread build), whose threads
    torch.set_num_threads does not limit: at "1 thread" it used both cores. Set them too."""
    try:
        return ctypes.CDLL("libopenblas.so.0")
    except OSError:
        return None


blas = openblas()
for line in sys.stdin:
    case = json.loads(line)
    torch.set_num_threads(case["threads"])
    if blas is not None:
        blas.openblas_set_num_threads(case["threads"])
    with torch.no_grad():
        make = {"matmul": matmul, "conv": conv}.get(case["op"], fused)
        seconds = time_it(make(case), case["seconds"])
    print(json.dumps({"seconds": seconds, "torch": torch.__version__}), flush=True)
