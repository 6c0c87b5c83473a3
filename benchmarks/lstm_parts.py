"""Where the LSTM training step of ``training_steps.py`` spends its time, ember against
torch, at one thread, part by part, the two libraries' steps alternated in one process.

    python benchmarks/lstm_parts.py [--rounds 60] [--no-numba]

Prints the median CPU milliseconds of each part of the step (``zero_grad``, the LSTM's
forward, the head and the loss, ``backward``, the optimizer's step), and, for ember's
default-install path (``--no-numba``, with ``EMBER_MKL=0``), of the padded loop's own
parts: its forward (the input projection within it), its backward (the backward's
step-independent factors within it, per chunk of steps) and the weight gradients. The
load average is printed before and after.
"""
import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
if __name__ == "__main__" and "--no-numba" in sys.argv:
    sys.modules["numba"] = None

import numpy as np  # noqa: E402


def _timed(times, name, fn):
    """``fn`` wrapped to add its CPU time to ``times[name]``."""
    def run(*args, **kwargs):
        c0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            times.setdefault(name, []).append(time.process_time() - c0)
    return run


def _model(lib):
    lstm, head = lib.nn.LSTM(64, 128, batch_first=True), lib.nn.Linear(128, 10)
    opt = lib.optim.Adam(list(lstm.parameters()) + list(head.parameters()), lr=1e-3)
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((32, 32, 64), dtype=np.float32))
    y = lib.tensor(rng.integers(0, 10, 32))
    return lstm, head, opt, x, y


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--no-numba", action="store_true")
    args = ap.parse_args()
    import torch

    import ember
    from ember.ops import rnn, rnn_lstm_padded
    torch.set_num_threads(1)
    times = {}
    for mod, attr, name in ((rnn_lstm_padded, "forward", "padded forward"),
                            (rnn_lstm_padded, "_projection_with_bias", "  input projection"),
                            (rnn_lstm_padded, "backward", "padded backward"),
                            (rnn_lstm_padded, "_factors", "  factors (a chunk)"),
                            (rnn, "_param_grads", "weight gradients"),
                            (rnn_lstm_padded, "gate_major_grads", "weight gradients")):
        if hasattr(mod, attr):
            setattr(mod, attr, _timed(times, "ember " + name, getattr(mod, attr)))
    steps = []
    for lib in (ember, torch):
        lstm, head, opt, x, y = _model(lib)
        tag = lib.__name__

        def step(lib=lib, lstm=lstm, head=head, opt=opt, x=x, y=y, tag=tag):
            _timed(times, f"{tag} zero_grad", opt.zero_grad)()
            out = _timed(times, f"{tag} LSTM forward", lambda: lstm(x)[0])()
            loss = _timed(times, f"{tag} head and loss", lambda: lib.nn.functional.cross_entropy(
                head(out[:, -1]), y))()
            _timed(times, f"{tag} backward", loss.backward)()
            _timed(times, f"{tag} optimizer", opt.step)()
        steps.append((tag, step))
    for _, step in steps:  # warm up
        for _ in range(5):
            step()
    times.clear()
    load0 = os.getloadavg()
    for _ in range(args.rounds):
        for tag, step in steps:
            _timed(times, f"{tag} step", step)()
    print(f"one thread, EMBER_MKL={os.environ.get('EMBER_MKL', 'unset')}"
          f"{', no numba' if args.no_numba else ''}; load "
          f"{' '.join(f'{v:.2f}' for v in load0)} -> "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for name in sorted(times):
        print(f"{name:34s} {np.median(times[name]) * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
