"""The compiled whole training steps of ``compile_step.py`` of an older ember tree, this
one and torch eager, in one process, rounds alternated (the trees swapped as in
``nn_ops_ab.py``).

    python benchmarks/compile_step_ab.py /tmp/before [--only mlp,transformer]
                                         [--min-time S] [--no-numba]

``--no-numba`` hides numba from both trees (the default install's NumPy paths; with
``EMBER_MKL=0`` that is NumPy only). One thread each (``OPENBLAS_NUM_THREADS=1`` set
here). Prints the median CPU milliseconds per step of each, the ratios to torch and
after/before, and the load average before and after. The order of the three within a
round is reversed every other round (a fixed order favoured its second slot by ~4 %).
``--only mlp_tiny`` adds the 8-8-8-4 MLP (the step's fixed cost).
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
    import compile_step as cs
    from nn_ops_ab import _load, _use
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--only", default="mlp,transformer")
    ap.add_argument("--min-time", type=float, default=2.0, help="seconds per library")
    ap.add_argument("--no-numba", action="store_true")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    before, bmods = _load(args.before)
    after, amods = _load(ROOT)
    libs = [(before, bmods, "step"), (after, amods, "step"), (torch, None, "eager")]
    print(f"one thread, EMBER_MKL={os.environ.get('EMBER_MKL', 'unset')}"
          f"{', no numba' if args.no_numba else ''}; compiled step (ember), eager (torch)")
    for name in args.only.split(","):
        steps = []
        for m, mods, variant in libs:
            _use(mods)
            torch.manual_seed(0)
            m.manual_seed(0)
            make = cs.WORKLOADS.get(name) or cs.EXTRA_WORKLOADS[name]
            steps.append((cs.make_step(m, make, variant)[0], mods))
        for step, mods in steps:  # capture, plan, numba's compilation, warm-up
            _use(mods)
            for _ in range(5):
                step()
        load0 = os.getloadavg()
        cpu = [[] for _ in libs]
        start = time.perf_counter()
        order = list(zip(steps, cpu))
        while time.perf_counter() - start < args.min_time * len(libs) or len(cpu[0]) < 6:
            order.reverse()
            for (step, mods), c in order:
                _use(mods)
                c0 = time.process_time()
                for _ in range(3):
                    step()
                c.append((time.process_time() - c0) / 3 * 1e3)
        b, a, t = (float(np.median(c)) for c in cpu)
        print(f"{name:11s} CPU ms/step before {b:.3f} after {a:.3f} torch {t:.3f} | "
              f"before/torch {b / t:.3f} after/torch {a / t:.3f} after/before {a / b:.3f} | "
              f"load {' '.join(f'{v:.2f}' for v in load0)} -> "
              f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
