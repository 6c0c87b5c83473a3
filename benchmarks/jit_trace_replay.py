"""A traced module's forward: interpreting its TorchScript vs replaying its IR.

Traces each model of tests/jit_trace_zoo.py and times, under no_grad and alternating
round by round (best of 12 rounds): eager ember, jit-load's interpreter running the
generated code (``RecursiveScriptModule.forward``), and the IR replay (what a traced
module's ``forward`` runs). Prints microseconds for eager and the two ratios.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/jit_trace_replay.py
"""
import os
import sys
import time


def _once(f, n):
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t0) / n


def main():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from jit_trace_zoo import models

    import ember
    import ember.jit as jit
    from ember.jit._module import RecursiveScriptModule
    ember.manual_seed(0)
    print(f"{'model':14s} {'batch':>5s} {'eager us':>9s} {'interpreter/eager':>18s} "
          f"{'IR replay/eager':>16s}")
    for name, (make, inputs) in models(ember).items():
        m = make().eval()
        t = jit.trace(m, inputs(2), strict=False)
        for b in (1, 64):
            if name == "seed_cnn" and b == 64:
                continue
            x = inputs(b)
            fs = [lambda m=m, x=x: m(*x),
                  lambda t=t, x=x: RecursiveScriptModule.forward(t, *x),
                  lambda t=t, x=x: t(*x)]
            n = 3 if name == "seed_cnn" else 10
            best = [float("inf")] * 3
            with ember.no_grad():
                for f in fs:
                    f()
                for _ in range(12):
                    for i, f in enumerate(fs):
                        best[i] = min(best[i], _once(f, n))
            print(f"{name:14s} {b:5d} {best[0] * 1e6:9.0f} {best[1] / best[0]:18.2f} "
                  f"{best[2] / best[0]:16.2f}")


if __name__ == "__main__":
    main()
