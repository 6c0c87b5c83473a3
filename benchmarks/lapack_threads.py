"""What running LAPACK at one BLAS thread costs at two ember threads.

    EMBER_MKL=0 python benchmarks/lapack_threads.py [--sizes 128,512,1024] [--rounds 5]

At more than one ember thread ember calls ``numpy.linalg`` through
``ember.backend.lapack.linalg``, which runs each routine at one BLAS thread so that its
results are the one-thread bits (docs/performance/threads-products.md, "Ops beyond the
product routes").
This alternates, in one process at ``set_num_threads(2)``, ``numpy.linalg`` at two BLAS
threads (before) and ``lapack.linalg`` (after) on an ``n`` x ``n`` float32 symmetric
positive definite matrix, and prints the median wall milliseconds per call of each, their
ratio and the load average.
"""
import argparse
import os
import statistics
import time

import numpy as np

import ember
from ember.backend import lapack

ROUTINES = {
    "solve": lambda la, a, b: la.solve(a, b),
    "inv": lambda la, a, b: la.inv(a),
    "cholesky": lambda la, a, b: la.cholesky(a),
    "qr": lambda la, a, b: la.qr(a),
    "eigh": lambda la, a, b: la.eigh(a),
    "svd": lambda la, a, b: la.svd(a),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="128,512,1024")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    ember.set_num_threads(2)
    rng = np.random.default_rng(0)
    print("| routine | n | 2 BLAS threads ms | 1 BLAS thread ms | after/before | load |")
    print("|---|---|---|---|---|---|")
    for n in map(int, args.sizes.split(",")):
        a = rng.standard_normal((n, n))
        a = (a @ a.T / n + np.eye(n)).astype(np.float32)
        b = rng.standard_normal((n, 8)).astype(np.float32)
        for name, fn in ROUTINES.items():
            reps = max(1, int(3e7 / n ** 3 * (0.2 if name in ("svd", "eigh") else 1)))
            times = {np.linalg: [], lapack.linalg: []}
            for _ in range(args.rounds):
                for la in times:
                    t0 = time.perf_counter()
                    for _ in range(reps):
                        fn(la, a, b)
                    times[la].append((time.perf_counter() - t0) / reps * 1e3)
            before = statistics.median(times[np.linalg])
            after = statistics.median(times[lapack.linalg])
            print(f"| {name} | {n} | {before:.2f} | {after:.2f} | {after / before:.2f} | "
                  f"{os.getloadavg()[0]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
