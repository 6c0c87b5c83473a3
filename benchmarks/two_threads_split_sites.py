"""The serial part of a training step at two ember threads, from CPU time (which a loaded
machine changes much less than wall time), and the quiet two-thread wall time it
predicts, for each tree given, each in its own process.

    python benchmarks/two_threads_split_sites.py [--only transformer] [--numpy-only]
                                            [--steps 30] [--rounds 3] [TREE ...]

At two threads, with the splits' bounds pinned to their nominal values (``threads.
scale_bounds(1)``, as on a quiet machine) and a core taken as free (pairs run): the
caller's CPU outside the pool's splits (work no other thread can share), and for each
split each block's CPU in its own thread. Then

- ``serial``: the caller's CPU outside splits plus each split's longer block: what one
  thread must do in turn, so the quiet two-thread wall time is about this (plus the
  wake-ups, tens of microseconds a split);
- ``CPU 2``: all of it (the work at two threads), beside ``CPU 1``, the step's CPU at
  one thread (the work must not grow much);
- the split sites (file:line of the kernel) with their blocks' CPU per step.

Trees default to this one; each runs ``--rounds`` times, alternated, medians printed with
the load average. CPU time per thread is ``time.thread_time``.

``two_threads_serial.py`` measures the caller's CPU at one and two threads with the
BLAS's own threads as they run; this script pins the bounds and names each split's site.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def _site():
    for frame in reversed(traceback.extract_stack()[:-2]):
        if "/backend/" not in frame.filename and frame.filename != __file__:
            return f"{os.path.basename(frame.filename)}:{frame.lineno} {frame.name}"
    return "?"


def measure(name, steps, numpy_only):
    """One tree (the ``ember`` on ``sys.path``): the figures above as a dict."""
    sys.path.insert(0, HERE)
    import two_threads
    if numpy_only:
        sys.meta_path.insert(0, two_threads._NoExtras())
        os.environ["EMBER_MKL"] = "0"
    import ember as m
    from ember.backend import threads as T
    m.manual_seed(0)
    step = two_threads._builder(name)(m)
    T.scale_bounds(1)
    T.cores_to_spare = lambda: True
    out = {}
    m.set_num_threads(1)
    for _ in range(5):
        step()
    c0 = time.thread_time()
    for _ in range(steps):
        step()
    out["cpu1"] = (time.thread_time() - c0) / steps * 1e3
    m.set_num_threads(2)
    for _ in range(5):
        step()
    inside = [0.0]
    sites = collections.defaultdict(lambda: [0.0, 0.0])  # longer, shorter block
    real_run = T.Pool.run

    def run(pool, fn, bounds):
        spent = {}

        def timed(lo, hi):
            t = time.thread_time()
            try:
                fn(lo, hi)
            finally:
                spent[lo] = time.thread_time() - t
        c = time.thread_time()
        real_run(pool, timed, bounds)
        inside[0] += time.thread_time() - c
        s = sites[_site()]
        s[0] += max(spent.values())
        s[1] += sum(spent.values()) - max(spent.values())
    T.Pool.run = run
    try:
        c0 = time.thread_time()
        for _ in range(steps):
            step()
        caller = time.thread_time() - c0
    finally:
        T.Pool.run = real_run
    outside = (caller - inside[0]) / steps * 1e3
    longer = sum(s[0] for s in sites.values()) / steps * 1e3
    shorter = sum(s[1] for s in sites.values()) / steps * 1e3
    out.update(outside=outside, serial=outside + longer, cpu2=outside + longer + shorter,
               sites={k: [v[0] / steps * 1e3, v[1] / steps * 1e3] for k, v in sites.items()})
    return out


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="*")
    ap.add_argument("--only", default="transformer")
    ap.add_argument("--numpy-only", action="store_true")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.steps, args.numpy_only)))
        return
    trees = args.trees or [os.path.dirname(HERE)]
    for name in args.only.split(","):
        got = {t: [] for t in trees}
        loads = [os.getloadavg()[0]]
        for _ in range(args.rounds):
            for t in trees:
                env = dict(os.environ, PYTHONPATH=t)
                cmd = [sys.executable, __file__, "--child", name, "--steps", str(args.steps)]
                if args.numpy_only:
                    cmd.append("--numpy-only")
                r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
                got[t].append(json.loads(r.stdout.strip().splitlines()[-1]))
                loads.append(os.getloadavg()[0])
        extras = "NumPy only" if args.numpy_only else "extras as installed"
        print(f"\n{name} ({extras}; load {min(loads):.1f}-{max(loads):.1f}); CPU ms per "
              f"step, medians of {args.rounds}")
        print(f"  {'tree':40s} {'CPU 1':>7s} {'CPU 2':>7s} {'outside':>8s} {'serial':>7s}")
        for t in trees:
            rs = got[t]
            print(f"  {t[-40:]:40s} " + " ".join(
                f"{_median([r[k] for r in rs]):{w}.2f}"
                for k, w in (("cpu1", 7), ("cpu2", 7), ("outside", 8), ("serial", 7))))
            keys = sorted({k for r in rs for k in r["sites"]},
                          key=lambda k: -_median([r["sites"].get(k, [0, 0])[0] for r in rs]))
            for k in keys:
                lo = _median([r["sites"].get(k, [0, 0])[0] for r in rs])
                sh = _median([r["sites"].get(k, [0, 0])[1] for r in rs])
                print(f"      {k:52s} longer {lo:6.2f} shorter {sh:6.2f}")


if __name__ == "__main__":
    main()
