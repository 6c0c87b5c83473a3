"""The compiled plans' numba loops (fused chains, bias + ReLU, ReLU in place, gradient
loops, the cross-entropy pair) and the optimizer's one-pass loops are cached on disk:
a second process loads them instead of compiling them again on its first step."""
import json
import os
import subprocess
import sys

import numba  # (part of the test environment: the loops exist only with it)
import numpy as np

from ember._compile import _jit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# a compiled MLP step with every kind of loop: a forward chain ((a - b) * (a - b)), a
# ReLU and a tanh (gradient loops), cross-entropy and SGD with momentum
_STEP = """
import json, sys
import numpy as np
import ember
from ember._compile import _fused, _xent
from ember.optim import _one_pass

ember.manual_seed(0)
nn = ember.nn
net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(),
                    nn.Linear(16, 4))
opt = ember.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
rng = np.random.default_rng(0)
x = ember.tensor(rng.standard_normal((32, 8), dtype=np.float32))
y = ember.tensor(rng.integers(0, 4, 32))
a = ember.tensor(rng.standard_normal((32, 4), dtype=np.float32))


def step():
    opt.zero_grad()
    out = net(x)
    loss = ((out - a) * (out - a)).mean() + ember.nn.functional.cross_entropy(out, y)
    loss.backward()
    opt.step()
    return loss


run = ember.compile(step)
losses = [run().item() for _ in range(4)]


def dispatchers():
    found = list(_fused._chains.values())
    for table in (_fused._grad_loops, _fused._act_overs, _fused._bias_act_loops):
        for loop in table.values():
            for cell in (loop.__closure__ or ()) if loop is not None else ():
                if hasattr(cell.cell_contents, "stats"):
                    found.append(cell.cell_contents)
    found += [k for k in (_xent._kernels.get("pair"),) if k is not None]
    found += [_one_pass._kernels[k] for k in ("sgd", "adam")]
    return found


report = []
for d in dispatchers():
    if not d.signatures:  # (Adam's loop: not called by this step)
        continue
    s = d.stats
    report.append([d.py_func.__name__, sum(s.cache_hits.values()),
                   sum(s.cache_misses.values())])
print(json.dumps({"losses": losses, "loops": report}))
"""


def _run_step_process():
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1")
    env.pop("NUMBA_DISABLE_JIT", None)
    res = subprocess.run([sys.executable, "-c", _STEP], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_second_process_loads_every_loop_from_the_cache(capsys):
    exec(_STEP, {"__name__": "step"})  # this process compiles (or loads), writes the cache
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    second = _run_step_process()
    names = {name for name, _, _ in second["loops"]}
    # every kind of loop took part: chain, ReLU's and tanh's gradients, the pair, SGD
    assert {"chain", "grad", "loop", "sgd"} <= names, second["loops"]
    for name, hits, misses in second["loops"]:
        assert misses == 0 and hits >= 1, (name, hits, misses)
    assert first["losses"] == second["losses"]  # the loaded loops compute the same


def test_two_sources_never_share_a_file(monkeypatch, tmp_path):
    monkeypatch.setattr(_jit, "_source_dir", [str(tmp_path)])
    # numba keys its cache by a function's bytecode, which the constants and the
    # names a function calls are not part of: each generated source has its own file
    src = "def f(x):\n    return x * {}\n"
    double = _jit.njit_source(src.format("2.0"), "f", "t", "<test>")
    triple = _jit.njit_source(src.format("3.0"), "f", "t", "<test>")
    assert double(np.float64(1.5)) == 3.0 and triple(np.float64(1.5)) == 4.5
    f1, f2 = double.py_func.__code__.co_filename, triple.py_func.__code__.co_filename
    assert f1 != f2 and os.path.exists(f1) and os.path.exists(f2)
    assert double.py_func.__code__.co_code == triple.py_func.__code__.co_code


def test_nowhere_to_write_compiles_in_memory(monkeypatch):
    # a read-only install and home: the loop is compiled per process, as before
    monkeypatch.setattr(_jit, "_source_dir", [None])
    f = _jit.njit_source("def g(x):\n    return x + 1.0\n", "g", "t", "<ember test g>")
    assert f(np.float64(1.0)) == 2.0
    assert f.py_func.__code__.co_filename == "<ember test g>"


def test_unwritable_package_falls_back_to_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(_jit, "_source_dir", [])
    monkeypatch.setattr(numba.core.config, "CACHE_DIR", "")
    here = os.path.dirname(_jit.__file__)
    real = _jit._writable
    monkeypatch.setattr(_jit, "_writable", lambda p: not p.startswith(here) and real(p))
    monkeypatch.setattr(numba.misc.appdirs.AppDirs, "user_cache_dir", str(tmp_path))
    assert _jit._generated_dir() == os.path.join(str(tmp_path), "ember_generated")
    f = _jit.njit_source("def h(x):\n    return x - 1.0\n", "h", "t", "<ember test h>")
    assert f(np.float64(1.0)) == 0.0
    assert os.path.dirname(f.py_func.__code__.co_filename) == _jit._generated_dir()
