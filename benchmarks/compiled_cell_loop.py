"""A compiled cell called in a Python loop: eager ember, ``ember.compile(cell)`` and
torch eager, alternated round by round in one process, CPU time, one thread.

    python benchmarks/compiled_cell_loop.py [--rounds 25]

The step: ``zero_grad``; ``h = cell(xs[t], h)`` for 32 steps of RNNCell(64, 128) on a
batch of 32; loss ``mean(h**2)``; ``backward``; SGD. With the compiled cell every one
of the 32 calls goes through the guards and replays the plan, and the backward runs one
plan backward per call. Prints the median CPU milliseconds per step, the ratios to
torch and compiled/eager, and the load average.
"""
import argparse
import os
import time

import numpy as np


def make(m, compiled):
    """The training step for library ``m``, with the cell compiled or not."""
    m.manual_seed(0)
    cell = m.nn.RNNCell(64, 128)
    opt = m.optim.SGD(cell.parameters(), lr=0.01)
    run = m.compile(cell) if compiled else cell
    xs = m.tensor(np.random.default_rng(0).standard_normal((32, 32, 64), dtype=np.float32))

    def step():
        opt.zero_grad()
        h = m.zeros(32, 128)
        for t in range(32):
            h = run(xs[t], h)
        loss = h.pow(2).mean()
        loss.backward()
        opt.step()
        return loss
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=25)
    args = ap.parse_args()
    import torch

    import ember
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    steps = {"eager": make(ember, False), "compiled": make(ember, True),
             "torch": make(torch, False)}
    for s in steps.values():
        for _ in range(3):
            s()
    res = {k: [] for k in steps}
    for _ in range(args.rounds):
        for name, s in steps.items():
            c = time.process_time()
            for _ in range(5):
                s()
            res[name].append((time.process_time() - c) / 5 * 1e3)
    ms = {k: float(np.median(v)) for k, v in res.items()}
    t = ms["torch"]
    print(f"eager {ms['eager']:.2f} ms ({ms['eager'] / t:.2f} of torch), compiled cell "
          f"{ms['compiled']:.2f} ms ({ms['compiled'] / t:.2f}), torch {t:.2f} ms; "
          f"compiled/eager {ms['compiled'] / ms['eager']:.2f}; load average "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
