"""Cross-cutting checks from the audit of the Tensor/autograd and nn issues against
torch: edge cases of creation, promotion, elementwise ops and autograd that the family
tables do not cover, the exception types of bad input, and gradient dtypes inside
float32/float16 graphs (every intermediate gradient has its tensor's dtype)."""
import numpy as np
import pytest
import torch
from oracle import Case, cases, check

import ember

LIBS = [ember, torch]
each_lib = pytest.mark.parametrize("m", LIBS, ids=["ember", "torch"])


def _np(x):
    return np.asarray(x.detach().numpy())


def _compare(e, t):
    if isinstance(t, (tuple, list)):
        assert isinstance(e, (tuple, list)) and len(e) == len(t), (e, t)
        for a, b in zip(e, t):
            _compare(a, b)
    elif isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), f"ember gave {e!r}, torch a tensor"
        assert tuple(e.shape) == tuple(t.shape), (e.shape, t.shape)
        assert e.dtype.name == str(t.dtype).replace("torch.", ""), (e.dtype, t.dtype)
        assert e.requires_grad == t.requires_grad
        a, b = _np(e), _np(t)
        if b.dtype.kind in "biu":
            np.testing.assert_array_equal(a, b)
        else:
            tol = 1e-2 if b.dtype == np.float16 else 1e-6  # the oracle's half tolerance
            np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=tol,
                                       atol=tol, equal_nan=True)
    elif isinstance(t, torch.dtype):
        assert e.name == str(t).replace("torch.", "")
    elif isinstance(t, torch.Size):
        assert isinstance(e, ember.Size) and tuple(e) == tuple(t)
    else:
        assert type(e) is type(t) and e == t, (e, t)


def _outcome(fn, m):
    try:
        return fn(m), None
    except Exception as err:  # noqa: BLE001 - the exception type is what is compared
        return None, err


def same(fn):
    """``fn(m)`` gives the same result in both libraries, or raises the same exception type
    (never one from inside NumPy)."""
    t, t_err = _outcome(fn, torch)
    e, e_err = _outcome(fn, ember)
    if t_err is not None:
        assert e_err is not None, f"torch raised {type(t_err).__name__}: {t_err}; ember gave {e!r}"
        assert isinstance(e_err, type(t_err)), \
            f"ember raised {type(e_err).__name__}: {e_err}; torch {type(t_err).__name__}: {t_err}"
        tb = e_err.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        assert "numpy" not in tb.tb_frame.f_code.co_filename, f"NumPy error leaked: {e_err!r}"
        return
    assert e_err is None, f"ember raised {type(e_err).__name__}: {e_err}; torch gave {t!r}"
    _compare(e, t)


def grads(fn, *arrays, dtype=np.float32):
    """A function of ``m`` that runs ``fn`` on leaves made from ``arrays`` and returns the
    output and the leaves' gradients for a fixed grad_output."""
    def run(m):
        xs = [m.tensor(np.asarray(a, dtype=dtype), requires_grad=True) for a in arrays]
        out = fn(m, *xs)
        go = np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)).astype(dtype)
        out.backward(m.tensor(go))
        return [out] + [x.grad for x in xs]
    return run


# ----- creation -------------------------------------------------------------------------------

CREATION = {
    "tensor_none": lambda m: m.tensor(None),
    "tensor_int_overflow": lambda m: m.tensor(2 ** 63),
    "tensor_list_int_overflow": lambda m: m.tensor([1, 2 ** 64]),
    "tensor_nan_to_int": lambda m: m.tensor(float("nan"), dtype=m.int64),
    "tensor_300_to_uint8": lambda m: m.tensor([300], dtype=m.uint8),
    "tensor_neg_to_uint8_wraps": lambda m: m.tensor([-1], dtype=m.uint8),
    "tensor_ragged": lambda m: m.tensor([[1, 2], [3]]),
    "zeros_size_kw": lambda m: m.zeros(size=(2, 3)),
    "ones_size_kw": lambda m: m.ones(size=[2]),
    "empty_size_kw": lambda m: m.empty(size=(2, 3)).shape,
    "rand_size_kw": lambda m: m.rand(size=(2, 3)).shape,
    "randn_size_kw": lambda m: m.randn(size=(4,)).shape,
    "zeros_float_size": lambda m: m.zeros(2.5),
    "zeros_float_in_tuple": lambda m: m.zeros((2, 2.5)),
    "zeros_bool_size": lambda m: m.zeros(True),
    "zeros_str_size": lambda m: m.zeros("a"),
    "zeros_0d_tensor_size": lambda m: m.zeros(m.tensor(2)),
    "arange_end_kw": lambda m: m.arange(end=4),
    "arange_start_end_kw": lambda m: m.arange(start=1, end=4),
    "eye_negative": lambda m: m.eye(-1),
    "eye_negative_m": lambda m: m.eye(2, -1),
    "reshape_float": lambda m: m.ones(12).reshape((2.0, 6)),
    "reshape_0d_tensor": lambda m: m.ones(12).reshape(m.tensor(12)),
    "permute_float": lambda m: m.ones(2, 3).permute((1.0, 0)),
    "view_str": lambda m: m.ones(2, 3).view("a"),
    "type_legacy_name": lambda m: (m.ones(2).type("torch.DoubleTensor"),
                                   m.ones(2).type("torch.IntTensor"), m.ones(2).type()),
    "type_bad_name": lambda m: m.ones(2).type("float32"),
}


@pytest.mark.parametrize("name", list(CREATION))
def test_creation_and_sizes(name):
    same(CREATION[name])


# ----- promotion and dtype rules of elementwise ops -------------------------------------------

DTYPE_RULES = {
    "where_two_floats": lambda m: m.where(m.tensor([True, False]), 1.0, 2.0),
    "where_two_ints": lambda m: m.where(m.tensor([True, False]), 1, 2),
    "where_bool_float": lambda m: m.where(m.tensor([True, False]), True, 2.5),
    "copysign_f32": lambda m: m.copysign(m.ones(2), -m.ones(2)),
    "copysign_f16_scalar": lambda m: m.copysign(m.ones(2, dtype=m.float16), -1),
    "copysign_int": lambda m: m.copysign(m.tensor([5, -3]), m.tensor([-1, 1])),
    "square_bool": lambda m: m.square(m.tensor([True, False])),
    "sign_bool": lambda m: m.sign(m.tensor([True, False])),
    "sign_nan": lambda m: m.sign(m.tensor([float("nan"), -2.0, 0.0])),
    "cumsum_f16": lambda m: m.full((300,), 0.1, dtype=m.float16).cumsum(0),
    "int_pow_negative_tensor": lambda m: m.tensor([2, -1, 1, 0, 3]) ** m.tensor([-2, -3, -1, 2, 2]),
    "rpow_int_negative": lambda m: 2 ** m.tensor([[1, -2, 0], [3, 5, -7]]),
    "rpow_minus_one": lambda m: (-1) ** m.tensor([1, -2, -3]),
    "pow_ndarray": lambda m: m.tensor([1.0, 2.0]) ** np.array([2.0, 3.0]),
    "lshift": lambda m: m.tensor([5, -3]) << 2,
    "rshift": lambda m: m.tensor([5, -3]) >> 1,
    "rlshift": lambda m: 1 << m.tensor([2, 3]),
    "lshift_bool": lambda m: m.tensor([True]) << 1,
    "bitwise_left_shift": lambda m: m.bitwise_left_shift(m.tensor([1, 2]), m.tensor([3, 1])),
    "rsub": lambda m: m.rsub(m.tensor([1.0, 2.0]), 5),
    "rsub_alpha": lambda m: m.rsub(m.tensor([1.0, 2.0]), m.tensor([3.0, 4.0]), alpha=2),
    "add_bool_alpha": lambda m: m.add(m.tensor([True, False]), m.tensor([True, True]), alpha=2),
    "add_int_float_scalar_alpha": lambda m: m.add(m.tensor([1, 2]), 1.5, alpha=2),
    "logaddexp_inf": lambda m: m.logaddexp(m.tensor([1.0, -float("inf"), float("inf")]),
                                           m.tensor([2.0, -float("inf"), 3.0])),
    "logaddexp2": lambda m: m.logaddexp2(m.tensor([1.0, 5.0]), m.tensor([2.0, 5.0])),
    "broadcast_shapes_size": lambda m: m.broadcast_shapes((3,), (2, 1)),
    "meshgrid_ij": lambda m: m.meshgrid(m.arange(2), m.arange(3), m.arange(4), indexing="ij"),
    "meshgrid_xy": lambda m: m.meshgrid([m.arange(2), m.arange(3), m.arange(4)], indexing="xy"),
    "split_with_sizes": lambda m: m.arange(6).split_with_sizes([1, 5]),
    "flip_varargs": lambda m: m.arange(6).reshape(2, 3).flip(0, 1),
    "flip_dims_kw": lambda m: m.arange(6).reshape(2, 3).flip(dims=(1,)),
    "clip_tensor_bounds": lambda m: m.clip(m.arange(5.0), m.tensor(1.0), m.tensor(3.0)),
    "unique": lambda m: m.unique(m.tensor([3.0, 1.0, 2.0, 3.0, float("nan"), float("nan")]),
                                 return_inverse=True, return_counts=True),
    "unique_dim": lambda m: m.tensor([[1, 2], [1, 2], [0, 5]]).unique(dim=0, return_inverse=True,
                                                                     return_counts=True),
    "unique_0d_bool": lambda m: (m.unique(m.tensor(5)), m.tensor([True, False, True]).unique()),
    "unique_inverse_shape": lambda m: m.unique(m.tensor([[3, 1], [1, 2]]), return_inverse=True),
    "unique_consecutive": lambda m: m.unique_consecutive(m.tensor([1, 1, 2, 2, 3, 1, 1]),
                                                         return_inverse=True, return_counts=True),
    "unique_consecutive_dim": lambda m: m.tensor([[1, 1], [1, 1], [2, 3]]).unique_consecutive(
        dim=0, return_counts=True),
    "flatten_0d_bad_dim": lambda m: m.tensor(1.0).flatten(1),
    "nn_flatten_0d": lambda m: m.nn.Flatten()(m.tensor(1.0)),
    "channels_last": lambda m: (lambda y: (y.stride(), y.is_contiguous(),
                                           y.is_contiguous(memory_format=m.channels_last),
                                           y.contiguous().stride()))(
        m.arange(24.0).reshape(1, 2, 3, 4).to(memory_format=m.channels_last)),
    "channels_last_clone_grad": lambda m: (lambda x: (
        (x.clone(memory_format=m.channels_last) ** 2).sum().backward(), x.grad.stride(),
        x.grad)[1:])(m.arange(24.0).reshape(1, 2, 3, 4).requires_grad_()),
    "channels_last_rank": lambda m: m.ones(2, 3).contiguous(memory_format=m.channels_last),
    "contiguous_preserve": lambda m: m.ones(2, 3).contiguous(memory_format=m.preserve_format),
    "contiguous_preserve_copy": lambda m: m.ones(2, 3).t().contiguous(
        memory_format=m.preserve_format),
    "contiguous_format_noop": lambda m: m.ones(2, 3).t().contiguous(
        memory_format=m.contiguous_format).stride(),
}


@pytest.mark.parametrize("name", list(DTYPE_RULES))
def test_dtype_rules(name):
    same(DTYPE_RULES[name])


# ----- bad input: torch's exception type, never a NumPy error, never a silent result ---------

_x = lambda m: m.arange(12.0).reshape(3, 4)  # noqa: E731
_i = lambda m: m.tensor([5, -3, 0])  # noqa: E731
_b = lambda m: m.tensor([True, False])  # noqa: E731

BAD = {
    "add_list": lambda m: _x(m) + [1.0, 2.0, 3.0, 4.0],
    "mul_str": lambda m: _x(m) * "a",
    "sub_none": lambda m: _x(m) - None,
    "radd_dict": lambda m: {} + _x(m),
    "floordiv_list": lambda m: _x(m) // [1, 2, 3, 4],
    "mod_none": lambda m: _x(m) % None,
    "pow_str": lambda m: _x(m) ** "a",
    "int_floordiv_zero": lambda m: _i(m) // 0,
    "int_mod_zero_tensor": lambda m: _i(m) % m.tensor([1, 0, 2]),
    "int_div_trunc_zero": lambda m: m.div(_i(m), 0, rounding_mode="trunc"),
    "int_fmod_zero": lambda m: m.fmod(_i(m), 0),
    "scalar_floordiv_int_with_zero": lambda m: 7 // _i(m),
    "float_floordiv_zero_ok": lambda m: 2 // m.tensor([0.0, 2.0]),
    "bool_remainder": lambda m: _b(m) % _b(m),
    "bool_floordiv": lambda m: _b(m) // _b(m),
    "bool_neg": lambda m: -_b(m),
    "bool_abs": lambda m: _b(m).abs(),
    "bool_floor": lambda m: _b(m).floor(),
    "bool_ceil": lambda m: _b(m).ceil(),
    "bool_trunc": lambda m: _b(m).trunc(),
    "bool_round": lambda m: _b(m).round(),
    "int_round_decimals": lambda m: m.tensor([12]).round(decimals=1),
    "int_frac": lambda m: m.tensor([12]).frac(),
    "bool_argmax": lambda m: _b(m).argmax(),
    "float_invert": lambda m: ~_x(m),
    "float_bitwise_not": lambda m: m.bitwise_not(_x(m)),
    "float_lshift": lambda m: _x(m) << 1,
    "int_lshift_float": lambda m: _i(m) << 1.5,
    "lerp_int": lambda m: m.lerp(_i(m), _i(m), 0.5),
    "lerp_end_dtype": lambda m: m.lerp(m.ones(2), m.ones(2, dtype=m.float64), 0.5),
    "lerp_weight_dtype": lambda m: m.lerp(m.ones(2), m.ones(2), m.ones(2, dtype=m.float64)),
    "lerp_0d_weight_f64_ok": lambda m: m.lerp(m.ones(2), m.ones(2),
                                              m.tensor(0.5, dtype=m.float64)),
    "lerp_half_ok": lambda m: m.lerp(m.ones(2, dtype=m.float16), m.ones(2, dtype=m.float16), 0.5),
    "add_int_float_alpha": lambda m: m.add(_i(m), _i(m), alpha=0.5),
    "add_float_bool_alpha": lambda m: m.add(_x(m), _x(m), alpha=True),
    "clamp_str": lambda m: _x(m).clamp("a"),
    "logaddexp_int": lambda m: m.logaddexp(_i(m), _i(m)),
    "meshgrid_dtypes": lambda m: m.meshgrid(m.arange(2), m.arange(2.0), indexing="ij"),
    "meshgrid_2d": lambda m: m.meshgrid(m.ones(2, 2), indexing="ij"),
    "setitem_list_value": lambda m: _x(m).__setitem__(0, [1.0, 2.0, 3.0, 4.0]),
    "setitem_str_value": lambda m: _x(m).__setitem__(0, "a"),
    "setitem_none_value": lambda m: _x(m).__setitem__(0, None),
    "setitem_numpy_scalar_ok": lambda m: (lambda t: (t.__setitem__(0, np.float64(2.0)), t)[1])(
        _x(m)),
    "sum_str_dim": lambda m: _x(m).sum("a"),
    "sum_float_dims": lambda m: _x(m).sum((0.5,)),
    "mean_dims_list_ok": lambda m: _x(m).mean([0, 1]),
    "backward_list_gradient": lambda m: (m.ones(2, requires_grad=True) * 2).backward([1.0, 1.0]),
    "detach_view_inplace": lambda m: (m.ones(2, requires_grad=True) * 1).view(2).detach_(),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input(name):
    same(BAD[name])


# ----- gradients at the edges ----------------------------------------------------------------

GRADS = {
    "atan2_origin": grads(lambda m, a, b: m.atan2(a, b), [0.0, 1.0], [0.0, -1.0]),
    "rpow_zero_base": grads(lambda m, x: 0.0 ** x, [0.0, 1.0, 2.5]),
    "rpow_two": grads(lambda m, x: 2.0 ** x, [0.0, -1.0, 2.5]),
    "logaddexp": grads(lambda m, a, b: m.logaddexp(a, b), [1.0, -3.0], [2.0, -3.0]),
    "logaddexp2": grads(lambda m, a, b: m.logaddexp2(a, b), [1.0, 0.5], [2.0, -1.0]),
    "copysign": grads(lambda m, a: m.copysign(a, m.tensor([-1.0, 2.0, -0.0])), [1.0, -2.0, 3.0]),
    "clip": grads(lambda m, x: x.clip(-0.5, 0.5), [0.3, 2.0, -1.0]),
    "sign_nan_grad": grads(lambda m, x: x.sign(), [float("nan"), 1.0]),
    "meshgrid_grad": grads(lambda m, a, b: m.meshgrid(a, b, indexing="xy")[0] * 2, [1.0, 2.0],
                           [3.0, 4.0, 5.0]),
    "where_scalars_grad": grads(lambda m, x: m.where(x > 0, 1.0, 2.0) * x, [1.0, -1.0]),
    "zero_inplace_gives_zero_grad": grads(lambda m, x: (x * 1).zero_(), [1.0, 2.0]),
    "fill_inplace_gives_zero_grad": grads(lambda m, x: (x * 1).fill_(3.0), [1.0, 2.0]),
    "copy_inplace_gives_zero_grad": grads(lambda m, x, y: (x * 1).copy_(y), [1.0, 2.0],
                                          [3.0, 4.0]),
    "root_grad_f64_into_f32": lambda m: (lambda x: ((x * 2).exp().backward(
        m.ones(2, dtype=m.float64)), x.grad)[1])(m.ones(2, requires_grad=True)),
}


@pytest.mark.parametrize("name", list(GRADS))
def test_edge_gradients(name):
    same(GRADS[name])


EDGE_CASES = [
    Case("atan2_near_origin", lambda m, a, b: m.atan2(a * 1e-3, b), [(3, 4), (3, 4)]),
    Case("logaddexp_table", lambda m, a, b: m.logaddexp(a, b), [(3, 4), (4,)]),
    Case("logaddexp2_table", lambda m, a, b: m.logaddexp2(a, b), [(3, 4), (3, 1)]),
    Case("rsub_table", lambda m, a, b: m.rsub(a, b, alpha=0.5), [(3, 4), (4,)]),
    Case("copysign_table", lambda m, a, b: m.copysign(a, b), [(3, 4), (4,)], gradgrad=False),
    Case("clip_table", lambda m, x: m.clip(x, -0.3, 0.4), [(3, 4)]),
    Case("meshgrid_table", lambda m, a, b: m.meshgrid(a, b, indexing="ij")[1] * a[0], [(3,), (4,)]),
]


@cases(EDGE_CASES)
def test_edge_case_tables(case):
    check(case)


# ----- autograd: accumulation never aliases, names, hooks ------------------------------------

@each_lib
def test_leaf_grads_do_not_alias_grad_output_or_each_other(m):
    a = m.ones(2, requires_grad=True)
    b = m.ones(2, requires_grad=True)
    g = m.ones(2)
    (a + b).backward(g)
    assert a.grad is not b.grad and a.grad is not g
    a.grad.mul_(10)  # what clip_grad_norm_ does in place
    assert b.grad.tolist() == [1.0, 1.0] and g.tolist() == [1.0, 1.0]
    c = m.ones(2, requires_grad=True)
    c.backward(g)
    c.grad.add_(1)
    assert g.tolist() == [1.0, 1.0]
    d = m.ones(2, requires_grad=True)
    e = d + 0
    e.retain_grad()
    e.backward(g)
    e.grad.add_(5)
    assert g.tolist() == [1.0, 1.0] and d.grad.tolist() == [1.0, 1.0]


@each_lib
def test_post_accumulate_grad_hook_must_return_none(m):
    a = m.ones(2, requires_grad=True)
    a.register_post_accumulate_grad_hook(lambda p: p.grad)
    with pytest.raises(RuntimeError, match="should return None"):
        (a * 2).sum().backward()


@each_lib
def test_function_vjp_is_backward(m):
    class Double(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def vjp(ctx, g):
            return g * 2

    x = m.ones(3, requires_grad=True)
    Double.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_node_names_match_torch():
    def names(m):
        x = m.ones(3, requires_grad=True)
        y = x * 1
        y[:1].mul_(2.0)
        out = [x.clamp(0, 1), x.clamp(min=0.0), x.clamp(max=0.0), x.clamp_min(0), x.clamp_max(1),
               x.clamp(min=x), x.clamp(x, x), (x * 1).copy_(x), x ** x, x ** 2, 2 ** x, y]
        return [t.grad_fn.name() for t in out] + [repr(y).split("grad_fn=")[1]]
    assert names(ember) == names(torch)


# ----- gradient dtypes inside low-precision graphs -------------------------------------------

DTYPE_FLOW = {
    "mul_python_float": lambda m, x: x * 0.5,
    "mul_0d_f64": lambda m, x: x * m.tensor(2.0, dtype=m.float64),
    "div_0d_f64": lambda m, x: m.tensor(2.0, dtype=m.float64) / x,
    "pow_0d_f64": lambda m, x: x ** m.tensor(2.0, dtype=m.float64),
    "maximum_0d_f64": lambda m, x: m.maximum(x, m.tensor(0.5, dtype=m.float64)),
    "where_0d_f64": lambda m, x: m.where(x > 0.5, x, m.tensor(0.25, dtype=m.float64)),
    "clamp_0d_f64": lambda m, x: x.clamp(m.tensor(0.4, dtype=m.float64)),
    "atan2_0d_f64": lambda m, x: m.atan2(x, m.tensor(0.25, dtype=m.float64)),
    "lerp_scalar": lambda m, x: m.lerp(x, x * 2, 0.3),
    "rpow": lambda m, x: 2.0 ** x,
    "exp2": lambda m, x: x.exp2(),
    "log10": lambda m, x: x.log10(),
    "erf": lambda m, x: x.erf(),
    "std": lambda m, x: x.std(),
    "norm3": lambda m, x: x.norm(p=3),
    "logsumexp": lambda m, x: x.logsumexp(0),
    "softmax": lambda m, x: x.softmax(0),
    "cumprod": lambda m, x: x.cumprod(0),
    "prod": lambda m, x: x.prod(),
    "mse": lambda m, x: m.nn.functional.mse_loss(x, x * 0.5),
    "huber": lambda m, x: m.nn.functional.huber_loss(x, x * 3),
    "bce_logits": lambda m, x: m.nn.functional.binary_cross_entropy_with_logits(
        x, x.detach() * 0 + 0.3, pos_weight=x.detach() * 0 + 2),
    "gelu_tanh": lambda m, x: m.nn.functional.gelu(x, approximate="tanh"),
    "normalize": lambda m, x: m.nn.functional.normalize(x.reshape(1, -1)),
    "logaddexp": lambda m, x: m.logaddexp(x, x * 2),
    "copysign": lambda m, x: m.copysign(x, -1.0),
}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape", [(), (3,)], ids=["0d", "1d"])
@pytest.mark.parametrize("name", list(DTYPE_FLOW))
def test_intermediate_gradients_keep_their_dtype(name, shape, dtype):
    """Hooks on the op's input (a non-leaf) and output see gradients of their own dtype,
    and the leaf's gradient matches torch's."""
    def run(m):
        dt = getattr(m, dtype)
        x = m.tensor(np.full(shape, 0.6), dtype=dt, requires_grad=True)
        h = x * 1
        seen = []
        h.register_hook(lambda g: seen.append(str(g.dtype).split(".")[-1]))
        y = DTYPE_FLOW[name](m, h)
        y.register_hook(lambda g: seen.append(str(g.dtype).split(".")[-1]))
        (y * 1.5).sum().backward()
        return seen, x.grad
    (e_seen, e_grad), (t_seen, t_grad) = run(ember), run(torch)
    assert e_seen == t_seen, (e_seen, t_seen)
    _compare(e_grad, t_grad)


@each_lib
def test_random_module_fork_rng(m):
    m.manual_seed(3)
    with m.random.fork_rng():
        m.rand(3)
    a = m.rand(2)
    m.random.manual_seed(3)
    assert m.equal(a, m.rand(2)) and m.random.initial_seed() == 3
    state = m.random.get_rng_state()
    b = m.rand(2)
    m.random.set_rng_state(state)
    assert m.equal(b, m.rand(2))
