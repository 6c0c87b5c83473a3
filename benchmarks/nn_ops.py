"""Single layers, forward + backward, ember beside torch in one process.

    OPENBLAS_NUM_THREADS=1 python benchmarks/nn_ops.py --threads 1 [--only conv3x3,ln]
                                                      [--min-time S] [--forward]

Each workload builds one layer on both libraries from the same seeded inputs (input and
parameters require grad), then times ``y = layer(x); y.backward(gy)``. Rounds of ember
and torch alternate, so load from other processes hits both alike; the figures are the
median process (CPU) milliseconds per call, the ember/torch ratio of those, and the
ratio of median wall times. ``--threads 1`` (with ``OPENBLAS_NUM_THREADS=1``, set here
before NumPy is imported) is the steady comparison on a shared machine. ``--forward``
times the forward pass alone (under ``no_grad``).
"""
import argparse
import os
import sys
import time

if __name__ == "__main__" and "--threads" in sys.argv:
    # OpenBLAS reads its thread count when NumPy is first imported
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import numpy as np  # noqa: E402


def _conv(cin, cout, k, shape, **kw):
    return lambda m: m.nn.Conv2d(cin, cout, k, **kw), shape


# name: (layer factory taking the module namespace, input shape, description)
WORKLOADS = {
    "conv3x3": (*_conv(64, 64, 3, (8, 64, 32, 32), padding=1),
                "Conv2d(64, 64, 3, padding=1), x 8x64x32x32"),
    "conv_dw": (*_conv(64, 64, 3, (8, 64, 32, 32), padding=1, groups=64),
                "Conv2d(64, 64, 3, padding=1, groups=64), x 8x64x32x32"),
    "conv_s2": (*_conv(64, 128, 3, (8, 64, 32, 32), padding=1, stride=2),
                "Conv2d(64, 128, 3, padding=1, stride=2), x 8x64x32x32"),
    "conv1x1": (*_conv(64, 128, 1, (8, 64, 32, 32)), "Conv2d(64, 128, 1), x 8x64x32x32"),
    "cnn_conv1": (*_conv(1, 32, 3, (64, 1, 28, 28)), "Conv2d(1, 32, 3), x 64x1x28x28"),
    "cnn_conv2": (*_conv(32, 64, 3, (64, 32, 13, 13)), "Conv2d(32, 64, 3), x 64x32x13x13"),
    "maxpool2": (lambda m: m.nn.MaxPool2d(2), (64, 32, 26, 26), "MaxPool2d(2), x 64x32x26x26"),
    # the CNN step's other layers, at its shapes
    "cnn_relu1": (lambda m: m.nn.ReLU(), (64, 32, 26, 26), "ReLU, x 64x32x26x26"),
    "cnn_relu2": (lambda m: m.nn.ReLU(), (64, 64, 11, 11), "ReLU, x 64x64x11x11"),
    "cnn_pool2": (lambda m: m.nn.MaxPool2d(2), (64, 64, 11, 11), "MaxPool2d(2), x 64x64x11x11"),
    "maxpool3s2": (lambda m: m.nn.MaxPool2d(3, 2, 1), (8, 64, 32, 32),
                   "MaxPool2d(3, 2, padding=1), x 8x64x32x32"),
    "avgpool2": (lambda m: m.nn.AvgPool2d(2), (8, 64, 32, 32), "AvgPool2d(2), x 8x64x32x32"),
    "upsample2": (lambda m: m.nn.Upsample(scale_factor=2, mode="bilinear"), (8, 64, 16, 16),
                  "Upsample(x2, bilinear), x 8x64x16x16"),
    "ln": (lambda m: m.nn.LayerNorm(512), (16, 128, 512), "LayerNorm(512), x 16x128x512"),
    "bn2d": (lambda m: m.nn.BatchNorm2d(64), (8, 64, 32, 32), "BatchNorm2d(64), x 8x64x32x32"),
    "bn2d_eval": (lambda m: m.nn.BatchNorm2d(64).eval(), (32, 64, 32, 32),
                  "BatchNorm2d(64) in eval mode, x 32x64x32x32"),
    "bn2d_eval_small": (lambda m: m.nn.BatchNorm2d(256).eval(), (8, 256, 8, 8),
                        "BatchNorm2d(256) in eval mode, x 8x256x8x8"),
    "bn1d": (lambda m: m.nn.BatchNorm1d(128), (64, 128), "BatchNorm1d(128), x 64x128"),
    "bn1d_eval": (lambda m: m.nn.BatchNorm1d(512).eval(), (256, 512),
                  "BatchNorm1d(512) in eval mode, x 256x512"),
    "gn": (lambda m: m.nn.GroupNorm(8, 64), (8, 64, 32, 32), "GroupNorm(8, 64), x 8x64x32x32"),
    # the Transformer step's layers (training_steps.py), at its shapes and at 1 x 2 tokens
    "ln_step": (lambda m: m.nn.LayerNorm(128), (16, 64, 128), "LayerNorm(128), x 16x64x128"),
    "ln_tiny": (lambda m: m.nn.LayerNorm(128), (1, 2, 128), "LayerNorm(128), x 1x2x128"),
    "linear_step": (lambda m: m.nn.Linear(128, 384), (16, 64, 128),
                    "Linear(128, 384), x 16x64x128"),
    "linear_tiny": (lambda m: m.nn.Linear(128, 128), (1, 2, 128), "Linear(128, 128), x 1x2x128"),
    "encoder_step": (lambda m: _encoder_layer(m), (16, 64, 128),
                     "TransformerEncoderLayer(128, 4, 256), x 16x64x128"),
    "encoder_tiny": (lambda m: _encoder_layer(m), (1, 2, 128),
                     "TransformerEncoderLayer(128, 4, 256), x 1x2x128"),
}


def _encoder_layer(m):
    return m.nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, dropout=0.0,
                                        batch_first=True)


def make(m, name, forward_only):
    factory, shape, _ = WORKLOADS[name]
    return layer_step(m, factory, shape, forward_only)


def layer_step(m, factory, shape, forward_only, grad_in=True):
    """One call of the layer ``factory(m)`` on a fixed input of ``shape``: its forward
    under no_grad (``forward_only``), or its forward and backward from a fixed output
    gradient (``grad_in``: the input takes a gradient too)."""
    m.manual_seed(0)
    layer = factory(m)
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal(shape, dtype=np.float32), requires_grad=grad_in)
    if forward_only:
        def step():
            with m.no_grad():
                layer(x)
        return step
    with m.no_grad():
        out_shape = tuple(layer(x).shape)
    gy = m.tensor(rng.standard_normal(out_shape, dtype=np.float32))

    def step():
        x.grad = None
        for p in layer.parameters():
            p.grad = None
        layer(x).backward(gy)
    return step


def time_pair(steps, min_time, warmup=2, per_round=3):
    """Interleaved rounds of each step; median (wall, CPU) milliseconds per call."""
    for step in steps:
        for _ in range(warmup):
            step()
    wall = [[] for _ in steps]
    cpu = [[] for _ in steps]
    start = time.perf_counter()
    while time.perf_counter() - start < min_time * len(steps) or len(wall[0]) < 5:
        for i, step in enumerate(steps):
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(per_round):
                step()
            wall[i].append((time.perf_counter() - t0) / per_round)
            cpu[i].append((time.process_time() - c0) / per_round)
    return ([float(np.median(w)) * 1e3 for w in wall],
            [float(np.median(c)) * 1e3 for c in cpu])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--min-time", type=float, default=1.5,
                    help="seconds of timed rounds per library and workload")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch and OpenBLAS threads (default: the libraries' own)")
    ap.add_argument("--forward", action="store_true", help="forward only, under no_grad")
    args = ap.parse_args()
    import torch

    import ember
    import ember.nn  # noqa: F401
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}, "
          f"torch threads {torch.get_num_threads()}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, "
          f"{'forward' if args.forward else 'forward+backward'}, float32")
    print(f"{'workload':<12}{'ember cpu':>10}{'torch cpu':>10}{'cpu ratio':>10}"
          f"{'wall ratio':>11}  layer")
    for name in args.only.split(","):
        steps = [make(ember, name, args.forward), make(torch, name, args.forward)]
        (ew, tw), (ec, tc) = time_pair(steps, args.min_time)
        print(f"{name:<12}{ec:>10.2f}{tc:>10.2f}{ec / tc:>10.2f}{ew / tw:>11.2f}  "
              f"{WORKLOADS[name][2]}", flush=True)


if __name__ == "__main__":
    main()
