"""Two ways of splitting products at two ember threads, on ("new") and off ("old") in
one process, rounds alternated:

- ``--change columns``: column blocks for products of few rows
  (``thread_products._split_direction``; the kernels listed in
  ``blas_kernels.COLUMN_GRAIN``, float32 on OpenBLAS's SkylakeX kernels) against row
  blocks for every split product, the route before them;
- ``--change bias``: ``gemm.addmm``'s bias added in each block of a split product against
  added by the caller to the whole result after the split.

    python benchmarks/split_products_ab.py [--change columns|bias] [--rounds N] [--idle]
                                           [--only products,mlp,mlp_infer,cnn,transformer]

Both ways give the same bits (asserted once for the products and the MLP's steps; the
other workloads of ``two_threads.py`` are timed only). Printed per call: the median wall time,
the calling thread's CPU time (``time.thread_time``: the part of a split the caller
runs, plus everything it runs alone -- on a loaded machine the closest figure to what
the step would take on a quiet one, as the wall time is mostly the scheduler's), the
process CPU time (both threads), and cols/rows of each, with the load average.
``--idle`` lets ember take the machine as idle (pairs and BLAS's own threads as on a
quiet machine) whatever the load.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import ember  # noqa: E402
from ember.backend import blas_kernels, gemm, thread_products  # noqa: E402
from ember.backend import threads as T  # noqa: E402

_GRAINS = dict(blas_kernels.COLUMN_GRAIN)
_MATMUL = thread_products.matmul


def _bias_after(a, b, out=None, bias=None, add=None, whole=None):
    """``thread_products.matmul`` with the bias added to the whole result after it."""
    r = _MATMUL(a, b, out, whole=whole)
    if bias is not None and r is not None and r is not thread_products.WHOLE:
        add(r, bias)
    return r


def _route(new, change="columns"):
    """The change on (as this tree has it) or off."""
    if change == "columns":
        T._state.pop("column_grain", None)
        blas_kernels.COLUMN_GRAIN.clear()
        if new:
            blas_kernels.COLUMN_GRAIN.update(_GRAINS)
    else:
        thread_products.matmul = _MATMUL if new else _bias_after


def _products():
    rng = np.random.default_rng(0)
    shapes = ((128, 784, 256), (64, 784, 256), (128, 1024, 1024), (256, 256, 1024),
              (1024, 784, 256))
    # bias + x @ w.T, as a linear layer's forward has it
    ops = [(rng.standard_normal(n, dtype=np.float32),
            rng.standard_normal((m, k), dtype=np.float32),
            rng.standard_normal((n, k), dtype=np.float32).T) for m, k, n in shapes]

    def step():
        with gemm.numpy_only():
            return [gemm.addmm(c, a, b) for c, a, b in ops]
    return step


def _products_bits():
    return _products()()


def _training_step(name):
    def make():
        import two_threads
        ember.manual_seed(0)
        step = two_threads._builder(name)(ember)

        def run():
            with gemm.numpy_only():
                step()
        return run
    return make


def _infer_bits():
    import training_steps as ts
    ember.manual_seed(0)
    model = ts._mlp(ember)
    x = ember.tensor(np.random.default_rng(0).standard_normal((1024, 784), dtype=np.float32))
    with gemm.numpy_only(), ember.no_grad():
        return [model(x).numpy().copy()]


def _mlp_bits():
    """The MLP's parameters after three steps (for the same-bits check)."""
    import training_steps as ts
    ember.manual_seed(0)
    model = ts._mlp(ember)
    opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((128, 784), dtype=np.float32))
    y = ember.tensor(rng.integers(0, 10, 128))
    with gemm.numpy_only():
        for _ in range(3):
            opt.zero_grad()
            ember.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    return [p.detach().numpy().copy() for p in model.parameters()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="products,mlp,mlp_infer")
    ap.add_argument("--change", choices=("columns", "bias"), default="columns")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--calls", type=int, default=30, help="calls per round")
    ap.add_argument("--idle", action="store_true")
    args = ap.parse_args()
    ember.set_num_threads(2)
    T._state["routes"] = "static"  # (the split variants compared need the splits made)
    if args.idle:
        T._idle["next"], T._idle["idle"] = float("inf"), True
    print(f"--change {args.change}; NumPy's OpenBLAS kernel: row grain (float32) "
          f"{T.row_grain('f')}, column grain {T.column_grain('f')}; load "
          f"{os.getloadavg()[0]:.2f}")
    for name in args.only.split(","):
        make, bits = {"products": (_products, _products_bits),
                      "mlp": (_training_step("mlp"), _mlp_bits),
                      "mlp_infer": (_training_step("mlp_infer"), _infer_bits)}.get(
            name, (_training_step(name), None))  # (cnn, transformer, ...: no bits check)
        results = {}
        for new in (True, False):
            _route(new, args.change)
            results[new] = bits() if bits else []
        for x, y in zip(results[True], results[False]):
            np.testing.assert_array_equal(x, y)
        step = make()
        figures = {True: ([], [], []), False: ([], [], [])}
        for _ in range(args.rounds):
            for new in (True, False):
                _route(new, args.change)
                for _ in range(3):
                    step()
                w, c, p = time.perf_counter(), time.thread_time(), time.process_time()
                for _ in range(args.calls):
                    step()
                per = args.calls / 1e3
                wall, caller, proc = figures[new]
                wall.append((time.perf_counter() - w) / per)
                caller.append((time.thread_time() - c) / per)
                proc.append((time.process_time() - p) / per)
        _route(True, args.change)
        med = {k: [statistics.median(v) for v in f] for k, f in figures.items()}
        print(f"{name}: ms per call, medians of {args.rounds} rounds (scale "
              f"{T._state['scale']:.2f}, load {os.getloadavg()[0]:.2f})")
        for label, i in (("wall", 0), ("caller CPU", 1), ("process CPU", 2)):
            print(f"  {label:12s} new {med[True][i]:7.3f}  old {med[False][i]:7.3f}  "
                  f"new/old {med[True][i] / med[False][i]:.3f}")


if __name__ == "__main__":
    main()
