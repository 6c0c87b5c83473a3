"""Single layers, forward + backward: an older ember tree, this one and torch, in one
process, rounds alternated (the layers of ``nn_ops.py``).

    git archive main | tar -x -C /tmp/before
    python benchmarks/nn_ops_ab.py /tmp/before [--only cnn_conv2,cnn_relu1] [--rounds R]
                                               [--calls N] [--forward-only] [--no-numba]

Both ember trees are imported into the same process under the name ``ember``: each
keeps its own set of modules, put back in ``sys.modules`` before each of its rounds
(ember imports some modules lazily, inside functions). Printed: median CPU
milliseconds per call of each, the ratios to torch and after/before, and the load
average before and after. One thread each (``OPENBLAS_NUM_THREADS=1`` is set here).
"""
import argparse
import importlib
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
if __name__ == "__main__" and "--no-numba" in sys.argv:
    sys.modules["numba"] = None  # the default install's NumPy paths, both trees

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _ember_modules():
    return {k: v for k, v in sys.modules.items() if k == "ember" or k.startswith("ember.")}


def _use(mods):
    """Make ``mods`` (one tree's modules) the ``ember`` that imports find."""
    if mods is None:
        return
    for k in list(_ember_modules()):
        del sys.modules[k]
    sys.modules.update(mods)


def _load(path):
    _use({})
    sys.path.insert(0, path)
    try:
        m = importlib.import_module("ember")
        importlib.import_module("ember.nn")
    finally:
        sys.path.remove(path)
    if not os.path.abspath(m.__file__).startswith(os.path.abspath(path)):
        raise RuntimeError(f"ember imported from {m.__file__}, not from {path}")
    m.set_num_threads(1)
    return m, _ember_modules()


def alternated_ms(libs, steps, rounds, calls):
    """Median CPU milliseconds per call of each of ``steps`` (one per ``(name, module,
    modules)`` of ``libs``), over ``rounds`` rounds that alternate them: each round puts
    its tree's modules back (``_use``), makes one untimed call (the first after the swap
    pays for it), then times ``calls`` calls. One warm-up round is not counted."""
    times = [[] for _ in libs]
    for r in range(rounds + 1):
        for (_, _, mods), step, t in zip(libs, steps, times):
            _use(mods)
            step()
            c = time.process_time()
            for _ in range(calls):
                step()
            if r:
                t.append((time.process_time() - c) / calls * 1e3)
    return [float(np.median(t)) for t in times]


def main():
    sys.path.insert(0, HERE)
    import nn_ops
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--only", default=",".join(nn_ops.WORKLOADS))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=3,
                    help="calls a round (the module swap before each round costs a fixed "
                         "time: small layers need more calls to hide it)")
    ap.add_argument("--forward-only", action="store_true",
                    help="the layers' forward under no_grad (inference)")
    ap.add_argument("--no-numba", action="store_true",
                    help="hide numba from both trees (with EMBER_MKL=0: the default install)")
    args = ap.parse_args()
    run_ab(args.before, args.only.split(","),
           lambda m, name: nn_ops.make(m, name, args.forward_only), args.rounds, args.calls,
           label="layer", unit="ms")


def run_ab(before, names, make, rounds, calls, label="op", unit="ms", digits=2):
    """Time ``make(module, name)`` (a step) for each of ``names`` on the older ember tree
    at ``before``, this tree and torch, one thread each, in rounds alternated by
    :func:`alternated_ms`; print a row per name: the median CPU time per call (in
    ``unit``: "ms" or "us") of each, and the ratios."""
    import torch
    torch.set_num_threads(1)
    b_mod, b_mods = _load(before)
    a_mod, a_mods = _load(ROOT)
    libs = [("before", b_mod, b_mods), ("after", a_mod, a_mods), ("torch", torch, None)]
    scale = 1e3 if unit == "us" else 1.0
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; one thread each; "
          f"median CPU {unit} per call of {rounds} alternated rounds of {calls} calls")
    print(f"{label:<20}{'before':>9}{'after':>9}{'torch':>9}{'b/torch':>9}{'a/torch':>9}"
          f"{'after/b':>9}")
    for name in names:
        steps = []
        for _, m, mods in libs:
            _use(mods)
            steps.append(make(m, name))
        b, a, t = (v * scale for v in alternated_ms(libs, steps, rounds, calls))
        print(f"{name:<20}{b:9.{digits}f}{a:9.{digits}f}{t:9.{digits}f}{b / t:9.2f}"
              f"{a / t:9.2f}{a / b:9.3f}", flush=True)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")

if __name__ == "__main__":
    main()
