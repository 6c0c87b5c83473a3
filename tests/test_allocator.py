"""ember.backend.allocator: glibc's malloc settings applied once at import (opt-out
EMBER_MALLOPT=0), and a repeated training step that takes no page faults."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STEPS = r"""
import json, resource, numpy as np, ember
from ember.backend import allocator
nn = ember.nn
model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                      nn.Linear(128, 10))
opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
rng = np.random.default_rng(0)
x = ember.tensor(rng.standard_normal((128, 784), dtype=np.float32))
y = ember.tensor(rng.integers(0, 10, 128))
def step():
    opt.zero_grad()
    ember.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
for _ in range(3):
    step()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
print(json.dumps([allocator.settings(), faults / 10]))
"""


def _child(code, **env):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OPENBLAS_NUM_THREADS="1", **env)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _glibc():
    return bool(os.confstr("CS_GNU_LIBC_VERSION"))


def test_settings_applied_on_import_and_steps_take_no_faults():
    settings, faults = _child(STEPS)
    assert _glibc()  # the environment these tests run in
    assert settings == [32 << 20, 1 << 30]
    # glibc's defaults give ~750 faults per step here, depending on the heap's history
    assert faults < 20, faults


def test_opt_out():
    settings, _ = _child(STEPS, EMBER_MALLOPT="0")
    assert settings is None


def test_tune_and_release_by_hand():
    got = _child("import json; from ember.backend import allocator as a\n"
                 "print(json.dumps([a.settings(), a.tune(1 << 20, 1 << 24), a.settings(),\n"
                 "                  a.release() in (True, False)]))",
                 EMBER_MALLOPT="0")
    assert got == [None, True, [1 << 20, 1 << 24], True]
