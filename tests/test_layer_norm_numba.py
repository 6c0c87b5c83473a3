"""Layer norm's numba row kernels (ember/ops/_norm_numba.py, the ember[fast] extra):
float32 layer norm against torch on both paths (numba and the NumPy blocks), the two
paths against each other, every combination of weight/bias/gradients asked for, special
values, and the NumPy path running where numba is missing."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import ember
from ember.ops import normalization as norm

F32 = np.float32


@pytest.fixture(params=["numba", "numpy"])
def path(request, monkeypatch):
    """Each test runs on the numba kernels and on the NumPy blocks."""
    if request.param == "numba":  # numba is a test dependency: the kernels must load
        assert norm._row_kernels(np.zeros(1, F32)) is not None
    else:
        monkeypatch.setitem(norm._NUMBA, "rows", None)
    return request.param


def _run(m, x, w, b, g, shape, need_x=True):
    x = m.tensor(x, requires_grad=need_x)
    w = None if w is None else m.tensor(w, requires_grad=True)
    b = None if b is None else m.tensor(b, requires_grad=True)
    y = m.nn.functional.layer_norm(x, shape, w, b, 1e-5)
    if y.requires_grad:
        y.backward(m.tensor(g))
    return [y.detach().numpy()] + [None if t is None or t.grad is None else t.grad.numpy()
                                   for t in (x, w, b)]


def _check(x, w, b, shape, need_x=True, rtol=1e-5, atol=1e-5):
    rng = np.random.default_rng(3)
    g = rng.standard_normal(x.shape).astype(F32)
    got = _run(ember, x, w, b, g, shape, need_x)
    want = _run(torch, x, w, b, g, shape, need_x)
    rows = x.size // max(int(np.prod(shape)), 1)
    for name, a, e in zip(("out", "x.grad", "weight.grad", "bias.grad"), got, want):
        assert (a is None) == (e is None), name
        if a is not None:
            assert a.dtype == e.dtype and a.shape == e.shape, name
            # the parameters' gradients are sums over the rows: float32 rounding grows
            # with their number
            k = 1 if name in ("out", "x.grad") else max(1.0, np.sqrt(rows) / 4)
            np.testing.assert_allclose(a, e, rtol=rtol * k, atol=atol * k, err_msg=name)


@pytest.mark.parametrize("shape,norm_shape", [((16, 64, 128), (128,)), ((7, 33), (33,)),
                                              ((3, 5, 4, 6), (4, 6)), ((1, 300), (300,))])
@pytest.mark.parametrize("affine", ["both", "weight", "bias"])
def test_against_torch(path, shape, norm_shape, affine):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 1).astype(F32)
    w = rng.standard_normal(norm_shape).astype(F32) if affine != "bias" else None
    b = rng.standard_normal(norm_shape).astype(F32) if affine != "weight" else None
    _check(x, w, b, norm_shape)


def test_only_parameter_gradients(path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((10, 40)).astype(F32)
    _check(x, rng.standard_normal(40).astype(F32), rng.standard_normal(40).astype(F32),
           (40,), need_x=False)


def test_special_values(path):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 16)).astype(F32)
    x[1, 3], x[2, 0], x[3, 5] = np.nan, np.inf, -np.inf
    x[4] = 7.0                                   # a constant row: zero variance
    _check(x, rng.standard_normal(16).astype(F32), rng.standard_normal(16).astype(F32),
           (16,))
    # (a row of huge values, whose variance overflows, is test_rows_whose_variance_...'s)


def test_kernels_match_the_numpy_blocks(monkeypatch):
    """The kernels do the blocks' float32 operations in the same order; only the row
    sums' order differs, by an ulp or two."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((64, 96)) * 2 - 1).astype(F32)
    w, b = rng.standard_normal(96).astype(F32), rng.standard_normal(96).astype(F32)
    g = rng.standard_normal(x.shape).astype(F32)
    assert norm._row_kernels(x) is not None
    fast = _run(ember, x, w, b, g, (96,))
    monkeypatch.setitem(norm._NUMBA, "rows", None)
    slow = _run(ember, x, w, b, g, (96,))
    for a, e in zip(fast, slow):
        np.testing.assert_allclose(a, e, rtol=2e-6, atol=2e-6)


def test_float64_takes_the_numpy_blocks(monkeypatch):
    calls = []
    k = norm._row_kernels(np.zeros(1, F32))

    class Spy:
        def __getattr__(self, name):
            calls.append(name)
            return getattr(k, name)
    monkeypatch.setitem(norm._NUMBA, "rows", Spy())
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 12))
    _check(x, rng.standard_normal(12), rng.standard_normal(12), (12,))
    assert calls == []
    _check(np.ascontiguousarray(x, F32), None, rng.standard_normal(12).astype(F32), (12,))
    assert calls == ["forward_rows", "backward_rows"]
    # a transposed float32 input: its rows are gathered by the reshape, then the kernels
    _check(x.astype(F32).T.copy().T, rng.standard_normal(12).astype(F32), None, (12,))
    assert calls == ["forward_rows", "backward_rows"] * 2


def test_without_numba_the_numpy_blocks_run():
    code = ("import sys; sys.modules['numba'] = None\n"
            "import numpy as np, ember\n"
            "from ember.ops import normalization as norm\n"
            "x = ember.randn(4, 8, requires_grad=True)\n"
            "w = ember.ones(8, requires_grad=True)\n"
            "ember.nn.functional.layer_norm(x, (8,), w, None).sum().backward()\n"
            "assert norm._NUMBA['rows'] is None, norm._NUMBA\n"
            "assert x.grad is not None and w.grad is not None\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("rows,d", [(1000, 64), (300, 64), (4096, 128), (9, 33)])
def test_numpy_blocks_bits_with_the_weight_in_long_rows(monkeypatch, rows, d):
    """The NumPy blocks apply the weight and bias to many rows per inner loop
    (``norm_layouts._RowTile``, with the rows past the last whole tile done as before):
    the output and the input's gradient are the bits of the plain row-broadcast
    operations, and near torch's."""
    monkeypatch.setitem(norm._NUMBA, "rows", None)
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((rows, d)) * 2 + 0.5).astype(F32)
    w, b = rng.standard_normal(d).astype(F32), rng.standard_normal(d).astype(F32)
    g = rng.standard_normal(x.shape).astype(F32)
    out, gx = _run(ember, x, w, b, g, (d,))[:2]
    # the same float32 operations broadcast one row at a time
    m = x @ np.ones(d, F32)
    m /= d
    xc = x - m[:, None]
    v = (xc[:, None, :] @ xc[:, :, None]).reshape(-1) / F32(d)
    r = 1.0 / np.sqrt(v + 1e-5)
    xh = xc * r[:, None]
    want = xh * w
    want += b
    assert np.array_equal(out, want)
    # backward from the normalized rows forward kept: gx = r * (g - sum(g)/d - xh *
    # sum(g * xh)/d) with g = gy * w, each operation along whole rows or broadcast
    q = g * xh
    a, c = g @ w, q @ w
    want_gx = g * w
    want_gx -= xh * (c / d)[:, None]
    want_gx -= (a / d)[:, None]
    want_gx *= r[:, None]
    assert np.array_equal(gx, want_gx)
    t_out, t_gx = _run(torch, x, w, b, g, (d,))[:2]
    np.testing.assert_allclose(out, t_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gx, t_gx, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("affine", [True, False])
def test_numpy_blocks_second_pass_recomputes_the_kept_rows(monkeypatch, affine):
    """Forward hands its normalized rows to the first backward; a second pass through a
    retained graph recomputes them by forward's operations: the same gradients, bit for
    bit, and torch's."""
    monkeypatch.setitem(norm._NUMBA, "rows", None)
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((50, 24)) * 3 + 1).astype(F32)
    w = rng.standard_normal(24).astype(F32) if affine else None
    b = rng.standard_normal(24).astype(F32)
    g = rng.standard_normal(x.shape).astype(F32)
    res = {}
    for m in (ember, torch):
        ts = [m.tensor(a, requires_grad=True) for a in (x, w, b) if a is not None]
        y = m.nn.functional.layer_norm(ts[0], (24,), ts[1] if affine else None, ts[-1])
        if m is ember:
            assert y.grad_fn.xhat is not None
        passes = [m.autograd.grad(y, ts, m.tensor(g), retain_graph=True) for _ in range(2)]
        if m is ember:
            assert y.grad_fn.xhat is None
        res[m] = [[t.numpy() for t in p] for p in passes]
    for a, b_ in zip(*res[ember]):
        assert np.array_equal(a, b_)
    for a, t in zip(res[ember][0], res[torch][0]):
        np.testing.assert_allclose(a, t, rtol=1e-5, atol=1e-5)


def _exact_norm(x, axes, w=None, b=None):
    """The normalization of ``x`` over ``axes`` in double on the rows scaled to 1 (no
    overflow), eps 1e-5, times ``w`` plus ``b``."""
    xd = x.astype(np.float64)
    s = np.abs(xd).max(axis=axes, keepdims=True)
    xs = xd / s
    xc = xs - xs.mean(axis=axes, keepdims=True)
    y = xc / np.sqrt((xc * xc).mean(axis=axes, keepdims=True) + 1e-5 / (s * s))
    y = y if w is None else y * w
    return y if b is None else y + b


@pytest.mark.parametrize("affine", ["both", "none"])
@pytest.mark.parametrize("big", [1e20, 8.5e37, -3e38])
def test_rows_whose_variance_overflows_are_normalized(path, affine, big):
    """A float32 row whose variance overflows (one value of 1e20 among ordinary ones, or
    a row of values near the largest float) is normalized exactly: finite, as the
    double computation on the scaled row (ember gave NaN; torch gives the bias alone, its
    variance infinite, or NaN for some row lengths); ordinary rows keep their bits, and
    rows holding inf or NaN stay NaN."""
    rng = np.random.default_rng(5)
    for D in (1, 5, 24, 30, 100, 1000):
        x = rng.standard_normal((4, D)).astype(F32)
        w = b = None
        if affine == "both":
            w, b = rng.standard_normal(D).astype(F32), rng.standard_normal(D).astype(F32)
        plain = ember.nn.functional.layer_norm(ember.tensor(x), (D,), *(
            None if a is None else ember.tensor(a) for a in (w, b))).numpy()
        x[0, D // 3] = big
        x[2] = (big * rng.uniform(-1, 1, D)).astype(F32)
        x[3, 0] = np.inf
        tw, tb = (None, None) if w is None else (ember.tensor(w), ember.tensor(b))
        y = ember.nn.functional.layer_norm(ember.tensor(x), (D,), tw, tb).numpy()
        want = _exact_norm(x[:3], (1,), w, b)
        np.testing.assert_allclose(y[:3], want, rtol=1e-5, atol=2e-5 * np.sqrt(D))
        assert np.isnan(y[3]).all()
        np.testing.assert_array_equal(y[1], plain[1])


def test_overflowing_rows_of_other_norms():
    """Group norm's groups and layer norm over several dims (the general path) and of
    float64 (values near 1e200) are recomputed the same way; the gradient of a row of
    1e20 is finite."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 4, 5)).astype(F32)
    x[0, 1, 2] = 1e20
    y = ember.nn.functional.group_norm(ember.tensor(x), 2).numpy()
    want = _exact_norm(x.reshape(2, 2, 10), (2,)).reshape(x.shape)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    y = ember.nn.functional.layer_norm(ember.tensor(x), (4, 5)).numpy()
    np.testing.assert_allclose(y, _exact_norm(x, (1, 2)), rtol=1e-5, atol=1e-5)
    xd = rng.standard_normal((3, 8))
    xd[0, 3] = 1e200
    y = ember.nn.functional.layer_norm(ember.tensor(xd), (8,)).numpy()
    np.testing.assert_allclose(y, _exact_norm(xd, (1,)), rtol=1e-12, atol=1e-12)
    t = ember.tensor(x, requires_grad=True)
    ember.nn.functional.layer_norm(t, (5,), ember.ones(5), ember.zeros(5)).square().sum() \
        .backward()
    assert np.isfinite(t.grad.numpy()).all()
