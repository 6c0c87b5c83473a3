"""The LSTM step of ``training_steps.py`` at two ember threads, an older ember tree and this
one in one process, steps alternated: where each thread's time goes, figures that the
machine's load changes little.

    python benchmarks/lstm_two_threads.py /tmp/before [--steps 200] [--no-numba]
                                          [--workload lstm] [--after /tmp/other]

Both trees run with ``threads.cores_to_spare`` patched to True, so that ``threads.pair``
runs its two sides at once whatever the load (on a busy machine it would run them one
after the other, and a two-thread step would be a one-thread one). For each tree it
prints, per step (medians): the wall time (meaningful on a quiet machine only), the
process's CPU time and the calling thread's (``time.thread_time``). The calling thread's
CPU time is the step's serial part plus what it computed of the work it shares with
ember's second thread; the rest of the process's CPU time ran on the second thread (or
on BLAS's). On a quiet machine the two-thread wall time is the calling thread's CPU
time plus its waits for the second thread (a ``threads.pair`` whose other side is
longer, a block the loop needs and the second thread is still computing): the calling
thread's CPU time is a lower bound of it, and the waits are read from the products'
own times (``lstm_products.py``, or one thread's CPU time of each piece).

On a loaded machine the second thread is often descheduled, and the calling thread then
takes more of the shared work itself (each block of it goes to whichever thread claims
it first): the calling thread's figure then overstates the quiet one.
"""
import argparse
import os
import sys
import time

if __name__ == "__main__" and "--no-numba" in sys.argv:
    sys.modules["numba"] = None

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main():
    sys.path.insert(0, HERE)
    import training_steps as ts
    from nn_ops_ab import _load, _use
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--steps", type=int, default=200, help="timed steps per tree")
    ap.add_argument("--workload", default="lstm")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-numba", action="store_true")
    ap.add_argument("--after", default=ROOT, help="root of the newer tree (default: this)")
    args = ap.parse_args()
    trees = []
    for path in (args.before, args.after):
        m, mods = _load(path)
        mods["ember.backend.threads"].cores_to_spare = lambda: True
        m.manual_seed(0)
        m.set_num_threads(args.threads)
        trees.append((m, mods, ts.WORKLOADS[args.workload](m)))
    print(f"{args.workload}: {args.threads} ember threads, pairs whatever the load, "
          f"EMBER_MKL={os.environ.get('EMBER_MKL', 'unset')}"
          f"{', no numba' if args.no_numba else ''}; load average {os.getloadavg()[0]:.2f}")
    times = [[] for _ in trees]
    for r in range(args.steps + 5):
        for (_, mods, step), t in zip(trees, times):
            _use(mods)
            step()  # (the first after the swap pays for it)
            w, c, tc = time.perf_counter(), time.process_time(), time.thread_time()
            step()
            if r >= 5:
                t.append(((time.perf_counter() - w) * 1e3, (time.process_time() - c) * 1e3,
                          (time.thread_time() - tc) * 1e3))
    med = [np.median(np.array(t), axis=0) for t in times]
    for name, (wall, cpu, caller) in zip(("before", "after"), med):
        print(f"  {name:<7} wall {wall:7.3f}  CPU {cpu:7.3f}  calling thread {caller:7.3f}"
              f"  other threads {cpu - caller:7.3f} ms/step")
    print(f"  after/before: calling thread {med[1][2] / med[0][2]:.3f} (the quiet wall time's "
          f"lower bound), CPU {med[1][1] / med[0][1]:.3f}; load average "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
