"""The steps of four PyTorch tutorials (per-sample gradients, model ensembling,
forward-mode AD with functorch, the profiler recipe), written as the programs in
tests/tutorial_steps: each runs on torch (plain python) and under ``python -m ember run``
and both print the same JSON (numbers to float32 rounding)."""
import json
import math
import os
import subprocess
import sys

import pytest

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tutorial_steps")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = ["per_sample_grads.py", "ensembling.py", "forward_ad_functorch.py",
            "profiler_steps.py"]


def _start(args):
    env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, *args], cwd=HERE, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _result(proc):
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 0, out[-2000:] + err[-4000:]
    return json.loads(out.strip().splitlines()[-1])


def _same(a, b, path="$"):
    if isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-3), f"{path}: {a} != {b}"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


@pytest.mark.parametrize("program", PROGRAMS)
def test_tutorial_steps_match_torch(program):
    torch_run, ember_run = _start([program]), _start(["-m", "ember", "run", program])
    want, got = _result(torch_run), _result(ember_run)
    _same(got, want)
