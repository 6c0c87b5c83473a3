"""Where the default install's Transformer step loses to torch's: the step with torch's
kernels put in place of two of ember's array parts, one at a time and both, beside the
step as it is and torch's, alternated in one process (CPU time, one thread).

    python benchmarks/transformer_gap.py [--rounds 25] [--no-numba]

The parts swapped (a diagnostic only: torch's kernels give other bits, and no route of
ember's calls torch):

- ``products``: the 2-d matrix products that reach ``gemm._numpy_matmul`` without an
  output array (the linears' forward and backward: NumPy's OpenBLAS) run by
  ``torch.matmul`` on the same arrays;
- ``layer norm``: the NumPy passes of layer norm's forward and backward over one block
  of rows (``norm_layouts.fwd_rows_direct``, ``_bwd_rows_direct``) run by
  ``aten::native_layer_norm`` and its backward on the same arrays.

What each swap takes off the step is what that part costs ember beyond torch's kernel.
``EMBER_MKL=0 ... --no-numba`` is the default install (the only one whose layer norm
runs those NumPy passes). Prints the median milliseconds of each, its ratio to torch's
step, and the load average.
"""
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
if __name__ == "__main__" and "--no-numba" in sys.argv:
    sys.modules["numba"] = None

import numpy as np  # noqa: E402


def swaps(torch):
    """``{part: (module, name, replacement)}`` for the parts in the module docstring."""
    from ember.backend import gemm
    from ember.ops import norm_layouts, normalization
    own_matmul = gemm._numpy_matmul

    def products(a, b, out):
        if out is None and type(a) is np.ndarray and type(b) is np.ndarray and \
                a.ndim == 2 == b.ndim and a.dtype == np.float32 == b.dtype:
            return torch.matmul(torch.from_numpy(a), torch.from_numpy(b)).numpy()
        return own_matmul(a, b, out)

    def norm_forward(x, w, b, eps, keep):
        if w is None or b is None or x.dtype != np.float32:
            return None  # (ember's general path)
        D = w.size
        M = x.size // D
        y, mean, rstd = torch.ops.aten.native_layer_norm(
            torch.from_numpy(x), [D], torch.from_numpy(w), torch.from_numpy(b), eps)
        if keep is not None:
            keep.append(None)  # (backward then takes no normalized rows)
        r = rstd.numpy().reshape(M)
        return M, D, y.numpy(), mean.numpy().reshape(M), 1 / (r * r) - eps, r

    def norm_backward(g2, x2, w2, mean, invstd, need, M, D, shape, xhat):
        w = torch.from_numpy(w2)
        gx, gw, gb = torch.ops.aten.native_layer_norm_backward(
            torch.from_numpy(g2), torch.from_numpy(x2), [D],
            torch.from_numpy(mean.reshape(M, 1)), torch.from_numpy(invstd.reshape(M, 1)),
            w, w, list(need))
        return (None if gx is None else gx.numpy().reshape(shape),
                None if gw is None else gw.numpy(), None if gb is None else gb.numpy())

    return {"products": [(gemm, "_numpy_matmul", products)],
            "layer norm": [(normalization, "fwd_rows_direct", norm_forward),
                           (norm_layouts, "_bwd_rows_direct", norm_backward)]}


def swapped(step, replacements):
    """``step`` run with the ``(module, name, replacement)`` attributes in place."""
    def run():
        saved = [(m, n, getattr(m, n)) for m, n, _ in replacements]
        for m, n, f in replacements:
            setattr(m, n, f)
        try:
            step()
        finally:
            for m, n, f in saved:
                setattr(m, n, f)
    return run


def cpu_ms(f, calls=3):
    t = time.process_time()
    for _ in range(calls):
        f()
    return (time.process_time() - t) / calls * 1e3


def main():
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 25
    import torch

    import ember
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from training_steps import transformer
    parts = swaps(torch)
    ember_step = transformer(ember)
    steps = {"ember": ember_step}
    for name, repl in parts.items():
        steps[f"ember, torch's {name}"] = swapped(ember_step, repl)
    steps["ember, torch's both"] = swapped(ember_step, [r for v in parts.values() for r in v])
    steps["torch"] = transformer(torch)
    load = os.getloadavg()[0]
    for f in steps.values():
        f()
        f()
    times = {name: [] for name in steps}
    for _ in range(rounds):
        for name, f in steps.items():
            times[name].append(cpu_ms(f))
    med = {name: float(np.median(t)) for name, t in times.items()}
    for name, t in med.items():
        print(f"{name:28s} {t:7.2f} ms  / torch {t / med['torch']:.3f}")
    print(f"load {load:.2f} -> {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
