"""Column blocks against row blocks for products of few rows at two ember threads, in
one process, rounds alternated (``thread_products._split_direction``; the kernels listed
in ``blas_kernels.COLUMN_GRAIN``, float32 on OpenBLAS's SkylakeX kernels).

    python benchmarks/column_blocks_ab.py [--rounds N] [--idle] [--only products,mlp]

"rows" is the route before column blocks (every split product in row blocks). Both give
the same bits (asserted once per workload). Printed per call: the median wall time,
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
from ember.backend import blas_kernels, gemm  # noqa: E402
from ember.backend import threads as T  # noqa: E402

_GRAINS = dict(blas_kernels.COLUMN_GRAIN)


def _route(columns):
    """Column blocks as this tree has them, or none (every split in row blocks)."""
    T._state.pop("column_grain", None)
    blas_kernels.COLUMN_GRAIN.clear()
    if columns:
        blas_kernels.COLUMN_GRAIN.update(_GRAINS)


def _products():
    rng = np.random.default_rng(0)
    shapes = ((128, 784, 256), (64, 784, 256), (128, 1024, 1024), (256, 256, 1024))
    # x @ w.T, as a linear layer's forward has it
    ops = [(rng.standard_normal((m, k), dtype=np.float32),
            rng.standard_normal((n, k), dtype=np.float32).T) for m, k, n in shapes]

    def step():
        with gemm.numpy_only():
            return [gemm.matmul(a, b) for a, b in ops]
    return step


def _mlp():
    import training_steps as ts
    ember.manual_seed(0)
    step = ts.mlp(ember)

    def run():
        with gemm.numpy_only():
            step()
    return run


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
    ap.add_argument("--only", default="products,mlp")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--calls", type=int, default=30, help="calls per round")
    ap.add_argument("--idle", action="store_true")
    args = ap.parse_args()
    ember.set_num_threads(2)
    if args.idle:
        T._idle["next"], T._idle["idle"] = float("inf"), True
    if not _GRAINS:
        print("no kernel with column blocks listed")
        return
    print(f"NumPy's OpenBLAS kernel column grain (float32): {T.column_grain('f')}; "
          f"load {os.getloadavg()[0]:.2f}")
    for name in args.only.split(","):
        make, bits = {"products": (_products, None), "mlp": (_mlp, _mlp_bits)}[name]
        results = {}
        for columns in (True, False):
            _route(columns)
            results[columns] = bits() if bits else make()()
        for x, y in zip(results[True], results[False]):
            np.testing.assert_array_equal(x, y)
        step = make()
        figures = {True: ([], [], []), False: ([], [], [])}
        for _ in range(args.rounds):
            for columns in (True, False):
                _route(columns)
                for _ in range(3):
                    step()
                w, c, p = time.perf_counter(), time.thread_time(), time.process_time()
                for _ in range(args.calls):
                    step()
                per = args.calls / 1e3
                wall, caller, proc = figures[columns]
                wall.append((time.perf_counter() - w) / per)
                caller.append((time.thread_time() - c) / per)
                proc.append((time.process_time() - p) / per)
        _route(True)
        med = {k: [statistics.median(v) for v in f] for k, f in figures.items()}
        print(f"{name}: ms per call, medians of {args.rounds} rounds (scale "
              f"{T._state['scale']:.2f}, load {os.getloadavg()[0]:.2f})")
        for label, i in (("wall", 0), ("caller CPU", 1), ("process CPU", 2)):
            print(f"  {label:12s} cols {med[True][i]:7.3f}  rows {med[False][i]:7.3f}  "
                  f"cols/rows {med[True][i] / med[False][i]:.3f}")


if __name__ == "__main__":
    main()
