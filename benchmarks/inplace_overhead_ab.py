"""Per-call cost of in-place writes and ``out=`` on small contiguous tensors, of an older
ember tree, this one and torch, in one process, rounds alternated (the trees swapped as
in ``nn_ops_ab.py``): the price of the overlap checks on ordinary tensors.

    git archive main | tar -x -C /tmp/before
    cd /tmp && python $REPO/benchmarks/inplace_overhead_ab.py /tmp/before [--rounds R]

Printed per write: the best CPU microseconds per call over the rounds, the ratios to
torch and after/before, and the load average before and after. One thread each.
"""
import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CALLS = 200


def _writes(m):
    """The writes, each a function of no arguments, on fresh (16,) float32 tensors."""
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal(16).astype(np.float32))
    w = m.tensor(rng.standard_normal(16).astype(np.float32))
    out = m.empty(16)
    mask = w > 0
    leaf = m.tensor(rng.standard_normal(16).astype(np.float32), requires_grad=True)

    def graph_add_():
        y = leaf * 1
        y.add_(w)
    return {
        "add_(w)": lambda: x.add_(w),
        "mul_(1.0)": lambda: x.mul_(1.0),
        "clamp_(-1, 1)": lambda: x.clamp_(-1, 1),
        "fill_(0.5)": lambda: x.fill_(0.5),
        "zero_()": lambda: x.zero_(),
        "masked_fill_": lambda: x.masked_fill_(mask, 0.0),
        "copy_(w)": lambda: x.copy_(w),
        "x[2:5] = 1.0": lambda: x.__setitem__(slice(2, 5), 1.0),
        "add(x, w, out=)": lambda: m.add(x, w, out=out),
        "exp(w, out=)": lambda: m.exp(w, out=out),
        "y = leaf * 1; y.add_(w)": graph_add_,
    }


def main():
    sys.path.insert(0, HERE)
    import nn_ops_ab
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    before, bmods = nn_ops_ab._load(args.before)
    after, amods = nn_ops_ab._load(ROOT)
    libs = [(before, bmods), (after, amods), (torch, None)]
    writes = []
    for m, mods in libs:
        nn_ops_ab._use(mods)
        writes.append(_writes(m))
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; one thread each; "
          f"best CPU us per call of {args.rounds} alternated rounds of {CALLS} calls")
    print(f"{'write':<26}{'before':>8}{'after':>8}{'torch':>8}{'b/torch':>9}{'a/torch':>9}"
          f"{'after/b':>9}")
    for name in writes[0]:
        best = [float("inf")] * len(libs)
        for r in range(args.rounds + 1):
            for i, (_, mods) in enumerate(libs):
                nn_ops_ab._use(mods)
                fn = writes[i][name]
                c = time.process_time()
                for _ in range(CALLS):
                    fn()
                if r:  # the first round warms up
                    best[i] = min(best[i], (time.process_time() - c) / CALLS * 1e6)
        b, a, t = best
        print(f"{name:<26}{b:8.2f}{a:8.2f}{t:8.2f}{b / t:9.2f}{a / t:9.2f}{a / b:9.2f}",
              flush=True)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
