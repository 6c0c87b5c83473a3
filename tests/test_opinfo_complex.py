"""Complex autograd over PyTorch's OpInfo table (op_db), against torch.

PyTorch differentiates complex functions by the conjugate Wirtinger convention: the
gradient a backward pass returns for a complex input ``z`` of a real loss ``L`` is
``conj(dL/dz) * 2``-scaled as ``dL/dx + i dL/dy``, and a backward formula that forgets a
``conj`` still returns numbers that "train", only wrongly. test_opinfo.py compares first
gradients in float64 alone; here every op of op_db that ember runs, that supports
complex128 and ``supports_autograd``, runs its first ``SAMPLES`` samples in complex128:

- forward values and dtypes (test_opinfo.py's harness, imported), then the backward pass
  with a fixed complex ``grad_output`` (a real one for real outputs: ``abs``, ``angle``)
  against torch's gradients for every complex or real input that requires grad;
- forward-mode AD with complex tangents (tests/_fwad_opinfo.py's driver) for the ops that
  ``supports_forward_ad``;
- complex64 forward values (a separate code path where ember computes in complex64).

``KNOWN`` maps ``(op, part)`` to the reason it still differs; each is asserted to still
differ, so a fixed one must leave it. ``python tests/test_opinfo_complex.py`` prints the
counts (docs/differences.md, "Complex autograd over PyTorch's OpInfo table").
"""
import numpy as np
import pytest
import test_opinfo as T
import torch
from _fwad_opinfo import check_op as check_fwad

import ember

SAMPLES = 3  # per op and part


def _complex_grad_output(out):
    """A fixed ``grad_output`` with distinct real and imaginary parts (real for a real
    output), so that a missing ``conj`` in a backward formula changes the result."""
    if not (out.is_floating_point() or out.is_complex()):
        return None
    n = out.numel()
    go = np.linspace(-1, 1, n).reshape(out.shape)
    if out.is_complex():
        go = go + 1j * np.linspace(0.5, -1.5, n).reshape(out.shape)
    return go


def _complex_ops():
    ops = []
    for op in T.PRESENT:
        supported = op.supported_dtypes("cpu")
        if torch.complex128 in supported and op.supports_autograd:
            ops.append(op)
    return ops


OPS = _complex_ops()
PARTS = ("complex128", "forward_ad", "complex64")

# (op, part) pairs that still differ from torch, and why
KNOWN = {
    # torch's tangent is NaN on the sample's |x| = 1e4 elements (exp overflows in its rule);
    # ember's matches central differences: test_logcumsumexp_tangent_at_large_magnitude
    ("logcumsumexp", "forward_ad"): "torch's tangent overflows to NaN; ember's is finite",
    # torch's rule uses the whole tangent of A, the triangle the solve never reads included
    # (as in float64: tests/test_forward_ad.py's NOT_COMPARED)
    ("triangular_solve", "forward_ad"): "torch reads the unused triangle of A's tangent",
}


def _run(op, part):
    """Run one part for ``op``; raise AssertionError on a difference from torch."""
    if part == "complex128":
        # (no sample compared: torch refused each, and so did ember - to_sparse's)
        T.check_op(op, dtypes=[torch.complex128], samples=SAMPLES,
                   grad_output=_complex_grad_output)
    elif part == "complex64":
        T.check_op(op, dtypes=[torch.complex64], samples=SAMPLES)
    else:
        # (ember's function as test_opinfo.py resolves it: OpInfo's lambdas run on ember)
        status, detail = check_fwad(op, samples=SAMPLES, dtype=torch.complex128,
                                    fn=T._ember_fn(op), other=T._to_ember)
        assert status == "pass", f"{status}: {detail}"


def _cases():
    for op in OPS:
        yield op, "complex128"
        if op.supports_forward_ad:
            yield op, "forward_ad"
        if torch.complex64 in op.supported_dtypes("cpu"):
            yield op, "complex64"


CASES = list(_cases())


@pytest.mark.parametrize("op,part", CASES, ids=[f"{T._key(o)}-{p}" for o, p in CASES])
def test_complex_opinfo(op, part):
    if (T._key(op), part) in KNOWN:  # still differs: once it passes, it leaves KNOWN
        with pytest.raises((AssertionError, NotImplementedError, RuntimeError, TypeError)):
            _run(op, part)
    else:
        _run(op, part)


def test_known_names_live_cases():
    live = {(T._key(op), part) for op, part in CASES}
    assert set(KNOWN) <= live, set(KNOWN) - live


def _report():
    import time
    t0 = time.time()
    fails = {}
    for op, part in CASES:
        t = time.time()
        try:
            _run(op, part)
        except Exception as e:  # noqa: BLE001 - a report of every difference
            fails[(T._key(op), part)] = f"{type(e).__name__}: {str(e)[:300]}"
        if time.time() - t > 1:
            print(f"slow: {T._key(op)} {part} {time.time() - t:.1f}s")
    print(f"ops {len(OPS)}, cases {len(CASES)}, differing {len(fails)}, "
          f"{time.time() - t0:.0f}s")
    for k, v in sorted(fails.items()):
        print(f"FAIL {k}: {v}")


if __name__ == "__main__":
    _report()


# ----- the fixes, one by one, on inputs of their own ---------------------------------------
def _c(rng, *shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _grads(f, arrays, go, create_graph=False):
    """``f``'s gradients in ember and torch for inputs ``arrays`` and ``grad_output`` go."""
    out = []
    for m in (torch, ember):
        xs = [m.tensor(a, requires_grad=True) for a in arrays]
        y = f(m, *xs)
        gs = m.autograd.grad(y, xs, m.tensor(go), create_graph=create_graph and m is ember)
        out.append([g.detach().numpy(force=True) if m is torch else g.detach().numpy()
                    for g in gs])
    return out


HOLOMORPHIC = {
    "acos": lambda m, x: x.acos(), "asin": lambda m, x: x.asin(),
    "atan": lambda m, x: x.atan(), "acosh": lambda m, x: x.acosh(),
    "asinh": lambda m, x: x.asinh(), "atanh": lambda m, x: x.atanh(),
    "sinc": lambda m, x: x.sinc(), "logsumexp": lambda m, x: x.logsumexp(1),
    "prod": lambda m, x: x.prod(1), "prod_all": lambda m, x: x.prod(),
    "cumprod": lambda m, x: x.cumprod(1), "cumprod_dim0": lambda m, x: x.cumprod(0),
    "2**z": lambda m, x: m.pow(2.0, x), "(-2)**z": lambda m, x: m.pow(-2.0, x),
    "0**z": lambda m, x: m.pow(0.0, x), "ldexp": lambda m, x: m.ldexp(x.conj(), x),
    "(0.5+1j)**z": lambda m, x: m.pow(0.5 + 1j, x), "(-2-1j)**z": lambda m, x: (-2 - 1j) ** x,
}


@pytest.mark.parametrize("base", [0.5 + 1j, -2 - 1j, 1j, 0j])
def test_complex_number_to_a_real_power(base):
    """A complex number to the power of a real tensor (ember raised TypeError comparing
    the base with 0): complex values as torch's, and a real gradient."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3))
    x[0, 0] = 0
    t, e = _grads(lambda m, v: m.pow(base, v), [x], _c(rng, 2, 3))
    np.testing.assert_allclose(e[0], t[0], rtol=1e-12, atol=1e-14, equal_nan=True)
    assert e[0].dtype == t[0].dtype == np.float64
    np.testing.assert_array_equal(ember.pow(base, ember.tensor(x)).numpy(),
                                  torch.pow(base, torch.tensor(x)).numpy())


@pytest.mark.parametrize("zeros", [False, True])
@pytest.mark.parametrize("name", sorted(HOLOMORPHIC))
def test_complex_backward_takes_the_conjugate(name, zeros):
    """grad * conj(f'(z)): a formula without the conj gives another, wrong, gradient.
    With zeros in the input (prod's and cumprod's other paths, 0 ** z's edge) and the
    gradient recorded (create_graph) as well as not."""
    rng = np.random.default_rng(len(name))
    x = _c(rng, 3, 4) * 0.7
    if zeros:
        x[0, 1] = x[1, 1] = x[1, 3] = 0
        x[2, 2] = 2.0  # a real, positive element (0 ** z's zero-gradient case)
    fn = HOLOMORPHIC[name]
    out = fn(torch, torch.tensor(x))
    go = _c(rng, *out.shape)
    for cg in (False, True):
        (t,), (e,) = _grads(fn, [x], go, cg)
        np.testing.assert_allclose(e, t, rtol=1e-10, atol=1e-12, equal_nan=True,
                                   err_msg=f"{name} create_graph={cg}")


@pytest.mark.parametrize("weight", ["tensor", "number"])
def test_lerp_complex_gradients(weight):
    """lerp passed grad * (1 - w), grad * w and grad * (end - start) without conjugates
    (a complex weight, tensor or number; OpInfo's later samples)."""
    rng = np.random.default_rng(4)
    a, b, w, go = (_c(rng, 3, 4) for _ in range(4))
    if weight == "tensor":
        t, e = _grads(lambda m, a, b, w: m.lerp(a, b, w), [a, b, w], go)
    else:
        t, e = _grads(lambda m, a, b: m.lerp(a, b, 0.3 - 0.8j), [a, b], go)
    for x, y in zip(e, t):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14)


def test_sampled_addmm_complex_beta_gradient():
    """``beta * input``'s gradient is ``conj(beta) * grad`` (sparse.sampled_addmm)."""
    rng = np.random.default_rng(5)
    a, m1, m2 = _c(rng, 4, 4), _c(rng, 4, 3), _c(rng, 3, 4)
    a[a.real < 0] = 0
    res = []
    for m in (torch, ember):
        x = m.tensor(a).to_sparse_csr().requires_grad_(True)
        ts = [m.tensor(v, requires_grad=True) for v in (m1, m2)]
        y = m.sparse.sampled_addmm(x, *ts, beta=1 + 2j, alpha=2 - 3j)
        gs = m.autograd.grad(y.to_dense(), [x] + ts, m.tensor(_c(rng, 4, 4) * 0 + 1 - 0.5j))
        res.append([g.to_dense().detach().numpy() for g in gs])
    for x, y in zip(*res):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_zero_to_a_complex_power(dtype):
    """PyTorch's complex pow is exp(z * log(0)): NaN at 0j, inf+nanj where the real part
    is negative, signed zeros elsewhere (NumPy's power gives 1 and nan+nanj)."""
    z = np.array([0.3 + 0.7j, -1.2 + 0.4j, 2, 0, 1j, -1, -1j, 1e-300, np.inf, np.nan,
                  -2 - 3j], dtype=dtype)
    for base in (0, 0.0):
        t = torch.pow(base, torch.tensor(z)).numpy()
        for e in (ember.pow(base, ember.tensor(z)), base ** ember.tensor(z)):
            e = e.numpy()
            assert e.dtype == t.dtype
            np.testing.assert_array_equal(e, t)
            np.testing.assert_array_equal(np.signbit(e.imag), np.signbit(t.imag))


def test_sgn_complex_gradient():
    """sgn(z) = z / |z| is not holomorphic: (g - sgn^2 conj(g)) / (2|z|), 0 at 0; real
    inputs keep a zero gradient."""
    rng = np.random.default_rng(0)
    x = _c(rng, 5)
    x[2] = 0
    (t,), (e,) = _grads(lambda m, v: v.sgn(), [x], _c(rng, 5))
    np.testing.assert_allclose(e, t, rtol=1e-12, atol=1e-15)
    assert t[2] == 0 and np.abs(t).min() < np.abs(t[:2]).min()
    (t,), (e,) = _grads(lambda m, v: v.sgn(), [x.real.copy()], rng.standard_normal(5))
    assert not e.any() and not t.any()


CONVS = {
    "conv1d": ((2, 3, 7), (4, 3, 3), {"padding": 1, "stride": 2}),
    "conv2d": ((1, 2, 5, 4), (4, 1, 2, 2), {"groups": 2, "dilation": 2, "padding": 1}),
    "conv_transpose1d": ((2, 3, 5), (3, 2, 3), {"stride": 2, "output_padding": 1}),
    "conv_transpose2d": ((1, 2, 4, 3), (2, 3, 2, 2), {"stride": (2, 1)}),
}


@pytest.mark.parametrize("name", sorted(CONVS))
def test_complex_convolution_gradients(name):
    """Each operand's gradient reads the other's conjugate; the bias's is the sum of
    grad_output. First and second derivatives (ember's gradgradcheck)."""
    rng = np.random.default_rng(1)
    xs, ws, kw = CONVS[name]
    x, w, b = _c(rng, *xs), _c(rng, *ws), _c(rng, ws[1] if "transpose" in name else ws[0])

    def f(m, x, w, b):
        return getattr(m.nn.functional, name)(x, w, b, **kw)
    go = _c(rng, *f(torch, *(torch.tensor(a) for a in (x, w, b))).shape)
    t, e = _grads(f, [x, w, b], go)
    for a, b_ in zip(e, t):
        np.testing.assert_allclose(a, b_, rtol=1e-10, atol=1e-12)
    ins = [ember.tensor(a, requires_grad=True) for a in (x[:1], w)]
    assert ember.autograd.gradgradcheck(lambda x, w: f(ember, x, w, None), ins)


@pytest.mark.parametrize("method", ["to_sparse", "to_sparse_csr", "to_sparse_coo"])
def test_to_sparse_refuses_a_complex_graph(method):
    """torch has no complex derivative for the conversions to sparse layouts: a complex
    tensor that requires grad raises, unless grad mode is off."""
    x = np.array([[1 + 2j, 0], [0, 3 - 1j]])
    for m in (torch, ember):
        t = m.tensor(x, requires_grad=True)
        with pytest.raises(RuntimeError, match="does not support automatic differentiation "
                           "for outputs with complex dtype"):
            getattr(t, method)()
        with m.no_grad():
            assert getattr(t, method)().to_dense().detach().numpy().tolist() == x.tolist()
        assert getattr(t.real, method)().requires_grad  # real: differentiable


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_eig_forward_ad(dtype):
    """linalg.eig's own JVP rule (its backward has no derivative, so the double-vjp
    fallback raised): eigenvalues and unit-norm eigenvectors' tangents as torch's."""
    import torch.autograd.forward_ad as tfw

    import ember.autograd.forward_ad as efw
    rng = np.random.default_rng(2)
    for shape in ((4, 4), (2, 3, 3)):
        a, ta = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
        if dtype == np.complex128:
            a, ta = a + 1j * rng.standard_normal(shape), ta + 1j * rng.standard_normal(shape)
        with tfw.dual_level(), efw.dual_level():
            t = torch.linalg.eig(tfw.make_dual(torch.tensor(a), torch.tensor(ta)))
            e = ember.linalg.eig(efw.make_dual(ember.tensor(a), ember.tensor(ta)))
            for tt, ee in zip(t, e):
                np.testing.assert_allclose(efw.unpack_dual(ee).tangent.numpy(),
                                           tfw.unpack_dual(tt).tangent.numpy(),
                                           rtol=1e-9, atol=1e-11)
            ev = ember.linalg.eigvals(efw.make_dual(ember.tensor(a), ember.tensor(ta)))
            np.testing.assert_allclose(efw.unpack_dual(ev).tangent.numpy(),
                                       tfw.unpack_dual(t[0]).tangent.numpy(),
                                       rtol=1e-9, atol=1e-11)


def test_logcumsumexp_tangent_at_large_magnitude():
    """KNOWN's logcumsumexp entry: at |x| ~ 1e4 torch's complex tangent is NaN while the
    output is finite; ember's equals central differences of the output."""
    import torch.autograd.forward_ad as tfw

    import ember.autograd.forward_ad as efw
    rng = np.random.default_rng(3)
    x = _c(rng, 4, 3)
    x[0, 0] = 1e4 + 2j
    t = _c(rng, 4, 3)
    with tfw.dual_level(), efw.dual_level():
        tt = tfw.unpack_dual(torch.logcumsumexp(tfw.make_dual(torch.tensor(x),
                                                              torch.tensor(t)), 0)).tangent
        et = efw.unpack_dual(ember.logcumsumexp(efw.make_dual(ember.tensor(x),
                                                              ember.tensor(t)), 0)).tangent
    h = 1e-6
    f = [ember.logcumsumexp(ember.tensor(x + s * h * t), 0).numpy() for s in (1, -1)]
    np.testing.assert_allclose(et.numpy(), (f[0] - f[1]) / (2 * h), rtol=1e-6, atol=1e-6)
    assert np.isnan(tt.numpy()).any()


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "nn.functional.tanhshrink"])
def test_complex_second_derivative_of_tanh_and_sigmoid(name):
    """tanh's and sigmoid's backward ops (``gy * conj(1 - y**2)``, ``gy * conj((1 - y)
    y)``) are antiholomorphic in y: their gradient in y takes the conjugate (ember took
    ``ggx * gy * -2y``, so complex second derivatives were wrong, 71 off at this draw for
    tanh). Against torch and against central differences of torch's first derivative."""
    rng = np.random.default_rng(0)
    x0, v0, w0 = (rng.standard_normal(5) + 1j * rng.standard_normal(5) for _ in range(3))

    def loss(m, x):
        x = m.tensor(x, requires_grad=True)
        v = m.tensor(v0, requires_grad=True)
        fn = m.nn.functional.tanhshrink if name.startswith("nn.") else getattr(m, name)
        g, = m.autograd.grad(fn(x), x, v, create_graph=True)
        return m.real((g * m.tensor(w0)).sum()), x, v

    got = {}
    for m in (torch, ember):
        total, x, v = loss(m, x0)
        got[m] = [t.detach().numpy() for t in m.autograd.grad(total, (x, v))]
    h = 1e-6
    numeric = np.zeros(5, complex)
    for k in range(5):
        for unit in (1, 1j):
            step = np.zeros(5, complex)
            step[k] = h * unit
            numeric[k] += unit * (loss(torch, x0 + step)[0].item() -
                                  loss(torch, x0 - step)[0].item()) / (2 * h)
    np.testing.assert_allclose(got[ember][0], numeric, atol=1e-6)
    for a, b in zip(got[ember], got[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
