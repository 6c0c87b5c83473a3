"""``compiled_cell_loop.py`` for an older ember tree and this one, in one process:
each tree's eager and compiled cell loops and torch's, rounds alternated (the trees
swapped as in ``nn_ops_ab.py``), CPU time, one thread.

    python benchmarks/compiled_cell_loop_ab.py /tmp/before [--rounds 25] [--no-numba]

``--no-numba`` hides numba from both trees. Prints the median CPU milliseconds per step
of each, compiled/eager per tree, each over torch, after/before for the compiled loop,
and the load average before and after.
"""
import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
if __name__ == "__main__" and "--no-numba" in sys.argv:
    sys.modules["numba"] = None

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main():
    sys.path.insert(0, HERE)
    from compiled_cell_loop import make
    from nn_ops_ab import _load, _use
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--no-numba", action="store_true")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    before, bmods = _load(args.before)
    after, amods = _load(ROOT)
    runs = {}
    for tree, m, mods in (("before", before, bmods), ("after", after, amods)):
        _use(mods)
        for kind in ("eager", "compiled"):
            runs[tree, kind] = (make(m, kind == "compiled"), mods)
    runs["torch", "eager"] = (make(torch, False), None)
    for step, mods in runs.values():  # warm up
        _use(mods)
        for _ in range(3):
            step()
    load0 = os.getloadavg()
    res = {k: [] for k in runs}
    for _ in range(args.rounds):
        for k, (step, mods) in runs.items():
            _use(mods)
            c = time.process_time()
            for _ in range(5):
                step()
            res[k].append((time.process_time() - c) / 5 * 1e3)
    ms = {k: float(np.median(v)) for k, v in res.items()}
    t = ms["torch", "eager"]
    print(f"EMBER_MKL={os.environ.get('EMBER_MKL', 'unset')}"
          f"{', no numba' if args.no_numba else ''}; torch {t:.2f} ms")
    for tree in ("before", "after"):
        e, c = ms[tree, "eager"], ms[tree, "compiled"]
        print(f"{tree:6s} eager {e:.2f} ms ({e / t:.3f} of torch), compiled {c:.2f} ms "
              f"({c / t:.3f}); compiled/eager {c / e:.3f}")
    print(f"compiled after/before {ms['after', 'compiled'] / ms['before', 'compiled']:.3f}, "
          f"eager after/before {ms['after', 'eager'] / ms['before', 'eager']:.3f}; load "
          f"{' '.join(f'{v:.2f}' for v in load0)} -> "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
