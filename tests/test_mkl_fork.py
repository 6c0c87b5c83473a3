"""ember[mkl]: ``os.fork`` right after threaded MKL products, as a DataLoader forks its
workers, never leaves the child hung in MKL, and the child's products have the parent's
bits. Before ember emptied MKL's buffer pools at each fork
(``blas_openmp.guard_fork``), a fork right after another thread had run a product and
been joined copied MKL's allocator lock as held: the child spun in
``mm_account_ptr_by_tid`` forever (4 of 300 forks at block time 0, 24 of 300 at
``KMP_BLOCKTIME=7``). Each case runs in a fresh process (the test process has torch's
GNU OpenMP); a child that hangs is ended by its own alarm and counted.

``python tests/test_mkl_fork.py [FORKS]`` runs the longer sweep and prints the counts."""
import os
import subprocess
import sys

import pytest

from ember.backend import blas_openmp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import os, signal, sys, threading
import numpy as np
import ember
from ember.backend import blas_openmp, gemm
blas_openmp._spare = lambda: True  # (ember's block time on a machine with a core to spare)
forks = int(sys.argv[1])
ember.set_num_threads(2)
rng = np.random.default_rng(0)
a = rng.standard_normal((192, 192)).astype(np.float32)
b = rng.standard_normal((192, 192))
want = gemm.matmul(a, a), gemm.matmul(b, b)
lib = gemm._lib[0]
assert lib and lib.num_threads == 2, "MKL at two threads"
hung = wrong = 0
for i in range(forks):
    gemm.matmul(a, a)
    t = threading.Thread(target=gemm.matmul, args=(b, b))  # a product on another thread
    t.start()
    t.join()
    pid = os.fork()
    if pid == 0:  # a DataLoader worker: its own products, at once
        signal.alarm(20)  # (a hung child spins forever: end it, and count it)
        same = all(np.array_equal(gemm.matmul(x, x), w) for x, w in zip((a, b), want))
        os._exit(0 if same else 3)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        hung += 1
        break  # (one is enough to fail; the rest would cost 20 s each)
    wrong += os.WEXITSTATUS(status) != 0
for x, w in zip((a, b), want):  # and the parent's products are unchanged after the forks
    assert np.array_equal(gemm.matmul(x, x), w)
print(lib.layer, lib.blocktime, hung, wrong)
"""


def _run(forks, **env_vars):
    env = dict(os.environ, PYTHONPATH=ROOT, **env_vars)
    for var in ("MKL_THREADING_LAYER", "EMBER_MKL", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                *(v for v in blas_openmp.WAIT_VARS if v not in env_vars)):
        env.pop(var, None)
    r = subprocess.run([sys.executable, "-c", _CHILD, str(forks)], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.split()


@pytest.mark.parametrize("env", [{}, {"KMP_BLOCKTIME": "7"}], ids=["ember", "user7ms"])
def test_fork_after_threaded_products_never_hangs(env):
    layer, blocktime, hung, wrong = _run(120, **env)
    assert layer == "0"  # Intel OpenMP's layer, the one where this hung
    assert blocktime == ("1" if not env else "None")
    assert (hung, wrong) == ("0", "0")


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    for env in ({}, {"KMP_BLOCKTIME": "7"}, {"KMP_BLOCKTIME": "0"}):
        print(env or "ember's block time", _run(n, **env))
