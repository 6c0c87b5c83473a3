"""One CNN training step, ember beside torch in one process.

The model is the classic MNIST net: Conv2d(1,32,3)-ReLU-MaxPool2d(2)-Conv2d(32,64,3)-
ReLU-MaxPool2d(2)-Linear(1600,128)-ReLU-Linear(128,10), cross-entropy loss, Adam, on a
batch of 64 images 1x28x28 (float32). Both libraries start from the same weights.
Rounds of ember steps and torch steps alternate, so that load from other processes
hits both alike. Prints milliseconds per step (median of the timed steps, wall clock
and process CPU time), the ratio ember/torch, the load average, and, with
``--profile``, where ember's time goes per op. On a shared machine the CPU-time figure
with one thread each is the steadier comparison (``--threads 1`` also sets
OpenBLAS's thread count, read when NumPy is first imported):

    python benchmarks/cnn_step.py --threads 1

    python benchmarks/cnn_step.py [--steps N] [--batch B] [--threads T] [--profile] [--no-numba]
"""
import argparse
import os
import statistics
import sys
import time

if __name__ == "__main__" and "--threads" in sys.argv:
    # OpenBLAS reads its thread count when NumPy is first imported
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]
if __name__ == "__main__" and "--no-numba" in sys.argv:
    # the default install: ember's optional numba paths (``ember[fast]``) see numba as
    # absent; with EMBER_MKL=0 that is NumPy only
    sys.modules["numba"] = None

import numpy as np  # noqa: E402


def build(m, weights=None):
    nn = m.nn
    net = nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(), nn.Linear(128, 10))
    if weights is not None:
        net.load_state_dict({k: m.tensor(v) for k, v in weights.items()})
    return net


def make_step(m, net):
    opt_mod = getattr(m, "optim", None)
    if opt_mod is not None and hasattr(opt_mod, "Adam"):
        opt = opt_mod.Adam(net.parameters(), lr=1e-3)
    else:  # plain SGD by hand
        opt = None
    F = m.nn.functional

    def step(x, y):
        if opt is not None:
            opt.zero_grad()
        else:
            for p in net.parameters():
                p.grad = None
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        if opt is not None:
            opt.step()
        else:
            with m.no_grad():
                for p in net.parameters():
                    p -= 1e-3 * p.grad
        return loss
    return step, ("Adam" if opt is not None else "SGD")


def bench(libs, weights, xb, yb, steps, warmup, per_round=3):
    """Interleaved rounds of ``per_round`` steps of each library in ``libs``; for each,
    the median wall and CPU milliseconds per step, the fastest wall step, the losses of
    every step in order, and the optimizer's name."""
    runs = []
    for m in libs:
        net = build(m, weights)
        step, opt_name = make_step(m, net)
        runs.append((step, m.tensor(xb), m.tensor(yb), opt_name))
    out = [([], [], []) for _ in libs]
    done = 0
    while done < warmup + steps:
        n = min(per_round, warmup + steps - done)
        for (step, x, y, _), (losses, times, cpu) in zip(runs, out):
            for i in range(done, done + n):
                t0, c0 = time.perf_counter(), time.process_time()
                loss = step(x, y)
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                losses.append(float(loss.detach()))
                if i >= warmup:
                    times.append(dt)
                    cpu.append(dc)
        done += n
    return [(statistics.median(t) * 1e3, min(t) * 1e3, statistics.median(c) * 1e3, losses,
             run[3]) for (losses, t, c), run in zip(out, runs)]


def profile(xb, yb, steps):
    import cProfile
    import pstats

    import ember
    net = build(ember)
    step, _ = make_step(ember, net)
    x, y = ember.tensor(xb), ember.tensor(yb)
    step(x, y)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(steps):
        step(x, y)
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(25)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--no-numba", action="store_true",
                    help="hide numba from ember (the default install's NumPy paths)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch and OpenBLAS threads (default: the libraries' own)")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    import torch

    import ember
    import ember.nn  # noqa: F401
    if args.threads:
        torch.set_num_threads(args.threads)
        ember.set_num_threads(args.threads)  # its kernels and its BLAS alike
    rng = np.random.default_rng(0)
    xb = rng.standard_normal((args.batch, 1, 28, 28)).astype(np.float32)
    yb = rng.integers(0, 10, args.batch)
    torch.manual_seed(0)
    weights = {k: v.detach().numpy().copy() for k, v in build(torch).state_dict().items()}
    if args.profile:
        profile(xb, yb, args.steps)
        return
    (t_ms, t_min, t_cpu, t_loss, _), (e_ms, e_min, e_cpu, e_loss, e_opt) = bench(
        [torch, ember], weights, xb, yb, args.steps, args.warmup)
    print(f"CNN training step, batch {args.batch}x1x28x28, float32, {e_opt} "
          f"(torch threads: {torch.get_num_threads()}, OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}; {args.steps} timed steps; "
          f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())})")
    print("          wall median   wall min   CPU median  (ms/step)")
    print(f"  torch : {t_ms:11.2f} {t_min:10.2f} {t_cpu:12.2f}")
    print(f"  ember : {e_ms:11.2f} {e_min:10.2f} {e_cpu:12.2f}")
    print(f"  ratio : {e_ms / t_ms:10.2f}x {e_min / t_min:9.2f}x {e_cpu / t_cpu:11.2f}x")
    drift = max(abs(a - b) for a, b in zip(e_loss, t_loss))
    print(f"  losses agree to {drift:.1e} over {len(e_loss)} steps "
          f"(first {e_loss[0]:.4f}, last {e_loss[-1]:.4f})")


if __name__ == "__main__":
    main()
