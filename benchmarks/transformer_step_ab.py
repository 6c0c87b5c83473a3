"""The Transformer layer training step (``transformer_step.py``) of an older ember tree,
this one and torch, in one process, rounds alternated (the trees swapped as in
``nn_ops_ab.py``).

    python benchmarks/transformer_step_ab.py /tmp/before [--steps N] [--no-numba]

``--no-numba`` hides numba from both trees (the default install; with ``EMBER_MKL=0``
that is NumPy only). One thread each (``OPENBLAS_NUM_THREADS=1`` set here). Prints the
median CPU milliseconds per step of each, the ratios to torch and after/before, the
load average before and after, and how far each ember's losses drift from torch's.
"""
import argparse
import os
import sys

os.environ["OPENBLAS_NUM_THREADS"] = "1"
if __name__ == "__main__" and "--no-numba" in sys.argv:
    sys.modules["numba"] = None  # numba absent, as without the ``ember[fast]`` extra

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main():
    sys.path.insert(0, HERE)
    import transformer_step as ts
    from nn_ops_ab import _load, _use
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-numba", action="store_true", help="numba hidden from both trees")
    args = ap.parse_args()

    import torch
    torch.set_num_threads(1)
    before, bmods = _load(args.before)
    importlib_optim(bmods)
    after, amods = _load(ROOT)
    importlib_optim(amods)
    rng = np.random.default_rng(0)
    xb = rng.standard_normal((16, 64, ts.D_MODEL)).astype(np.float32)
    yb = rng.standard_normal((16, 64, ts.D_MODEL)).astype(np.float32)
    torch.manual_seed(0)
    weights = {k: v.detach().numpy().copy() for k, v in ts.build(torch).state_dict().items()}
    libs = [("before", before, bmods), ("after", after, amods), ("torch", torch, None)]
    runs = []
    for _, m, mods in libs:
        _use(mods)
        step = ts.make_step(m, ts.build(m, weights))
        runs.append((step, m.tensor(xb), m.tensor(yb), mods))
    from cnn_step_ab import alternate
    alternate("Transformer layer step", runs, args.warmup, args.steps, args.no_numba)


def importlib_optim(mods):
    """Import ``ember.optim`` into one tree's module set (``_load`` brings ``ember.nn``)."""
    import importlib

    from nn_ops_ab import _ember_modules, _use
    _use(mods)
    importlib.import_module("ember.optim")
    mods.update(_ember_modules())


if __name__ == "__main__":
    main()
