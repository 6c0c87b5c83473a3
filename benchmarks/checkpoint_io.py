"""Save and load time of a 100 MB state_dict, ember beside torch; and the time and peak
memory of loading a 1 GiB checkpoint, each library in its own child process.

    python benchmarks/checkpoint_io.py [--mb 100] [--big-gib 1]

The peak is the child's ``VmHWM`` (its peak resident size, which unlike
``ru_maxrss`` does not inherit the parent's) minus its resident size just before the
load (after importing the library), so it counts what loading allocates: about 1x the
checkpoint when storages are read straight into their arrays.
"""
import argparse
import os
import subprocess
import sys
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


_CHILD = r"""
import sys, time
lib, path, mmap = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
def status_kib(field):  # VmRSS now, VmHWM the peak (reset by exec, unlike ru_maxrss)
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
if lib == "torch":
    import torch
    load = lambda: torch.load(path, weights_only=True, mmap=mmap)
else:
    import ember
    load = lambda: ember.load(path, mmap=mmap)
before = status_kib("VmRSS")
t0 = time.perf_counter()
sd = load()
dt = time.perf_counter() - t0
peak = status_kib("VmHWM")
print(dt, before, peak, len(sd))
"""


def load_in_child(lib, path, mmap=False):
    """(seconds, peak KiB above the pre-load resident size) of one load in a new process."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", _CHILD, lib, path, "1" if mmap else "0"],
                         capture_output=True, text=True, timeout=600, env=env, check=True)
    dt, before, peak, _ = out.stdout.split()
    return float(dt), int(peak) - int(before)


def big_checkpoint(d, gib):
    """A ``gib`` GiB checkpoint, written by ember: one large float32 tensor (the case a
    reader that copies through a temporary doubles) and a few small ones."""
    import ember
    path = os.path.join(d, "big.pt")
    n = int(gib * 2**30 / 4) - 3 * 1024
    sd = {"embedding.weight": ember.from_numpy(np.full(n, 0.5, np.float32))}
    sd.update({f"norm{i}.bias": ember.from_numpy(np.full(1024, i, np.float32)) for i in range(3)})
    ember.save(sd, path)
    with open(path, "rb") as fh:  # into the page cache, so both libraries read from memory
        while fh.read(64 << 20):
            pass
    return path


def small(ember, torch, d, mb):
    """Save, load and mapped-load times of an ``mb`` MB state_dict, in this process."""
    pe, pt = os.path.join(d, "e.pt"), os.path.join(d, "t.pt")
    sde, sdt = state_dict(ember, mb), state_dict(torch, mb)
    se = best(lambda: ember.save(sde, pe))
    st = best(lambda: torch.save(sdt, pt))
    print(f"{'save':<12}{se:>10.1f}{st:>10.1f}{se / st:>8.2f}")
    le = best(lambda: ember.load(pe))
    lt = best(lambda: torch.load(pt, weights_only=True))
    print(f"{'load':<12}{le:>10.1f}{lt:>10.1f}{le / lt:>8.2f}")
    me = best(lambda: ember.load(pe, mmap=True))
    mt = best(lambda: torch.load(pt, weights_only=True, mmap=True))
    print(f"{'load mmap':<12}{me:>10.1f}{mt:>10.1f}{me / mt:>8.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--big-gib", type=float, default=1.0)
    args = ap.parse_args()
    import torch

    import ember
    print(f"{'':<12}{'ember ms':>10}{'torch ms':>10}{'ratio':>8}")
    with tempfile.TemporaryDirectory() as d:
        small(ember, torch, d, args.mb)
        if args.big_gib:
            path = big_checkpoint(d, args.big_gib)
            size = os.path.getsize(path) / 2**30
            print(f"\nloading a {size:.2f} GiB checkpoint, each in a fresh process "
                  "(time; peak memory above the resident size before the load)")
            for mmap in (False, True):
                for lib in ("ember", "torch"):
                    # the best of three fresh processes: timings on a busy machine drift
                    runs = [load_in_child(lib, path, mmap) for _ in range(3)]
                    dt, peak = min(r[0] for r in runs), max(r[1] for r in runs)
                    print(f"{lib:<6} mmap={mmap!s:<6} {dt:7.2f} s  {peak / 2**20:6.2f} GiB")

if __name__ == "__main__":
    main()
