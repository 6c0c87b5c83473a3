"""Per-sample gradients of a small CNN (the torch.func tutorial's model on MNIST-shaped
input, batch 64): ember's vmap(grad) and ember's Python loop of single-sample grads,
beside torch.func's vmap(grad), in one run.  The three are timed in interleaved rounds
(torch, ember vmap, ember loop, torch, ...) and the best of each is kept, so that a shared
machine's load falls on all three alike; the load average is printed with the figures.

    python benchmarks/func.py [--batch 64] [--repeat 3]
"""
import argparse
import os
import time
import warnings

import numpy as np


def model(T):
    class CNN(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = T.nn.Conv2d(1, 32, 3, 1)
            self.conv2 = T.nn.Conv2d(32, 64, 3, 1)
            self.fc1 = T.nn.Linear(9216, 128)
            self.fc2 = T.nn.Linear(128, 10)

        def forward(self, x):
            F = T.nn.functional
            x = F.relu(self.conv1(x))
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = F.relu(self.fc1(T.flatten(x, 1)))
            return F.log_softmax(self.fc2(x), dim=1)
    return CNN()


def interleaved(fns, repeat):
    """Best time (ms) of each function over ``repeat`` rounds that run them in turn."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return [b * 1e3 for b in best]


def setup(T, func, x, y, sd=None):
    m = model(T)
    if sd is not None:
        m.load_state_dict({k: T.tensor(v) for k, v in sd.items()})
    params = {k: v.detach() for k, v in m.named_parameters()}

    def loss(p, xi, yi):
        out = func.functional_call(m, p, (xi.unsqueeze(0),))
        return T.nn.functional.nll_loss(out, yi.unsqueeze(0))

    xs, ys = T.tensor(x), T.tensor(y)
    vmapped = lambda: func.vmap(func.grad(loss), in_dims=(None, 0, 0))(params, xs, ys)  # noqa
    loop = lambda: [func.grad(loss)(params, xs[i], ys[i]) for i in range(len(xs))]  # noqa
    return m, vmapped, loop


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    import torch

    import ember
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((a.batch, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, a.batch)
    tm, t_vmap, _ = setup(torch, torch.func, x, y)
    sd = {k: v.detach().numpy().copy() for k, v in tm.state_dict().items()}
    _, e_vmap, e_loop = setup(ember, ember.func, x, y, sd)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tg, eg = t_vmap(), e_vmap()
        err = max(float(np.abs(eg[k].numpy() - tg[k].numpy()).max()) for k in tg)
        load0 = os.getloadavg()[0]
        t_ms, ev_ms, el_ms = interleaved([t_vmap, e_vmap, e_loop], a.repeat)
        load1 = os.getloadavg()[0]
    print(f"per-sample grads, CNN, batch {a.batch} (max |ember - torch| = {err:.2e}); "
          f"load average {load0:.1f} -> {load1:.1f} on {os.cpu_count()} cores, "
          f"best of {a.repeat} interleaved rounds")
    print(f"  torch.func vmap(grad): {t_ms:9.1f} ms")
    print(f"  ember vmap(grad):      {ev_ms:9.1f} ms  ({ev_ms / t_ms:.1f}x torch.func)")
    print(f"  ember loop of grad:    {el_ms:9.1f} ms  ({el_ms / t_ms:.1f}x torch.func, "
          f"vmap is {el_ms / ev_ms:.2f}x faster than the loop)")


if __name__ == "__main__":
    main()
