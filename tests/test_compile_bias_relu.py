"""A compiled plan's linear layer followed by a ReLU over its output alone adds the bias
and applies the ReLU in one loop over the product (``_mkl.linear_into`` with
``_fused.bias_act_loop``, where the product is written into the arena's buffers and
NumPy runs it): the same values as the bias added and the ReLU run after it -- eager
ember's and the plan's without the loop -- to the bit, NaN, infinities and signed
zeros included, and torch's to rounding."""
import copy

import numpy as np
import pytest
import torch
from test_compile_codegen import _state_of, _train  # the same steps

import ember
from ember._compile import _buffers, _fused
from ember.backend import gemm, threads


def _net(m, width, depth=2, dtype=None):
    nn = m.nn
    layers = []
    n_in = 24
    for _ in range(depth):
        layers += [nn.Linear(n_in, width), nn.ReLU()]
        n_in = width
    net = nn.Sequential(*layers, nn.Linear(n_in, 6))
    return net if dtype is None else net.to(dtype)


@pytest.fixture(autouse=True)
def _numpys_products(request):
    """NumPy's products (``EMBER_MKL=0``'s), where the loop runs, except in the tests
    of MKL in use."""
    if "mkl_in_use" in request.node.name:
        yield
        return
    with gemm.numpy_only():
        yield


def _without_loop(fn):
    """``fn()`` with every plan built meanwhile running the ReLU on its own."""
    saved = _buffers.act_of
    _buffers.act_of = lambda st: None
    try:
        return fn()
    finally:
        _buffers.act_of = saved


def _fused_steps(run):
    plan = run._cache[0].plan
    return [st for st in plan.steps if getattr(st.into, "act", None) is not None]


def _inputs(batch, special, dtype=np.float32):
    rng = np.random.default_rng(batch)
    xa = rng.standard_normal((batch, 24)).astype(dtype)
    if special:
        xa[0, 0] = -0.0
        xa[1, :] = 0.0
        xa[2, 3] = np.nan
        xa[3, 5] = np.inf
        xa[4, 7] = -np.inf
    return xa, rng.integers(0, 6, batch)


@pytest.mark.parametrize("batch,width", [(512, 256), (300, 128), (129, 512)])
def test_training_step_equals_eager_and_the_plan_without_the_loop(batch, width):
    ember.manual_seed(0)
    net = _net(ember, width)
    ref, off = copy.deepcopy(net), copy.deepcopy(net)
    tnet = _net(torch, width)
    tnet.load_state_dict(_state_of(net))
    xa, ya = _inputs(batch, False)
    x, y = ember.tensor(xa), ember.tensor(ya)
    got, params, run = _train(ember, net, x, y, True, steps=5)
    assert gemm._lib[0] is False
    if _fused.available():
        assert len(_fused_steps(run)) == 2  # both hidden layers took the loop
        src = run._cache[0].plan.sources()[(True, True)]
        assert "inplace" not in src and "env[9] = x" in src
    alone, alone_params, run_off = _without_loop(lambda: _train(ember, off, x, y, True, 5))
    assert not _fused_steps(run_off)
    want, want_params, _ = _train(ember, ref, x, y, False, steps=5)
    for a, b, c in zip(got, alone, want):
        assert a.tobytes() == b.tobytes() == c.tobytes()
    for a, b, c in zip(params, alone_params, want_params):
        assert a.tobytes() == b.tobytes() == c.tobytes()
    tl, tp, _ = _train(torch, tnet, torch.tensor(xa), torch.tensor(ya), False, steps=5)
    np.testing.assert_allclose(np.array(got), np.array(tl), rtol=1e-5, atol=1e-6)
    for a, b in zip(params, tp):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_inf_and_signed_zeros_pass_as_eagerly(dtype):
    ember.manual_seed(1)
    net = _net(ember, 256, dtype=ember.float64 if dtype == np.float64 else None)
    with ember.no_grad():  # a bias of -0.0: 0.0 + -0.0 and -0.0 + -0.0 through the loop
        net[0].bias[:8] = -0.0
        net[0].weight[:4, :] = 0.0
    ref, off = copy.deepcopy(net), copy.deepcopy(net)
    xa, ya = _inputs(256, True, dtype)
    x, y = ember.tensor(xa), ember.tensor(ya)
    got, params, run = _train(ember, net, x, y, True, steps=3)
    alone, alone_params, _ = _without_loop(lambda: _train(ember, off, x, y, True, 3))
    want, want_params, _ = _train(ember, ref, x, y, False, steps=3)
    assert np.isnan(got[0])
    for a, b, c in zip(got, alone, want):
        assert a.tobytes() == b.tobytes() == c.tobytes()
    for a, b in zip(params, alone_params):
        assert a.tobytes() == b.tobytes()


def test_inference_and_three_dim_inputs_equal_eager():
    ember.manual_seed(2)
    net = _net(ember, 256, depth=3)
    cm = ember.compile(net)
    tnet = _net(torch, 256, depth=3)
    tnet.load_state_dict(_state_of(net))
    xa = np.random.default_rng(3).standard_normal((6, 100, 24)).astype(np.float32)
    xa[0, 0, 0] = np.nan
    xa[1, 2, :] = -0.0
    x = ember.tensor(xa)
    with ember.no_grad():
        want = net(x).numpy().copy()
        for _ in range(3):
            got = cm(x).numpy()
            assert got.tobytes() == want.tobytes()
    with torch.no_grad():
        t = tnet(torch.tensor(xa)).numpy()
    np.testing.assert_allclose(got, t, rtol=1e-4, atol=1e-5)


def test_two_threads_equal_the_plan_without_the_loop():
    # (the loop's rows split over the threads: each element's sum is its own)
    ember.manual_seed(4)
    net = _net(ember, 512)
    off = copy.deepcopy(net)
    xa, ya = _inputs(1024, True)
    x, y = ember.tensor(xa), ember.tensor(ya)
    saved = threads.get_num_threads()
    threads.set_num_threads(2)
    try:
        got_l, got_p, _ = _train(ember, net, x, y, True, steps=3)
        off_l, off_p, _ = _without_loop(lambda: _train(ember, off, x, y, True, 3))
        if _fused.available():
            loop = _fused.bias_act_loop(ember.ops.unary.Relu)
            rng = np.random.default_rng(5)
            a = rng.standard_normal((2048, 300)).astype(np.float32)
            b = rng.standard_normal(300).astype(np.float32)
            a[0, :4] = [np.nan, -0.0, np.inf, -np.inf]
            want = ember.relu(ember.tensor(a + b)).numpy()
            assert loop(a, b)
            assert a.tobytes() == want.tobytes()
    finally:
        threads.set_num_threads(saved)
    for a, b in zip(got_l + got_p, off_l + off_p):
        assert a.tobytes() == b.tobytes()


def test_loop_declines_what_it_does_not_cover():
    loop = _fused.bias_act_loop(ember.ops.unary.Relu) if _fused.available() else None
    if loop is None:
        assert not _fused.available()
        return
    y = np.arange(-6, 6, dtype=np.float32).reshape(3, 4)
    b = np.array([0.5, -0.5, 0.0, -0.0], np.float32)
    assert not loop(y.T.copy().T, b)  # not C-ordered
    assert not loop(y, b.astype(np.float64))  # another dtype
    assert not loop(y, b[:3])  # not the columns' length
    assert not loop(y.astype(np.int32), b)
    for z, bz in [(y, b), (np.array([[-0.0, 0.0, np.nan, -np.inf, 1.0, -2.0]], np.float32),
                          np.array([-0.0, -0.0, 1.0, np.inf, -1.0, 2.0], np.float32))]:
        # what eager ember runs: the bias added by NumPy, then ReLU (relu(-0.0) is
        # -0.0, as PyTorch's clamp_min; NaN passes; -inf + inf is NumPy's NaN)
        want = ember.relu(ember.tensor(z + bz)).numpy()
        assert loop(z, bz)
        assert z.tobytes() == want.tobytes()


def test_mkl_in_use_runs_the_product_bias_and_relu_as_before():
    # (with MKL the bias goes into the product, beta = 1: the ReLU then runs alone)
    ember.manual_seed(6)
    net = _net(ember, 256)
    ref, off = copy.deepcopy(net), copy.deepcopy(net)
    xa, ya = _inputs(512, True)
    x, y = ember.tensor(xa), ember.tensor(ya)
    got, params, _ = _train(ember, net, x, y, True, steps=3)
    alone, alone_params, _ = _without_loop(lambda: _train(ember, off, x, y, True, 3))
    want, want_params, _ = _train(ember, ref, x, y, False, steps=3)
    for a, b, c in zip(got + params, alone + alone_params, want + want_params):
        assert a.tobytes() == b.tobytes() == c.tobytes()


def _specials(dtype):
    """Every kind of element ReLU treats apart: NaNs (quiet, negative, with payloads),
    signed zeros and infinities, subnormals, negatives and positives."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal(5000).astype(dtype)
    bits = np.dtype(dtype).itemsize * 8
    ints = {32: np.uint32, 64: np.uint64}[bits]
    nans = np.array([0x7FC00001, 0xFFC00000, 0x7FC12345] if bits == 32 else
                    [0x7FF8000000000001, 0xFFF8000000000000, 0x7FF8000000012345],
                    ints).view(dtype)
    tiny = np.finfo(dtype).smallest_subnormal
    a[:11] = [-0.0, 0.0, np.inf, -np.inf, tiny, -tiny, *nans, 1.0, -1.0]
    return a


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_written_over_its_input_by_one_loop_equals_eager_relu_bitwise(dtype):
    # ``_fused.act_over``: ReLU's ``fused`` expression over the array in place, what a
    # plan runs after a linear layer's MKL product (and a convolution's, a sum's)
    loop = _fused.act_over(ember.ops.unary.Relu)
    if not _fused.available():
        assert loop is None
        return
    a = _specials(dtype)
    for shape in [(5000,), (50, 100), (2, 25, 100)]:
        want = ember.relu(ember.tensor(a.reshape(shape))).numpy()
        y = a.reshape(shape).copy()
        assert loop(y)
        assert y.tobytes() == want.tobytes()
    # split over two threads (a large array): each element its own
    big = np.tile(a, 60)
    want = ember.relu(ember.tensor(big)).numpy()
    saved = threads.get_num_threads()
    threads.set_num_threads(2)
    try:
        assert loop(big)
    finally:
        threads.set_num_threads(saved)
    assert big.tobytes() == want.tobytes()
    # what the loop does not cover is left as it was (the caller runs NumPy)
    y = a[:4000].reshape(40, 100)
    for bad in (y.T, y.astype(np.float16), y.astype(np.int32), y[:, ::2]):
        before = bad.tobytes()
        assert not loop(bad)
        assert bad.tobytes() == before
    ro = y.copy()
    ro.flags.writeable = False
    assert not loop(ro)


def test_mkl_in_use_relu_after_the_product_is_the_one_loop():
    # the linear layers' ReLU (written over the product's buffer) runs ``act_over``'s
    # loop where numba is present, the steps equal to eager ember's bitwise
    from ember._compile import _rewrites
    ember.manual_seed(8)
    net = _net(ember, 256)
    ref = copy.deepcopy(net)
    xa, ya = _inputs(512, True)
    x, y = ember.tensor(xa), ember.tensor(ya)
    got, params, run = _train(ember, net, x, y, True, steps=3)
    want, want_params, _ = _train(ember, ref, x, y, False, steps=3)
    for a, b in zip(got + params, want + want_params):
        assert a.tobytes() == b.tobytes()
    over = [st.inplace for st in run._cache[0].plan.steps if st.inplace is not None]
    assert len(over) == 2
    names = {f.__name__ for f in over}
    assert names == ({"relu_over"} if _fused.available() else {"run"})
    assert _rewrites._in_place(ember.ops.unary.tanh.primitive()) is _rewrites._tanh_over
