"""The Tensor API against torch: creation, dtype inference and promotion, attributes and
conversions, Python protocol, repr (character for character), devices."""
import itertools

import numpy as np
import pytest
import torch

import ember

LIBS = [ember, torch]
each_lib = pytest.mark.parametrize("m", LIBS, ids=["ember", "torch"])
_rng = np.random.default_rng(0)
A = _rng.standard_normal((3, 4))


def _np(x):
    return np.asarray(x.detach().numpy())


def _compare(e, t):
    if isinstance(t, (torch.Size, torch.device)):
        assert repr(e) == repr(t).replace("torch.", "ember."), (e, t)
    elif isinstance(t, (tuple, list)):
        assert type(e) is type(t) and len(e) == len(t), (e, t)
        for a, b in zip(e, t):
            _compare(a, b)
    elif isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), f"ember gave {e!r}"
        assert tuple(e.shape) == tuple(t.shape), (e.shape, t.shape)
        assert e.dtype.name == str(t.dtype).replace("torch.", ""), (e.dtype, t.dtype)
        assert e.requires_grad == t.requires_grad
        np.testing.assert_allclose(_np(e).astype(np.float64), _np(t).astype(np.float64),
                                   rtol=1e-6, atol=1e-7)
    elif isinstance(t, torch.dtype):
        assert e.name == str(t).replace("torch.", "")
    else:
        assert type(e) is type(t) and e == t, (e, t)


def same(fn):
    e, t = fn(ember), fn(torch)
    _compare(e, t)
    return e


# ----- creation ----------------------------------------------------------------------

CREATION = [
    ("tensor_ints", lambda m: m.tensor([[1, 2], [3, 4]])),
    ("tensor_floats", lambda m: m.tensor([1.5, -2.0])),
    ("tensor_mixed", lambda m: m.tensor([1, 2.5, True])),
    ("tensor_bool", lambda m: m.tensor([True, False])),
    ("tensor_scalar_int", lambda m: m.tensor(3)),
    ("tensor_scalar_float", lambda m: m.tensor(3.0)),
    ("tensor_numpy_f32", lambda m: m.tensor(np.ones(2, dtype=np.float32))),
    ("tensor_numpy_i32", lambda m: m.tensor(np.arange(3, dtype=np.int32))),
    ("tensor_dtype", lambda m: m.tensor([1, 2], dtype=m.float64)),
    ("tensor_requires_grad", lambda m: m.tensor([1.0, 2.0], requires_grad=True)),
    ("tensor_empty_list", lambda m: m.tensor([])),
    ("tensor_nested_empty", lambda m: m.tensor([[], []])),
    ("as_tensor_list", lambda m: m.as_tensor([1, 2], dtype=m.float32)),
    ("as_tensor_numpy", lambda m: m.as_tensor(np.arange(4.0))),
    ("zeros_varargs", lambda m: m.zeros(2, 3)),
    ("zeros_tuple", lambda m: m.zeros((2, 3))),
    ("zeros_list", lambda m: m.zeros([2, 3], dtype=m.int32)),
    ("zeros_size", lambda m: m.zeros(m.Size([2, 1]))),
    ("zeros_0d", lambda m: m.zeros(())),
    ("zeros_empty", lambda m: m.zeros(0, 3)),
    ("ones", lambda m: m.ones(3, dtype=m.float16)),
    ("full_int", lambda m: m.full((2,), 3)),
    ("full_float", lambda m: m.full((2, 2), 1.5)),
    ("full_bool", lambda m: m.full((2,), True)),
    ("full_dtype", lambda m: m.full([2], 7, dtype=m.float64)),
    ("empty_shape", lambda m: m.empty(2, 3).shape),
    ("empty_dtype", lambda m: m.empty((2,), dtype=m.int16).dtype),
    ("zeros_like", lambda m: m.zeros_like(m.tensor([1, 2]))),
    ("ones_like_dtype", lambda m: m.ones_like(m.tensor([1.0, 2.0]), dtype=m.float64)),
    ("full_like", lambda m: m.full_like(m.tensor([1, 2]), 7.9)),
    ("empty_like", lambda m: m.empty_like(m.ones(2, 3, dtype=m.int32)).shape),
    ("arange_int", lambda m: m.arange(5)),
    ("arange_start_end", lambda m: m.arange(2, 7)),
    ("arange_float_step", lambda m: m.arange(1, 2.5, 0.5)),
    ("arange_tenth", lambda m: m.arange(0, 1, 0.1)),
    ("arange_negative_step", lambda m: m.arange(10, 0, -3)),
    ("arange_float_end", lambda m: m.arange(5.0)),
    ("arange_dtype", lambda m: m.arange(4, dtype=m.float64)),
    ("linspace", lambda m: m.linspace(0, 1, 5)),
    ("linspace_one", lambda m: m.linspace(-1, 1, 1)),
    ("linspace_int", lambda m: m.linspace(0, 10, 4, dtype=m.int64)),
    ("linspace_many", lambda m: m.linspace(-3, 7, 101)),
    ("logspace", lambda m: m.logspace(0, 2, 3)),
    ("logspace_base", lambda m: m.logspace(0, 3, 4, base=2)),
    ("eye", lambda m: m.eye(3)),
    ("eye_rect", lambda m: m.eye(2, 3, dtype=m.int32)),
    ("eye_bool", lambda m: m.eye(2, dtype=m.bool)),
    ("new_zeros", lambda m: m.tensor([1, 2]).new_zeros(3)),
    ("new_ones", lambda m: m.tensor([1.0, 2.0]).new_ones((2, 2))),
    ("new_full", lambda m: m.tensor([1.0]).new_full((2,), 5)),
    ("new_tensor", lambda m: m.tensor([1.0], dtype=m.float64).new_tensor([3, 4])),
    ("new_empty", lambda m: m.tensor([1]).new_empty(2, 3).shape),
]


@pytest.mark.parametrize("name,fn", CREATION, ids=[c[0] for c in CREATION])
def test_creation(name, fn):
    same(fn)


@each_lib
def test_from_numpy_shares_memory(m):
    a = np.arange(6.0).reshape(2, 3)
    t = m.from_numpy(a)
    a[0, 0] = 100.0
    assert t[0, 0].item() == 100.0
    t[1, 2] = -1.0
    assert a[1, 2] == -1.0
    assert t.numpy() is a or np.shares_memory(t.numpy(), a)


@each_lib
def test_as_tensor_shares_and_tensor_copies(m):
    a = np.arange(3.0)
    shared, copied = m.as_tensor(a), m.tensor(a)
    a[0] = 9.0
    assert shared[0].item() == 9.0 and copied[0].item() == 0.0
    t = m.tensor([1.0, 2.0])
    assert m.as_tensor(t) is t


@each_lib
def test_creation_errors(m):
    with pytest.raises(RuntimeError):
        m.zeros(-1)
    with pytest.raises(RuntimeError):
        m.arange(0, 5, 0)
    with pytest.raises(ValueError):
        m.tensor([[1, 2], [3]])
    with pytest.raises(RuntimeError, match="floating point"):
        m.tensor([1, 2], requires_grad=True)


# ----- dtype inference and promotion ------------------------------------------------------

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]


def test_promotion_table():
    for a, b in itertools.product(DTYPES, DTYPES):
        for za, zb in [(False, False), (False, True), (True, False)]:
            def result(m, a=a, b=b, za=za, zb=zb):
                x = m.ones(() if za else (2,), dtype=getattr(m, a))
                y = m.ones(() if zb else (2,), dtype=getattr(m, b))
                return (x + y).dtype
            _compare(result(ember), result(torch))


@pytest.mark.parametrize("scalar", [True, 2, 2.5], ids=["bool", "int", "float"])
def test_promotion_with_python_scalars(scalar):
    for name in DTYPES:
        same(lambda m, name=name: (m.ones(2, dtype=getattr(m, name)) * scalar).dtype)


def test_division_of_ints_is_float():
    for name in DTYPES:
        same(lambda m, n=name: m.ones(2, dtype=getattr(m, n)) / m.ones(2, dtype=getattr(m, n)))
    same(lambda m: m.tensor([3, 4]) / 2)
    same(lambda m: m.tensor([3, 4]) // 2)


def test_inference_defaults():
    same(lambda m: [m.tensor([1, 2]).dtype, m.tensor([1.0]).dtype, m.tensor([1, 2.5]).dtype,
                    m.tensor(True).dtype, m.tensor(7).dtype, m.get_default_dtype(),
                    m.tensor(np.float32(3)).dtype, m.tensor(np.int16(3)).dtype])


def test_set_default_dtype_float64():
    def f(m):
        m.set_default_dtype(m.float64)
        try:
            return [m.tensor([1.5]).dtype, m.ones(2).dtype, m.arange(2.0).dtype,
                    (m.tensor([1]) / 2).dtype, m.tensor([1]).dtype, (m.tensor([1]) * 1.5).dtype,
                    m.linspace(0, 1, 2).dtype, m.get_default_dtype(),
                    m.tensor(np.float32(1.0)).dtype, m.full((1,), 2.0).dtype,
                    repr(m.tensor([1.5]))]
        finally:
            m.set_default_dtype(m.float32)
    e = same(f)
    assert ember.get_default_dtype() is ember.float32 and e[-1] == "tensor([1.5000])"


# ----- attributes and conversions ------------------------------------------------------

ATTRS = [
    ("shape", lambda m: m.ones(2, 3).shape),
    ("shape_slice", lambda m: m.ones(2, 3, 4).shape[1:]),
    ("size", lambda m: m.ones(2, 3).size()),
    ("size_dim", lambda m: (m.ones(2, 3).size(1), m.ones(2, 3).size(-1))),
    ("dim_ndim_numel", lambda m: (m.ones(2, 3).dim(), m.ones(2, 3).ndim, m.ones(2, 3).numel())),
    ("scalar_meta", lambda m: (m.tensor(5).dim(), m.tensor(5).numel(), m.tensor(5).shape)),
    ("dtype", lambda m: m.ones(2, dtype=m.int8).dtype),
    ("device", lambda m: m.ones(2).device),
    ("T", lambda m: m.tensor(A).T),
    ("mT", lambda m: m.tensor(A).reshape(2, 3, 2).mT),
    ("leaf_flags", lambda m: (m.tensor([1.0]).is_leaf, m.tensor([1.0]).requires_grad,
                              m.tensor([1.0]).grad_fn)),
    ("data", lambda m: m.tensor([1.0, 2.0], requires_grad=True).data),
    ("item_float", lambda m: m.tensor(2.5).item()),
    ("item_one_element", lambda m: m.tensor([[7]]).item()),
    ("item_bool", lambda m: m.tensor([True]).item()),
    ("tolist", lambda m: m.tensor([[1, 2], [3, 4]]).tolist()),
    ("tolist_0d", lambda m: m.tensor(3.5).tolist()),
    ("tolist_float32", lambda m: m.tensor([0.1, 0.2]).tolist()),
    ("float", lambda m: m.tensor([1, 2]).float()),
    ("double", lambda m: m.tensor([1, 2]).double()),
    ("long", lambda m: m.tensor([1.5, -2.7]).long()),
    ("int", lambda m: m.tensor([1.5, -2.7]).int()),
    ("bool", lambda m: m.tensor([1.5, 0.0]).bool()),
    ("half", lambda m: m.tensor([1.0, 2.0]).half()),
    ("to_dtype", lambda m: m.tensor([1, 2]).to(m.float64)),
    ("to_dtype_kw", lambda m: m.tensor([1, 2]).to(dtype=m.int8)),
    ("to_device_str", lambda m: m.tensor([1, 2]).to("cpu")),
    ("to_device_obj", lambda m: m.tensor([1, 2]).to(device=m.device("cpu"))),
    ("to_other", lambda m: m.tensor([1, 2]).to(m.ones(1, dtype=m.float16))),
    ("to_device_dtype", lambda m: m.tensor([1, 2]).to("cpu", m.float32)),
    ("to_keeps_grad", lambda m: m.tensor([1.0], requires_grad=True).to(m.float64)),
    ("stride", lambda m: (m.ones(2, 3).stride(), m.ones(2, 3).t().stride())),
    ("contiguous_flags", lambda m: (m.ones(2, 3).t().is_contiguous(),
                                    m.ones(2, 3).t().contiguous().is_contiguous())),
    ("type_names", lambda m: (m.tensor([1]).type(), m.tensor([1.0]).type(),
                              m.tensor([True]).type())),
    ("type_cast", lambda m: m.tensor([1.5]).type(m.int32)),
    ("element_size", lambda m: (m.tensor([1]).element_size(), m.ones(1).element_size())),
    ("is_floating_point", lambda m: (m.tensor([1]).is_floating_point(),
                                     m.tensor([1.0]).is_floating_point())),
    ("len", lambda m: len(m.ones(4, 2))),
    ("iteration", lambda m: [row for row in m.tensor([[1, 2], [3, 4]])]),
    ("bool_one", lambda m: (bool(m.tensor([0.0])), bool(m.tensor(3)), bool(m.tensor([[1]])))),
    ("int_float", lambda m: (int(m.tensor([3.7])), float(m.tensor(2)))),
    ("size_numel", lambda m: m.Size([2, 3]).numel()),
]


@pytest.mark.parametrize("name,fn", ATTRS, ids=[a[0] for a in ATTRS])
def test_attributes(name, fn):
    same(fn)


@each_lib
def test_python_protocol_errors(m):
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(m.tensor([1.0, 2.0]))
    with pytest.raises(TypeError):
        len(m.tensor(1.0))
    with pytest.raises(TypeError):
        iter(m.tensor(1.0))
    with pytest.raises(RuntimeError):
        m.tensor([1, 2]).item()
    with pytest.raises(ValueError):
        float(m.tensor([1.0, 2.0]))
    with pytest.raises(IndexError):
        m.ones(2, 3).size(2)


@each_lib
def test_numpy_conversion(m):
    t = m.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"detach\(\)\.numpy\(\)"):
        t.numpy()
    a = t.detach().numpy()
    a[0] = 5.0
    assert t[0].item() == 5.0
    assert np.array_equal(np.asarray(m.tensor([1, 2])), [1, 2])


@each_lib
def test_clone_contiguous_and_data(m):
    x = m.tensor(A, requires_grad=True)
    c = x.clone()
    assert c.grad_fn is not None and c.grad_fn.name() == "CloneBackward0"
    y = m.tensor(A)
    z = y.clone()
    z[0, 0] = 100.0
    assert y[0, 0].item() != 100.0
    assert y.contiguous() is y
    t = y.t()
    tc = t.contiguous()
    assert tc is not t and tc.is_contiguous() and np.array_equal(_np(tc), A.T)
    d = x.data
    assert not d.requires_grad and d.is_leaf
    d[0, 0] = 42.0
    assert x[0, 0].item() == 42.0
    x.data = m.zeros(3, 4, dtype=m.float64)
    assert x.requires_grad and x.sum().item() == 0.0


@each_lib
def test_to_returns_self_when_nothing_changes(m):
    x = m.tensor([1.0, 2.0])
    assert x.to(m.float32) is x and x.to("cpu") is x and x.float() is x
    assert x.to(m.float64) is not x
    assert x.to(m.float64, copy=True) is not x and x.to(m.float32, copy=True) is not x


# ----- repr ---------------------------------------------------------------------------

def _r(seed, shape, scale=1.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


REPRS = [
    ("ints", lambda m: m.tensor([1, 2, 3])),
    ("ints_wide", lambda m: m.tensor([-1, 200, 3])),
    ("int_0d", lambda m: m.tensor(5)),
    ("float_0d", lambda m: m.tensor(2.5)),
    ("neg_zero", lambda m: m.tensor(-0.0)),
    ("float_int_valued", lambda m: m.tensor([1.0, 2.0, 3.0])),
    ("floats", lambda m: m.tensor([1.5, -2.25, 3.125])),
    ("sci_small", lambda m: m.tensor([1e-5, 1.0, 2.0])),
    ("sci_large", lambda m: m.tensor([1e10, 1.0])),
    ("sci_tiny", lambda m: m.tensor([1e-10, 1e-12])),
    ("sci_big_int", lambda m: m.tensor([123456789.0, 1.5])),
    ("zeros", lambda m: m.tensor([0.0, 0.0])),
    ("nan_inf", lambda m: m.tensor([float("nan"), 1.0, float("inf"), -float("inf")])),
    ("nan_frac", lambda m: m.tensor([float("nan"), 1.5])),
    ("ratio_1000", lambda m: m.tensor([100.0, 1000.0, 10000.0])),
    ("ratio_edge", lambda m: m.tensor([0.1, 1000.0])),
    ("min_edge", lambda m: m.tensor([0.0001, 1.0])),
    ("matrix", lambda m: m.tensor([[1.5, 2], [3, 4]])),
    ("3d", lambda m: m.tensor(_r(1, (2, 3, 4)))),
    ("4d_ones", lambda m: m.tensor(np.ones((2, 1, 1, 3)))),
    ("long_wrap", lambda m: m.tensor(_r(2, 30))),
    ("long_wrap_f64", lambda m: m.tensor(_r(3, 30), dtype=m.float64)),
    ("summarized_1d", lambda m: m.tensor(np.arange(2000.0))),
    ("summarized_int", lambda m: m.tensor(np.arange(1001))),
    ("summarized_2d", lambda m: m.tensor(np.arange(3000.0).reshape(30, 100))),
    ("summarized_3d", lambda m: m.tensor(np.arange(3000.0).reshape(10, 10, 30))),
    ("fractions", lambda m: m.tensor(np.arange(40.0) / 7)),
    ("big_ints", lambda m: m.tensor(np.arange(30) * 1000)),
    ("mixed_magnitudes", lambda m: m.tensor(_r(4, (5, 20), 1000))),
    ("requires_grad", lambda m: m.tensor([1.5, 2.5], requires_grad=True)),
    ("grad_fn", lambda m: m.tensor([1.5, 2.5], requires_grad=True) * 2),
    ("grad_fn_wrapped", lambda m: m.tensor(np.linspace(-3, 3, 25), requires_grad=True) * 2),
    ("float64", lambda m: m.tensor([1.5, 2.5], dtype=m.float64)),
    ("float16", lambda m: m.tensor([1.5, 2.5], dtype=m.float16)),
    ("float16_sci", lambda m: m.tensor([1e-5, 3e4], dtype=m.float16)),
    ("int32", lambda m: m.tensor([1, 2], dtype=m.int32)),
    ("int8", lambda m: m.tensor([1, -2], dtype=m.int8)),
    ("uint8", lambda m: m.tensor([1, 2], dtype=m.uint8)),
    ("int16_matrix", lambda m: m.tensor([[1, -2], [300, 4]], dtype=m.int16)),
    ("bool", lambda m: m.tensor([True, False])),
    ("bool_0d", lambda m: m.tensor(True)),
    ("bool_matrix", lambda m: m.tensor([[True, False], [False, True]])),
    ("empty", lambda m: m.tensor([])),
    ("empty_int", lambda m: m.tensor([], dtype=m.int64)),
    ("empty_2d", lambda m: m.zeros(0, 3)),
    ("empty_2d_int", lambda m: m.zeros(2, 0, dtype=m.int32)),
    ("empty_3d_f64", lambda m: m.zeros(1, 0, 2, dtype=m.float64)),
    ("0d_f64_grad", lambda m: m.tensor(3.5, dtype=m.float64, requires_grad=True)),
    ("0d_int32", lambda m: m.tensor(7, dtype=m.int32)),
    ("0d_nan", lambda m: m.tensor(float("nan"))),
    ("0d_small", lambda m: m.tensor(1e-5)),
    ("0d_big", lambda m: m.tensor(1e9)),
    ("ones_f64", lambda m: m.ones(3, 3, dtype=m.float64)),
    ("transposed", lambda m: m.tensor(np.arange(12, dtype=np.float32).reshape(3, 4)).t()),
    ("grad_fn_3d", lambda m: m.tensor(_r(5, (2, 2, 3)), requires_grad=True).exp()),
]


@pytest.mark.parametrize("name,fn", REPRS, ids=[r[0] for r in REPRS])
def test_repr_matches_torch(name, fn):
    assert repr(fn(ember)) == repr(fn(torch)).replace("torch.", "ember.")
    assert str(fn(ember)) == repr(fn(ember))


@pytest.mark.parametrize("opts", [dict(precision=2), dict(sci_mode=False), dict(sci_mode=True),
                                  dict(threshold=5, edgeitems=2), dict(linewidth=40),
                                  dict(profile="short"), dict(profile="full")],
                         ids=["precision", "no_sci", "sci", "threshold", "linewidth", "short",
                              "full"])
def test_repr_with_printoptions(opts):
    for _, fn in REPRS[::3] + [REPRS[23]]:
        out = []
        for m in LIBS:
            m.set_printoptions(**opts)
            try:
                out.append(repr(fn(m)).replace("torch.", "ember."))
            finally:
                m.set_printoptions(profile="default")
        assert out[0] == out[1]


def test_printoptions_roundtrip():
    old = ember.get_printoptions()
    with ember.printoptions(precision=1):
        assert repr(ember.tensor([1.25])) == "tensor([1.2])"
    assert ember.get_printoptions() == old


def test_function_node_name_in_repr():
    class Twice(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    y = Twice.apply(ember.tensor([1.0], requires_grad=True))
    assert repr(y) == "tensor([2.], grad_fn=<TwiceBackward>)"


def test_format_of_0d_tensor():
    same(lambda m: (f"{m.tensor(2.5):.2f}", f"{m.tensor(3)}"))


# ----- devices ------------------------------------------------------------------------

DEVICES = [
    ("cpu", lambda m: m.device("cpu")),
    ("cuda0", lambda m: m.device("cuda:0")),
    ("cuda_index", lambda m: m.device("cuda", 1)),
    ("cuda_fields", lambda m: (m.device("cuda:1").type, m.device("cuda:1").index,
                               m.device("cuda").index, str(m.device("cuda:0")),
                               str(m.device("cpu")))),
    ("equality", lambda m: (m.device("cuda:0") == m.device("cuda", 0),
                            m.device("cpu") == m.device("cuda"))),
    ("tensor_device", lambda m: m.zeros(2, device="cpu").device),
    ("factory_device_obj", lambda m: m.ones(1, device=m.device("cpu")).is_cpu),
]


@pytest.mark.parametrize("name,fn", DEVICES, ids=[d[0] for d in DEVICES])
def test_devices(name, fn):
    same(fn)


@each_lib
def test_bad_device_string(m):
    with pytest.raises(RuntimeError):
        m.device("cuda:x")
    with pytest.raises(RuntimeError):
        m.device("gpu")


def test_cuda_module_without_gpu():
    available = ember.cuda.is_available()
    from ember import backend
    assert available == backend.cuda_available()
    if not available:
        assert ember.cuda.device_count() == 0
        ember.cuda.manual_seed(0)  # a no-op without a GPU, as in torch
        ember.cuda.manual_seed_all(0)
        with pytest.raises(RuntimeError, match="CuPy|GPU"):
            ember.ones(2).cuda()
        with pytest.raises(RuntimeError, match="CuPy|GPU"):
            ember.ones(2).to("cuda")
        with pytest.raises(RuntimeError, match="CuPy|GPU"):
            ember.zeros(2, device="cuda")
    else:
        assert ember.cuda.device_count() >= 1
        assert ember.ones(2).cuda().device == ember.device("cuda", 0)


def test_mixing_devices_error_names_both():
    from ember.ops._util import check_same_device

    class OnGPU(ember.Tensor):
        device = property(lambda self: ember.device("cuda", 0))

    cpu = ember.ones(2)
    gpu = cpu.as_subclass(OnGPU)
    with pytest.raises(RuntimeError) as err:
        check_same_device("add", cpu, gpu)
    msg = str(err.value)
    assert "same device" in msg and "cpu" in msg and "cuda:0" in msg
