"""Inference through loaded TorchScript archives: eager ember vs ember.jit.load vs torch.jit.load.

Each zoo model is built in torch, captured (trace, or script where it has control flow
or TransformerEncoder's checks), saved with ``torch.jit.save``, and loaded by both
``ember.jit.load`` and ``torch.jit.load``; the eager ember model is the same class
written against ember with torch's weights. One forward pass under ``no_grad`` is
timed (median CPU time of ``--repeat`` alternating rounds) at batch 1 and 64. Ratios:
loaded ember / eager ember (target <= 1.0) and loaded ember / loaded torch (target
<= 1.2 at batch 64).

    python benchmarks/jit_inference.py [--threads 1] [--repeat 30]
"""
import argparse
import os
import sys
import tempfile
import time

if __name__ == "__main__" and "--threads" in sys.argv:
    # OpenBLAS reads its thread count when NumPy is first imported
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import numpy as np  # noqa: E402


def make_zoo(lib):
    """The zoo's classes written once against ``lib`` (torch or ember)."""
    nn, F = lib.nn, lib.nn.functional

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2, self.l3 = nn.Linear(64, 256), nn.Linear(256, 256), \
                nn.Linear(256, 10)

        def forward(self, x):
            return self.l3(F.relu(self.l2(F.relu(self.l1(x)))))

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
            self.c2, self.b2 = nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32)
            self.pool, self.drop = nn.MaxPool2d(2), nn.Dropout(0.5)
            self.fc = nn.Linear(32 * 8 * 8, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.b1(self.c1(x))))
            x = self.pool(F.relu(self.b2(self.c2(x))))
            return self.fc(self.drop(lib.flatten(x, 1)))

    class Block(nn.Module):
        def __init__(self, c=32):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
            self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

        def forward(self, x):
            y = F.relu(self.b1(self.c1(x)))
            return F.relu(x + self.b2(self.c2(y)))

    class LSTMLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(1000, 64)
            self.rnn = nn.LSTM(64, 128, num_layers=2, batch_first=True)
            self.out = nn.Linear(128, 1000)

        def forward(self, x):
            h, _ = self.rnn(self.emb(x))
            return self.out(h)

    class GRULM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(1000, 64)
            self.rnn = nn.GRU(64, 128, batch_first=True)
            self.out = nn.Linear(128, 1000)

        def forward(self, x):
            h, _ = self.rnn(self.emb(x))
            return self.out(h)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

        def forward(self, x, mask):
            return self.enc(x, src_key_padding_mask=mask)

    return {"mlp": MLP, "cnn": CNN, "resblock": Block, "lstm": LSTMLM, "gru": GRULM,
            "encoder": Encoder}


def make_inputs(name, n, rng):
    if name == "mlp":
        return [rng.standard_normal((n, 64), dtype=np.float32)]
    if name == "cnn":
        return [rng.standard_normal((n, 3, 32, 32), dtype=np.float32)]
    if name == "resblock":
        return [rng.standard_normal((n, 32, 16, 16), dtype=np.float32)]
    if name in ("lstm", "gru"):
        return [rng.integers(0, 1000, (n, 16))]
    mask = np.zeros((n, 16), dtype=bool)
    mask[n // 2:, 12:] = True
    return [rng.standard_normal((n, 16, 64), dtype=np.float32), mask]


def timed(runs, repeat):
    """Median process (CPU) ms of each ``(model, inputs)``, rounds alternating between them
    (steadier than wall time on a shared machine; with one thread CPU time is the cost)."""
    for model, inputs in runs:
        model(*inputs)
    times = [[] for _ in runs]
    for _ in range(repeat):
        for k, (model, inputs) in enumerate(runs):
            t0 = time.process_time()
            model(*inputs)
            times[k].append(time.process_time() - t0)
    return [float(np.median(t)) * 1e3 for t in times]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=None,
                    help="torch and OpenBLAS threads (default: the libraries' own)")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--models", default="mlp,cnn,resblock,lstm,gru,encoder")
    args = ap.parse_args()
    import torch

    import ember
    if args.threads:
        torch.set_num_threads(args.threads)
    tz, ez = make_zoo(torch), make_zoo(ember)
    rng = np.random.default_rng(0)
    print(f"{'model':<10}{'batch':>6}{'eager ms':>10}{'loaded ms':>11}{'torch ms':>10}"
          f"{'ld/eager':>10}{'ld/torch':>10}")
    with tempfile.TemporaryDirectory() as d:
        for name in args.models.split(","):
            torch.manual_seed(0)
            tm = tz[name]().eval()
            em = ez[name]().eval()
            em.load_state_dict({k: ember.from_numpy(v.detach().numpy().copy())
                                for k, v in tm.state_dict().items()})
            example = [torch.from_numpy(a) for a in make_inputs(name, 2, rng)]
            if name == "encoder":
                captured = torch.jit.script(tm)
            else:
                captured = torch.jit.trace(tm, tuple(example), check_trace=False)
            path = os.path.join(d, f"{name}.pt")
            torch.jit.save(captured, path)
            tl, el = torch.jit.load(path), ember.jit.load(path)
            for n in (1, 64):
                arrays = make_inputs(name, n, rng)
                ti = [torch.from_numpy(a) for a in arrays]
                ei = [ember.from_numpy(a) for a in arrays]
                with torch.no_grad(), ember.no_grad():
                    np.testing.assert_allclose(el(*ei).numpy(), tl(*ti).numpy(), rtol=1e-3,
                                               atol=1e-4)
                    te, tle, tt = timed([(em, ei), (el, ei), (tl, ti)], args.repeat)
                print(f"{name:<10}{n:>6}{te:>10.3f}{tle:>11.3f}{tt:>10.3f}{tle / te:>10.2f}"
                      f"{tle / tt:>10.2f}")


if __name__ == "__main__":
    main()
