"""Independent products run at once (``threads.pair``) against the same steps without
it, at two ember threads, alternated in one process.

    python benchmarks/two_threads_pairs_ab.py [--only mlp,cnn,lstm,transformer]
                                              [--threads N] [--min-time S] [--rounds R]
                                              [--numpy-only]

ember only. Each workload's step (the builders of ``two_threads.py``) runs in rounds,
``threads.pair`` switched on and off between rounds (its ``_state["pairs"]``), so that
the load of a shared machine hits both alike. Printed per workload: the median wall and
process (CPU, all threads) milliseconds per step of each way, the ratios on/off, and the
load average before and after. ``--numpy-only`` hides threadpoolctl, numba and MKL
(the default install; set ``EMBER_MKL=0`` too), as in ``two_threads.py``.
"""
import argparse
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="mlp,cnn,lstm,transformer")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=2.0, help="seconds per way")
    ap.add_argument("--per-round", type=int, default=3, help="steps per round")
    ap.add_argument("--numpy-only", action="store_true")
    args = ap.parse_args()
    from two_threads import _builder

    import ember
    from ember.backend import threads
    ember.set_num_threads(args.threads)
    print(f"ember {args.threads} threads, "
          f"{'NumPy only' if args.numpy_only else 'with the extras installed'}, "
          f"EMBER_MKL={os.environ.get('EMBER_MKL', 'unset')}; load average before {_load()}",
          flush=True)
    for name in args.only.split(","):
        ember.manual_seed(0)
        step = _builder(name)(ember)
        for flag in (True, False, True, False):  # warm up both ways
            threads._state["pairs"] = flag
            step()
        wall = {True: [], False: []}
        cpu = {True: [], False: []}
        start = time.perf_counter()
        while time.perf_counter() - start < 2 * args.min_time or len(wall[False]) < 5:
            for flag in (True, False):
                threads._state["pairs"] = flag
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(args.per_round):
                    step()
                t1, c1 = time.perf_counter(), time.process_time()
                wall[flag].append((t1 - t0) / args.per_round * 1e3)
                cpu[flag].append((c1 - c0) / args.per_round * 1e3)
        threads._state["pairs"] = True
        w = {f: statistics.median(v) for f, v in wall.items()}
        c = {f: statistics.median(v) for f, v in cpu.items()}
        print(f"{name:<12} pairs on: wall {w[True]:7.2f} cpu {c[True]:7.2f} ms | off: wall "
              f"{w[False]:7.2f} cpu {c[False]:7.2f} ms | on/off wall {w[True] / w[False]:.3f} "
              f"cpu {c[True] / c[False]:.3f}  ({len(wall[True])} rounds, load {_load()})",
              flush=True)
    print(f"load average after {_load()}")


if __name__ == "__main__":
    main()
