"""float32 ``cumsum`` of an older ember tree and this one, in one process, rounds
alternated (the trees swapped as in ``nn_ops_ab.py``): the cost of summing in double.

    git archive main | tar -x -C /tmp/before
    python benchmarks/cumsum_ab.py /tmp/before [--rounds R]

Printed: median CPU milliseconds per call of each, after/before, and the load average.
One thread each.
"""
import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import nn_ops_ab as _ab  # noqa: E402

CASES = [((256, 1024), 1), ((256, 1024), 0), ((64, 64), 1)]


def _load(path):
    """The ``ember`` modules of the tree at ``path``."""
    sys.path.insert(0, path)
    for k in list(_ab._ember_modules()):
        del sys.modules[k]
    import ember  # noqa: F401
    mods = _ab._ember_modules()
    sys.path.remove(path)
    return mods


def main():
    p = argparse.ArgumentParser()
    p.add_argument("before")
    p.add_argument("--rounds", type=int, default=15)
    args = p.parse_args()
    print("load average", os.getloadavg())
    trees = [("before", _load(args.before)), ("after", _load(ROOT))]
    rng = np.random.default_rng(0)
    for shape, dim in CASES:
        x = rng.standard_normal(shape).astype(np.float32)
        times = {}
        for _ in range(args.rounds):
            for name, mods in trees:
                _ab._use(mods)
                import ember
                t = ember.tensor(x)
                t0 = time.process_time()
                for _ in range(20):
                    ember.cumsum(t, dim)
                times.setdefault(name, []).append((time.process_time() - t0) / 20 * 1e3)
        b, a = np.median(times["before"]), np.median(times["after"])
        print(f"cumsum {shape} dim {dim}: before {b:.3f} ms, after {a:.3f} ms, "
              f"after/before {a / b:.2f}")
    print("load average", os.getloadavg())


if __name__ == "__main__":
    main()
