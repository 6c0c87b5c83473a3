"""Nested function transforms at the sizes of the Jacobians/Hessians tutorial, ember beside
torch in one process (alternated, best of ``--repeat``), CPU time on one thread.

    OPENBLAS_NUM_THREADS=1 python benchmarks/func_transforms.py [--repeat 3] [--only NAME]

Cases: the Hessian of ``tanh(linear(x))`` w.r.t. a 512-element input (``hessian``,
``jacrev(jacrev)``, ``jacfwd(jacrev)``), ``vmap(hessian)`` and ``vmap(jacrev)`` over a batch
of 64 inputs of 31 features, and ``jacrev``/``jacfwd`` of a 32 -> 2048 and a 2048 -> 32 map.
The last column is ember's time over torch's.
"""
import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def cases(lib):
    """(name, thunk) pairs running each transform on ``lib`` (torch or ember)."""
    F = lib.nn.functional
    fn = lib.func

    def predict(weight, bias, x):
        return F.linear(x, weight, bias).tanh()

    rng = np.random.default_rng(0)

    def randn(*shape):
        return lib.from_numpy(rng.standard_normal(shape).astype(np.float32))

    w512, b512, x512 = randn(32, 512), randn(32), randn(512)
    wb, bb, xb = randn(33, 31), randn(33), randn(64, 31)
    wt, bt, xt = randn(2048, 32), randn(2048), randn(32)
    ww, bw, xw = randn(32, 2048), randn(32), randn(2048)
    return [
        ("hessian 512", lambda: fn.hessian(predict, argnums=2)(w512, b512, x512)),
        ("jacrev(jacrev) 512",
         lambda: fn.jacrev(fn.jacrev(predict, argnums=2), argnums=2)(w512, b512, x512)),
        ("jacfwd(jacrev) 512",
         lambda: fn.jacfwd(fn.jacrev(predict, argnums=2), argnums=2)(w512, b512, x512)),
        ("vmap(hessian) 64x31",
         lambda: fn.vmap(fn.hessian(predict, argnums=2), in_dims=(None, None, 0))(wb, bb, xb)),
        ("vmap(jacrev) 64x31",
         lambda: fn.vmap(fn.jacrev(predict, argnums=2), in_dims=(None, None, 0))(wb, bb, xb)),
        ("jacrev 32->2048", lambda: fn.jacrev(predict, argnums=2)(wt, bt, xt)),
        ("jacfwd 32->2048", lambda: fn.jacfwd(predict, argnums=2)(wt, bt, xt)),
        ("jacrev 2048->32", lambda: fn.jacrev(predict, argnums=2)(ww, bw, xw)),
        ("jacfwd 2048->32", lambda: fn.jacfwd(predict, argnums=2)(ww, bw, xw)),
    ]


def cpu_time(thunk):
    t0 = time.process_time()
    thunk()
    return time.process_time() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", default=None, help="run only the cases whose name contains this")
    a = p.parse_args()
    import torch

    import ember
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    tc, ec = cases(torch), cases(ember)
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'case':22s} {'ember s':>9s} {'torch s':>9s} {'ratio':>7s}")
    for (name, t_fn), (_, e_fn) in zip(tc, ec):
        if a.only and a.only not in name:
            continue
        te, tt = [], []
        for _ in range(a.repeat):  # alternated, so both see the same machine load
            tt.append(cpu_time(t_fn))
            te.append(cpu_time(e_fn))
        print(f"{name:22s} {min(te):9.3f} {min(tt):9.3f} {min(te) / min(tt):7.1f}x", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
