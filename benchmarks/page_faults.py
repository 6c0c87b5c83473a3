"""Page faults per training step beside the step's time, for the six workloads of
benchmarks/compile_step.py (eager ember and torch), with ember's allocator settings
(``ember.backend.allocator``) on and off.

    python benchmarks/page_faults.py [--only mlp,cnn,...] [--steps N] [--threads 1]

Each configuration runs in a fresh child process (the settings are process-wide and
the heap's history matters): warm-up steps, then ``--steps`` steps counted with
``resource.getrusage`` (minor faults, ``ru_minflt``) and timed in CPU time. Printed:
faults per step and CPU milliseconds per step for ember with ``EMBER_MALLOPT=0``
(glibc's defaults), ember as imported (settings on) and torch, with the load average.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, {here!r})
import compile_step as cs
lib = {lib!r}
if lib == "torch":
    import torch as m
    m.set_num_threads({threads})
else:
    import ember as m
    m.set_num_threads({threads})
out = {{}}
for name in {names!r}:
    step, _ = cs.make_step(m, cs.WORKLOADS[name], "eager")
    for _ in range({warmup}):
        step()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    c0 = time.process_time()
    for _ in range({steps}):
        step()
    c1 = time.process_time()
    f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    out[name] = [(f1 - f0) / {steps}, (c1 - c0) / {steps} * 1e3]
print(json.dumps(out))
"""


def run(lib, names, steps, warmup, threads, mallopt):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    if mallopt is not None:
        env["EMBER_MALLOPT"] = mallopt
    code = CHILD.format(here=HERE, lib=lib, names=names, steps=steps, warmup=warmup,
                        threads=threads)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, timeout=1800)
    if r.returncode:
        raise RuntimeError(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="mlp,mlp_infer,cnn,lstm,rnncell,transformer")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    names = args.only.split(",")
    cols = {"ember EMBER_MALLOPT=0": run("ember", names, args.steps, args.warmup,
                                         args.threads, "0"),
            "ember (default)": run("ember", names, args.steps, args.warmup,
                                   args.threads, None),
            "torch": run("torch", names, args.steps, args.warmup, args.threads, None)}
    print(f"faults per step / CPU ms per step, {args.threads} thread(s), "
          f"{args.steps} steps after {args.warmup} warm-up; load average "
          f"{os.getloadavg()[0]:.2f}")
    print(f"{'workload':<12}" + "".join(f"{c:>28}" for c in cols))
    for n in names:
        print(f"{n:<12}" + "".join(f"{cols[c][n][0]:>18.1f} {cols[c][n][1]:>8.2f} ms"
                                   for c in cols))


if __name__ == "__main__":
    main()
