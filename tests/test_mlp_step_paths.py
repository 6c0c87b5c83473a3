"""The short paths of an MLP's training step against the general ones and torch 2.13:
``cross_entropy``'s two nodes made directly (the same nodes, edges, saved output and
values as ``LogSoftmax.apply`` then ``NllLoss.apply``), relu's gradient on small arrays
(bit-equal to torch's ``threshold_backward``) and ``ReluBackward0`` on arrays."""
import numpy as np
import pytest
import torch

import ember
from ember.ops import losses as ember_losses
from ember.ops.activations import _relu_grad_array
from ember.ops.softmaxes import LogSoftmax


def _scores(dtype, n=128, c=10, special=False):
    x = np.random.default_rng(3).standard_normal((n, c)).astype(dtype) * 3
    if special:
        x[0, 0], x[1, :] = np.inf, -np.inf
        x[2, 3] = np.nan
    return x


def _nodes(t):
    fn = t.grad_fn
    out = []
    while fn is not None:
        d = {k: v for k, v in vars(fn).items() if k not in ("_edges", "_saved")}
        out.append((type(fn).__name__, fn._n_in if "_n_in" in vars(fn) else None,
                    [None if e is None else (type(e[0]).__name__, e[1]) if type(e) is tuple
                     else "leaf" for e in fn._edges], type(fn._edges).__name__, sorted(d)))
        nxt = [e for e in fn._edges if type(e) is tuple]
        fn = nxt[0][0] if nxt else None
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index", [-100, 3])
def test_cross_entropy_nodes_as_the_applies(dtype, reduction, ignore_index):
    xs = _scores(dtype)
    ys = np.random.default_rng(4).integers(0, 10, 128)
    res = []
    for direct in (True, False):
        x = ember.tensor(xs, requires_grad=True)
        h = x * 1
        t = ember.tensor(ys)
        if direct:
            loss = ember.nn.functional.cross_entropy(h, t, ignore_index=ignore_index,
                                                     reduction=reduction)
        else:
            loss = ember_losses.NllLoss.apply(LogSoftmax.apply(h, 1), t, None,
                                              ignore_index, reduction)
        nodes = _nodes(loss)
        saved = loss.grad_fn.next_functions[0][0]._saved
        assert len(saved) == 1 and len(saved[0]) == 5
        loss.sum().backward() if reduction == "none" else loss.backward()
        res.append((loss.detach().numpy(), x.grad.numpy(), nodes,
                    [(n.name(), i) for n, i in
                     [(f, i) for f, i in loss.grad_fn.next_functions if f is not None]]))
    (l1, g1, n1, e1), (l2, g2, n2, e2) = res
    assert np.array_equal(l1, l2, equal_nan=True)
    assert np.array_equal(g1, g2, equal_nan=True)
    assert n1 == n2 and e1 == e2
    # and torch's values and graph
    tx = torch.tensor(xs, requires_grad=True)
    tl = torch.nn.functional.cross_entropy(tx * 1, torch.tensor(ys), ignore_index=ignore_index,
                                           reduction=reduction)
    (tl.sum() if reduction == "none" else tl).backward()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(l1, tl.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(g1, tx.grad.numpy(), rtol=tol, atol=tol)
    assert [(f.name(), i) for f, i in tl.grad_fn.next_functions if f is not None] == e1
    assert tl.grad_fn.name() == n1[0][0]


def test_cross_entropy_special_values_and_errors_as_torch():
    xs = _scores(np.float32, special=True)
    ys = np.arange(128) % 10
    x, tx = ember.tensor(xs, requires_grad=True), torch.tensor(xs, requires_grad=True)
    a = ember.nn.functional.cross_entropy(x, ember.tensor(ys))
    b = torch.nn.functional.cross_entropy(tx, torch.tensor(ys))
    assert np.isnan(a.item()) and np.isnan(b.item())
    a.backward()
    b.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    bad = ys.copy()
    bad[5] = 10
    for m, err in ((torch, IndexError), (ember, IndexError)):
        with pytest.raises(err, match="out of bounds"):
            m.nn.functional.cross_entropy(m.tensor(xs, requires_grad=True), m.tensor(bad))


def test_cross_entropy_watched_graphs_take_the_applies():
    xs = _scores(np.float32)
    ys = np.arange(128) % 10
    # under saved-tensor hooks the nodes are the applies' (what they pack, the values)
    res = []
    for direct in (True, False):
        packed = []

        def pack(t, packed=packed):
            packed.append(tuple(t.shape))
            return t
        x = ember.tensor(xs, requires_grad=True)
        with ember.autograd.graph.saved_tensors_hooks(pack, lambda p: p):
            if direct:
                loss = ember.nn.functional.cross_entropy(x, ember.tensor(ys))
            else:
                loss = ember_losses.NllLoss.apply(LogSoftmax.apply(x, 1), ember.tensor(ys),
                                                  None, -100, "mean")
        loss.backward()
        res.append((packed, x.grad.numpy()))
    # log_softmax's result; nll_loss's input, target and total weight (torch's packs)
    assert res[0][0] == res[1][0] == [(128, 10), (128, 10), (128,), ()]
    assert np.array_equal(res[0][1], res[1][1])
    # under no_grad: a value, no graph
    with ember.no_grad():
        v = ember.nn.functional.cross_entropy(ember.tensor(xs, requires_grad=True),
                                              ember.tensor(ys))
    assert v.grad_fn is None and not v.requires_grad


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(64, 64), (128, 128), (128, 256), (100, 300)])
def test_relu_grad_small_arrays_bit_equal_to_threshold_backward(dtype, shape):
    rng = np.random.default_rng(5)
    g = rng.standard_normal(shape).astype(dtype)
    y = np.maximum(rng.standard_normal(shape), 0).astype(dtype)
    g.flat[:6] = [np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0]
    y.flat[:12] = [1, 1, 1, 1, 1, 1, np.nan, -np.nan, 0.0, -0.0, np.inf, 0]
    got = _relu_grad_array(g, y)
    want = torch.ops.aten.threshold_backward(torch.from_numpy(g), torch.from_numpy(y), 0)
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[g.itemsize]
    assert got.dtype == g.dtype and got.shape == g.shape
    assert np.array_equal(got.view(bits), want.numpy().view(bits))


def test_relu_backward_on_arrays_as_torch():
    xs = np.random.default_rng(6).standard_normal((128, 256)).astype(np.float32)
    xs[0, :4] = [0.0, -0.0, np.nan, np.inf]
    res = []
    for m in (torch, ember):
        x = m.tensor(xs, requires_grad=True)
        lin = m.tensor(np.linspace(-1, 1, 256, dtype=np.float32))
        (m.relu(x * 1) * lin).sum().backward()
        res.append(x.grad.numpy())
    assert np.array_equal(res[0].view(np.int32), res[1].view(np.int32))
    # a changed output still raises
    x = ember.tensor(xs, requires_grad=True)
    y = ember.relu(x * 1)
    loss = y.sum()
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_loss_backward_on_arrays_bit_equal_to_tensor_ops(dtype, reduction):
    # NllLossBackward0 and LogSoftmaxBackward0 on arrays (a first-order backward())
    # against their Tensor-op formulas (create_graph=True), and close to torch
    xs = _scores(dtype)
    ys = np.arange(128) % 10
    ys[3] = 4
    grads = []
    for create in (False, True):
        x = ember.tensor(xs, requires_grad=True)
        loss = ember.nn.functional.cross_entropy(x * 2, ember.tensor(ys), ignore_index=4,
                                                 reduction=reduction)
        w = ember.tensor(np.linspace(0.5, 1.5, loss.numel()).reshape(loss.shape).astype(dtype))
        g, = ember.autograd.grad((loss * w).sum(), x, create_graph=create)
        grads.append(g.detach().numpy())
    assert np.array_equal(grads[0], grads[1])
    tx = torch.tensor(xs, requires_grad=True)
    tl = torch.nn.functional.cross_entropy(tx * 2, torch.tensor(ys), ignore_index=4,
                                           reduction=reduction)
    tw = torch.tensor(np.linspace(0.5, 1.5, tl.numel()).reshape(tl.shape).astype(dtype))
    (tl * tw).sum().backward()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(grads[0], tx.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_log_softmax_backward_on_arrays_bit_equal_to_tensor_ops(dim):
    xs = np.random.default_rng(8).standard_normal((4, 5, 6)).astype(np.float32)
    grads = []
    for create in (False, True):
        x = ember.tensor(xs, requires_grad=True)
        y = ember.log_softmax(x * 1, dim)
        w = ember.tensor(np.linspace(-1, 1, 120, dtype=np.float32).reshape(4, 5, 6))
        g, = ember.autograd.grad((y * w).sum(), x, create_graph=create)
        grads.append(g.detach().numpy())
    assert np.array_equal(grads[0], grads[1])
    tx = torch.tensor(xs, requires_grad=True)
    (torch.log_softmax(tx * 1, dim) * torch.linspace(-1, 1, 120).reshape(4, 5, 6)).sum() \
        .backward()
    np.testing.assert_allclose(grads[0], tx.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("layout", ["broadcast", "transposed_g", "transposed_y", "both"])
def test_relu_grad_of_non_contiguous_arrays_bit_equal_to_threshold_backward(dtype, layout):
    # a gradient broadcast from a sum (stride 0) or transposed: copied to C order first
    rng = np.random.default_rng(9)
    y = np.maximum(rng.standard_normal((96, 128)), 0).astype(dtype)
    y.flat[:6] = [np.nan, -np.nan, 0.0, -0.0, np.inf, 1]
    g = rng.standard_normal((96, 128)).astype(dtype)
    g.flat[:3] = [np.inf, -np.inf, np.nan]
    if layout == "broadcast":
        g = np.broadcast_to(np.asarray(-1.5, dtype), y.shape)
    if layout in ("transposed_g", "both"):
        g = np.ascontiguousarray(g.T).T
    if layout in ("transposed_y", "both"):
        y = np.ascontiguousarray(y.T).T
    got = _relu_grad_array(g, y)
    want = torch.ops.aten.threshold_backward(torch.from_numpy(np.array(g)),
                                             torch.from_numpy(np.array(y)), 0)
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[got.itemsize]
    assert got.dtype == np.dtype(dtype) and got.shape == y.shape
    assert np.array_equal(np.ascontiguousarray(got).view(bits), want.numpy().view(bits))


def test_relu_then_sum_backward_as_torch():
    xs = np.random.default_rng(10).standard_normal((64, 128)).astype(np.float32)
    xs[0, :3] = [0.0, -0.0, np.nan]
    res = []
    for m in (torch, ember):
        x = m.tensor(xs, requires_grad=True)
        m.relu(x).sum().backward()
        res.append(x.grad.numpy())
    assert np.array_equal(res[0].view(np.int32), res[1].view(np.int32))
