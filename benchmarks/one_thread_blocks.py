"""Blocked and re-laid-out forms of the default install's slowest one-thread pieces, each
timed beside the form ember runs, with whether its bits are the same.

    EMBER_MKL=0 python benchmarks/one_thread_blocks.py [--rounds 30] [--only fc1,nn,ln]

- ``fc1``: the inference MLP's first product ``x @ W.T`` (1024 x 784 by 784 x 256, 85 %
  of that step): whole (ember's), in blocks of 64-128 output columns or 128-512 rows
  written into one result, and on a row-major copy of ``W.T`` (NumPy's copy, and a copy
  made 64 rows of ``W`` at a time) with the copy's cost included; torch's ``mm``.
- ``nn``: the Transformer step's products with neither operand transposed (the linears'
  input gradients, ``g @ W``) whole and in blocks of 64-256 rows; torch's ``mm`` (and
  whether its bits equal NumPy's).
- ``ln``: ember's ``LayerNorm(128)`` forward and backward on the step's 16 x 64 x 128
  input, numba hidden, with its NumPy passes run whole (ember's one-thread route) or in
  row blocks of 64-512 rows one after another (the blocks its two-thread route splits
  into, run on one thread: the later passes of a block then read what the earlier ones
  left in cache); an 8 MB write between calls stands in for the rest of the step.

CPU microseconds per call, medians of interleaved rounds, one thread; the load average
is printed before and after.
"""
import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
sys.modules["numba"] = None  # (the default install: ember's NumPy passes)

import numpy as np  # noqa: E402


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def _rounds(ways, rounds, between=None):
    """``{name: median CPU us}`` of the callables in ``ways``, interleaved."""
    times = {k: [] for k in ways}
    for _ in range(rounds):
        for k, f in ways.items():
            if between is not None:
                between()
            t0 = time.process_time()
            f()
            times[k].append(time.process_time() - t0)
    return {k: float(np.median(v)) * 1e6 for k, v in times.items()}


def _print(title, times, same):
    print(title)
    for k, t in times.items():
        print(f"  {k:<24}{t:>9.0f} us  {'' if same.get(k, True) else '!= bits'}")


def _columns(x, w, step):
    out = np.empty((x.shape[0], w.shape[0]), x.dtype)
    for i in range(0, w.shape[0], step):
        np.matmul(x, w[i:i + step].T, out=out[:, i:i + step])
    return out


def _rows(a, b, step):
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    for i in range(0, a.shape[0], step):
        np.matmul(a[i:i + step], b, out=out[i:i + step])
    return out


def _t_copy(w, step=64):
    out = np.empty(w.shape[::-1], w.dtype)
    for i in range(0, w.shape[0], step):
        out[:, i:i + step] = w[i:i + step].T
    return out


def fc1(torch, rounds):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 784), dtype=np.float32)
    w = rng.standard_normal((256, 784), dtype=np.float32)
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    ways = {
        "whole (ember)": lambda: x @ w.T,
        "64 columns at a time": lambda: _columns(x, w, 64),
        "128 columns at a time": lambda: _columns(x, w, 128),
        "128 rows at a time": lambda: _rows(x, w.T, 128),
        "256 rows at a time": lambda: _rows(x, w.T, 256),
        "512 rows at a time": lambda: _rows(x, w.T, 512),
        "copy of W.T, then x @ it": lambda: x @ np.ascontiguousarray(w.T),
        "that copy alone": lambda: np.ascontiguousarray(w.T),
        "copy by 64 rows, x @ it": lambda: x @ _t_copy(w),
        "copy by 64 rows alone": lambda: _t_copy(w),
        "torch mm": lambda: tx @ tw.T,
    }
    ref = x @ w.T
    same = {k: _same(f(), ref) for k, f in ways.items() if "alone" not in k}
    _print("fc1: 1024 x 784 by (256 x 784)^T", _rounds(ways, rounds), same)


def nn(torch, rounds):
    rng = np.random.default_rng(0)
    for m, k, n in ((1024, 128, 128), (1024, 128, 256), (1024, 256, 128)):
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        _nn_shape(torch, a, b, rounds)


def _nn_shape(torch, a, b, rounds):
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    ways = {"whole (ember)": lambda: a @ b,
            "64 rows at a time": lambda: _rows(a, b, 64),
            "128 rows at a time": lambda: _rows(a, b, 128),
            "256 rows at a time": lambda: _rows(a, b, 256),
            "torch mm": lambda: (ta @ tb).numpy()}
    ref = a @ b
    same = {key: _same(f(), ref) for key, f in ways.items()}
    (m, k), n = a.shape, b.shape[1]
    _print(f"nn: {m} x {k} by {k} x {n}", _rounds(ways, rounds), same)


def ln(rounds):
    import ember
    from ember.ops import norm_layouts
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((16, 64, 128), dtype=np.float32),
                     requires_grad=True)
    g = ember.tensor(rng.standard_normal((16, 64, 128), dtype=np.float32))
    layer = ember.nn.LayerNorm(128)
    with ember.no_grad():
        layer.weight.copy_(ember.tensor(rng.standard_normal(128, dtype=np.float32)))
        layer.bias.copy_(ember.tensor(rng.standard_normal(128, dtype=np.float32)))
    own = norm_layouts._split_units, norm_layouts.parallel_rows

    def chunked(units):
        def split(M):
            return M // norm_layouts._SPLIT_GRAIN if M >= 2 * norm_layouts._SPLIT_GRAIN \
                else 0

        def run(fn, rows, cost, *args, **kw):
            for lo in range(0, rows, units):
                fn(lo, min(lo + units, rows))
        return split, run

    def step(route):
        def f():
            if route is None:
                norm_layouts._split_units, norm_layouts.parallel_rows = own
            else:
                norm_layouts._split_units, norm_layouts.parallel_rows = chunked(route)
            x.grad = layer.weight.grad = layer.bias.grad = None
            y = layer(x)
            y.backward(g)
            norm_layouts._split_units, norm_layouts.parallel_rows = own
            return y, x.grad, layer.weight.grad, layer.bias.grad
        return f

    ways = {"whole (ember)": step(None)}
    for units in (1, 2, 4, 8):
        ways[f"{units * norm_layouts._SPLIT_GRAIN} rows at a time"] = step(units)
    ref = [t.detach().numpy().copy() for t in ways["whole (ember)"]()]
    same = {k: all(_same(t.detach().numpy(), r) for t, r in zip(f(), ref))
            for k, f in ways.items()}
    flush = np.empty(1 << 21, np.float32)

    def between():
        flush[:] = 1.0
    _print("ln: LayerNorm(128) forward + backward, 16 x 64 x 128",
           _rounds(ways, rounds, between), same)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--only", default="fc1,nn,ln")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    print(f"load {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    parts = args.only.split(",")
    if "fc1" in parts:
        fc1(torch, args.rounds)
    if "nn" in parts:
        nn(torch, args.rounds)
    if "ln" in parts:
        ln(args.rounds)
    print(f"load {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
