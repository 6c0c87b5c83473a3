"""The fixed cost of ``training_steps.py``'s LSTM and Transformer steps: each step's
phases (``zero_grad`` + forward + loss, ``backward()``, ``opt.step()``) at the
benchmark's shapes and at tiny ones (where the arithmetic is nothing and what is left is
Python and dispatch), and the Transformer layer's ops called alone on tiny inputs;
ember and torch alternated in one process, CPU time, one thread.

    python benchmarks/step_fixed_cost.py [--rounds 40] [--no-numba]
    python benchmarks/step_fixed_cost.py --before /tmp/before [--only lstm]

``EMBER_MKL=0 ... --no-numba`` is the default install. Prints microseconds (medians),
ember / torch, and the load average. With ``--before``, an older tree's steps are
alternated with this tree's and torch's (``nn_ops_ab.py``'s loading) and the steps'
after / before printed too (the ops on tiny inputs are then not timed).
"""
import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
if __name__ == "__main__" and "--no-numba" in sys.argv:
    sys.modules["numba"] = None

import numpy as np  # noqa: E402

# (name, shape): the LSTM's (batch, steps, input, hidden), the Transformer's (batch,
# tokens); the first of each is training_steps.py's
SHAPES = [("lstm", (32, 32, 64, 128)), ("lstm", (1, 32, 1, 1)),
          ("transformer", (16, 64)), ("transformer", (1, 2))]


def _step(m, name, shape):
    """A step that appends its phases' CPU seconds to a list."""
    m.manual_seed(0)
    rng = np.random.default_rng(0)
    if name == "lstm":
        B, T, In, H = shape
        lstm, head = m.nn.LSTM(In, H, batch_first=True), m.nn.Linear(H, 10)
        params = list(lstm.parameters()) + list(head.parameters())
        x = m.tensor(rng.standard_normal((B, T, In), dtype=np.float32))
        y = m.tensor(rng.integers(0, 10, B))

        def loss():
            out, _ = lstm(x)
            return m.nn.functional.cross_entropy(head(out[:, -1]), y)
    else:
        layer = m.nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, dropout=0.0,
                                             batch_first=True)
        params = list(layer.parameters())
        x = m.tensor(rng.standard_normal(shape + (128,), dtype=np.float32))
        target = m.tensor(rng.standard_normal(shape + (128,), dtype=np.float32))

        def loss():
            return m.nn.functional.mse_loss(layer(x), target)
    opt = m.optim.Adam(params, lr=1e-3)
    pt = time.process_time

    def step(times):
        t0 = pt()
        opt.zero_grad()
        v = loss()
        t1 = pt()
        v.backward()
        t2 = pt()
        opt.step()
        times.append((t1 - t0, t2 - t1, pt() - t2))
    return step


def _ops(m):
    """The Transformer layer's ops on tiny inputs (1 x 2 tokens, 128 features)."""
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((1, 2, 128), dtype=np.float32), requires_grad=True)
    q = m.tensor(rng.standard_normal((1, 4, 2, 32), dtype=np.float32), requires_grad=True)
    ln, lin, F = m.nn.LayerNorm(128), m.nn.Linear(128, 128), m.nn.functional
    return {"layer_norm": lambda: ln(x), "linear": lambda: lin(x),
            "view": lambda: x.view(2, 4, 32), "transpose": lambda: x.transpose(0, 1),
            "add": lambda: x + x, "relu": lambda: F.relu(x),
            "sdpa": lambda: F.scaled_dot_product_attention(q, q, q),
            "mse_loss": lambda: F.mse_loss(x, x.detach())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--no-numba", action="store_true")
    ap.add_argument("--before", help="root of an older ember tree to compare with")
    ap.add_argument("--only", default="lstm,transformer")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    if args.before:
        _ab(args, torch)
        return

    import ember
    ember.set_num_threads(1)
    load0 = os.getloadavg()
    print(f"one thread, EMBER_MKL={os.environ.get('EMBER_MKL', 'unset')}"
          f"{', no numba' if args.no_numba else ''}; us, medians (ember / torch)")
    for name, shape in SHAPES:
        if name not in args.only.split(","):
            continue
        steps = [_step(m, name, shape) for m in (ember, torch)]
        times = [[], []]
        for s in steps:
            for _ in range(5):
                s([])
        for _ in range(args.rounds):
            for s, t in zip(steps, times):
                for _ in range(3):
                    s(t)
        e, t = (np.median(np.array(v), 0) * 1e6 for v in times)
        parts = ", ".join(f"{p} {a:.0f} / {b:.0f}" for p, a, b in
                          zip(("forward", "backward", "adam"), e, t))
        print(f"{name:11s} {str(shape):16s} {parts}; step {e.sum():.0f} / {t.sum():.0f} "
              f"= {e.sum() / t.sum():.3f}")
    ops = [_ops(m) for m in (ember, torch)]
    res = {k: ([], []) for k in ops[0]}
    for _ in range(max(args.rounds // 4, 3)):
        for k in res:
            for o, acc in zip(ops, res[k]):
                f = o[k]
                t0 = time.process_time()
                for _ in range(200):
                    f()
                acc.append((time.process_time() - t0) / 200 * 1e6)
    print("ops on 1 x 2 x 128: " + ", ".join(
        f"{k} {np.median(a):.1f} / {np.median(b):.1f}" for k, (a, b) in res.items()))
    print(f"load {' '.join(f'{v:.2f}' for v in load0)} -> "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


def _ab(args, torch):
    """The steps of ``args.before``'s tree, this tree's and torch's, alternated."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    from nn_ops_ab import _load, _use
    libs = [_load(args.before), _load(os.path.dirname(here)), (torch, None)]
    load0 = os.getloadavg()
    print(f"one thread, EMBER_MKL={os.environ.get('EMBER_MKL', 'unset')}"
          f"{', no numba' if args.no_numba else ''}; us, medians (before / after / torch)")
    for name, shape in SHAPES:
        if name not in args.only.split(","):
            continue
        steps = []
        for m, mods in libs:
            _use(mods)
            steps.append((_step(m, name, shape), mods))
        times = [[] for _ in libs]
        for r in range(args.rounds + 1):
            for (s, mods), t in zip(steps, times):
                _use(mods)
                s([])  # the first call after the swap pays for it
                for _ in range(3):
                    s(t if r else [])
        b, a, t = (np.median(np.array(v), 0) * 1e6 for v in times)
        parts = ", ".join(f"{p} {x:.0f} / {y:.0f} / {z:.0f}" for p, x, y, z in
                          zip(("forward", "backward", "adam"), b, a, t))
        print(f"{name:11s} {str(shape):16s} {parts}; step {b.sum():.0f} / {a.sum():.0f} / "
              f"{t.sum():.0f}: after/before {a.sum() / b.sum():.3f}, after/torch "
              f"{a.sum() / t.sum():.3f}")
    print(f"load {' '.join(f'{v:.2f}' for v in load0)} -> "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
