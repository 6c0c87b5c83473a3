"""The serial part of a two-thread step, measured on a loaded machine: per workload and
source tree, the calling thread's CPU time per step at one and at two ember threads
(rounds alternated in one process), the other threads' CPU, the pool's split blocks,
and the predicted two-thread wall time on a quiet machine.

    python benchmarks/two_threads_serial.py [--only mlp,mlp_infer] [--numpy-only]
        [--tree PATH ...] [--rounds N] [--steps N] [--scale S]

On a machine shared with other jobs two-thread wall times are the scheduler's; CPU
times per thread are not (much). The caller's CPU at two threads is everything it runs
alone plus its share of each split; where a split's worker block takes longer than the
caller's, the caller waits (no CPU) for the difference. So the quiet two-thread wall
time is about the caller's CPU plus the sum of those differences ("predicted"), and the
serial part is the caller's CPU outside its split blocks. ember takes the machine as
idle here (pairs and BLAS's own threads as on a quiet one) and its bounds at ``--scale``
times the nominal (a quiet machine's dispatch; default 1), whatever the load. Each tree
(default: this one) runs in its own process, ember only.
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _thread_cpu():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                out[tid] = int(f.read().split()[0])
        except OSError:
            pass
    return out


def child(spec):
    sys.path.insert(0, HERE)
    import two_threads
    if spec["numpy_only"]:
        sys.meta_path.insert(0, two_threads._NoExtras())
        os.environ["EMBER_MKL"] = "0"
    import ember
    from ember.backend import threads as T
    T.scale_bounds(spec["scale"])
    T._idle["next"], T._idle["idle"] = float("inf"), True
    pool_class = getattr(T, "Pool", None) or T._Pool
    real_run = pool_class.run
    blocks = []

    def run(pool, fn, bounds):
        took = {}

        def timed(lo, hi):
            c = time.thread_time()
            fn(lo, hi)
            took[lo == bounds[0]] = time.thread_time() - c
        real_run(pool, timed, bounds)
        blocks.append((took.get(True, 0.0), took.get(False, 0.0)))
    pool_class.run = run
    main = str(threading.main_thread().native_id)
    out = {}
    for name in spec["only"]:
        ember.manual_seed(0)
        step = two_threads._builder(name)(ember)
        got = {1: collections.defaultdict(list), 2: collections.defaultdict(list)}
        for _ in range(spec["rounds"]):
            for n in (1, 2):
                ember.set_num_threads(n)
                for _ in range(3):
                    step()
                blocks.clear()
                before, c = _thread_cpu(), time.thread_time()
                for _ in range(spec["steps"]):
                    step()
                caller = (time.thread_time() - c) * 1e3 / spec["steps"]
                after = _thread_cpu()
                others = sum(after[t] - before.get(t, 0) for t in after if t != main)
                per = spec["steps"] / 1e3
                g = got[n]
                g["caller"].append(caller)
                g["others"].append(others / 1e9 / per)
                g["blocks"].append(sum(c for c, _ in blocks) / per)
                g["waits"].append(sum(max(0.0, w - c) for c, w in blocks) / per)
                g["splits"].append(len(blocks) / spec["steps"])
        out[name] = {n: {k: statistics.median(v) for k, v in g.items()} for n, g in got.items()}
    out["load"] = os.getloadavg()[0]
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="mlp,mlp_infer")
    ap.add_argument("--numpy-only", action="store_true")
    ap.add_argument("--tree", action="append", default=None)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    trees = args.tree or [os.path.dirname(HERE)]
    spec = {"only": args.only.split(","), "numpy_only": args.numpy_only,
            "rounds": args.rounds, "steps": args.steps, "scale": args.scale}
    print(f"{'NumPy only' if args.numpy_only else 'extras as installed'}; scale "
          f"{args.scale}; ms per step, medians of {args.rounds} alternated rounds of "
          f"{args.steps} steps; load {os.getloadavg()[0]:.2f}")
    for tree in trees:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
        if args.numpy_only:
            env["EMBER_MKL"] = "0"
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                            json.dumps(spec)], env=env, capture_output=True, text=True,
                           cwd=HERE)
        if r.returncode:
            raise RuntimeError(r.stderr)
        res = json.loads(r.stdout.strip().splitlines()[-1])
        print(f"{tree} (load after {res.pop('load'):.2f}):")
        for name, by in res.items():
            one, two = by["1"], by["2"]
            print(f"  {name:10s} 1 thread: caller {one['caller']:6.3f} (others "
                  f"{one['others']:5.3f}) | 2 threads: caller {two['caller']:6.3f}, "
                  f"others {two['others']:6.3f}, {two['splits']:4.1f} splits, caller's "
                  f"blocks {two['blocks']:6.3f}, serial {two['caller'] - two['blocks']:6.3f}"
                  f" | predicted wall {two['caller'] + two['waits']:6.3f}, CPU "
                  f"{two['caller'] + two['others']:6.3f}")


if __name__ == "__main__":
    main()
