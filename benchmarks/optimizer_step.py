"""``optimizer.step()`` alone, ember beside torch, alternated in one process.

    python benchmarks/optimizer_step.py [--rounds 30] [--big]

SGD (momentum 0.9) and Adam over the parameters of the MLP 784-256-128-10 of
benchmarks/training_steps.py, and with ``--big`` also Adam over one 2048x2048
parameter (4M elements: arrays larger than the caches), gradients set once; median CPU
milliseconds per step of rounds of 20 steps, one thread, and the ratio ember/torch, with
the load average.
"""
import argparse
import os
import time

import numpy as np


def build(m, kind):
    nn = m.nn
    m.manual_seed(0)
    if kind == "adam_4m":
        model = nn.Linear(2048, 2048, bias=False)
        opt = m.optim.Adam(model.parameters(), lr=1e-3)
        model.weight.grad = m.ones_like(model.weight) * 0.5
        opt.step()
        return opt
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    if kind == "sgd":
        opt = m.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    else:
        opt = m.optim.Adam(model.parameters(), lr=1e-3)
    for p in model.parameters():
        p.grad = m.ones_like(p) * 0.5
    opt.step()
    return opt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--big", action="store_true", help="also Adam on a 4M-element parameter")
    args = ap.parse_args()
    import torch

    import ember
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    for kind in ("sgd", "adam") + (("adam_4m",) if args.big else ()):
        opts = {"ember": build(ember, kind), "torch": build(torch, kind)}
        res = {k: [] for k in opts}
        for _ in range(args.rounds):
            for name, o in opts.items():
                c = time.process_time()
                for _ in range(20):
                    o.step()
                res[name].append((time.process_time() - c) / 20 * 1e3)
        e, t = np.median(res["ember"]), np.median(res["torch"])
        print(f"{kind}: ember {e:.3f} ms, torch {t:.3f} ms, ratio {e / t:.2f}; load average "
              f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
