"""complex32 (``chalf``) against torch: the dtype, conversions with their rounding,
printing, the ops PyTorch's CPU build has for ComplexHalf, the ones it refuses, and
gradients through conversions."""
import warnings

import numpy as np
import pytest
import torch

import ember

warnings.filterwarnings("ignore", "ComplexHalf support is experimental")

# values whose float16 rounding is telling: ties, overflow, subnormals, a double that
# rounds differently through float32
VALUES = [1.0, -3.3, 70000.0, 65519.0, 1e-6, 6e-8, -0.0, 1 + 2 ** -11 + 2 ** -30, 0.1]


def _same(e, t):
    assert e.dtype.name == str(t.dtype).split(".")[1]
    assert tuple(e.shape) == tuple(t.shape)
    if t.dtype == torch.complex32:
        e, t = e.cfloat(), t.cfloat()
    np.testing.assert_array_equal(e.numpy(), t.numpy())


def _both(fn):
    return fn(ember), fn(torch)


@pytest.mark.parametrize("src", ["float32", "float64", "float16", "int64", "bool", "complex64",
                                 "complex128"])
def test_to_complex32_rounds_as_torch(src):
    def run(m):
        dt = getattr(m, src)
        vals = [complex(v, -v / 3) for v in VALUES] if "complex" in src else VALUES
        if src in ("int64", "bool"):
            vals = [3, 0, -70000, 1] if src == "int64" else [True, False]
        x = m.tensor(vals).to(dt) if src == "float16" else m.tensor(vals, dtype=dt)
        return x.to(m.complex32), x.chalf()
    (e1, e2), (t1, t2) = _both(run)
    _same(e1, t1)
    _same(e2, t2)


@pytest.mark.parametrize("dst", ["float32", "float16", "float64", "int64", "bool", "complex64",
                                 "complex128"])
def test_from_complex32(dst):
    def run(m):
        c = m.tensor([1.5 - 2j, -3.25 + 0.5j, 0j], dtype=m.complex64).chalf()
        return c.to(getattr(m, dst))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e, t = _both(run)
    _same(e, t)


def test_dtype_metadata_and_printing():
    def run(m):
        c = m.tensor([1 + 2j, 3.3 - 4j, 1e5 + 0.1j], dtype=m.complex64).chalf()
        return (repr(c).replace("torch.", "").replace("ember.", ""), c.element_size(),
                c.is_complex(), c.is_floating_point(), c.dtype.is_complex, c.dtype.itemsize,
                c.tolist(), c[1].item(), m.promote_types(m.chalf, m.float32),
                m.promote_types(m.chalf, m.float16), m.promote_types(m.int64, m.chalf),
                m.promote_types(m.chalf, m.complex128), m.float16.to_complex()
                if hasattr(m.float16, "to_complex") else m.complex32)
    e, t = _both(run)
    assert e[:8] == t[:8]
    assert [d.name for d in e[8:]] == [str(d).split(".")[1] for d in t[8:]]
    for m in (torch, ember):
        with pytest.raises(TypeError, match="ComplexHalf"):
            m.zeros(2, dtype=m.chalf).numpy()


def test_memory_ops():
    def run(m):
        c = m.tensor([[1 + 2j, 3 - 1j, 0.5j], [2, -1j, 7 + 7j]], dtype=m.complex64).chalf()
        mask = m.tensor([[True, False, True], [False, True, False]])
        return [c.t(), c.reshape(3, 2), c[1], c[:, [0, 2]], m.cat([c, c]), m.stack([c, c]),
                c.clone(), m.where(mask, c, c.conj()), c.real, c.imag, m.view_as_real(c),
                m.complex(c.real, c.imag), c.masked_fill(mask, 0),
                m.zeros(2, dtype=m.chalf), m.ones(2, dtype=m.chalf),
                m.full((2,), 1 - 1j, dtype=m.chalf), m.zeros_like(c), c.diagonal(),
                c.index_select(1, m.tensor([2, 0])), c.repeat(2, 1), c.roll(1, 1)]
    for e, t in zip(*_both(run)):
        _same(e, t)


def test_math_torch_has():
    def run(m):
        a = m.tensor([1 + 2j, 3.3 - 1j, 65504 + 0.1j, -0.25j], dtype=m.complex64).chalf()
        b = m.tensor([0.5 - 1j, 2 + 2j, 100 + 0j, 1e-3 + 1j], dtype=m.complex64).chalf()
        return [a + b, a - b, a * b, -a, a.abs(), a.conj(), a.conj_physical(), a.sgn(),
                a.isnan(), a.isfinite(), a == b, a != a, a * 2, a + 1j, a + m.ones(4),
                a + m.ones(4, dtype=m.float16), a + b.cfloat(), a.clone().add_(b),
                a.clone().mul_(2), m.addcmul(a, a, b), m.isclose(a, b), m.isclose(a, a),
                a == (1 + 2j), a != 1, m.cat([a, b.cfloat()]), m.where(a.isnan(), b, 2.5)]
    for e, t in zip(*_both(run)):
        _same(e, t)


@pytest.mark.parametrize("name", ["div", "exp", "sum", "mean", "matmul", "cumsum", "sqrt",
                                  "prod", "pow", "reciprocal", "sin", "dot", "angle"])
def test_math_torch_refuses(name):
    calls = {"div": lambda c: c / c, "matmul": lambda c: c.reshape(3, 1) @ c.reshape(1, 3),
             "pow": lambda c: c ** 2, "dot": lambda c: c.dot(c), "cumsum": lambda c: c.cumsum(0)}
    fn = calls.get(name, lambda c: getattr(c, name)())
    for m in (torch, ember):
        c = m.tensor([1 + 2j, 3 - 1j, 0.5j], dtype=m.complex64).chalf()
        with pytest.raises(NotImplementedError, match="ComplexHalf"):
            fn(c)


def test_gradients_through_conversions():
    def run(m):
        x = m.tensor(VALUES, dtype=m.float64, requires_grad=True)
        go = m.tensor([complex(i, 1 - i) for i in range(len(VALUES))], dtype=m.complex64)
        g1, = m.autograd.grad(x.chalf(), x, go.chalf())
        z = m.tensor([1 + 2j, 3.3 - 1j], dtype=m.complex128, requires_grad=True)
        g2, = m.autograd.grad(z.chalf(), z, m.tensor([1 - 1j, 2j], dtype=m.complex64).chalf())
        c = m.tensor([1.5 + 2j, -2.25 + 0.1j], dtype=m.complex64, requires_grad=True)
        w = c.chalf()
        g3, = m.autograd.grad((w.real.float() * 3).sum() + (w * w).imag.float().sum(), c)
        return g1, g2, g3
    for e, t in zip(*_both(run)):
        _same(e, t)


def test_save_load_with_torch(tmp_path):
    c = ember.tensor([1 + 2j, -3.3 + 0.1j, 7j], dtype=ember.complex64).chalf()
    ember.save(c, tmp_path / "e.pt")
    t = torch.load(tmp_path / "e.pt")
    _same(c, t)
    torch.save(t[1:], tmp_path / "t.pt")
    e = ember.load(tmp_path / "t.pt")
    _same(e, t[1:])
    assert e.storage_offset() == t[1:].storage_offset()


@pytest.mark.parametrize("shape", [(1,), (4,), (9,), (17,), (3, 5), (1000,)])
def test_complex32_sampling_matches_torch(shape):
    """randn / normal_ / rand / uniform_ in complex32 (and rand / uniform_ in complex64)
    draw PyTorch's real view, both parts in memory order, to the bit (they raised)."""
    draws = [
        ("randn", lambda m, d: m.randn(*shape, dtype=d)),
        ("normal_", lambda m, d: m.zeros(shape, dtype=d).normal_(2.0, 3.0)),
        ("randn_like", lambda m, d: m.randn_like(m.zeros(shape, dtype=d))),
        ("rand", lambda m, d: m.rand(*shape, dtype=d)),
        ("uniform_", lambda m, d: m.zeros(shape, dtype=d).uniform_(-2.0, 5.0)),
    ]
    for name, draw in draws:
        for dt in ("complex32", "complex64"):
            torch.manual_seed(7)
            with warnings.catch_warnings():  # torch: "ComplexHalf support is experimental"
                warnings.simplefilter("ignore")
                t = torch.view_as_real(draw(torch, getattr(torch, dt))).numpy()
            ember.manual_seed(7)
            e = draw(ember, getattr(ember, dt))
            assert e.dtype == getattr(ember, dt), name
            np.testing.assert_array_equal(ember.view_as_real(e).numpy(), t, err_msg=name)
