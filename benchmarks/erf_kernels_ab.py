"""The numba erf kernels (``ember[fast]``) of an older ember tree, this tree's and
torch's, in one process, calls alternated: float32 erf, erfc, exact GELU (forward,
no graph), its backward's array kernel, the tanh GELU (forward, no graph) and erfinv on
2**20 values; float64 erf, erfc and erfinv likewise.

    git archive <before> | tar -x -C /tmp/before
    python benchmarks/erf_kernels_ab.py /tmp/before [--rounds R]

The older tree's ``ember/ops/_erf_numba.py`` is loaded from its file under another
name, with the older tree's ``ember/ops/_erf_kernels.py`` (its fits) in place of this
tree's while it loads; its erfinv module, where it has one of its own, imports its
shared pieces from this tree's ``_erf_numba``. A tree whose module has no tanh GELU ran
the composite's ops: "before" is then this tree's composite (``activation_nodes._gelu``),
the same ops.
Printed: median CPU milliseconds per call, each ratio to torch, after/before, and the
load average. One thread (``OPENBLAS_NUM_THREADS=1`` is set here).
"""
import argparse
import importlib.util
import os
import sys
import tempfile
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
# numba's cache of a module loaded from its file under another name cannot be loaded
# again (it names no importable module) and would break the older tree's own imports:
# both trees' kernels compile into a directory of this run's own
os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="erf_kernels_ab_")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load(root, name):
    """The module ``ember/ops/<name>.py`` of the tree at ``root``, under another name."""
    spec = importlib.util.spec_from_file_location(
        f"{name}_before", os.path.join(root, "ember", "ops", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    import torch

    from ember.ops import _erf_numba as new
    from ember.ops import _erfinv_numba as new_inv
    torch.set_num_threads(1)
    import ember.ops
    mine = sys.modules["ember.ops._erf_kernels"]
    fits = _load(args.before, "_erf_kernels")  # the older tree's fits, while it loads
    sys.modules["ember.ops._erf_kernels"] = ember.ops._erf_kernels = fits
    try:
        old = _load(args.before, "_erf_numba")
    finally:
        sys.modules["ember.ops._erf_kernels"] = ember.ops._erf_kernels = mine
    # erfinv's kernels: in ``_erf_numba`` itself in trees before they had a module of their
    # own (which imports the shared pieces from this tree's ``_erf_numba``)
    old_inv = old if hasattr(old, "erfinv32") else _load(args.before, "_erfinv_numba")
    inv = {id(old): old_inv, id(new): new_inv}
    import ember
    from ember.ops import activation_nodes

    def gelu_tanh(m, x):
        if hasattr(m, "gelu_tanh"):
            return m.gelu_tanh(x)
        with ember.no_grad():  # the older tree's F.gelu: the composite's ops
            return activation_nodes._gelu(ember.from_numpy(x), "tanh")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(2 ** 20).astype(np.float32)
    u = rng.uniform(-1, 1, 2 ** 20).astype(np.float32)
    xt, ut = torch.from_numpy(x), torch.from_numpy(u)
    x64, u64 = x.astype(np.float64), rng.uniform(-1, 1, 2 ** 20)
    x64t, u64t = torch.from_numpy(x64), torch.from_numpy(u64)
    gy = rng.standard_normal(2 ** 20).astype(np.float32)
    gyt, ope = torch.from_numpy(gy), new.gelu(x)[1]
    cases = {
        "erf f32": (lambda m: m.erf_erfc(x, True, False), lambda: torch.erf(xt)),
        "erfc f32": (lambda m: m.erf_erfc(x, False, True), lambda: torch.erfc(xt)),
        "gelu f32": (lambda m: m.gelu(x, keep=False), lambda: torch.nn.functional.gelu(xt)),
        "gelu bwd f32": (lambda m: m.gelu_backward(x, ope, gy),
                         lambda: torch.ops.aten.gelu_backward(gyt, xt)),
        "gelu tanh": (lambda m: gelu_tanh(m, x),
                      lambda: torch.nn.functional.gelu(xt, approximate="tanh")),
        "erfinv f32": (lambda m: inv[id(m)].erfinv32(u), lambda: torch.erfinv(ut)),
        "erf f64": (lambda m: m.erf_erfc(x64, True, False), lambda: torch.erf(x64t)),
        "erfc f64": (lambda m: m.erf_erfc(x64, False, True), lambda: torch.erfc(x64t)),
        "erfinv f64": (lambda m: inv[id(m)].erfinv64(u64), lambda: torch.erfinv(u64t)),
    }
    print(f"CPU ms, median of {args.rounds} alternated calls, 1 thread; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'case':12s} {'before':>7s} {'after':>7s} {'torch':>7s} {'b/torch':>8s} "
          f"{'a/torch':>8s} {'a/b':>6s}")
    for name, (f, tf) in cases.items():
        runs = {"before": lambda f=f: f(old), "after": lambda f=f: f(new), "torch": tf}
        for fn in runs.values():
            fn()
        times = {k: [] for k in runs}
        for _ in range(args.rounds):
            for k, fn in runs.items():
                t0 = time.process_time()
                fn()
                times[k].append(time.process_time() - t0)
        b, a, t = (np.median(times[k]) * 1e3 for k in ("before", "after", "torch"))
        print(f"{name:12s} {b:7.2f} {a:7.2f} {t:7.2f} {b / t:8.2f} {a / t:8.2f} {a / b:6.2f}")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
