"""The GRU's numba kernels (ember/ops/_gru_numba.py, the ember[fast] extra): float32
layers against torch on both paths (numba and the NumPy loop), and the kernels against
the generic NumPy loop they replace."""
import dataclasses
import os
import subprocess
import sys
import types

import numpy as np
import pytest
from oracle import cases, check
from test_nn_rnn import packed_case, rnn_case

import ember
from ember.ops import rnn, rnn_gru

F32 = np.float32


@pytest.fixture(params=["numba", "numpy"])
def path(request, monkeypatch):
    """Each test runs on the numba kernels and on the NumPy loop."""
    if request.param == "numba":  # numba is a test dependency: the kernels must load
        assert rnn_gru._kernels(np, np.zeros(1, F32)) is not None
    else:
        monkeypatch.setitem(rnn._FUSED, "gru", None)
    return request.param


def _f32(case):
    # second derivatives replay the layer in Tensor ops, never in the kernels
    return dataclasses.replace(case, dtype=F32, gradgrad=False)


FLOAT32 = [
    _f32(rnn_case("GRU_f32_odd_width", "GRU", I=5, H=13, T=6, B=7, state=True)),
    _f32(rnn_case("GRU_f32_bidir_2layers_bf", "GRU", I=3, H=9, T=5, B=4, state=True,
                  num_layers=2, bidirectional=True, batch_first=True)),
    _f32(rnn_case("GRU_f32_unbatched_nobias", "GRU", unbatched=True, bias=False)),
    _f32(packed_case("GRU_f32_packed_unsorted_bidir", "GRU", [2, 6, 1, 4, 4],
                     enforce_sorted=False, state=True, bidirectional=True, H=11)),
]


@cases(FLOAT32)
def test_float32_gru_matches_torch(case, path):
    check(case)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("projected", [False, True])
def test_kernels_against_the_numpy_loop(reverse, projected):
    """Outputs and gradients within float32 rounding of the generic NumPy loop, over a
    shrinking batch; ``projected``: the layer's input is its input projection."""
    rng = np.random.default_rng(3)
    H, I, bs = 13, 6, (5, 5, 4, 2, 2, 1)
    N, B = sum(bs), bs[0]
    x = rng.standard_normal((N, 3 * H if projected else I)).astype(F32)
    h0 = rng.standard_normal((B, H)).astype(F32)
    w_ih = None if projected else rng.standard_normal((3 * H, I)).astype(F32)
    b_ih = None if projected else rng.standard_normal(3 * H).astype(F32)
    w_hh = rng.standard_normal((3 * H, H)).astype(F32)
    b_hh = rng.standard_normal(3 * H).astype(F32)
    args = (x, h0, None, w_ih, w_hh, b_ih, b_hh, None, bs, reverse)
    got = rnn_gru.forward(np, *args)
    want = rnn._layer_forward(rnn._NP_MATH, rnn._GRUCellMath, *args)
    assert type(got[3]) is rnn_gru._Buffers and type(want[3]) is not rnn_gru._Buffers
    for g, w in zip(got[:2], want[:2]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    gy, ghn = rng.standard_normal((N, H)).astype(F32), rng.standard_normal((B, H)).astype(F32)
    needs = [True] * 8
    bwd = (gy, ghn, None)
    got = rnn_gru.backward(np, *bwd, got[3], x, w_ih, w_hh, None, bs, reverse, needs)
    # the generic loop's activations take the generic backward
    want = rnn_gru.backward(np, *bwd, want[3], x, w_ih, w_hh, None, bs, reverse, needs)
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_float64_and_other_devices_keep_the_numpy_loop():
    assert rnn_gru._kernels(np, np.zeros(1)) is None
    assert rnn_gru._kernels(np, np.zeros(1, F32), np.zeros(1)) is None
    assert rnn_gru._kernels(types.SimpleNamespace(), np.zeros(1, F32)) is None


def test_numba_is_imported_when_a_float32_gru_first_runs():
    code = ("import sys, ember\n"
            "ember.nn.GRU(2, 3).double()(ember.randn(2, 1, 2).double())\n"
            "assert 'numba' not in sys.modules\n"
            "ember.nn.GRU(2, 3)(ember.randn(2, 1, 2))\n"
            "assert 'numba' in sys.modules\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(ember.__file__)))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
