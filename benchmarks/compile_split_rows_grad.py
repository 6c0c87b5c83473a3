"""The gradients of a head split (``q, k, v = x[0], x[1], x[2]``, each
``.view(L, N * H, D).transpose(0, 1)``) written into the rows' array, the two ways a
compiled plan's backward can run them, alternated in one process (CPU time, one
thread), at the benchmark Transformer's sizes (L 64, N 16, H 4, D 32, float32):

- "view, then row": the view's backward reshapes its gradient (a copy: it is not laid
  out in rows), then ``_rewrites._scatter`` copies it into the row;
- "through the view": ``_scatter(..., shaped=True)`` writes the view's gradient into
  the row seen in the view's shape (one pass).

    python benchmarks/compile_split_rows_grad.py [--rounds 7] [--step]

Prints microseconds per backward (three rows; median of rounds), the ratio, the load.
``--step``: the whole compiled Transformer step of ``compile_step.py`` instead, with
the views' path switched on and off in one process (the plan's generated backward
written again at each switch), rounds alternated: milliseconds per step.
"""
import argparse
import os
import time

import numpy as np


class _Step:  # what ``_scatter`` reads of a plan step
    wanted = [(0, 0)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--step", action="store_true")
    args = ap.parse_args()
    if args.step:
        return _in_step(args.rounds)
    from ember._compile._buffers import Arena
    from ember._compile._rewrites import _scatter
    rng = np.random.default_rng(0)
    L, N, H, D = 64, 16, 4, 32
    x = rng.standard_normal((3, L, N, H * D)).astype(np.float32)
    grads = [rng.standard_normal((N, H, L, D)).astype(np.float32) for _ in range(3)]
    arena = Arena()
    st = _Step()

    def backward(shaped):
        G, firsts, unfilled = {}, {}, {}
        for i, g in enumerate(grads):
            t = g.reshape(N * H, L, D).transpose(1, 0, 2)  # the transpose's gradient
            if not shaped:
                t = t.reshape(L, N, H * D)  # the view's gradient: a copy
            _scatter(G, st, [x, i], t, arena, firsts, unfilled, shaped)
        return G[0]
    assert np.array_equal(backward(False), backward(True))
    laps = {False: [], True: []}
    for r in range(args.rounds):
        for shaped in (False, True) if r % 2 else (True, False):
            for _ in range(20):
                backward(shaped)
            t0 = time.process_time()
            for _ in range(200):
                backward(shaped)
            laps[shaped].append((time.process_time() - t0) / 200 * 1e6)
    old, new = (float(np.median(laps[k])) for k in (False, True))
    print(f"view, then row {old:.1f} us; through the view {new:.1f} us; "
          f"ratio {new / old:.3f}; load {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


def _in_step(rounds):
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import compile_step as cs

    import ember
    ember.manual_seed(0)
    step, compiled = cs.make_step(ember, cs.WORKLOADS["transformer"], "step")
    for _ in range(5):
        step()
    plan = compiled._cache[0].plan
    feeds = {st.index: st.feeds for st in plan.steps}

    def switch(on):
        for st in plan.steps:
            st.feeds = feeds[st.index] if on else None
        plan.generated.pop(("backward", True), None)
        step()
    laps = {False: [], True: []}
    for r in range(2 * rounds):
        for on in (True, False) if r % 2 else (False, True):
            switch(on)
            t0 = time.process_time()
            for _ in range(15):
                step()
            laps[on].append((time.process_time() - t0) / 15 * 1e3)
    old, new = (float(np.median(laps[k])) for k in (False, True))
    print(f"Transformer step: view, then row {old:.3f} ms; through the view {new:.3f} ms; "
          f"ratio {new / old:.4f}; load {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
