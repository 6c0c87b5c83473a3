"""The first calls of a compiled training step in a fresh process: what a user's run
pays before the step reaches its steady cost (capture, plan, numba's compilation of
the plan's loops, or their load from numba's on-disk cache).

    python benchmarks/compile_first_step.py [ROOT ...] [--only mlp,transformer]
                                            [--runs 2]

Each ROOT (an ember tree, default this one) runs each workload of ``compile_step.py``
in ``--runs`` fresh processes one after the other (the first run of a tree may write
numba's cache, the later ones read it) and prints the wall and CPU milliseconds of the
first four calls of the compiled step. One thread. Prints the load average.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _child(root, name, calls):
    """In the fresh process: ``calls`` calls of the compiled step, each timed."""
    sys.path.insert(0, root)
    sys.path.insert(0, HERE)
    import compile_step as cs

    import ember
    ember.manual_seed(0)
    step = cs.make_step(ember, cs.WORKLOADS[name], "step")[0]
    out = []
    for _ in range(calls):
        w, c = time.perf_counter(), time.process_time()
        step()
        out.append(((time.perf_counter() - w) * 1e3, (time.process_time() - c) * 1e3))
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="*", default=[ROOT])
    ap.add_argument("--only", default="mlp,transformer")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child[0], args.child[1], args.calls)
        return
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONPATH="")
    print(f"load average {os.getloadavg()}; ms per call (wall / cpu), calls 1..{args.calls}")
    for name in args.only.split(","):
        for root in args.roots:
            for run in range(args.runs):
                res = subprocess.run(
                    [sys.executable, __file__, "--calls", str(args.calls), "--child",
                     os.path.abspath(root), name],
                    env=env, capture_output=True, text=True, cwd=root)
                if res.returncode:
                    print(res.stderr)
                    raise SystemExit(res.returncode)
                calls = json.loads(res.stdout.strip().splitlines()[-1])
                cells = "  ".join(f"{w:7.0f} /{c:7.0f}" for w, c in calls)
                print(f"{name:12s} {root:28s} run {run + 1}: {cells}")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
