"""The compiled samplers of ``ember/_random_numba.py`` (the ``ember[fast]`` extra): the same
values as torch and as ember's NumPy replay, bit for bit, and the same generator state."""
import numpy as np
import pytest
import torch

import ember
from ember import _random_kernels as K

SIZES = [16, 4096, 4103, 100_003]
PARAMS = [(0.0, 1.0), (0.3, 1.7), (-1.0, 0.5), (0.0, 0.02), (2.5, 1e-3)]


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


@pytest.fixture
def numpy_only(monkeypatch):
    """Run ember's samplers through the NumPy replay, as without numba."""
    monkeypatch.setitem(K._FUSED, "random", None)


def test_kernels_load():
    # numba is in the test extra: the compiled path must be the one these tests check
    assert K._numba_kernels(1 << 20) is not None


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("n", SIZES)
def test_normal_matches_torch(n, dtype):
    K._numba_kernels(1 << 20)
    for i, (mean, std) in enumerate(PARAMS):
        torch.manual_seed(i)
        ember.manual_seed(i)
        t = torch.empty(n, dtype=getattr(torch, dtype)).normal_(mean, std)
        e = ember.empty(n, dtype=getattr(ember, dtype)).normal_(mean, std)
        assert np.array_equal(_bits(e.numpy()), _bits(t.numpy())), (mean, std)
    assert np.array_equal(ember.get_rng_state().numpy(), torch.get_rng_state().numpy())


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("n", SIZES)
def test_uniform_matches_torch(n, dtype):
    K._numba_kernels(1 << 20)
    for i, (low, high) in enumerate([(-0.3, 0.3), (2.0, 5.5), (-1e-3, 7.0), (1000.0, 1000.0001)]):
        torch.manual_seed(i)
        ember.manual_seed(i)
        t = torch.empty(n, dtype=getattr(torch, dtype)).uniform_(low, high)
        e = ember.empty(n, dtype=getattr(ember, dtype)).uniform_(low, high)
        assert np.array_equal(_bits(e.numpy()), _bits(t.numpy())), (low, high)
    assert np.array_equal(ember.get_rng_state().numpy(), torch.get_rng_state().numpy())


def test_init_functions_match_torch():
    # nn.init's kaiming_uniform_/normal_ on layer-sized weights, through the kernels
    K._numba_kernels(1 << 20)
    for m in (torch, ember):
        m.manual_seed(7)
    lt, le = torch.nn.Linear(300, 500), ember.nn.Linear(300, 500)
    et, ee = torch.nn.Embedding(1000, 64), ember.nn.Embedding(1000, 64)
    for a, b in ((le.weight, lt.weight), (le.bias, lt.bias), (ee.weight, et.weight)):
        assert np.array_equal(_bits(a.detach().numpy()), _bits(b.detach().numpy()))


def test_numpy_replay_matches_torch(numpy_only):
    # the path ember takes without numba stays exact
    for n in (4096, 4103):
        torch.manual_seed(3)
        ember.manual_seed(3)
        t = torch.empty(n).normal_(0.3, 1.7), torch.empty(n).uniform_(-2.0, 3.0)
        e = ember.empty(n).normal_(0.3, 1.7), ember.empty(n).uniform_(-2.0, 3.0)
        for a, b in zip(e, t):
            assert np.array_equal(_bits(a.numpy()), _bits(b.numpy()))


@pytest.mark.parametrize("path", ["compiled", "numpy"])
@pytest.mark.parametrize("dtype,low,high", [("float32", 1.0, 1.0000001),
                                            ("float16", 2.0, 5.5),
                                            ("float64", 1.0, 1.0 + 2.0 ** -52)])
def test_uniform_never_returns_high(path, dtype, low, high, monkeypatch):
    # values that round onto `high` in the tensor's dtype become `low`, as in torch
    if path == "numpy":
        monkeypatch.setitem(K._FUSED, "random", None)
    else:
        K._numba_kernels(1 << 20)
    torch.manual_seed(5)
    ember.manual_seed(5)
    t = torch.empty(50_000, dtype=getattr(torch, dtype)).uniform_(low, high).numpy()
    e = ember.empty(50_000, dtype=getattr(ember, dtype)).uniform_(low, high).numpy()
    assert (t == np.array(low, t.dtype)).any()
    assert np.array_equal(_bits(e), _bits(t))


def test_box_muller_every_uniform_against_numpy_replay():
    # every 24-bit uniform as u1 and as u2 (2**24 each, paired in two orders), through
    # the compiled kernel and the NumPy replay of PyTorch's AVX2 Box-Muller
    kernels = K._numba_kernels(1 << 20)
    u = np.arange(1 << 24, dtype=np.uint64)
    v = np.random.default_rng(0).permutation(1 << 24).astype(np.uint64)
    step = 1 << 21  # values per piece: bounded memory
    for lo in range(0, 1 << 24, step):
        a, b = u[lo:lo + step].reshape(-1, 8), v[lo:lo + step].reshape(-1, 8)
        for first, second in ((a, b), (b, a)):
            raw = np.concatenate([first, second], axis=1).ravel()
            out = np.empty(raw.size, np.float32)
            kernels.box_muller16(raw, out, np.float32(0.3), np.float32(1.7))
            d = (raw & 0xFFFFFF).astype(np.float32) * np.float32(2.0 ** -24)
            blocks = d.reshape(-1, 16)
            for i in range(0, len(blocks), 1 << 14):
                K._box_muller16_f32(blocks[i:i + (1 << 14)], 0.3, 1.7)
            assert np.array_equal(out.view(np.uint32), d.view(np.uint32))


def test_uniform_every_value_against_numpy_replay():
    kernels = K._numba_kernels(1 << 20)
    raw = np.arange(1 << 24, dtype=np.uint64)
    x = (raw & 0xFFFFFF).astype(np.float32) * np.float32(2.0 ** -24)
    for low, high in ((-0.3, 0.3), (2.0, 5.5), (-0.0625, 0.0625)):
        lo, hi = np.float32(low), np.float32(high)
        out = np.empty(raw.size, np.float32)
        kernels.uniform24(raw, out, lo, hi - lo)
        assert np.array_equal(out.view(np.uint32), K.fma32(x, hi - lo, lo).view(np.uint32))


def test_mersenne_twister_matches_numpy():
    # the compiled engine continues NumPy's MT19937 exactly, across twists, from any pos
    kernels = K._numba_kernels(1 << 20)
    g, ref = ember.Generator().manual_seed(123), np.random.MT19937(0)
    ref.state = g._bg.state
    for n in (1, 5, 618, 624, 625, 2000, 40_000, 1_000_003):
        assert np.array_equal(g._raw_compiled(n, kernels.mt19937_fill), ref.random_raw(n)), n
        s, r = g._bg.state["state"], ref.state["state"]
        assert s["pos"] == r["pos"] and np.array_equal(s["key"], r["key"])


def test_large_draws_keep_torch_state():
    K._numba_kernels(1 << 20)
    torch.manual_seed(11)
    ember.manual_seed(11)
    for m in (torch, ember):  # large calls (compiled engine) between small ones
        m.randn(5), m.empty(70_001).normal_(), m.rand(3), m.empty(50_000).uniform_(-1, 2)
    assert np.array_equal(ember.get_rng_state().numpy(), torch.get_rng_state().numpy())
    assert np.array_equal(ember.randn(40).numpy(), torch.randn(40).numpy())
