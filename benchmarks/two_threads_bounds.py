"""The pool's split bounds at two threads: each workload of ``training_steps.py`` at one
thread and at two with the bounds at 1, 2, 4 and 8 times their nominal values
(``threads.scale_bounds``) and at the scale this process measured, rounds alternated in
one process, median wall milliseconds per step.

    python benchmarks/two_threads_bounds.py [--only mlp,transformer] [--seconds 15]
                                            [--numpy-only]

Run it on a quiet machine (wall time). ``--numpy-only`` hides numba, threadpoolctl and
MKL (the default install). The measured scale is the one a new pool takes from its round
trip (docs/performance/threads.md, "Two threads on a slow dispatch (ninth pass)").
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="mlp,mlp_infer,lstm,rnncell,transformer")
    ap.add_argument("--seconds", type=float, default=15.0, help="timed seconds per workload")
    ap.add_argument("--numpy-only", action="store_true")
    args = ap.parse_args()
    if args.numpy_only:
        for name in ("numba", "threadpoolctl", "mkl"):
            sys.modules[name] = None
    import training_steps

    import ember
    from ember.backend import threads
    ember.set_num_threads(2)
    threads.parallel_rows(lambda lo, hi: None, 2, 1 << 40)  # a pool: its measured scale
    measured = threads._state["scale"]
    scales = {"one": None, "x1": 1, "x2": 2, "x4": 4, "x8": 8, "measured": measured}
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; pool round trip "
          f"{threads._state['round_trip'] * 1e6:.1f} us, measured scale {measured:.2f}; "
          f"median wall ms per step")
    print(f"{'workload':<13}" + "".join(f"{k:>10}" for k in scales))

    def use(scale):
        if scale is None:
            ember.set_num_threads(1)
        else:
            ember.set_num_threads(2)
            threads.scale_bounds(scale)
    for name in args.only.split(","):
        step = training_steps.WORKLOADS[name](ember)
        times = {k: [] for k in scales}
        for scale in scales.values():
            use(scale)
            step()
        end = time.time() + args.seconds
        while time.time() < end:
            for key, scale in scales.items():
                use(scale)
                step()
                start = time.perf_counter()
                for _ in range(5):
                    step()
                times[key].append((time.perf_counter() - start) / 5 * 1e3)
        print(f"{name:<13}" + "".join(f"{sorted(v)[len(v) // 2]:10.2f}"
                                      for v in times.values()), flush=True)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
