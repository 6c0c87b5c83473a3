"""A product split in two blocks on ember's pool, before and after the caller takes back
a block its worker has not started, against the product whole on one thread: rounds
alternated in one process.

    python benchmarks/pool_take_back_ab.py [--before /tmp/base16] [--shape 128x784x256]
                                           [--gap-us 300] [--min-time 2] [--numpy-only]

Each call: ``--gap-us`` microseconds of the caller's own work (a NumPy loop, as the
serial Python between a training step's splits, during which the worker sleeps), then
``a @ b`` (``m x k`` by ``k x n``, float32, NumPy's OpenBLAS at one thread) whole, or in
two row halves on the pool of ``--before``'s tree (``ember/backend/pool.py`` loaded
from there) or of this tree. Printed: per way the median and best wall microseconds per
call less the gap's own median, their ratio to the whole product, the share of calls
whose two blocks overlapped in time for at least half of the caller's block (the second
core was there), and the share of blocks this tree's caller took back; the load
average. Run it at normal priority (``nice -n 0``): these are wall times.
"""
import argparse
import importlib.util
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

if __name__ == "__main__" and "--numpy-only" in sys.argv:
    from two_threads import _NoExtras
    sys.meta_path.insert(0, _NoExtras())


def _load():
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def _pool_module(tree):
    spec = importlib.util.spec_from_file_location(
        f"pool_{abs(hash(tree))}", os.path.join(tree, "ember", "backend", "pool.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="/tmp/base16")
    ap.add_argument("--shape", default="128x784x256")
    ap.add_argument("--gap-us", type=float, default=300.0)
    ap.add_argument("--min-time", type=float, default=2.0, help="seconds per way")
    ap.add_argument("--calls", type=int, default=20, help="calls per round")
    ap.add_argument("--numpy-only", action="store_true")
    args = ap.parse_args()
    import numpy as np

    from ember.backend import threads
    for lib in threads._blas_libs():
        lib.set_num_threads(1)
    m, k, n = map(int, args.shape.split("x"))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    out = np.empty((m, n), np.float32)
    filler = np.ones(4096, np.float32)
    spans = []
    clock = time.perf_counter

    def gap():
        end = clock() + args.gap_us * 1e-6
        while clock() < end:
            np.add(filler, 1.0, out=filler)

    def block(lo, hi):
        start = clock()
        np.matmul(a[lo:hi], b, out=out[lo:hi])
        spans.append((lo, start, clock()))

    pools = {"before": _pool_module(args.before).Pool(), "after": _pool_module(
        os.path.dirname(HERE)).Pool()}
    ways = {"whole": lambda: np.matmul(a, b, out=out),
            "gap only": lambda: None,
            "before": lambda: pools["before"].run(block, (0, m // 2, m)),
            "after": lambda: pools["after"].run(block, (0, m // 2, m))}
    times = {w: [] for w in ways}
    overlap = {w: [0, 0] for w in ("before", "after")}
    print(f"{m} x {k} x {n} float32, gap {args.gap_us:.0f} us, OpenBLAS at one thread, "
          f"nice {os.nice(0)}; load average before {_load()}", flush=True)
    for fn in ways.values():  # warm up (the pools' threads started)
        fn()
    begin = clock()
    while clock() - begin < len(ways) * args.min_time:
        for way, fn in ways.items():
            for _ in range(args.calls):
                gap()
                spans.clear()
                start = clock()
                fn()
                times[way].append(clock() - start)
                if len(spans) == 2:
                    (_, s0, e0), (_, s1, e1) = sorted(spans)
                    overlap[way][0] += min(e0, e1) - max(s0, s1) >= 0.5 * (e0 - s0)
                    overlap[way][1] += 1
    whole = statistics.median(times["whole"])
    for way in ways:
        med, best = statistics.median(times[way]), min(times[way])
        extra = ""
        if way in overlap:
            o, c = overlap[way]
            extra = f"  overlapped {o / max(c, 1):.0%}"
        print(f"  {way:<9} median {med * 1e6:8.1f} us (best {best * 1e6:8.1f})  "
              f"/whole {med / whole:.3f}{extra}", flush=True)
    after = pools["after"]
    print(f"  blocks taken back by the caller (after): "
          f"{after.taken_back / max(len(times['after']) + 1, 1):.0%}")
    print(f"load average after {_load()}")


if __name__ == "__main__":
    main()
