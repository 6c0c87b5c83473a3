"""The ops ember gained from PyTorch's OpInfo database (LU family, least squares,
quantiles, histograms, native norms, index_reduce, ...): OpInfo's own sample inputs
run through ember and torch, comparing every output (values, dtypes, shapes) and, on
float64 samples of differentiable ops, the gradients of every input for a random
output gradient. A few samples per op and dtype keep this fast."""
import math
import warnings

import numpy as np
import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import ember

MAX_SAMPLES = 8  # per op and dtype


def _to_ember(x):
    if isinstance(x, torch.Tensor):
        return ember.tensor(x.detach().resolve_conj().numpy().copy(),
                            requires_grad=x.requires_grad)
    if isinstance(x, torch.dtype):
        return getattr(ember, str(x).replace("torch.", ""))
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_ember(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_ember(v) for k, v in x.items()}
    return x


def _leaves(x):
    """The tensors of a (nested) argument structure, in order."""
    if isinstance(x, (torch.Tensor, ember.Tensor)):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _leaves(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _leaves(v)]
    return []


def _resolve(name):
    for root in (ember, ember.nn.functional, ember.Tensor):
        obj = root
        for part in name.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None:
            return obj
    raise AssertionError(f"ember lacks {name}")


def _close(e, t, tol, what):
    if isinstance(t, (tuple, list)):
        assert isinstance(e, (tuple, list)) and len(e) == len(t), what
        for i, (a, b) in enumerate(zip(e, t)):
            _close(a, b, tol, f"{what}[{i}]")
        return
    if not isinstance(t, torch.Tensor):
        assert e == t, what
        return
    t = t.detach().resolve_conj()
    assert e.dtype.name == str(t.dtype).replace("torch.", ""), (what, e.dtype, t.dtype)
    assert tuple(e.shape) == tuple(t.shape), (what, tuple(e.shape), tuple(t.shape))
    np.testing.assert_allclose(e.detach().numpy(), t.numpy(), rtol=tol, atol=tol, err_msg=what)


# name -> (variants or None for all, dtypes, ember callable or None (resolve the name),
#          what to compare: "values", or a function (ember_out, torch_out) -> (e, t) pairs)
def _usv(e, t):
    return tuple((U @ (S.unsqueeze(-1) * V.mT), S) for U, S, V in (e, t))


def _seeded(name):
    """OpInfo runs the random ops under ``torch.manual_seed(42)``; ember's generator
    draws the same numbers from the same seed."""
    def fn(*args, **kwargs):
        ember.manual_seed(42)
        return getattr(ember.nn.functional, name)(*args, **kwargs)
    return fn


def _seeded_lowrank(name):
    """OpInfo's lowrank samples: the op applied to ``a @ b.mT`` under seed 42."""
    def fn(a, b, **kwargs):
        ember.manual_seed(42)
        return getattr(ember, name)(a @ b.mT, **kwargs)
    return fn


def _seeded_method(name):
    """OpInfo's in-place random samplers, run under seed 42 like OpInfo's."""
    def fn(x, *args, **kwargs):
        ember.manual_seed(42)
        return getattr(x, name)(*args, **kwargs)
    return fn


def _meta(e, t):
    """Shape and dtype only: the values of an uninitialised tensor are arbitrary."""
    return (tuple(e.shape), e.dtype.name), (tuple(t.shape), str(t.dtype)[6:])


FLOATS = (torch.float32, torch.float64)
OPS = {
    "linalg.lu_factor": {}, "linalg.lu_factor_ex": {}, "linalg.lu": {}, "linalg.lu_solve": {},
    "lu": {}, "lu_unpack": {}, "lu_solve": {}, "triangular_solve": {}, "linalg.cond": {},
    "linalg.lstsq": {"fn": {"grad_oriented": lambda a, b, **kw:
                            ember.linalg.lstsq(a, b, **kw)[:2]}},
    "geqrf": {}, "ormqr": {}, "linalg.householder_product": {},
    "quantile": {"samples": 20}, "nanquantile": {"samples": 20}, "histogram": {"samples": 20},
    "histogramdd": {"samples": 20},
    "gradient": {"dtypes": FLOATS + (torch.int64,)},
    "index_reduce": {"dtypes": FLOATS + (torch.int64,)},
    # torch 2.13's gradient for `input` fails its own gradcheck (it masks the wrong
    # elements): only src's is compared here, input's is gradchecked below
    "as_strided_scatter": {"dtypes": FLOATS + (torch.int64, torch.bool), "grad_of": (1,)},
    "nonzero_static": {"dtypes": FLOATS + (torch.int64, torch.bool), "samples": 20},
    "slice": {"fn": lambda x, dim=0, start=None, end=None, step=1:
              ember.slice_copy(x, dim, start, end, step)},
    "empty_permuted": {"dtypes": FLOATS + (torch.int64, torch.bool), "compare": _meta},
    "new_empty_strided": {"fn": lambda x, *a, **k: x.new_empty_strided(*a, **k),
                          "compare": _meta},
    "resize_": {"fn": lambda x, shape: x.clone().resize_(shape)},
    "resize_as_": {"fn": lambda x, other: ember.resize_as_(x.clone(), other)},
    "native_batch_norm": {}, "native_layer_norm": {}, "native_group_norm": {},
    "nn.functional.fractional_max_pool2d": {"fn": _seeded("fractional_max_pool2d"),
                                            "samples": 12},
    "nn.functional.fractional_max_pool3d": {"fn": _seeded("fractional_max_pool3d"),
                                            "samples": 12},
    "nn.functional.linear_cross_entropy": {"samples": 12},
    # singular vectors are defined up to sign (LAPACK builds differ): compare U S V^H and S
    "svd_lowrank": {"fn": _seeded_lowrank("svd_lowrank"), "compare": _usv},
    "pca_lowrank": {"fn": _seeded_lowrank("pca_lowrank"), "compare": _usv},
    "cauchy": {"fn": _seeded_method("cauchy_")},
    "exponential": {"fn": _seeded_method("exponential_")},
    "geometric": {"fn": _seeded_method("geometric_")},
    "log_normal": {"fn": _seeded_method("log_normal_")},
    "uniform": {"fn": _seeded_method("uniform_")},
    # eigenvectors are unit-norm up to a phase that LAPACK builds choose differently (and
    # a loss must not depend on it): compare the eigenvalues and |V|
    "linalg.eig": {"compare": lambda e, t: ((e[0], e[1].abs()), (t[0], t[1].abs()))},
    "linalg.eigvals": {},
    "linalg.ldl_factor": {}, "linalg.ldl_factor_ex": {}, "linalg.ldl_solve": {},
    "grid_sampler_2d": {"samples": 6},
    "grid_sampler_3d": {"samples": 4, "keep": lambda s: s.input.numel() < 5000},
    "hash_tensor": {"dtypes": FLOATS + (torch.int64, torch.bool, torch.int8)},
}


def _cases():
    out = []
    for op in op_db:
        spec = OPS.get(op.name)
        if spec is None:
            continue
        if "variants" in spec and op.variant_test_name not in spec["variants"]:
            continue
        out.append(pytest.param(op, spec, id=op.name + ("." + op.variant_test_name
                                                        if op.variant_test_name else "")))
    return out


CASES = _cases()


def test_every_op_is_found():
    assert {c.values[0].name for c in CASES} == set(OPS)


def _call(fn, s):
    return fn(_to_ember(s.input), *_to_ember(s.args), **_to_ember(s.kwargs))


@pytest.mark.parametrize("op,spec", CASES)
def test_opinfo_samples(op, spec):
    fn = spec.get("fn") or _resolve(op.name)
    if isinstance(fn, dict):
        fn = fn.get(op.variant_test_name) or _resolve(op.name)
    dtypes = [d for d in spec.get("dtypes", FLOATS) if d in op.supported_dtypes("cpu")]
    checked = 0
    for dt in dtypes:
        grad = dt == torch.float64 and op.supports_autograd and not spec.get("no_grad")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            samples = [s for s in op.sample_inputs("cpu", dt, requires_grad=grad)
                       if spec.get("keep", lambda s: True)(s)]
            # a spread of the samples: the first ones are often the trivial 0-d cases
            step = -(-len(samples) // spec.get("samples", MAX_SAMPLES))
            samples = samples[::step]
            for s in samples:
                torch.manual_seed(0)
                t_out = op(s.input, *s.args, **s.kwargs)
                e_in = (_to_ember(s.input), _to_ember(s.args), _to_ember(s.kwargs))
                ember.manual_seed(0)
                e_out = fn(e_in[0], *e_in[1], **e_in[2])
                compare = spec.get("compare")
                e_cmp, t_cmp = compare(e_out, t_out) if compare else (e_out, t_out)
                tol = spec.get("tol", 1e-4) if dt == torch.float32 else 1e-7
                _close(e_cmp, t_cmp, tol, f"{op.name} {dt} forward")
                checked += 1
                if not grad or spec.get("skip_grad", lambda s: False)(s):
                    continue
                pairs = [(e, t) for e, t in zip(_leaves(e_cmp), _leaves(t_cmp))
                         if t.requires_grad]
                # an empty output (lstsq's residuals) carries no gradient either way
                pairs = [(e, t) for e, t in pairs if e.requires_grad or t.numel()]
                e_outs = [e for e, _ in pairs]
                t_outs = [t for _, t in pairs]
                t_ins = [x for x in _leaves((s.input, s.args, s.kwargs)) if x.requires_grad]
                e_ins = [x for x in _leaves(e_in) if x.requires_grad]
                if not t_outs or not t_ins:
                    continue
                rng = np.random.default_rng(checked)
                gos = [rng.standard_normal(tuple(o.shape)) + (
                    1j * rng.standard_normal(tuple(o.shape)) if o.is_complex() else 0)
                    for o in t_outs]
                tg = torch.autograd.grad(t_outs, t_ins, [torch.tensor(g) for g in gos],
                                         allow_unused=True)
                eg = ember.autograd.grad(e_outs, e_ins, [ember.tensor(g) for g in gos],
                                         allow_unused=True)
                for i, (a, b) in enumerate(zip(eg, tg)):
                    if i not in spec.get("grad_of", range(len(tg))):
                        continue
                    if b is None:
                        assert a is None or not a.numpy().any()
                    else:
                        _close(a, b, spec.get("grad_tol", 1e-6), f"{op.name} grad {i}")
    assert checked


def test_as_strided_scatter_gradcheck():
    x = ember.randn(3, 3, dtype=ember.float64, requires_grad=True)
    src = ember.randn(2, 2, dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(
        lambda a, b: ember.as_strided_scatter(a, b, (2, 2), (1, 2), storage_offset=1), (x, src))
    gx, = ember.autograd.grad(ember.as_strided_scatter(x, src, (2, 2), (1, 2), 1).sum(), x)
    assert gx.numpy().reshape(-1).tolist() == [1, 0, 0, 0, 0, 1, 1, 1, 1]


# (input's view of a 12-element storage, size, stride, storage_offset)
_PARTIAL_VIEWS = [
    (lambda t: t[2:8], (2,), (1,), 3),           # the offset counts from the storage
    (lambda t: t[2:8], (2,), (2,), None),        # default: input's own offset
    (lambda t: t.view(3, 4)[:, 1:3], (2,), (4,), 1),
    (lambda t: t.view(3, 4)[:, 1:3], (2,), (4,), 0),  # partly outside input: not seen
    (lambda t: t.view(3, 4)[:, 1:3], (2, 2), (4, 1), None),
    (lambda t: t.view(3, 4)[1], (2,), (1,), 5),
    (lambda t: t.view(3, 4).t(), (3,), (1,), 0),  # a permuted whole storage
    (lambda t: t[:3].expand(2, 3), (2,), (1,), 4),  # overlapping: counted in a clone
    (lambda t: t[2:8], (2,), (9,), 1),           # both elements outside input
    (lambda t: t[2:8], (0,), (1,), 3),
]


@pytest.mark.parametrize("case", range(len(_PARTIAL_VIEWS)))
def test_as_strided_scatter_partial_view_counts_in_storage(case):
    """PyTorch copies the whole storage under ``input`` and keeps ``input``'s view of it
    (``clone_preserve_strides``): the geometry counts in that storage, not in ``input``."""
    view, size, stride, offset = _PARTIAL_VIEWS[case]
    src = np.arange(1, math.prod(size) + 1, dtype=np.float64).reshape(size) * -1
    res = []
    for m in (torch, ember):
        x = view(m.arange(12, dtype=m.float64))
        res.append(m.as_strided_scatter(x, m.tensor(src), size, stride, offset).numpy())
    np.testing.assert_array_equal(res[1], res[0])


def test_as_strided_scatter_partial_view_gradients():
    """Through a contiguous partial view that requires grad: values as torch's; the
    gradients are the true ones (gradcheck; torch's are not: test_opinfo.TORCH_WRONG_GRAD),
    and a ``src`` element landing outside the view gets none. A non-contiguous input that
    requires grad is refused, as torch's kernel refuses it."""
    rng = np.random.default_rng(0)
    base = rng.standard_normal(12)

    def f(m):
        return lambda b, s: m.as_strided_scatter(b[2:8], s, (3,), (3,), 1)
    src = rng.standard_normal(3)
    t = f(torch)(torch.tensor(base), torch.tensor(src)).numpy()
    leaves = [ember.tensor(a, requires_grad=True) for a in (base, src)]
    np.testing.assert_array_equal(f(ember)(*leaves).detach().numpy(), t)
    assert ember.autograd.gradcheck(f(ember), leaves)
    gs, = ember.autograd.grad(f(ember)(*leaves), leaves[1], ember.ones(6, dtype=ember.float64))
    assert gs.numpy().tolist() == [0.0, 1.0, 1.0]  # storage positions 1 (outside), 4, 7
    for m in (torch, ember):
        x = m.tensor(base, requires_grad=True).view(3, 4)[:, 1:3]
        with pytest.raises(RuntimeError, match="only supported for contiguous inputs"):
            m.as_strided_scatter(x, m.ones(2, dtype=m.float64), (2,), (4,), 1)


@pytest.mark.parametrize("nd", [2, 3])
def test_fractional_max_pool_modules(nd):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3) + (7,) * nd).astype(np.float32)
    u = rng.random((2, 3, nd)).astype(np.float32)
    cls = f"FractionalMaxPool{nd}d"
    t = getattr(torch.nn, cls)(2, output_ratio=0.5, return_indices=True,
                               _random_samples=torch.tensor(u))(torch.tensor(x))
    e = getattr(ember.nn, cls)(2, output_ratio=0.5, return_indices=True,
                               _random_samples=ember.tensor(u))(ember.tensor(x))
    _close(e, t, 0, cls)
    with pytest.raises(ValueError):
        getattr(ember.nn, cls)(2)


def test_ldl_two_by_two_pivots():
    # symmetric indefinite matrices with small diagonals force Bunch-Kaufman's 2x2 blocks
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 7, 7))
    a = a + np.swapaxes(a, -1, -2)
    a[..., np.arange(7), np.arange(7)] *= 1e-3
    b = rng.standard_normal((6, 7, 2))
    t = torch.linalg.ldl_factor_ex(torch.tensor(a))
    e = ember.linalg.ldl_factor_ex(ember.tensor(a))
    assert (t.pivots < 0).any()
    _close(e, t, 1e-10, "ldl_factor_ex")
    _close(ember.linalg.ldl_solve(e.LD, e.pivots, ember.tensor(b)),
           torch.linalg.ldl_solve(t.LD, t.pivots, torch.tensor(b)), 1e-8, "ldl_solve")
    # complex Hermitian input: LAPACK's hetrf pivots, as torch's
    ac = a.astype(np.complex128) + 1j * (rng.standard_normal((6, 7, 7)) * 0.1)
    ac = (ac + np.conj(np.swapaxes(ac, -1, -2))) / 2
    tc = torch.linalg.ldl_factor_ex(torch.tensor(ac), hermitian=True)
    ec = ember.linalg.ldl_factor_ex(ember.tensor(ac), hermitian=True)
    _close(ec, tc, 1e-10, "ldl_factor_ex hermitian")


@pytest.mark.parametrize("name,args", [
    ("heaviside", ([-1.0, 0.0, 2.0], [0.5, 0.5, 0.5])), ("gcd", ([4, 6, 9], [6, 4, 3])),
    ("lcm", ([4, 6, 9], [6, 4, 3])), ("ldexp", ([1.0, 2.0], [3, -1])),
    ("nextafter", ([1.0, 2.0], [2.0, 1.0])), ("dist", ([1.0, 2.0], [3.0, -1.0])),
    ("diagflat", ([1.0, 2.0],)), ("cov", ([[1.0, 2.0, 4.0], [0.0, 1.0, 3.0]],)),
    ("corrcoef", ([[1.0, 2.0, 4.0], [0.0, 1.0, 3.0]],)), ("bincount", ([0, 2, 2, 5],)),
    ("histc", ([1.0, 2.0, 2.5, 4.0],)), ("frexp", ([3.0, -0.25],)),
])
def test_tensor_methods(name, args):
    t_args = [torch.tensor(a) for a in args]
    e_args = [ember.tensor(a) for a in args]
    _close(getattr(e_args[0], name)(*e_args[1:]), getattr(t_args[0], name)(*t_args[1:]), 1e-6,
           name)
    if hasattr(torch.Tensor, name + "_"):
        getattr(e_args[0], name + "_")(*e_args[1:])
        getattr(t_args[0], name + "_")(*t_args[1:])
        _close(e_args[0], t_args[0], 1e-6, name + "_")


ERRORS = [
    ("quantile q out of range", lambda m: m.quantile(m.tensor([1.0, 2.0]), 1.5)),
    ("quantile of ints", lambda m: m.quantile(m.tensor([1, 2]), 0.5)),
    ("quantile q dtype", lambda m: m.quantile(m.tensor([1.0, 2.0]),
                                              m.tensor([0.5], dtype=m.float64))),
    ("lu_factor singular", lambda m: m.linalg.lu_factor(m.tensor([[1.0, 2.0], [2.0, 4.0]]))),
    ("lu_factor without pivoting", lambda m: m.linalg.lu_factor(m.eye(2), pivot=False)),
    ("lu_solve shapes", lambda m: m.linalg.lu_solve(*m.linalg.lu_factor(m.eye(3)),
                                                    m.ones(2, 2))),
    ("histogram of ints", lambda m: m.histogram(m.tensor([1, 2]), 2)),
    ("histc range", lambda m: m.histogram(m.tensor([1.0, 2.0]), 2, range=(3.0, 1.0))),
    ("index_reduce reduction", lambda m: m.zeros(3).index_reduce(
        0, m.tensor([0]), m.ones(1), "sum")),
    ("gradient too short", lambda m: m.gradient(m.ones(2), edge_order=2)),
    ("lstsq driver", lambda m: m.linalg.lstsq(m.eye(2), m.eye(2), driver="nope")),
    ("cond norm", lambda m: m.linalg.cond(m.eye(2), p=3)),
    ("nonzero_static size", lambda m: m.nonzero_static(m.ones(2), size=-1)),
    ("resize_ with grad", lambda m: m.ones(2, requires_grad=True).resize_(3)),
    ("fractional pool size", lambda m: m.nn.functional.fractional_max_pool2d(
        m.ones(1, 1, 4, 4), 3, output_size=3)),
    ("pca q", lambda m: m.pca_lowrank(m.ones(3, 2), q=5)),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, fn):
    with pytest.raises(Exception) as t_err:
        fn(torch)
    with pytest.raises(Exception) as e_err:
        fn(ember)
    assert type(e_err.value).__name__ == type(t_err.value).__name__ or (
        isinstance(e_err.value, type(t_err.value))), (e_err.value, t_err.value)


@pytest.mark.parametrize("call", [
    lambda m, x: m.norm(x, p="nuc", dim=(1, 2)), lambda m, x: m.norm(x[0], p="nuc"),
    lambda m, x: x[1].norm(p="nuc", keepdim=True), lambda m, x: m.linalg.norm(x, "nuc", (0, 2)),
])
def test_nuclear_norm(call):
    a = np.random.default_rng(0).standard_normal((2, 3, 4))
    t_in, e_in = torch.tensor(a, requires_grad=True), ember.tensor(a, requires_grad=True)
    t, e = call(torch, t_in), call(ember, e_in)
    _close(e, t, 1e-10, "nuc")
    _close(ember.autograd.grad(e.sum(), e_in)[0], torch.autograd.grad(t.sum(), t_in)[0], 1e-8,
           "nuc grad")
