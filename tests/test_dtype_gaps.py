"""Ops given a dtype PyTorch's kernels have no loop for raise what PyTorch raises (the
error's type and message), and those it computes give its dtype and values: swept over
dtypes x ops x shapes (0-d, empty, 1-d) against torch. Orderings and the real-line
functions are swept in tests/test_dtype_mismatch.py."""

import numpy as np
import pytest
import torch

import ember

_DTYPES = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32",
           "float64", "complex64", "complex128"]
_SHAPES = [(4,), (), (0,)]


def _values(m, dt, shape, vals=(1.5, -3.0, 0.5, 2.0)):
    n = int(np.prod(shape))
    return m.tensor(list(vals[:n]) if shape else vals[0]).reshape(shape).to(getattr(m, dt))


def _run(m, fn):
    """``(outcome, result)``: the result's dtype name, or the error's type and message."""
    try:
        r = fn(m)
    except (RuntimeError, NotImplementedError, TypeError) as e:
        return f"{type(e).__name__}: {e}", None
    r = r[0] if isinstance(r, tuple) else r
    return str(r.dtype).split(".")[-1], r


def _same(fn, where):
    """Assert ember and torch agree: the same error, or the same dtype and values."""
    (oe, re), (ot, rt) = _run(ember, fn), _run(torch, fn)
    assert oe == ot, where
    if re is None:
        return
    a = re.detach().to(ember.complex128 if re.is_complex() else ember.float64).numpy()
    b = rt.detach().to(torch.complex128 if rt.is_complex() else torch.float64).numpy()
    assert a.shape == b.shape, where
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=0, equal_nan=True, err_msg=str(where))


def _b(a, b):
    return lambda m, dt, sh: getattr(m, a)(_values(m, dt, sh), _values(m, dt, sh, b))


_ONE_TO_FOUR = (1.0, 1.0, 2.0, 3.0)
_ZERO_TO_THREE = (0.0, 1.0, 2.0, 3.0)

# each op as called on (module, dtype, shape); the dtypes its PyTorch kernel refuses
# are the point, the rest checks that the refusal is no wider than PyTorch's
_ELEMENTWISE = {
    "atan2": _b("atan2", _ZERO_TO_THREE),
    "hypot": _b("hypot", _ZERO_TO_THREE),
    "copysign": _b("copysign", _ZERO_TO_THREE),
    "copysign_number": lambda m, dt, sh: m.copysign(_values(m, dt, sh), -1.0),
    "nextafter": _b("nextafter", _ZERO_TO_THREE),
    "xlogy": _b("xlogy", _ZERO_TO_THREE),
    "xlog1py": lambda m, dt, sh: m.special.xlog1py(_values(m, dt, sh),
                                                   _values(m, dt, sh, _ZERO_TO_THREE)),
    "igamma": lambda m, dt, sh: m.igamma(_values(m, dt, sh, _ONE_TO_FOUR),
                                         _values(m, dt, sh, _ZERO_TO_THREE)),
    "logaddexp": _b("logaddexp", _ZERO_TO_THREE),
    "ldexp": _b("ldexp", _ZERO_TO_THREE),
    "fmod": _b("fmod", _ONE_TO_FOUR),
    "fmod_number": lambda m, dt, sh: m.fmod(_values(m, dt, sh), 2),
    "remainder": _b("remainder", _ONE_TO_FOUR),
    "remainder_number": lambda m, dt, sh: m.remainder(_values(m, dt, sh), 2),
    "div_trunc": lambda m, dt, sh: m.div(_values(m, dt, sh), _values(m, dt, sh, _ONE_TO_FOUR),
                                         rounding_mode="trunc"),
    "div_floor": lambda m, dt, sh: m.div(_values(m, dt, sh), _values(m, dt, sh, _ONE_TO_FOUR),
                                         rounding_mode="floor"),
    "div_trunc_number": lambda m, dt, sh: m.div(_values(m, dt, sh), 2, rounding_mode="trunc"),
    "floor_divide": _b("floor_divide", _ONE_TO_FOUR),
    "floor_divide_number": lambda m, dt, sh: m.floor_divide(_values(m, dt, sh), 2),
    "heaviside": _b("heaviside", _ZERO_TO_THREE),
    "polar": _b("polar", _ZERO_TO_THREE),
    "complex": _b("complex", _ZERO_TO_THREE),
    "gcd": _b("gcd", _ZERO_TO_THREE),
    "lcm": _b("lcm", _ZERO_TO_THREE),
    "bitwise_and": _b("bitwise_and", _ZERO_TO_THREE),
    "bitwise_xor": _b("bitwise_xor", _ZERO_TO_THREE),
    "or_number": lambda m, dt, sh: _values(m, dt, sh) | 1,
    "bitwise_not": lambda m, dt, sh: m.bitwise_not(_values(m, dt, sh)),
    "invert": lambda m, dt, sh: ~_values(m, dt, sh),
    "left_shift": _b("bitwise_left_shift", _ZERO_TO_THREE),
    "right_shift_number": lambda m, dt, sh: _values(m, dt, sh) >> 1,
    "floor": lambda m, dt, sh: m.floor(_values(m, dt, sh)),
    "ceil": lambda m, dt, sh: m.ceil(_values(m, dt, sh)),
    "trunc": lambda m, dt, sh: m.trunc(_values(m, dt, sh)),
    "fix": lambda m, dt, sh: m.fix(_values(m, dt, sh)),
    "signbit": lambda m, dt, sh: m.signbit(_values(m, dt, sh)),
    "cummax": lambda m, dt, sh: m.cummax(_values(m, dt, sh), 0),
    "cummin": lambda m, dt, sh: m.cummin(_values(m, dt, sh), 0),
    "unique": lambda m, dt, sh: m.unique(_values(m, dt, sh)),
    "unique_dim": lambda m, dt, sh: m.unique(_values(m, dt, sh), dim=0),
    "unique_consecutive": lambda m, dt, sh: m.unique_consecutive(_values(m, dt, sh)),
    "searchsorted": lambda m, dt, sh: m.searchsorted(_values(m, dt, (4,), _ZERO_TO_THREE),
                                                     _values(m, dt, sh)),
    "searchsorted_number": lambda m, dt, sh: m.searchsorted(_values(m, dt, (4,), _ZERO_TO_THREE),
                                                            1),
    "bucketize": lambda m, dt, sh: m.bucketize(_values(m, dt, sh),
                                               _values(m, dt, (4,), _ZERO_TO_THREE)),
    "isin": lambda m, dt, sh: m.isin(_values(m, dt, sh), _values(m, dt, (4,), _ZERO_TO_THREE)),
    "isin_number": lambda m, dt, sh: m.isin(_values(m, dt, sh), 1),
    "bincount": lambda m, dt, sh: m.bincount(_values(m, dt, sh, _ZERO_TO_THREE)),
    "clamp_float": lambda m, dt, sh: m.clamp(_values(m, dt, sh), min=0.5),
    "clamp_int": lambda m, dt, sh: m.clamp(_values(m, dt, sh), min=0, max=1),
    "clamp_bool": lambda m, dt, sh: m.clamp(_values(m, dt, sh), min=True),
    "clamp_bool_max": lambda m, dt, sh: m.clamp(_values(m, dt, sh), max=True),
    "clamp_bool_both": lambda m, dt, sh: m.clamp(_values(m, dt, sh), True, False),
    "clip_float": lambda m, dt, sh: m.clip(_values(m, dt, sh), max=0.5),
    "clamp_min": lambda m, dt, sh: m.clamp_min(_values(m, dt, sh), 0.5),
    "clamp_max_int": lambda m, dt, sh: m.clamp_max(_values(m, dt, sh), 2),
    "clamp_tensor": lambda m, dt, sh: m.clamp(_values(m, dt, sh),
                                              min=_values(m, "float32", sh, _ZERO_TO_THREE)),
    "mvlgamma": lambda m, dt, sh: m.mvlgamma(_values(m, dt, sh, (1.5, 3.0, 2.5, 4.0)), 2),
}


@pytest.mark.parametrize("name", sorted(_ELEMENTWISE))
def test_ops_refuse_or_compute_dtypes_as_torch(name):
    fn = _ELEMENTWISE[name]
    for dt in _DTYPES:
        for sh in _SHAPES:
            if name.startswith(("cummax", "cummin", "unique_dim")) and sh == ():
                continue  # (PyTorch's dim 0 of a 0-d tensor: both raise, in other words)
            _same(lambda m, dt=dt, sh=sh: fn(m, dt, sh), (name, dt, sh))


_MIXED = {
    # the dtype refused is the one the kernel computes in, after promotion
    "hypot_int_float": lambda m: m.hypot(m.tensor([3, 4]), m.tensor([4.0, 3.0])),
    "nextafter_int_float": lambda m: m.nextafter(m.tensor([1, 2]), m.tensor([1.0, 3.0])),
    "igamma_int_float": lambda m: m.igamma(m.tensor([1, 2]), m.tensor([1.0, 2.0])),
    "and_float_number": lambda m: m.tensor([1, 2]) & 2.5,
    "bool_shift_bool": lambda m: m.tensor([True, False]) << True,
    "bool_shift_int": lambda m: m.tensor([True, False]) << 1,
    "remainder_complex_number": lambda m: m.tensor([1, 2]) % 2j,
    "gcd_int_bool": lambda m: m.gcd(m.tensor([4, 6]), m.tensor([True, True])),
    "searchsorted_bool_true": lambda m: m.searchsorted(m.tensor([False, True]), True),
    "searchsorted_float_complex": lambda m: m.searchsorted(m.tensor([0.0, 1.0]), 1j),
    "searchsorted_bool_float": lambda m: m.searchsorted(m.tensor([False, True]),
                                                        m.tensor([0.5])),
    "bucketize_complex_number": lambda m: m.bucketize(1j, m.tensor([0.0, 1.0])),
    "isin_bool_complex": lambda m: m.isin(m.tensor([True]), m.tensor([1j])),
    "isin_complex_bool": lambda m: m.isin(m.tensor([1j]), m.tensor([True])),
    "isin_number_complex": lambda m: m.isin(1j, m.tensor([1.0])),
    "isin_float_number": lambda m: m.isin(m.tensor([1.0, 1.5]), 1.5),
    "bincount_half_weights": lambda m: m.bincount(m.tensor([0, 1, 1]),
                                                  weights=m.tensor([0.5, 1.0, 2.0]).half()),
    "bincount_float_2d": lambda m: m.bincount(m.zeros(2, 2)),
    "unique_consecutive_complex_2d_dim": lambda m: m.unique_consecutive(
        m.zeros(2, 2, dtype=m.complex64), dim=1),
    "unique_consecutive_complex_1d_dim": lambda m: m.unique_consecutive(
        m.zeros(3, dtype=m.complex64), dim=0),
    "cummax_complex_one": lambda m: m.cummax(m.tensor([1j]), 0),
    "clamp_bool_mixed": lambda m: m.clamp(m.tensor([True, False]), True, 0.5),
    "clamp_bool_int_bool": lambda m: m.clamp(m.tensor([True, False]), 1, True),
    "clamp_bool_out": lambda m: m.clamp(m.tensor([True, False]), 0.5, out=m.empty(2)),
    "clamp_bool_large_int": lambda m: m.clamp(m.tensor([True, False]), 2 ** 40),
    "clamp_inplace_bool": lambda m: m.tensor([True, False]).clamp_(True),
    "sub_two_bools": lambda m: m.tensor([True]) - m.tensor([False]),
    "sub_bool_scalar_bool": lambda m: m.tensor([True]) - True,
    "sub_bool_int": lambda m: m.tensor([True]) - 1,
    "sub_bools_alpha": lambda m: m.tensor([True]).sub(m.tensor([True]), alpha=2),
    "rsub_bools_alpha": lambda m: m.rsub(m.tensor([True]), m.tensor([True]), alpha=2),
    "sub_int_bool_alpha": lambda m: m.tensor([1]).sub(m.tensor([True]), alpha=2),
    "heaviside_complex": lambda m: m.heaviside(m.tensor([1j]), m.tensor([1j])),
    "polar_float_double": lambda m: m.polar(m.tensor([1.0]), m.tensor([0.5]).double()),
    "polar_long_float": lambda m: m.polar(m.tensor([1]), m.tensor([0.5])),
    "complex_half_float": lambda m: m.complex(m.tensor([1.0]).half(), m.tensor([0.5])),
}


@pytest.mark.parametrize("name", sorted(_MIXED))
def test_promoted_and_scalar_operands_as_torch(name):
    _same(_MIXED[name], name)


def _conv(nd, transposed, dt, batch, k=2, **kw):
    def fn(m):
        shape = ((batch,) if batch is not None else ()) + (2,) + (5,) * nd
        x = m.ones(shape, dtype=getattr(m, dt))
        w = m.ones((2, 2 // kw.get("groups", 1)) + (k,) * nd, dtype=getattr(m, dt))
        name = f"conv_transpose{nd}d" if transposed else f"conv{nd}d"
        return getattr(m.nn.functional, name)(x, w, **kw)
    return fn


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("transposed", [False, True])
def test_convolutions_refuse_dtypes_as_torch(nd, transposed):
    # bool convolved (ember computed it), integers in the dilated and transposed kernels
    geometries = [{}, dict(dilation=2), dict(groups=2), dict(stride=2), dict(padding=1),
                  dict(k=1), dict(k=1, stride=2)]
    for kw in geometries:
        for dt in ("bool", "uint8", "int8", "int16", "int32", "int64", "float32"):
            for batch in (1, 0, None):  # an empty batch runs no kernel: it computes
                _same(_conv(nd, transposed, dt, batch, **kw), (kw, dt, batch))


@pytest.mark.parametrize("name", ["mse_loss", "smooth_l1_loss", "huber_loss", "l1_loss",
                                  "soft_margin_loss"])
def test_losses_refuse_dtypes_as_torch(name):
    for a in ("bool", "uint8", "int64", "float16", "float32", "complex64"):
        for b in ("bool", "int64", "float32", "complex64"):
            for reduction in ("mean", "none", "sum"):
                for shape in ((3,), (), (0,)):
                    def fn(m, a=a, b=b, reduction=reduction, shape=shape):
                        x = m.ones(shape).to(getattr(m, a))
                        t = m.zeros(shape).to(getattr(m, b))
                        return getattr(m.nn.functional, name)(x, t, reduction=reduction)
                    _same(fn, (a, b, reduction, shape))


def _pool(name, nd, spatial, *args, batch=1, **kw):
    def fn(m, dt):
        shape = ((batch,) if batch is not None else ()) + (2,) + (spatial,) * nd
        return getattr(m.nn.functional, name)(m.ones(shape).to(getattr(m, dt)), *args, **kw)
    return fn


_POOLS = {}
for _nd in (1, 2, 3):
    _POOLS[f"avg_pool{_nd}d"] = _pool(f"avg_pool{_nd}d", _nd, 4, 2)
    _POOLS[f"avg_pool{_nd}d_empty"] = _pool(f"avg_pool{_nd}d", _nd, 4, 2, batch=0)
    _POOLS[f"avg_pool{_nd}d_unbatched"] = _pool(f"avg_pool{_nd}d", _nd, 4, 2, batch=None)
    _POOLS[f"max_pool{_nd}d"] = _pool(f"max_pool{_nd}d", _nd, 4, 2)
    _POOLS[f"max_pool{_nd}d_indices"] = _pool(f"max_pool{_nd}d", _nd, 4, 2,
                                              return_indices=True)
    _POOLS[f"max_pool{_nd}d_empty"] = _pool(f"max_pool{_nd}d", _nd, 4, 2, batch=0)
    _POOLS[f"adaptive_avg_pool{_nd}d"] = _pool(f"adaptive_avg_pool{_nd}d", _nd, 4, 3)
    _POOLS[f"adaptive_avg_pool{_nd}d_to_1"] = _pool(f"adaptive_avg_pool{_nd}d", _nd, 4, 1)
    _POOLS[f"adaptive_max_pool{_nd}d"] = _pool(f"adaptive_max_pool{_nd}d", _nd, 4, 3)
    _POOLS[f"lp_pool{_nd}d"] = _pool(f"lp_pool{_nd}d", _nd, 4, 2, 2)
_POOLS["avg_pool2d_divisor"] = _pool("avg_pool2d", 2, 4, 2, divisor_override=3)


@pytest.mark.parametrize("name", sorted(_POOLS))
def test_pooling_refuses_dtypes_as_torch(name):
    for dt in _DTYPES:
        _same(lambda m, dt=dt: _POOLS[name](m, dt), (name, dt))


def _bits_and_grads(fe, ft, shape, dt, seed):
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal(shape) * 3).astype(np.float32)
    xe = ember.tensor(v).to(getattr(ember, dt)).requires_grad_(True)
    xt = torch.tensor(v).to(getattr(torch, dt)).requires_grad_(True)
    ye, yt = fe(xe), ft(xt)
    assert str(ye.dtype).split(".")[-1] == str(yt.dtype).split(".")[-1] == dt
    assert np.array_equal(ye.detach().float().numpy(), yt.detach().float().numpy(),
                          equal_nan=True)
    w = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    (ye * ember.tensor(w).to(ye.dtype)).sum().backward()
    (yt * torch.tensor(w).to(yt.dtype)).sum().backward()
    assert np.array_equal(xe.grad.float().numpy(), xt.grad.float().numpy(), equal_nan=True)


_AVG = [("avg_pool1d", (4, 3, 37), dict(kernel_size=3)),
        ("avg_pool1d", (3, 37), dict(kernel_size=3, stride=2, padding=1)),
        ("avg_pool2d", (2, 3, 17, 19), dict(kernel_size=3, stride=2, padding=1)),
        ("avg_pool2d", (2, 3, 17, 19), dict(kernel_size=4, stride=3, ceil_mode=True)),
        ("avg_pool2d", (2, 3, 17, 19), dict(kernel_size=3, padding=1,
                                            count_include_pad=False)),
        ("avg_pool2d", (2, 3, 17, 19), dict(kernel_size=3, divisor_override=5)),
        ("avg_pool2d", (0, 3, 6, 6), dict(kernel_size=2)),
        ("adaptive_avg_pool1d", (4, 3, 37), dict(output_size=7)),
        ("adaptive_avg_pool2d", (2, 3, 17, 19), dict(output_size=5)),
        ("adaptive_avg_pool2d", (3, 17, 19), dict(output_size=(5, None))),
        ("adaptive_avg_pool2d", (2, 3, 17, 19), dict(output_size=1)),
        ("adaptive_avg_pool3d", (2, 3, 9, 11, 10), dict(output_size=5)),
        ("adaptive_avg_pool3d", (2, 3, 9, 11, 10), dict(output_size=(7, 4, 3)))]


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", range(len(_AVG)))
def test_half_average_pooling_bits_as_torch(case, dt):
    # windows summed in float32 and rounded once (2-d), in the dtype step by step (the
    # adaptive 3-d kernel); gradients spread in PyTorch's order: the same bits
    name, shape, kw = _AVG[case]
    _bits_and_grads(lambda x: getattr(ember.nn.functional, name)(x, **kw),
                    lambda x: getattr(torch.nn.functional, name)(x, **kw), shape, dt, case)


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("p", [1, 2, 3, 5])
def test_mvlgamma_reduced_precision_as_torch(p, dt):
    rng = np.random.default_rng(p)
    v = (rng.uniform(0, 12, 64) + (p - 1) / 2).astype(np.float32)
    v[:3] = [np.nan, np.inf, (p - 1) / 2 + 0.0]
    xe = ember.tensor(v).to(getattr(ember, dt)).requires_grad_(True)
    xt = torch.tensor(v).to(getattr(torch, dt)).requires_grad_(True)
    ye, yt = ember.mvlgamma(xe, p), torch.mvlgamma(xt, p)
    assert str(ye.dtype) == "ember." + dt
    a, b = ye.detach().double().numpy(), yt.detach().double().numpy()
    if dt == "float32":  # (lgamma's own last bits)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, equal_nan=True)
    else:
        assert np.array_equal(a, b, equal_nan=True)
    ye[3:].sum().backward()
    yt[3:].sum().backward()
    ga, gb = xe.grad.double().numpy(), xt.grad.double().numpy()
    if dt == "float32":
        np.testing.assert_allclose(ga, gb, rtol=1e-5, atol=1e-5, equal_nan=True)
    else:  # digamma per shift, summed in float32 and rounded once
        assert np.array_equal(ga, gb, equal_nan=True)
    assert ember.mvlgamma(ember.zeros(0, dtype=getattr(ember, dt)), 2).shape == (0,)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_broadcast_gradients_sum_in_float32(dt):
    # a gradient summed back over a broadcast dim accumulates in float32 and rounds once
    rng = np.random.default_rng(0)
    v = rng.standard_normal((7, 1)).astype(np.float32)
    w = rng.standard_normal((7, 33)).astype(np.float32) * 3
    grads = []
    for m in (ember, torch):
        x = m.tensor(v).to(getattr(m, dt)).requires_grad_(True)
        (x * m.tensor(w).to(getattr(m, dt))).sum().backward()
        grads.append(x.grad.float().numpy())
    assert np.array_equal(*grads)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "int64"])
def test_max_pool_windows_outside_the_input(nd, dt):
    # kernel 2, dilation 2, padding 1 over a size-1 dim: no kernel position of a window
    # lands inside the input (ember raised IndexError): -inf at PyTorch's indices (1-d:
    # its windows meet the input)
    shape = (1, 1) + (1,) * (nd - 1) + (7,)
    outs = []
    for m in (ember, torch):
        x = m.arange(7.0).reshape(shape).to(getattr(m, dt))
        f = getattr(m.nn.functional, f"max_pool{nd}d")
        y, i = f(x, 2, dilation=2, padding=1, return_indices=True)
        outs.append((y.double().numpy().tolist(), i.numpy().tolist(), str(y.dtype)[-6:]))
    assert outs[0] == outs[1]
    if dt != "int64" and nd > 1:
        # PyTorch scatters each window's gradient at those indices, past the input's end
        # (memory it does not own); ember's reach no input
        x = ember.arange(7.0).reshape(shape).to(getattr(ember, dt)).requires_grad_(True)
        getattr(ember.nn.functional, f"max_pool{nd}d")(x, 2, dilation=2, padding=1).sum() \
            .backward()
        assert x.grad.shape == x.shape and not x.grad.float().abs().sum().item()


def test_max_pool_rows_partly_outside_keep_torchs_values_and_gradient():
    # windows that do meet the input, some only in part: values, indices, gradient
    rng = np.random.default_rng(3)
    v = rng.standard_normal((2, 3, 2, 7)).astype(np.float32)
    outs = []
    for m in (ember, torch):
        x = m.tensor(v).requires_grad_(True)
        y, i = m.nn.functional.max_pool2d(x, 2, stride=1, dilation=2, padding=1,
                                          return_indices=True)
        y.sum().backward()
        outs.append((y.detach().numpy(), i.numpy(), x.grad.numpy()))
    for a, b in zip(*outs):
        assert np.array_equal(a, b)
