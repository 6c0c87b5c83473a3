"""ember[mkl] beside PyTorch: MKL's threading layer against the OpenMP runtime the process
already has. PyTorch loads GNU OpenMP (libgomp) into the global symbol scope; MKL's Intel
layer then calls libgomp's ``omp_get_num_threads`` from Intel OpenMP's threads and its
threaded products come out wrong. Each combination -- import order, thread count,
``MKL_THREADING_LAYER``, a libmkl_rt set to Intel's layer by someone else first -- runs
in a fresh child process, its products compared with float64 references."""
import os
import subprocess
import sys

import pytest

from ember.backend import gemm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import ctypes, sys, warnings
order, threads, preset = sys.argv[1], int(sys.argv[2]), sys.argv[3]
warnings.simplefilter("always")
import numpy as np
if order == "torch_first":
    import torch  # noqa: F401
if preset == "intel":  # another user of libmkl_rt chose Intel's layer before ember
    from ember.backend import gemm as g
    other = ctypes.CDLL(g.library_path())
    other.MKL_Set_Threading_Layer(0)
    other.MKL_Get_Max_Threads()
import ember
from ember.backend import gemm
if order == "ember_first":
    import torch  # noqa: F401,F811
ember.set_num_threads(threads)
with warnings.catch_warnings(record=True) as caught:
    gemm.mkl_available()
if order == "torch_after_load":
    import torch  # noqa: F401,F811
lib = gemm._lib[0]
rng = np.random.default_rng(0)
calls = []
for dt in (np.float32, np.float64):
    r = lambda *s: rng.standard_normal(s).astype(dt)
    w = r(256, 784)
    calls += [(r(128, 784), r(784, 256)), (r(1024, 1024), r(1024, 1024)),
              (r(1024, 784), w.T),  # linear's x @ w.T
              (r(8, 256, 512), r(8, 256, 512).swapaxes(1, 2)),  # batched, strided
              (r(4, 300, 200), r(200, 100))]  # a stack times one matrix
worst = 0.0
for a, b in calls:
    got = gemm.matmul(a, b)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    bound = 2 * a.shape[-1] * np.finfo(a.dtype).eps * np.matmul(
        np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    worst = max(worst, float(np.max(np.abs(got - ref) / bound)))
x, w, bias = (rng.standard_normal(s).astype(np.float32) for s in ((512, 784), (256, 784), (256,)))
got = gemm.addmm(bias, x, w.T)
ref = x.astype(np.float64) @ w.T.astype(np.float64) + bias
bound = 2 * 785 * np.finfo(np.float32).eps * (np.abs(x).astype(np.float64) @ np.abs(w.T) + 1)
worst = max(worst, float(np.max(np.abs(got - ref) / bound)))
warned = [str(c.message) for c in caught if issubclass(c.category, RuntimeWarning)]
layer = lib.lib.MKL_Set_Threading_Layer(-1) if lib else -1  # -1: read, change nothing
print(worst, layer, lib.num_threads if lib else 0, len(warned))
"""

_INTEL, _SEQUENTIAL, _GNU = 0, 1, 3


def _run(order, threads, layer_env=None, preset=""):
    env = dict(os.environ, PYTHONPATH=ROOT)
    for var in ("MKL_THREADING_LAYER", "EMBER_MKL", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(var, None)
    if layer_env is not None:
        env["MKL_THREADING_LAYER"] = layer_env
    r = subprocess.run([sys.executable, "-c", _CHILD, order, str(threads), preset or "-"],
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    worst, layer, mkl_threads, warned = r.stdout.split()
    return float(worst), int(layer), int(mkl_threads), int(warned)


def test_the_extra_is_installed():
    assert gemm.library_path() is not None  # the test extra installs the mkl wheel


# (import order, layer ember picks there): torch imported before MKL loads puts libgomp
# in the global scope first -> MKL's GNU layer on that libgomp; torch imported after
# MKL loaded finds Intel's layer already bound to libiomp5 (also right)
ORDERS = [("torch_first", _GNU), ("ember_first", _GNU), ("torch_after_load", _INTEL),
          ("no_torch", _INTEL)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("order,layer", ORDERS, ids=[o for o, _ in ORDERS])
def test_products_are_right_in_every_import_order(order, layer, threads):
    worst, got_layer, mkl_threads, warned = _run(order, threads)
    assert worst <= 1.0  # within a k-term float sum's rounding of the float64 product
    assert (got_layer, mkl_threads, warned) == (layer, threads, 0)


@pytest.mark.parametrize("order", ["torch_first", "no_torch", "torch_after_load"])
@pytest.mark.parametrize("layer_env,layers", [("GNU", {_GNU}), ("SEQUENTIAL", {_SEQUENTIAL}),
                                              ("INTEL", {_INTEL, _GNU})])
def test_the_environments_layer_is_kept_and_right(order, layer_env, layers):
    # MKL_THREADING_LAYER is MKL's to read (ember sets no layer then); INTEL with libgomp
    # in the global scope is turned into GNU by MKL 2026 itself, and where an MKL keeps
    # it, ember runs it at one thread (see the next test)
    worst, got_layer, mkl_threads, _ = _run(order, 2, layer_env)
    assert worst <= 1.0
    assert got_layer in layers
    assert mkl_threads == (1 if got_layer == _SEQUENTIAL else 2)


@pytest.mark.parametrize("threads", [1, 2])
def test_intel_layer_chosen_before_ember_is_refused_with_a_warning(threads):
    # libmkl_rt already on Intel's layer (by another library) in a process whose OpenMP
    # functions are libgomp's: ember cannot change the layer any more, and MKL's thread
    # count is then libgomp's to read (MKL_Set_Num_Threads(1) does not hold), so ember
    # keeps NumPy's products and says why
    worst, got_layer, mkl_threads, warned = _run("torch_first", threads, preset="intel")
    assert worst <= 1.0
    assert (got_layer, mkl_threads, warned) == (-1, 0, 1)


def test_intel_layer_chosen_before_ember_with_mkl_required_raises():
    env = dict(os.environ, PYTHONPATH=ROOT, EMBER_MKL="1")
    env.pop("MKL_THREADING_LAYER", None)
    r = subprocess.run([sys.executable, "-c", _CHILD, "torch_first", "2", "intel"], env=env,
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "RuntimeError" in r.stderr and "MKL_THREADING_LAYER=GNU" in r.stderr


def test_detection_of_the_global_openmp_runtime():
    # this process imported torch (conftest/oracle): libgomp is in the global scope, and
    # a fresh one without torch has no OpenMP functions there
    import torch  # noqa: F401
    assert gemm._global_openmp_is_gnu() is True
    probe = "from ember.backend import gemm; print(gemm._global_openmp_is_gnu())"
    r = subprocess.run([sys.executable, "-c", probe], env=dict(os.environ, PYTHONPATH=ROOT),
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "False", r.stderr
