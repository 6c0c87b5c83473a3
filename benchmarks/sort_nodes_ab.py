"""Sorting and value-selecting ops (sort, topk, kthvalue, max/median with a dim,
cummax), forward alone and forward + backward, of an older ember tree against this
one, in one process with the rounds alternated (the trees swapped as in
``nn_ops_ab.py``).

    git archive main | tar -x -C /tmp/before
    cd /tmp && python $REPO/benchmarks/sort_nodes_ab.py /tmp/before [--rounds R]

Printed per case: the best CPU microseconds per call of each tree over the rounds and
after/before, with the load average before and after. One thread each.
"""
import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CASES = {
    "sort 16": ((16,), lambda m, x: m.sort(x).values),
    "sort 64x256": ((64, 256), lambda m, x: m.sort(x).values),
    "topk8 64x256": ((64, 256), lambda m, x: m.topk(x, 8).values),
    "kthvalue 64x256": ((64, 256), lambda m, x: m.kthvalue(x, 100).values),
    "max dim 16": ((4, 4), lambda m, x: x.max(1).values),
    "max dim 256x256": ((256, 256), lambda m, x: x.max(1).values),
    "median dim 64x256": ((64, 256), lambda m, x: x.median(1).values),
    "cummax 64x256": ((64, 256), lambda m, x: m.cummax(x, 1).values),
}


def _setup(m, shape, fn, backward):
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)

    def once():
        y = fn(m, x)
        if backward:
            y.backward(m.ones_like(y))
    return once


def main():
    sys.path.insert(0, HERE)
    import nn_ops_ab
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20)
    args = ap.parse_args()
    before, bmods = nn_ops_ab._load(args.before)
    after, amods = nn_ops_ab._load(ROOT)
    libs = [(before, bmods), (after, amods)]
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; one thread; "
          f"best CPU us per call of {args.rounds} alternated rounds of {args.calls} calls")
    print(f"{'case':<28}{'before':>9}{'after':>9}{'after/b':>9}")
    for name, (shape, fn) in CASES.items():
        for backward in (False, True):
            fns = []
            for m, mods in libs:
                nn_ops_ab._use(mods)
                fns.append(_setup(m, shape, fn, backward))
            best = [float("inf")] * len(libs)
            for r in range(args.rounds + 1):
                for i, ((_, mods), f) in enumerate(zip(libs, fns)):
                    nn_ops_ab._use(mods)
                    c = time.process_time()
                    for _ in range(args.calls):
                        f()
                    if r:  # the first round warms up
                        best[i] = min(best[i], (time.process_time() - c) / args.calls * 1e6)
            b, a = best
            label = f"{name} {'fwd+bwd' if backward else 'fwd'}"
            print(f"{label:<28}{b:9.1f}{a:9.1f}{a / b:9.2f}", flush=True)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
