"""The pool's dispatch on this machine: an empty split's round trip with the caller taking
back unstarted blocks (ember's default) and without (every block on its worker, so the
worker's wake-up is timed), the round trip the pool calibrated its split bounds from,
and a ReLU of 1024 x 256 float32 whole and split. Prints the load average.

Usage: ``PYTHONPATH=$REPO python benchmarks/pool_wake.py``"""
import os
import time

import numpy as np

import ember
from ember.backend import threads
from ember.backend.pool import Pool


def median_us(fn, calls=2000):
    fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2] * 1e6


def main():
    ember.set_num_threads(2)
    x = np.random.default_rng(0).standard_normal((1024, 256), dtype=np.float32)
    out = np.empty_like(x)

    def relu(lo, hi):
        np.maximum(x[lo:hi], 0, out=out[lo:hi])

    print(f"load average {os.getloadavg()}")
    threads.parallel_rows(relu, 1024, 1 << 30)  # makes and calibrates the pool
    pool = threads._pool[0]
    print(f"calibrated round trip {threads._state['round_trip'] * 1e6:.1f} us, "
          f"bounds scale {threads._state['scale']:g}")
    print(f"relu whole {median_us(lambda: relu(0, 1024)):.1f} us")
    saved = Pool.steal
    try:
        for steal in (True, False):
            Pool.steal = steal
            empty = median_us(lambda: pool.run(lambda lo, hi: None, [0, 0, 0]))
            split = median_us(lambda: pool.run(relu, [0, 512, 1024]))
            print(f"take-back {'on ' if steal else 'off'}: empty split {empty:.1f} us, "
                  f"relu split {split:.1f} us")
    finally:
        Pool.steal = saved
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
