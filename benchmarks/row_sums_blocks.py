"""Whether row blocks of NumPy's matrix-vector products (``rows @ v``: layer norm's row
sums) and of its stacked row-by-row dot products give the whole call's bits, on the
OpenBLAS kernels NumPy loads here (``OPENBLAS_CORETYPE=Haswell`` loads the AVX2 ones
that AMD's Zen cores run).

    OPENBLAS_NUM_THREADS=1 python benchmarks/row_sums_blocks.py [--grain 64] [--short]

Float32 and float64, 86 row lengths of 1-4096, 64-1024 rows, a vector of ones and a
random one; every cut at a multiple of ``--grain`` rows with each block at least a grain
long (``--short``: blocks shorter than a grain allowed too). Prints how many cuts differ,
and the rows of the last block of those that do. ``ember.ops.norm_layouts`` splits layer
norm's rows only on the kernels measured so (``_SPLIT_KERNELS``).
"""
import argparse

import numpy as np


def _rows_dot(a, b):
    return (a[:, None, :] @ b[:, :, None]).reshape(-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grain", type=int, default=64)
    ap.add_argument("--short", action="store_true")
    args = ap.parse_args()
    g = args.grain
    rng = np.random.default_rng(1)
    lengths = list(range(1, 70)) + [96, 100, 127, 128, 129, 200, 255, 256, 257, 384, 512,
                                    768, 1000, 1024, 2048, 4096]
    counts = {"rows @ v": [0, 0], "row dot products": [0, 0]}
    short = set()
    for dt in (np.float32, np.float64):
        for D in lengths:
            for M in (64, 100, 257, 1024):
                x = rng.standard_normal((M, D)).astype(dt)
                y = rng.standard_normal((M, D)).astype(dt)
                cuts = range(g, M if args.short else M - g + 1, g)
                for v in (np.ones(D, dt), rng.standard_normal(D).astype(dt)):
                    whole = x @ v
                    for lo in cuts:
                        counts["rows @ v"][1] += 1
                        if not (np.array_equal(x[:lo] @ v, whole[:lo]) and
                                np.array_equal(x[lo:] @ v, whole[lo:])):
                            counts["rows @ v"][0] += 1
                            short.add(M - lo)
                whole = _rows_dot(x, y)
                for lo in cuts:
                    counts["row dot products"][1] += 1
                    if not (np.array_equal(_rows_dot(x[:lo], y[:lo]), whole[:lo]) and
                            np.array_equal(_rows_dot(x[lo:], y[lo:]), whole[lo:])):
                        counts["row dot products"][0] += 1
                        short.add(M - lo)
    try:
        from ember.backend import threads
        cores = [threads._core_name(lib) for lib in threads._blas_libs()]
    except ImportError:
        cores = ["?"]
    print(f"OpenBLAS kernels {cores}, grain {g}{' (short blocks allowed)' if args.short else ''}")
    for name, (bad, total) in counts.items():
        print(f"  {name:18s} {bad} of {total} cuts differ")
    if short:
        print(f"  rows of the last block where a cut differs: {sorted(short)}")


if __name__ == "__main__":
    main()
