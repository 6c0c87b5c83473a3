"""ember[mkl] on Intel OpenMP: the runtime MKL brings in gets a block time of 1 ms, so that its
workers sleep soon after a step's products instead of spinning 200 ms on the core ember's own
threads need; a user's choice (KMP_BLOCKTIME, OMP_WAIT_POLICY, KMP_LIBRARY) and a runtime
someone else loaded first are left alone. Each case runs in a fresh child process (the
test process has torch's GNU OpenMP, where MKL takes the GNU layer and nothing is set);
the block time is the runtime's own answer (``kmp_get_blocktime``)."""
import os
import subprocess
import sys

import pytest

from ember.backend import blas_openmp

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
from ember.backend import blas_openmp, gemm
# whether the machine has a core to spare: chosen here, not read from the test machine
blas_openmp._spare = (lambda: False) if case.endswith("_loaded") else (lambda: True)
ember.set_num_threads(2)
a = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
r = gemm.matmul(a, a)
lib = gemm._lib[0]
assert np.abs(r - a.astype(np.float64) @ a).max() < 1e-3
try:  # the Intel OpenMP runtime in the process, if any (never loaded here)
    rt = ctypes.CDLL("libiomp5.so", mode=os.RTLD_NOLOAD)
except OSError:
    print(lib.layer, getattr(lib, "blocktime", "absent"), "none", "none", "none", "none")
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
# (right after the other thread's product: tests/test_mkl_fork.py is the fork's own test)
pid = os.fork()  # a forked child (a DataLoader worker): its runtime starts over
if pid == 0:
    gemm.matmul(a, a)
    os.write(w, str(rt.kmp_get_blocktime()).encode())
    os._exit(0)
os.waitpid(pid, 0)
forked = os.read(r, 32).decode()
# the load changes: the next product sets the block time for it (where ember sets it)
blas_openmp._spare = (lambda: True) if case.endswith("_loaded") else (lambda: False)
gemm.matmul(a, a)
print(lib.layer, getattr(lib, "blocktime", "absent"), first, seen[0], forked,
      rt.kmp_get_blocktime())
"""


def _run(case, **env_vars):
    env = dict(os.environ, PYTHONPATH=ROOT, **env_vars)
    for var in ("MKL_THREADING_LAYER", "EMBER_MKL", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                *(v for v in blas_openmp.WAIT_VARS if v not in env_vars)):
        env.pop(var, None)
    r = subprocess.run([sys.executable, "-c", _CHILD, case], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.split()


_INTEL, _GNU = "0", "3"


def test_intel_openmp_loaded_by_ember_spins_a_millisecond_after_each_product():
    # before: Intel's default, 200 ms of spinning after every threaded product, on the
    # thread that loaded MKL and on any other
    # (and in a forked child, whose runtime reads its settings anew)
    # (ember's 0 of the fifteenth pass woke the worker through the kernel for every
    # product: 1 ms keeps it awake between the products of one step, on a machine with
    # a core to spare; then the load rises and the next product sets 0)
    assert _run("plain") == [_INTEL, "1", "1", "1", "1", "0"]


def test_a_loaded_machine_gets_block_time_0():
    # (another process's work on the second core: spinning there costs more than a
    # wake-up; then the load falls and the next product sets 1 ms)
    assert _run("plain_loaded") == [_INTEL, "0", "0", "0", "0", "1"]


@pytest.mark.parametrize("var,value", [("KMP_BLOCKTIME", "7"), ("OMP_WAIT_POLICY", "ACTIVE"),
                                       ("KMP_LIBRARY", "turnaround")])
def test_the_users_wait_settings_are_kept(var, value):
    layer, set_by_ember, main, other, forked, later = _run("plain", **{var: value})
    assert (layer, set_by_ember) == (_INTEL, "None")
    assert main != "0"
    if var == "KMP_BLOCKTIME":
        assert main == other == forked == later == "7"


def test_a_runtime_loaded_before_ember_is_left_alone():
    layer, set_by_ember, main = _run("runtime_first")[:3]
    assert (layer, set_by_ember, main) == (_INTEL, "None", "200")


def test_gnu_layer_beside_torch_is_left_alone():
    # torch's libgomp is torch's runtime (its spin count is set where torch loads it)
    layer, set_by_ember = _run("torch_first")[:2]
    assert (layer, set_by_ember) == (_GNU, "None")


_BITS_CHILD = r"""
import ctypes, time
import numpy as np
import ember
from ember.backend import blas_openmp, gemm
blas_openmp._spare = lambda: True
ember.set_num_threads(2)
rng = np.random.default_rng(1)
# the two-thread workloads' MKL products: MLP train and inference, the Transformer's
# projections, the CNN's columns, a batch; float32 and float64, one transposed operand
shapes = [(128, 784, 256), (1024, 784, 256), (1024, 256, 128), (1024, 128, 384),
          (64, 288, 7744), (256, 128, 784)]
cases = []
for m, k, n in shapes:
    for dt in (np.float32, np.float64):
        a = rng.standard_normal((m, k)).astype(dt)
        cases.append((a, rng.standard_normal((n, k)).astype(dt).T))
cases.append((rng.standard_normal((16, 128, 128)).astype(np.float32),
              rng.standard_normal((16, 128, 128)).astype(np.float32)))
first = [gemm.matmul(a, b) for a, b in cases]
assert gemm._lib[0].num_threads == 2
rt = blas_openmp.intel_openmp(ctypes)
same = []
gemm._lib[0].blocktime = None  # (ember's setting not followed: each round sets its own)
for setting in (b"KMP_BLOCKTIME=0", b"KMP_BLOCKTIME=200ms", b"KMP_BLOCKTIME=1ms"):
    rt.kmp_set_defaults(setting)
    for _ in range(2):  # once with MKL's worker asleep, once with it awake
        time.sleep(0.01)
        same.append(all(np.array_equal(gemm.matmul(a, b), f) for (a, b), f in zip(cases, first)))
print(rt.kmp_get_blocktime(), len(first), all(same))
"""


def test_block_time_never_changes_bits():
    # how MKL's idle worker waits (asleep, spinning 1 ms or 200 ms) is not how it sums:
    # every product at two threads has the same bits under each block time
    env = dict(os.environ, PYTHONPATH=ROOT)
    for var in ("MKL_THREADING_LAYER", "EMBER_MKL", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                *blas_openmp.WAIT_VARS):
        env.pop(var, None)
    r = subprocess.run([sys.executable, "-c", _BITS_CHILD], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["1", "13", "True"]
