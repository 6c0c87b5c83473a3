"""The MNIST-1D paper's four baselines, on ember or on PyTorch, from one script.

    python examples/mnist1d/baselines.py --backend ember
    python examples/mnist1d/baselines.py --backend torch
    python examples/mnist1d/baselines.py --backend both --steps 2000   # the table

The models are those of the paper's ``notebooks/models.py`` (Greydanus, 2020):
logistic regression, a 2-hidden-layer MLP (100 units, one residual connection), a
3-layer 1-D CNN (25 channels) and a bidirectional GRU (6 hidden units), trained as its
``notebooks/train.py`` does: Adam, lr 1e-2, batches of 100 taken in order, on the 4,000
training signals of the default generated dataset, tested on the other 1,000.

The backend is chosen before anything else is imported, and the rest is written
``import ember as torch`` style: the same lines build and train the models on both.
``--backend both`` runs the script once per backend in a subprocess and prints a
Markdown table of test accuracy and training wall time beside the paper's numbers.
Needs the mnist1d extra: ``pip install -e '.[mnist1d]'``.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

PAPER = {"logistic": 32, "mlp": 68, "cnn": 94, "gru": 91}   # the paper's test accuracies, %


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--backend", choices=["ember", "torch", "both"], default="ember")
    p.add_argument("--models", default="logistic,mlp,cnn,gru",
                   help="comma-separated subset of logistic,mlp,cnn,gru")
    p.add_argument("--steps", type=int, default=6000,
                   help="training steps per model (the paper's notebook uses 6000)")
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--data-root", default="data", help="where the generated data is cached")
    p.add_argument("--json", action="store_true", help="print the results as one JSON line")
    return p.parse_args(argv)


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS is not None and ARGS.backend == "torch":
    import torch
else:
    import ember as torch

nn = torch.nn


def _set_blas_threads(n=1):
    """One BLAS thread for both backends: fastest for these small matrices on 2 cores."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(n)
    if hasattr(torch, "set_num_threads"):
        torch.set_num_threads(n)


# ----- the paper's models (notebooks/models.py), unchanged but for the GRU fallback -------
class LinearBase(nn.Module):
    def __init__(self, input_size, output_size):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)

    def forward(self, x):
        return self.linear(x)


class MLPBase(nn.Module):
    def __init__(self, input_size, output_size, hidden_size=100):
        super().__init__()
        self.linear1 = nn.Linear(input_size, hidden_size)
        self.linear2 = nn.Linear(hidden_size, hidden_size)
        self.linear3 = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        h = self.linear1(x).relu()
        h = h + self.linear2(h).relu()
        return self.linear3(h)


class ConvBase(nn.Module):
    def __init__(self, output_size, channels=25, linear_in=125):
        super().__init__()
        self.conv1 = nn.Conv1d(1, channels, 5, stride=2, padding=1)
        self.conv2 = nn.Conv1d(channels, channels, 3, stride=2, padding=1)
        self.conv3 = nn.Conv1d(channels, channels, 3, stride=2, padding=1)
        self.linear = nn.Linear(linear_in, output_size)

    def forward(self, x):
        x = x.view(-1, 1, x.shape[-1])
        h1 = self.conv1(x).relu()
        h2 = self.conv2(h1).relu()
        h3 = self.conv3(h2).relu()
        return self.linear(h3.view(h3.shape[0], -1))


class HandGRU(nn.Module):
    """A bidirectional, batch-first, one-layer GRU written with tensor ops, for a backend
    without ``nn.GRU``: PyTorch's equations, parameter names, order and initialisation."""

    def __init__(self, input_size, hidden_size, batch_first=True, bidirectional=True):
        super().__init__()
        assert batch_first
        self.hidden_size = hidden_size
        self.suffixes = ["", "_reverse"] if bidirectional else [""]
        k = 1.0 / hidden_size ** 0.5
        for sfx in self.suffixes:
            for name, shape in (("weight_ih_l0", (3 * hidden_size, input_size)),
                                ("weight_hh_l0", (3 * hidden_size, hidden_size)),
                                ("bias_ih_l0", (3 * hidden_size,)),
                                ("bias_hh_l0", (3 * hidden_size,))):
                setattr(self, name + sfx, nn.Parameter(torch.empty(*shape)))
        for p in self.parameters():
            nn.init.uniform_(p, -k, k)

    def _direction(self, x, h, sfx, reverse):
        gi = x @ getattr(self, "weight_ih_l0" + sfx).t() + getattr(self, "bias_ih_l0" + sfx)
        w_hh, b_hh = getattr(self, "weight_hh_l0" + sfx), getattr(self, "bias_hh_l0" + sfx)
        H, outs = self.hidden_size, []
        steps = range(x.shape[1] - 1, -1, -1) if reverse else range(x.shape[1])
        for t in steps:
            g, gh = gi[:, t], h @ w_hh.t() + b_hh
            r = torch.sigmoid(g[:, :H] + gh[:, :H])
            z = torch.sigmoid(g[:, H:2 * H] + gh[:, H:2 * H])
            n = torch.tanh(g[:, 2 * H:] + r * gh[:, 2 * H:])
            h = (1 - z) * n + z * h
            outs.append(h)
        if reverse:
            outs.reverse()
        return torch.stack(outs, 1), h

    def forward(self, x, h0):
        results = [self._direction(x, h0[i], sfx, reverse=i == 1)
                   for i, sfx in enumerate(self.suffixes)]
        return (torch.cat([o for o, _ in results], -1),
                torch.stack([h for _, h in results], 0))


class GRUBase(nn.Module):
    def __init__(self, input_size, output_size, hidden_size=6, time_steps=40,
                 bidirectional=True):
        super().__init__()
        gru = nn.GRU if hasattr(nn, "GRU") else HandGRU
        self.gru = gru(input_size=input_size, hidden_size=hidden_size, batch_first=True,
                       bidirectional=bidirectional)
        flat_size = 2 * hidden_size * time_steps if bidirectional else hidden_size * time_steps
        self.linear = nn.Linear(flat_size, output_size)
        self.hidden_size = hidden_size
        self.bidirectional = bidirectional

    def forward(self, x):
        x = x.view(*x.shape[:2], 1)
        k = 2 if self.bidirectional else 1
        h0 = torch.zeros(k, x.shape[0], self.hidden_size)
        output, _ = self.gru(x, h0)
        return self.linear(output.reshape(output.shape[0], -1))


def build(name):
    return {"logistic": lambda: LinearBase(40, 10), "mlp": lambda: MLPBase(40, 10),
            "cnn": lambda: ConvBase(10), "gru": lambda: GRUBase(1, 10)}[name]()


# ----- training, as the paper's notebooks/train.py --------------------------------------
def load_data(root):
    from ember.datasets import MNIST1D
    train, test = MNIST1D(root, train=True), MNIST1D(root, train=False)
    return [np.ascontiguousarray(a) for a in (train.data.numpy(), train.targets.numpy(),
                                              test.data.numpy(), test.targets.numpy())]


def accuracy(model, x, y):
    with torch.no_grad():
        return 100.0 * float((model(x).argmax(-1) == y).float().mean().item())


def train(name, data, args):
    torch.manual_seed(args.seed)
    model = build(name)
    x_train, y_train, x_test, y_test = (torch.tensor(a) for a in data)
    optimizer = torch.optim.Adam(model.parameters(), args.lr)
    criterion = nn.CrossEntropyLoss()
    start = time.perf_counter()
    for step in range(args.steps):
        bix = (step * args.batch_size) % len(x_train)
        x, y = x_train[bix:bix + args.batch_size], y_train[bix:bix + args.batch_size]
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    seconds = time.perf_counter() - start
    return {"model": name, "test_acc": accuracy(model, x_test, y_test),
            "train_acc": accuracy(model, x_train, y_train), "final_loss": loss.item(),
            "seconds": seconds, "params": sum(p.numel() for p in model.parameters()),
            "gru": type(model.gru).__name__ if name == "gru" else None}


def run_backend(args):
    _set_blas_threads(1)
    data = load_data(args.data_root)
    results = []
    for name in args.models.split(","):
        r = train(name, data, args)
        results.append(r)
        if not args.json:
            print(f"{args.backend:>5} {name:>8}: test {r['test_acc']:.1f}%  train "
                  f"{r['train_acc']:.1f}%  {r['seconds']:.1f} s  ({r['params']} parameters)",
                  flush=True)
    if args.json:
        print(json.dumps({"backend": args.backend, "results": results}))
    return results


def run_both(args):
    """Each backend in its own process; a Markdown table of the two side by side."""
    by = {}
    for backend in ("ember", "torch"):
        cmd = [sys.executable, os.path.abspath(__file__), "--backend", backend, "--json",
               "--models", args.models, "--steps", str(args.steps), "--lr", str(args.lr),
               "--batch-size", str(args.batch_size), "--seed", str(args.seed),
               "--data-root", args.data_root]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        by[backend] = {r["model"]: r for r in json.loads(out.strip().splitlines()[-1])["results"]}
        print(f"{backend}: done in {sum(r['seconds'] for r in by[backend].values()):.0f} s "
              f"of training", file=sys.stderr, flush=True)
    label = {"logistic": "logistic regression", "mlp": "MLP", "cnn": "CNN", "gru": "GRU"}
    print("| model | paper | ember test acc. | torch test acc. | ember time | torch time |\n"
          "|---|---:|---:|---:|---:|---:|")
    for name in args.models.split(","):
        e, t = by["ember"][name], by["torch"][name]
        print(f"| {label[name]} | {PAPER[name]}% | {e['test_acc']:.1f}% | {t['test_acc']:.1f}% "
              f"| {e['seconds']:.1f} s | {t['seconds']:.1f} s |")
    return by


if __name__ == "__main__":
    if ARGS.backend == "both":
        run_both(ARGS)
    else:
        run_backend(ARGS)
