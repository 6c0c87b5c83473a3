"""The matrix products of the LSTM step (``training_steps.py --only lstm``: T=32, B=32,
I=64, H=128) one by one, in each route NumPy's BLAS can run them, beside torch's product
of the same shape, calls alternated in one process:

- the input projection (1024, 65) @ (65, 128) x 4 (the bias as the last term): one
  stacked product, or in blocks of 64 rows (``rnn_lstm_padded._projection_rows``);
- a forward step's recurrent product (32, 128) @ (128, 512): whole, or gate by gate;
- a backward step's (32, 512) @ (512, 128): whole, in column blocks of 32
  (``_rnn_blas.column_block``), or as the sum of the gates' products
  (``rnn_lstm_padded._split_by_gate``);
- the weight gradients dG^T x (512, 1024) @ (1024, 64) and dG^T h (512, 1024) @
  (1024, 128).

On OpenBLAS's SkylakeX-family cores a product of at most 1e6 multiply-adds runs in a
kernel for small matrices that reads its operands in place; larger ones copy them into
blocks first. Prints, per route, the best and the median wall-clock microseconds of
single calls (one thread; operands 64-byte aligned, as the loop's) and the load average:
on a loaded machine the medians say how much each route suffers from other processes.

    PYTHONPATH=$PWD python benchmarks/lstm_products.py [--calls 200]
"""
import argparse
import os
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402


def _routes(rng):
    import torch

    from ember.ops._rnn_blas import aligned
    f = np.float32

    def a(*shape):  # 64-byte aligned, as the padded loop's buffers are
        return aligned(shape, f, rng.standard_normal(shape).astype(f))
    T, B, I, H = 32, 32, 64, 128
    N = T * B
    xa, wa, S = a(N, I + 1), a(4, I + 1, H), a(4, N, H)
    xr, Sr = xa.reshape(N // 64, 64, I + 1), S.reshape(4, N // 64, 64, H)
    h, W, W4 = a(B, H), a(H, 4 * H), a(4, H, H)
    P, P4 = a(B, 4 * H), a(4, B, H)
    dg, whh, dh = a(B, 4 * H), a(4 * H, H), a(B, H)
    cols = [(whh[:, j:j + 32], dh[:, j:j + 32]) for j in range(0, H, 32)]
    dg4, whh4 = dg.reshape(B, 4, H).transpose(1, 0, 2), whh.reshape(4, H, H)
    O4 = a(4, B, H)
    dG, x, hp = a(N, 4 * H), a(N, I), a(N, H)

    def column_blocks():
        for w, o in cols:
            np.matmul(dg, w, o)

    def by_gate():
        np.matmul(dg4, whh4, O4)
        np.add.reduce(O4, 0, None, dh)
    t = torch.from_numpy
    txa, twa, th, tW, tdg, twhh = t(xa), t(a(I + 1, 4 * H)), t(h), t(W), t(dg), t(whh)
    tdG, tx, thp = t(dG), t(x), t(hp)
    return {
        "projection, one stacked product": lambda: np.matmul(xa, wa, S),
        "projection, blocks of 64 rows": lambda: np.matmul(xr, wa[:, None], Sr),
        "projection, torch": lambda: torch.mm(txa, twa),
        "forward step, whole": lambda: np.matmul(h, W, P),
        "forward step, by gate": lambda: np.matmul(h, W4, P4),
        "forward step, torch": lambda: torch.mm(th, tW),
        "backward step, whole": lambda: np.matmul(dg, whh, dh),
        "backward step, column blocks": column_blocks,
        "backward step, by gate": by_gate,
        "backward step, torch": lambda: torch.mm(tdg, twhh),
        "dW_ih = dG^T x": lambda: np.matmul(dG.T, x),
        "dW_ih, torch": lambda: torch.mm(tdG.t(), tx),
        "dW_hh = dG^T h": lambda: np.matmul(dG.T, hp),
        "dW_hh, torch": lambda: torch.mm(tdG.t(), thp),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    routes = _routes(np.random.default_rng(0))
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    times = {k: [] for k in routes}
    pc = time.perf_counter
    for _ in range(args.calls):
        for k, fn in routes.items():
            t0 = pc()
            fn()
            times[k].append(pc() - t0)
    for k, v in times.items():
        v = np.array(v) * 1e6
        print(f"{k:34s} best {v.min():8.1f} us  median {np.median(v):8.1f} us")
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
