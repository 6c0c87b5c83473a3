"""The small CNN's step (``cnn_step.py``) layer by layer: forward, and forward with the
gradients the step takes (conv1: weight and bias; conv2: input, weight and bias; the
others: their input), for an older ember tree, this one and torch, in one process,
rounds alternated (the trees swapped as in ``nn_ops_ab.py``).

    python benchmarks/cnn_layers.py [/tmp/before] [--only conv2,pool1] [--rounds R]
        [--no-numba]

``--no-numba`` runs this tree's max pooling on its NumPy loops, as an install without
the ``ember[fast]`` extra does (``EMBER_MKL=0`` does the same for MKL).

Prints the median CPU milliseconds per call of each, the ratios to torch and
after/before, and the load average. One thread each (``OPENBLAS_NUM_THREADS=1`` set here).
"""
import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name: (layer factory, input shape, whether the input takes a gradient in the step)
LAYERS = {
    "conv1": (lambda m: m.nn.Conv2d(1, 32, 3), (64, 1, 28, 28), False),
    "relu1": (lambda m: m.nn.ReLU(), (64, 32, 26, 26), True),
    "pool1": (lambda m: m.nn.MaxPool2d(2), (64, 32, 26, 26), True),
    "conv2": (lambda m: m.nn.Conv2d(32, 64, 3), (64, 32, 13, 13), True),
    "relu2": (lambda m: m.nn.ReLU(), (64, 64, 11, 11), True),
    "pool2": (lambda m: m.nn.MaxPool2d(2), (64, 64, 11, 11), True),
    "fc1": (lambda m: m.nn.Linear(1600, 128), (64, 1600), True),
    "fc2": (lambda m: m.nn.Linear(128, 10), (64, 128), True),
}


def make(m, name, backward):
    """One call of layer ``name``: its forward (under no_grad when not ``backward``), or
    its forward and backward from a fixed output gradient."""
    from nn_ops import layer_step
    factory, shape, grad_in = LAYERS[name]
    return layer_step(m, factory, shape, not backward, grad_in)


def main():
    sys.path.insert(0, HERE)
    from nn_ops_ab import _load, _use
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", nargs="?", help="root of an older ember tree")
    ap.add_argument("--only", default=",".join(LAYERS))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--no-numba", action="store_true",
                    help="this tree's pooling without its numba kernels")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    libs = []
    if args.before:
        libs.append(("before", *_load(args.before)))
    libs.append(("after", *_load(ROOT)))
    if args.no_numba:
        libs[-1][2]["ember.ops.pooling"]._NUMBA["pool"] = None
    libs.append(("torch", torch, None))
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; one thread each; "
          f"median CPU ms per call of {args.rounds} alternated rounds of 3 calls")
    head = "".join(f"{n:>8}" for n, _, _ in libs) + "".join(
        f"{n[0]}/torch".rjust(9) for n, _, _ in libs[:-1])
    print(f"{'layer':<14}{head}" + ("  after/b" if args.before else ""))
    for name in args.only.split(","):
        for backward in (False, True):
            steps = []
            for _, m, mods in libs:
                _use(mods)
                steps.append(make(m, name, backward))
            times = [[] for _ in libs]
            for r in range(args.rounds + 1):
                for (_, _, mods), step, t in zip(libs, steps, times):
                    _use(mods)
                    c = time.process_time()
                    for _ in range(3):
                        step()
                    if r:  # the first round warms up
                        t.append((time.process_time() - c) / 3 * 1e3)
            med = [float(np.median(t)) for t in times]
            row = "".join(f"{v:8.2f}" for v in med) + "".join(
                f"{v / med[-1]:9.2f}" for v in med[:-1])
            if args.before:
                row += f"{med[1] / med[0]:9.2f}"
            label = f"{name} {'f+b' if backward else 'fwd'}"
            print(f"{label:<14}{row}", flush=True)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
