"""DataLoader throughput over an in-memory dataset, ember beside torch.

    python benchmarks/dataloader.py [--n 20000] [--batch 64]

A map-style dataset of n float32 samples of 784 values with integer labels, read
per sample through __getitem__ (as a user's Dataset does) and collated by
default_collate; samples per second with 0 and 2 workers.
"""
import argparse
import time

import numpy as np


def make_dataset(m, n):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 784), dtype=np.float32)
    y = rng.integers(0, 10, n)

    class InMemory(m.utils.data.Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            return m.from_numpy(x[i]), int(y[i])
    return InMemory()


def throughput(m, n, batch, workers):
    ds = make_dataset(m, n)
    loader = m.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers)
    t0 = time.perf_counter()
    seen = 0
    for xb, _ in loader:
        seen += xb.shape[0]
    return seen / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    import torch
    import torch.utils.data  # noqa: F401

    import ember
    import ember.utils.data  # noqa: F401
    print(f"{'workers':<9}{'ember samples/s':>17}{'torch samples/s':>17}{'ratio':>8}")
    for workers in (0, 2):
        e = throughput(ember, args.n, args.batch, workers)
        t = throughput(torch, args.n, args.batch, workers)
        # a ratio above 1 means ember is faster here (throughput, not time)
        print(f"{workers:<9}{e:>17.0f}{t:>17.0f}{e / t:>8.2f}")


if __name__ == "__main__":
    main()
