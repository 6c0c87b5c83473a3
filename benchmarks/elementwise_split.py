"""The cost of splitting an elementwise kernel over ember's two intra-op threads, per
array size: ``np.add`` and ``np.exp`` on one thread beside ``threads.binary`` /
``threads.unary`` forced to split (every size), in one process. Where the split is
slower than one thread, a dispatch costs more than the second core saves: this sets
``threads.SPLIT_ELEMENTS``. Prints the load average (the second core is shared on a
busy machine, which makes a dispatch cost tens of microseconds).

    python benchmarks/elementwise_split.py
"""
import os
import time

import numpy as np

from ember.backend import threads


def _median_low(f, n=200):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 10] * 1e6  # the 10th percentile: the least disturbed runs


def main():
    threads.set_num_threads(2)
    print("load average", " ".join(f"{v:.2f}" for v in os.getloadavg()))
    print(f"{'elements':>9} {'add 1t us':>10} {'add split':>10} {'exp 1t us':>10} "
          f"{'exp split':>10}")
    for size in [1 << k for k in range(14, 21)]:
        a = np.random.rand(size).astype(np.float32)
        b = np.random.rand(size).astype(np.float32)
        split, cost = threads.SPLIT_ELEMENTS, threads._MIN_COST_PER_THREAD
        threads.SPLIT_ELEMENTS, threads._MIN_COST_PER_THREAD = 0, 1
        try:
            sa = _median_low(lambda a=a, b=b: threads.binary(np.add, a, b))
            se = _median_low(lambda a=a: threads.unary(np.exp, a))
        finally:
            threads.SPLIT_ELEMENTS, threads._MIN_COST_PER_THREAD = split, cost
        wa = _median_low(lambda a=a, b=b: np.add(a, b))
        we = _median_low(lambda a=a: np.exp(a))
        print(f"{size:>9} {wa:>10.1f} {sa:>10.1f} {we:>10.1f} {se:>10.1f}")


if __name__ == "__main__":
    main()
