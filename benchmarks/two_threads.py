"""Training and inference steps with each library in its own process, as a user runs
them: ember's and torch's default thread settings (two threads on a two-core machine).

    python benchmarks/two_threads.py [--only mlp,mlp_infer,cnn,lstm,rnncell,transformer]
                                     [--threads N] [--pairs P] [--min-time S]
                                     [--tree PATH [--tree PATH ...]]

With both libraries in one process, each one's idle threads spin on the cores the
other is using, so two-thread figures from the side-by-side scripts are not what a
user sees. Here every measurement is a fresh child process running one library on one
workload: ember, torch, ember, torch, ... (``--pairs`` of them, default 3), so that
the load of a shared machine hits both alike. Each child warms up, then runs rounds of
steps for ``--min-time`` seconds and reports, per step, the median wall milliseconds,
the median process (CPU, all threads) milliseconds and the minor page faults. Printed
per workload: each library's median over its children with the range of the children's
wall times in brackets (torch's own time moves 2-3x from child to child when anything
else runs on the machine: its OpenMP threads spin), the ratios ember/torch of wall and
CPU time, and the load average before and after.

- By default the children get no ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS``/
  ``MKL_NUM_THREADS`` (they are removed from the environment): each library picks its
  own default. ``--threads N`` sets all three to ``N`` in both children, and each
  child also calls its library's ``set_num_threads(N)``.
- ``--numpy-only`` runs ember as the default install has it (NumPy alone): its children
  get ``EMBER_MKL=0`` and cannot import threadpoolctl, numba or mkl (the ``fast`` and
  ``mkl`` extras); without it ember uses whatever extras are installed.
- ``--tree PATH`` runs ember from another source tree (its root, holding ``ember/``),
  e.g. ``--tree /tmp/before --tree .`` for a before/after comparison alternated in one
  run (each tree is a column; default: this tree). ``EMBER_MKL`` and the rest of the
  environment pass through to ember's children.

Workloads (their builders are imported from the other benchmark scripts):
- mlp, mlp_infer, lstm, rnncell, transformer: ``benchmarks/training_steps.py``
- cnn: ``benchmarks/cnn_step.py`` (MNIST net, batch 64, Adam)
- gru, lstm_packed: ``benchmarks/rnn_steps.py``
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT = "mlp,mlp_infer,cnn,lstm,rnncell,transformer"
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _builder(name):
    """``make(m) -> step()`` for workload ``name``, from the script that defines it."""
    sys.path.insert(0, HERE)
    if name == "cnn":
        import cnn_step

        def make(m):
            import numpy as np
            rng = np.random.default_rng(0)
            x = m.tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
            y = m.tensor(rng.integers(0, 10, 64))
            step, _ = cnn_step.make_step(m, cnn_step.build(m))
            return lambda: step(x, y)
        return make
    if name in ("gru", "lstm_packed"):
        import rnn_steps
        return rnn_steps.WORKLOADS[name]
    import training_steps
    return training_steps.WORKLOADS[name]


class _NoExtras:
    """An import hook refusing ember's optional extras, as in an install without them."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("threadpoolctl", "numba", "mkl", "llvmlite"):
            raise ImportError(f"{name} hidden by --numpy-only")
        return None


def child(spec):
    """Run one library on one workload and print its figures as JSON (the child side)."""
    import resource
    if spec.get("numpy_only"):
        sys.meta_path.insert(0, _NoExtras())
    if spec["lib"] == "torch":
        import torch as m
    else:
        import ember as m
    if spec["threads"]:
        m.set_num_threads(spec["threads"])
    make = _builder(spec["workload"])
    m.manual_seed(0)
    step = make(m)
    for _ in range(spec["warmup"]):
        step()
    wall, cpu, faults = [], [], []
    per_round = spec["per_round"]
    start = time.perf_counter()
    while time.perf_counter() - start < spec["min_time"] or len(wall) < 5:
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(per_round):
            step()
        t1, c1 = time.perf_counter(), time.process_time()
        f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        wall.append((t1 - t0) / per_round * 1e3)
        cpu.append((c1 - c0) / per_round * 1e3)
        faults.append((f1 - f0) / per_round)
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _NoExtras)]
    blas = None  # looked up after the run, so that the lookup changes nothing timed
    try:
        from threadpoolctl import threadpool_info
        blas = sorted({(i["internal_api"], i["num_threads"]) for i in threadpool_info()
                       if i["user_api"] == "blas"})
    except ImportError:
        pass
    print(json.dumps({"wall": statistics.median(wall), "cpu": statistics.median(cpu),
                      "faults": statistics.median(faults), "threads": m.get_num_threads(),
                      "blas": blas}))


def _run(lib, tree, workload, args):
    env = {k: v for k, v in os.environ.items() if k not in _THREAD_VARS}
    if args.threads:
        env.update({k: str(args.threads) for k in _THREAD_VARS})
    if lib == "ember":
        env["PYTHONPATH"] = os.path.abspath(tree)
        if args.numpy_only:
            env["EMBER_MKL"] = "0"
    spec = {"numpy_only": args.numpy_only and lib == "ember", "lib": lib,
            "workload": workload, "threads": args.threads, "min_time": args.min_time,
            "warmup": args.warmup, "per_round": args.per_round}
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
                       env=env, capture_output=True, text=True, timeout=args.timeout,
                       cwd=HERE)
    if r.returncode:
        raise RuntimeError(f"{lib} {workload} failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _load():
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=DEFAULT)
    ap.add_argument("--threads", type=int, default=None,
                    help="threads for both libraries (default: each library's own)")
    ap.add_argument("--pairs", type=int, default=3, help="child processes per library")
    ap.add_argument("--min-time", type=float, default=3.0, help="timed seconds per child")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--per-round", type=int, default=3)
    ap.add_argument("--numpy-only", action="store_true",
                    help="ember without its extras (EMBER_MKL=0, no threadpoolctl/numba)")
    ap.add_argument("--tree", action="append", default=None,
                    help="run ember from this source tree (repeat to compare trees)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per child")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    trees = args.tree or [ROOT]
    cols = [("ember", t) for t in trees] + [("torch", None)]
    names = [f"ember@{os.path.abspath(t)}" if len(trees) > 1 else "ember"
             for t in trees] + ["torch"]
    print(f"each library in its own process; threads: "
          f"{args.threads or 'defaults'}; ember "
          f"{'NumPy only' if args.numpy_only else 'with the extras installed'}, "
          f"EMBER_MKL={os.environ.get('EMBER_MKL', 'unset')}; "
          f"{args.pairs} children each, {args.min_time:g} s timed per child; "
          f"load average before {_load()}", flush=True)
    for workload in args.only.split(","):
        got = {n: [] for n in names}
        for _ in range(args.pairs):
            for n, (lib, tree) in zip(names, cols):
                got[n].append(_run(lib, tree, workload, args))
        med = {n: {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu", "faults")}
               for n, rs in got.items()}
        t = med["torch"]
        print(f"{workload}  (load average {_load()})")
        for n in names:
            e = med[n]
            r = got[n][-1]
            ratio = (f"  wall ratio {e['wall'] / t['wall']:.2f}  cpu ratio "
                     f"{e['cpu'] / t['cpu']:.2f}" if n != "torch" else "")
            walls = [x["wall"] for x in got[n]]
            print(f"  {n:<24} wall {e['wall']:8.2f} ms [{min(walls):.2f}-{max(walls):.2f}]"
                  f"  cpu {e['cpu']:8.2f} ms  faults {e['faults']:8.1f}  threads "
                  f"{r['threads']} blas {r['blas']}{ratio}", flush=True)
    print(f"load average after {_load()}")


if __name__ == "__main__":
    main()
