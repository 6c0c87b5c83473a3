"""Calls that use a traced 0-d integer tensor's value in Python (a dim that picks a
layout, a window, a count, a size list, a number such as ``alpha`` or ``p``) are recorded
by ``jit.trace`` as one node taking the traced int (``Int``, PyTorch's ``aten::Int``):
the trace, and its saved TorchScript in ``torch.jit.load`` and ``ember.jit.load``, give
eager's answer at another value and another shape. The ops along a dim that had no
TorchScript spelling (``diagonal``, ``diag_embed``, ``var``/``std`` and with their
mean, ``aminmax``, ``mode``/``median``, ``cummax``/``cummin``, ``index_copy``,
``scatter_add``), ``addcmul``/``addcdiv``, ``all``/``any`` over dims, ``prod``, ``nansum``
and ``cumprod`` save and run in ``torch.jit.load`` at other shapes. ``movedim`` and
``Tensor.flip`` take the tensors torch takes (docs/differences.md, "jit.trace records
the calls that use a traced int in Python (sixteenth pass)")."""
import io
import warnings

import numpy as np
import pytest
import torch

import ember


def _module(f, n_inputs):
    class M(ember.nn.Module):
        def forward(self, *xs):
            assert len(xs) == n_inputs
            return f(ember, *xs)
    return M()


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _assert_same(got, want):
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = g.detach().numpy() if hasattr(g, "detach") else np.asarray(g)
        w = w.detach().numpy()
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _saved(traced):
    buf = io.BytesIO()
    ember.jit.save(traced, buf)
    return buf.getvalue()


def _randn(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ----- ops along a dim: their TorchScript spellings, run at another shape -----------------
_SPELLED = {
    "diagonal": (lambda m, x: m.diagonal(x, 1, 0, 2), (3, 4, 5), (4, 6, 5)),
    "diag_embed": (lambda m, x: m.diag_embed(x, -1, 0, 2), (3, 4), (2, 5)),
    "var": (lambda m, x: m.var(x, 1, correction=0, keepdim=True), (3, 4), (5, 2)),
    "std": (lambda m, x: x.std(), (3, 4), (5, 2)),
    "var_mean": (lambda m, x: m.var_mean(x, (0, 1), correction=2), (3, 4, 2), (5, 2, 3)),
    "std_mean": (lambda m, x: m.std_mean(x, 0), (3, 4), (5, 2)),
    "aminmax dim": (lambda m, x: tuple(m.aminmax(x, dim=1)), (3, 4), (5, 2)),
    "aminmax": (lambda m, x: tuple(m.aminmax(x)), (3, 4), (5, 2)),
    "mode": (lambda m, x: tuple(m.mode(x.round(), 0)), (3, 4), (5, 2)),
    "median dim": (lambda m, x: tuple(m.median(x, 1, True)), (3, 4), (5, 3)),
    "nanmedian dim": (lambda m, x: tuple(m.nanmedian(x, 0)), (3, 4), (5, 3)),
    "cummax": (lambda m, x: tuple(m.cummax(x, 1)), (3, 4), (5, 2)),
    "cummin": (lambda m, x: tuple(m.cummin(x, -1)), (3, 4), (5, 2)),
    "index_copy": (lambda m, x: x.index_copy(0, m.tensor([1, 0]), x[:2] * 2), (3, 4), (5, 2)),
    "scatter_add": (lambda m, x: x.scatter_add(1, m.zeros(x.shape, dtype=m.int64), x),
                    (3, 4), (5, 2)),
    "addcmul": (lambda m, x: m.addcmul(x, x, x * 2, value=0.5), (3, 4), (5, 2)),
    "addcdiv": (lambda m, x: x.addcdiv(x, x.abs() + 1, value=-2), (3, 4), (5, 2)),
    "all": (lambda m, x: m.all(x > 0), (3, 4), (5, 2)),
    "any dim": (lambda m, x: m.any(x > 0, 1, keepdim=True), (3, 4), (5, 2)),
    "all dims keepdim": (lambda m, x: (x > -1).all((0, 1), True), (3, 4), (5, 2)),
    "any keepdim": (lambda m, x: m.any(x > 0, dim=None, keepdim=True), (3, 4), (5, 2)),
    "nansum": (lambda m, x: m.nansum(x.log(), (0, 1), keepdim=True), (3, 4), (5, 2)),
    "nansum all float64": (lambda m, x: x.log().nansum(dtype=m.float64), (3, 4), (5, 2)),
    "prod": (lambda m, x: m.prod(x), (3, 4), (5, 2)),
    "prod dim": (lambda m, x: x.prod(1, keepdim=True), (3, 4), (5, 2)),
    "prod int": (lambda m, x: (x * 3).to(m.int32).prod(0), (3, 4), (5, 2)),
    "cumprod": (lambda m, x: m.cumprod(x, 1), (3, 4), (5, 2)),
    "cumprod float64": (lambda m, x: x.cumprod(0, dtype=m.float64), (3, 4), (5, 2)),
    "div trunc": (lambda m, x: m.div(x * 7, x.abs() + 0.5, rounding_mode="trunc"), (3, 4),
                  (5, 2)),
    "div trunc scalar": (lambda m, x: (x * 7).div(-2, rounding_mode="trunc"), (3, 4), (5, 2)),
    "max": (lambda m, x: m.max(x), (3, 4), (5, 2)),
    "min": (lambda m, x: x.min(), (3, 4), (5, 2)),
    "median": (lambda m, x: m.median(x), (3, 4), (5, 3)),
    "nanmedian": (lambda m, x: m.nanmedian(x.log()), (3, 4), (5, 3)),
}


@pytest.mark.parametrize("name", sorted(_SPELLED))
def test_saved_trace_of_an_op_along_a_dim_runs_at_another_shape(name):
    """``.save`` raised "no TorchScript spelling" for these ops; the archive now runs in
    ``torch.jit.load`` (and ``ember.jit.load``) at another shape with torch's values."""
    f, s0, s1 = _SPELLED[name]
    traced = ember.jit.trace(_module(f, 1), (ember.tensor(_randn(s0, 0)),))
    data = _saved(traced)
    x1 = _randn(s1, 1)
    want = f(torch, torch.tensor(x1))
    _assert_same(torch.jit.load(io.BytesIO(data))(torch.tensor(x1)), want)
    _assert_same(ember.jit.load(io.BytesIO(data))(ember.tensor(x1)), want)


def test_index_copy_follows_a_traced_index_in_torch():
    traced = ember.jit.trace(_module(lambda m, x, i: x.index_copy(0, i, x[:2] * 2), 2),
                             (ember.randn(4, 3), ember.tensor([1, 0])))
    x, i = torch.randn(5, 2), torch.tensor([3, 1])
    _assert_same(torch.jit.load(io.BytesIO(_saved(traced)))(x, i),
                 x.index_copy(0, i, x[:2] * 2))


# ----- calls given a traced int they use in Python: one node ------------------------------
# name: (f(lib, x, k), x's shape and k at the trace, then at the call)
_WHOLE = {
    "select dim": (lambda m, x, k: m.select(x, k, 1), (3, 4, 5), 2, (4, 3, 2), 0),
    "select_scatter dim": (lambda m, x, k: m.select_scatter(x, x.select(k, 0) * 0, k, 0),
                           (3, 4), 1, (3, 4), 0),
    "glu dim": (lambda m, x, k: m.nn.functional.glu(x, k), (4, 6), 1, (4, 6), 0),
    "unfold size": (lambda m, x, k: x.unfold(0, k, 1), (5, 3), 2, (6, 2), 3),
    "rot90 k": (lambda m, x, k: m.rot90(x, k, (0, 1)), (3, 4), 1, (3, 5), 2),
    "diff n": (lambda m, x, k: m.diff(x, k, 0), (6, 3), 1, (5, 3), 2),
    "matrix_power n": (lambda m, x, k: m.linalg.matrix_power(x, k), (3, 3), 2, (4, 4), 3),
    "vander N": (lambda m, x, k: m.linalg.vander(x, N=k), (3,), 3, (4,), 5),
    "pixel_shuffle": (lambda m, x, k: m.nn.functional.pixel_shuffle(x, k), (1, 4, 2, 2), 2,
                      (1, 9, 2, 2), 3),
    "mvlgamma p": (lambda m, x, k: m.mvlgamma(x.abs() + 3, k), (3,), 1, (3,), 2),
    "pad amount": (lambda m, x, k: m.nn.functional.pad(x, [k, 1]), (2, 3), 1, (2, 4), 2),
    "pad reflect": (lambda m, x, k: m.nn.functional.pad(x, [k, 1], "reflect"), (1, 2, 5), 1,
                    (1, 2, 6), 2),
    "repeat count": (lambda m, x, k: x.repeat(k, 1), (2, 3), 2, (3, 3), 3),
    "hsplit point": (lambda m, x, k: m.hsplit(x, [k]), (2, 4), 1, (2, 5), 3),
    "nonzero_static size": (lambda m, x, k: m.nonzero_static(x > 0, size=k), (6,), 2, (7,), 4),
    "avg_pool2d window": (lambda m, x, k: m.nn.functional.avg_pool2d(x, k), (1, 2, 6, 6), 2,
                          (1, 2, 7, 7), 3),
    "avg_pool2d divisor": (lambda m, x, k: m.nn.functional.avg_pool2d(x, 2, divisor_override=k),
                           (1, 2, 6, 6), 2, (1, 2, 4, 4), 3),
    "avg_pool1d window": (lambda m, x, k: m.nn.functional.avg_pool1d(x, [k], padding=1),
                          (1, 2, 6), 2, (1, 2, 7), 3),
    "adaptive_max_pool2d size": (lambda m, x, k: m.nn.functional.adaptive_max_pool2d(x, [k, 2]),
                                 (1, 2, 6, 6), 2, (1, 2, 7, 7), 3),
    "adaptive_max_pool1d indices": (
        lambda m, x, k: m.nn.functional.adaptive_max_pool1d(x, k, True), (1, 2, 6), 2,
        (1, 2, 7), 3),
    "as_strided size": (lambda m, x, k: m.as_strided(x, (k, 2), (1, 2), 1), (4, 3), 2,
                        (4, 3), 3),
    "as_strided_scatter offset": (
        lambda m, x, k: m.as_strided_scatter(x, m.ones(2, 2), (2, 2), (1, 2), k), (4, 3), 2,
        (4, 3), 3),
    "new_zeros size": (lambda m, x, k: x.new_zeros(k, 2), (2,), 2, (2,), 3),
    "new_ones dtype": (lambda m, x, k: x.new_ones([k, 2], dtype=m.float64), (2,), 2, (2,), 3),
    "new_full size": (lambda m, x, k: x.new_full([k], 3.5), (2,), 2, (2,), 3),
    "addmm beta alpha": (lambda m, x, k: m.addmm(x, x, x, beta=k, alpha=k), (3, 3), 1,
                         (4, 4), 0),
    "addmv beta": (lambda m, x, k: m.addmv(x[0], x, x[1], beta=k), (3, 3), 1, (4, 4), 0),
    "baddbmm alpha": (lambda m, x, k: m.baddbmm(x, x, x, alpha=k), (2, 3, 3), 1,
                      (2, 4, 4), 2),
    "dist p": (lambda m, x, k: m.dist(x, x * 2, k), (3, 3), 2, (4, 4), 1),
    "renorm p": (lambda m, x, k: m.renorm(x, k, 0, 1), (3, 3), 2, (4, 4), 1),
    "histc bins": (lambda m, x, k: m.histc(x, k, -1, 1), (10,), 4, (12,), 6),
    "grid_sampler_2d mode": (
        lambda m, x, k: m.grid_sampler_2d(x, x[:, :2].permute(0, 2, 3, 1).tanh(), k, 0, False),
        (1, 2, 3, 3), 0, (1, 2, 4, 4), 1),
    "unfold (im2col) window": (lambda m, x, k: m.nn.functional.unfold(x, [k, 2], padding=1),
                               (2, 4, 4), 2, (2, 5, 5), 3),
    "vector_norm ord": (lambda m, x, k: m.linalg.vector_norm(x, k), (3, 3), 2, (4, 4), 1),
    "vector_norm dim": (lambda m, x, k: m.linalg.vector_norm(x, 3, k, True), (3, 3), 0,
                        (4, 4), 1),
    "linalg.norm ord": (lambda m, x, k: m.linalg.norm(x, k, 1), (3, 3), 2, (4, 4), 1),
    "norm p": (lambda m, x, k: m.norm(x, k), (3, 3), 2, (4, 4), 1),
    "norm nuc dim": (lambda m, x, k: m.norm(x, "nuc", [k, 1]), (3, 3), 0, (4, 4), 0),
    "tensorsolve dims": (
        lambda m, x, k: m.linalg.tensorsolve(x + m.eye(3) * 4, x[0], [k]), (3, 3), 0,
        (3, 3), 1),
    "cov correction": (lambda m, x, k: m.cov(x, correction=k), (3, 5), 1, (3, 6), 0),
    "gradient edge_order": (lambda m, x, k: m.gradient(x, edge_order=k), (5, 5), 1, (6, 6), 2),
    "linspace end": (lambda m, x, k: m.linspace(0, k, 5) + x.sum(), (3,), 2, (4,), 3),
    "linspace steps": (lambda m, x, k: m.linspace(x[0], x[1], k), (3,), 4, (4,), 6),
    "logspace end": (lambda m, x, k: m.logspace(0, k, 5, 2.0) + x.sum(), (3,), 2, (4,), 3),
    "embedding_bag padding_idx": (
        lambda m, x, k: m.nn.functional.embedding_bag(m.tensor([[0, 1, 2], [3, 1, 0]]), x,
                                                      padding_idx=k), (5, 3), 1, (6, 3), -2),
}
# ember's loader refuses as_strided (a file must not choose strides into memory): a traced
# module of it replays its graph but cannot be saved (a traced function keeps its code)
_LOADER_REFUSES = {"as_strided size"}


@pytest.mark.parametrize("name", sorted(_WHOLE))
def test_a_call_using_a_traced_int_follows_it_in_replay_and_saved(name):
    """Traced at one value and shape, called at others: the replay, ``torch.jit.load``
    and ``ember.jit.load`` of the saved trace give eager's answer (the trace kept the
    example's value and warned, or raised, before)."""
    f, s0, k0, s1, k1 = _WHOLE[name]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        traced = ember.jit.trace(_module(f, 2), (ember.tensor(_randn(s0, 0)), ember.tensor(k0)))
    assert not [w for w in seen if issubclass(w.category, ember.jit.TracerWarning)]
    x1 = _randn(s1, 1)
    want = f(torch, torch.tensor(x1), torch.tensor(k1))
    _assert_same(traced(ember.tensor(x1), ember.tensor(k1)), want)
    if name in _LOADER_REFUSES:  # (a traced module runs its TorchScript in ember's loader)
        with pytest.raises(NotImplementedError, match="refused in TorchScript"):
            _saved(traced)
        return
    data = _saved(traced)
    _assert_same(torch.jit.load(io.BytesIO(data))(torch.tensor(x1), torch.tensor(k1)), want)
    _assert_same(ember.jit.load(io.BytesIO(data))(ember.tensor(x1), ember.tensor(k1)), want)


def test_the_call_takes_the_read_int_as_its_input():
    """As PyTorch's trace: ``Int`` of the tensor, then the call taking it."""
    traced = ember.jit.trace(lambda x, k: x.select(k, 1), (ember.randn(3, 4), ember.tensor(0)))
    ops = [n.op for n in traced.graph.nodes]
    assert ops == ["Int", "select"], ops
    assert "torch.select(x, int(k), 1)" in traced.code


def test_a_traced_function_using_as_strided_keeps_its_code():
    """ember's loader refuses ``as_strided``: the traced function keeps its TorchScript
    as written and replays its graph (the trace raised ScriptSafetyError)."""
    traced = ember.jit.trace(lambda x, k: ember.as_strided(x, (k, 2), (1, 2)),
                             (ember.randn(4, 3), ember.tensor(2)))
    assert "torch.as_strided(x, [int(k), 2], [1, 2], None)" in traced.code
    x = ember.arange(12.0).reshape(4, 3)
    _assert_same(traced(x, ember.tensor(3)),
                 torch.as_strided(torch.arange(12.0).reshape(4, 3), (3, 2), (1, 2)))


def test_nonzero_static_follows_the_traced_input():
    """``nonzero_static`` of a traced tensor is one node: its rows follow the input (they
    were a constant of the example's values, with no warning)."""
    f = (lambda x: ember.nonzero_static(x, size=3))
    traced = ember.jit.trace(f, (ember.tensor([0, 1, 1, 0]),), check_trace=False)
    x = ember.tensor([1, 1, 0, 0])
    _assert_same(traced(x), torch.nonzero_static(torch.tensor([1, 1, 0, 0]), size=3))


# ----- eager: the tensors torch takes for an int ------------------------------------------
_EAGER = {
    "movedim 0-d source": lambda m, x: m.movedim(x, m.tensor(2), 0),
    "movedim 0-d both": lambda m, x: m.movedim(x, m.tensor(2), m.tensor(0)),
    "movedim int32": lambda m, x: m.movedim(x, m.tensor(2, dtype=m.int32), 0),
    "moveaxis method": lambda m, x: x.moveaxis(m.tensor(-1), 0),
    "movedim 1-d": lambda m, x: m.movedim(x, m.tensor([2, 1]), (0, 1)),
    "movedim one-element 1-d": lambda m, x: m.movedim(x, m.tensor([2]), 0),
    "movedim bool": lambda m, x: m.movedim(x, m.tensor(True), 0),
    "movedim float": lambda m, x: m.movedim(x, m.tensor(1.0), 0),
    "movedim 2-d": lambda m, x: m.movedim(x, m.tensor([[1]]), m.tensor([[0]])),
    "flip method 0-d": lambda m, x: x.flip(m.tensor(1)),
    "flip method 2-d one element": lambda m, x: x.flip(m.tensor([[1]])),
    "flip method bool": lambda m, x: x.flip(m.tensor(True)),
    "flip method and an int": lambda m, x: x.flip(m.tensor(1), 2),
    "flip method out of range": lambda m, x: x.flip(m.tensor(5)),
    "flip method 1-d": lambda m, x: x.flip(m.tensor([0, 2])),
    "flip method empty": lambda m, x: x.flip(m.tensor([], dtype=m.int64)),
    "flip method float": lambda m, x: x.flip(m.tensor(1.0)),
    "flip method keyword": lambda m, x: x.flip(dims=m.tensor(1)),
    "flip function 0-d": lambda m, x: m.flip(x, m.tensor(1)),
}


@pytest.mark.parametrize("name", sorted(_EAGER))
def test_an_int_given_as_a_tensor_in_eager_as_torch(name):
    """``movedim(x, k, 0)`` and ``x.flip(k)`` with a 0-d integer ``k`` run as torch
    (ember raised); the tensors torch refuses there (a vector, a float, a keyword
    ``dims``) raise its error type (ember iterated a vector, or flipped nothing)."""
    f = _EAGER[name]
    x = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    try:
        want = f(torch, torch.tensor(x))
    except Exception as e:  # noqa: BLE001 - the error type is the oracle
        with pytest.raises(type(e)):
            f(ember, ember.tensor(x))
        return
    _assert_same(f(ember, ember.tensor(x)), want)


@pytest.mark.parametrize("f", [lambda m, x, k: x.flip(k), lambda m, x, k: m.movedim(x, k, 0),
                               lambda m, x, k: m.movedim(x, [0, k], [k, 0])],
                         ids=["flip", "movedim", "movedim list"])
def test_flip_and_movedim_follow_a_traced_tensor(f):
    x = ember.arange(24.0).reshape(2, 3, 4)
    traced = ember.jit.trace(_module(f, 2), (x, ember.tensor(2)))
    data = _saved(traced)
    for k in (1, -1):
        want = f(torch, torch.arange(24.0).reshape(2, 3, 4), torch.tensor(k))
        _assert_same(traced(x, ember.tensor(k)), want)
        _assert_same(torch.jit.load(io.BytesIO(data))(torch.arange(24.0).reshape(2, 3, 4),
                                                      torch.tensor(k)), want)


_ONNX = {
    "pad amount": (lambda m, x, k: m.nn.functional.pad(x, [k, 1]), (2, 3), 1, (4, 3), 2),
    "pad crop": (lambda m, x, k: m.nn.functional.pad(x, [1, k]), (2, 5), 1, (4, 5), -2),
    "repeat count": (lambda m, x, k: x.repeat(k, 1), (2, 3), 2, (3, 3), 3),
    "new_zeros size": (lambda m, x, k: x.new_zeros(k, 2) + 1, (2,), 2, (2,), 3),
    "new_full size": (lambda m, x, k: x.new_full([k, 2], 3.5), (2,), 2, (2,), 3),
}


@pytest.mark.parametrize("name", sorted(_ONNX))
def test_onnx_export_takes_the_traced_int_as_an_input(name):
    """Pads, repeats and sizes read from a 0-d tensor are inputs of the ONNX ops that
    take them (Pad's pads, Tile's repeats, ConstantOfShape's shape): onnxruntime follows
    them at other values and batch sizes."""
    import onnxruntime as ort
    f, s0, k0, s1, k1 = _ONNX[name]
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ember.onnx.export(_module(f, 2), (ember.tensor(_randn(s0, 0)), ember.tensor(k0)), buf,
                          input_names=["x", "k"], dynamic_axes={"x": [0]})
    x1 = _randn(s1, 1)
    got = ort.InferenceSession(buf.getvalue()).run(None, {"x": x1, "k": np.asarray(k1)})[0]
    _assert_same(got, f(torch, torch.tensor(x1), torch.tensor(k1)))


def test_onnx_export_of_a_call_taking_a_dim_read_from_a_tensor_is_refused_by_name():
    with pytest.raises(ember.onnx.UnsupportedOnnxExport, match="'select'"):
        ember.onnx.export(_module(lambda m, x, k: x.select(k, 1), 2),
                          (ember.randn(3, 4), ember.tensor(0)), io.BytesIO())
