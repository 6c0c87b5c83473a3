"""The LSTM step of ``training_steps.py`` (LSTM(64->128, batch_first, seq 32, batch 32) +
Linear, cross-entropy, Adam) split into parts, ember beside torch in one process, rounds
alternated:

- ``forward``/``backward``/``adam``: the step's phases (``zero_grad`` + forward + loss,
  ``backward()``, ``opt.step()``), timed inside the same steps;
- ``framework``: the step without the layer -- the head, the loss, autograd and Adam over
  the step's parameters, on a leaf the size of the LSTM's output (the LSTM's parameters
  given gradients of their size, as the backward gives them);
- ``layer_fwd``/``layer_bwd``: ``nn.LSTM`` alone, forward (with a graph) and forward plus
  ``backward`` of a gradient on the last step less the forward;
- ``step``/``compiled``: the whole step timed as one (as ``training_steps.py`` times it),
  and the same step on a second model and optimizer through ``ember.compile(step)``
  (``compile_step.py``'s ``step`` variant; torch: its eager step again, the reference
  both benchmarks divide by). Their ratio, printed last, compares the compiled step with
  eager ember against the same torch runs: ``training_steps_ab.py`` and
  ``compile_step_ab.py`` time torch in separate processes, so their two ratios to torch
  do not compare the compiled step with the eager one.

    python benchmarks/lstm_split.py [--rounds 60] [--no-numba]

One thread each (``OPENBLAS_NUM_THREADS=1`` set here; ``EMBER_MKL=0 ... --no-numba`` is
the default install). Prints the median CPU milliseconds of each part, ember / torch,
and the load average before and after.
"""
import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
if __name__ == "__main__" and "--no-numba" in sys.argv:
    sys.modules["numba"] = None

import numpy as np  # noqa: E402


def _parts(m):
    """``{part: fn(times)}``: each call runs the part once and appends its CPU seconds
    (the step appends its three phases)."""
    nn = m.nn
    m.manual_seed(0)
    lstm = nn.LSTM(64, 128, batch_first=True)
    head = nn.Linear(128, 10)
    params = list(lstm.parameters()) + list(head.parameters())
    opt = m.optim.Adam(params, lr=1e-3)
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((32, 32, 64), dtype=np.float32))
    y = m.tensor(rng.integers(0, 10, 32))
    out0 = m.tensor(rng.standard_normal((32, 32, 128), dtype=np.float32))
    g = m.zeros(32, 32, 128)
    g[:, -1] = m.tensor(rng.standard_normal((32, 128), dtype=np.float32))
    pt = time.process_time

    def step(times):
        t0 = pt()
        opt.zero_grad()
        out, _ = lstm(x)
        loss = m.nn.functional.cross_entropy(head(out[:, -1]), y)
        t1 = pt()
        loss.backward()
        t2 = pt()
        opt.step()
        times["forward"].append(t1 - t0)
        times["backward"].append(t2 - t1)
        times["adam"].append(pt() - t2)

    def framework(times):
        t0 = pt()
        opt.zero_grad()
        o = out0.detach().requires_grad_()
        m.nn.functional.cross_entropy(head(o[:, -1]), y).backward()
        for p in lstm.parameters():
            p.grad = m.ones_like(p)
        opt.step()
        times["framework"].append(pt() - t0)

    def plain():
        opt.zero_grad()
        m.nn.functional.cross_entropy(head(lstm(x)[0][:, -1]), y).backward()
        opt.step()

    def whole(times):
        t0 = pt()
        plain()
        times["step"].append(pt() - t0)

    compiled_step = _second_step(m, x, y)

    def compiled(times):
        t0 = pt()
        compiled_step()
        times["compiled"].append(pt() - t0)

    def layer(times):
        t0 = pt()
        out, _ = lstm(x)
        t1 = pt()
        out.backward(g)
        times["layer_fwd"].append(t1 - t0)
        times["layer_bwd"].append(pt() - t1)
        for p in lstm.parameters():
            p.grad = None
    return [step, framework, layer, whole, compiled]


def _second_step(m, x, y):
    """The step on its own model and optimizer (the same initial values), compiled with
    ``ember.compile`` (torch: eager)."""
    nn = m.nn
    m.manual_seed(0)
    lstm = nn.LSTM(64, 128, batch_first=True)
    head = nn.Linear(128, 10)
    opt = m.optim.Adam(list(lstm.parameters()) + list(head.parameters()), lr=1e-3)

    def step():
        opt.zero_grad()
        loss = m.nn.functional.cross_entropy(head(lstm(x)[0][:, -1]), y)
        loss.backward()
        opt.step()
        return loss
    return step if m.__name__ == "torch" else m.compile(step)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--no-numba", action="store_true")
    args = ap.parse_args()
    import torch

    import ember
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    libs = [ember, torch]
    parts = [_parts(m) for m in libs]
    times = [{k: [] for k in ("forward", "backward", "adam", "framework", "layer_fwd",
                              "layer_bwd", "step", "compiled")} for _ in libs]
    for ps in parts:  # warm-up
        for fn in ps:
            for _ in range(3):
                fn({k: [] for k in times[0]})
    load0 = os.getloadavg()
    for _ in range(args.rounds):
        for k in range(len(parts[0])):
            for ps, t in zip(parts, times):
                ps[k](t)
                ps[k](t)
    print(f"one thread, EMBER_MKL={os.environ.get('EMBER_MKL', 'unset')}"
          f"{', no numba' if args.no_numba else ''}")
    for part in times[0]:
        e, t = (float(np.median(ts[part])) * 1e3 for ts in times)
        print(f"{part:10s} CPU ms ember {e:7.3f} torch {t:7.3f} ember/torch {e / t:.3f}")
    c, s = (float(np.median(times[0][k])) for k in ("compiled", "step"))
    print(f"ember compiled step / eager step {c / s:.3f}")
    print(f"load {' '.join(f'{v:.2f}' for v in load0)} -> "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
