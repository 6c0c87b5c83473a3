"""Training steps: eager ember, ember.compile'd ember and torch eager, in one run.

    python benchmarks/compile_step.py [--threads 1|2] [--only mlp,cnn,lstm,transformer]
                                      [--min-time S]

The compiled variant compiles the model (``ember.compile(model)``) and keeps
``zero_grad``/``backward``/``optimizer.step`` outside it, as the correctness tests do.
Rounds of the three are interleaved so machine load hits all alike; median wall
milliseconds per step and the ratios to torch eager are printed, with the load
average. Workloads (the sizes of benchmarks/training_steps.py):
- mlp: MLP 784-256-128-10, batch 128, SGD momentum
- cnn: Conv(1->8)-ReLU-MaxPool-Conv(8->16)-ReLU-MaxPool-Linear, batch 64, 28x28, SGD
- lstm: LSTM(64->128, batch_first, seq 32, batch 32) + Linear, Adam
- transformer: TransformerEncoderLayer(128, 4, ff 256, dropout 0), batch 16, seq 64, Adam
"""
import argparse
import os
import sys
import time

if __name__ == "__main__" and "--threads" in sys.argv:
    # OpenBLAS reads its thread count when NumPy is first imported
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import numpy as np  # noqa: E402


def mlp(m):
    nn = m.nn
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((128, 784), dtype=np.float32))
    y = m.tensor(rng.integers(0, 10, 128))
    return model, m.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), x, \
        lambda out: m.nn.functional.cross_entropy(out, y)


def cnn(m):
    nn = m.nn
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(16 * 7 * 7, 10))
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((64, 1, 28, 28), dtype=np.float32))
    y = m.tensor(rng.integers(0, 10, 64))
    return model, m.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), x, \
        lambda out: m.nn.functional.cross_entropy(out, y)


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
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((32, 32, 64), dtype=np.float32))
    y = m.tensor(rng.integers(0, 10, 32))
    return model, m.optim.Adam(model.parameters(), lr=1e-3), x, \
        lambda out: m.nn.functional.cross_entropy(out, y)


def transformer(m):
    model = m.nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, dropout=0.0,
                                         batch_first=True)
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((16, 64, 128), dtype=np.float32))
    target = m.tensor(rng.standard_normal((16, 64, 128), dtype=np.float32))
    return model, m.optim.Adam(model.parameters(), lr=1e-3), x, \
        lambda out: m.nn.functional.mse_loss(out, target)


WORKLOADS = {"mlp": mlp, "cnn": cnn, "lstm": lstm, "transformer": transformer}


def make_step(m, make, compiled=False):
    model, opt, x, loss_of = make(m)
    run = m.compile(model) if compiled else model

    def step():
        opt.zero_grad()
        loss_of(run(x)).backward()
        opt.step()
    return step, run


def time_rounds(steps, min_time, warmup=3, per_round=3):
    """Interleaved rounds of each step; median wall milliseconds per step for each."""
    for step in steps:
        for _ in range(warmup):
            step()
    wall = [[] for _ in steps]
    start = time.perf_counter()
    while time.perf_counter() - start < min_time * len(steps) or len(wall[0]) < 5:
        for i, step in enumerate(steps):
            t0 = time.perf_counter()
            for _ in range(per_round):
                step()
            wall[i].append((time.perf_counter() - t0) / per_round)
    return [float(np.median(w)) * 1e3 for w in wall]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch and OpenBLAS threads (default: the libraries' own)")
    args = ap.parse_args()
    import torch

    import ember
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"torch threads {torch.get_num_threads()}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    print(f"{'workload':<13}{'ember ms':>10}{'compiled':>10}{'torch ms':>10}"
          f"{'eager/torch':>13}{'compiled/torch':>16}{'compile s':>11}")
    for name in args.only.split(","):
        make = WORKLOADS[name]
        torch.manual_seed(0)
        ember.manual_seed(0)
        eager, _ = make_step(ember, make)
        comp, run = make_step(ember, make, compiled=True)
        t0 = time.perf_counter()
        comp()  # the first call captures
        capture_s = time.perf_counter() - t0
        t_step, _ = make_step(torch, make)
        e, c, t = time_rounds([eager, comp, t_step], args.min_time)
        stats = run._compiled.stats
        note = "" if stats["eager"] == 0 else "  (graph break: ran eagerly)"
        print(f"{name:<13}{e:>10.2f}{c:>10.2f}{t:>10.2f}{e / t:>13.2f}{c / t:>16.2f}"
              f"{capture_s:>11.3f}{note}")


if __name__ == "__main__":
    main()
