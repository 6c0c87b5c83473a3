"""Complex tensors against torch: dtypes and promotion, creation and printing, the
real/imaginary views (and writes through them), conj and its bit, and gradients by
PyTorch's convention (conjugate Wirtinger), op by op and by gradcheck."""
import numpy as np
import pytest
import torch

import ember
from ember.autograd import gradcheck

RNG = np.random.default_rng(0)


def _c(shape, dtype=np.complex128, rng=RNG):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _np(t):
    t = t.detach()
    return t.resolve_conj().numpy()


def _same(e, t, rtol=1e-6, atol=1e-6):
    assert e.dtype.name == str(t.dtype).replace("torch.", ""), (e.dtype, t.dtype)
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(_np(e), _np(t), rtol=rtol, atol=atol)


def _both(fn, *arrays, rtol=1e-6):
    """Forward and first gradients (for complex grad_outputs) of ``fn`` in both libraries."""
    res = {}
    for m in (ember, torch):
        ts = [m.tensor(a, requires_grad=a.dtype.kind in "fc") for a in arrays]
        y = fn(m, *ts)
        go = _c(tuple(y.shape), rng=np.random.default_rng(1))
        go = go if y.is_complex() else go.real
        g = m.autograd.grad(y, ts, m.tensor(go.astype(_np(y).dtype)), allow_unused=True)
        res[m] = (y, g)
    (ye, ge), (yt, gt) = res[ember], res[torch]
    _same(ye, yt, rtol)
    for a, b in zip(ge, gt):
        _same(a, b, rtol)


UNARY = {
    "exp": lambda m, z: z.exp(), "log": lambda m, z: z.log(), "sqrt": lambda m, z: z.sqrt(),
    "sin": lambda m, z: z.sin(), "cos": lambda m, z: z.cos(), "tanh": lambda m, z: z.tanh(),
    "sinh": lambda m, z: z.sinh(), "reciprocal": lambda m, z: z.reciprocal(),
    "square": lambda m, z: z ** 2, "pow3": lambda m, z: z.pow(3), "neg": lambda m, z: -z,
    "abs": lambda m, z: z.abs(), "angle": lambda m, z: z.angle(), "real": lambda m, z: z.real,
    "imag": lambda m, z: z.imag, "conj": lambda m, z: z.conj() * 2,
    "conj_physical": lambda m, z: m.conj_physical(z), "sum": lambda m, z: z.sum(0),
    "mean": lambda m, z: z.mean(), "view_as_real": lambda m, z: m.view_as_real(z) * 3,
    "log10": lambda m, z: z.log10(), "expm1": lambda m, z: z.expm1(),
    "transpose": lambda m, z: z.t() @ z, "index": lambda m, z: z[1:, ::2] * 1j,
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_unary_forward_and_gradient(name, dtype):
    _both(UNARY[name], _c((3, 4), dtype), rtol=1e-4 if dtype == np.complex64 else 1e-9)


BINARY = {
    "add": lambda m, a, b: a + b, "sub": lambda m, a, b: a - b, "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b, "pow": lambda m, a, b: a ** b,
    "mul_sum": lambda m, a, b: (a * b).sum(1),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("second", ["complex", "real"])
def test_binary_forward_and_gradient(name, second):
    b = _c((3, 4)) if second == "complex" else RNG.standard_normal((3, 4))
    _both(BINARY[name], _c((3, 4)), b)
    _both(BINARY[name], b, _c((3, 4)))


def test_matmul_and_where():
    _both(lambda m, a, b: a @ b.mT, _c((3, 4)), _c((2, 4)))
    _both(lambda m, a, b: a @ b, _c(4), _c(4))
    _both(lambda m, a, b: m.where(a.real > 0, a, b), _c((3, 4)), _c((3, 4)))
    for m in (ember, torch):
        with pytest.raises(RuntimeError, match="same dtype"):
            m.ones(2, 2, dtype=m.complex64) @ m.ones(2, 2)


def test_broadcast_real_operand_gets_real_gradient():
    _both(lambda m, a, b: a * b, RNG.standard_normal((4, 1)), _c((4, 3)))
    _both(lambda m, a, b: a + b, RNG.standard_normal(3).astype(np.float32),
          _c((2, 3), np.complex64), rtol=1e-5)


def test_scalars():
    _both(lambda m, a: a * (2 - 1j) + 1j, _c(3))
    _both(lambda m, a: a * 1j, RNG.standard_normal(3))


def test_complex_and_polar():
    r, th = np.abs(RNG.standard_normal(4)), RNG.standard_normal(4)
    _both(lambda m, a, b: m.complex(a, b), r, th)
    _both(lambda m, a, b: m.polar(a, b), r, th)
    _both(lambda m, a, b: m.polar(a, b), -r, th)  # outside the domain: torch's sign
    _both(lambda m, a, b: m.complex(a, b), r.astype(np.float32), th.astype(np.float32))
    _both(lambda m, a: m.view_as_complex(a), RNG.standard_normal((3, 2)))


@pytest.mark.parametrize("f", [
    lambda a, b: a * b, lambda a, b: a / b, lambda a, b: (a * b).exp().log(),
    lambda a, b: a.abs() + b.angle(), lambda a, b: a @ b, lambda a, b: a.conj() * b.real,
    lambda a, b: a.sin() * b.tanh() + b.sqrt(), lambda a, b: ember.view_as_real(a * b),
    lambda a, b: (a.pow(2) / b).sum(),
])
def test_gradcheck_complex(f):
    z = ember.tensor(_c(3), requires_grad=True)
    w = ember.tensor(_c(3), requires_grad=True)
    assert gradcheck(f, (z, w))


def test_gradcheck_real_to_complex_and_back():
    r = ember.tensor(np.abs(RNG.standard_normal(3)) + 0.1, requires_grad=True)
    t = ember.tensor(RNG.standard_normal(3), requires_grad=True)
    assert gradcheck(lambda a, b: ember.polar(a, b), (r, t))
    assert gradcheck(lambda a, b: ember.complex(a, b).abs(), (r, t))


def test_gradcheck_catches_a_wrong_complex_gradient():
    class NotConj(ember.autograd.Function):  # forgets the conjugate: z * w's grad
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a

    z = ember.tensor(_c(2), requires_grad=True)
    w = ember.tensor(_c(2), requires_grad=True)
    assert not gradcheck(NotConj.apply, (z, w), raise_exception=False)


def test_dtypes_and_promotion():
    assert ember.complex64.is_complex and not ember.complex64.is_floating_point
    assert ember.cfloat is ember.complex64 and ember.cdouble is ember.complex128
    assert ember.complex64.to_real() is ember.float32
    assert ember.float64.to_complex() is ember.complex128
    for a in ("float16", "float32", "float64", "int64", "bool", "uint8"):
        for b in ("complex64", "complex128"):
            te, tt = getattr(ember, a), getattr(torch, a)
            assert ember.promote_types(te, getattr(ember, b)).name == \
                str(torch.promote_types(tt, getattr(torch, b))).replace("torch.", "")
    cases = [
        lambda m: m.ones(2) + m.tensor(1j, dtype=m.complex128),
        lambda m: m.ones(2, dtype=m.int64) + m.tensor(1j, dtype=m.complex128),
        lambda m: m.ones(2, dtype=m.float64) + 1j,
        lambda m: m.ones(2) + 1j, lambda m: m.ones(2, dtype=m.int32) * 1j,
        lambda m: m.ones(2, dtype=m.complex64) + m.ones(2, dtype=m.float64),
        lambda m: m.ones(2, dtype=m.complex64) * 2.5,
        lambda m: m.ones(2, dtype=m.complex64) / m.ones(2, dtype=m.int64),
        lambda m: m.tensor([1, 2]) / (1 + 1j),
        lambda m: m.tensor(1 + 2j), lambda m: m.tensor([1, 2.5j]),
        lambda m: m.tensor(np.array([1j], np.complex64)), lambda m: m.zeros(2, dtype=complex),
        lambda m: m.ones(2, dtype=m.complex64).to(m.complex128),
        lambda m: m.arange(3).to(m.complex64), lambda m: m.tensor([0.5, 2.0]).to(m.cdouble),
        lambda m: m.ones(2, dtype=m.complex64).abs(), lambda m: m.ones(2).angle(),
        lambda m: m.tensor([-1.0, 0.0, 2.0]).angle(), lambda m: m.tensor([1, -2]).angle(),
    ]
    for c in cases:
        e, t = c(ember), c(torch)
        assert e.dtype.name == str(t.dtype).replace("torch.", "")
        np.testing.assert_allclose(_np(e), _np(t))
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.tensor(1j).dtype is ember.complex128
        assert (ember.ones(2, dtype=ember.int64) * 1j).dtype is ember.complex128
    finally:
        ember.set_default_dtype(ember.float32)
    assert ember.finfo(ember.complex64).eps == torch.finfo(torch.complex64).eps
    with pytest.raises(NotImplementedError, match="complex32"):
        ember.ones(2, dtype=ember.float16) + 1j


def test_complex_to_real_cast_warns_and_drops_imaginary_part():
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        e = ember.tensor([1 + 2j]).to(ember.float32)
    assert e.tolist() == [1.0]


@pytest.mark.parametrize("make", [
    lambda m: m.tensor([1 + 2j, 3 - 4.5j]),
    lambda m: m.tensor([1 + 2j, 3 - 4.5j], dtype=m.complex128),
    lambda m: m.tensor(1 + 2j), lambda m: m.tensor([[1e10 + 2j, 3 - 4.5j]]),
    lambda m: m.tensor([[0j, -1j], [2 + 0j, 1.5 - 2.25j]], requires_grad=True),
    lambda m: m.tensor([], dtype=m.complex64), lambda m: m.tensor([1j]) * 2,
    lambda m: m.arange(2000.0).to(m.complex64) * (1 - 1j),
])
def test_printing(make):
    assert repr(make(ember)).replace("ember.", "torch.") == repr(make(torch))


def test_real_imag_views_and_writes():
    for m in (ember, torch):
        z = m.tensor([1 + 2j, 3 - 4j])
        z.real.mul_(10)
        z.imag[0] = 7
        r = z.real
        z.imag = m.tensor([0.5, 0.25])
        r[1] = -1
        assert z.tolist() == [10 + 0.5j, -1 + 0.25j], m
    e = ember.tensor([1.0, 2.0])
    assert e.real is e or e.real.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="imag is not implemented"):
        _ = e.imag
    zr = ember.view_as_real(ember.tensor([1 + 2j]))
    assert zr.tolist() == [[1.0, 2.0]]
    zr[0, 1] = 5
    assert zr._base is not None


def test_inplace_write_through_imag_view_with_grad():
    res = {}
    for m in (ember, torch):
        z = m.tensor([1 + 2j, 3 - 1j], requires_grad=True)
        y = z * 2
        r = y.real
        y.imag.mul_(3)
        (y.abs() ** 2 + r * 5).sum().backward()
        res[m] = (y, z.grad)
    _same(res[ember][0], res[torch][0])
    _same(res[ember][1], res[torch][1])


def test_view_as_complex_errors():
    for m in (ember, torch):
        with pytest.raises(RuntimeError, match="last dimension of size 2"):
            m.view_as_complex(m.ones(3, 3))
        with pytest.raises(RuntimeError, match="stride 1"):
            m.view_as_complex(m.ones(2, 4)[:, ::2])
        with pytest.raises(RuntimeError, match="only supported for complex"):
            m.view_as_real(m.ones(2))


def test_conj_bit():
    for m in (ember, torch):
        z = m.tensor([1 + 2j])
        c = z.conj()
        assert (c.is_conj(), c.conj().is_conj(), c.resolve_conj().is_conj(), z.is_conj(),
                m.ones(1).conj().is_conj(), m.conj_physical(z).is_conj(),
                (c * 1).is_conj()) == (True, False, False, False, False, False, False), m
        assert c.imag.tolist() == [-2.0]
        with pytest.raises(RuntimeError, match="conjugate bit"):
            c.numpy()
        assert c.resolve_conj().numpy().tolist() == [1 - 2j]
    r = ember.ones(2)
    assert r.conj() is r


def test_isreal_is_complex():
    for m in (ember, torch):
        assert m.tensor([1, 2.5 + 0j, 1j]).isreal().tolist() == [True, True, False]
        assert m.ones(2).isreal().tolist() == [True, True]
        assert m.is_complex(m.tensor([1j])) and not m.ones(1).is_complex()


def test_requires_grad_and_optimizers_accept_complex():
    w = ember.tensor(_c(3), requires_grad=True)
    assert w.requires_grad
    with pytest.raises(RuntimeError, match="floating point and complex"):
        ember.ones(2, dtype=ember.int64).requires_grad_()
    start = _c(3)
    res = {}
    for m in (ember, torch):
        p = m.nn.Parameter(m.tensor(start.copy()))
        for opt in (m.optim.SGD([p], lr=0.1, momentum=0.9), m.optim.Adam([p], lr=0.1)):
            for _ in range(3):
                opt.zero_grad()
                (p.abs() ** 2).sum().backward()
                opt.step()
        res[m] = p
    _same(res[ember], res[torch])
