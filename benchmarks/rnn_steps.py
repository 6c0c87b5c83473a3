"""Recurrent training steps, ember beside torch in one process.

    python benchmarks/rnn_steps.py [--only lstm,rnncell,gru,lstm_packed] [--threads N] [--no-numba]

Prints milliseconds per step (median; ember and torch steps alternate) and the ratio
ember/torch for:
- lstm: LSTM(64->128, batch_first, seq 32, batch 32) + Linear(128, 10) on the last
  step, cross-entropy, Adam (target ratio <= 1.5)
- rnncell: a Python loop over RNNCell(64, 128) for 32 steps, loss mean(h**2), SGD
  (target ratio <= 1.5)
- gru: GRU(64->128, 2 layers, bidirectional), seq 32, batch 32, MSE on the output, Adam
- lstm_packed: the lstm workload on a PackedSequence of lengths 1..32
  (enforce_sorted=False), head on h_n

``--threads N`` sets both libraries' thread count (torch.set_num_threads and the BLAS
threads NumPy uses, through environment variables read before NumPy loads); by
default each library keeps its own default.
"""
import argparse
import os
import sys
import time

if __name__ == "__main__" and "--no-numba" in sys.argv:
    # the default install: ember's optional numba paths (``ember[fast]``) see numba as
    # absent; with EMBER_MKL=0 that is NumPy only
    sys.modules["numba"] = None


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
    return _classifier(m, Net())


def _classifier(m, model, packed=False):
    import numpy as np
    opt = m.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((32, 32, 64), dtype=np.float32))
    y = m.tensor(rng.integers(0, 10, 32))
    lengths = rng.permutation(np.arange(1, 33)).tolist()

    def step():
        opt.zero_grad()
        inp = x
        if packed:
            inp = m.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                      enforce_sorted=False)
        m.nn.functional.cross_entropy(model(inp), y).backward()
        opt.step()
    return step


def lstm_packed(m):
    nn = m.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(64, 128, batch_first=True)
            self.head = nn.Linear(128, 10)

        def forward(self, x):
            _, (h, _) = self.lstm(x)
            return self.head(h[-1])
    return _classifier(m, Net(), packed=True)


def rnncell(m):
    import numpy as np
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


def gru(m):
    import numpy as np
    model = m.nn.GRU(64, 128, num_layers=2, bidirectional=True)
    opt = m.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((32, 32, 64), dtype=np.float32))
    target = m.tensor(rng.standard_normal((32, 32, 256), dtype=np.float32))

    def step():
        opt.zero_grad()
        m.nn.functional.mse_loss(model(x)[0], target).backward()
        opt.step()
    return step


WORKLOADS = {"lstm": lstm, "rnncell": rnncell, "gru": gru, "lstm_packed": lstm_packed}


def time_pair(step_a, step_b, min_time=4.0, warmup=3):
    """Median ms/step of two steps, timed alternately so that the load of a shared
    machine weighs on both alike."""
    import numpy as np
    for _ in range(warmup):
        step_a()
        step_b()
    ta, tb = [], []
    start = time.perf_counter()
    while time.perf_counter() - start < min_time or len(ta) < 5:
        for step, times in ((step_a, ta), (step_b, tb)):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
    return float(np.median(ta)) * 1e3, float(np.median(tb)) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--min-time", type=float, default=4.0)
    ap.add_argument("--no-numba", action="store_true",
                    help="hide numba from ember (the default install's NumPy paths)")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads is not None:
        if "numpy" in sys.modules:
            raise RuntimeError("--threads must be applied before NumPy is imported")
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)
    import torch

    import ember
    if args.threads is not None:
        torch.set_num_threads(args.threads)
        ember.set_num_threads(args.threads)  # its kernels and its BLAS alike
    print(f"{'workload':<14}{'ember ms':>10}{'torch ms':>10}{'ratio':>8}")
    for name in args.only.split(","):
        make = WORKLOADS[name]
        torch.manual_seed(0)
        ember.manual_seed(0)
        e, t = time_pair(make(ember), make(torch), args.min_time)
        print(f"{name:<14}{e:>10.2f}{t:>10.2f}{e / t:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
