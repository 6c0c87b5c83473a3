"""Two small kernels of a compiled training step, each against the NumPy calls it
replaces, alternated in one process (CPU time, one thread).

    python benchmarks/compile_small_kernels.py [--rounds 3]

- ReLU written over a product's output (``_fused.act_over``, numba) against eager's
  ``_relu_array`` in place (NumPy's ``maximum`` against a block of zeros), at the MLP's
  128x256 and the Transformer's 1024x256 float32;
- the cross-entropy pair's joined backward after ``exp`` (``_xent._pair_kernel``)
  against its NumPy branch (``multiply``, a gather, ``subtract``, a scatter), 128 rows
  of 10 classes.

Prints microseconds per call (median of rounds), the ratio and the load average.
Needs numba (the ``ember[compile]`` extra).
"""
import argparse
import os
import time

import numpy as np


def _time(fn, n):
    for _ in range(50):
        fn()
    laps = []
    for _ in range(9):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        laps.append((time.process_time() - t0) / n * 1e6)
    return float(np.median(laps))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from ember._compile import _fused, _xent
    from ember.ops import activations
    over = _fused.act_over(activations.Relu)
    pair = _xent._pair_kernel()
    if over is None or pair is None:
        raise SystemExit("numba is not installed")
    rng = np.random.default_rng(0)
    print(f"load {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for shape in [(128, 256), (1024, 256)]:
        y = rng.standard_normal(shape, dtype=np.float32)
        n = 2000 if shape[0] == 128 else 200
        for _ in range(args.rounds):
            a = _time(lambda y=y: activations._relu_array(y, out=y), n)
            b = _time(lambda y=y: over(y), n)
            print(f"relu over {shape[0]}x{shape[1]}: numpy {a:.2f} us, loop {b:.2f} us, "
                  f"loop/numpy {b / a:.3f}")
    scores = np.log(rng.random((128, 10)).astype(np.float32))
    t = rng.integers(0, 10, 128)
    g = np.asarray(1.0, np.float32)
    v = np.float32(-1 / 128) * g
    rows = np.arange(128)
    zero = np.float32(0)

    def numpy_branch():
        r = np.exp(scores)
        np.multiply(r, v, out=r)
        on = r[rows, t]
        np.subtract(zero * g, r, out=r)
        r[rows, t] = v - on

    def loop():
        r = np.exp(scores)
        pair(r, t, v, zero * g)
    for _ in range(args.rounds):
        a, b = _time(numpy_branch, 5000), _time(loop, 5000)
        print(f"cross-entropy backward 128x10: numpy {a:.2f} us, loop {b:.2f} us, "
              f"loop/numpy {b / a:.3f}")
    print(f"load {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
