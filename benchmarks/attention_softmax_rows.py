"""Attention forward + backward (``F.scaled_dot_product_attention``, float32, one
thread) with numba's softmax kernels and with NumPy's passes, alternated in one process,
at several shapes (B, H, L, S, D).

    python benchmarks/attention_softmax_rows.py [--rounds R]

Needs numba (the ``ember[fast]`` extra). The kernels are switched off as the tests do it
(``attention._NUMBA["softmax"] = None``). On CPUs where the scores are stored row-major
(OpenBLAS's Haswell kernels) this times the row kernels against NumPy's row passes; where
they are stored transposed, the column kernels. Prints median CPU microseconds per call
and the ratio kernels / NumPy, and the load average.
"""
import argparse
import os
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

SHAPES = [(16, 4, 64, 64, 32), (4, 8, 128, 128, 64), (2, 2, 16, 16, 8), (1, 4, 512, 512, 64),
          (8, 4, 32, 8, 16)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    import ember
    from ember.ops import attention
    kernels = attention._fast_kernels.load(attention._NUMBA, "softmax",
                                           "ember.ops._softmax_numba")
    if kernels is None:
        raise SystemExit("numba's kernels did not load (is numba installed?)")
    print("row-major scores" if not attention.transposed_scores_keep_bits()
          else "transposed scores")
    rng = np.random.default_rng(0)
    F = ember.nn.functional
    for B, H, L, S, D in SHAPES:
        q, k, v = (ember.tensor(rng.standard_normal((B, H, n, D)).astype(np.float32),
                                requires_grad=True) for n in (L, S, S))
        g = ember.tensor(rng.standard_normal((B, H, L, D)).astype(np.float32))

        def call(q=q, k=k, v=v, g=g):
            F.scaled_dot_product_attention(q, k, v).backward(g)
        n = max(1, int(2e6 / (B * H * L * S)))
        times = {"kernels": [], "numpy": []}
        for r in range(args.rounds):
            order = list(times) if r % 2 else list(times)[::-1]
            for name in order:
                attention._NUMBA["softmax"] = kernels if name == "kernels" else None
                call()
                t = time.thread_time()
                for _ in range(n):
                    call()
                times[name].append((time.thread_time() - t) / n * 1e6)
        attention._NUMBA["softmax"] = kernels
        a, b = np.median(times["kernels"]), np.median(times["numpy"])
        print(f"  {(B, H, L, S, D)!s:22s} kernels {a:8.0f} us  numpy {b:8.0f} us  "
              f"ratio {a / b:.3f}")
    print("load", " ".join(f"{v:.2f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
