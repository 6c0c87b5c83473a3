"""Where the MLP training step's time goes, phase by phase, for an older ember tree,
this one and torch in one process (rounds alternated), beside the step's matrix
products alone (NumPy's and torch's).

    python benchmarks/mlp_step_phases.py /tmp/before [--rounds 20] [--no-numba]

The step is ``training_steps.py``'s ``mlp`` (784-256-128-10, batch 128, SGD momentum,
cross entropy). Each step is split into zero_grad, forward, loss, backward and the
optimizer's step, timed with ``time.process_time`` (one thread; ``OPENBLAS_NUM_THREADS=1``
set here); printed are the medians over rounds of 20 steps, in CPU microseconds, and
the eight products of a step (three forward, five backward) timed alone the same way,
so that "phase minus products" is the non-product time of forward and backward.
``--no-numba`` hides numba from both trees (the default install's NumPy paths; with
``EMBER_MKL=0`` that is NumPy only).
"""
import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
if __name__ == "__main__" and "--no-numba" in sys.argv:
    sys.modules["numba"] = None

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
_pt = time.process_time


def _step(m):
    """The MLP step of library ``m`` and the array its phase times add into."""
    nn = m.nn
    m.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    opt = m.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((128, 784), dtype=np.float32))
    y = m.tensor(rng.integers(0, 10, 128))
    loss_fn = nn.CrossEntropyLoss()
    acc = np.zeros(5)

    def step():
        t0 = _pt()
        opt.zero_grad()
        t1 = _pt()
        out = model(x)
        t2 = _pt()
        loss = loss_fn(out, y)
        t3 = _pt()
        loss.backward()
        t4 = _pt()
        opt.step()
        t5 = _pt()
        acc[:] += (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)
    return step, acc


def _products(torch):
    """The step's products alone: NumPy's (OpenBLAS) and torch's, forward and backward."""
    rng = np.random.default_rng(1)
    f = lambda *s: rng.standard_normal(s, dtype=np.float32)  # noqa: E731
    x, w1, w2, w3 = f(128, 784), f(256, 784), f(128, 256), f(10, 128)
    h1, h2, g1, g2, g3 = f(128, 256), f(128, 128), f(128, 256), f(128, 128), f(128, 10)
    t = {k: torch.from_numpy(v) for k, v in dict(x=x, w1=w1, w2=w2, w3=w3, h1=h1, h2=h2,
                                                   g1=g1, g2=g2, g3=g3).items()}
    acc = np.zeros(4)

    def run():
        a = _pt()
        x @ w1.T, h1 @ w2.T, h2 @ w3.T
        b = _pt()
        g1.T @ x, g2.T @ h1, g2 @ w2, g3.T @ h2, g3 @ w3
        c = _pt()
        t["x"].mm(t["w1"].t()), t["h1"].mm(t["w2"].t()), t["h2"].mm(t["w3"].t())
        d = _pt()
        (t["g1"].t().mm(t["x"]), t["g2"].t().mm(t["h1"]), t["g2"].mm(t["w2"]),
         t["g3"].t().mm(t["h2"]), t["g3"].mm(t["w3"]))
        e = _pt()
        acc[:] += (b - a, c - b, d - c, e - d)
    return run, acc


def main():
    sys.path.insert(0, HERE)
    from nn_ops_ab import _load, _use
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--no-numba", action="store_true")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    before, bmods = _load(args.before)
    after, amods = _load(ROOT)
    libs = [("before", before, bmods), ("after", after, amods), ("torch", torch, None)]
    steps = []
    for name, m, mods in libs:
        _use(mods)
        steps.append((name, mods) + _step(m))
    prods, pacc = _products(torch)
    for _, mods, step, _acc in steps:  # warm up
        _use(mods)
        for _ in range(10):
            step()
    load0 = os.getloadavg()
    res = {name: [] for name, *_ in steps}
    pres = []
    for _ in range(args.rounds):
        for name, mods, step, acc in steps:
            _use(mods)
            acc[:] = 0
            for _ in range(20):
                step()
            res[name].append(acc / 20 * 1e6)
        pacc[:] = 0
        for _ in range(20):
            prods()
        pres.append(pacc / 20 * 1e6)
    print(f"one thread, EMBER_MKL={os.environ.get('EMBER_MKL', 'unset')}"
          f"{', no numba' if args.no_numba else ''}; CPU us per step, medians of "
          f"{args.rounds} rounds")
    print(f"{'':8s} {'zero_grad':>9s} {'forward':>8s} {'loss':>7s} {'backward':>8s} "
          f"{'step':>7s} {'total':>8s}")
    for name, *_ in steps:
        med = np.median(np.array(res[name]), axis=0)
        print(f"{name:8s} " + " ".join(f"{v:{w}.1f}" for v, w in zip(med, (9, 8, 7, 8, 7)))
              + f" {med.sum():8.1f}")
    p = np.median(np.array(pres), axis=0)
    print(f"products alone: NumPy forward {p[0]:.1f} backward {p[1]:.1f}; "
          f"torch forward {p[2]:.1f} backward {p[3]:.1f}")
    print(f"load {' '.join(f'{v:.2f}' for v in load0)} -> "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
