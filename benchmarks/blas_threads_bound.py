"""Where NumPy's OpenBLAS at two threads stops giving its one-thread bits: for each inner
dimension ``k`` given, the products of many shapes (and their transposed products) at one
and at two BLAS threads, compared bit for bit. The bound ember trusts per kernel lives in
``ember.backend.threads._SAME_BITS_K``; run this on a machine with another kernel to
measure it there.

    OPENBLAS_NUM_THREADS=2 python benchmarks/blas_threads_bound.py f 1,2,3,4,5,6,7,8
    OPENBLAS_NUM_THREADS=2 python benchmarks/blas_threads_bound.py d 1,2,3,4,5,6,7,8

prints the kernel, each differing product and the count."""
import sys

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

ROWS = (1, 2, 7, 32, 64, 100, 257, 400, 1024, 1025, 4099)
COLS = (1, 3, 16, 32, 100, 300, 512, 1000, 2049)


def main():
    dt = np.float64 if sys.argv[1] == "d" else np.float32
    ks = [int(v) for v in sys.argv[2].split(",")]
    print([(i["architecture"], i["version"]) for i in threadpool_info()
           if i["internal_api"] == "openblas"])
    bad = total = 0
    for k in ks:
        for m in ROWS:
            for n in COLS:
                if m * n * k < 1 << 15:  # (OpenBLAS runs these on one thread anyway)
                    continue
                a = np.random.default_rng(m + n).standard_normal((m, k)).astype(dt)
                b = np.random.default_rng(k).standard_normal((k, n)).astype(dt)
                with threadpool_limits(1):
                    one, one_t = a @ b, b.T @ a.T
                with threadpool_limits(2):
                    two, two_t = a @ b, b.T @ a.T
                total += 2
                for name, x, y in (("a@b", one, two), ("b.T@a.T", one_t, two_t)):
                    if not np.array_equal(x, y):
                        bad += 1
                        print("differs", name, "k", k, "m", m, "n", n)
    print(bad, "of", total, "products differ")


if __name__ == "__main__":
    main()
