"""Elementwise ops against torch: values, gradients, second gradients, dtypes, errors."""
import numpy as np
import pytest
from oracle import Case, cases, check, check_raises

pos = dict(low=0.5, high=2.0)
unit = dict(low=-0.9, high=0.9)

UNARY = [
    Case("neg", lambda m, x: -x, [(3, 4)]),
    Case("abs", lambda m, x: m.abs(x), [(3, 4)]),
    Case("exp", lambda m, x: m.exp(x), [(3, 4)]),
    Case("exp2", lambda m, x: m.exp2(x), [(5,)]),
    Case("expm1", lambda m, x: m.expm1(x), [(5,)]),
    Case("log", lambda m, x: m.log(x), [(3, 4)], **pos),
    Case("log2", lambda m, x: m.log2(x), [(5,)], **pos),
    Case("log10", lambda m, x: m.log10(x), [(5,)], **pos),
    Case("log1p", lambda m, x: m.log1p(x), [(5,)], **pos),
    Case("sqrt", lambda m, x: m.sqrt(x), [(3, 4)], **pos),
    Case("rsqrt", lambda m, x: m.rsqrt(x), [(3, 4)], **pos),
    Case("square", lambda m, x: m.square(x), [(3, 4)]),
    Case("sin", lambda m, x: m.sin(x), [(3, 4)]),
    Case("cos", lambda m, x: x.cos(), [(3, 4)]),
    Case("tan", lambda m, x: m.tan(x), [(3, 4)], **unit),
    Case("asin", lambda m, x: m.asin(x), [(3, 4)], **unit),
    Case("acos", lambda m, x: m.acos(x), [(3, 4)], **unit),
    Case("atan", lambda m, x: m.atan(x), [(3, 4)]),
    Case("sinh", lambda m, x: m.sinh(x), [(3, 4)]),
    Case("cosh", lambda m, x: m.cosh(x), [(3, 4)]),
    Case("tanh", lambda m, x: m.tanh(x), [(3, 4)]),
    Case("asinh", lambda m, x: m.asinh(x), [(6,)]),
    Case("acosh", lambda m, x: m.acosh(x), [(6,)], low=1.5, high=3.0),
    Case("atanh", lambda m, x: m.atanh(x), [(6,)], **unit),
    Case("sigmoid", lambda m, x: m.sigmoid(x), [(3, 4)]),
    Case("sigmoid_f32", lambda m, x: x.sigmoid(), [(3, 4)], dtype=np.float32),
    Case("relu", lambda m, x: m.relu(x), [(3, 4)]),
    Case("erf", lambda m, x: m.erf(x * 2), [(4, 5)]),
    Case("erf_f32", lambda m, x: m.erf(x * 2), [(4, 5)], dtype=np.float32),
    Case("erfc", lambda m, x: m.erfc(x * 2), [(4, 5)]),
    Case("erfinv", lambda m, x: m.erfinv(x), [(4, 5)], **unit),
    Case("reciprocal", lambda m, x: m.reciprocal(x), [(3, 4)], **pos),
    Case("floor", lambda m, x: m.floor(x * 3), [(3, 4)]),
    Case("ceil", lambda m, x: m.ceil(x * 3), [(3, 4)]),
    Case("round", lambda m, x: m.round(x * 3), [(3, 4)]),
    Case("round_decimals", lambda m, x: m.round(x * 3, decimals=2), [(3, 4)]),
    Case("trunc", lambda m, x: m.trunc(x * 3), [(3, 4)]),
    Case("frac", lambda m, x: m.frac(x * 3), [(3, 4)]),
    Case("sign", lambda m, x: m.sign(x), [(3, 4)]),
    Case("clamp", lambda m, x: m.clamp(x, -0.5, 0.5), [(3, 4)]),
    Case("clamp_min", lambda m, x: x.clamp(min=0.1), [(3, 4)]),
    Case("clamp_max", lambda m, x: x.clamp(max=0.1), [(3, 4)]),
    Case("clamp_tensor", lambda m, x, lo, hi: m.clamp(x, lo, hi), [(3, 4), (4,), (3, 1)]),
    Case("clamp_tensor_min", lambda m, x, lo: m.clamp(x, min=lo), [(3, 4), (3, 4)]),
    Case("logit", lambda m, x: m.logit(x), [(6,)], low=0.1, high=0.9),
    Case("logit_eps", lambda m, x: m.logit(x, eps=0.2), [(6,)], low=0.05, high=0.95),
    Case("sinc", lambda m, x: m.sinc(x), [(6,)]),
    Case("deg2rad", lambda m, x: m.deg2rad(x), [(6,)]),
    Case("nan_to_num", lambda m, x: m.nan_to_num(m.log(x)), [(6,)]),
    Case("fake_quantize", lambda m, x: m.fake_quantize_per_tensor_affine(x * 3, 0.1, 3, -20, 20),
         [(3, 4)], dtype=np.float32),
    Case("scalar_0d", lambda m, x: m.exp(x) * 2, [()]),
    Case("empty", lambda m, x: m.exp(x), [(0, 3)]),
    Case("f32_chain", lambda m, x: (x.sin() * x.exp()).tanh(), [(8,)], dtype=np.float32),
]

BINARY = [
    Case("add", lambda m, a, b: a + b, [(3, 4), (3, 4)]),
    Case("add_broadcast", lambda m, a, b: a + b, [(3, 1, 4), (2, 1)]),
    Case("add_alpha", lambda m, a, b: m.add(a, b, alpha=2.5), [(3, 4), (4,)]),
    Case("add_scalar", lambda m, a: 2.5 + a + 1, [(3, 4)]),
    Case("sub", lambda m, a, b: a - b, [(3, 4), (4,)]),
    Case("rsub", lambda m, a: 1.5 - a, [(3, 4)]),
    Case("sub_alpha", lambda m, a, b: m.sub(a, b, alpha=3), [(3, 4), (4,)]),
    Case("mul", lambda m, a, b: a * b, [(3, 4), (3, 4)]),
    Case("mul_broadcast", lambda m, a, b: a * b, [(2, 3, 4), (3, 1)]),
    Case("mul_scalar", lambda m, a: a * 3, [(3, 4)]),
    Case("mul_0d", lambda m, a, b: a * b, [(3, 4), ()]),
    Case("div", lambda m, a, b: a / b, [(3, 4), (4,)], low=0.5, high=2),
    Case("rdiv", lambda m, a: 2 / a, [(3, 4)], **pos),
    Case("div_floor", lambda m, a, b: m.div(a, b, rounding_mode="floor"), [(3, 4), (4,)],
         gradgrad=False, **pos),
    Case("div_trunc", lambda m, a, b: m.div(a * 4 - 4, b, rounding_mode="trunc"),
         [(3, 4), (4,)], gradgrad=False, **pos),
    Case("floor_divide", lambda m, a, b: a // b, [(3, 4), (4,)], grad=False, **pos),
    Case("remainder", lambda m, a, b: a % b, [(3, 4), (4,)], low=0.3, high=3),
    Case("fmod", lambda m, a, b: m.fmod(a, b), [(3, 4), (4,)], low=0.3, high=3),
    Case("pow", lambda m, a, b: a ** b, [(3, 4), (3, 4)], **pos),
    Case("pow_scalar", lambda m, a: a ** 3, [(3, 4)]),
    Case("pow_half", lambda m, a: a ** 0.5, [(3, 4)], **pos),
    Case("pow_sq", lambda m, a: a ** 2, [(3, 4)]),
    Case("rpow", lambda m, a: 2 ** a, [(3, 4)]),
    Case("pow_broadcast", lambda m, a, b: m.pow(a, b), [(3, 4), (4,)], **pos),
    Case("atan2", lambda m, a, b: m.atan2(a, b), [(3, 4), (3, 4)]),
    Case("hypot", lambda m, a, b: m.hypot(a, b), [(3, 4), (3, 4)]),
    Case("xlogy", lambda m, a, b: m.xlogy(a, b), [(3, 4), (3, 4)], **pos),
    Case("minimum", lambda m, a, b: m.minimum(a, b), [(3, 4), (4,)]),
    Case("maximum", lambda m, a, b: m.maximum(a, b), [(3, 4), (3, 4)]),
    Case("maximum_ties", lambda m, a: m.maximum(a, a.detach()), [(3, 4)], gradgrad=False),
    Case("where", lambda m, a, b: m.where(a > 0, a, b), [(3, 4), (4,)]),
    Case("where_scalar", lambda m, a: m.where(a > 0, a, 0.0), [(3, 4)]),
    Case("lerp", lambda m, a, b: m.lerp(a, b, 0.3), [(3, 4), (3, 4)]),
    Case("lerp_tensor", lambda m, a, b, w: m.lerp(a, b, w), [(3, 4), (3, 4), (4,)]),
    Case("addcmul", lambda m, a, b, c: m.addcmul(a, b, c, value=0.5), [(3, 4), (3, 4), (4,)]),
    Case("addcdiv", lambda m, a, b, c: m.addcdiv(a, b, c, value=2), [(3, 4), (3, 4), (4,)],
         **pos),
    Case("masked_fill", lambda m, a: a.masked_fill(a > 0.5, -1.0), [(3, 4)]),
    Case("f32_mix_f64_0d", lambda m, a, b: a * b, [(3,), ()], dtype=np.float32),
    Case("copysign", lambda m, a, b: m.copysign(a, b), [(3, 4), (3, 4)], gradgrad=False),
]

COMPARE = [
    Case(n, f, [(3, 4), (4,)], grad=False) for n, f in [
        ("eq", lambda m, a, b: a == b), ("ne", lambda m, a, b: a != b),
        ("lt", lambda m, a, b: a < b), ("le", lambda m, a, b: a <= b),
        ("gt", lambda m, a, b: a > b), ("ge", lambda m, a, b: a >= b),
        ("logical_and", lambda m, a, b: m.logical_and(a > 0, b > 0)),
        ("logical_or", lambda m, a, b: m.logical_or(a > 0, b > 0)),
        ("logical_xor", lambda m, a, b: m.logical_xor(a > 0, b > 0)),
        ("logical_not", lambda m, a, b: m.logical_not(a > b)),
        ("invert_bool", lambda m, a, b: ~(a > b)),
        ("and_bool", lambda m, a, b: (a > 0) & (b > 0)),
        ("isnan", lambda m, a, b: m.isnan(m.log(a))),
        ("isinf", lambda m, a, b: m.isinf(a / 0)),
        ("isfinite", lambda m, a, b: m.isfinite(m.log(a))),
        ("isclose", lambda m, a, b: m.isclose(a, a + b * 1e-9)),
    ]
]


@cases(UNARY)
def test_unary(case):
    check(case)


@cases(BINARY)
def test_binary(case):
    check(case)


@cases(COMPARE)
def test_compare(case):
    check(case)


def _ints(rng):
    return [rng.integers(-5, 5, size=(3, 4)), rng.integers(1, 5, size=(4,))]


PROMOTION = [
    ("int_div_int", lambda m, a, b: a / b),
    ("int_floordiv", lambda m, a, b: a // b),
    ("int_mod", lambda m, a, b: a % b),
    ("int_mul_float_scalar", lambda m, a, b: a * 2.5),
    ("int_add_int_scalar", lambda m, a, b: a + 3),
    ("int_exp", lambda m, a, b: m.exp(a)),
    ("int_sqrt", lambda m, a, b: m.sqrt(b)),
    ("int_sum", lambda m, a, b: a.sum()),
    ("int32_plus_int64", lambda m, a, b: a.int() + b),
    ("uint8_plus_int8", lambda m, a, b: a.abs().to(m.uint8) + b.to(m.int8)),
    ("bool_plus_int", lambda m, a, b: (a > 0) + b),
    ("bool_mul_float", lambda m, a, b: (a > 0) * 1.5),
    ("float16_plus_int", lambda m, a, b: a.half() + b),
    ("float32_plus_float64_0d", lambda m, a, b: a.float() + m.tensor(1.0, dtype=m.float64)),
    ("int_0d_plus_float32", lambda m, a, b: m.tensor(3) + a.float()),
    ("int_pow", lambda m, a, b: a ** 2),
    ("float32_times_int64", lambda m, a, b: a.float() * b),
    ("abs_int", lambda m, a, b: m.abs(a)),
    ("neg_int", lambda m, a, b: -a),
    ("clamp_int", lambda m, a, b: m.clamp(a, -2, 2)),
    ("maximum_int_float", lambda m, a, b: m.maximum(a, b.double())),
    ("where_int_float", lambda m, a, b: m.where(a > 0, a, 0.5)),
    ("int_div_floor", lambda m, a, b: m.div(a, b, rounding_mode="floor")),
    ("int_div_trunc", lambda m, a, b: m.div(a, b, rounding_mode="trunc")),
    ("bitwise_xor", lambda m, a, b: a ^ b),
]


@pytest.mark.parametrize("name,fn", PROMOTION, ids=[p[0] for p in PROMOTION])
def test_type_promotion(name, fn):
    check(Case(name, fn, _ints, grad=False))


ERRORS = [
    ("shape_mismatch", lambda m, a, b: a + b, [(3, 4), (3,)]),
    ("bool_sub", lambda m, a, b: (a > 0) - (b > 0), [(3,), (3,)]),
    ("int_neg_pow", lambda m, a, b: a.long() ** -1, [(3,), (3,)]),
    ("bitwise_float", lambda m, a, b: a & b, [(3,), (3,)]),
    ("where_non_bool", lambda m, a, b: m.where(a, a, b), [(3,), (3,)]),
    ("clamp_none", lambda m, a, b: m.clamp(a), [(3,), (3,)]),
    ("div_bad_mode", lambda m, a, b: m.div(a, b, rounding_mode="x"), [(3,), (3,)]),
    ("masked_fill_float_mask", lambda m, a, b: a.masked_fill(b, 0.0), [(3,), (3,)]),
]


@pytest.mark.parametrize("name,fn,shapes", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, fn, shapes):
    rng = np.random.default_rng(0)
    check_raises(fn, *[rng.standard_normal(s) for s in shapes])


def test_inplace_matches_torch():
    import torch

    import ember
    for name, args in [("add_", (1.5,)), ("mul_", (2.0,)), ("sub_", (0.5,)), ("div_", (4.0,)),
                       ("clamp_", (-0.2, 0.2)), ("exp_", ()), ("sigmoid_", ()), ("relu_", ()),
                       ("pow_", (2,)), ("abs_", ()), ("tanh_", ())]:
        a = np.random.default_rng(1).standard_normal((3, 4))
        e, t = ember.tensor(a), torch.tensor(a)
        re, rt = getattr(e, name)(*args), getattr(t, name)(*args)
        assert re is e and rt is t
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12, err_msg=name)
