"""Whether the LSTM's elementwise calls run NumPy's SIMD loops: for float32 ``exp``,
``tanh`` and the sigmoid's ``add``/``divide``, the loop NumPy's dispatcher picked on this
CPU (``numpy.lib.introspect.opt_func_info``), and the nanoseconds per element of

- a contiguous 16K-float array (out of place, and in place),
- the same call on the operands the padded LSTM loop (``ember.ops.rnn_lstm_padded``)
  passes: a step's three sigmoid gates (3, B, H) of the gate-major block ``S`` (5, T, B,
  H), whose gates are contiguous blocks a slot apart, and its g gate (B, H), in place,
  and a contiguous (3, B, H) block of the same size,
- a strided (every other float) input, a 4-byte misaligned array and float64 (the
  layouts and casts that could make NumPy fall back to its scalar loop),
- torch's ``sigmoid``/``tanh``/``exp`` at the same sizes (one thread).

    python benchmarks/lstm_ufunc_loops.py [--baseline]

``--baseline`` runs it again in a child process with NumPy's AVX2 loops switched off
(``NPY_DISABLE_CPU_FEATURES=X86_V3``, NumPy >= 2.4; ``AVX2 FMA3`` before): the scalar /
SSE loops' figures, to compare against. In-place calls are timed on a fresh copy of the
inputs each time (the copy timed alone and subtracted), so that ``exp`` does not run on
its own overflowing output. Best of 9 runs; prints the load average.
"""
import argparse
import os
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def _best(f, n=2000):
    best = float("inf")
    for _ in range(9):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def _dispatch():
    """``{ufunc: the float32 loop's target}``, or {} where NumPy cannot say (< 2.0)."""
    try:
        from numpy.lib import introspect
    except ImportError:
        return {}
    found = {}
    for name, sig in (("exp", "ff"), ("tanh", "ff"), ("add", "fff"), ("divide", "fff"),
                      ("multiply", "fff")):
        info = introspect.opt_func_info(func_name=f"^{name}$", signature="float32")
        found[name] = info.get(name, {}).get(sig, {}).get("current", "?")
    return found


def _rows(T=32, B=32, H=128):
    rng = np.random.default_rng(0)
    n = 16384
    a = rng.standard_normal(n).astype(np.float32)
    o = np.empty_like(a)
    wide = rng.standard_normal(2 * n).astype(np.float32)
    odd = rng.standard_normal(n + 1).astype(np.float32)[1:]  # 4 bytes off alignment
    a64, o64 = a.astype(np.float64), np.empty(n, np.float64)
    S = np.empty((5, T, B, H), np.float32)
    S[:] = rng.standard_normal(S.shape)
    sig = S.transpose(1, 0, 2, 3)[T // 2, 2:]  # a step's i, f, o: three blocks a slot apart
    gg = S[0, T // 2]
    src3 = rng.standard_normal(sig.shape).astype(np.float32)
    cont3 = np.empty_like(src3)
    src1 = src3[0].copy()

    def in_place(f, view, src):
        """ns per element of ``f(view, view)`` on a fresh copy of ``src`` each call."""
        copy = _best(lambda: np.copyto(view, src))
        both = _best(lambda: (np.copyto(view, src), f(view, view)))
        return (both - copy) * 1e9 / src.size

    rows = []
    for name, f in (("exp", np.exp), ("tanh", np.tanh)):
        rows += [
            (f"{name} 16K contiguous, out of place", _best(lambda f=f: f(a, o)) * 1e9 / n),
            (f"{name} 16K contiguous, in place", in_place(f, o, a)),
            (f"{name} 16K strided input (every other float)",
             _best(lambda f=f: f(wide[::2], o)) * 1e9 / n),
            (f"{name} 16K misaligned by 4 bytes, in place", in_place(f, odd, a)),
            (f"{name} 16K float64", _best(lambda f=f: f(a64, o64), 500) * 1e9 / n),
        ]
    rows += [
        ("exp LSTM sigmoid gates (3, B, H) in S, in place", in_place(np.exp, sig, src3)),
        ("exp contiguous (3, B, H), in place", in_place(np.exp, cont3, src3)),
        ("tanh LSTM g gate (B, H) in S, in place", in_place(np.tanh, gg, src1)),
        ("add LSTM sigmoid gates + 1, in place", in_place(
            lambda x, y: np.add(x, np.float32(1), y), sig, src3)),
        ("divide 1 / LSTM sigmoid gates, in place", in_place(
            lambda x, y: np.divide(np.float32(1), x, y), sig, src3 + 2)),
    ]
    return rows


def _torch_rows():
    try:
        import torch
    except ImportError:
        return []
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    a = torch.from_numpy(rng.standard_normal(16384).astype(np.float32))
    o = torch.empty_like(a)
    return [(f"torch {name} 16K contiguous", _best(lambda f=f: f(a, out=o)) * 1e9 / a.numel())
            for name, f in (("sigmoid", torch.sigmoid), ("tanh", torch.tanh),
                            ("exp", torch.exp))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", action="store_true",
                    help="also run with NumPy's AVX2 loops switched off (a child process)")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    print(f"NumPy {np.__version__}; NPY_DISABLE_CPU_FEATURES="
          f"{os.environ.get('NPY_DISABLE_CPU_FEATURES', '')!r}; float32 loops: "
          + ", ".join(f"{k} {v}" for k, v in _dispatch().items()))
    print("load average", " ".join(f"{v:.2f}" for v in os.getloadavg()))
    rows = _rows() + ([] if args.no_torch else _torch_rows())
    for label, ns in rows:
        print(f"  {label:52s} {ns:6.2f} ns/element")
    print("load average", " ".join(f"{v:.2f}" for v in os.getloadavg()))
    if args.baseline:
        major, minor = (int(v) for v in np.__version__.split(".")[:2])
        off = "X86_V3" if (major, minor) >= (2, 4) else "AVX2 FMA3"
        env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=off)
        sys.stdout.flush()
        subprocess.run([sys.executable, os.path.abspath(__file__), "--no-torch"], env=env,
                       check=True)


if __name__ == "__main__":
    main()
