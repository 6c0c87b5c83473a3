"""ember.distributed speed, under ``mpiexec -n 2`` (a benchmark, not a test):

    mpiexec -n 2 python benchmarks/distributed.py [--min-time S]

1. ``all_reduce`` of float32 tensors from 1 KB to 64 MB: ember's (in place on a
   tensor, with the cross-rank dtype/shape check and the deadline-aware wait) against
   mpi4py's raw blocking ``Allreduce`` on a NumPy array. Rounds of the two alternate,
   so load from other processes hits both alike; the median time per call is shown,
   the bandwidth (bytes / time) and the ratio raw time / ember time (1.0 = as fast).
2. The DDP step of an MLP 784-1024-1024-10 (batch 64 per rank, SGD): the step time on
   2 ranks against one process on the same per-rank batch without DDP (both ranks
   run it at once, so each sees the same load), and the time of all-reducing the
   gradients alone; "hidden" is the share of that all-reduce time that did not show up
   in the step (overlapped with backward).
"""
import argparse
import os
import statistics
import time

import numpy as np

import ember
import ember.distributed as dist
from ember import nn


def timeit(fn, min_time):
    """Median seconds per call over about ``min_time``. Every rank makes the same number
    of calls (rank 0's estimate, broadcast): a rank calling a collective more often than
    the others would wait for them forever."""
    fn()
    t = time.perf_counter()
    fn()
    reps = ember.tensor([max(5, int(min_time / max(time.perf_counter() - t, 1e-6)))])
    dist.broadcast(reps, src=0)
    times = []
    for _ in range(int(reps.item())):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bandwidth(min_time):
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rows = []
    for size in (1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26):
        n = size // 4
        t = ember.ones(n)
        a = np.ones(n, np.float32)
        ember_t, raw_t = [], []
        for _ in range(3):  # interleaved rounds
            dist.barrier()
            ember_t.append(timeit(lambda t=t: dist.all_reduce(t), min_time / 6))
            comm.Barrier()
            raw_t.append(timeit(lambda a=a: comm.Allreduce(MPI.IN_PLACE, a), min_time / 6))
        e, r = statistics.median(ember_t), statistics.median(raw_t)
        rows.append((size, e, r))
    return rows


def ddp_step(min_time):
    rank = dist.get_rank()
    rng = np.random.default_rng(rank)
    x = ember.tensor(rng.standard_normal((64, 784)).astype(np.float32))
    y = ember.tensor(rng.integers(0, 10, 64))

    def model():
        ember.manual_seed(0)
        return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024),
                             nn.ReLU(), nn.Linear(1024, 10))
    loss_fn = nn.CrossEntropyLoss()

    def stepper(m):
        opt = ember.optim.SGD(m.parameters(), lr=0.01)

        def step():
            opt.zero_grad()
            loss_fn(m(x), y).backward()
            opt.step()
        return step
    local = stepper(model())
    ddps = {cap: stepper(nn.parallel.DistributedDataParallel(model(), bucket_cap_mb=cap))
            for cap in (25, 1)}
    grads = ember.zeros(sum(p.numel() for p in model().parameters()))
    t_local, t_ar = [], []
    t_ddp = {cap: [] for cap in ddps}
    for _ in range(3):
        dist.barrier()
        t_local.append(timeit(local, min_time / 12))
        for cap, step in ddps.items():
            dist.barrier()
            t_ddp[cap].append(timeit(step, min_time / 12))
        dist.barrier()
        t_ar.append(timeit(lambda: dist.all_reduce(grads), min_time / 12))
    return (statistics.median(t_local), {c: statistics.median(t) for c, t in t_ddp.items()},
            statistics.median(t_ar), grads.numel() * 4)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--min-time", type=float, default=12.0)
    ns = p.parse_args()
    dist.init_process_group("mpi")
    rank = dist.get_rank()
    rows = bandwidth(ns.min_time)
    local, steps, ar, nbytes = ddp_step(ns.min_time)
    if rank == 0:
        load = os.getloadavg()[0]
        print(f"ember.distributed on {dist.get_world_size()} ranks, load average {load:.1f}")
        print(f"{'size':>8} {'ember us':>10} {'raw us':>10} {'ember GB/s':>11} "
              f"{'raw GB/s':>9} {'raw/ember':>9}")
        for size, e, r in rows:
            name = f"{size >> 20} MB" if size >= 1 << 20 else f"{size >> 10} KB"
            print(f"{name:>8} {e * 1e6:10.1f} {r * 1e6:10.1f} {size / e / 1e9:11.2f} "
                  f"{size / r / 1e9:9.2f} {r / e:9.2f}")
        print(f"MLP 784-1024-1024-10, batch 64 per rank: one process without DDP "
              f"{local * 1e3:.1f} ms per step; all-reduce of its {nbytes / 1e6:.1f} MB of "
              f"gradients alone {ar * 1e3:.1f} ms")
        for cap, t in steps.items():
            hidden = 1 - (t - local) / ar if ar > 0 else 0.0
            print(f"  DDP bucket_cap_mb={cap}: step {t * 1e3:.1f} ms, overhead "
                  f"{(t - local) * 1e3:.1f} ms, all-reduce hidden behind backward "
                  f"{max(0.0, min(1.0, hidden)):.0%}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
