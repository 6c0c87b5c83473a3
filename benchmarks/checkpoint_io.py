"""Save and load time of a 100 MB state_dict, ember beside torch.

    python benchmarks/checkpoint_io.py [--mb 100]
"""
import argparse
import os
import tempfile
import time

import numpy as np


def state_dict(m, mb):
    rng = np.random.default_rng(0)
    n = int(mb * 2**20 / 4 / 16)
    return {f"layer{i}.weight": m.from_numpy(rng.standard_normal(n, dtype=np.float32))
            for i in range(16)}


def best(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=100)
    args = ap.parse_args()
    import torch

    import ember
    print(f"{'':<12}{'ember ms':>10}{'torch ms':>10}{'ratio':>8}")
    with tempfile.TemporaryDirectory() as d:
        pe, pt = os.path.join(d, "e.pt"), os.path.join(d, "t.pt")
        sde, sdt = state_dict(ember, args.mb), state_dict(torch, args.mb)
        se = best(lambda: ember.save(sde, pe))
        st = best(lambda: torch.save(sdt, pt))
        print(f"{'save':<12}{se:>10.1f}{st:>10.1f}{se / st:>8.2f}")
        le = best(lambda: ember.load(pe))
        lt = best(lambda: torch.load(pt, weights_only=True))
        print(f"{'load':<12}{le:>10.1f}{lt:>10.1f}{le / lt:>8.2f}")
        me = best(lambda: ember.load(pe, mmap=True))
        mt = best(lambda: torch.load(pt, weights_only=True, mmap=True))
        print(f"{'load mmap':<12}{me:>10.1f}{mt:>10.1f}{me / mt:>8.2f}")


if __name__ == "__main__":
    main()
