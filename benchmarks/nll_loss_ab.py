"""``nll_loss`` and ``cross_entropy`` steps, first order (plain backward) and second order
(``create_graph=True``, then backward through the gradient): an older ember tree, this one
and torch, in one process, rounds alternated.

    git archive main | tar -x -C /tmp/before
    python benchmarks/nll_loss_ab.py /tmp/before [--only xent_plain,nll_plain] [--rounds R]

Printed: median CPU milliseconds per step of each, the ratios to torch and after/before,
and the load average before and after. One thread each.
"""
import argparse
import os
import sys

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from nn_ops_ab import run_ab  # noqa: E402

WORKLOADS = {  # name: (scores' shape, reduction)
    "xent_plain": ((64, 10), "mean"),
    "nll_plain": ((64, 10), "mean"),
    "nll_none_plain": ((64, 10), "none"),
    "nll2d_plain": ((8, 10, 16, 16), "mean"),
    "nll_penalty": ((64, 10), "mean"),
}


def make(m, name):
    """One step of the workload ``name`` on library ``m`` (ember or torch)."""
    shape, reduction = WORKLOADS[name]
    rng = np.random.default_rng(0)
    x = m.from_numpy(rng.standard_normal(shape).astype(np.float32)).requires_grad_(True)
    t_shape = (shape[0],) + shape[2:]
    t = m.from_numpy(rng.integers(0, shape[1], t_shape))
    F = m.nn.functional

    def loss():
        if name.startswith("xent"):
            return F.cross_entropy(x, t)
        out = F.nll_loss(F.log_softmax(x, 1), t, reduction=reduction)
        return out.sum() if reduction == "none" else out

    def step():
        x.grad = None
        if name.endswith("penalty"):
            g, = m.autograd.grad(loss(), x, create_graph=True)
            (g * g).sum().backward()
        else:
            loss().backward()
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    run_ab(args.before, args.only.split(","), make, args.rounds, 20, label="workload",
           unit="us", digits=1)


if __name__ == "__main__":
    main()
