"""ember[mkl]: matrix products on MKL's cblas gemm (ember.backend.gemm) against np.matmul,
a float64 reference and torch (whose CPU BLAS is MKL); the dispatch threshold, the
EMBER_MKL switch, a library that cannot be loaded, lazy loading and the thread count."""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import ember
from ember.backend import gemm
from ember.backend import threads as T

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def mkl():
    # the test extra installs the mkl wheel: it must load here, under EMBER_MKL=0 too
    # (then for this module's tests alone: the environment's choice is given back after)
    with pytest.MonkeyPatch.context() as env:
        chosen = gemm.mkl_available()
        if not chosen:
            env.setenv("EMBER_MKL", "1")
            gemm._reset()
        assert gemm.mkl_available(), gemm.library_path()
        yield gemm._lib[0]
        if not chosen:
            gemm._reset()


@pytest.fixture
def calls(mkl, monkeypatch):
    """Counts of MKL calls ({"gemm": n, "batch": n}) made while the test runs."""
    seen = {"gemm": 0, "batch": 0}
    for kind in seen:
        table = getattr(mkl, kind)
        for dt, fn in list(table.items()):
            def counting(*args, fn=fn, kind=kind):
                seen[kind] += 1
                return fn(*args)
            monkeypatch.setitem(table, dt, counting)
    return seen


@pytest.fixture
def every_product(monkeypatch):
    monkeypatch.setattr(gemm, "THRESHOLD", 0)


@pytest.fixture
def fresh(monkeypatch):
    """gemm forgets MKL for the test (the next product looks again) and gets it back
    after."""
    saved = gemm._lib[0]
    gemm._reset()
    yield
    gemm._reset()
    gemm._lib[0] = saved
    if saved:
        T.add_blas(saved)


def _rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def _cases():
    """(name, a, b, goes to MKL) with every layout the dispatcher meets."""
    rng = np.random.default_rng(0)
    out = []
    for dt in (np.float32, np.float64):
        r = lambda *s, dt=dt: _rand(rng, s, dt)
        big = r(60, 70)
        out += [
            (f"plain {dt.__name__}", r(33, 47), r(47, 29), True),
            (f"one row {dt.__name__}", r(1, 47), r(47, 29), True),
            (f"one column {dt.__name__}", r(33, 47), r(47, 1), True),
            (f"a transposed {dt.__name__}", r(47, 33).T, r(47, 29), True),
            (f"b transposed {dt.__name__}", r(33, 47), r(29, 47).T, True),
            (f"both transposed {dt.__name__}", r(47, 33).T, r(29, 47).T, True),
            (f"row slices {dt.__name__}", big[3:36, 5:52], big[2:49, 10:39], True),
            (f"every other row {dt.__name__}", big[::2, :47], big[:47, ::1][:, 3:32], True),
            (f"strided columns {dt.__name__}", big[:33, ::2][:, :30], r(30, 29), False),
            (f"k=1 outer product {dt.__name__}", r(33, 1), r(1, 29), True),
            (f"batched {dt.__name__}", r(6, 33, 47), r(6, 47, 29), True),
            (f"batched transposed {dt.__name__}", r(6, 47, 33).swapaxes(1, 2),
             r(6, 29, 47).swapaxes(1, 2), True),
            (f"batch times matrix {dt.__name__}", r(6, 33, 47), r(47, 29), True),
            (f"matrix times batch {dt.__name__}", r(33, 47), r(6, 47, 29), True),
            (f"broadcast batch dims {dt.__name__}", r(4, 1, 33, 47), r(3, 47, 29), True),
            (f"broadcast both {dt.__name__}", r(4, 1, 33, 47), r(1, 3, 47, 29), True),
            (f"sliced batch {dt.__name__}", r(8, 3, 33, 47)[::2], r(3, 47, 29), True),
            (f"zero rows {dt.__name__}", r(0, 47), r(47, 29), False),
            (f"zero inner {dt.__name__}", r(33, 0), r(0, 29), False),
            (f"empty batch {dt.__name__}", r(0, 33, 47), r(0, 47, 29), False),
        ]
    a, b = _rand(rng, (33, 47), np.float32), _rand(rng, (47, 29), np.float32)
    a[3, 5], a[7, :] = np.nan, np.inf
    b[:, 4], b[10, 11] = -np.inf, np.nan
    out.append(("NaN and inf float32", a, b, True))
    # (float16 is multiplied in float32, on MKL when that product is large enough)
    out.append(("float16", a.astype(np.float16)[:, :8], b.astype(np.float16)[:8], True))
    out.append(("mixed dtypes", a, b.astype(np.float64), False))
    out.append(("vector", a, b[:, 0], False))
    return out


CASES = _cases()


def _check_rounding(r, a, b):
    """``r`` is ``a @ b`` within the rounding of a k-term sum in the operands' precision."""
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert r.shape == ref.shape and r.dtype == np.result_type(a, b)
    fin = np.isfinite(ref)
    assert np.array_equal(np.isnan(r), np.isnan(ref))
    assert np.array_equal(r[~fin & ~np.isnan(ref)], ref[~fin & ~np.isnan(ref)])
    k = a.shape[-1]
    eps = np.finfo(r.dtype).eps
    with np.errstate(invalid="ignore"):
        bound = 2 * max(k, 1) * eps * np.matmul(np.abs(a).astype(np.float64),
                                                np.abs(b).astype(np.float64))
    assert np.all(np.abs(r[fin] - ref[fin]) <= bound[fin] + np.finfo(r.dtype).tiny)


@pytest.mark.parametrize("name,a,b,on_mkl", CASES, ids=[c[0] for c in CASES])
def test_products_match_numpy_torch_and_the_exact_value(name, a, b, on_mkl, calls,
                                                        every_product):
    with np.errstate(invalid="ignore"):
        r = gemm.matmul(a, b)
        e = np.matmul(a, b)
    assert (calls["gemm"] + calls["batch"] > 0) == on_mkl
    assert r.shape == e.shape and r.dtype == e.dtype
    if a.dtype.kind == "f" and a.dtype == b.dtype and a.dtype != np.float16:
        _check_rounding(r, a, b)
    if a.dtype == np.float16:  # summed in float32, rounded once (as PyTorch's kernel)
        e = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
        np.testing.assert_array_equal(r, e)
    elif not on_mkl:  # NumPy's own result, bit for bit
        np.testing.assert_array_equal(r, e)
    if a.dtype != np.float16 and a.dtype == b.dtype:
        t = torch.matmul(torch.from_numpy(np.ascontiguousarray(a)),
                         torch.from_numpy(np.ascontiguousarray(b))).numpy()
        np.testing.assert_allclose(r, t, rtol=1e-4 if a.dtype == np.float32 else 1e-12,
                                   atol=1e-4 if a.dtype == np.float32 else 1e-12)


def test_no_copy_of_transposed_operands(every_product, calls, monkeypatch):
    # a transposed or row-sliced operand is passed with a flag and leading dimension
    made = []
    monkeypatch.setattr(np, "ascontiguousarray", lambda *a, **k: made.append(1))
    rng = np.random.default_rng(1)
    a, b = _rand(rng, (60, 40), np.float32), _rand(rng, (80, 30), np.float32)
    r = gemm.matmul(a.T, b[10:70])
    assert not made and calls["gemm"] == 1
    _check_rounding(r, a.T, b[10:70])


def test_bit_equal_to_torch_counts(every_product, calls):
    """How many of the float products agree with torch bit for bit: with MKL (torch's
    own BLAS) and with NumPy's OpenBLAS; run with ``-s`` to see the counts."""
    mkl_equal = numpy_equal = total = 0
    for _name, a, b, on_mkl in CASES:
        if not on_mkl or a.dtype != b.dtype:
            continue
        with np.errstate(invalid="ignore"):
            t = torch.matmul(torch.from_numpy(np.ascontiguousarray(a)),
                             torch.from_numpy(np.ascontiguousarray(b))).numpy()
            r = gemm.matmul(a, b)
            with gemm.numpy_only():
                e = gemm.matmul(a, b)
        total += 1
        mkl_equal += np.array_equal(r, t, equal_nan=True)
        numpy_equal += np.array_equal(e, t, equal_nan=True)
    print(f"\nbit-equal to torch, test shapes: MKL {mkl_equal}/{total}, "
          f"NumPy {numpy_equal}/{total}")
    assert total >= 30 and calls["gemm"] + calls["batch"] >= total
    assert mkl_equal >= numpy_equal
    # the products of the benchmark workloads, each as is and with either operand
    # transposed, at their real size (above the threshold)
    rng = np.random.default_rng(7)
    mkl_equal = numpy_equal = total = 0
    for dt in (np.float32, np.float64):
        for sa, sb in WORKLOAD_PRODUCTS:
            a, b = _rand(rng, sa, dt), _rand(rng, sb, dt)
            at = np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)
            bt = np.ascontiguousarray(b.swapaxes(-1, -2)).swapaxes(-1, -2)
            for x, y in ((a, b), (at, b), (a, bt)):
                t = torch.matmul(torch.from_numpy(x), torch.from_numpy(y)).numpy()
                with gemm.numpy_only():
                    e = gemm.matmul(x, y)
                total += 1
                mkl_equal += np.array_equal(gemm.matmul(x, y), t)
                numpy_equal += np.array_equal(e, t)
    print(f"bit-equal to torch, workload shapes: MKL {mkl_equal}/{total}, "
          f"NumPy {numpy_equal}/{total}")
    assert mkl_equal >= numpy_equal and mkl_equal >= total // 2


# the products of benchmarks/training_steps.py and cnn_step.py (docs/performance/blas-mkl.md)
WORKLOAD_PRODUCTS = [((128, 784), (784, 256)), ((128, 256), (256, 128)),
                     ((256, 128), (128, 784)), ((1024, 784), (784, 256)),
                     ((32, 128), (128, 512)), ((1024, 64), (64, 512)),
                     ((1024, 128), (128, 384)), ((4, 128, 128), (4, 128, 128)),
                     ((16, 64, 288), (288, 121)), ((128, 1600), (1600, 64))]


def test_threshold_is_respected(mkl, calls):
    rng = np.random.default_rng(2)
    t = gemm.THRESHOLD
    m = 16
    k = n = int((t / (2 * m)) ** 0.5) - 2  # just under
    a, b = _rand(rng, (m, k), np.float32), _rand(rng, (k, n), np.float32)
    assert 2 * m * n * k < t
    np.testing.assert_array_equal(gemm.matmul(a, b), np.matmul(a, b))
    assert calls == {"gemm": 0, "batch": 0}
    b = _rand(rng, (k, n + 8), np.float32)  # just over
    assert 2 * m * (n + 8) * k >= t
    gemm.matmul(a, b)
    assert calls == {"gemm": 1, "batch": 0}
    # a batch of small matrices stays on NumPy however large the batch
    x = _rand(rng, (256, 32, 32), np.float32)
    np.testing.assert_array_equal(gemm.matmul(x, x), np.matmul(x, x))
    assert calls == {"gemm": 1, "batch": 0}
    # ... a batch of large ones goes to MKL in one call, a stack times a matrix as one product
    x = _rand(rng, (3, 128, 128), np.float32)
    _check_rounding(gemm.matmul(x, x), x, x)
    _check_rounding(gemm.matmul(x, x[0]), x, x[0])
    assert calls == {"gemm": 2, "batch": 1}


def test_out_argument(mkl, calls, every_product):
    rng = np.random.default_rng(3)
    a, b = _rand(rng, (20, 30), np.float64), _rand(rng, (30, 10), np.float64)
    buf = np.full((40, 10), np.nan)
    out = buf[::2]  # rows a leading dimension apart
    assert gemm.matmul(a, b, out=out) is out and calls["gemm"] == 1
    _check_rounding(out, a, b)
    assert np.isnan(buf[1::2]).all()
    # an out that overlaps an operand is NumPy's (which buffers)
    c = np.concatenate([a[:, :10], np.zeros((20, 20))], 1)
    want = np.matmul(c[:, :10], np.eye(10))
    gemm.matmul(c[:, :10], np.eye(10), out=c[:, 10:20])
    np.testing.assert_array_equal(c[:, 10:20], want)
    assert calls["gemm"] == 1


def test_ember_ops_run_on_mkl_and_match_torch(mkl, calls):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 200), dtype=np.float32)
    w = rng.standard_normal((300, 200), dtype=np.float32)
    q = rng.standard_normal((4, 128, 160), dtype=np.float32)
    got, want = [], []
    for m, out in ((ember, got), (torch, want)):
        xt = m.tensor(x, requires_grad=True)
        wt = m.tensor(w, requires_grad=True)
        qt = m.tensor(q)
        y = m.nn.functional.linear(xt, wt)
        y.square().sum().backward()
        out += [y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(),
                (xt @ wt.T).detach().numpy(), m.bmm(qt, qt.transpose(1, 2)).numpy()]
    assert calls["gemm"] >= 4 and calls["batch"] >= 1
    for g, t in zip(got, want):
        np.testing.assert_allclose(g, t, rtol=1e-4, atol=1e-3)


def test_threads_follow_set_num_threads(mkl):
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        assert mkl.num_threads == 1
        ember.set_num_threads(2)
        assert mkl.num_threads == 2
        with T.single_blas(steps=4):
            assert mkl.num_threads == 1
        assert mkl.num_threads == 2
    finally:
        ember.set_num_threads(before)


def test_a_library_that_cannot_be_loaded(fresh, monkeypatch):
    rng = np.random.default_rng(5)
    a = _rand(rng, (200, 200), np.float32)
    monkeypatch.setattr(gemm, "library_path", lambda: "/nonexistent/libmkl_rt.so.2")
    monkeypatch.delenv("EMBER_MKL", raising=False)
    with pytest.warns(RuntimeWarning, match=r"ember\[mkl\]"):
        r = gemm.matmul(a, a)
    np.testing.assert_array_equal(r, np.matmul(a, a))
    assert gemm._lib[0] is False and not gemm.mkl_available()
    gemm._reset()
    monkeypatch.setenv("EMBER_MKL", "1")
    with pytest.raises(RuntimeError, match=r"ember\[mkl\]"):
        gemm.matmul(a, a)


def test_the_extra_not_installed(fresh, monkeypatch):
    rng = np.random.default_rng(6)
    a = _rand(rng, (200, 200), np.float32)
    monkeypatch.setattr(gemm, "library_path", lambda: None)
    monkeypatch.delenv("EMBER_MKL", raising=False)
    np.testing.assert_array_equal(gemm.matmul(a, a), np.matmul(a, a))  # quietly NumPy
    assert gemm._lib[0] is False
    gemm._reset()
    monkeypatch.setenv("EMBER_MKL", "1")
    with pytest.raises(RuntimeError, match=r"pip install 'ember\[mkl\]'"):
        gemm.matmul(a, a)


_PROBE = """
import numpy as np
import ember
from ember.backend import gemm
def loaded():
    with open('/proc/self/maps') as f:
        return 'libmkl_rt' in f.read()
before = loaded()
a = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
r = (ember.tensor(a) @ ember.tensor(a)).numpy()
assert np.array_equal(np.isfinite(r), np.ones_like(r, bool))
print(before, loaded(), gemm._lib[0] is not False)
"""


@pytest.mark.parametrize("env,want", [("", "False True True"), ("0", "False False False")])
def test_lazy_loading_and_the_switch(env, want):
    e = dict(os.environ, PYTHONPATH=ROOT, EMBER_MKL=env)
    r = subprocess.run([sys.executable, "-c", _PROBE], env=e, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[-2] == want


# linear's products of the benchmark workloads, (rows, in_features, out_features)
LINEAR_SHAPES = [(128, 784, 256), (128, 256, 128), (1024, 784, 256), (1024, 128, 384),
                 (64, 1600, 64), (16 * 64, 128, 256)]


@pytest.fixture
def one_thread():
    """ember (and so MKL) and torch at one thread: with more, either library may split a
    product's sum differently."""
    e, t = ember.get_num_threads(), torch.get_num_threads()
    ember.set_num_threads(1)
    torch.set_num_threads(1)
    yield
    ember.set_num_threads(e)
    torch.set_num_threads(t)


def test_linear_bias_added_in_the_product_as_torch(mkl, calls, one_thread):
    """On MKL, ``linear``'s bias is written first and the product added to it (beta = 1),
    as torch's addmm: the values equal torch's bit for bit, also where the product sums
    over several of MKL's blocks of k (there, the product rounded before adding the bias
    differs); without MKL the values are NumPy's product plus the bias, as before."""
    rng = np.random.default_rng(8)
    differs_when_rounded_first = 0
    for m, k, n in LINEAR_SHAPES:
        x, w, b = _rand(rng, (m, k), np.float32), _rand(rng, (n, k), np.float32), \
            _rand(rng, (n,), np.float32)
        want = torch.nn.functional.linear(*map(torch.from_numpy, (x, w, b))).numpy()
        rounded_first = gemm.matmul(x, w.T) + b
        differs_when_rounded_first += not np.array_equal(rounded_first, want)
        before = calls["gemm"]
        xe = ember.tensor(x, requires_grad=True)
        we, be = ember.tensor(w, requires_grad=True), ember.tensor(b, requires_grad=True)
        recorded = ember.nn.functional.linear(xe, we, be)
        with ember.no_grad():
            fused = ember.nn.functional.linear(xe, we, be)
        # a 3-D input: the product of its rows, reshaped back
        flat = ember.nn.functional.linear(xe.reshape(2, m // 2, k), we, be)
        assert calls["gemm"] == before + 3
        for got in (recorded, fused, flat.reshape(m, n)):
            np.testing.assert_array_equal(got.detach().numpy(), want)
        assert recorded.grad_fn.name() == "AddmmBackward0"
        with gemm.numpy_only():
            with ember.no_grad():
                plain = ember.nn.functional.linear(xe, we, be).numpy()
            np.testing.assert_array_equal(plain, np.matmul(x, w.T) + b)
    assert differs_when_rounded_first >= 2  # the long sums (k = 784, 1600)


def test_addmm_bias_shapes_out_and_fallbacks(mkl, calls, one_thread):
    rng = np.random.default_rng(9)
    a, b = _rand(rng, (300, 200), np.float32), _rand(rng, (200, 100), np.float32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    for bias in (_rand(rng, (100,), np.float32), _rand(rng, (300, 100), np.float32),
                 _rand(rng, (1, 100), np.float32), _rand(rng, (300, 1), np.float32),
                 np.array(0.5, np.float32)):
        before = calls["gemm"]
        r = gemm.addmm(bias, a, b)
        assert calls["gemm"] == before + 1
        np.testing.assert_array_equal(r, torch.addmm(torch.from_numpy(bias), ta, tb).numpy())
    bias = _rand(rng, (100,), np.float32)
    want = torch.addmm(torch.from_numpy(bias), ta, tb).numpy()
    buf = np.full((600, 100), np.nan, np.float32)
    out = buf[::2]  # rows a leading dimension apart
    assert gemm.addmm(bias, a, b, out=out) is out
    np.testing.assert_array_equal(out, want)
    assert np.isnan(buf[1::2]).all()
    # a bias of another dtype: the product, then the bias added
    before = calls["gemm"]
    r = gemm.addmm(bias.astype(np.float64), a, b)
    assert r.dtype == np.float32 and calls["gemm"] == before + 1
    np.testing.assert_array_equal(r, (gemm.matmul(a, b) + bias.astype(np.float64)).astype(
        np.float32))
    out = np.empty((300, 100), np.float32)
    out[0] = bias
    before = calls["gemm"]
    np.testing.assert_array_equal(gemm.addmm(out[0], a, b, out=out), want)  # inside out
    assert calls["gemm"] == before + 1
    # below the threshold: NumPy's product plus the bias, bit for bit as before
    s, w = a[:20, :30], b[:30, :10]
    np.testing.assert_array_equal(gemm.addmm(bias[:10], s, w), np.matmul(s, w) + bias[:10])


def test_narrow_products_go_to_mkl_sooner(mkl, calls):
    """Fewer than 16 output columns: MKL from NARROW_THRESHOLD operations (OpenBLAS's
    kernels leave most of their width idle there); wider products keep THRESHOLD."""
    rng = np.random.default_rng(10)
    x, w = _rand(rng, (512, 128), np.float32), _rand(rng, (10, 128), np.float32)
    assert gemm.NARROW_THRESHOLD <= 2 * 512 * 128 * 10 < gemm.THRESHOLD
    _check_rounding(gemm.matmul(x, w.T), x, w.T)
    assert calls["gemm"] == 1
    np.testing.assert_array_equal(gemm.matmul(x[:256], w.T), np.matmul(x[:256], w.T))
    wide = _rand(rng, (16, 128), np.float32)
    assert 2 * 512 * 128 * 16 < gemm.THRESHOLD
    np.testing.assert_array_equal(gemm.matmul(x, wide.T), np.matmul(x, wide.T))
    assert calls["gemm"] == 1


def test_addmm_without_mkl_is_the_product_plus_the_bias():
    """NumPy's product and the bias added in place (tiled down large results): the same
    bits as ``np.matmul(a, b) + bias``, whatever the row count."""
    rng = np.random.default_rng(11)
    with gemm.numpy_only():
        for m, k, n in ((1024, 64, 256), (1001, 32, 128), (600, 16, 300), (64, 32, 16)):
            a, b = _rand(rng, (m, k), np.float32), _rand(rng, (k, n), np.float32)
            bias = _rand(rng, (n,), np.float32)
            np.testing.assert_array_equal(gemm.addmm(bias, a, b), np.matmul(a, b) + bias)
            out = np.empty((m, n), np.float32)
            assert gemm.addmm(bias, a, b, out=out) is out
            np.testing.assert_array_equal(out, np.matmul(a, b) + bias)
        a, b = _rand(rng, (512, 64), np.float64), _rand(rng, (64, 256), np.float64)
        bias = _rand(rng, (256,), np.float32)  # another dtype: NumPy's casting, as before
        np.testing.assert_array_equal(gemm.addmm(bias, a, b), np.matmul(a, b) + bias)


def test_mlp_inference_equals_torch_bit_for_bit(mkl, one_thread):
    """The benchmark MLP (784-256-128-10) at batch 1024 with torch's weights: every output
    equals torch's with MKL (before the bias went into the product, about a quarter did)."""
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                             torch.nn.Linear(256, 128), torch.nn.ReLU(),
                             torch.nn.Linear(128, 10))
    em = ember.nn.Sequential(ember.nn.Linear(784, 256), ember.nn.ReLU(),
                             ember.nn.Linear(256, 128), ember.nn.ReLU(),
                             ember.nn.Linear(128, 10))
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(12).standard_normal((1024, 784)).astype(np.float32)
    with torch.no_grad():
        want = tm(torch.from_numpy(x)).numpy()
        want_hidden = tm[:4](torch.from_numpy(x)).numpy()
    with ember.no_grad():
        got = em(ember.tensor(x)).numpy()
        np.testing.assert_array_equal(em[:4](ember.tensor(x)).numpy(), want_hidden)
    mkl.lib.MKL_CBWR_Get_Auto_Branch.restype = ctypes.c_int
    if mkl.lib.MKL_CBWR_Get_Auto_Branch() != _MKL_CBWR_COMPATIBLE:
        np.testing.assert_array_equal(got, want)
    else:
        # MKL's compatible code path (the one it runs on non-Intel CPUs such as AMD's
        # EPYC) gives the narrow 1024x128x10 head other last bits than PyTorch's own MKL
        # build there (~15 % of the outputs); the two 784- and 256-wide layers above
        # stay torch's bit for bit
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


_MKL_CBWR_COMPATIBLE = 2  # mkl_cbwr.h: MKL_CBWR_COMPATIBLE


def _x_times_wT_keeps_numpys_bits(rng, ms, ks, ns):
    """``x @ w.T`` and ``b + x @ w.T`` through gemm for every (m, k, n): C-ordered, with
    ``np.matmul``'s bits."""
    for m in ms:
        for k in ks:
            for n in ns:
                x = _rand(rng, (m, k), np.float32)
                w = _rand(rng, (n, k), np.float32)
                r = gemm.matmul(x, w.T)
                assert r.flags.c_contiguous
                np.testing.assert_array_equal(r, np.matmul(x, w.T))
                bias = _rand(rng, (n,), np.float32)
                np.testing.assert_array_equal(gemm.addmm(bias, x, w.T),
                                              np.matmul(x, w.T) + bias)


def test_classifier_heads_by_row_blocks_keep_numpys_bits(monkeypatch):
    """A narrow ``x @ w.T`` (10-15 columns, k of 128-256, a multiple of 128 rows) is
    computed from a row-major copy of the weight, 128 rows at a time: the same bits as
    ``np.matmul`` on every shape that takes that way; other shapes are ``np.matmul``'s."""
    rng = np.random.default_rng(14)
    taken = []
    real = gemm._narrow_by_rows

    def spy(a, b):
        r = real(a, b)
        if r is not None:
            taken.append(a.shape + b.shape[1:])
        return r
    monkeypatch.setattr(gemm, "_narrow_by_rows", spy)
    with gemm.numpy_only():
        _x_times_wT_keeps_numpys_bits(rng, (128, 256, 1024), (128, 200, 256), (10, 13, 15))
        # taken on the BLAS kernels where those blocks were measured to keep the bits
        # (SkylakeX); elsewhere (OpenBLAS's Haswell kernels) every product is np.matmul's
        assert len(taken) == (2 * 3 * 3 * 3 if T.layouts_keep_bits() else 0)
        taken.clear()
        x = _rand(rng, (128, 128), np.float32)
        for a, b in ((x, _rand(rng, (128, 10), np.float32)),            # row-major b
                     (x, _rand(rng, (9, 128), np.float32).T),           # too few columns
                     (_rand(rng, (100, 128), np.float32), _rand(rng, (10, 128), np.float32).T),
                     (_rand(rng, (128, 512), np.float32), _rand(rng, (10, 512), np.float32).T),
                     (x.astype(np.float64), _rand(rng, (10, 128), np.float64).T)):
            np.testing.assert_array_equal(gemm.matmul(a, b), np.matmul(a, b))
        assert taken == []


def test_reordered_products_only_on_the_kernels_they_were_checked_on(monkeypatch):
    """The reordered ways of ``x @ w.T`` follow OpenBLAS's core name: SkylakeX's kernels
    (where their bits were checked) take them, Haswell's and unknown ones do not."""
    libs = T._blas_libs()
    for core, taken in (("skylakex", True), ("haswell", False), (None, False)):
        monkeypatch.setattr(T, "_core_name", lambda lib, core=core: core)
        T._state.pop("layouts", None)  # (the answer is kept until the libraries change)
        assert T.layouts_keep_bits() is (taken and bool(libs))
    T._state.pop("layouts", None)


def test_few_rows_times_a_transposed_weight_keep_numpys_bits(monkeypatch):
    """``x @ w.T`` for a few rows and a row-major ``w`` is computed as ``(w @ x.T).T``
    where that is faster: the same bits as ``np.matmul`` on every shape that takes that
    way (its edges included), C-ordered; other shapes and dtypes are ``np.matmul``'s."""
    rng = np.random.default_rng(13)
    taken = []
    real = gemm._by_transpose


    def spy(a, b):
        r = real(a, b)
        if r is not None:
            taken.append(a.shape + b.shape[1:])
        return r
    monkeypatch.setattr(gemm, "_by_transpose", spy)
    with gemm.numpy_only():
        _x_times_wT_keeps_numpys_bits(rng, (2, 3, 8, 17, 31, 32), (128, 129, 200, 256),
                                      (128, 130, 333, 512))
        # (taken where the kernel keeps the bits, see above)
        assert len(taken) == (2 * 6 * 4 * 4 if T.layouts_keep_bits() else 0)
        taken.clear()
        x = _rand(rng, (32, 128), np.float32)
        for a, b in ((x, _rand(rng, (128, 128), np.float32)),         # row-major b
                     (x, _rand(rng, (128, 128), np.float32).T[:, :100]),  # n too small
                     (_rand(rng, (33, 128), np.float32), _rand(rng, (128, 128), np.float32).T),
                     (x[:, ::2], _rand(rng, (128, 64), np.float32).T),  # k too small
                     (x.astype(np.float64), _rand(rng, (128, 128), np.float64).T)):
            np.testing.assert_array_equal(gemm.matmul(a, b), np.matmul(a, b))
        assert taken == []


def test_layout_routes_follow_the_measured_kernels(monkeypatch):
    """The transposed product and the narrow head's row blocks are taken only on the BLAS
    kernels measured to keep ``np.matmul``'s bits with them (``threads._LAYOUTS_KEEP_BITS``),
    whatever kernel runs here: listed, they are taken; not listed (this machine's kernel
    removed), every product is ``np.matmul``'s own."""
    libs = T._blas_libs()
    core = T._core_name(libs[0]) if libs else None
    rng = np.random.default_rng(15)
    x, w = _rand(rng, (32, 128), np.float32), _rand(rng, (256, 128), np.float32)
    xs, wn = _rand(rng, (128, 128), np.float32), _rand(rng, (10, 128), np.float32)
    for listed in (True, False):
        kernels = {core} if listed else set()
        monkeypatch.setattr(T, "_LAYOUTS_KEEP_BITS", frozenset(kernels))
        T._state.pop("layouts", None)
        assert T.layouts_keep_bits() is (listed and core is not None)
        if listed and core is not None:
            assert gemm._by_transpose(x, w.T) is not None
            assert gemm._narrow_by_rows(xs, wn.T) is not None
        else:
            assert gemm._by_transpose(x, w.T) is None
            assert gemm._narrow_by_rows(xs, wn.T) is None
            with gemm.numpy_only():
                np.testing.assert_array_equal(gemm.matmul(x, w.T), np.matmul(x, w.T))
                np.testing.assert_array_equal(gemm.matmul(xs, wn.T), np.matmul(xs, wn.T))
    T._state.pop("layouts", None)
