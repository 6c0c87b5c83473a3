"""Which row blocks of a product NumPy's OpenBLAS computes as the same rows of the whole
product: for each grain given, products of many shapes and operand layouts, each also
computed in two and in three row blocks of at least a grain each, whose edges are
multiples of the grain, compared
bit for bit with the whole product (BLAS at one thread). The grain ember trusts per
kernel lives in ``ember.backend.threads._ROW_GRAIN``; run this on a machine with another
kernel to measure it there.

    OPENBLAS_NUM_THREADS=1 python benchmarks/row_block_grain.py f 1,4,6,8,12,24
    OPENBLAS_NUM_THREADS=1 python benchmarks/row_block_grain.py d 1,2,4,8

prints the kernel, the first differing products per grain and the counts. On kernels
with a small-matrix kernel (OpenBLAS's SkylakeX: products of at most 100^3 multiply-adds,
``blas_kernels.SMALL_KERNEL_MNK``) a block on that kernel of a product past it differs
at any grain; the counts here include those blocks, which ember never makes."""
import itertools
import sys

import numpy as np
from threadpoolctl import threadpool_info

ROWS = (24, 25, 36, 64, 100, 128, 257, 400, 1024, 1031)
INNER = (1, 7, 8, 9, 31, 128, 449, 784, 1025)
COLS = (2, 10, 33, 128, 300, 784, 1025)  # (one column: a matrix-vector product)


def blocks(m, grain, parts, shift):
    """Row edges at multiples of ``grain``: ``parts`` blocks near equal, each edge moved
    by ``shift`` grains (so that edges land on odd and even multiples)."""
    edges = [0]
    for i in range(1, parts):
        cut = (m * i // parts) // grain * grain + shift * grain
        if edges[-1] + grain <= cut <= m - grain:  # (blocks of a grain or more)
            edges.append(cut)
    return edges + [m]


def main():
    dt = np.float64 if sys.argv[1] == "d" else np.float32
    grains = [int(v) for v in sys.argv[2].split(",")]
    print([(i["architecture"], i["version"]) for i in threadpool_info()
           if i["internal_api"] == "openblas"])
    bad = dict.fromkeys(grains, 0)
    total = 0
    rng = np.random.default_rng(0)
    for m, k, n in itertools.product(ROWS, INNER, COLS):
        for ta, tb in itertools.product((False, True), repeat=2):
            a = rng.standard_normal((k, m) if ta else (m, k)).astype(dt)
            b = rng.standard_normal((n, k) if tb else (k, n)).astype(dt)
            a, b = a.T if ta else a, b.T if tb else b
            whole = a @ b
            total += 1
            for g in grains:
                same = True
                for parts, shift in ((2, 0), (2, 1), (3, 0)):
                    edges = blocks(m, g, parts, shift)
                    out = np.empty_like(whole)
                    for lo, hi in zip(edges, edges[1:]):
                        np.matmul(a[lo:hi], b, out=out[lo:hi])
                    same = same and np.array_equal(whole, out)
                if not same:
                    bad[g] += 1
                    if bad[g] <= int(sys.argv[3] if len(sys.argv) > 3 else 3):
                        print("grain", g, "differs:", m, k, n, "a.T" * ta, "b.T" * tb)
    for g in grains:
        print(f"grain {g}: {bad[g]} of {total} products differ in some row blocks")


if __name__ == "__main__":
    main()
