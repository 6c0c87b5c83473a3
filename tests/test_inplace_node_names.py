"""The node an in-place op leaves on a tensor with history, against torch.

``y = x * 1; y.op_(...)``: ``y.grad_fn`` is PyTorch's in-place node (``t_`` records
``TBackward1``, not ``t``'s ``TBackward0``), its ``next_functions`` have torch's
structure (two levels of names), and the gradient reaching ``x`` is torch's. The
out-of-place spellings that share a primitive with another op (``sgn`` and ``sign``,
``round`` with and without ``decimals``) are checked the same way.
"""
import warnings

import numpy as np
import pytest
import torch

import ember


def _structure(node, depth=2):
    """The node's name and its inputs' structure, ``depth`` levels down."""
    if node is None:
        return None
    if depth == 0:
        return node.name()
    return (node.name(), tuple(_structure(n, depth - 1) for n, _ in node.next_functions))


_X = np.random.default_rng(0).uniform(0.5, 2.0, (3, 1, 4))

# (label, input shape taken from _X, the call on y)
CASES = [
    ("t_", lambda a: a[:, 0], lambda m, y: y.t_()),
    ("sgn_", lambda a: a, lambda m, y: y.sgn_()),
    ("squeeze_", lambda a: a, lambda m, y: y.squeeze_()),
    ("squeeze_(dim)", lambda a: a, lambda m, y: y.squeeze_(1)),
    ("squeeze_(dims)", lambda a: a, lambda m, y: y.squeeze_((0, 1))),
    ("unsqueeze_", lambda a: a, lambda m, y: y.unsqueeze_(-1)),
    ("polygamma_(0)", lambda a: a, lambda m, y: y.polygamma_(0)),
    ("polygamma_(2)", lambda a: a, lambda m, y: y.polygamma_(2)),
    ("round_(decimals=0)", lambda a: a, lambda m, y: y.round_(decimals=0)),
    ("round_(decimals=2)", lambda a: a, lambda m, y: y.round_(decimals=2)),
    ("round_()", lambda a: a, lambda m, y: y.round_()),
    ("transpose_", lambda a: a, lambda m, y: y.transpose_(0, 2)),
    ("mvlgamma_(3)", lambda a: a + 1, lambda m, y: y.mvlgamma_(3)),
    ("mvlgamma(2)", lambda a: a + 1, lambda m, y: m.mvlgamma(y, 2)),
    ("ldexp_", lambda a: a, lambda m, y: y.ldexp_(m.tensor([1, 2, 3, 0]))),
    ("ldexp", lambda a: a, lambda m, y: m.ldexp(y, m.tensor([1, 2, 3, 0]))),
    ("ldexp(float other)", lambda a: a,
     lambda m, y: m.ldexp(y, m.tensor([1.0, -2.0, 3.0, 0.5], dtype=m.float64))),
    # (before: the node stayed y's old one, and x's gradient took the view's shape)
    ("as_strided_", lambda a: a, lambda m, y: y.as_strided_((2, 2), (1, 2), 1)),
    ("conj_physical_", lambda a: a, lambda m, y: y.conj_physical_()),
    ("sgn", lambda a: a, lambda m, y: m.sgn(y)),
    ("Tensor.sgn", lambda a: a, lambda m, y: y.sgn()),
    ("sign", lambda a: a, lambda m, y: m.sign(y)),
    ("round(decimals=0)", lambda a: a, lambda m, y: m.round(y, decimals=0)),
    ("round()", lambda a: a, lambda m, y: m.round(y)),
]


def _run(m, pick, call):
    x = m.tensor(pick(_X), dtype=m.float64, requires_grad=True)
    y = x * 1
    out = call(m, y)
    res = out if out is not y else y
    got = _structure(res.grad_fn)
    res.sum().backward()
    return got, x.grad.detach().numpy(force=True)  # (torch's sgn: a ZeroTensor)


@pytest.mark.parametrize("label,pick,call", CASES, ids=[c[0] for c in CASES])
def test_node_name_and_next_functions(label, pick, call):
    want, tg = _run(torch, pick, call)
    got, eg = _run(ember, pick, call)
    assert got == want, f"{label}: {got} != {want}"
    np.testing.assert_allclose(eg, tg, rtol=1e-8)  # (polygamma's kernels differ slightly)


def test_as_strided_inplace_gradient_reaches_the_storage():
    # a silent wrong answer before: x.grad was [[1, 2], [3, 4]], the view's shape
    def grad(m):
        x = m.arange(12.0, dtype=m.float64).reshape(3, 4).requires_grad_()
        y = x * 1
        y.as_strided_((2, 2), (1, 2), 1)
        (y * m.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=m.float64)).sum().backward()
        return x.grad.detach().numpy()
    np.testing.assert_array_equal(grad(ember), grad(torch))


def test_complex_conj_physical_inplace_node():
    def run(m):
        x = m.tensor([1 + 2j, -3j], dtype=m.complex128, requires_grad=True)
        y = x * 1
        y.conj_physical_()
        got = _structure(y.grad_fn)
        (y * m.tensor([2 - 1j, 1j], dtype=m.complex128)).real.sum().backward()
        return got, x.grad.detach().numpy()
    (eg, ex), (tg, tx) = run(ember), run(torch)
    assert eg == tg
    np.testing.assert_array_equal(ex, tx)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_index_reduce_of_a_0d_tensor_is_one_node(reduce, include_self):
    # before: ViewBackward0 over IndexReduceBackward0 over ViewBackward0
    def run(m):
        x = m.tensor(1.5, dtype=m.float64, requires_grad=True)
        src = m.tensor(2.5, dtype=m.float64, requires_grad=True)
        y = x * 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's "index_reduce() is in beta"
            y.index_reduce_(0, m.tensor([0]), src, reduce, include_self=include_self)
        got = _structure(y.grad_fn)
        (y * 3).backward()
        return got, float(y.detach()), float(x.grad), float(src.grad)
    assert run(ember) == run(torch)


def test_ldexp_gradient_at_a_negative_integer_exponent():
    # torch's LdexpBackward0 multiplies by 2 ** other in the integer dtype: 2 ** -2 is 0
    # there, so torch gives 0 (docs/differences.md); ember gives d(x * 2 ** e)/dx = 2 ** e
    x = ember.ones(2, dtype=ember.float64, requires_grad=True)
    ember.ldexp(x, ember.tensor([-2, 1])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.25, 2.0])


def test_inplace_nodes_are_found_through_their_class():
    # each in-place node is a subclass of its op's class: the same op to every consumer
    from ember.ops import _views, complex_numbers, shape, special
    for cls, base in ((shape.TInplace, shape.T), (shape.SqueezeAllInplace, shape.Squeeze),
                      (shape.SqueezeInplace, shape.SqueezeDim),
                      (shape.SqueezeDimsInplace, shape.SqueezeDims),
                      (shape.UnsqueezeInplace, shape.Unsqueeze),
                      (special.PolygammaInplace, special.Polygamma),
                      (_views.StorageAsStridedInplace, _views.StorageAsStrided),
                      (complex_numbers.ConjPhysicalInplace, complex_numbers.ConjPhysical)):
        assert issubclass(cls, base) and cls._op_name == base._op_name


@pytest.mark.parametrize("name", ["sign", "sgn"])
def test_sign_saves_nothing_and_sgn_its_input(name):
    # sign's gradient is zero: modifying its input before backward is no error (torch's
    # SignBackward0 saves nothing); sgn's node saves self and raises as torch's
    def run(m):
        a = m.tensor([1.0, -2.0, 0.0], requires_grad=True)
        b = a * 1
        s = getattr(m, name)(b)
        b.mul_(2)
        try:
            s.sum().backward()
        except RuntimeError as err:
            return "version" in str(err) or "modified by an inplace" in str(err)
        return a.grad.tolist()
    assert run(ember) == run(torch)


def test_trace_keeps_only_the_input_shape():
    # torch's TraceBackward0 saves the input's sizes: the input may change before backward
    def run(m):
        a = m.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=m.float64, requires_grad=True)
        b = a * 1
        t = m.trace(b)
        b.mul_(2)
        t.backward(m.tensor(2.5, dtype=m.float64))
        return _structure(t.grad_fn), float(t.detach()), a.grad.tolist()
    assert run(ember) == run(torch)
