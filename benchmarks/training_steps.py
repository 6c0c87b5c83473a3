"""Training and inference steps of small models, ember beside torch in one process.

    python benchmarks/training_steps.py [--only mlp,lstm,rnncell,transformer,mlp_infer]
                                        [--threads N] [--min-time S] [--no-numba]

Prints milliseconds per step and the ratio ember/torch for:
- mlp: MLP 784-256-128-10 training step, batch 128, SGD momentum 0.9
- lstm: LSTM(64->128, batch_first, seq 32, batch 32) + Linear, Adam
- rnncell: a Python loop over RNNCell(64, 128) for 32 steps, SGD
- transformer: TransformerEncoderLayer(128, 4 heads, ff 256, batch_first, dropout 0),
  batch 16, seq 64, MSE, Adam
- mlp_infer: the MLP under no_grad, batch 1024
(The CNN step is in benchmarks/cnn_step.py.)

ember and torch steps are interleaved (a round of ember steps, then a round of torch
steps, and again), so that load from other processes hits both alike. Besides the
median wall time per step, the ratio of median process (CPU) times is printed: on a
shared machine it is the steadier figure. ``--threads N`` sets torch's and OpenBLAS's
thread counts (on a loaded 2-core machine, ``--threads 1`` avoids oversubscribed BLAS
threads spinning against each other); the load average is printed with the figures.
"""
import argparse
import os
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


def _mlp(m):
    nn = m.nn
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def mlp(m):
    model = _mlp(m)
    opt = m.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((128, 784), dtype=np.float32))
    y = m.tensor(rng.integers(0, 10, 128))
    loss_fn = m.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    return step


def mlp_infer(m):
    model = _mlp(m)
    x = m.tensor(np.random.default_rng(0).standard_normal((1024, 784), dtype=np.float32))

    def step():
        with m.no_grad():
            model(x)
    return step


def lstm(m):
    nn = m.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(64, 128, batch_first=True)
            self.head = nn.Linear(128, 10)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.head(out[:, -1])
    model = Net()
    opt = m.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((32, 32, 64), dtype=np.float32))
    y = m.tensor(rng.integers(0, 10, 32))

    def step():
        opt.zero_grad()
        m.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def rnncell(m):
    cell = m.nn.RNNCell(64, 128)
    opt = m.optim.SGD(cell.parameters(), lr=0.01)
    rng = np.random.default_rng(0)
    xs = m.tensor(rng.standard_normal((32, 32, 64), dtype=np.float32))

    def step():
        opt.zero_grad()
        h = m.zeros(32, 128)
        for t in range(32):
            h = cell(xs[t], h)
        h.pow(2).mean().backward()
        opt.step()
    return step


def transformer(m):
    layer = m.nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, dropout=0.0,
                                         batch_first=True)
    opt = m.optim.Adam(layer.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((16, 64, 128), dtype=np.float32))
    target = m.tensor(rng.standard_normal((16, 64, 128), dtype=np.float32))

    def step():
        opt.zero_grad()
        m.nn.functional.mse_loss(layer(x), target).backward()
        opt.step()
    return step


WORKLOADS = {"mlp": mlp, "mlp_infer": mlp_infer, "lstm": lstm, "rnncell": rnncell,
             "transformer": transformer}


def time_pair(steps, min_time=2.0, warmup=3, per_round=3):
    """Interleaved rounds of each step in ``steps``; median wall and process
    milliseconds per step for each."""
    for step in steps:
        for _ in range(warmup):
            step()
    wall = [[] for _ in steps]
    cpu = [[] for _ in steps]
    start = time.perf_counter()
    while time.perf_counter() - start < min_time * len(steps) or len(wall[0]) < 5:
        for i, step in enumerate(steps):
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(per_round):
                step()
            wall[i].append((time.perf_counter() - t0) / per_round)
            cpu[i].append((time.process_time() - c0) / per_round)
    return ([float(np.median(w)) * 1e3 for w in wall],
            [float(np.median(c)) * 1e3 for c in cpu])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--no-numba", action="store_true",
                    help="hide numba from ember (the default install's NumPy paths)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch and OpenBLAS threads (default: the libraries' own)")
    args = ap.parse_args()
    import torch

    import ember
    if args.threads:
        torch.set_num_threads(args.threads)
        ember.set_num_threads(args.threads)  # its kernels and its BLAS alike
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"torch threads {torch.get_num_threads()}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    print(f"{'workload':<14}{'ember ms':>10}{'torch ms':>10}{'ratio':>8}"
          f"{'ember cpu':>11}{'torch cpu':>11}{'cpu ratio':>11}")
    for name in args.only.split(","):
        make = WORKLOADS[name]
        torch.manual_seed(0)
        ember.manual_seed(0)
        try:
            e_step = make(ember)
            e_step()
        except Exception as err:  # report and go on: one missing layer must not hide the rest
            print(f"{name:<14}  ember failed: {type(err).__name__}: {err}")
            continue
        (e, t), (ec, tc) = time_pair([e_step, make(torch)], args.min_time)
        print(f"{name:<14}{e:>10.2f}{t:>10.2f}{e / t:>8.2f}{ec:>11.2f}{tc:>11.2f}{ec / tc:>11.2f}")


if __name__ == "__main__":
    main()
