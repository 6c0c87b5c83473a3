"""The default install's padded LSTM loop (``ember/ops/rnn_lstm_padded.py``) of an older
ember tree against this one's, forward and backward alternated in one process, at the
LSTM step's shape and a tiny one (where what is left is the per-step dispatch); checks
that both give the same bits.

    python benchmarks/lstm_padded_ab.py /tmp/before [--after /tmp/other] [--rounds 40]

One thread (``OPENBLAS_NUM_THREADS=1`` set here). Each tree's module file is loaded on
its own (the rest of ember is this tree's). Prints median CPU microseconds of each part,
after / before (medians, and the best times' ratio), and the load average.
"""
import argparse
import importlib.util
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# (T, B, I, H): training_steps.py's LSTM, a tiny one, and an odd one
SHAPES = [(32, 32, 64, 128), (32, 1, 1, 1), (19, 3, 5, 7)]


def _module(root, name):
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(root, "ember", "ops", "rnn_lstm_padded.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _inputs(shape, seed=0):
    T, B, I, H = shape
    rng = np.random.default_rng(seed)
    f = np.float32
    x = rng.standard_normal((T * B, I), dtype=f)
    w_ih = rng.standard_normal((4 * H, I), dtype=f) * 0.1
    w_hh = rng.standard_normal((4 * H, H), dtype=f) * 0.1
    bias = rng.standard_normal(4 * H, dtype=f) * 0.1
    h0 = np.zeros((B, H), f)
    c0 = np.zeros((B, H), f)
    gy = rng.standard_normal((T * B, H), dtype=f)
    ghn = np.zeros((B, H), f)
    return x, w_ih, bias, h0, c0, w_hh, gy, ghn


def _run(mod, args, shape, reverse, times=None):
    from ember.ops import rnn
    x, w_ih, bias, h0, c0, w_hh, gy, ghn = args
    T, B, I, H = shape
    nc = rnn._blocks(np, x, h0, w_hh, B, 4 * H, H)
    pt = time.process_time
    t0 = pt()
    y, hn, cn, acts = mod.forward(x, w_ih, bias, h0, c0, w_hh, T, reverse, nc)
    t1 = pt()
    nb = rnn._blocks(np, acts.S, acts.TC, w_hh, B, H, 4 * H)
    dG, dh0, dc0 = mod.backward(gy, ghn, None, acts, w_hh, nb, True)
    t2 = pt()
    if times is not None:
        times.append((t1 - t0, t2 - t1))
    return [y, hn, cn, dG, dh0, dc0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--after", default=ROOT, help="root of the newer tree (this one)")
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    mods = [_module(args.before, "padded_before"), _module(args.after, "padded_after")]
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for shape in SHAPES:
        inputs = _inputs(shape)
        for reverse in (False, True):
            outs = [_run(m, inputs, shape, reverse) for m in mods]
            same = all(np.array_equal(a.view(np.int32), b.view(np.int32))
                       for a, b in zip(*outs))
            if reverse:
                print(f"{shape} reverse: same bits {same}")
                continue
            times = [[], []]
            for _ in range(args.rounds):
                for m, t in zip(mods, times):
                    _run(m, inputs, shape, reverse, t)
            med = [np.median(np.array(t), axis=0) * 1e6 for t in times]
            best = [np.min(np.array(t), axis=0) * 1e6 for t in times]
            print(f"{shape}: same bits {same}; forward {med[0][0]:.1f} -> {med[1][0]:.1f} us"
                  f" ({med[1][0] / med[0][0]:.3f}; best {best[1][0] / best[0][0]:.3f}), "
                  f"backward {med[0][1]:.1f} -> {med[1][1]:.1f} us "
                  f"({med[1][1] / med[0][1]:.3f}; best {best[1][1] / best[0][1]:.3f})")
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
