"""The engine's short path for ``backward()`` (``ember.autograd.engine``): nodes without
hooks pass their gradients on as NumPy arrays (``Node._array_grads``) and a Tensor is
made only where one is needed. Against the Tensor-op path (taken with ``create_graph``)
bit for bit and against torch 2.13: the leaves' gradients, what hooks and saved-tensor
hooks see, gradients that must not share memory, and the errors."""
import numpy as np
import pytest
import torch

import ember
from ember.ops.arithmetic import Mul

RNG = np.random.default_rng(1)

# name -> (function of two leaves, input range); every case goes through ``backward()``
CASES = {
    "chain": (lambda m, x, w: (m.tanh(m.sin(x * w + w)) - w).exp() / 3.0, (-1, 1)),
    "sub": (lambda m, x, w: (x - w) * w, (-2, 2)),
    "mul number": (lambda m, x, w: m.sin(x * 2.5) * w * 0.1, (-2, 2)),
    "sub number": (lambda m, x, w: m.sin(x - 1.5) * w, (-2, 2)),
    "div": (lambda m, x, w: m.exp(x / w) / w, (0.5, 2)),
    "used twice": (lambda m, x, w: m.sin(x * w) * m.exp(x * w) + m.tanh(x * w), (-1, 1)),
    "cos log neg": (lambda m, x, w: -m.log(m.cos(x) + 2.0) * m.sigmoid(w), (-1, 1)),
    "add of arrays": (lambda m, x, w: m.sin(x) + m.exp(w), (-1, 1)),
}
# the cases whose gradients are correctly rounded products, quotients and differences in
# both libraries: bit-equal to torch
EXACT = {"sub"}


def _leaf_grads(m, case, arrays, shape_g, create_graph=False, times=1):
    f = CASES[case][0]
    x, w = (m.tensor(a, requires_grad=True) for a in arrays)
    for _ in range(times):  # a second pass adds into the .grad of the first
        out = f(m, x, w)
        g = m.tensor(np.linspace(-1, 1, out.numel()).reshape(shape_g)
                     .astype(arrays[0].dtype))
        out.backward(g, create_graph=create_graph)
    return [t.grad.detach().numpy() for t in (x, w)]


@pytest.mark.parametrize("shape", [(3, 5), ()])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("case", list(CASES))
def test_backward_is_bit_equal_to_the_tensor_ops_and_matches_torch(case, dtype, shape):
    lo, hi = CASES[case][1]
    arrays = [np.asarray(RNG.uniform(lo, hi, shape)).astype(dtype) for _ in range(2)]
    for times in (1, 2):
        fast = _leaf_grads(ember, case, arrays, shape, times=times)
        slow = _leaf_grads(ember, case, arrays, shape, create_graph=True, times=times)
        want = _leaf_grads(torch, case, arrays, shape, times=times)
        for f, s, w in zip(fast, slow, want):
            assert f.dtype == s.dtype == w.dtype and f.shape == w.shape
            np.testing.assert_array_equal(f, s)
            if case in EXACT and dtype != np.float16:
                np.testing.assert_array_equal(f, w)
            else:
                tol = {np.float16: 4e-3, np.float32: 4e-6, np.float64: 1e-12}[dtype]
                np.testing.assert_allclose(f.astype(np.float64), w.astype(np.float64),
                                           rtol=tol, atol=tol)


def test_a_gradient_passed_through_is_not_the_users_grad_output():
    """``x - c`` passes its gradient on unchanged: the leaf's ``.grad`` is a copy of the
    grad_output, not the same memory (as torch's AccumulateGrad copies what others hold)."""
    for m in (ember, torch):
        x = m.tensor(np.ones(4, np.float32), requires_grad=True)
        g = m.tensor(np.arange(4, dtype=np.float32))
        (x - 2.0).backward(g)
        with m.no_grad():
            g.add_(10)
        np.testing.assert_array_equal(x.grad.numpy(), np.arange(4, dtype=np.float32))


def test_two_leaves_never_share_one_gradient():
    """An ``add`` after an array formula hands one Tensor to both operands; their
    ``.grad`` are two tensors, and so are the two of a difference."""
    for m in (ember, torch):
        a = m.tensor(np.ones(3, np.float32), requires_grad=True)
        b = m.tensor(np.ones(3, np.float32), requires_grad=True)
        m.sin(a + b).sum().backward()
        c = m.tensor(np.ones(3, np.float32), requires_grad=True)
        d = m.tensor(np.ones(3, np.float32), requires_grad=True)
        (m.exp(c) - d).sum().backward()
        before = [t.grad.numpy().copy() for t in (a, b, c, d)]
        with m.no_grad():
            a.grad.add_(1)
            d.grad.add_(1)
        np.testing.assert_array_equal(a.grad.numpy(), before[0] + 1)
        np.testing.assert_array_equal(b.grad.numpy(), before[1])
        np.testing.assert_array_equal(c.grad.numpy(), before[2])
        np.testing.assert_array_equal(d.grad.numpy(), before[3] + 1)
        np.testing.assert_array_equal(before[3], -np.ones(3, np.float32))


def test_hooks_in_the_middle_of_an_array_chain_see_tensors():
    """A retained gradient and a tensor hook between nodes that pass arrays see Tensors
    of torch's values; what the hook returns is what flows on."""
    got = []
    x0 = RNG.uniform(-1, 1, 5).astype(np.float32)
    for m in (ember, torch):
        x = m.tensor(x0, requires_grad=True)
        y = m.sin(x * 2.0)
        y.retain_grad()
        seen = []
        y.register_hook(lambda g, seen=seen: (seen.append(type(g).__name__), g * 3.0)[1])
        m.exp(m.tanh(y)).sum().backward()
        got.append((seen, y.grad.numpy(), x.grad.numpy()))
    (es, ey, ex), (ts, ty, tx) = got
    assert es == ts == ["Tensor"]
    np.testing.assert_allclose(ey, ty, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(ex, tx, rtol=2e-6, atol=1e-7)


def test_saved_tensor_hooks_unpack_as_often_as_torchs():
    counts = []
    x0 = RNG.uniform(0.5, 1, 4).astype(np.float32)
    for m in (ember, torch):
        n = [0, 0]

        def pack(t, n=n):
            n[0] += 1
            return t

        def unpack(t, n=n):
            n[1] += 1
            return t
        x = m.tensor(x0, requires_grad=True)
        w = m.tensor(x0 + 1, requires_grad=True)
        with m.autograd.graph.saved_tensors_hooks(pack, unpack):
            out = (m.sin(x * w) / w).exp().sum()
        out.backward()
        counts.append((n, x.grad.numpy()))
    assert counts[0][0] == counts[1][0]
    np.testing.assert_allclose(counts[0][1], counts[1][1], rtol=2e-6)


def test_a_node_with_its_own_backward_does_not_inherit_the_array_form():
    """A subclass that writes ``backward`` has no ``_array_grads`` of its parent's."""
    class Twice(Mul):
        def backward(self, gy):
            a, b = self.saved_tensors
            return gy * b * 2, gy * a * 2

    assert Mul._array_grads is not None and Twice._array_grads is None
    x = ember.tensor(np.ones(3, np.float32), requires_grad=True)
    w = ember.tensor(np.full(3, 5.0, np.float32), requires_grad=True)
    ember.sin(Twice.apply(x, w) * 1.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.cos(np.float32(5)) * 10)


def test_errors_and_anomaly_mode_as_before():
    """A saved value changed in place between nodes that pass arrays, and a nan caught
    by anomaly mode, raise torch's errors."""
    for m in (ember, torch):
        x = m.tensor(np.ones(3, np.float32), requires_grad=True)
        y = m.exp(x * 2.0)
        z = m.sin(y) * y
        with m.no_grad():
            y.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.sum().backward()
        x = m.tensor(np.full(3, -1.0, np.float32), requires_grad=True)
        with pytest.warns(UserWarning):
            with m.autograd.detect_anomaly():
                with pytest.raises(RuntimeError, match="returned nan values"):
                    m.sqrt(m.sin(x) * 0.0 - 1.0).sum().backward()


@pytest.mark.parametrize("short_first", [True, False])
def test_a_sum_of_an_array_and_a_tensor_from_the_general_path(short_first):
    # ``sqrt``'s gradient arrives twice: as an array from ``y * 2`` (the short path) and
    # as a Tensor from a broadcasting add (the general path), in either order. (sqrt, not
    # exp: sqrt is correctly rounded on every CPU, while NumPy's and torch's float64 exp
    # differ in the last bit on AVX2 machines, which is not what this test is about.)
    def grads(m):
        a = m.tensor(np.linspace(0.25, 4, 12).reshape(3, 4), requires_grad=True)
        b = m.tensor(np.linspace(0, 1, 4), requires_grad=True)
        y = a.sqrt()
        z1, z2 = (y * 2.0).sum(), (y + b).sum()
        (z1 + z2 if short_first else z2 + z1).backward()
        return a.grad.numpy(), b.grad.numpy()

    for e, t in zip(grads(ember), grads(torch)):
        np.testing.assert_array_equal(e, t)


_NODE_CASES = {
    # name -> (function of the leaves x (2, 5, 8) and w (8,), the node class)
    # (with a weight the node's inputs broadcast: the engine's general path, ``backward``)
    "layer_norm_no_affine": (lambda m, x, w: m.nn.functional.layer_norm(x * w, (5, 8)).exp(),
                             "normalization._LayerNorm"),
    "layer_norm_last_dim": (lambda m, x, w: m.nn.functional.layer_norm(x.sin() * w, (8,)).tanh(),
                            "normalization._LayerNorm"),
    "mse_mean": (lambda m, x, w: m.nn.functional.mse_loss(x.sin() * w, x.cos()),
                 "losses.MseLoss"),
    "mse_sum": (lambda m, x, w: m.nn.functional.mse_loss(x * w, x.detach(), reduction="sum"),
                "losses.MseLoss"),
    "mse_none": (lambda m, x, w: m.nn.functional.mse_loss(x * w, x.exp(), reduction="none")
                 .sin(), "losses.MseLoss"),
}


def _node_class(path):
    import importlib
    mod, cls = path.split(".")
    return getattr(importlib.import_module("ember.ops." + mod), cls)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(_NODE_CASES))
def test_layer_norm_and_mse_nodes_on_arrays(case, dtype, monkeypatch):
    """Layer norm's and ``mse_loss``'s nodes run their no-graph backward on the arrays
    (``_array_grads``): bit for bit what ``backward`` gives, close to torch."""
    f, path = _NODE_CASES[case]
    cls = _node_class(path)
    rng = np.random.default_rng(3)
    arrays = [rng.uniform(-1, 1, (2, 5, 8)).astype(dtype), rng.uniform(0.5, 1.5, 8).astype(dtype)]

    def grads(m):
        x, w = (m.tensor(a, requires_grad=True) for a in arrays)
        out = f(m, x, w)
        out.backward(m.ones_like(out) if out.dim() else None)
        return [t.grad.numpy().copy() for t in (x, w)]
    taken = []
    orig = cls._array_grads

    def spy(self, gy, g):
        r = orig(self, gy, g)
        taken.append(r is not None)
        return r
    monkeypatch.setattr(cls, "_array_grads", spy)
    fast = grads(ember)
    monkeypatch.setattr(cls, "_array_grads", None)  # the engine calls ``backward``
    slow = grads(ember)
    monkeypatch.undo()
    want = grads(torch)
    assert taken and all(taken)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for a, b, c in zip(fast, slow, want):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=tol, atol=tol)


def test_layer_norm_and_mse_nodes_check_their_saved_inputs():
    """A saved input changed in place still raises; saved-tensor hooks still see it."""
    for m in (ember, torch):
        x = m.ones(3, 4, requires_grad=True) * 1.0
        t = m.zeros(3, 4)
        loss = m.nn.functional.mse_loss(x, t)
        with m.no_grad():
            x.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()
        y = m.ones(3, 4, requires_grad=True) * 1.0
        packed = []
        with m.autograd.graph.saved_tensors_hooks(lambda a, p=packed: p.append(1) or a,
                                                  lambda a: a):
            out = m.nn.functional.layer_norm(y, (4,)).sum()
        out.backward()
        assert packed

def _cell_loop_grads(m, dtype, steps=6, relu=False):
    """An RNNCell loop (the nodes ``cell_graph.elman_step`` makes: AddmmBackward0 x2,
    TBackward0 x2, AddBackward0, TanhBackward0) and a linear over its last state, input
    and first state requiring grad: every parameter's and input's gradient, the names
    along the graph."""
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((steps, 20, 6)).astype(dtype)
    h0 = rng.standard_normal((20, 8)).astype(dtype)
    m.manual_seed(0)
    cell = m.nn.RNNCell(6, 8, nonlinearity="relu" if relu else "tanh",
                        dtype=getattr(m, np.dtype(dtype).name))
    head = m.nn.Linear(8, 3, dtype=getattr(m, np.dtype(dtype).name))
    head.bias.requires_grad_(False)  # an Addmm without a bias edge
    params = [rng.standard_normal(tuple(p.shape)).astype(dtype) * 0.3
              for p in list(cell.parameters()) + [head.weight, head.bias]]
    with m.no_grad():
        for p, a in zip(list(cell.parameters()) + [head.weight, head.bias], params):
            p.copy_(m.from_numpy(a))
    x = m.tensor(xs, requires_grad=True)
    h_first = h = m.tensor(h0, requires_grad=True)
    for t in range(steps):
        h = cell(x[t], h)
    out = head(h).pow(2).sum()
    names = []
    fn = h.grad_fn
    while fn is not None:
        names.append(fn.name())
        nxt = [f for f, _ in fn.next_functions if f is not None and f.name() !=
               "AccumulateGrad" and f.name() != "TBackward0"]
        fn = nxt[0] if nxt else None
    out.backward()
    grads = [x.grad, h_first.grad] + list(cell.parameters()) + [head.weight]
    grads = grads[:2] + [p.grad for p in grads[2:]]
    assert head.bias.grad is None
    return [g.detach().numpy().copy() for g in grads], names, \
        [p.grad for p in cell.parameters()] + [head.weight.grad]


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_nodes_pass_arrays_bit_equal_to_their_tensor_backward(dtype, relu,
                                                                    monkeypatch):
    """``AddmmBackward0`` and linear's ``TBackward0`` hand arrays on (``_array_grads``):
    the gradients equal, bit for bit, those of the nodes' ``backward`` on Tensors, the
    weights' ``.grad`` own row-major memory, the graph's names are torch's."""
    from ember.ops import matmul_graph
    used = []
    array_grads = matmul_graph.Addmm._array_grads
    monkeypatch.setattr(matmul_graph.Addmm, "_array_grads",
                        lambda self, gy, g: used.append(1) or array_grads(self, gy, g))
    fast, names, leaves = _cell_loop_grads(ember, dtype, relu=relu)
    assert used  # the array form ran
    for g in leaves:
        assert g._data.flags.c_contiguous and g._data.base is None
    monkeypatch.setattr(matmul_graph.Addmm, "_array_grads", None)
    monkeypatch.setattr(matmul_graph.WeightT, "_array_grads", None)
    slow, names_slow, _ = _cell_loop_grads(ember, dtype, relu=relu)
    want, names_torch, _ = _cell_loop_grads(torch, dtype, relu=relu)
    assert names == names_slow == names_torch
    assert len(fast) == len(slow) == len(want)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10,
                                                                      atol=1e-12)
    for f, s, w in zip(fast, slow, want):
        np.testing.assert_array_equal(f, s)
        np.testing.assert_allclose(f, w, **tol)


def test_large_linear_arrays_bit_equal_to_the_tensor_backward(monkeypatch):
    """A linear too large for the short products (``gemm.matmul``'s dispatch) passes
    arrays too, with the same bits as its Tensor backward."""
    from ember.ops import matmul_graph
    rng = np.random.default_rng(4)
    xa = rng.standard_normal((300, 200)).astype(np.float32)
    wa = rng.standard_normal((256, 200)).astype(np.float32)
    ba = rng.standard_normal(256).astype(np.float32)
    got = []
    for off in (False, True):
        if off:
            monkeypatch.setattr(matmul_graph.Addmm, "_array_grads", None)
            monkeypatch.setattr(matmul_graph.WeightT, "_array_grads", None)
        x, w, b = (ember.tensor(a, requires_grad=True) for a in (xa, wa, ba))
        ember.tanh(ember.nn.functional.linear(x, w, b)).sum().backward()
        got.append([t.grad.numpy().copy() for t in (x, w, b)])
    for f, s in zip(*got):
        np.testing.assert_array_equal(f, s)
    x, w, b = (torch.tensor(a, requires_grad=True) for a in (xa, wa, ba))
    torch.tanh(torch.nn.functional.linear(x, w, b)).sum().backward()
    for f, t in zip(got[0], (x, w, b)):
        np.testing.assert_allclose(f, t.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_linear_input_changed_in_place_raises_as_torch():
    """The array form reads its saved inputs only when unchanged: an input modified in
    place after ``linear`` saved it raises torch's error."""
    msgs = []
    for m in (ember, torch):
        x = m.tensor(np.ones((4, 3), np.float32))
        w = m.tensor(np.ones((5, 3), np.float32), requires_grad=True)
        b = m.tensor(np.zeros(5, np.float32), requires_grad=True)
        y = m.tanh(m.nn.functional.linear(x, w, b))
        with m.no_grad():
            x.add_(1)
        with pytest.raises(RuntimeError) as e:
            y.sum().backward()
        msgs.append(str(e.value))
    assert "modified by an inplace operation" in msgs[0]
    assert "modified by an inplace operation" in msgs[1]


_SHAPED_CASES = {
    # name -> (function of the leaves x (6, 8) and w (8,), class path, torch-tolerance
    # scale): nodes whose inputs broadcast but whose gradients come in the inputs' shapes
    # (``Node._grads_in_input_shapes``): the engine's short path takes them
    "layer_norm_affine": (lambda m, x, w: m.nn.functional.layer_norm(
        x.sin() * 1.5, (8,), w, w.cos()).tanh(), "normalization._LayerNorm"),
    "layer_norm_weight_only": (lambda m, x, w: m.nn.functional.layer_norm(
        x.reshape(2, 3, 8), (3, 8), w.expand(3, 8) * 1.0).exp(), "normalization._LayerNorm"),
    "group_norm_affine": (lambda m, x, w: m.nn.functional.group_norm(
        x.reshape(3, 8, 2) * 2.0, 4, w, w * 0.5).sin(), "normalization._GroupNorm"),
    "mm": (lambda m, x, w: m.tanh(x @ m.stack([w, w.cos(), w.sin()], 1)), "linalg.Mm"),
    "mv": (lambda m, x, w: m.sin(m.mv(x * 2.0, w)), "linalg.Mv"),
    "dot": (lambda m, x, w: m.dot(x[1] * 1.0, w.exp()).reshape(1).sin(), "linalg.Dot"),
    "bmm": (lambda m, x, w: m.bmm(x.reshape(2, 3, 8), m.stack([w, w.cos(), w.sin()], 1)
                                  .expand(2, 8, 3)).exp(), "linalg.Bmm"),
}


def _shaped_grads(m, case, arrays, dtype=None):
    f = _SHAPED_CASES[case][0]
    x, w = (m.tensor(a, requires_grad=True) for a in arrays)
    out = f(m, x, w)
    out.backward(m.ones_like(out))
    return [t.grad.numpy().copy() for t in (x, w)], out.grad_fn


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("case", list(_SHAPED_CASES))
def test_nodes_with_gradients_in_their_inputs_shapes_take_the_short_path(case, dtype,
                                                                         monkeypatch):
    """Layer and group norm with weights, ``mm``, ``mv``, ``dot``, ``bmm``: their nodes
    record their inputs' shapes (the inputs broadcast) but take the engine's short path,
    nothing summed back; the gradients bit for bit those of the general path, close to
    torch, in the leaves' dtypes."""
    import ember.autograd.engine as engine
    cls = _node_class(_SHAPED_CASES[case][1])
    assert cls._grads_in_input_shapes
    if dtype == np.float16 and cls.__name__ in ("MmBackward0", "MvBackward0", "DotBackward0",
                                                "BmmBackward0"):
        dtype = np.float64  # (products of float16 are not this test's subject)
    rng = np.random.default_rng(5)
    arrays = [rng.uniform(-1, 1, (6, 8)).astype(dtype), rng.uniform(0.5, 1.5, 8).astype(dtype)]
    restored = []
    orig = engine._restore_meta

    def spy(g, meta):
        restored.append(meta)
        return orig(g, meta)
    monkeypatch.setattr(engine, "_restore_meta", spy)
    fast, fn = _shaped_grads(ember, case, arrays)
    n_fast = len(restored)
    monkeypatch.setattr(cls, "_grads_in_input_shapes", False)  # the general path
    slow, _ = _shaped_grads(ember, case, arrays)
    monkeypatch.undo()
    want, _ = _shaped_grads(torch, case, arrays)
    assert len(restored) > n_fast  # the general path ran ``_restore_meta``; the short not
    if dtype != np.float16:
        assert n_fast == 0
    for a, b, c in zip(fast, slow, want):
        assert a.dtype == b.dtype == c.dtype == dtype and a.shape == c.shape
        np.testing.assert_array_equal(a, b)
        tol = {np.float16: 2e-2, np.float32: 3e-5, np.float64: 1e-12}[dtype]
        np.testing.assert_allclose(a.astype(np.float64), c.astype(np.float64), rtol=tol,
                                   atol=tol)


def test_a_shaped_node_whose_gradient_differs_is_summed_back():
    """The short path checks each gradient of such a node against its input's shape and
    dtype: one that differs is summed back and cast as the general path does."""
    from ember.autograd.engine import _in_input_meta
    g = ember.ones(4, 3, dtype=ember.float64)
    a = np.ones((4, 3), np.float32)
    out = _in_input_meta((g, a, None), [((1, 3), np.dtype(np.float32)),
                                        ((4, 3), np.dtype(np.float32)), None])
    assert out[0].shape == (1, 3) and out[0].dtype == ember.float32
    np.testing.assert_array_equal(out[0].numpy(), np.full((1, 3), 4, np.float32))
    assert out[1] is a and out[2] is None


def test_hooks_on_a_shaped_node_see_what_torch_shows():
    """A hook on layer norm's node (the general path) and a tensor hook on its weight see
    torch's values."""
    seen = {}
    for m in (ember, torch):
        x = m.tensor(np.linspace(-1, 1, 24).reshape(3, 8).astype(np.float32),
                     requires_grad=True)
        w = m.tensor(np.linspace(0.5, 1.5, 8).astype(np.float32), requires_grad=True)
        out = m.nn.functional.layer_norm(x * 2.0, (8,), w, w * 0.1)
        got = []
        out.grad_fn.register_hook(lambda gi, go, got=got: got.append(
            [None if g is None else g.detach().numpy().copy() for g in gi]))
        w.register_hook(lambda g, got=got: got.append(g.numpy().copy()))
        (out * out).sum().backward()
        seen[m] = got
    a, b = seen[ember], seen[torch]
    assert len(a) == len(b)
    for p, q in zip(a, b):
        if isinstance(p, list):
            p = p[:3]  # (ember's node hook also lists the three non-Tensor arguments)
            assert [v is None for v in p] == [v is None for v in q]
            for u, v in zip(p, q):
                if u is not None:
                    np.testing.assert_allclose(u, v, rtol=3e-5, atol=3e-5)
        else:
            np.testing.assert_allclose(p, q, rtol=3e-5, atol=3e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", ["select", "slice", "viewed", "leaf"])
def test_selects_add_into_the_buffered_region(case, dtype, monkeypatch):
    """Gradients of selects and slices of one tensor (q, k, v split from one projection)
    are added into the region of the gradient already buffered, with no zeros of the
    input's size: the same bits as the zeros-and-write gradients summed, and torch's."""
    import ember.autograd.engine as engine
    rng = np.random.default_rng(8)
    pa = rng.standard_normal((3, 4, 5)).astype(dtype)

    def run(m):
        p = m.tensor(pa, requires_grad=True)
        base = p if case == "leaf" else p * 1.5
        if case == "select":
            parts = [base[0], base[1], base[2]]
        elif case == "slice":
            parts = [base[:, :2], base[:, 2:3], base[:, 1:]]
        else:  # a view's slice: its gradient reaches the buffer through the view's node
            parts = [base.view(60)[:20].view(4, 5), base[1], base[2]]
        out = (parts[0].sin() * parts[1].exp() + parts[2].tanh() * 2.0).sum() \
            if case != "slice" else (parts[0].sin().sum() + parts[1].exp().sum()
                                     + parts[2].tanh().sum())
        out.backward()
        return p.grad.numpy().copy()
    hits = []
    into = engine._into_region
    monkeypatch.setattr(engine, "_into_region", lambda *a: hits.append(into(*a)) or hits[-1])
    fast = run(ember)
    monkeypatch.setattr(engine, "_into_region", lambda *a: False)
    slow = run(ember)
    monkeypatch.undo()
    np.testing.assert_array_equal(fast, slow)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(fast, run(torch), rtol=tol, atol=tol)
    # (a leaf's gradients are summed by the engine's leaf buffers: no region to add into)
    assert hits.count(True) == {"select": 2, "slice": 2, "viewed": 1, "leaf": 0}[case]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("norm", ["layer", "batch", "group"])
def test_normalization_and_bias_gradients_reach_the_leaves_uncopied(norm, dtype, monkeypatch):
    """A layer norm's weight and bias gradients, and a bias broadcast over leading dims
    (``x @ w + b`` on 3-D input), are the kernels' own arrays, not views of them: the
    engine copies a view before it becomes a leaf's ``.grad``, so none is copied here
    (batch and group norm reshape theirs and keep doing so). Values as torch's; the
    leaves' gradients share no memory."""
    from ember.ops import conversion
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (3, 4, 6)).astype(dtype)
    w = rng.uniform(0.5, 1.5, (6, 6)).astype(dtype)

    def grads(m):
        xt = m.tensor(x, requires_grad=True)
        wt = m.tensor(w, requires_grad=True)
        b = m.tensor(np.linspace(-1, 1, 6).astype(dtype), requires_grad=True)
        if norm == "layer":
            mod = m.nn.LayerNorm(6).to(getattr(m, np.dtype(dtype).name))
            y = mod(xt @ wt + b)
        elif norm == "batch":
            mod = m.nn.BatchNorm1d(4).to(getattr(m, np.dtype(dtype).name))
            y = mod(xt @ wt + b)
        else:
            mod = m.nn.GroupNorm(2, 4).to(getattr(m, np.dtype(dtype).name))
            y = mod(xt @ wt + b)
        (y * y).sum().backward()
        leaves = [xt, wt, b, mod.weight, mod.bias]
        return [t.grad.numpy().copy() for t in leaves], leaves
    copies = []
    orig = conversion.Clone.forward

    def spy(self, a):
        copies.append(a.shape)
        return orig(self, a)
    monkeypatch.setattr(conversion.Clone, "forward", spy)
    got, leaves = grads(ember)
    monkeypatch.undo()
    # (6,): the layer norm's weight and bias and the bias ``b`` (the input's gradient
    # comes through the product's reshape as a view, and is copied as before)
    assert (6,) not in copies and copies
    want, _ = grads(torch)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for a, c in zip(got, want):
        np.testing.assert_allclose(a, c, rtol=tol, atol=tol)
    arrays = [t.grad._data for t in leaves]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            assert not np.shares_memory(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.bool_])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)), ((2, 3, 4), (1, 4)),
                                    ((2, 3, 4), (3, 1)), ((2, 1, 4), (1, 4)), ((5,), ()),
                                    ((0, 4), (4,)), ((2, 3), (2, 3))])
def test_sum_to_size_over_leading_dims_is_an_array_of_its_own(shapes, dtype):
    """``sum_to_size`` where only leading dims are summed returns the sum itself (no
    reshaped view); shapes, dtypes and values as torch's (exact for integers and for
    float32 sums that NumPy and torch add in one order here)."""
    src, to = shapes
    rng = np.random.default_rng(7)
    a = (rng.uniform(-3, 3, src) > 0 if dtype == np.bool_ else
         rng.integers(-4, 5, src).astype(dtype))
    e = ember.tensor(a).sum_to_size(to)
    t = torch.tensor(a).sum_to_size(to)
    assert tuple(e.shape) == tuple(t.shape) and str(e.dtype)[6:] == str(t.dtype)[6:]
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    lead = len(src) - len(to)
    if lead and to and tuple(src[lead:]) == tuple(to) and src != to:
        assert e._data.base is None
