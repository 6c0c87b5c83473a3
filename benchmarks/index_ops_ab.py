"""Indexing and scatter ops, forward + backward on small float32 tensors: an older ember
tree, this one and torch, in one process, rounds alternated (``nn_ops_ab``'s timer).

    python benchmarks/index_ops_ab.py /tmp/before [--only gather,scatter_add] [--rounds R]

Printed: median CPU microseconds per call of each, the ratios to torch and
after/before, and the load average before and after. One thread each. These ops are
dominated by the per-call overhead at these sizes, which is what checks on the
arguments and dtype paths add to.
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from nn_ops_ab import run_ab  # noqa: E402

WORKLOADS = ["gather", "scatter_add", "scatter_src", "scatter_reduce_sum",
             "scatter_reduce_amax", "index_add", "index_select", "masked_fill", "setitem_idx",
             "getitem_idx"]


def make(m, name):
    """One forward + backward call of ``name`` on fresh (64, 32) float32 inputs of ``m``."""
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((64, 32)).astype(np.float32), requires_grad=True)
    src = m.tensor(rng.standard_normal((64, 32)).astype(np.float32), requires_grad=True)
    idx = m.tensor(rng.integers(0, 64, (64, 32)))
    rows = m.tensor(rng.integers(0, 64, 16))
    mask = m.tensor(rng.standard_normal((64, 32)) > 0)
    fns = {
        "gather": lambda: x.gather(0, idx),
        "scatter_add": lambda: x.scatter_add(0, idx, src),
        "scatter_src": lambda: x.scatter(0, idx, src),
        "scatter_reduce_sum": lambda: x.scatter_reduce(0, idx, src, "sum"),
        "scatter_reduce_amax": lambda: x.scatter_reduce(0, idx, src, "amax"),
        "index_add": lambda: x.index_add(0, rows, src[:16]),
        "index_select": lambda: x.index_select(0, rows),
        "masked_fill": lambda: x.masked_fill(mask, 0.5),
        "getitem_idx": lambda: x[rows],
    }

    def setitem():
        y = x * 1
        y[rows] = 0.5
        return y
    fns["setitem_idx"] = setitem
    f = fns[name]
    return lambda: f().sum().backward()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=50)
    args = ap.parse_args()
    run_ab(args.before, args.only.split(","), make, args.rounds, args.calls, label="op",
           unit="us", digits=1)

if __name__ == "__main__":
    main()
