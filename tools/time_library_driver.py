"""Time a library driver (tests/library_drivers/) on torch and under ``ember run``.

    python tools/time_library_driver.py transformers_basic.py [--repeat 3] [--steps 20]

Prints, for torch and for ember, the whole process's wall and CPU (user + system) time
(the median of ``--repeat`` runs of the driver as the test runs it) and the median wall
and CPU time of one training step per model (a run with ``DRIVER_STEPS=--steps``; the
driver prints ``step_seconds MODEL WALL CPU`` for each step). CPU time is the steadier
number on a shared machine. One BLAS thread, as in the tests."""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

DRIVERS = Path(__file__).resolve().parent.parent / "tests" / "library_drivers"


def _run(cmd, steps=None):
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "PYTHONWARNINGS": "ignore"}
    if steps:
        env["DRIVER_STEPS"] = str(steps)
    t0, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=DRIVERS,
                       timeout=900)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode:
        sys.exit(f"{cmd} failed:\n{r.stderr[-3000:]}")
    steps_seen = defaultdict(list)
    for line in r.stdout.splitlines():
        if line.startswith("step_seconds "):
            _, model, sec, cpu_sec = line.split()
            steps_seen[model].append((float(sec), float(cpu_sec)))
    return (wall, cpu), steps_seen


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("driver")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.npz")
        sides = {"torch": [sys.executable, str(DRIVERS / a.driver), out],
                 "ember": [sys.executable, "-m", "ember", "run", str(DRIVERS / a.driver), out]}
        walls = {k: [] for k in sides}
        for _ in range(a.repeat):  # interleaved, so that load on the machine hits both
            for k, cmd in sides.items():
                walls[k].append(_run(cmd)[0])
        steps = {k: _run(cmd, a.steps)[1] for k, cmd in sides.items()}
    med = {k: [statistics.median(x[i] for x in v) for i in (0, 1)] for k, v in walls.items()}
    print(f"whole process (median of {a.repeat}): torch {med['torch'][0]:.1f} s wall, "
          f"{med['torch'][1]:.1f} s CPU; ember {med['ember'][0]:.1f} s wall, "
          f"{med['ember'][1]:.1f} s CPU")
    print(f"per training step (median of {a.steps}, the first step left out), wall / CPU:")
    for model in steps["torch"]:
        t, e = ([statistics.median(s[i] for s in steps[k][model][1:] or steps[k][model])
                 for i in (0, 1)] for k in ("torch", "ember"))
        print(f"  {model}: torch {t[0] * 1e3:.1f} / {t[1] * 1e3:.1f} ms, ember "
              f"{e[0] * 1e3:.1f} / {e[1] * 1e3:.1f} ms (CPU {e[1] / t[1]:.1f}x)")


if __name__ == "__main__":
    main()
