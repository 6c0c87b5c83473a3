"""Matrix products on MKL (``ember[mkl]``) against NumPy's OpenBLAS and torch, one thread.

    python benchmarks/gemm.py --sweep        # per product: where MKL starts to pay
    python benchmarks/gemm.py --workloads    # training and inference steps, with and
                                             # without MKL, beside torch
    python benchmarks/gemm.py --workloads --only mlp,cnn --min-time 3
    python benchmarks/gemm.py --transposed   # x @ w.T against (w @ x.T).T, NumPy only
    python benchmarks/gemm.py --narrow       # a classifier head's x @ w.T by row blocks

``--sweep`` times single products (``ember.backend.gemm.matmul`` forced onto MKL, then
``np.matmul``, then ``torch.matmul``) over square sizes and the shapes the benchmark
workloads multiply, and prints the CPU microseconds per product and the ratios MKL/NumPy
and MKL/torch; the smallest product from which MKL is faster on every larger one is the
dispatch threshold (``ember.backend.gemm.THRESHOLD``).

``--workloads`` runs the steps of benchmarks/training_steps.py (mlp, mlp_infer, lstm,
transformer) and benchmarks/cnn_step.py (cnn) three ways in one process, rounds
interleaved: ember with every product on NumPy (the install without the extra), ember
with MKL above the threshold, and torch; it prints median CPU milliseconds per step and
the ratios to torch. Everything runs at one thread (``OPENBLAS_NUM_THREADS=1`` is set
before NumPy is imported; ember and torch are set to one thread).
"""
import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # read when NumPy is first imported
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

SQUARES = (16, 24, 32, 48, 64, 80, 96, 112, 128, 160, 192, 256, 384)
# (batch or None, m, k, n, what): the products of the benchmark workloads
WORKLOAD_SHAPES = (
    (None, 128, 784, 256, "mlp fc1 forward"),
    (None, 128, 256, 128, "mlp fc2 forward"),
    (None, 256, 128, 784, "mlp fc1 weight grad (g.T @ x)"),
    (None, 1024, 784, 256, "mlp_infer fc1"),
    (None, 1024, 256, 128, "mlp_infer fc2"),
    (None, 1024, 128, 10, "mlp_infer fc3 (narrow output)"),
    (None, 512, 128, 10, "narrow output, 1.3 MFLOP"),
    (None, 256, 128, 10, "narrow output, 0.7 MFLOP"),
    (None, 32, 128, 512, "lstm step h @ W_hh^T"),
    (None, 1024, 64, 512, "lstm input projection"),
    (None, 1024, 128, 384, "transformer qkv projection"),
    (None, 1024, 128, 256, "transformer ff1"),
    (64, 64, 32, 64, "transformer q @ k^T (bmm)"),
    (64, 64, 64, 32, "transformer weights @ v (bmm)"),
    (None, 64, 288, 121 * 64, "cnn conv2 forward (rows)"),
    (None, 128, 1600, 64, "cnn fc1 forward"),
)


def _cpu_us(fns, rounds=5, budget=0.03):
    """CPU microseconds per call of each of ``fns``: rounds of calls worth ~``budget``
    seconds each, the functions interleaved so that load hits all alike; the median."""
    reps = []
    for fn in fns:
        fn()
        t = time.process_time()
        fn()
        reps.append(max(1, min(2000, int(budget / max(time.process_time() - t, 1e-6)))))
    times = [[] for _ in fns]
    for _ in range(rounds):
        for fn, r, out in zip(fns, reps, times):
            t = time.process_time()
            for _ in range(r):
                fn()
            out.append((time.process_time() - t) / r)
    return [float(np.median(t)) * 1e6 for t in times]


def sweep():
    import torch

    from ember.backend import gemm
    torch.set_num_threads(1)
    if not gemm.mkl_available():
        raise SystemExit(f"MKL is not available here: {gemm._EXTRA}")
    rng = np.random.default_rng(0)
    rows = [(None, s, s, s, "square") for s in SQUARES] + list(WORKLOAD_SHAPES)
    print(f"{'shape':<22}{'MFLOP':>8}{'mkl us':>9}{'numpy us':>10}{'torch us':>10}"
          f"{'mkl/np':>8}{'mkl/torch':>10}  what")
    threshold = gemm.THRESHOLD
    gemm.THRESHOLD = 0  # every product below on MKL
    try:
        for batch, m, k, n, what in rows:
            lead = () if batch is None else (batch,)
            a = rng.standard_normal(lead + (m, k), dtype=np.float32)
            b = rng.standard_normal(lead + (k, n), dtype=np.float32)
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            mk, npt, tt = _cpu_us([lambda a=a, b=b: gemm.matmul(a, b),
                                   lambda a=a, b=b: np.matmul(a, b),
                                   lambda a=ta, b=tb: torch.matmul(a, b)])
            mflop = 2 * m * n * k * (batch or 1) / 1e6
            shape = f"{'' if batch is None else f'{batch}x'}{m}x{k}x{n}"
            print(f"{shape:<22}{mflop:>8.2f}{mk:>9.1f}{npt:>10.1f}{tt:>10.1f}"
                  f"{mk / npt:>8.2f}{mk / tt:>10.2f}  {what}")
    finally:
        gemm.THRESHOLD = threshold
    print(f"dispatch threshold: {threshold / 1e6:.2f} MFLOP")


def workloads(only, min_time):
    import cnn_step
    import torch
    import training_steps

    import ember
    from ember.backend import gemm
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    if not gemm.mkl_available():
        raise SystemExit(f"MKL is not available here: {gemm._EXTRA}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, one thread")
    print(f"{'workload':<12}{'numpy ms':>10}{'mkl ms':>9}{'torch ms':>10}"
          f"{'numpy/torch':>13}{'mkl/torch':>11}{'mkl/numpy':>11}   (CPU time)")
    for name in only:
        torch.manual_seed(0)
        ember.manual_seed(0)
        if name == "cnn":
            e_step, t_step = _cnn_steps(cnn_step, ember, torch)
        else:
            make = training_steps.WORKLOADS[name]
            e_step, t_step = make(ember), make(torch)

        def e_numpy(step=e_step):
            with gemm.numpy_only():
                step()
        _, (nc, mc, tc) = training_steps.time_pair([e_numpy, e_step, t_step], min_time)
        print(f"{name:<12}{nc:>10.2f}{mc:>9.2f}{tc:>10.2f}{nc / tc:>13.2f}{mc / tc:>11.2f}"
              f"{mc / nc:>11.2f}")


def _cnn_steps(cnn_step, ember, torch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, 64)
    weights = {k: v.detach().numpy().copy()
               for k, v in cnn_step.build(torch).state_dict().items()}
    steps = []
    for m in (ember, torch):
        step, _ = cnn_step.make_step(m, cnn_step.build(m, weights))
        xb, yb = m.tensor(x), m.tensor(y)
        steps.append(lambda step=step, xb=xb, yb=yb: step(xb, yb))
    return steps


def transposed():
    """``x @ w.T`` (``np.matmul`` on a transposed row-major weight) against
    ``(w @ x.T).T`` copied to C order (``ember.backend.gemm._by_transpose``'s way),
    alternated, median wall microseconds per product, and whether the bits agree."""
    rng = np.random.default_rng(0)
    shapes = [(32, 64, 128), (32, 128, 128), (32, 256, 256), (32, 512, 512),
              (32, 1024, 256), (16, 128, 128), (64, 128, 128), (128, 128, 128)]
    for m, k, n in shapes:
        x = rng.standard_normal((m, k), dtype=np.float32)
        w = rng.standard_normal((n, k), dtype=np.float32)
        plain = lambda x=x, w=w: x @ w.T
        trick = lambda x=x, w=w: np.matmul(w, x.T).T.copy()
        reps = max(200, int(2e8 / (2 * m * n * k)))
        ta, tb = [], []
        for _ in range(7):
            for f, acc in ((plain, ta), (trick, tb)):
                c = time.perf_counter()
                for _ in range(reps):
                    f()
                acc.append((time.perf_counter() - c) / reps * 1e6)
        a, b = float(np.median(ta)), float(np.median(tb))
        same = np.array_equal(plain(), trick())
        print(f"{m}x{k}x{n}: x@w.T {a:.2f} us, (w@x.T).T {b:.2f} us, ratio {b / a:.2f}, "
              f"bit-equal {same}; load average {os.getloadavg()[0]:.2f}", flush=True)


def narrow():
    """A classifier head's ``x @ w.T`` (10 output columns): ``np.matmul`` on the
    transposed weight against ``ember.backend.gemm._narrow_by_rows`` (the weight copied to
    row-major order, 128 rows per product) and torch's ``mm``, CPU microseconds per
    product (one thread, rounds alternated, the median), and whether the bits agree."""
    import torch

    from ember.backend import gemm
    torch.set_num_threads(1)
    # ember takes this way only on the OpenBLAS kernels where its bits were checked
    # (gemm._kernels_keep_bits); it is timed here on whatever kernels run
    print(f"taken by ember on these kernels: {gemm._kernels_keep_bits()}")
    gemm._kernels_state[:] = [gemm._threads._blas_libs(), True]
    rng = np.random.default_rng(0)
    for m, k, n in [(128, 128, 10), (256, 128, 10), (128, 256, 10), (1024, 128, 10),
                    (1024, 256, 15)]:
        x = rng.standard_normal((m, k), dtype=np.float32)
        w = rng.standard_normal((n, k), dtype=np.float32)
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        fns = [lambda x=x, w=w: x @ w.T, lambda x=x, w=w: gemm._narrow_by_rows(x, w.T),
               lambda tx=tx, tw=tw: torch.mm(tx, tw.t())]
        a, b, t = _cpu_us(fns, rounds=15)
        same = np.array_equal(fns[0](), fns[1]())
        print(f"{m}x{k}x{n}: x@w.T {a:.1f} us, by rows {b:.1f} us ({b / a:.2f}), torch "
              f"{t:.1f} us, bit-equal {same}; load average {os.getloadavg()[0]:.2f}",
              flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--workloads", action="store_true")
    ap.add_argument("--transposed", action="store_true")
    ap.add_argument("--narrow", action="store_true")
    ap.add_argument("--only", default="mlp,mlp_infer,cnn,lstm,transformer")
    ap.add_argument("--min-time", type=float, default=2.0)
    args = ap.parse_args()
    if args.transposed:
        transposed()
        return
    if args.narrow:
        narrow()
        return
    if not (args.sweep or args.workloads):
        args.sweep = args.workloads = True
    if args.sweep:
        sweep()
    if args.workloads:
        workloads(args.only.split(","), args.min_time)


if __name__ == "__main__":
    main()
