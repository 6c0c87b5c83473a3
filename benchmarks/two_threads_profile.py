"""Where ember's second thread goes: per-thread CPU, the pool's dispatch latency, and
each split kernel's blocks, for the workloads of ``two_threads.py``.

    python benchmarks/two_threads_profile.py [--only mlp,transformer] [--min-time S]
                                             [--numpy-only]

One process, ember only (run it on a quiet machine: every figure here is wall time).
For each workload it prints:

- the step's wall and CPU milliseconds at one and at two ember threads;
- at two threads, each thread's CPU milliseconds per step (``/proc/self/task``): the
  caller, ember's pool worker, BLAS's own threads;
- each kernel the pool split (by its call site), per step: how often, the median time
  from the split's start to the worker starting its block (the wake-up), the caller's
  and the worker's block times and the whole split's time. A split pays when the whole
  is well under the one-thread kernel's time, about the longer block plus the wake-up;
- the products that reach ``threads.matmul``, by route: split, left to BLAS's own
  threads (or too small for BLAS to thread), run at one BLAS thread (whole, where the
  kernel's row blocks would change the bits), or called from inside a split kernel's
  block or a pair's side (``threads.pair``; one BLAS thread there).

And once, the pool's round trip for an empty block after the caller has been busy for a
while (the worker has gone to sleep): what a split costs before any work.

``--numpy-only`` hides threadpoolctl, numba and MKL (the default install), as in
``two_threads.py``.
"""
import argparse
import collections
import os
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def _thread_cpu():
    """{thread id: (name, CPU ticks)} of this process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        name = s[s.index("(") + 1:s.rindex(")")]
        fields = s[s.rindex(")") + 2:].split()
        out[tid] = (name, int(fields[11]) + int(fields[12]))
    return out


def _names():
    """{native thread id: Python name} of the Python threads."""
    return {str(t.native_id): t.name for t in threading.enumerate()}


def _site():
    """The first frame outside ember.backend: the kernel that asked for the split."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if "/backend/" not in frame.filename and frame.filename != __file__:
            return f"{os.path.basename(frame.filename)}:{frame.lineno} {frame.name}"
    return "?"


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


def profile(m, T, name, builder, min_time):
    step = builder(m)
    times = {}
    for n in (1, 2):
        m.set_num_threads(n)
        for _ in range(10):
            step()
        count, t0, c0 = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - t0 < min_time:
            step()
            count += 1
        times[n] = ((time.perf_counter() - t0) / count * 1e3,
                    (time.process_time() - c0) / count * 1e3)
    print(f"\n{name}: one thread {times[1][0]:.2f} ms wall ({times[1][1]:.2f} CPU), two "
          f"threads {times[2][0]:.2f} ms wall ({times[2][1]:.2f} CPU), load "
          f"{os.getloadavg()[0]:.2f}")

    # per-thread CPU at two threads
    m.set_num_threads(2)
    before, count, t0 = _thread_cpu(), 0, time.perf_counter()
    while time.perf_counter() - t0 < min_time:
        step()
        count += 1
    after, names, tick = _thread_cpu(), _names(), os.sysconf("SC_CLK_TCK")
    for tid, (comm, ticks) in sorted(after.items()):
        spent = ticks - before.get(tid, (comm, 0))[1]
        if spent:
            label = names.get(tid, "BLAS/other (" + comm + ")")
            print(f"  thread {label:28s} {spent / tick / count * 1e3:7.3f} ms CPU per step")

    # split kernels and product routes
    splits = collections.defaultdict(lambda: collections.defaultdict(list))
    routes = collections.Counter()
    P = sys.modules.get("ember.backend.thread_products", T)  # (where gemm calls it)
    real_run, real_matmul, real_single = T.Pool.run, P.matmul, T.single_blas
    in_matmul = threading.local()

    def run(pool, fn, bounds):
        blocks = []
        in_matmul.split = True

        def timed(lo, hi):
            t = time.perf_counter()
            in_matmul.nested = True
            try:
                fn(lo, hi)
            finally:
                in_matmul.nested = False
            who = "caller" if threading.current_thread() is threading.main_thread() \
                else "worker"
            blocks.append((who, t - start, time.perf_counter() - t))
        start = time.perf_counter()
        real_run(pool, timed, bounds)
        took = time.perf_counter() - start
        site = _site()  # (after the timed part: reading the stack takes tens of us)
        for who, began, spent in blocks:
            splits[site][who].append((began, spent))
        splits[site]["whole"].append((0.0, took))

    def matmul(a, b, out=None, *bias_add, **whole):
        in_matmul.route, in_matmul.split = None, False
        r = real_matmul(a, b, out, *bias_add, **whole)
        if getattr(in_matmul, "nested", False) or getattr(T.local, "in_worker", False):
            route = "in a split or pair"
        elif r is getattr(P, "WHOLE", None):
            route = "whole, one BLAS thread"
        else:
            # (a product measured at its site returns its result whichever route ran)
            route = in_matmul.route or (
                "split" if in_matmul.split else "measured: whole" if r is not None
                else "BLAS's own threads")
        routes[(route, a.shape[-2:] + b.shape[-1:])] += 1
        return r

    class Single:
        def __init__(self, *args, **kw):
            self.cm = real_single(*args, **kw)

        def __enter__(self):
            in_matmul.route = "one BLAS thread"
            return self.cm.__enter__()

        def __exit__(self, *exc):
            return self.cm.__exit__(*exc)
    T.Pool.run, P.matmul, T.single_blas = run, matmul, Single
    try:
        for _ in range(3):
            step()
        splits.clear()
        routes.clear()
        count, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < min_time:
            step()
            count += 1
    finally:
        T.Pool.run, P.matmul, T.single_blas = real_run, real_matmul, real_single
    print("  splits per step (median us): wake-up = split start to the worker's block")
    for site, parts in sorted(splits.items(), key=lambda kv: -sum(
            d for _, d in kv[1]["whole"])):
        whole = parts["whole"]
        wake = _median([s for s, _ in parts["worker"]]) * 1e6
        took = {who: _median([d for _, d in parts[who]]) * 1e6
                for who in ("whole", "caller", "worker")}
        print(f"    {site:48s} x{len(whole) / count:4.1f}  whole {took['whole']:6.0f}"
              f"  caller {took['caller']:6.0f}  worker {took['worker']:6.0f}"
              f"  wake-up {wake:5.0f}")
    print("  products through threads.matmul per step (route, m x k x n):")
    for (route, shape), k in sorted(routes.items(), key=lambda kv: -kv[1]):
        print(f"    {route:24s} {'x'.join(map(str, shape)):16s} x{k / count:.1f}")


def round_trip(m, T):
    """The pool's round trip for an empty block, the caller busy before each."""
    m.set_num_threads(2)
    T.parallel_rows(lambda lo, hi: None, 2, 1 << 40)
    pool = T._pool[0]
    print("\npool round trip for an empty block (median / 90th percentile us):")
    for busy_us in (0, 50, 200, 500, 2000):
        took = []
        for _ in range(200):
            until = time.perf_counter() + busy_us * 1e-6
            while time.perf_counter() < until:
                pass
            t = time.perf_counter()
            pool.run(lambda lo, hi: None, [0, 1, 2])
            took.append(time.perf_counter() - t)
        took.sort()
        print(f"  after {busy_us:5d} us busy: {took[len(took) // 2] * 1e6:6.1f} / "
              f"{took[int(len(took) * 0.9)] * 1e6:6.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="mlp,mlp_infer,cnn,lstm,rnncell,transformer")
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--numpy-only", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    import two_threads
    if args.numpy_only:
        sys.meta_path.insert(0, two_threads._NoExtras())
        os.environ["EMBER_MKL"] = "0"
    import ember as m
    from ember.backend import threads as T
    extras = "NumPy only" if args.numpy_only else "extras as installed"
    print(f"ember {os.path.dirname(m.__file__)}, {extras}")
    for name in args.only.split(","):
        m.manual_seed(0)
        profile(m, T, name, two_threads._builder(name), args.min_time)
    round_trip(m, T)


if __name__ == "__main__":
    main()
