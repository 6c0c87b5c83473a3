"""The MLP steps' matrix products in each layout NumPy can hand OpenBLAS, beside torch.

    python benchmarks/mlp_gemm_layouts.py            # the products, layout by layout
    python benchmarks/mlp_gemm_layouts.py --split    # each step: its products vs the rest
    python benchmarks/mlp_gemm_layouts.py --split --no-numba   # ember without numba
    python benchmarks/mlp_gemm_layouts.py --infer    # the inference layers, bias folded

The MLP of benchmarks/training_steps.py (784-256-128-10) multiplies, per layer, the input
by the transposed weight (forward ``x @ W.T``), the output gradient by the weight
(``g @ W``, the input's gradient) and the transposed output gradient by the input
(``g.T @ x``, the weight's gradient). For each product this prints the CPU microseconds
per call (one thread, calls interleaved, the median of rounds) of the layouts that give
the same matrix: a transposed operand as a flag (NumPy's default), a contiguous copy made
beforehand, the transposed product ``(b.T @ a.T).T`` (an F-ordered result), ``out=``;
then torch's ``mm``. A ``!=`` marks a layout whose values differ from NumPy's default in
any bit; ``torch==`` says whether torch's values equal NumPy's.

``--infer`` times the inference MLP's layers (1024 rows) each way ``x @ W.T + b`` can be
had on the default install's OpenBLAS: the transposed flag then ember's bias add
(``gemm.addmm``'s NumPy path), a transposed weight cached beforehand, ``np.dot``, and
``sgemm`` called with ``beta = 1`` into a buffer the bias was broadcast into (NumPy's own
OpenBLAS through ctypes: the bias add folded into the product); then the bias add and the
ReLU alone, and torch's ``F.linear`` and ``relu``. ``!=`` marks values that differ in any
bit from the first way's.

``--split`` times each whole step (ember, torch) beside its products alone (the same
arrays, NumPy's layouts and torch's ``mm``), so that the rest of the step -- bias, relu,
loss, SGD, Python -- is the difference. The load average is printed with the figures.
"""
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # read when NumPy is first imported
if __name__ == "__main__" and "--no-numba" in sys.argv:
    sys.modules["numba"] = None  # the default install's NumPy paths (with EMBER_MKL=0)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402


def cpu_us(fns, rounds=9, budget=0.03):
    """Median CPU microseconds per call of each of ``fns``, their rounds interleaved."""
    reps = []
    for f in fns:
        f()
        t = time.process_time()
        f()
        reps.append(max(1, min(2000, int(budget / max(time.process_time() - t, 1e-6)))))
    times = [[] for _ in fns]
    for _ in range(rounds):
        for f, r, out in zip(fns, reps, times):
            c = time.process_time()
            for _ in range(r):
                f()
            out.append((time.process_time() - c) / r * 1e6)
    return [float(np.median(t)) for t in times]


def _layouts(torch, rng):
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    t = torch.from_numpy  # torch's tensors are made once, outside the timed calls
    for m, k, n, what in ((128, 784, 256, "fc1 forward"), (128, 256, 128, "fc2 forward"),
                          (128, 128, 10, "fc3 forward"), (1024, 784, 256, "infer fc1"),
                          (1024, 256, 128, "infer fc2"), (1024, 128, 10, "infer fc3")):
        x, w = r(m, k), r(n, k)
        wt, out = np.ascontiguousarray(w.T), np.empty((m, n), np.float32)
        tx, tw = t(x), t(w)
        yield f"{what} x@W.T {(m, k, n)}", x @ w.T, {
            "flag": lambda x=x, w=w: x @ w.T, "W.T copied": lambda x=x, wt=wt: x @ wt,
            "(W@x.T).T": lambda x=x, w=w: (w @ x.T).T,
            "out=": lambda x=x, w=w, out=out: np.matmul(x, w.T, out=out),
        }, lambda tx=tx, tw=tw: torch.mm(tx, tw.t())
    for m, n, k, what in ((128, 128, 256, "fc2 grad input"), (128, 10, 128, "fc3 grad input")):
        g, w = r(m, n), r(n, k)
        tg, tw = t(g), t(w)
        yield f"{what} g@W {(m, n, k)}", g @ w, {
            "plain": lambda g=g, w=w: g @ w, "(W.T@g.T).T": lambda g=g, w=w: (w.T @ g.T).T,
        }, lambda tg=tg, tw=tw: torch.mm(tg, tw)
    for m, n, k, what in ((128, 256, 784, "fc1 grad weight"), (128, 128, 256, "fc2 grad weight"),
                          (128, 10, 128, "fc3 grad weight")):
        g, x = r(m, n), r(m, k)
        gf, tg, tx = np.asfortranarray(g), t(g), t(x)
        yield f"{what} g.T@x {(n, m, k)}", g.T @ x, {
            "flag": lambda g=g, x=x: g.T @ x, "g F-ordered": lambda gf=gf, x=x: gf.T @ x,
            "(x.T@g).T": lambda g=g, x=x: (x.T @ g).T,
        }, lambda tg=tg, tx=tx: torch.mm(tg.t(), tx)


def layouts():
    import torch
    torch.set_num_threads(1)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; CPU us per call")
    for name, ref, variants, tfn in _layouts(torch, np.random.default_rng(0)):
        times = cpu_us(list(variants.values()) + [tfn])
        cells = [f"{k} {v:.0f}{'' if np.array_equal(f(), ref) else ' !='}"
                 for (k, f), v in zip(variants.items(), times)]
        same = np.array_equal(tfn().numpy(), ref)
        print(f"{name:34s} " + " | ".join(cells) + f" | torch {times[-1]:.0f} "
              f"(torch== {same})")


def split():
    import torch
    import training_steps as ts

    import ember
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    from ember.backend import gemm
    rng = np.random.default_rng(0)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    for wl, rows in (("mlp", 128), ("mlp_infer", 1024)):
        x, w1, w2, w3 = r(rows, 784), r(256, 784), r(128, 256), r(10, 128)
        h1, h2, g1, g2, g3 = r(rows, 256), r(rows, 128), r(rows, 256), r(rows, 128), r(rows, 10)
        a = dict(x=x, w1=w1, w2=w2, w3=w3, h1=h1, h2=h2, g1=g1, g2=g2, g3=g3)
        ta = {k: torch.from_numpy(v) for k, v in a.items()}

        def products(mm, tr, a, backward=wl == "mlp"):
            mm(a["x"], tr(a["w1"]))
            mm(a["h1"], tr(a["w2"]))
            mm(a["h2"], tr(a["w3"]))
            if backward:
                mm(a["g3"], a["w3"])
                mm(tr(a["g3"]), a["h2"])
                mm(a["g2"], a["w2"])
                mm(tr(a["g2"]), a["h1"])
                mm(tr(a["g1"]), a["x"])
        torch.manual_seed(0)
        ember.manual_seed(0)
        steps = [getattr(ts, wl)(ember), getattr(ts, wl)(torch),
                 lambda a=a: products(gemm.matmul, np.transpose, a),
                 lambda ta=ta: products(torch.mm, torch.t, ta)]
        e, t, ge, gt = cpu_us(steps)
        print(f"{wl:10s} step ember {e:.0f} torch {t:.0f} ({e / t:.3f}) | products ember "
              f"{ge:.0f} torch {gt:.0f} ({ge / gt:.2f}) | rest ember {e - ge:.0f} torch "
              f"{t - gt:.0f} | load {os.getloadavg()[0]:.2f} | MKL "
              f"{'on' if gemm.mkl_available() else 'off'}")


def _sgemm_beta_one():
    """``f(x, wt, out)``: ``out = x @ wt + out`` by NumPy's own OpenBLAS ``sgemm`` (row
    major, ``wt`` the transposed row-major weight, given as the flag), or None."""
    import ctypes
    import glob
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__) + ".libs", "*openblas*"))
    if not libs:
        return None
    lib = ctypes.CDLL(libs[0])
    f = getattr(lib, "scipy_cblas_sgemm64_", None)
    if f is None:
        return None
    i, p, fl = ctypes.c_int64, ctypes.c_void_p, ctypes.c_float
    f.argtypes = [i, i, i, i, i, i, fl, p, i, p, i, fl, p, i]
    f.restype = None

    def sgemm(x, w, out):  # out (m, n) += x (m, k) @ w.T, w (n, k) row major
        m, k = x.shape
        n = w.shape[0]
        f(101, 111, 112, m, n, k, 1.0, x.ctypes.data, k, w.ctypes.data, k, 1.0,
          out.ctypes.data, n)
        return out
    return sgemm


def _added(r, b):
    from ember.backend import gemm
    gemm._add_rows(r, b)
    return r


def infer():
    import torch

    import ember
    from ember.backend import gemm
    from ember.ops.activations import _relu_array
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    sgemm = _sgemm_beta_one()
    rng = np.random.default_rng(0)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; CPU us per call; "
          f"sgemm {'found' if sgemm else 'missing'}")
    for m, k, n in ((1024, 784, 256), (1024, 256, 128), (1024, 128, 10)):
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        wt = np.ascontiguousarray(w.T)
        out = np.empty((m, n), np.float32)
        tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)

        def folded(x=x, w=w, b=b, out=out):
            out[...] = b
            return sgemm(x, w, out)
        ways = {"flag+add": lambda x=x, w=w, b=b: gemm.addmm(b, x, w.T),
                "cached W.T+add": lambda x=x, wt=wt, b=b: gemm.addmm(b, x, wt),
                "np.dot+add": lambda x=x, w=w, b=b: _added(np.dot(x, w.T), b),
                "sgemm beta=1": folded if sgemm else None}
        ways = {k2: f for k2, f in ways.items() if f is not None}
        ref = ways["flag+add"]()
        y = ref.copy()
        ty = torch.from_numpy(y.copy())
        fns = list(ways.values()) + [
            lambda y=y, b=b: gemm._add_rows(y, b), lambda y=y: _relu_array(y, out=y),
            lambda tx=tx, tw=tw, tb=tb: torch.nn.functional.linear(tx, tw, tb),
            lambda ty=ty: torch.relu_(ty)]
        times = cpu_us(fns, rounds=15)
        cells = []
        for (k2, f), v in zip(ways.items(), times):
            r = f()
            same = r is None or np.array_equal(r, ref)
            cells.append(f"{k2} {v:.0f}{'' if same else ' !='}")
        t_same = np.array_equal(torch.nn.functional.linear(tx, tw, tb).numpy(), ref)
        print(f"{(m, k, n)}: " + " | ".join(cells) + f" | bias add {times[-4]:.0f} | relu "
              f"{times[-3]:.0f} | torch linear {times[-2]:.0f} (== {t_same}) relu "
              f"{times[-1]:.0f}")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    if "--infer" in sys.argv:
        infer()
    else:
        split() if "--split" in sys.argv else layouts()
