"""The Transformer step's matrix products, each alone: NumPy's BLAS as ember calls it
against ``torch.matmul`` on operands of the same shapes and strides, and the other
layouts a product could be run in, with whether each keeps ember's bits.

    python benchmarks/transformer_gemm_shapes.py [--rounds 21] [--no-numba]

The products are recorded from one ``training_steps.py`` transformer step (every call
that reaches ``gemm._numpy_matmul`` or ``np.matmul``, with its operands' shapes and
element strides), then each distinct one is timed on fresh operands of that layout,
ember's call and torch's alternated in one process (CPU time, one thread, medians of
``--rounds`` rounds of 5 calls). Variants, timed the same way (``=`` where the result
has ember's bits, ``!`` where it does not; the operand copies are timed with them).
Operands are marked ``C`` (row-major), ``T`` (each matrix stored transposed) or ``S``
(rows spread out, as heads are). Variants of the 2-d products:

- ``C,C`` / ``C,T`` / ``T,C``: the smaller operand (a weight, or a weight gradient's
  input) copied to row-major or column-major order first, so that BLAS takes the other
  transposition flag;
- ``swap``: the product of the transposes, ``(b^T @ a^T)^T``, copied back to C order
  where it is small;
- ``rows256``: 256 rows of ``a`` at a time into one output.

(``benchmarks/transformer_gap.py`` runs the whole step with torch's products instead.)

``EMBER_MKL=0 ... --no-numba`` is the default install. Prints microseconds, the ratio
NumPy / torch per product and for all of them, and the load average.
"""
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
if __name__ == "__main__" and "--no-numba" in sys.argv:
    sys.modules["numba"] = None

import numpy as np  # noqa: E402


def record_products(ember):
    """The (shape, element strides) pairs of a and b of every product of one step."""
    from ember.backend import gemm
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from training_steps import transformer
    step = transformer(ember)
    step()
    seen = []
    plain, numpy_matmul = np.matmul, gemm._numpy_matmul

    def lay(x):
        return x.shape, tuple(s // x.itemsize for s in x.strides)

    def recorded(a, b, out=None, **kw):
        if type(a) is np.ndarray and type(b) is np.ndarray and a.ndim >= 2 and b.ndim >= 2:
            seen.append((lay(a), lay(b)))
        return plain(a, b, out=out, **kw)

    def recorded_numpy(a, b, out):
        recorded(a, b)
        np.matmul = plain  # (its own np.matmul calls are the same product)
        try:
            return numpy_matmul(a, b, out)
        finally:
            np.matmul = recorded
    np.matmul, gemm._numpy_matmul = recorded, recorded_numpy
    try:
        step()
    finally:
        np.matmul, gemm._numpy_matmul = plain, numpy_matmul
    return seen


def strided(rng, shape, strides):
    """A float32 array of ``shape`` with these element strides (a view of a fresh one)."""
    n = 1 + sum((s - 1) * st for s, st in zip(shape, strides))
    base = rng.standard_normal(n, dtype=np.float32)
    return np.lib.stride_tricks.as_strided(base, shape, tuple(4 * s for s in strides))


def variants(a, b):
    """Other ways to run ``a @ b`` for 2-d operands (see the module's docstring)."""
    if a.ndim != 2:
        return {}
    m = a.shape[0]
    small_b = b.size <= a.size
    out = {}
    if small_b:
        out["C,C"] = lambda: np.matmul(a, np.ascontiguousarray(b))
        out["C,T"] = lambda: np.matmul(a, np.asfortranarray(b))
    else:
        out["C,C"] = lambda: np.matmul(np.ascontiguousarray(a), b)
        out["T,C"] = lambda: np.matmul(np.asfortranarray(a), b)
    if m * b.shape[1] <= 128 * 384:
        out["swap"] = lambda: np.ascontiguousarray(np.matmul(b.T, a.T).T)
    if m > 256:
        def rows():
            o = np.empty((m, b.shape[1]), np.float32)
            for i in range(0, m, 256):
                np.matmul(a[i:i + 256], b, out=o[i:i + 256])
            return o
        out["rows256"] = rows
    return out


def order(shape, strides):
    """``C`` for row-major matrices, ``T`` for matrices stored transposed, ``S`` for
    other strides (a gather such as heads split from a projection)."""
    inner = strides[-2:] if len(shape) >= 2 else strides
    if inner[-1] == 1 and inner[0] >= shape[-1]:
        return "C" if strides == tuple(int(np.prod(shape[i + 1:])) for i in
                                       range(len(shape))) else "S"
    if inner[0] == 1 and inner[-1] >= shape[-2]:
        return "T"
    return "S"


def cpu_us(f, calls=5):
    t = time.process_time()
    for _ in range(calls):
        f()
    return (time.process_time() - t) / calls * 1e6


def main():
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 21
    import torch

    import ember
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    counts = {}
    for key in record_products(ember):
        counts[key] = counts.get(key, 0) + 1
    rng = np.random.default_rng(0)
    print(f"load {os.getloadavg()[0]:.2f}")
    total_np = total_torch = 0.0
    for ((sa, ta), (sb, tb)), n in counts.items():
        a, b = strided(rng, sa, ta), strided(rng, sb, tb)
        a_t = torch.empty_strided(sa, ta)
        a_t.copy_(torch.from_numpy(np.array(a)))
        b_t = torch.empty_strided(sb, tb)
        b_t.copy_(torch.from_numpy(np.array(b)))
        ref = np.matmul(a, b)
        runs = {"numpy": lambda a=a, b=b: np.matmul(a, b),
                "torch": lambda a=a_t, b=b_t: torch.matmul(a, b)}
        marks = {}
        for name, f in variants(a, b).items():
            runs[name] = f
            marks[name] = "=" if np.array_equal(f(), ref) else "!"
        times = {name: [] for name in runs}
        for _ in range(rounds):
            for name, f in runs.items():
                times[name].append(cpu_us(f))
        med = {name: float(np.median(t)) for name, t in times.items()}
        total_np += n * med["numpy"]
        total_torch += n * med["torch"]
        desc = f"{'x'.join(map(str, sa))}{order(sa, ta)} @ {'x'.join(map(str, sb))}" \
            f"{order(sb, tb)}"
        extra = "  ".join(f"{k} {med[k]:.0f}{marks[k]}" for k in marks)
        print(f"{n} x {desc:28s} numpy {med['numpy']:7.0f} torch {med['torch']:7.0f} "
              f"ratio {med['numpy'] / med['torch']:.2f}  {extra}", flush=True)
    print(f"all products of a step: numpy {total_np:.0f} us, torch {total_torch:.0f} us, "
          f"ratio {total_np / total_torch:.3f}; load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
