"""The kernels ember splits over its intra-op threads, at 1 and at 2 threads, in one
process (rounds interleaved), beside torch at the same thread counts.

    python benchmarks/threads_kernels.py [--rounds R]

Prints, per kernel (forward + backward, or the optimizer step), the median wall time
at 1 and 2 threads for ember and torch, and ember's 2-thread/1-thread ratio; the load
average is printed first. ``set_num_threads`` of each library sets its threads (ember's
also sets NumPy's BLAS threads through threadpoolctl).
"""
import argparse
import os
import time

import numpy as np


def cases(m):
    rng = np.random.default_rng(0)
    F = m.nn.functional

    def t(*shape, grad=True):
        return m.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=grad)

    x1, w1 = t(64, 1, 28, 28, grad=False), t(32, 1, 3, 3)
    x2, w2 = t(64, 32, 13, 13), t(64, 32, 3, 3)
    xp = t(64, 32, 26, 26)
    xr = t(64, 32, 26, 26)
    q, k, v = t(16, 4, 64, 32), t(16, 4, 64, 32), t(16, 4, 64, 32)
    xl, wl, bl = t(16, 64, 128), t(128), t(128)
    p = [m.nn.Parameter(m.tensor(rng.standard_normal((1600, 128)).astype(np.float32)))]
    p[0].grad = m.tensor(rng.standard_normal((1600, 128)).astype(np.float32))
    opt = m.optim.Adam(p, lr=1e-3)

    def back(f):
        def run():
            f().sum().backward()
        return run
    return {
        "conv2d 1->32, b64 28x28": back(lambda: F.conv2d(x1, w1)),
        "conv2d 32->64, b64 13x13": back(lambda: F.conv2d(x2, w2)),
        "max_pool2d 2, 64x32x26x26": back(lambda: F.max_pool2d(xp, 2)),
        "relu 64x32x26x26": back(lambda: F.relu(xr)),
        "sdpa 16x4x64x32": back(lambda: F.scaled_dot_product_attention(q, k, v)),
        "layer_norm 16x64x128": back(lambda: F.layer_norm(xl, (128,), wl, bl)),
        "Adam step, 1600x128": opt.step,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    import torch

    import ember
    libs = {"ember": ember, "torch": torch}
    runs = {name: cases(m) for name, m in libs.items()}
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'kernel':<28}{'ember 1t':>10}{'ember 2t':>10}{'torch 1t':>10}{'torch 2t':>10}"
          f"{'ember 2t/1t':>13}{'ember/torch 2t':>16}")
    for key in runs["ember"]:
        times = {}
        for _ in range(args.rounds):
            for name, m in libs.items():
                for n in (1, 2):
                    m.set_num_threads(n)
                    f = runs[name][key]
                    f()
                    t0 = time.perf_counter()
                    for _ in range(3):
                        f()
                    times.setdefault((name, n), []).append((time.perf_counter() - t0) / 3)
        med = {k: float(np.median(v)) * 1e3 for k, v in times.items()}
        print(f"{key:<28}{med['ember', 1]:>10.2f}{med['ember', 2]:>10.2f}"
              f"{med['torch', 1]:>10.2f}{med['torch', 2]:>10.2f}"
              f"{med['ember', 2] / med['ember', 1]:>13.2f}"
              f"{med['ember', 2] / med['torch', 2]:>16.2f}")


if __name__ == "__main__":
    main()
