"""Gradient penalties through layer norm, batch norm, GELU and fused attention
(``create_graph=True``, then backward through the gradient), and the same layers' plain
backward: an older ember tree, this one and torch, in one process, rounds alternated.

    git archive main | tar -x -C /tmp/before
    python benchmarks/grad_penalty_ab.py /tmp/before [--only ln_penalty,ln_plain] [--rounds R]

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


def _layer(m, name, x, w, b):
    F = m.nn.functional
    if name.startswith("ln"):
        return F.layer_norm(x, x.shape[-1:], w, b)
    if name.startswith("bneval"):
        c = x.shape[1]
        return F.batch_norm(x, m.zeros(c) + 0.1, m.ones(c) * 1.5, w, b, training=False)
    if name.startswith("bn"):
        return F.batch_norm(x, None, None, w, b, training=True)
    if name == "sdpa_penalty" and m.__name__ == "torch":
        # PyTorch's fused CPU attention has no second derivative: its math formula
        q, k, v = x, x * 0.5, x * 2
        return m.softmax(q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5, -1) @ v
    if name.startswith("sdpa"):
        return F.scaled_dot_product_attention(x, x * 0.5, x * 2)
    return F.gelu(x)


WORKLOADS = {  # name: (input shape, parameters' shape or None)
    "ln_penalty": ((64, 256), (256,)),
    "ln_plain": ((64, 256), (256,)),
    "bn_penalty": ((64, 128), (128,)),
    "bn_plain": ((64, 128), (128,)),
    "bneval_penalty": ((64, 128), (128,)),
    "bneval_plain": ((64, 128), (128,)),
    "gelu_penalty": ((128, 256), None),
    "gelu_plain": ((128, 256), None),
    "sdpa_penalty": ((8, 4, 64, 32), None),
    "sdpa_plain": ((8, 4, 64, 32), None),
}


def make(m, name):
    """One step of the workload ``name`` on library ``m`` (ember or torch)."""
    shape, pshape = WORKLOADS[name]
    rng = np.random.default_rng(0)
    x = m.from_numpy(rng.standard_normal(shape).astype(np.float32)).requires_grad_(True)
    w = b = None
    if pshape is not None:
        w = m.from_numpy(rng.standard_normal(pshape).astype(np.float32)).requires_grad_(True)
        b = m.from_numpy(rng.standard_normal(pshape).astype(np.float32)).requires_grad_(True)
    c = m.from_numpy(rng.standard_normal(shape).astype(np.float32))
    leaves = [t for t in (x, w, b) if t is not None]

    def penalty():
        loss = (_layer(m, name, x, w, b) * c).sum()
        g, = m.autograd.grad(loss, x, create_graph=True)
        (g * g).sum().backward()

    def plain():
        (_layer(m, name, x, w, b) * c).sum().backward()

    def step():
        for t in leaves:
            t.grad = None
        (penalty if name.endswith("penalty") else plain)()
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    run_ab(args.before, args.only.split(","), make, args.rounds, 5, label="workload",
           unit="ms", digits=3)

if __name__ == "__main__":
    main()
