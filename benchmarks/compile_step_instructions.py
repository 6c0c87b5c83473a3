"""Instructions per compiled training step, counted by callgrind: a measure of the step's
fixed Python cost that the machine's load does not move (timings on a shared machine
spread by +-5 %).

    python benchmarks/compile_step_instructions.py /tmp/before [--only mlp_tiny]
                                                   [--steps 200] [--no-numba]

For the tree given and this one, runs ``compile_step.py``'s workload (``mlp_tiny`` by
default: the 8-8-8-4 MLP, whose kernels are negligible) under ``valgrind
--tool=callgrind`` with instrumentation off, switches it on (through a two-function C
shim built here with the system's ``cc`` and ``valgrind/callgrind.h``) around
``--steps`` steps after 20 warm-up steps, and prints the instructions per step of each
and their ratio. Needs valgrind and a C compiler; takes ~1 minute per tree without
numba, ~5 with (numba's compiler runs under valgrind).
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

_SHIM = """#include <valgrind/callgrind.h>
void start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION;
                   CALLGRIND_TOGGLE_COLLECT; }
void stop(void) { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_STOP_INSTRUMENTATION;
                  CALLGRIND_DUMP_STATS; }
"""

# run in the child: the workload's steps between the shim's two calls
_CHILD = """
import ctypes, os, sys
os.environ["OPENBLAS_NUM_THREADS"] = "1"
if {no_numba}:
    sys.modules["numba"] = None
sys.path.insert(0, {bench!r})
import ember
import compile_step as cs
make = cs.WORKLOADS.get({name!r}) or cs.EXTRA_WORKLOADS[{name!r}]
ember.manual_seed(0)
step = cs.make_step(ember, make, "step")[0]
for _ in range(20):
    step()
shim = ctypes.CDLL({lib!r})
shim.start()
for _ in range({steps}):
    step()
shim.stop()
"""


def count(tree, name, steps, no_numba, lib, work):
    """Instructions per step of workload ``name`` of ``tree``'s ember."""
    out = os.path.join(work, f"cg.{abs(hash(tree))}")
    code = _CHILD.format(no_numba=no_numba, bench=HERE, name=name, lib=lib, steps=steps)
    env = dict(os.environ, PYTHONPATH=tree, OPENBLAS_NUM_THREADS="1")
    subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                    "--collect-atstart=no", f"--callgrind-out-file={out}",
                    sys.executable, "-c", code], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    total = 0
    for f in os.listdir(work):
        if f.startswith(os.path.basename(out)):
            with open(os.path.join(work, f)) as fh:
                for line in fh:
                    if line.startswith(("summary:", "totals:")):
                        total = max(total, int(line.split()[1]))
            os.remove(os.path.join(work, f))
    return total / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--only", default="mlp_tiny")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--no-numba", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        src, lib = os.path.join(work, "shim.c"), os.path.join(work, "shim.so")
        with open(src, "w") as f:
            f.write(_SHIM)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
        for name in args.only.split(","):
            b = count(os.path.abspath(args.before), name, args.steps, args.no_numba, lib,
                      work)
            a = count(ROOT, name, args.steps, args.no_numba, lib, work)
            print(f"{name:11s} instructions/step before {b:,.0f} after {a:,.0f} "
                  f"after/before {a / b:.3f}{' (no numba)' if args.no_numba else ''}")


if __name__ == "__main__":
    main()
