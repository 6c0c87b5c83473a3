"""One TransformerEncoderLayer training step, ember beside torch in one process.

The layer is ``TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256,
dropout=0, batch_first=True)`` on a float32 batch of 16 sequences of 64 tokens, MSE loss
against a fixed random target, Adam (lr 1e-3). Both libraries start from the same
weights. Prints milliseconds per step (median of the timed steps, wall clock and
process CPU time), the ratio ember/torch, and how far the two loss curves drift apart;
with ``--profile``, where ember's time goes (cProfile, by own time). The machine may be
shared: run it a few times and take the median.

ember and torch run in interleaved rounds (a few ember steps, a few torch steps, again)
so that load from other processes hits both alike. ``--threads N`` sets torch's and
OpenBLAS's thread counts (``--threads 1`` is the steadier comparison on a busy 2-core
machine); the load average is printed with the figures.

    python benchmarks/transformer_step.py [--rounds R] [--batch B] [--seq L] [--threads T]
                                          [--profile]
"""
import argparse
import os
import statistics
import sys
import time

if __name__ == "__main__" and "--threads" in sys.argv:
    # OpenBLAS reads its thread count when NumPy is first imported
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import numpy as np  # noqa: E402

D_MODEL, NHEAD, FF = 128, 4, 256


def build(m, weights=None):
    layer = m.nn.TransformerEncoderLayer(D_MODEL, NHEAD, FF, dropout=0.0, batch_first=True)
    if weights is not None:
        layer.load_state_dict({k: m.tensor(v) for k, v in weights.items()})
    return layer


def make_step(m, net):
    opt = m.optim.Adam(net.parameters(), lr=1e-3)
    F = m.nn.functional

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def bench(weights, xb, yb, rounds, per_round=3, warmup=3):
    """Interleaved rounds of ember and torch steps: (wall ms, CPU ms, losses) for each,
    the times being medians over rounds of the per-step average."""
    import torch

    import ember
    runs = []
    for m in (ember, torch):
        net = build(m, weights)
        step = make_step(m, net)
        x, y = m.tensor(xb), m.tensor(yb)
        runs.append((step, x, y, [], [], []))
    for step, x, y, losses, _, _ in runs:
        for _ in range(warmup):
            losses.append(float(step(x, y).detach()))
    for _ in range(rounds):
        for step, x, y, losses, wall, cpu in runs:
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(per_round):
                losses.append(float(step(x, y).detach()))
            wall.append((time.perf_counter() - t0) / per_round)
            cpu.append((time.process_time() - c0) / per_round)
    return [(statistics.median(w) * 1e3, statistics.median(c) * 1e3, losses)
            for _, _, _, losses, w, c in runs]


def profile(xb, yb, steps):
    import cProfile
    import pstats

    import ember
    net = build(ember)
    step = make_step(ember, net)
    x, y = ember.tensor(xb), ember.tensor(yb)
    step(x, y)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(steps):
        step(x, y)
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch and OpenBLAS threads (default: the libraries' own)")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    import torch

    import ember
    import ember.nn  # noqa: F401
    import ember.optim  # noqa: F401
    if args.threads:
        torch.set_num_threads(args.threads)
        ember.set_num_threads(args.threads)  # its kernels and its BLAS alike
    rng = np.random.default_rng(0)
    xb = rng.standard_normal((args.batch, args.seq, D_MODEL)).astype(np.float32)
    yb = rng.standard_normal((args.batch, args.seq, D_MODEL)).astype(np.float32)
    if args.profile:
        profile(xb, yb, 3 * args.rounds)
        return
    torch.manual_seed(0)
    weights = {k: v.detach().numpy().copy() for k, v in build(torch).state_dict().items()}
    (e_ms, e_cpu, e_loss), (t_ms, t_cpu, t_loss) = bench(weights, xb, yb, args.rounds)
    print(f"TransformerEncoderLayer({D_MODEL}, {NHEAD}, {FF}) training step, batch "
          f"{args.batch}x{args.seq}, float32, MSE + Adam")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, torch threads "
          f"{torch.get_num_threads()}, OpenBLAS threads "
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'default')}; medians of {args.rounds} "
          "rounds of 3 steps")
    print("            wall ms/step   CPU ms/step")
    print(f"  torch : {t_ms:12.2f} {t_cpu:13.2f}")
    print(f"  ember : {e_ms:12.2f} {e_cpu:13.2f}")
    print(f"  ratio : {e_ms / t_ms:11.2f}x {e_cpu / t_cpu:12.2f}x")
    drift = max(abs(a - b) for a, b in zip(e_loss, t_loss))
    print(f"  losses agree to {drift:.1e} over {len(e_loss)} steps "
          f"(first {e_loss[0]:.4f}, last {e_loss[-1]:.4f})")


if __name__ == "__main__":
    main()
