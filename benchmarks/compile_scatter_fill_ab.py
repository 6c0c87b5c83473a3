"""The compiled Transformer step with its q/k/v rows' gradient array zero-filled before
the rows are written (as before the thirteenth pass) and without (this tree), both in
one process, rounds alternated (order reversed every other round), CPU time, one thread.

    python benchmarks/compile_scatter_fill_ab.py [--min-time S] [--rounds-of N]

Prints the median CPU ms per step of each, their ratio and the load average.
"""
import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _filling(scatter):
    """``_scatter`` that zero-fills the arena's buffer first (the earlier behaviour)."""
    def run(G, st, args, g, arena, firsts, unfilled):
        s = st.wanted[0][1]
        first = s not in G
        done = scatter(G, st, args, g, arena, firsts, unfilled)
        if done and first and unfilled.pop(s, None) is not None:
            buf = G[s]
            keep = buf[args[1]].copy()
            buf.fill(0)
            buf[args[1]] = keep
        return done
    return run


def main():
    sys.path.insert(0, HERE)
    import compile_step as cs

    import ember
    from ember._compile import _rewrites
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-time", type=float, default=3.0)
    ap.add_argument("--rounds-of", type=int, default=3)
    args = ap.parse_args()
    ember.set_num_threads(1)
    new = _rewrites._scatter
    steps = []
    for scatter in (_filling(new), new):
        _rewrites._scatter = scatter  # bound into the generated backward when it is made
        ember.manual_seed(0)
        step = cs.make_step(ember, cs.WORKLOADS["transformer"], "step")[0]
        for _ in range(5):
            step()
        steps.append(step)
    _rewrites._scatter = new
    load0 = os.getloadavg()
    cpu = [[], []]
    order = list(zip(steps, cpu))
    start = time.perf_counter()
    while time.perf_counter() - start < 2 * args.min_time or len(cpu[0]) < 6:
        order.reverse()
        for step, c in order:
            c0 = time.process_time()
            for _ in range(args.rounds_of):
                step()
            c.append((time.process_time() - c0) / args.rounds_of * 1e3)
    a, b = (float(np.median(c)) for c in cpu)
    print(f"transformer CPU ms/step filled {a:.3f} not filled {b:.3f} ratio {b / a:.3f} | "
          f"rounds {len(cpu[0])} | load {' '.join(f'{v:.2f}' for v in load0)} -> "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
