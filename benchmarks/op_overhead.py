"""Per-op overhead on tiny tensors, ember beside torch in one process.

A chain of 100 elementwise ops (add, mul, sin, tanh, exp, sub, divide by a
constant) on shape (16,): forward with a graph, forward + backward, and forward
under no_grad. Prints microseconds per op and the ratio ember/torch.

    python benchmarks/op_overhead.py [--repeat N] [--clock wall|cpu]

``--clock cpu`` times with the process's CPU time (``time.process_time``) instead of
the wall clock: on a machine shared with other jobs it leaves out the time this process
waited for a core, which otherwise swamps a difference of a few percent.
"""
import argparse
import time

import numpy as np


def chain(m, x, w):
    y = x
    for _ in range(100 // 7):
        y = y + w
        y = y * w
        y = m.sin(y)
        y = m.tanh(y)
        y = m.exp(y)
        y = y - w
        y = y / 3.0
    return y


N_OPS = (100 // 7) * 7


def bench(m, mode, repeat, clock=time.perf_counter):
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal(16).astype(np.float32), requires_grad=True)
    w = m.tensor(rng.standard_normal(16).astype(np.float32), requires_grad=True)

    def once():
        if mode == "no_grad":
            with m.no_grad():
                chain(m, x, w)
        elif mode == "forward":
            chain(m, x, w)
        else:
            chain(m, x, w).sum().backward()
    for _ in range(20):
        once()
    best = float("inf")
    for _ in range(repeat):
        t0 = clock()
        for _ in range(20):
            once()
        best = min(best, (clock() - t0) / 20)
    return best / N_OPS * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = ap.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    import torch

    import ember
    print(f"{'mode':<18}{'ember us/op':>12}{'torch us/op':>12}{'ratio':>8}")
    for mode in ("forward", "forward+backward", "no_grad"):
        e = bench(ember, mode, args.repeat, clock)
        t = bench(torch, mode, args.repeat, clock)
        print(f"{mode:<18}{e:>12.2f}{t:>12.2f}{e / t:>8.2f}")


if __name__ == "__main__":
    main()
