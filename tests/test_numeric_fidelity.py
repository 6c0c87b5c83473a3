"""Numbers PyTorch programs rely on, checked against torch 2.13:

- ``Tensor.view(dtype)`` reads the same bytes as another dtype (shared memory, PyTorch's
  shape/stride rules and errors, no autograd);
- float64 (and wide integers) convert to float16, bfloat16 and float8 through float32, the
  double rounding of PyTorch's conversions, on every path that converts;
- ``linalg.vector_norm`` / ``linalg.norm`` / ``Tensor.norm`` of complex inputs;
- ``sign`` of a complex tensor raises as in PyTorch (``sgn`` is the complex sign).
"""
import math
import warnings

import numpy as np
import pytest
import torch

import ember

# ----- helpers ----------------------------------------------------------------------------

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
         "float16", "bfloat16", "float32", "float64", "complex32", "complex64", "complex128",
         "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]


def _raw(t):
    """The bytes of a torch or ember tensor, in its element order."""
    if isinstance(t, torch.Tensor):
        flat = t.contiguous().reshape(-1)
        return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    return np.ascontiguousarray(t._data).tobytes()


def _outcome(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the exception itself is compared
        return e


def _same_error(a, b):
    assert isinstance(a, Exception) and isinstance(b, Exception), (a, b)
    assert type(a).__name__ == type(b).__name__, (a, b)
    assert str(a).split("\n")[0].replace("torch.", "ember.") == \
        str(b).split("\n")[0].replace("torch.", "ember."), (a, b)


def _pair(src, shape, seed=0):
    """The same random bytes as a torch and an ember tensor of dtype ``src``."""
    tdt, edt = getattr(torch, src), getattr(ember, src)
    isz = edt.itemsize
    n = int(np.prod(shape)) * isz
    raw = np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)
    if src == "bool":
        raw &= 1
    t = torch.from_numpy(raw.copy()).view(tdt).reshape(shape)
    e = ember.from_numpy(raw.copy().view(edt.np)).reshape(shape)
    return t, e


# ----- view(dtype) ------------------------------------------------------------------------

@pytest.mark.parametrize("src", NAMES)
def test_view_dtype_every_pair_bytes_shape_stride(src):
    """Every ordered pair of dtypes: same bytes, shape, strides and dtype as torch."""
    t, e = _pair(src, (3, 16 // getattr(ember, src).itemsize))
    for dst in NAMES:
        rt = t.view(getattr(torch, dst))
        re_ = e.view(getattr(ember, dst))
        assert re_.dtype is getattr(ember, dst)
        assert tuple(re_.shape) == tuple(rt.shape), (src, dst)
        assert re_.stride() == rt.stride(), (src, dst)
        assert _raw(re_) == _raw(rt), (src, dst)
        assert re_.data_ptr() == e.data_ptr()


def test_view_dtype_values_documented_example():
    assert ember.tensor([1., 2.]).view(ember.int32).tolist() == [1065353216, 1073741824]
    assert ember.tensor([1., 2.]).view(dtype=ember.int32).tolist() == \
        torch.tensor([1., 2.]).view(dtype=torch.int32).tolist()
    z = ember.tensor([1 + 2j, 3 - 4j], dtype=ember.complex32)
    assert z.view(ember.float16).tolist() == [1.0, 2.0, 3.0, -4.0]
    assert z.view(ember.int32).tolist() == [1073757184, -1006616064]
    h = ember.tensor([1., 2., 3., 4.], dtype=ember.float16).view(ember.complex32)
    assert h.dtype is ember.complex32 and h.tolist() == [1 + 2j, 3 + 4j]


def test_view_dtype_to_an_ml_dtype_before_its_first_use():
    # in a fresh process bfloat16 and the float8 dtypes are not loaded yet (ml_dtypes is
    # imported on first use): view must accept them as torch does
    prog = ("import ember, torch\n"
            "for e, t in ((ember.bfloat16, torch.bfloat16), (ember.float8_e4m3fn, "
            "torch.float8_e4m3fn)):\n"
            "    a = ember.tensor([1.0, -2.5, 3.0, 0.5]).view(e)\n"
            "    b = torch.tensor([1.0, -2.5, 3.0, 0.5]).view(t)\n"
            "    assert a.dtype is e and a.shape == tuple(b.shape), (a.dtype, a.shape)\n"
            "    assert a.view(ember.uint8).tolist() == b.view(torch.uint8).tolist()\n"
            "print('ok')\n")
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PYTHONPATH=root))
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]


def test_view_dtype_python_types():
    t, e = torch.arange(4.0), ember.arange(4.0)
    for py in (float, int, bool):
        rt, re_ = t.view(py), e.view(py)
        assert str(re_.dtype).split(".")[1] == str(rt.dtype).split(".")[1]
        assert _raw(re_) == _raw(rt)


LAYOUTS = {
    "0-d same size": lambda m: m.zeros(()).view(m.int32),
    "0-d smaller": lambda m: m.zeros(()).view(m.float16),
    "0-d larger": lambda m: m.zeros(()).view(m.float64),
    "transposed same size": lambda m: m.arange(6.0).reshape(3, 2).t().view(m.int32),
    "transposed smaller": lambda m: m.arange(6.0).reshape(3, 2).t().view(m.float16),
    "transposed larger": lambda m: m.arange(6.0).reshape(3, 2).t().view(m.float64),
    "odd last dim": lambda m: m.arange(6.0).reshape(2, 3).view(m.float64),
    "offset": lambda m: m.arange(8.0).reshape(2, 4)[:, 1:3].view(m.float64),
    "offset and odd size": lambda m: m.arange(10.0).reshape(2, 5)[:, 1:4].view(m.float64),
    "step 2": lambda m: m.arange(8.0).reshape(2, 4)[:, ::2].view(m.float64),
    "odd row stride": lambda m: m.arange(15.0).reshape(3, 5)[:, :2].view(m.float64),
    "even row stride": lambda m: m.arange(18.0).reshape(3, 6)[:, 2:4].view(m.float64),
    "row slice": lambda m: m.arange(12.0).reshape(3, 4)[:, :2].view(m.complex128),
    "expanded last dim": lambda m: m.zeros(2, 1).expand(2, 4).view(m.float64),
    "expanded rows": lambda m: m.arange(4.0).reshape(1, 4).expand(3, 4).view(m.float64),
    "expanded rows smaller": lambda m: m.arange(4.0).reshape(1, 4).expand(3, 4).view(m.uint8),
    "size-1 last dim": lambda m: m.zeros(4, 1).view(m.float64),
    "size-1 last dim, stride 2": lambda m: m.zeros(2, 4).t().contiguous().t()[:, :1].view(
        m.float16),
    "empty rows": lambda m: m.zeros(0, 4).view(m.float64),
    "empty": lambda m: m.zeros(3, 0).view(m.float16),
    "int to complex": lambda m: m.arange(12).reshape(3, 4).view(m.complex128),
    "bool to int64": lambda m: (m.arange(16) % 3 == 0).reshape(2, 8).view(m.int64),
    "float16 offset to complex32": lambda m: m.arange(8.0, dtype=m.float16)[1:5].view(
        m.complex32),
    "complex32 to float64": lambda m: m.zeros(4, dtype=m.complex32).view(m.float64),
    "two dtypes": lambda m: m.zeros(2, 3).view(m.float16, m.float16),
    "dtype and size": lambda m: m.zeros(2, 3).view(m.float16, 3),
    "dtype twice": lambda m: m.zeros(2, 3).view(m.float16, dtype=m.float16),
}


@pytest.mark.parametrize("case", sorted(LAYOUTS))
def test_view_dtype_layouts_and_errors(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's experimental-ComplexHalf warning
        rt = _outcome(lambda: LAYOUTS[case](torch))
    re_ = _outcome(lambda: LAYOUTS[case](ember))
    if isinstance(rt, Exception):
        _same_error(re_, rt)
        return
    assert not isinstance(re_, Exception), re_
    assert tuple(re_.shape) == tuple(rt.shape)
    if rt.numel():
        assert re_.stride() == rt.stride()
        assert re_.storage_offset() == rt.storage_offset()
    assert _raw(re_) == _raw(rt)


def test_view_dtype_shares_memory_and_version():
    x = ember.tensor([1., 2.])
    y = x.view(ember.int32)
    y[0] = 0
    assert x.tolist() == [0.0, 2.0]
    assert x._version == y._version == 1
    x.mul_(2)
    assert y.tolist() == [0, 1082130432] and y._version == 2
    w = ember.arange(4.0).reshape(2, 2).t()
    v = w.view(ember.int32)  # same size: any layout
    v.fill_(0)
    assert w.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    b = ember.zeros(4, dtype=ember.uint8)
    b.view(ember.float32).fill_(1.0)
    assert b.tolist() == torch.zeros(4, dtype=torch.uint8).view(torch.float32).fill_(
        1.0).view(torch.uint8).tolist()


def test_view_dtype_autograd_as_torch():
    """view(dtype) is not differentiable in torch: no grad_fn, requires_grad False, not a
    view for autograd; an in-place change through it leaves the base's node alone."""
    for m in (torch, ember):
        x = m.tensor([1., 2.], requires_grad=True)
        for dt in (m.float32, m.int32, m.float16):
            y = x.view(dt)
            assert y.grad_fn is None and not y.requires_grad and not y._is_view()
        y = x.view(m.float32)
        y.add_(1)  # allowed: the result is outside the graph
        assert x.tolist() == [2.0, 3.0] and x._version == 1
        a = m.tensor([1., 2.], requires_grad=True) * 1
        b = a.view(m.float32)
        b.mul_(2)
        assert type(a.grad_fn).__name__ == "MulBackward0"


def test_view_dtype_jit_trace_replays():
    def f(x):
        return (x * 2).view(ember.int32) + 1

    tr = ember.jit.trace(f, ember.tensor([1., 2.]))
    x = ember.tensor([3., 4.])
    assert tr(x).tolist() == ((torch.tensor([3., 4.]) * 2).view(torch.int32) + 1).tolist()


def test_view_dtype_codegen_and_onnx_refuse():
    class M(ember.nn.Module):
        def forward(self, x):
            return (x * 2).view(ember.int32)

    tr = ember.jit.trace(M(), ember.tensor([1., 2.]))
    with pytest.raises(NotImplementedError, match="view\\(dtype\\)"):
        print(tr.code)
    import io

    from ember import onnx
    from ember.onnx._export import UnsupportedOnnxExport
    with pytest.raises(UnsupportedOnnxExport, match="view\\(dtype\\)"):
        onnx.export(M(), (ember.tensor([1., 2.]),), io.BytesIO())


# ----- float64 -> float16 / bfloat16 / float8: rounding through float32 ------------------

def _boundaries(name):
    """float64 values at and just around every halfway point between neighbours of the
    narrow type, and just past float32's own halfway points there, plus specials."""
    t = getattr(torch, name)
    if name == "float16":
        bits = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    elif name == "bfloat16":
        bits = torch.arange(0, 0x7F80, dtype=torch.int32).to(torch.int16).view(
            torch.bfloat16).double().numpy()
    else:
        bits = np.unique(torch.arange(0, 256, dtype=torch.int32).to(torch.uint8).view(
            t).double().numpy())
        bits = bits[np.isfinite(bits) & (bits >= 0)]
    mid = (bits[:-1] + bits[1:]) / 2
    vals = [bits, mid]
    for rel in (2.0 ** -40, 2.0 ** -30, 2.0 ** -25, 2.0 ** -24, 2.0 ** -23):
        vals += [mid * (1 + rel), mid * (1 - rel)]
    top = bits[-1]
    vals.append(np.array([top * 1.0004, top * 1.0005, 65519.99, 65520.0, 65520.01, 1e300,
                          2.0 ** -24 * 0.5, 2.0 ** -25 * (1 + 2.0 ** -40), 2.0 ** -149,
                          5e-324, 0.0, np.inf, np.nan]))
    v = np.concatenate(vals)
    return np.concatenate([v, -v])


NARROW = ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
          "float8_e5m2fnuz"]


def _bits(t):
    """The raw bits of a narrow float tensor (torch or ember) as integers, NaN made one."""
    if isinstance(t, torch.Tensor):
        f, b = t.float().numpy(), t.reshape(-1).view(
            torch.int16 if t.element_size() == 2 else torch.int8).numpy()
    else:
        f, b = t.float()._data, np.ascontiguousarray(t._data).reshape(-1).view(
            np.int16 if t.element_size() == 2 else np.int8)
    return np.where(np.isnan(f).reshape(-1), -1, b.astype(np.int64))


@pytest.mark.parametrize("name", NARROW)
def test_float64_to_narrow_bit_exact_sweep(name):
    v = _boundaries(name)
    tdt, edt = getattr(torch, name), getattr(ember, name)
    ref = _bits(torch.from_numpy(v).to(tdt))
    if name in ("float16", "bfloat16"):
        # the sweep holds values where rounding once differs from torch's
        once = ember.from_numpy(v.astype(edt.np))
        assert (_bits(once) != ref).sum() > 10
    got = ember.from_numpy(v).to(edt)
    assert (_bits(got) == ref).all()
    if name == "float16":
        assert (_bits(ember.from_numpy(v).half()) == ref).all()
    if name == "bfloat16":
        assert (_bits(ember.from_numpy(v).bfloat16()) == ref).all()


def _paths(m, dt, vals, arr):
    """Every way a float64 value reaches a tensor of dtype ``dt``."""
    n = len(vals)
    z = lambda: m.zeros(n, dtype=dt)  # noqa: E731
    out = {
        "to": lambda: m.tensor(arr).to(dt),
        "tensor(list)": lambda: m.tensor(vals, dtype=dt),
        "tensor(ndarray)": lambda: m.tensor(arr, dtype=dt),
        "as_tensor": lambda: m.as_tensor(arr, dtype=dt),
        "full": lambda: m.cat([m.full((1,), v, dtype=dt) for v in vals]),
        "fill_": lambda: m.cat([m.zeros(1, dtype=dt).fill_(v) for v in vals]),
        "fill_ 0-d tensor": lambda: m.cat([m.zeros(1, dtype=dt).fill_(m.tensor(v).double())
                                           for v in vals]),
        "copy_": lambda: z().copy_(m.tensor(arr)),
        "setitem tensor": lambda: _set(z(), slice(None), m.tensor(arr)),
        "setitem scalar": lambda: m.cat([_set(m.zeros(1, dtype=dt), 0, v) for v in vals]),
        "masked_fill": lambda: m.cat([m.zeros(1, dtype=dt).masked_fill(m.tensor([True]), v)
                                      for v in vals]),
        "add_ float64": lambda: z().add_(m.tensor(arr)),
        "complex128": lambda: m.tensor(arr.astype(np.complex128)).to(dt),
        "full_like": lambda: m.cat([m.full_like(m.zeros(1, dtype=dt), v) for v in vals]),
        "new_full": lambda: m.cat([m.zeros(1, dtype=dt).new_full((1,), v) for v in vals]),
        "new_tensor": lambda: m.zeros(1, dtype=dt).new_tensor(vals),
        "index_fill": lambda: m.cat([m.zeros(1, dtype=dt).index_fill(0, m.tensor([0]), v)
                                     for v in vals]),
        "scatter value": lambda: m.cat([m.zeros(1, dtype=dt).scatter(0, m.tensor([0]), v)
                                        for v in vals]),
        "nn.init.constant_": lambda: m.cat([m.nn.init.constant_(m.zeros(1, dtype=dt), v)
                                            for v in vals]),
        "arange": lambda: m.cat([m.arange(v, v + 0.5, 1, dtype=dt) for v in vals]),
        "from_numpy": lambda: m.from_numpy(arr.copy()).to(dt),
    }
    if dt is m.float16:
        out["add 0-d float64"] = lambda: m.cat([m.zeros(1, dtype=dt) + m.tensor(v).double()
                                               for v in vals])
    return out


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float8_e4m3fn"])
def test_float64_to_narrow_every_path(name):
    vals = [1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -8 + 2.0 ** -40, -(1 + 2.0 ** -11 +
            2.0 ** -41), 3 * 2.0 ** -25 * (1 + 2.0 ** -40), 0.1, 65519.99]
    arr = np.array(vals)
    tp = _paths(torch, getattr(torch, name), vals, arr)
    ep = _paths(ember, getattr(ember, name), vals, arr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key in tp:
            r = _outcome(tp[key])
            if isinstance(r, Exception):  # torch has no kernel (float8 arithmetic)
                continue
            got = ep[key]()
            assert got.dtype is getattr(ember, name), key
            assert (_bits(got) == _bits(r)).all(), (key, got, r)


def _set(t, k, v):
    t[k] = v
    return t


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_wide_integers_to_narrow_through_float32(name):
    ints = [2 ** 24 + 2 ** 16 + 1, 2 ** 24 + 1, 65519, 65521, 2 ** 11 + 1, 449, 465, -(2 ** 24 +
            2 ** 16 + 1), 2 ** 40 + 2 ** 32 + 1, 0, 7]
    for src in ("int64", "int32"):
        sub = [i for i in ints if abs(i) < 2 ** 31] if src == "int32" else ints
        r = torch.tensor(sub, dtype=getattr(torch, src)).to(getattr(torch, name))
        got = ember.tensor(sub, dtype=getattr(ember, src)).to(getattr(ember, name))
        assert (_bits(got) == _bits(r)).all(), (src, got, r)


def test_float64_narrowing_0d_empty_noncontiguous():
    v = np.array([[1 + 2.0 ** -11 + 2.0 ** -40, 0.5], [1 + 2.0 ** -8 + 2.0 ** -40, 3.0]])
    for name in ("float16", "bfloat16"):
        tdt, edt = getattr(torch, name), getattr(ember, name)
        assert (_bits(ember.from_numpy(v).t().to(edt)) ==
                _bits(torch.from_numpy(v).t().to(tdt))).all()
        assert (_bits(ember.tensor(v[0, 0]).to(edt)) == _bits(torch.tensor(v[0, 0]).to(tdt))).all()
        assert ember.zeros(0, dtype=ember.float64).to(edt).shape == (0,)


# ----- vector norms of complex inputs ----------------------------------------------------

def _cplx(shape, seed=0, dtype=np.complex64):
    rng = np.random.default_rng(seed)
    z = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if z.size > 2:
        z.reshape(-1)[1] = 0  # a zero element: sgn(0) = 0 in the gradients
    return z


ORDS = [0, 1, 2, math.inf, -math.inf, 3.5, 0.5, -1.5]


def _norm_case(fn, z, grad=True):
    """``fn(module, tensor)`` on torch and on ember: values, dtype, shape, node name and
    gradients (or the same error)."""
    zt = torch.from_numpy(z.copy()).requires_grad_(grad)
    ze = ember.from_numpy(z.copy()).requires_grad_(grad)
    rt, re_ = _outcome(lambda: fn(torch, zt)), _outcome(lambda: fn(ember, ze))
    if isinstance(rt, Exception):
        _same_error(re_, rt)
        return
    assert not isinstance(re_, Exception), re_
    assert str(re_.dtype).split(".")[1] == str(rt.dtype).split(".")[1]
    assert tuple(re_.shape) == tuple(rt.shape)
    tol = 1e-5 if rt.dtype in (torch.float32, torch.complex64) else 1e-12
    np.testing.assert_allclose(re_.detach().numpy(), rt.detach().numpy(), rtol=tol, atol=tol)
    if grad and rt.requires_grad:
        assert type(re_.grad_fn).__name__ == type(rt.grad_fn).__name__
        w = np.random.default_rng(1).standard_normal(tuple(rt.shape))
        for m, r in ((torch, rt), (ember, re_)):
            loss = (r * m.from_numpy(w).to(r.dtype)).sum()
            if loss.is_complex():  # a real loss of a complex result
                loss = loss.real + 0.5 * loss.imag
            loss.backward()
        gt = zt.grad.numpy() if zt.grad is not None else np.zeros_like(z)
        ge = ze.grad.numpy() if ze.grad is not None else np.zeros_like(z)
        gtol = 1e-5 if z.dtype == np.complex64 else 1e-11
        np.testing.assert_allclose(ge, gt, rtol=gtol, atol=gtol)


@pytest.mark.parametrize("ord", ORDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_vector_norm_complex(ord, dtype):
    z = _cplx((3, 4), dtype=dtype)
    _norm_case(lambda m, t: m.linalg.vector_norm(t, ord), z)
    for dim, keepdim in ((1, False), (0, True), ((0, 1), False), (-1, True)):
        _norm_case(lambda m, t, d=dim, k=keepdim: m.linalg.vector_norm(t, ord, d, k), z)
    _norm_case(lambda m, t: t.norm(ord, dim=1), z)
    _norm_case(lambda m, t: m.linalg.norm(t, ord, dim=0), z)


def test_vector_norm_complex_bit_exact_moduli():
    """Norms built from the moduli (1, inf, other p) match torch bit for bit on complex64:
    each modulus is correctly rounded, as torch's."""
    z = _cplx((500,), seed=3) * np.exp(np.random.default_rng(4).uniform(-4, 4, 500))
    z = z.astype(np.complex64)
    for o in (math.inf, -math.inf, 1):
        rt = torch.linalg.vector_norm(torch.from_numpy(z[:8]), o).item()
        re_ = ember.linalg.vector_norm(ember.from_numpy(z[:8]), o).item()
        assert rt == re_, o
    assert ember.linalg.vector_norm(ember.from_numpy(z), math.inf).item() == \
        torch.linalg.vector_norm(torch.from_numpy(z), math.inf).item()


def test_vector_norm_complex_dtype_and_errors():
    z = _cplx((2, 3))
    cases = [
        (lambda m, t: m.linalg.vector_norm(t, dtype=m.complex128)),
        (lambda m, t: m.linalg.vector_norm(t, dtype=m.float64)),
        (lambda m, t: m.linalg.vector_norm(t, dtype=m.float32)),
        (lambda m, t: m.linalg.vector_norm(t.to(m.complex128), dtype=m.complex64)),
        (lambda m, t: m.linalg.vector_norm(t.real, dtype=m.complex128)),
        (lambda m, t: m.linalg.vector_norm(t.real.long())),
        (lambda m, t: t.norm(dtype=m.complex128)),
        (lambda m, t: m.linalg.norm(t)),
        (lambda m, t: m.linalg.norm(t, "fro")),
        (lambda m, t: m.linalg.norm(t, 1)),
        (lambda m, t: m.linalg.norm(t, -math.inf)),
        (lambda m, t: m.linalg.matrix_norm(t, math.inf)),
        (lambda m, t: m.norm(t, 2, dim=1, keepdim=True)),
        (lambda m, t: m.linalg.vector_norm(t, math.inf, out=m.empty(()))),
        (lambda m, t: m.linalg.vector_norm(t[:, ::2])),
        (lambda m, t: m.linalg.vector_norm(t.t(), 3, dim=0)),
        (lambda m, t: m.nn.functional.normalize(t, dim=1)),
        (lambda m, t: m.nn.functional.normalize(t, p=1, dim=0)),
    ]
    for i, f in enumerate(cases):
        _norm_case(f, z, grad=i != 13)  # 13: out= refuses tensors that need grad


def test_vector_norm_complex_0d_and_empty():
    z = np.array(3 + 4j, dtype=np.complex64)
    for o in ORDS:
        _norm_case(lambda m, t, o=o: m.linalg.vector_norm(t, o), z)
    e = np.zeros((0, 3), np.complex64)
    for o in (0, 1, 2, math.inf, 3.5):
        _norm_case(lambda m, t, o=o: m.linalg.vector_norm(t, o), e, grad=False)
        _norm_case(lambda m, t, o=o: m.linalg.vector_norm(t, o, 1), e, grad=False)


@pytest.mark.parametrize("ord", [0, 1, 2, math.inf, -math.inf, 3.5])
def test_vector_norm_complex32(ord):
    z = np.array([[1 + 2j, -3 + 0.5j], [0j, 2 - 2j]], dtype=np.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rt = torch.linalg.vector_norm(torch.from_numpy(z).to(torch.complex32), ord)
    re_ = ember.linalg.vector_norm(ember.from_numpy(z).to(ember.complex32), ord)
    assert re_.dtype is ember.float16
    assert re_.item() == rt.item()
    assert ember.from_numpy(z).to(ember.complex32).norm(ord).item() == rt.item()


# ----- sign of complex inputs ------------------------------------------------------------

SIGN_CASES = {
    "function": lambda m, z: m.sign(z),
    "method": lambda m, z: z.sign(),
    "in place": lambda m, z: z.clone().sign_(),
    "out=": lambda m, z: m.sign(z, out=m.empty(z.shape, dtype=z.dtype)),
    "0-d": lambda m, z: m.sign(z[0]),
    "empty": lambda m, z: m.sign(z[:0]),
    "complex128": lambda m, z: m.sign(z.to(m.complex128)),
    "complex32": lambda m, z: m.sign(z.to(m.complex32)),
    "non-contiguous": lambda m, z: m.sign(z[::2]),
}


@pytest.mark.parametrize("case", sorted(SIGN_CASES))
def test_sign_complex_raises_as_torch(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rt = _outcome(lambda: SIGN_CASES[case](torch, torch.tensor([1 + 1j, -2j, 0j])))
    re_ = _outcome(lambda: SIGN_CASES[case](ember, ember.tensor([1 + 1j, -2j, 0j])))
    assert isinstance(rt, NotImplementedError)
    _same_error(re_, rt)


def test_sgn_and_real_sign_unchanged():
    z = [1 + 1j, -2j, 0j, 3.0]
    assert np.allclose(ember.sgn(ember.tensor(z)).numpy(), torch.sgn(torch.tensor(z)).numpy())
    x = [-2.0, -0.0, 0.0, 3.0, math.nan, math.inf]
    assert ember.sign(ember.tensor(x)).tolist() == torch.sign(torch.tensor(x)).tolist()
    assert ember.tensor([3, -1, 0]).sign().tolist() == [1, -1, 0]
    assert ember.tensor([True, False]).sign().tolist() == [True, False]
    y = ember.tensor(x[:4], requires_grad=True)
    ember.sign(y).sum().backward()
    assert y.grad.tolist() == [0.0] * 4


# ----- PyTorch's OpInfo samples for the norms, on complex dtypes --------------------------

def _opinfo_cases():
    from torch.testing._internal.common_methods_invocations import op_db
    return [o for o in op_db if o.name in ("linalg.vector_norm", "linalg.norm", "norm")]


def _matrix_sv_norm(s):
    """A matrix norm of singular values ('nuc', +-2 over two dims): ember's SVD is real
    only (docs/numerics.md), so these samples are not part of the complex comparison."""
    o = s.kwargs.get("ord", s.kwargs.get("p", s.args[0] if s.args else None))
    dims = s.kwargs.get("dim", s.args[1] if len(s.args) > 1 else None)
    two = isinstance(dims, (tuple, list)) and len(dims) == 2 or \
        (dims is None and s.input.dim() == 2 and o is not None)
    return o == "nuc" or (two and o in (2, -2))


def _to_ember(v):
    if isinstance(v, torch.Tensor):
        return ember.from_numpy(v.detach().numpy().copy())
    if isinstance(v, torch.dtype):
        return getattr(ember, str(v).split(".")[1])
    if isinstance(v, (list, tuple)):
        return type(v)(_to_ember(x) for x in v)
    return v


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_norm_opinfo_samples_complex(dtype):
    """Every OpInfo sample of linalg.vector_norm, linalg.norm and Tensor.norm on complex
    inputs: values, dtype and (complex128) gradients as torch's."""
    seen = 0
    grad = dtype == "complex128"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in _opinfo_cases():
            torch.manual_seed(0)
            for s in op.sample_inputs("cpu", getattr(torch, dtype), requires_grad=grad):
                if _matrix_sv_norm(s):
                    continue
                fn_t = {"linalg.vector_norm": torch.linalg.vector_norm,
                        "linalg.norm": torch.linalg.norm, "norm": torch.norm}[op.name]
                fn_e = {"linalg.vector_norm": ember.linalg.vector_norm,
                        "linalg.norm": ember.linalg.norm, "norm": ember.norm}[op.name]
                xt = s.input.detach().clone().requires_grad_(grad)
                xe = _to_ember(s.input).requires_grad_(grad)
                rt = _outcome(fn_t, xt, *s.args, **s.kwargs)
                re_ = _outcome(fn_e, xe, *_to_ember(s.args),
                               **{k: _to_ember(v) for k, v in s.kwargs.items()})
                if isinstance(rt, Exception):
                    _same_error(re_, rt)
                    continue
                assert not isinstance(re_, Exception), (op.name, s, re_)
                assert str(re_.dtype).split(".")[1] == str(rt.dtype).split(".")[1]
                tol = 2e-5 if dtype == "complex64" else 1e-10
                np.testing.assert_allclose(re_.detach().numpy(), rt.detach().numpy(),
                                           rtol=tol, atol=tol)
                seen += 1
                if grad and rt.numel():
                    w = np.random.default_rng(seen).standard_normal(tuple(rt.shape))
                    (rt * torch.from_numpy(w)).sum().backward()
                    (re_ * ember.from_numpy(w)).sum().backward()
                    assert (xe.grad is None) == (xt.grad is None)  # ord=0: no gradient
                    if xt.grad is not None:
                        np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(),
                                                   rtol=1e-8, atol=1e-8, err_msg=f"{op.name} {s}")
    assert seen > 200


@pytest.mark.parametrize("ord", [1, 2, math.inf, 3.5])
def test_vector_norm_complex_forward_ad(ord):
    z, tan = _cplx((3, 4), seed=5, dtype=np.complex128), _cplx((3, 4), seed=6,
                                                               dtype=np.complex128)
    out = []
    for m in (torch, ember):
        fa = m.autograd.forward_ad
        with fa.dual_level():
            x = fa.make_dual(m.from_numpy(z.copy()), m.from_numpy(tan.copy()))
            out.append(fa.unpack_dual(m.linalg.vector_norm(x, ord, dim=1)).tangent.numpy())
    np.testing.assert_allclose(out[1], out[0], rtol=1e-10, atol=1e-12)
