"""How long MKL's Intel OpenMP workers should spin after a product: the workloads of
``two_threads.py`` at ember's default threads with the extras, one process, rounds of
each block time alternated (set through the runtime's ``kmp_set_defaults`` between
rounds, as ember sets it when it loads MKL).

    python benchmarks/mkl_block_time_ab.py [--only mlp,transformer] [--min-time S]
                                           [--times 200ms,0,50us,1ms]

Printed per workload and block time: the median wall and CPU (all threads) milliseconds
per step, the CPU of MKL's OpenMP workers per step (``/proc/self/task``), and each
variant's wall and CPU as a ratio to the first variant's (``200ms`` is Intel's default,
ember's before it set one; ember now sets ``1ms`` with a core to spare, else ``0``).
Run it at normal priority (``nice -n 0``) on a quiet machine: the load average is
printed before each workload.
Needs the ``mkl`` extra on Intel's layer (torch is not imported).

``--products`` times single products instead of workloads: the MKL products of the MLP
training step and of inference (float32, ``x @ w.T`` and the weight gradient's
``g.T @ x``), each after ``--gap-us`` microseconds of work on the calling thread (what
ember does between two products of a step); per block time the median wall and CPU
microseconds of each product, and the ratio to the first block time.
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
    ap.add_argument("--products", action="store_true", help="single products (see above)")
    ap.add_argument("--gap-us", type=float, default=100.0)
    args = ap.parse_args()
    import numpy as np
    import two_threads

    import ember
    from ember.backend import blas_openmp, gemm
    gemm.matmul(np.ones((256, 256), np.float32), np.ones((256, 256), np.float32))
    lib = gemm._lib[0]
    rt = blas_openmp.intel_openmp(ctypes) if lib else None
    if rt is None or lib.layer != 0:
        raise SystemExit("needs ember[mkl] on Intel OpenMP's layer")
    tick = os.sysconf("SC_CLK_TCK")
    times = args.times.split(",")
    print(f"ember {os.path.dirname(ember.__file__)}, {ember.get_num_threads()} threads, "
          f"MKL at {lib.num_threads}; block time set by ember at load: {lib.blocktime} ms")
    at_load = lib.blocktime
    lib.blocktime = None  # (ember does not follow the load here: each round sets its own)
    if args.products:
        _products(np, gemm, rt, times, args)
        return
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
    rt.kmp_set_defaults(f"KMP_BLOCKTIME={at_load if at_load is not None else 200}".encode())
    print("load average after " + " ".join(f"{v:.2f}" for v in os.getloadavg()))


# (m, k, n, transposed b) of the MKL products of two_threads.py's MLP train step (batch
# 128: two layers forward, their weight gradients and one input gradient) and inference
# (batch 1024)
_PRODUCTS = [(128, 784, 256, True), (128, 256, 128, True), (256, 128, 784, False),
             (128, 128, 256, False), (128, 128, 256, True), (1024, 784, 256, True),
             (1024, 256, 128, True), (1024, 128, 10, True)]


def _products(np, gemm, rt, times, args):
    """Each of ``_PRODUCTS`` after ``args.gap_us`` of work on this thread, block times
    alternated by rounds; median wall and CPU microseconds per product."""
    rng = np.random.default_rng(0)
    ops = []
    for m, k, n, trans in _PRODUCTS:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((n, k), dtype=np.float32).T if trans else \
            rng.standard_normal((k, n), dtype=np.float32)
        ops.append((f"{m}x{k}x{n}{'T' if trans else ''}", a, b))
    gap = args.gap_us * 1e-6
    got = {t: {name: ([], []) for name, _, _ in ops} for t in times}
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    t_end = time.perf_counter() + args.min_time * len(times)
    rounds = 0
    while time.perf_counter() < t_end or rounds < 5:
        rounds += 1
        for t in times:
            rt.kmp_set_defaults(f"KMP_BLOCKTIME={t}".encode())
            time.sleep(0.25)
            for _ in range(args.per_round):
                for name, a, b in ops:
                    g0 = time.perf_counter()
                    while time.perf_counter() - g0 < gap:  # the caller's own work
                        pass
                    w0, c0 = time.perf_counter(), time.process_time()
                    gemm.matmul(a, b)
                    w1, c1 = time.perf_counter(), time.process_time()
                    got[t][name][0].append((w1 - w0) * 1e6)
                    got[t][name][1].append((c1 - c0) * 1e6)
    print(f"single products after {args.gap_us:g} us of the caller's work (load average "
          f"{load}; {rounds} rounds of {args.per_round}); wall / CPU us, ratio to "
          f"{times[0]}")
    for name, _, _ in ops:
        ref = statistics.median(got[times[0]][name][0])
        cells = []
        for t in times:
            w = statistics.median(got[t][name][0])
            c = statistics.median(got[t][name][1])
            cells.append(f"{t}: {w:7.1f} / {c:7.1f} ({w / ref:4.2f})")
        print(f"  {name:<14} " + "   ".join(cells), flush=True)
    print("load average after " + " ".join(f"{v:.2f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
