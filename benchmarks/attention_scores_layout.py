"""Fused attention's forward and backward with its scores in three layouts, in one
process, rounds alternated, CPU time at one thread:

- ``transposed``: each score matrix stored transposed, written as ``k @ q^T`` (what
  ember does on OpenBLAS kernels where that keeps ``q @ k^T``'s bits, SkylakeX);
- ``row-major``: plain scores written by ``q @ k^T`` (elsewhere, e.g. Haswell's kernels);
- ``transposed+copy``: the transposed layout filled from ``q @ k^T`` by a copy (the
  other way to keep the bits, measured and not kept).

    python benchmarks/attention_scores_layout.py [B H L D]

Prints the load average, the median milliseconds of each and its ratio to
``transposed``.
"""
import os
import sys
import time

import numpy as np

import ember
from ember.ops import attention as attn


def _plain_into(a, b, out):
    """``a @ b`` into ``out`` by way of ``b^T @ a^T`` whole, then a copy."""
    np.copyto(out, np.matmul(b.swapaxes(-1, -2), a.swapaxes(-1, -2)).swapaxes(-1, -2))


def main():
    ember.set_num_threads(1)
    into = attn._product_into
    variants = {
        "transposed": (attn._scores_layout, into),
        "row-major": (lambda shape, dt: np.empty(tuple(shape), dt), into),
        "transposed+copy": (attn._scores_layout, _plain_into),
    }
    B, H, L, D = [int(x) for x in sys.argv[1:5]] if len(sys.argv) > 4 else (8, 4, 64, 32)
    rng = np.random.default_rng(0)
    q, k, v, g = (rng.standard_normal((B, H, L, D)).astype(np.float32) for _ in range(4))

    def step():
        ts = [ember.tensor(a, requires_grad=True) for a in (q, k, v)]
        y = ember.nn.functional.scaled_dot_product_attention(*ts)
        y.backward(ember.tensor(g))

    times = {n: [] for n in variants}
    for _ in range(7):
        for n, (layout, product) in variants.items():
            attn._scores_array, attn._product_into = layout, product
            step()
            t0 = time.process_time()
            for _ in range(20):
                step()
            times[n].append((time.process_time() - t0) / 20)
    base = np.median(times["transposed"])
    print("load", os.getloadavg(), (B, H, L, D))
    for n, t in times.items():
        med = np.median(t)
        print(f"{n:16s} {med * 1e3:7.3f} ms  ratio to transposed {med / base:.3f}")


if __name__ == "__main__":
    main()
