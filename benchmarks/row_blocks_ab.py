"""Row blocks at two ember threads, on and off in one process, rounds alternated: the
splits whose bits were measured for the Intel AVX-512 Xeon's libraries (float32 products
on OpenBLAS's SkylakeX kernels past the small-matrix kernel's size,
``blas_kernels.ROW_GRAIN``; the LSTM's sequence kernels over blocks of the batch on
NumPy's OpenBLAS and on MKL, ``rnn_lstm_seq``).

    python benchmarks/row_blocks_ab.py [--only products,mlp_infer,lstm] [--rounds N]

"off" is the route before those splits: the product whole at one BLAS thread, the
LSTM's batch as one block. Both give the same bits (asserted here once per workload).
Prints median wall and process-CPU time per call of each and off/on, and the load
average: on a loaded machine the wall figures measure the scheduler as much as the
split (read the load).
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import ember  # noqa: E402
from ember.backend import blas_kernels, gemm  # noqa: E402
from ember.backend import threads as T  # noqa: E402
from ember.ops import rnn_lstm_seq  # noqa: E402

_SPLIT_GRAINS = dict(blas_kernels.ROW_GRAIN)
_COLUMN_GRAINS = dict(blas_kernels.COLUMN_GRAIN)
_SEQ_BLOCKS = rnn_lstm_seq._row_blocks


def _route(on):
    """Row blocks as this tree has them (``on``) or as before them (``off``)."""
    T._state.pop("row_grain", None)
    T._state.pop("column_grain", None)
    blas_kernels.COLUMN_GRAIN.clear()  # (off: no column blocks either)
    blas_kernels.COLUMN_GRAIN.update(_COLUMN_GRAINS if on else {})
    blas_kernels.ROW_GRAIN.clear()
    blas_kernels.ROW_GRAIN.update(_SPLIT_GRAINS if on else
                                  {k: v for k, v in _SPLIT_GRAINS.items() if k != "skylakex"})
    rnn_lstm_seq._row_blocks = _SEQ_BLOCKS if on else (lambda gemm_, B, n, k: (1, B, 1))


def _products():
    rng = np.random.default_rng(0)
    ops = [(rng.standard_normal((m, k), dtype=np.float32),
            rng.standard_normal((k, n), dtype=np.float32))
           for m, k, n in ((1024, 784, 256), (1024, 256, 128), (128, 784, 256))]

    def step():
        with gemm.numpy_only():
            return [gemm.matmul(a, b) for a, b in ops]
    return step


def _from_training_steps(name):
    import training_steps as ts
    ember.manual_seed(0)
    step = getattr(ts, name)(ember)

    def run():
        step()
        return [p.detach().numpy().copy() for p in _params(step)] or [np.zeros(1)]
    return run


def _params(step):
    for cell in step.__closure__ or ():
        v = cell.cell_contents
        if hasattr(v, "parameters"):
            return list(v.parameters())
    return []


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="products,mlp_infer,lstm")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--per-round", type=int, default=5)
    args = ap.parse_args()
    ember.set_num_threads(2)
    print(f"ember at {ember.get_num_threads()} threads, MKL loaded: {gemm.mkl_available()}, "
          f"load average {os.getloadavg()}")
    for name in args.only.split(","):
        step = _products() if name == "products" else _from_training_steps(name)
        if name != "lstm":  # (the LSTM trains: its state moves; its bits: tests)
            _route(False)
            off = step()
            _route(True)
            for a, b in zip(off, step()):
                assert np.array_equal(a, b), name
        times = {False: [], True: []}
        for _ in range(args.rounds):
            for on in (False, True):
                _route(on)
                step()
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(args.per_round):
                    step()
                times[on].append(((time.perf_counter() - t0) / args.per_round,
                                  (time.process_time() - c0) / args.per_round))
        med = {on: [statistics.median(t[i] for t in times[on]) * 1e3 for i in (0, 1)]
               for on in times}
        print(f"{name:10s} off {med[False][0]:8.2f} ms (cpu {med[False][1]:7.2f})  "
              f"on {med[True][0]:8.2f} ms (cpu {med[True][1]:7.2f})  "
              f"on/off wall {med[True][0] / med[False][0]:.3f}  load {os.getloadavg()[0]:.2f}")
    _route(True)


if __name__ == "__main__":
    main()
