"""How long MKL's Intel OpenMP workers should spin after a product: the workloads of
``two_threads.py`` at ember's default threads with the extras, one process, rounds of
each block time alternated (set through the runtime's ``kmp_set_defaults`` between
rounds, as ember sets it when it loads MKL).

    python benchmarks/mkl_block_time_ab.py [--only mlp,transformer] [--min-time S]
                                           [--times 200ms,0,50us,1ms]

Printed per workload and block time: the median wall and CPU (all threads) milliseconds
per step, the CPU of MKL's OpenMP workers per step (``/proc/self/task``), and each
variant's wall and CPU as a ratio to the first variant's (``200ms`` is Intel's default,
ember's before it set one; ``0`` is ember's now). Run it at normal priority
(``nice -n 0``) on a quiet machine: the load average is printed before each workload.
Needs the ``mkl`` extra on Intel's layer (torch is not imported).
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _ticks(names):
    """CPU ticks of this process's threads whose name starts with one of ``names``."""
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        if s[s.index("(") + 1:s.rindex(")")].startswith(names):
            fields = s[s.rindex(")") + 2:].split()
            total += int(fields[11]) + int(fields[12])
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="mlp,mlp_infer,cnn,lstm,rnncell,transformer")
    ap.add_argument("--times", default="200ms,0,50us,1ms",
                    help="block times to alternate (KMP_BLOCKTIME syntax)")
    ap.add_argument("--min-time", type=float, default=4.0, help="seconds per variant")
    ap.add_argument("--per-round", type=int, default=3)
    args = ap.parse_args()
    import numpy as np
    import two_threads

    import ember
    from ember.backend import gemm
    gemm.matmul(np.ones((256, 256), np.float32), np.ones((256, 256), np.float32))
    lib = gemm._lib[0]
    rt = gemm._intel_openmp(ctypes) if lib else None
    if rt is None or lib.layer != 0:
        raise SystemExit("needs ember[mkl] on Intel OpenMP's layer")
    tick = os.sysconf("SC_CLK_TCK")
    times = args.times.split(",")
    print(f"ember {os.path.dirname(ember.__file__)}, {ember.get_num_threads()} threads, "
          f"MKL at {lib.num_threads}; block time set by ember at load: {lib.blocktime} ms")
    for name in args.only.split(","):
        make = two_threads._builder(name)
        ember.manual_seed(0)
        step = make(ember)
        for _ in range(3):
            step()
        load = " ".join(f"{v:.2f}" for v in os.getloadavg())
        got = {t: ([], [], []) for t in times}
        spent = 0.0
        while spent < args.min_time * len(times) or len(got[times[0]][0]) < 5:
            for t in times:
                rt.kmp_set_defaults(f"KMP_BLOCKTIME={t}".encode())
                time.sleep(0.25)  # the last variant's workers done spinning (200 ms)
                step()  # a step at the new setting before timing
                k0 = _ticks(("openmp_worker", "omp_worker"))
                w0, c0 = time.perf_counter(), time.process_time()
                for _ in range(args.per_round):
                    step()
                w1, c1 = time.perf_counter(), time.process_time()
                k1 = _ticks(("openmp_worker", "omp_worker"))
                spent += w1 - w0
                wall, cpu, omp = got[t]
                wall.append((w1 - w0) / args.per_round * 1e3)
                cpu.append((c1 - c0) / args.per_round * 1e3)
                omp.append((k1 - k0) / tick / args.per_round * 1e3)  # (averaged)
        # (the workers' ticks are 10 ms: their CPU is the total over all rounds)
        med = {t: [statistics.median(got[t][0]), statistics.median(got[t][1]),
                   sum(got[t][2]) / len(got[t][2])] for t in times}
        w_ref, c_ref = med[times[0]][:2]
        print(f"{name}  (load average {load}; {len(got[times[0]][0])} rounds of "
              f"{args.per_round} steps each)")
        for t in times:
            w, c, o = med[t]
            print(f"  KMP_BLOCKTIME={t:<6} wall {w:8.2f} ms  cpu {c:8.2f} ms  "
                  f"(MKL's workers {o:6.2f})  wall/first {w / w_ref:5.2f}  "
                  f"cpu/first {c / c_ref:5.2f}", flush=True)
    rt.kmp_set_defaults(f"KMP_BLOCKTIME={lib.blocktime if lib.blocktime is not None else 200}"
                        .encode())
    print("load average after " + " ".join(f"{v:.2f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
