"""Layer norm over one block of rows (a Transformer's activations) runs on ember's two
threads with the bits of one thread: the NumPy passes (the default install) in row
blocks, numba's row kernels (the extra) in row blocks forward and as the input's
gradient beside the weight's and bias's sums backward. Forward, the input's, weight's
and bias's gradients, forward's normalized rows recomputed (a retained graph's second
pass), float32 and float64, rows that are not a multiple of the blocks' grain."""
import numpy as np
import pytest

import ember
from ember.backend import threads as T
from ember.ops import norm_layouts


@pytest.fixture(params=["numpy", "numba"])
def two_threads(monkeypatch, request):
    """ember at two threads, on NumPy's passes or numba's kernels (a test dependency:
    they must load), every split taken (nominal bounds), the calls of layer norm's row
    blocks counted."""
    if request.param == "numpy":
        monkeypatch.setitem(norm_layouts._NUMBA, "rows", None)
    else:
        one = np.ones((1, 1), np.float32)
        assert norm_layouts._row_kernels(one) is not None
    saved = ember.get_num_threads(), T._state["scale_pinned"], T._state["scale"]
    T.scale_bounds(1)
    calls = []
    real = norm_layouts.parallel_rows
    monkeypatch.setattr(norm_layouts, "parallel_rows",
                        lambda fn, rows, *a, **k: calls.append(rows) or real(fn, rows, *a, **k))
    yield calls
    ember.set_num_threads(saved[0])
    T.scale_bounds(saved[2] if saved[1] else None)


def _ln(x, w, b, g):
    """Outputs and gradients of a layer norm: forward, backward, the same backward again
    through the retained graph, and the weight's and bias's alone."""
    xs = ember.tensor(x, requires_grad=True)
    ws = None if w is None else ember.tensor(w, requires_grad=True)
    bs = None if b is None else ember.tensor(b, requires_grad=True)
    D = x.shape[-1]
    y = ember.nn.functional.layer_norm(xs, (D,), ws, bs)
    y.backward(ember.tensor(g), retain_graph=True)
    first = [xs.grad.numpy().copy()] + [t.grad.numpy().copy() for t in (ws, bs) if t is not None]
    for t in (xs, ws, bs):
        if t is not None:
            t.grad = None
    y.backward(ember.tensor(g))  # (forward's normalized rows handed over: recomputed)
    again = [t.grad.numpy().copy() for t in (xs, ws, bs) if t is not None]
    out = [y.detach().numpy().copy()] + first + again
    if ws is not None or bs is not None:  # the input needs no gradient
        ws2 = None if w is None else ember.tensor(w, requires_grad=True)
        bs2 = None if b is None else ember.tensor(b, requires_grad=True)
        ember.nn.functional.layer_norm(ember.tensor(x), (D,), ws2, bs2).backward(
            ember.tensor(g))
        out += [t.grad.numpy().copy() for t in (ws2, bs2) if t is not None]
    return out


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_row_blocks_keep_one_threads_bits(two_threads, dt):
    if not T.kernels_in("norm_row_blocks", norm_layouts._SPLIT_KERNELS):
        pytest.fail("NumPy's OpenBLAS kernel is not one the row blocks were measured on")
    rng = np.random.default_rng(3)
    for shape in ((16, 64, 128), (200, 100), (1000, 7)):
        D = shape[-1]
        x = (rng.standard_normal(shape) * 3 + 1).astype(dt)
        g = rng.standard_normal(shape).astype(dt)
        w, b = rng.standard_normal(D).astype(dt), rng.standard_normal(D).astype(dt)
        for ww, bb in ((w, b), (w, None), (None, b)):
            res = {}
            for n in (1, 2):
                ember.set_num_threads(n)
                two_threads.clear()
                res[n] = _ln(x, ww, bb, g)
                split = [r for r in two_threads if r >= 2]
                # one split forward, two backward (the input's gradient wanted)
                assert (len(split) >= 3) == (n == 2), (shape, n, two_threads)
            for i, (one, two) in enumerate(zip(res[1], res[2])):
                assert np.array_equal(one, two), (shape, dt, i, np.abs(one - two).max())


def test_unmeasured_kernel_keeps_one_block(two_threads, monkeypatch):
    if norm_layouts._NUMBA["rows"]:
        return  # (numba's kernels do not depend on the BLAS)
    monkeypatch.setattr(norm_layouts._threads, "kernels_in", lambda key, kernels: False)
    ember.set_num_threads(2)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1024, 128)).astype(np.float32)
    _ln(x, np.ones(128, np.float32), np.zeros(128, np.float32), x)
    assert two_threads == []
    assert norm_layouts._split_units(1024) == 0
