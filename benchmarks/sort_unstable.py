"""An unstable ``sort`` (PyTorch's std::sort order among equal values) in ember against
torch, alternated in one process: float32 with and without ties, int8 with every row
tied, a small float32 matrix.

    PYTHONPATH=$REPO python benchmarks/sort_unstable.py [--rounds R]

Printed per case: the best CPU milliseconds per call of each over the rounds, ember /
torch, whether the indices agree, and the load average. One thread each.
"""
import argparse
import os
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402

import ember  # noqa: E402

_RNG = np.random.default_rng(0)
CASES = {
    "float32 1e6 (some ties)": _RNG.standard_normal(10 ** 6).astype(np.float32),
    "float32 1000x1000": _RNG.standard_normal((1000, 1000)).astype(np.float32),
    "int8 1000x1000 (all rows tied)": _RNG.integers(-3, 3, (1000, 1000)).astype(np.int8),
    "float32 64x64": _RNG.standard_normal((64, 64)).astype(np.float32),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; one thread")
    for name, a in CASES.items():
        pair = {"torch": (torch, torch.from_numpy(a)), "ember": (ember, ember.tensor(a))}
        reps = 3 if a.size > 10000 else 300
        best = dict.fromkeys(pair, float("inf"))
        for _ in range(args.rounds):
            for key, (m, x) in pair.items():
                t0 = time.process_time()
                for _ in range(reps):
                    m.sort(x)
                best[key] = min(best[key], (time.process_time() - t0) / reps)
        same = bool((torch.sort(pair["torch"][1])[1].numpy()
                     == ember.sort(pair["ember"][1])[1].numpy()).all())
        print(f"{name:32s} torch {best['torch'] * 1e3:8.3f} ms  ember "
              f"{best['ember'] * 1e3:8.3f} ms  ember/torch {best['ember'] / best['torch']:.2f}"
              f"  same indices {same}")
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
