"""ember[mkl] on Intel OpenMP: the runtime MKL brings in gets a block time of 0, so that its
workers sleep after each product instead of spinning 200 ms on the core ember's own
threads need; a user's choice (KMP_BLOCKTIME, OMP_WAIT_POLICY, KMP_LIBRARY) and a runtime
someone else loaded first are left alone. Each case runs in a fresh child process (the
test process has torch's GNU OpenMP, where MKL takes the GNU layer and nothing is set);
the block time is the runtime's own answer (``kmp_get_blocktime``)."""
import os
import subprocess
import sys

import pytest

from ember.backend import gemm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import ctypes, os, sys, threading
case = sys.argv[1]
import numpy as np
folder = os.path.dirname(__import__("ember.backend.gemm").backend.gemm.library_path())
if case == "runtime_first":  # another library loaded Intel OpenMP before ember's MKL
    ctypes.CDLL(os.path.join(folder, "libiomp5.so"))
if case == "torch_first":
    import torch  # noqa: F401
import ember
from ember.backend import gemm
ember.set_num_threads(2)
a = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
r = gemm.matmul(a, a)
lib = gemm._lib[0]
assert np.abs(r - a.astype(np.float64) @ a).max() < 1e-3
try:  # the Intel OpenMP runtime in the process, if any (never loaded here)
    rt = ctypes.CDLL("libiomp5.so", mode=os.RTLD_NOLOAD)
except OSError:
    print(lib.layer, getattr(lib, "blocktime", "absent"), "none", "none")
    raise SystemExit
rt.kmp_get_blocktime.restype = ctypes.c_int
# (read first: a second thread calling MKL makes more OpenMP threads than cores, and the
# runtime then reports 0 for a block time nobody set, KMP_BLOCKTIME=7 aside)
first = rt.kmp_get_blocktime()
seen = []
def other():  # a product from another thread, then that thread's block time
    gemm.matmul(a, a)
    seen.append(rt.kmp_get_blocktime())
t = threading.Thread(target=other)
t.start()
t.join()
r, w = os.pipe()
# (past a user's short block time first: a fork while Intel OpenMP's workers still spin,
# then a product in the child, hung in the runtime once in a few runs with
# KMP_BLOCKTIME=7; at ember's block time of 0 they are asleep already)
import time; time.sleep(0.05)
pid = os.fork()  # a forked child (a DataLoader worker): its runtime starts over
if pid == 0:
    gemm.matmul(a, a)
    os.write(w, str(rt.kmp_get_blocktime()).encode())
    os._exit(0)
os.waitpid(pid, 0)
forked = os.read(r, 32).decode()
print(lib.layer, getattr(lib, "blocktime", "absent"), first, seen[0], forked)
"""


def _run(case, **env_vars):
    env = dict(os.environ, PYTHONPATH=ROOT, **env_vars)
    for var in ("MKL_THREADING_LAYER", "EMBER_MKL", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                *(v for v in gemm._WAIT_VARS if v not in env_vars)):
        env.pop(var, None)
    r = subprocess.run([sys.executable, "-c", _CHILD, case], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.split()


_INTEL, _GNU = "0", "3"


def test_intel_openmp_loaded_by_ember_sleeps_after_each_product():
    # before: Intel's default, 200 ms of spinning after every threaded product, on the
    # thread that loaded MKL and on any other
    # (and in a forked child, whose runtime reads its settings anew)
    assert _run("plain") == [_INTEL, "0", "0", "0", "0"]


@pytest.mark.parametrize("var,value", [("KMP_BLOCKTIME", "7"), ("OMP_WAIT_POLICY", "ACTIVE"),
                                       ("KMP_LIBRARY", "turnaround")])
def test_the_users_wait_settings_are_kept(var, value):
    layer, set_by_ember, main, other, forked = _run("plain", **{var: value})
    assert (layer, set_by_ember) == (_INTEL, "None")
    assert main != "0"
    if var == "KMP_BLOCKTIME":
        assert main == other == forked == "7"


def test_a_runtime_loaded_before_ember_is_left_alone():
    layer, set_by_ember, main = _run("runtime_first")[:3]
    assert (layer, set_by_ember, main) == (_INTEL, "None", "200")


def test_gnu_layer_beside_torch_is_left_alone():
    # torch's libgomp is torch's runtime (its spin count is set where torch loads it)
    layer, set_by_ember = _run("torch_first")[:2]
    assert (layer, set_by_ember) == (_GNU, "None")
