"""Independent products run at once (``threads.pair``) against the same steps without
it, at two ember threads, alternated in one process.

    python benchmarks/two_threads_pairs_ab.py [--only mlp,cnn,lstm,transformer]
                                              [--layers 128x256x128,...] [--threads N]
                                              [--min-time S] [--per-round R] [--numpy-only]
                                              [--idle]

ember only. Each workload's step (the builders of ``two_threads.py``) runs in rounds,
``threads.pair`` switched on and off between rounds (its ``_state["pairs"]``), so that
the load of a shared machine hits both alike. Printed per workload: the median wall and
process (CPU, all threads) milliseconds per step of each way, the best round's wall
time (on a loaded machine the rounds that found both cores free), the ratios on/off,
and the load average. Pairs run only while the machine has a core to spare
(``threads.cores_to_spare``); ``--idle`` lets them run whatever the load. ``--layers``
adds a linear layer's backward alone (its input and weight gradients and the bias's)
for each shape rows x in x out. ``--numpy-only`` hides threadpoolctl, numba and MKL
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


def _report(name, wall, cpu):
    w = {f: statistics.median(v) for f, v in wall.items()}
    b = {f: min(v) for f, v in wall.items()}
    c = {f: statistics.median(v) for f, v in cpu.items()}
    print(f"{name:<16} pairs on: wall {w[True]:8.3f} (best {b[True]:8.3f}) cpu {c[True]:8.3f} ms"
          f" | off: wall {w[False]:8.3f} (best {b[False]:8.3f}) cpu {c[False]:8.3f} ms | on/off"
          f" wall {w[True] / w[False]:.3f} best {b[True] / b[False]:.3f} cpu "
          f"{c[True] / c[False]:.3f}  ({len(wall[True])} rounds, load {_load()})", flush=True)


def _linear_backward(ember, m, k, n):
    """A linear layer's backward alone: ``x`` (m, k) and the weight (n, k) needing grad."""
    import numpy as np
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((m, k), dtype=np.float32), requires_grad=True)
    lin = ember.nn.Linear(k, n)
    y = lin(x)
    g = ember.tensor(rng.standard_normal((m, n), dtype=np.float32))

    def step():
        y.backward(g, retain_graph=True)
        x.grad = None
        lin.weight.grad = lin.bias.grad = None
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="mlp,cnn,lstm,transformer")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=2.0, help="seconds per way")
    ap.add_argument("--per-round", type=int, default=3, help="steps per round")
    ap.add_argument("--numpy-only", action="store_true")
    ap.add_argument("--idle", action="store_true",
                    help="pairs even on a busy machine (threads.cores_to_spare patched)")
    ap.add_argument("--layers", default="",
                    help="also a linear layer's backward alone, e.g. 128x256x128,1024x128x384 "
                         "(rows x in x out)")
    args = ap.parse_args()
    from two_threads import _builder

    import ember
    from ember.backend import threads
    ember.set_num_threads(args.threads)
    if args.idle:
        threads.cores_to_spare = lambda: True
    print(f"ember {args.threads} threads, "
          f"{'NumPy only' if args.numpy_only else 'with the extras installed'}, "
          f"EMBER_MKL={os.environ.get('EMBER_MKL', 'unset')}"
          f"{', pairs whatever the load' if args.idle else ''}; load average before {_load()}",
          flush=True)
    names = [n for n in args.only.split(",") if n] + \
        [f"linear {s}" for s in args.layers.split(",") if s]
    for name in names:
        ember.manual_seed(0)
        step = _linear_backward(ember, *map(int, name[7:].split("x"))) \
            if name.startswith("linear ") else _builder(name)(ember)
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
        _report(name, wall, cpu)
    print(f"load average after {_load()}")


if __name__ == "__main__":
    main()
