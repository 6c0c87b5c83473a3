"""``jit.trace`` of a 0-d integer tensor read as an int (an index, a dim, a count): the
read is a recorded node (``aten::Int``), so the traced function called with another
tensor gives eager's answer, as PyTorch's trace does; saved TorchScript loads in
``torch.jit.load`` and ``ember.jit.load`` and follows the value there too; where the
value cannot be followed the trace says so with a ``TracerWarning``
(docs/differences.md, "jit.trace follows 0-d tensors read as ints (fifteenth pass)")."""
import io
import warnings

import numpy as np
import pytest
import torch

import ember

# each traced at k=1; called at other values (negative ones wrap as in eager)
_FOLLOWED = {
    "select index": (lambda m, x, k: x.select(0, k), (0, 2, -1)),
    "select index, neg": (lambda m, x, k: x.select(1, k - 2), (0, 3, -1)),
    "max dim keepdim": (lambda m, x, k: m.max(x, k, True).values, (0, -1)),
    "min dim indices": (lambda m, x, k: m.min(x, dim=k).indices, (0, -2)),
    "sum dim": (lambda m, x, k: x.sum(k), (0, -1)),
    "softmax dim": (lambda m, x, k: m.softmax(x, k), (0, -2)),
    "cumsum dim": (lambda m, x, k: m.cumsum(x, k), (0, -1)),
    "transpose": (lambda m, x, k: x.transpose(k, 0), (0, -1)),
    "unsqueeze": (lambda m, x, k: x.unsqueeze(k), (0, 2, -1)),
    "topk": (lambda m, x, k: m.topk(x[0], k + 1).values, (0, 2)),
    "narrow start": (lambda m, x, k: x.narrow(1, k, 2), (0, 2)),
    "tril": (lambda m, x, k: m.tril(x, k), (0, -1, 3)),
    "triu": (lambda m, x, k: x.triu(k), (0, -2)),
    "diagonal offset": (lambda m, x, k: x.diagonal(k), (0, -1, 2)),
    "diag_embed offset": (lambda m, x, k: m.diag_embed(x, k), (0, -2)),
    "polygamma n": (lambda m, x, k: m.polygamma(k, x.abs() + 1), (0, 2)),
    "gather dim": (lambda m, x, k: m.gather(x, k, m.zeros(2, 2, dtype=m.int64)), (0, -1)),
    "index_select dim": (lambda m, x, k: m.index_select(x, k, m.tensor([0, 2])), (0,)),
    "logsumexp dim": (lambda m, x, k: m.logsumexp(x, k), (0, -1)),
    "var dim": (lambda m, x, k: x.var(k), (0, -1)),
    "flip dims": (lambda m, x, k: x.flip([k]), (0, -1)),
    "squeeze dim": (lambda m, x, k: x[:1].squeeze(k), (0, -1)),
    "aminmax dim": (lambda m, x, k: m.aminmax(x, dim=k).max, (0, -1)),
}


_WHOLE = ("topk", "narrow start")


def _module(f):
    class M(ember.nn.Module):
        def forward(self, x, k):
            return f(ember, x, k)
    return M()


def _trace(f, x, k):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        traced = ember.jit.trace(_module(f), (x, k))
    kept = [str(w.message) for w in seen if issubclass(w.category, ember.jit.TracerWarning)]
    return traced, kept


@pytest.mark.parametrize("name", sorted(_FOLLOWED))
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_trace_follows_the_value_at_other_values_and_batch_sizes(name, dtype):
    """Traced at k=1, called at other k and at another batch size: eager's answer (ember
    kept the example's k and warned, or for a dim gave the example's reduction)."""
    f, others = _FOLLOWED[name]
    dt = getattr(ember, dtype)
    gen = np.random.default_rng(0)
    x = ember.tensor(gen.standard_normal((3, 4)).astype(np.float32))
    traced, kept = _trace(f, x, ember.tensor(1, dtype=dt))
    assert not kept, kept
    for rows in (3, 5):
        xb = ember.tensor(gen.standard_normal((rows, 4)).astype(np.float32))
        for k in (1,) + others:
            want = f(ember, xb, ember.tensor(k, dtype=dt))
            got = traced(xb, ember.tensor(k, dtype=dt))
            assert got.shape == want.shape, (rows, k)
            np.testing.assert_array_equal(got.numpy(), want.numpy())


# (index_select's constant index array made inside the function cannot be written)
_SAVED = sorted(set(_FOLLOWED) - {"index_select dim"})


@pytest.mark.parametrize("name", _SAVED)
def test_saved_trace_follows_the_value_in_torch_and_ember(name):
    """``jit.save`` writes ``int(k)`` (``aten::Int``): ``torch.jit.load`` gives torch's
    answer at other values and ``ember.jit.load`` gives ember's."""
    f, others = _FOLLOWED[name]
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4) * 0.5 - 2
    traced, _ = _trace(f, ember.tensor(x), ember.tensor(1))
    buf = io.BytesIO()
    ember.jit.save(traced, buf)
    # (topk and narrow are one recorded call that takes the tensor itself)
    assert ("int(" in traced.code) == (name not in _WHOLE)
    buf.seek(0)
    in_torch = torch.jit.load(buf)
    buf.seek(0)
    in_ember = ember.jit.load(buf)
    for k in (1,) + others:
        want = f(torch, torch.tensor(x), torch.tensor(k))
        np.testing.assert_array_equal(in_torch(torch.tensor(x), torch.tensor(k)).numpy(),
                                      want.numpy())
        np.testing.assert_allclose(in_ember(ember.tensor(x), ember.tensor(k)).numpy(),
                                   want.numpy(), rtol=1e-5)


def test_gradients_flow_through_the_other_inputs():
    """``x`` requires grad: the replay at another k gives eager's gradient of ``x``."""
    def f(m, x, k):
        return (m.softmax(x, k) * x).select(0, k).sum()
    x0 = np.arange(12.0).reshape(3, 4) * 0.25
    traced, kept = _trace(f, ember.tensor(x0, requires_grad=True), ember.tensor(1))
    assert not kept
    for k in (0, 1, -1):
        grads = []
        for run in (traced, lambda x, k: f(ember, x, k)):
            x = ember.tensor(x0, requires_grad=True)
            run(x, ember.tensor(k)).backward()
            grads.append(x.grad.numpy())
        np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)
        tx = torch.tensor(x0, requires_grad=True)
        f(torch, tx, torch.tensor(k)).backward()
        np.testing.assert_allclose(grads[0], tx.grad.numpy(), rtol=1e-12)


def test_a_read_made_a_plain_number_still_warns():
    """``roll``'s shifts are a list (PyTorch's trace keeps them, silently): ember keeps
    the example's value too and says so, naming the function, at the user's line."""
    traced, kept = _trace(lambda m, x, k: m.roll(x, k, 1), ember.arange(8.0).view(2, 4),
                          ember.tensor(1))
    assert any("roll() computed with the values of the traced tensor %k" in w for w in kept)


def test_an_out_of_range_dim_still_raises_eagers_error():
    """The read of a dim checks its range at every run, as eager does."""
    traced, _ = _trace(lambda m, x, k: x.sum(k), ember.ones(2, 3), ember.tensor(1))
    with pytest.raises(IndexError, match="Dimension out of range"):
        traced(ember.ones(2, 3), ember.tensor(2))


def test_onnx_export_of_a_dim_read_from_a_tensor_is_refused_by_name():
    """A dim is an ONNX attribute: PyTorch's exporter refuses a dim read from a tensor
    input ("expected a constant value of the 'dim' argument"); ember's names the op
    (it wrote the example's dim before, silently, or failed with a TypeError)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ember.onnx.UnsupportedOnnxExport, match="aten::Int"):
            ember.onnx.export(_module(lambda m, x, k: x.sum(k)), (ember.ones(2, 3),
                              ember.tensor(1)), io.BytesIO())


def test_compile_still_breaks_on_the_read():
    """``ember.compile`` runs such a call eagerly (a graph break) and follows the value."""
    def fn(x, k):
        return x.select(0, k) + x.sum(k).sum()
    compiled = ember.compile(fn)
    x = ember.arange(12.0).view(3, 4)
    for k in (1, 0, -1):
        assert compiled(x, ember.tensor(k)).tolist() == fn(x, ember.tensor(k)).tolist()


# traced at k=2, called at k=1: before, each answered the example's result silently
_SILENT_BEFORE = {
    "addmm alpha": lambda m, x, k: m.addmm(x[:, :3], x, x.t(), alpha=k),
    "rot90 k": lambda m, x, k: m.rot90(x, k),
    "diff n": lambda m, x, k: m.diff(x, k),
    "norm p": lambda m, x, k: m.norm(x, k),
    "dist p": lambda m, x, k: m.dist(x, x * 2, k),
    "avg_pool2d divisor_override": lambda m, x, k: m.nn.functional.avg_pool2d(
        x.view(1, 1, 3, 4), 2, divisor_override=k),
    "tensordot dims": lambda m, x, k: m.tensordot(x.view(3, 2, 2), x.view(2, 2, 3), k),
}


@pytest.mark.parametrize("name", sorted(_SILENT_BEFORE))
def test_a_number_read_from_a_traced_tensor_is_never_kept_silently(name):
    """``addmm(..., alpha=k)``, ``rot90(x, k)``, ``norm(x, k)``... with a traced 0-d
    integer ``k``: the trace follows ``k`` or warns that it keeps it (ember read it as a
    Python number or compared it, ``alpha != 1``, and the trace replayed the example's
    answer with no word)."""
    f = _SILENT_BEFORE[name]
    x = ember.arange(12.0).view(3, 4) * 0.25 + 1
    traced, kept = _trace(f, x, ember.tensor(2))
    want = f(ember, x, ember.tensor(1)).numpy()
    try:
        got = traced(x, ember.tensor(1)).numpy()
        follows = got.shape == want.shape and np.allclose(got, want)
    except (RuntimeError, ValueError):  # (the example's shapes met the other value's)
        follows = False
    assert follows or any("computed with the values of the traced tensor" in w
                          for w in kept), kept


_ONNX_FOLLOWED = {
    "topk k": (lambda m, x, k: m.topk(x[0], k + 1).values, (0, 2)),
    "narrow start": (lambda m, x, k: x.narrow(1, k, 2), (0, 2)),
    "narrow negative start": (lambda m, x, k: x.narrow(1, k - 3, 2), (0,)),
}


@pytest.mark.parametrize("name", sorted(_ONNX_FOLLOWED))
def test_onnx_export_takes_the_tensor_as_an_input(name):
    """``topk``'s k and ``narrow``'s start given as a 0-d tensor are inputs of the file
    (TopK's K, Slice's starts), as in PyTorch's exporter: onnxruntime follows them at
    other values and batch sizes (ember raised TypeError / refused before)."""
    import onnxruntime as ort
    f, others = _ONNX_FOLLOWED[name]
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4) * 0.5 - 2
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ember.onnx.export(_module(f), (ember.tensor(x), ember.tensor(1)), buf,
                          input_names=["x", "k"], dynamic_axes={"x": [0]})
    sess = ort.InferenceSession(buf.getvalue())
    for rows in (3, 5):
        xb = np.resize(x, (rows, 4))
        for k in (1,) + others:
            want = f(ember, ember.tensor(xb), ember.tensor(k)).numpy()
            got = sess.run(None, {"x": xb, "k": np.asarray(k)})[0]
            np.testing.assert_array_equal(got, want)
