"""What each numba kernel family gives the Transformer layer training step
(``transformer_step.py``), in one process: the step with layer norm's row kernels and
attention's softmax kernels each on or off, alternated with torch's step.

    python benchmarks/transformer_numba_kernels.py [--rounds R]

Needs numba (the ``ember[fast]`` extra). One thread (``OPENBLAS_NUM_THREADS=1`` set here).
A kernel family is switched off the way the tests do it, by its module's cache entry
(``norm_layouts._NUMBA["rows"]``, ``attention._NUMBA["softmax"]``) set to None: the NumPy
passes then run, in the same process, with numba imported, so the comparison says what
the kernels give, apart from anything importing numba changes. Prints the median CPU
milliseconds per step of each variant, its ratio to torch's, and the load average.
"""
import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--per-round", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    import torch
    import transformer_step as ts

    import ember
    from ember.ops import attention, norm_layouts
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    xb = rng.standard_normal((16, 64, ts.D_MODEL)).astype(np.float32)
    yb = rng.standard_normal((16, 64, ts.D_MODEL)).astype(np.float32)
    torch.manual_seed(0)
    weights = {k: v.detach().numpy().copy() for k, v in ts.build(torch).state_dict().items()}
    steps = {}
    for m in (ember, torch):
        step = ts.make_step(m, ts.build(m, weights))
        x, y = m.tensor(xb), m.tensor(yb)
        steps[m] = (lambda s=step, x=x, y=y: s(x, y))
        for _ in range(3):
            steps[m]()
    ln, sm = norm_layouts._NUMBA.get("rows"), attention._NUMBA.get("softmax")
    if ln is None or sm is None:
        sys.exit("numba's kernels did not load (is numba installed?)")
    variants = {"no kernels": (None, None), "layer norm": (ln, None),
                "softmax": (None, sm), "both": (ln, sm), "torch": None}
    times = {k: [] for k in variants}
    for r in range(args.rounds):
        order = list(variants.items())
        for name, kernels in (order if r % 2 else order[::-1]):
            if kernels is None:
                run = steps[torch]
            else:
                norm_layouts._NUMBA["rows"], attention._NUMBA["softmax"] = kernels
                run = steps[ember]
            run()
            t = time.thread_time()
            for _ in range(args.per_round):
                run()
            times[name].append((time.thread_time() - t) / args.per_round * 1e3)
    norm_layouts._NUMBA["rows"], attention._NUMBA["softmax"] = ln, sm
    ref = np.median(times["torch"])
    print("Transformer layer step, one thread, CPU ms/step (median of rounds)")
    for name, t in times.items():
        print(f"  {name:11s} {np.median(t):7.3f}  /torch {np.median(t) / ref:.3f}")
    print("load", " ".join(f"{v:.2f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
