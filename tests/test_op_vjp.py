"""Every array-level ``vjp`` an op class declares (``Primitive.vjp``, which the compile
plan runs) against the same class's Tensor-level ``backward`` (run by the engine), on
random inputs of float32 and float64, broadcasting shapes included: the two
statements of an op's derivative cannot drift apart. The same for the one-element
``fused``/``fused_vjp`` pieces the plan strings into loops, against the class's
``forward`` and ``backward``, and for the ``vjp`` the composites a capture records
carry on their functions."""
import sys
import types
import zlib

import numpy as np
import pytest

import ember
from ember.autograd.node import Primitive
from ember.nn import functional as F
from ember.ops import (
    attention,
    conv,
    conversion,
    elementwise,
    indexing,
    join,
    losses,
    matmul_graph,
    nn_fused,
    normalization,
    pooling,
    reduction,
    rnn,
    shape,
    softmaxes,
    unary,
)

Tanh, Sigmoid = unary.tanh.primitive, unary.sigmoid.primitive


def _t(rng, shp, dt, rg=True, low=None):
    a = rng.standard_normal(shp)
    if low is not None:  # away from zero (a divisor)
        a = np.sign(a) * (low + np.abs(a))
    return ember.tensor(a.astype(dt), requires_grad=rg)


def _layer(cls, gates, c0, bs):
    def make(rng, dt):
        n, b, i, h = sum(bs), bs[0], 3, 5
        args = [_t(rng, (n, i), dt), _t(rng, (b, h), dt),
                _t(rng, (b, h), dt) if c0 else None,
                _t(rng, (gates * h, i), dt), _t(rng, (gates * h, h), dt),
                _t(rng, (gates * h,), dt), _t(rng, (gates * h,), dt), None]
        return args, {"batch_sizes": bs, "reverse": False}
    return cls, make


def _conv(rng, dt):
    x, w, b = _t(rng, (2, 3, 6, 6), dt), _t(rng, (4, 3, 3, 3), dt), _t(rng, (4,), dt)
    return [x, w, b, F.conv2d(x, w, b, stride=2, padding=1).grad_fn.g], {}


def _pool(indices, nd=2):
    def make(rng, dt):
        x = _t(rng, (2, 3) + (6,) * nd, dt)
        pool = F.max_pool3d if nd == 3 else F.max_pool2d
        y = pool(x, 3, 2, padding=1, return_indices=indices)
        return [x, (y[0] if indices else y).grad_fn.g], {}
    return make


def _nll(reduction_, ignore, weight=False, shape=(6, 5)):
    def make(rng, dt):
        t = np.array([0, 2, 4, 2, 1, 3])
        if len(shape) == 4:
            t = np.resize(t, (shape[0],) + shape[2:])
        w = ember.tensor(rng.random(shape[1]).astype(dt)) if weight else None
        return [_t(rng, shape, dt), ember.tensor(t), w, 2 if ignore else -100, reduction_], {}
    return make


def _sdpa(bias, dmask):
    def make(rng, dt):
        q, k, v = _t(rng, (2, 3, 5, 4), dt), _t(rng, (2, 3, 6, 4), dt), _t(rng, (2, 3, 6, 4), dt)
        b = _t(rng, (5, 6), dt) if bias else None
        m = (rng.random((2, 3, 5, 6)) > 0.3).astype(dt) / dt(0.7) if dmask else None
        return [q, k, v, b, m, 0.5, False], {}
    return make


# (class, make(rng, dtype) -> (positional args, keyword params)): Tensors that require
# grad are the inputs differentiated
CASES = {
    "Add-broadcast": (elementwise.Add, lambda r, d: ([_t(r, (3, 1, 4), d), _t(r, (2, 4), d)], {})),
    "Add-scalar": (elementwise.Add, lambda r, d: ([_t(r, (3, 4), d), 2.5], {})),
    "Sub-broadcast": (elementwise.Sub, lambda r, d: ([_t(r, (2, 1), d), _t(r, (3, 2, 4), d)], {})),
    "Sub-second-only": (elementwise.Sub,
                        lambda r, d: ([_t(r, (3, 4), d, rg=False), _t(r, (4,), d)], {})),
    "Sub-first-only": (elementwise.Sub,
                       lambda r, d: ([_t(r, (3, 4), d), _t(r, (3, 4), d, rg=False)], {})),
    # torch.rsub(x, y) and 2.5 - x: Sub on (other, input) under PyTorch's node names
    "Rsub": (elementwise.Rsub, lambda r, d: ([_t(r, (4,), d), _t(r, (3, 4), d)], {})),
    "RsubScalar": (elementwise.RsubScalar, lambda r, d: ([2.5, _t(r, (3, 4), d)], {})),
    "Mul-broadcast": (elementwise.Mul, lambda r, d: ([_t(r, (3, 1, 4), d), _t(r, (2, 4), d)], {})),
    "Mul-scalar": (elementwise.Mul, lambda r, d: ([-1.5, _t(r, (3, 4), d)], {})),
    "MulScalar": (elementwise.MulScalar, lambda r, d: ([_t(r, (3, 4), d), -1.5], {})),
    "AddScalar": (elementwise.AddScalar, lambda r, d: ([_t(r, (3, 4), d), -1.5], {})),
    "Div-broadcast": (elementwise.Div,
                      lambda r, d: ([_t(r, (3, 1, 4), d), _t(r, (2, 4), d, low=0.5)], {})),
    "Div-scalar": (elementwise.Div, lambda r, d: ([_t(r, (3, 4), d), 3.0], {})),
    "DivScalar": (elementwise.DivScalar, lambda r, d: ([_t(r, (3, 4), d), -2.5], {})),
    "SubScalar": (elementwise.SubScalar, lambda r, d: ([_t(r, (3, 4), d), 0.5], {})),
    "Relu": (unary.Relu, lambda r, d: ([_t(r, (3, 4), d)], {})),
    "Tanh": (Tanh, lambda r, d: ([_t(r, (3, 4), d)], {})),
    "Sigmoid": (Sigmoid, lambda r, d: ([_t(r, (3, 4), d)], {})),
    "Mean": (reduction.Mean, lambda r, d: ([_t(r, (3, 4, 5), d), (0, 1, 2), False, None], {})),
    "MeanDim": (reduction.MeanDim, lambda r, d: ([_t(r, (3, 4, 5), d), (0, 2), False, None], {})),
    "MeanDim-keepdim": (reduction.MeanDim,
                        lambda r, d: ([_t(r, (3, 4, 5), d), (1,), True, None], {})),
    "View": (shape.View, lambda r, d: ([_t(r, (3, 4), d), (2, 6)], {})),
    "ReshapeAlias": (shape.ReshapeAlias, lambda r, d: ([_t(r, (3, 4), d), (4, 3)], {})),
    "Permute": (shape.Permute, lambda r, d: ([_t(r, (2, 3, 4), d), (2, 0, 1)], {})),
    "Transpose": (shape.Transpose, lambda r, d: ([_t(r, (2, 3, 4), d), 0, 2], {})),
    "T": (shape.T, lambda r, d: ([_t(r, (3, 4), d), 0, 1], {})),
    "TransposeInplace": (shape.TransposeInplace, lambda r, d: ([_t(r, (2, 3, 4), d), 2, 0], {})),
    "TInplace": (shape.TInplace, lambda r, d: ([_t(r, (3, 4), d), 0, 1], {})),
    "Squeeze": (shape.Squeeze, lambda r, d: ([_t(r, (3, 1, 4, 1), d), (1, 3)], {})),
    "SqueezeDim": (shape.SqueezeDim, lambda r, d: ([_t(r, (3, 1, 4), d), (1,)], {})),
    "SqueezeDim-none": (shape.SqueezeDim, lambda r, d: ([_t(r, (3, 2, 4), d), ()], {})),
    "SqueezeDims": (shape.SqueezeDims, lambda r, d: ([_t(r, (1, 3, 1), d), (0, 2)], {})),
    "SqueezeInplace": (matmul_graph.SqueezeInplace,
                       lambda r, d: ([_t(r, (2, 1, 3), d), (1,)], {})),
    "SqueezeAllInplace": (shape.SqueezeAllInplace,
                          lambda r, d: ([_t(r, (2, 1, 3, 1), d), None], {})),
    "SqueezeDimsInplace": (shape.SqueezeDimsInplace,
                           lambda r, d: ([_t(r, (1, 3, 1), d), (0, 2)], {})),
    "UnsqueezeInplace": (shape.UnsqueezeInplace, lambda r, d: ([_t(r, (3, 4), d), 0], {})),
    "Unsqueeze": (shape.Unsqueeze, lambda r, d: ([_t(r, (3, 4), d), 1], {})),
    "Unsqueeze-last": (shape.Unsqueeze, lambda r, d: ([_t(r, (3, 4), d), 2], {})),
    "Contiguous": (conversion.Contiguous,
                   lambda r, d: ([_t(r, (3, 4), d).transpose(0, 1)], {})),
    "LayerNorm": (normalization._LayerNorm,
                  lambda r, d: ([_t(r, (2, 3, 8), d), _t(r, (8,), d), _t(r, (8,), d), (2,),
                                 1e-5], {})),
    "LayerNorm-no-affine": (normalization._LayerNorm,
                            lambda r, d: ([_t(r, (4, 6), d), None, None, (1,), 1e-5], {})),
    "LayerNorm-two-dims": (normalization._LayerNorm,
                           lambda r, d: ([_t(r, (2, 3, 4), d), _t(r, (3, 4), d), None,
                                          (1, 2), 1e-5], {})),
    "Unbind": (join.Unbind, lambda r, d: ([_t(r, (3, 4), d), 1], {})),
    "Conv": (conv.Conv, _conv),
    "MaxPool": (pooling.MaxPool, _pool(False)),
    "MaxPoolWithIndices": (pooling.MaxPoolWithIndices, _pool(True)),
    "MaxPool3D": (pooling.MaxPool3D, _pool(False, 3)),
    "MaxPool3DWithIndices": (pooling.MaxPool3DWithIndices, _pool(True, 3)),
    "_Linear": (nn_fused._Linear,
                lambda r, d: ([_t(r, (5, 4), d), _t(r, (3, 4), d), _t(r, (3,), d)], {})),
    "_LinearMm": (nn_fused._LinearMm,
                  lambda r, d: ([_t(r, (5, 4), d), _t(r, (3, 4), d, rg=False), None], {})),
    "_LinearView": (nn_fused._LinearView,
                    lambda r, d: ([_t(r, (2, 5, 4), d), _t(r, (3, 4), d), _t(r, (3,), d)], {})),
    "_LinearUnsafeView": (nn_fused._LinearUnsafeView,
                          lambda r, d: ([_t(r, (2, 5, 4), d, rg=False), _t(r, (3, 4), d), None],
                                        {})),
    "_LinearRelu": (nn_fused._LinearRelu,
                    lambda r, d: ([_t(r, (5, 4), d), _t(r, (3, 4), d), _t(r, (3,), d)], {})),
    "LogSoftmax": (softmaxes.LogSoftmax, lambda r, d: ([_t(r, (3, 4, 5), d), 1], {})),
    "LogSoftmax-last": (softmaxes.LogSoftmax, lambda r, d: ([_t(r, (6, 10), d), 1], {})),
    "MseLoss-mean": (losses.MseLoss, lambda r, d: ([_t(r, (3, 4), d), _t(r, (3, 4), d), "mean"],
                                                    {})),
    "MseLoss-sum-input-only": (losses.MseLoss,
                               lambda r, d: ([_t(r, (2, 3, 4), d), _t(r, (2, 3, 4), d, rg=False),
                                              "sum"], {})),
    "MseLoss-none": (losses.MseLoss, lambda r, d: ([_t(r, (5,), d), _t(r, (5,), d), "none"], {})),
    "NllLoss-mean": (losses.NllLoss, _nll("mean", False)),
    "NllLoss-mean-ignored-weight": (losses.NllLoss, _nll("mean", True, True)),
    "NllLoss-sum": (losses.NllLoss, _nll("sum", True)),
    "NllLoss-none": (losses.NllLoss, _nll("none", False, True)),
    "NllLoss2d-none": (losses.NllLoss2d, _nll("none", True, False, (2, 5, 3, 2))),
    "NllLoss2d-mean": (losses.NllLoss2d, _nll("mean", False, True, (2, 5, 3, 2))),
    "ScaledDotProductAttention": (attention.ScaledDotProductAttention, _sdpa(True, False)),
    "ScaledDotProductAttention-dropout": (attention.ScaledDotProductAttention,
                                          _sdpa(False, True)),
    "FlashAttentionForCpu": (attention.FlashAttentionForCpu, _sdpa(True, False)),
    "RNNTanhLayer": _layer(rnn.RNNTanhLayer, 1, False, (4, 3, 1)),
    "RNNTanhLayer-one-step": _layer(rnn.RNNTanhLayer, 1, False, (4,)),
    "RNNReluLayer-one-step": _layer(rnn.RNNReluLayer, 1, False, (4,)),
    "RNNReluLayer": _layer(rnn.RNNReluLayer, 1, False, (4, 4)),
    "LSTMLayer": _layer(rnn.LSTMLayer, 4, True, (4, 3, 3)),
    "GRULayer": _layer(rnn.GRULayer, 3, False, (4, 2)),
}


def _subclasses(c):
    # ember's own classes: other test modules define subclasses of ember's ops in their
    # tests, which live on while this module runs after them
    for s in c.__subclasses__():
        if s.__module__.startswith("ember."):
            yield s
        yield from _subclasses(s)


def _sum_to(g, shp):
    lead = g.ndim - len(shp)
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shp)
                                      if n == 1 and g.shape[i + lead] != 1)
    return g.sum(axis=axes, keepdims=True).reshape(shp) if axes else g.reshape(shp)


def _tol(dt):
    return {"rtol": 2e-6, "atol": 1e-6} if dt == np.float32 else {"rtol": 1e-12, "atol": 1e-12}


def _buffers():
    """An ``out`` provider handing out arrays full of NaN (a vjp must not read them)."""
    given = {}

    def out(key, shp, dt):
        a = given[key] = np.full(shp, np.nan, dt)
        return a
    return out


def test_every_declared_vjp_has_a_case():
    declared = {c for c in _subclasses(Primitive) if c.vjp is not None}
    assert declared - {rnn._Layer} == {cls for cls, _ in CASES.values()}


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_vjp_matches_backward(name, dt):
    cls, make = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    args, params = make(rng, dt)
    wrt = [i for i, a in enumerate(args) if isinstance(a, ember.Tensor) and a.requires_grad]
    # Tensor level: the class's backward, run by the engine (broadcasts reduced there)
    outs = cls.apply(*args, **params)
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    diff = [k for k, o in enumerate(outs) if o.requires_grad]
    gouts = [rng.standard_normal(outs[k].shape).astype(dt) for k in diff]
    ref = ember.autograd.grad([outs[k] for k in diff], [args[i] for i in wrt],
                              [ember.tensor(g) for g in gouts], allow_unused=True)
    # array level: the class's vjp on the op object its forward ran on
    arrays = [a.detach().numpy() if isinstance(a, ember.Tensor) else a for a in args]
    for out in (None, _buffers()):
        op = object.__new__(cls)
        ys = op.forward(*arrays, **params)
        ys = tuple(ys) if isinstance(ys, (tuple, list)) else (ys,)
        op._edges = tuple(1 if i in wrt else None for i in range(len(args)))
        grads = [None] * len(ys)
        for k, g in zip(diff, gouts):
            grads[k] = g
        got = op.vjp(grads, arrays, ys, out)
        assert len(got) == len(args)  # one gradient (or None) per positional input
        for i, r in zip(wrt, ref):
            g = got[i]
            assert g is not None and r is not None, (name, i)
            g = _sum_to(np.asarray(g), arrays[i].shape)
            assert g.dtype == dt
            np.testing.assert_allclose(g, r.numpy(), **_tol(dt), err_msg=f"{name} input {i}")


_SPECIAL = np.array([0.0, -0.0, 1.5, -2.0, 0.25, np.inf, -np.inf, np.nan, 1e-30, -3e4])


def _elementwise(expr, operands, dt, **names):
    z, one = dt(0), dt(1)
    env = {"z": z, "one": one}
    out = np.empty(len((list(operands) + list(names.values()))[0]), dt)
    for i in range(len(out)):
        local = dict(env)
        ops = []
        for j, col in enumerate(operands):
            local[f"a{j}"] = col[i]
            ops.append(f"a{j}")
        for k, col in names.items():
            local[k] = col[i]
        with np.errstate(all="ignore"):
            out[i] = eval(expr.format(*ops, **{k: k for k in names}), {}, local)  # noqa: S307
    return out


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["float32", "float64"])
def test_fused_pieces_match_forward_and_backward(dt):
    fused = [c for c in set(_subclasses(Primitive)) if getattr(c, "fused", None) is not None]
    assert {c._op_name for c in fused} == {"Add", "Sub", "Mul", "Div", "Neg", "Relu"}
    rng = np.random.default_rng(0)
    a = np.concatenate([_SPECIAL, rng.standard_normal(20)]).astype(dt)
    b = np.concatenate([_SPECIAL[::-1], rng.standard_normal(20)]).astype(dt)
    for cls in fused:
        n = 1 + max(int(c) for c in "0123456789" if "{" + c + "}" in cls.fused)
        operands = [a, b][:n]
        want = object.__new__(cls).forward(*operands)
        got = _elementwise(cls.fused, operands, dt)
        np.testing.assert_array_equal(got, want, err_msg=cls._op_name)
        assert np.array_equal(np.signbit(got), np.signbit(want)), cls._op_name
    grads = [c for c in set(_subclasses(Primitive)) if getattr(c, "fused_vjp", None)]
    assert {c._op_name for c in grads} == {"Relu", "Tanh"}
    g = np.concatenate([_SPECIAL[::-1], rng.standard_normal(20)]).astype(dt)
    for cls in grads:
        x = ember.tensor(a, requires_grad=True)
        y = cls.apply(x)
        want, = ember.autograd.grad([y], [x], [ember.tensor(g)])
        got = _elementwise(cls.fused_vjp, [], dt, g=g, y=y.detach().numpy())
        np.testing.assert_array_equal(got, want.numpy(), err_msg=cls._op_name)


COMPOSITES = {
    "view": (shape.view, lambda r, d: [_t(r, (3, 4), d), 2, 6]),
    "reshape": (shape.reshape, lambda r, d: [_t(r, (3, 4), d), (12,)]),
    "flatten": (shape.flatten, lambda r, d: [_t(r, (2, 3, 4), d), 1]),
    "unflatten": (shape.unflatten, lambda r, d: [_t(r, (2, 12), d), 1, (3, 4)]),
    "view_as": (shape.view_as, lambda r, d: [_t(r, (3, 4), d), _t(r, (4, 3), d, rg=False)]),
    "reshape_as": (shape.reshape_as, lambda r, d: [_t(r, (3, 4), d), _t(r, (12,), d)]),
    "expand": (shape.expand, lambda r, d: [_t(r, (3, 1), d), 2, 3, 4]),
    "expand_as": (shape.expand_as, lambda r, d: [_t(r, (1, 4), d), _t(r, (3, 4), d, rg=False)]),
    "getitem": (indexing.getitem, lambda r, d: [_t(r, (5, 4), d), (slice(1, 4), 2)]),
    "getitem-advanced": (indexing.getitem,
                         lambda r, d: [_t(r, (5, 4), d), ([0, 3, 0], slice(None))]),
}


def test_every_composite_vjp_has_a_case():
    carried = {f for name, mod in list(sys.modules.items())
               if name.startswith("ember.") and mod is not None
               for f in vars(mod).values()
               if isinstance(f, types.FunctionType) and callable(f.__dict__.get("vjp"))}
    assert carried == {f for f, _ in COMPOSITES.values()}


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite_vjp_matches_autograd(name, dt):
    fn, make = COMPOSITES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    args = make(rng, dt)
    y = fn(*args)
    g = rng.standard_normal(y.shape).astype(dt)
    wrt = [i for i, a in enumerate(args) if isinstance(a, ember.Tensor) and a.requires_grad]
    ref = ember.autograd.grad([y], [args[i] for i in wrt], [ember.tensor(g)], allow_unused=True)
    arrays = [a.detach().numpy() if isinstance(a, ember.Tensor) else a for a in args]
    got = fn.vjp([g], arrays, (y.detach().numpy(),))
    assert len(got) == len(args)
    for i, r in zip(wrt, ref):
        if r is None:  # the shape operand of reshape_as: no gradient
            assert got[i] is None
            continue
        np.testing.assert_allclose(_sum_to(got[i], arrays[i].shape), r.numpy(), **_tol(dt))
