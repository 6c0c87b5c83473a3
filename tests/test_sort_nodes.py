"""The nodes of the sorting and value-selecting ops against torch 2.13: ``sort`` (stable
or not, descending, any dim, 0-d, empty, non-contiguous), ``msort``, ``topk`` (largest or
smallest, unsorted), ``kthvalue``, ``mode``, ``median``/``nanmedian`` with and without a
dim, ``max``/``min`` with a dim, ``cummax``/``cummin``, on values with ties, -0.0, NaN
and infinities. For each: the output's ``grad_fn`` name and ``next_functions``, what
``saved_tensors_hooks`` packs (shapes and dtypes) and how often it unpacks, the
gradient, and the second derivative's graph and values.

Then the nodes that give saved-tensor hooks an index or a mask (these and gather,
scatter, index_select/add/copy/fill, index_put, take, put, indexing, masked_select,
where, masked_fill, max pooling): an
unpack hook that hands back another index (or mask) moves the gradient in PyTorch, and
must move it in ember the same way.
"""
import zlib

import numpy as np
import pytest
import torch

import ember


def _values(shape, kind):
    """Test values of ``shape``: random, or with ties, signed zeros, NaN and inf (the
    same for a shape and kind in every run and test selection)."""
    rng = np.random.default_rng(zlib.crc32(repr((shape, kind)).encode()))
    n = int(np.prod(shape))
    if kind == "random":
        a = rng.standard_normal(n)
    else:
        pool = np.array([1.0, 2.0, 2.0, -0.0, 0.0, np.nan, np.inf, -np.inf, 1.0, -3.0])
        if kind == "ties":  # no NaN: every op defines its gradient
            pool = np.array([1.0, 2.0, 2.0, -0.0, 0.0, 1.0, -3.0, 2.0])
        a = pool[rng.integers(0, len(pool), n)]
    return a.reshape(shape).astype(np.float32)


def _dtype(t):
    return str(t.dtype).split(".")[-1]


def _names(fn):
    return [(None if f is None else f.name(), i) for f, i in fn.next_functions]


def _graph(L, case, x_np, unpack_fn=None, noncontig=False, second=True):
    """Everything compared for one case on library ``L``, or the exception's type."""
    x = L.tensor(x_np, requires_grad=True)
    if noncontig:
        x = x.t() if x.dim() == 2 else x
    packs, unpacked = [], [0]

    def pack(t):
        packs.append((tuple(t.shape), _dtype(t)))
        return t

    def unpack(t):
        unpacked[0] += 1
        return unpack_fn(L, t) if unpack_fn is not None else t

    try:
        with L.autograd.graph.saved_tensors_hooks(pack, unpack):
            out = case(L, x)
        y = out[0] if isinstance(out, tuple) else out
        res = {"values": y.detach().numpy().copy(), "packs": packs}
        if isinstance(out, tuple):
            res["indices"] = out[1].numpy().copy()
        fn = y.grad_fn
        res["name"] = fn.name()
        res["next"] = _names(fn)
        go = L.tensor(_grad_output(y.shape), requires_grad=True)
        g, = L.autograd.grad(y, x, go, create_graph=second)
        res["grad"] = g.detach().numpy().copy()
        res["unpacked"] = unpacked[0]
        # (an empty input's gradient is PyTorch's input itself for cummax/cummin)
        if second and g.grad_fn is not None and g.numel():
            res["g_name"] = g.grad_fn.name()
            res["g_next"] = [n for n, _ in _names(g.grad_fn)]
            w = L.tensor(np.linspace(-1, 1, g.numel()).reshape(g.shape).astype(np.float32))
            gg, = L.autograd.grad((g * w).sum(), go)
            res["gg"] = gg.numpy().copy()
        return res
    except Exception as e:  # noqa: BLE001 - the outcome compared is the exception's type
        return type(e).__name__


_GO = np.random.default_rng(3)


def _grad_output(shape):
    """A gradient for an output of ``shape`` (the same draws for torch and ember: the
    calls alternate, torch first, and each draw is used by the next case run)."""
    return _GO_CACHE.setdefault(tuple(shape), _GO.standard_normal(shape).astype(np.float32))


_GO_CACHE = {}


def _compare(case, x_np, exact=("grad", "gg"), **kw):
    """Both libraries' outcomes for one case, equal (the arrays named in ``exact`` to
    the bit, the others to float32 rounding); torch's returned."""
    t = _graph(torch, case, x_np, **kw)
    e = _graph(ember, case, x_np, **kw)
    if isinstance(t, str) or isinstance(e, str):
        assert e == t, (e, t)
        return t
    assert e.keys() == t.keys(), (sorted(e), sorted(t))
    for k in t:
        if isinstance(t[k], np.ndarray):
            assert e[k].shape == t[k].shape, k
            if k in exact or k == "indices" or k == "values" and "grad" in exact:
                np.testing.assert_array_equal(e[k], t[k], err_msg=k)
            else:
                np.testing.assert_allclose(e[k], t[k], rtol=1e-6, atol=1e-7, err_msg=k)
            if k == "values":  # -0.0 against 0.0
                np.testing.assert_array_equal(np.signbit(e[k]), np.signbit(t[k]))
        else:
            assert e[k] == t[k], (k, e[k], t[k])
    return t


SORT_FAMILY = {
    "sort": lambda L, x: L.sort(x),
    "sort_desc": lambda L, x: L.sort(x, descending=True),
    "sort_dim0": lambda L, x: L.sort(x, 0),
    "sort_stable": lambda L, x: L.sort(x, stable=True),
    "sort_stable_false": lambda L, x: x.sort(stable=False, dim=-1, descending=True),
    "msort": lambda L, x: L.msort(x),
    "topk": lambda L, x: L.topk(x, min(2, x.shape[-1]) if x.dim() else 1),
    "topk_smallest_unsorted": lambda L, x: L.topk(x, min(3, x.shape[-1]) if x.dim() else 1,
                                                  largest=False, sorted=False),
    "topk_dim0": lambda L, x: x.topk(1, 0),
    "kthvalue": lambda L, x: L.kthvalue(x, min(2, x.shape[-1]) if x.dim() else 1),
    "kthvalue_keepdim_dim0": lambda L, x: L.kthvalue(x, 1, 0, keepdim=True),
    "mode": lambda L, x: L.mode(x),
    "median_dim": lambda L, x: L.median(x, -1),
    "nanmedian_dim_keepdim": lambda L, x: L.nanmedian(x, 0, keepdim=True),
    "max_dim": lambda L, x: L.max(x, -1),
    "min_dim_keepdim": lambda L, x: x.min(0, keepdim=True),
    "cummax": lambda L, x: L.cummax(x, -1),
    "cummin": lambda L, x: L.cummin(x, 0),
}

FULL = {  # whole-tensor reductions (no indices): name, packs and gradients
    "median": lambda L, x: L.median(x),
    "nanmedian": lambda L, x: L.nanmedian(x),
    "max": lambda L, x: L.max(x),
    "min": lambda L, x: x.min(),
}

SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 3, 4), (2, 0)]
# (sorts without a stable order place equal values as PyTorch's CPU std::sort does, and
# topk, kthvalue and mode choose among ties as PyTorch's CPU kernels do: every op runs
# on ties too)


@pytest.mark.parametrize("name", sorted(SORT_FAMILY))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("kind", ["random", "ties"])
def test_sort_family_nodes_are_torchs(name, shape, kind):
    _compare(SORT_FAMILY[name], _values(shape, kind))


@pytest.mark.parametrize("name", sorted(SORT_FAMILY))
def test_sort_family_non_contiguous(name):
    # torch's ascending unstable float sort on AVX-512 CPUs is a vectorized sort whose
    # order among ties ember does not follow (tests/test_int_dtypes.py): distinct values
    simd = name == "sort" and torch.backends.cpu.get_cpu_capability() == "AVX512"
    _compare(SORT_FAMILY[name], _values((5, 3), "random" if simd else "ties"), noncontig=True)


@pytest.mark.parametrize("name", ["sort_stable", "topk", "kthvalue", "max_dim",
                                  "median_dim", "cummax", "cummin"])
def test_sort_family_with_nan_and_inf(name):
    # the gradient goes to the positions the indices name, NaNs included
    res = _compare(SORT_FAMILY[name], _values((4, 6), "special"))
    assert not isinstance(res, str)


@pytest.mark.parametrize("name", sorted(FULL))
@pytest.mark.parametrize("kind", ["random", "ties"])
def test_full_reductions(name, kind):
    # the second derivative sums the tied elements' weights in another order
    _compare(FULL[name], _values((3, 4), kind), exact=("grad",))


def test_sort_nodes_by_name():
    x = _values((3, 5), "random")
    want = {"sort": "SortBackward0", "sort_stable": "SortBackward1",
            "sort_stable_false": "SortBackward1", "msort": "SortBackward0",
            "topk": "TopkBackward0", "kthvalue": "KthvalueBackward0",
            "mode": "ModeBackward0", "median_dim": "MedianBackward1",
            "max_dim": "MaxBackward0", "cummax": "CummaxBackward0"}
    for name, node in want.items():
        res = _compare(SORT_FAMILY[name], x)
        assert res["name"] == node
        assert res["next"] == [("torch::autograd::AccumulateGrad", 0)]
        assert res["unpacked"] == len(res["packs"]) >= 1


def test_argsort_records_nothing():
    for L in (torch, ember):
        x = L.tensor(_values((3, 5), "random"), requires_grad=True)
        i = L.argsort(x)
        assert i.grad_fn is None and not i.requires_grad


def _backward_after_writing_indices(L, op):
    x = L.tensor(_values((3, 5), "random"), requires_grad=True)
    values, indices = op(L, x)
    indices.add_(1)
    try:
        values.sum().backward()
    except RuntimeError as e:
        return str(e)
    return "no error"


@pytest.mark.parametrize("name", ["sort", "sort_stable", "topk", "kthvalue"])
def test_writing_into_the_returned_indices_fails_backward(name):
    # the node keeps the indices it returned, with their version, as PyTorch's does
    msg = _backward_after_writing_indices(torch, SORT_FAMILY[name])
    assert "modified by an inplace operation" in msg
    assert _backward_after_writing_indices(ember, SORT_FAMILY[name]) == msg


# ----- unpack hooks that hand back something else --------------------------------------

def _flip_ints(L, t):
    """Index and mask tensors reversed along their last dim (still valid, another
    choice); floating tensors as they are."""
    if t.dtype.is_floating_point or t.dim() == 0:
        return t
    return t.flip(-1)


def _zero_ints(L, t):
    if t.dtype.is_floating_point or t.dtype == L.bool:
        return t
    return L.zeros_like(t)


def _clone(L, t):
    return t.clone()


def _double_floats(L, t):
    """Floating tensors (inputs kept for their shape, a loss's total weight, saved
    outputs) doubled; indices as they are."""
    return t * 2 if t.dtype.is_floating_point else t


IDX = [[0, 1], [2, 2], [4, 0]]
HOOKED = dict(SORT_FAMILY, **{
    "gather": lambda L, x: L.gather(x, 1, L.tensor(IDX)),
    "scatter": lambda L, x: L.zeros(3, 5).scatter(1, L.tensor([[0, 1], [2, 3], [4, 0]]),
                                                  x[:, :2]),
    "scatter_add": lambda L, x: L.zeros(3, 5).scatter_add(1, L.tensor(IDX), x[:, :2]),
    "index_select": lambda L, x: x.index_select(1, L.tensor([4, 0, 4])),
    "index_add": lambda L, x: L.zeros(3, 5).index_add(1, L.tensor([0, 0, 3]), x[:, :3]),
    "index_put": lambda L, x: L.zeros(3, 5).index_put((L.tensor([0, 2]),), x[:2]),
    "index_copy": lambda L, x: x.index_copy(1, L.tensor([4, 0]), x[:, :2] * 2),
    "index_copy_no_source_grad": lambda L, x: x.index_copy(1, L.tensor([4, 0]),
                                                           L.ones(3, 2)),
    "index_fill": lambda L, x: x.index_fill(1, L.tensor([0, 3]), 1.5),
    "index_fill_tensor": lambda L, x: x.index_fill(1, L.tensor([0, 3]), x[0, 0]),
    "take": lambda L, x: L.take(x, L.tensor([[0, 7], [14, 7]])),
    "put": lambda L, x: x.put(L.tensor([0, 4]), x[1, :2] * 2),
    "put_accumulate": lambda L, x: x.put(L.tensor([0, 4]), L.ones(2), accumulate=True),
    "nll_loss": lambda L, x: L.nn.functional.nll_loss(x.log_softmax(1), L.tensor([0, 1, 4])),
    "nll_loss_weight_ignore": lambda L, x: L.nn.functional.nll_loss(
        x.log_softmax(1), L.tensor([0, 1, 4]), weight=L.tensor([1., 2., 3., 4., 5.]),
        ignore_index=1),
    "nll_loss_none": lambda L, x: L.nn.functional.nll_loss(
        x, L.tensor([3, 1, 4]), weight=L.tensor([1., 2., 3., 4., 5.]), reduction="none"),
    "nll_loss_sum_2d": lambda L, x: L.nn.functional.nll_loss(
        x.reshape(1, 3, 5), L.tensor([[0, 1, 2, 2, 0]]), reduction="sum"),
    "cross_entropy": lambda L, x: L.nn.functional.cross_entropy(x, L.tensor([4, 0, 2])),
    "getitem": lambda L, x: x[L.tensor([2, 0, 2])],
    "masked_select": lambda L, x: L.masked_select(x, x > 0),
    "where": lambda L, x: L.where(x > 0, x, L.zeros(())),
    "masked_fill": lambda L, x: x.masked_fill(x > 0, 1.0),
    "max_pool2d": lambda L, x: L.nn.functional.max_pool2d(x.reshape(1, 1, 3, 5), 2),
    "max_pool2d_indices": lambda L, x: L.nn.functional.max_pool2d(
        x.reshape(1, 1, 3, 5), 2, return_indices=True),
    "max_pool1d": lambda L, x: L.nn.functional.max_pool1d(x.reshape(1, 3, 5), 2, 1),
    "adaptive_max_pool2d": lambda L, x: L.nn.functional.adaptive_max_pool2d(
        x.reshape(1, 1, 3, 5), (2, 2)),
})


@pytest.mark.parametrize("unpack_fn", [_flip_ints, _zero_ints, _clone, _double_floats],
                         ids=["flip", "zeros", "clone", "double"])
@pytest.mark.parametrize("name", sorted(HOOKED))
@pytest.mark.parametrize("kind", ["random", "ties"])
def test_backward_uses_what_unpack_returns(name, unpack_fn, kind):
    # second derivatives: for the sorting family (other ops' are tested elsewhere)
    # (indices all made 0 pile many gradients onto one element: pooling's backward adds
    # them in another order than PyTorch's)
    # (losses: log_softmax and the loss's sum round in the last bit apart from PyTorch's
    # with or without hooks; a gradient moved by the hooks is off by far more)
    # (index_fill's Tensor value: its gradient is a sum of the filled positions' gradients,
    # whose order of adding differs from PyTorch's in the last bit with or without hooks)
    exact = () if unpack_fn is _zero_ints and "pool" in name or "_loss" in name or \
        "entropy" in name or name == "index_fill_tensor" else ("grad", "gg")
    res = _compare(HOOKED[name], _values((3, 5), kind), unpack_fn=unpack_fn,
                   second=name in SORT_FAMILY, exact=exact)
    assert isinstance(res, str) or res["unpacked"] == len(res["packs"])


def _next_ints(L, t):
    """Each index one place on (of 5): always another choice."""
    return t if t.dtype.is_floating_point else (t + 1) % 5


@pytest.mark.parametrize("name", ["sort", "topk", "kthvalue", "mode", "median_dim", "max_dim",
                                  "cummax", "gather", "index_select", "max_pool2d", "nll_loss_none",
                                  "take"])
def test_a_changed_index_moves_the_gradient(name):
    # the checks above could pass with hooks ignored on both sides; here torch's gradient
    # must differ from the plain one, and ember's must follow it
    x = _values((3, 5), "random")
    plain = _compare(HOOKED[name], x, second=False)["grad"]
    moved = _compare(HOOKED[name], x, unpack_fn=_next_ints, second=False)["grad"]
    assert not np.array_equal(plain, moved)


def _unpacks_of_two_backwards(L):
    x = L.tensor(_values((3, 5), "random"), requires_grad=True)
    count = []
    with L.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: count.append(1) or t):
        v = x.topk(2).values
    v.sum().backward(retain_graph=True)
    v.sum().backward()
    return len(count)


def test_unpack_runs_once_per_backward():
    assert _unpacks_of_two_backwards(ember) == _unpacks_of_two_backwards(torch) == 2


# ----- the new nodes under transforms and captures -------------------------------------

def _selections(m, x):
    return (m.kthvalue(x, 2).values.sum() + x.topk(2).values.sum()
            + x.sort().values[:, 0].sum() + x.max(1).values.sum()
            + m.cummax(x, 1).values.sum())


def test_compile_gives_eager_values_and_gradients():
    x = ember.tensor(_values((3, 6), "random"), requires_grad=True)
    _selections(ember, x).backward()
    eager = x.grad.numpy().copy()
    x.grad = None
    ember.compile(lambda t: _selections(ember, t))(x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), eager)


class _Kth(ember.nn.Module):
    def forward(self, x):
        return ember.kthvalue(x, 2).values + ember.kthvalue(x, 1, 1, True).values.squeeze(1)


def test_trace_and_onnx_export_of_kthvalue():
    import io

    import onnx
    x = ember.tensor(_values((3, 6), "random"))
    want = _Kth()(x).numpy()
    buf = io.BytesIO()
    ember.jit.save(ember.jit.trace(_Kth(), (x,)), buf)
    buf.seek(0)
    np.testing.assert_array_equal(torch.jit.load(buf)(torch.tensor(x.numpy())).numpy(), want)
    buf = io.BytesIO()
    ember.onnx.export(_Kth(), (x,), buf)
    onnx.checker.check_model(onnx.load_from_string(buf.getvalue()), full_check=True)
    buf.seek(0)
    np.testing.assert_array_equal(ember.onnx.load(buf)(x).numpy(), want)


def test_vmap_of_grad_and_forward_ad():
    a = _values((3, 6), "random")

    def f(r):
        return r.sort().values[0] + r.kthvalue(2).values + r.max(0).values + r.topk(2)[0][1]
    got = ember.func.vmap(ember.func.grad(f))(ember.tensor(a))
    want = torch.func.vmap(torch.func.grad(f))(torch.tensor(a))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    for L in (ember, torch):
        fw = L.autograd.forward_ad
        with fw.dual_level():
            d = fw.make_dual(L.tensor(a), L.tensor(np.arange(18.0, dtype=np.float32)
                                                   .reshape(3, 6)))
            t = [fw.unpack_dual(y).tangent.numpy() for y in
                 (d.sort().values, d.topk(3).values, L.kthvalue(d, 2).values)]
        if L is ember:
            got = t
    for g, w in zip(got, t):
        np.testing.assert_array_equal(g, w)


# ----- normalizations: the statistics their unpack hands back --------------------------

_NORMS = {
    "layer_norm": lambda L, x, w: L.nn.functional.layer_norm(x, (5,), w[:1].expand(5) + 1),
    "group_norm": lambda L, x, w: L.nn.functional.group_norm(x, 2, w),
    "batch_norm": lambda L, x, w: L.nn.functional.batch_norm(x, L.zeros(4), L.ones(4), w,
                                                             training=True),
}


def _norm_grads(L, name, unpack_fn):
    a = _values((3, 4, 5), "random")
    x = L.tensor(a, requires_grad=True)
    w = L.tensor(np.arange(1.0, 5.0, dtype=np.float32), requires_grad=True)
    if unpack_fn is None:
        y = _NORMS[name](L, x, w)
    else:
        with L.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: unpack_fn(L, t)):
            y = _NORMS[name](L, x, w)
    return [g.numpy() for g in L.autograd.grad((y * y).sum(), (x, w))]


def _shift_floats(L, t):
    return t + 0.5 if t.dtype.is_floating_point else t


@pytest.mark.parametrize("unpack_fn", [_double_floats, _shift_floats], ids=["double", "shift"])
@pytest.mark.parametrize("name", sorted(_NORMS))
def test_normalizations_use_the_unpacked_statistics(name, unpack_fn):
    # PyTorch's backward reads the mean and rstd it saved: changed ones change the
    # gradient (by far more than the float32 rounding allowed here)
    for e, t in zip(_norm_grads(ember, name, unpack_fn), _norm_grads(torch, name, unpack_fn)):
        np.testing.assert_allclose(e, t, rtol=1e-4, atol=1e-5 * np.abs(t).max())


@pytest.mark.parametrize("name", sorted(_NORMS))
def test_hooks_that_give_back_what_they_got_change_no_bit(name):
    for h, p in zip(_norm_grads(ember, name, _clone), _norm_grads(ember, name, None)):
        np.testing.assert_array_equal(h, p)


def _profiler_rows(L, x):
    with L.profiler.profile() as p:
        x.sort(stable=True)
        x.sort()
        x.topk(2)
        x.kthvalue(2)
    return {e.key for e in p.key_averages()}


def test_profiler_names_the_sorting_ops():
    want = {"aten::sort", "aten::topk", "aten::kthvalue"}
    x = _values((3, 5), "random")
    assert want <= _profiler_rows(torch, torch.tensor(x, requires_grad=True))
    assert want <= _profiler_rows(ember, ember.tensor(x, requires_grad=True))
